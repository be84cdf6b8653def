#!/usr/bin/env bash
# CI: builds the platform package of every Linux target into npm/<abi>/,
# checks each (architecture, glibc floor, static musl run-bg; in
# build-target.mjs) and runs each run-bg's smoke test, the aarch64 ones under
# qemu-aarch64. One target at a time: each build is a full release build.
set -euo pipefail
cd "$(dirname "$0")/.."

for target in x86_64-unknown-linux-gnu x86_64-unknown-linux-musl \
  aarch64-unknown-linux-gnu aarch64-unknown-linux-musl; do
  node scripts/build-target.mjs "$target"
done

scripts/smoke-run-bg.sh npm/linux-x64-gnu/native/run-bg
scripts/smoke-run-bg.sh npm/linux-x64-musl/native/run-bg
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu scripts/smoke-run-bg.sh npm/linux-arm64-gnu/native/run-bg qemu-aarch64
scripts/smoke-run-bg.sh npm/linux-arm64-musl/native/run-bg qemu-aarch64
scripts/smoke-addon-musl.sh npm/linux-x64-musl/proc-manager.linux-x64-musl.node

# The glibc x64 package as built here (glibc 2.17 symbols), packed with the
# root and MCP packages and installed offline without cargo on PATH: the
# README job, the API, check and the MCP server (as npm test does with the
# local build).
PROC_MANAGER_TEST_PLATFORM_DIR=npm/linux-x64-gnu node --test --test-concurrency=1 __test__/package.test.mjs
