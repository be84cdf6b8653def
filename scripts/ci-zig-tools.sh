#!/usr/bin/env bash
# zig and cargo-zigbuild for scripts/build-target.mjs's Linux (and cross
# macOS) builds, without root: from PyPI into a virtual environment, at the
# versions scripts/install-cross-tools.sh pins (read from it: one place).
# What CI's Linux runners use; install-cross-tools.sh, which also installs
# qemu and the aarch64 libraries with apt as root, is .ci/run's.
#
#   scripts/ci-zig-tools.sh [venv dir]     (default ~/.cache/proc-manager-ci/zig-venv)
#
# Prints the venv's bin directory, which must come first on PATH (its
# python3 has ziglang, which cargo-zigbuild runs as `python3 -m ziglang`);
# on GitHub Actions it is added to GITHUB_PATH. Idempotent: a venv that
# already has both at these versions is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

pin() {
  local value
  value=$(sed -n "s/^$1=//p" scripts/install-cross-tools.sh)
  [ -n "$value" ] || { echo "ci-zig-tools: no $1= in scripts/install-cross-tools.sh" >&2; exit 1; }
  echo "$value"
}
zig_version=$(pin ZIGLANG_VERSION)
zigbuild_version=$(pin CARGO_ZIGBUILD_VERSION)
venv=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/proc-manager-ci/zig-venv}

have() {
  [ -x "$venv/bin/python3" ] \
    && [ "$("$venv/bin/python3" -m ziglang version 2>/dev/null)" = "$zig_version" ] \
    && [ "$("$venv/bin/cargo-zigbuild" -V 2>/dev/null)" = "cargo-zigbuild $zigbuild_version" ]
}

if ! have; then
  python3 -m venv "$venv" >&2
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
    "ziglang==$zig_version" "cargo-zigbuild==$zigbuild_version" >&2
  have || { echo "ci-zig-tools: ziglang $zig_version or cargo-zigbuild $zigbuild_version did not install into $venv" >&2; exit 1; }
fi
echo "ci-zig-tools: zig $zig_version, cargo-zigbuild $zigbuild_version in $venv" >&2
if [ -n "${GITHUB_PATH:-}" ]; then
  echo "$venv/bin" >>"$GITHUB_PATH"
fi
echo "$venv/bin"
