#!/usr/bin/env bash
# CI: the Rust toolchain a runner builds with, from rustup (installed first
# if the image lacks it; not on Windows, whose images all have it).
#
#   scripts/setup-rust.sh <toolchain> [target...]
#
# e.g. `stable` with the musl target on Linux, or on Windows
# `stable-x86_64-pc-windows-gnu`: the published Windows package is
# x86_64-pc-windows-gnu, and with the GNU host toolchain every crate, build
# scripts included, is built by that one ABI, and plain `cargo build` or
# `cargo test` on the runner build what is shipped. Installs clippy, makes
# the toolchain the default and prints `rustc -vV`. On GitHub Actions a fresh
# rustup's bin directory is added to GITHUB_PATH.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 <toolchain> [target...]" >&2
  exit 2
fi
toolchain=$1
shift

if ! command -v rustup >/dev/null 2>&1; then
  case "$(uname -s)" in
    MINGW* | MSYS* | CYGWIN*)
      echo "setup-rust: no rustup on PATH; install it from https://rustup.rs" >&2
      exit 1
      ;;
  esac
  echo "setup-rust: no rustup on PATH; installing it from https://sh.rustup.rs" >&2
  curl --proto '=https' --tlsv1.2 --retry 5 -sSf https://sh.rustup.rs | sh -s -- -y --no-modify-path --default-toolchain none --profile minimal
  bin="${CARGO_HOME:-$HOME/.cargo}/bin"
  export PATH="$bin:$PATH"
  if [ -n "${GITHUB_PATH:-}" ]; then echo "$bin" >>"$GITHUB_PATH"; fi
fi

flags=(--profile minimal --component clippy)
case "$(uname -s)" in
  # The GNU host toolchain beside the image's MSVC one: it runs natively,
  # and this tells a rustup that doubts it so.
  MINGW* | MSYS* | CYGWIN*) flags+=(--force-non-host) ;;
esac
for t in "$@"; do flags+=(--target "$t"); done
rustup toolchain install "$toolchain" "${flags[@]}"
rustup default "$toolchain"
rustc -vV
