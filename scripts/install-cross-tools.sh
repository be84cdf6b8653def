#!/usr/bin/env bash
# Installs what scripts/build-target.mjs and the platform-package checks need
# on a Debian/Ubuntu machine, from the distribution, crates.io and PyPI only
# (no toolchain is downloaded from elsewhere). Run as root; idempotent.
#   zig (PyPI: ziglang) + cargo-zigbuild: cross-links every Linux target, the
#     glibc ones against glibc 2.17's symbol versions, and both macOS ones
#     (zig has libSystem's stubs: no Apple SDK);
#   qemu-user: runs the aarch64 builds' run-bg (the smoke test);
#   libc6-arm64-cross: the aarch64 glibc the emulated gnu build loads;
#   musl-tools: musl's loader and musl-gcc, to load the x64 musl addon.
set -euo pipefail

ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1

if [ "$(id -u)" != 0 ]; then
  echo "install-cross-tools: run as root (it installs Debian packages)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q qemu-user libc6-arm64-cross musl-tools binutils

rustup target add x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu \
  x86_64-unknown-linux-musl aarch64-unknown-linux-musl \
  x86_64-apple-darwin aarch64-apple-darwin

python3 -m pip install "ziglang==${ZIGLANG_VERSION}"
if [ "$(cargo-zigbuild -V 2>/dev/null)" != "cargo-zigbuild ${CARGO_ZIGBUILD_VERSION}" ]; then
  # PyPI's wheel carries the prebuilt binary: seconds, where `cargo install`
  # compiles it for minutes on two cores (CI's time). Copied next to cargo so
  # `cargo zigbuild` finds it whatever PATH pip's scripts folder is on.
  cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
  mkdir -p "$cargo_bin"
  scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  if python3 -m pip install "cargo-zigbuild==${CARGO_ZIGBUILD_VERSION}" \
    && "$scripts_dir/cargo-zigbuild" -V >/dev/null; then
    install -m 755 "$scripts_dir/cargo-zigbuild" "$cargo_bin/cargo-zigbuild"
  else
    echo "install-cross-tools: no cargo-zigbuild wheel; building it with cargo install" >&2
    cargo install cargo-zigbuild --locked --version "${CARGO_ZIGBUILD_VERSION}"
  fi
fi
cargo-zigbuild -V
