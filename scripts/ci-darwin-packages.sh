#!/usr/bin/env bash
# CI: builds the macOS platform packages (npm/darwin-x64, npm/darwin-arm64)
# here on Linux with cargo-zigbuild, without Apple's SDK, and checks each
# without running it (build-target.mjs runs check-artifacts.mjs): thin
# Mach-O for the package's CPU, /usr/lib/libSystem.B.dylib and no other
# library, minimum macOS 11.0 (LC_BUILD_VERSION), a code signature (arm64), the
# addon's exported napi_register_module_v1 and nothing but napi_* left to
# dynamic lookup. Nothing of them runs: there is no macOS here. A failed
# build or check fails the run. The tools (the two rustup targets, zig,
# cargo-zigbuild) are scripts/install-cross-tools.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
for target in x86_64-apple-darwin aarch64-apple-darwin; do
  node scripts/build-target.mjs "$target"
done
echo "darwin packages: built and checked in $((SECONDS - started)) s"
