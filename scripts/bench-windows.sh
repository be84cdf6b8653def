#!/usr/bin/env bash
# The platform bench (bench/platform.mjs) on Windows: node.exe under wine,
# with the addon and run-bg.exe scripts/test-windows.sh built and installed;
# then the process table's two readers (Toolhelp32, sysinfo) and `tasklist`
# timed inside Rust, where Node's share of a snapshot() does not hide their
# difference (an ignored test of the core, run under wine).
# Run `node bench/platform.mjs` on Linux for the same rows there.
#   scripts/bench-windows.sh [--runs=N]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/windows-env.sh || exit 2
if [ ! -f proc-manager.win32-x64-gnu.node ] || [ ! -f native/run-bg.exe ]; then
  echo "bench-windows: build first: scripts/test-windows.sh (it installs the Windows addon and run-bg.exe)" >&2
  exit 1
fi
PM_WINE_NODE_LOG=${PM_WINDOWS_ENV_DIR}/bench.log pm_wine_node bench/platform.mjs "$@" || exit
echo
cargo test --quiet --release --target x86_64-pc-windows-gnu -p proc-manager-core --lib process_table_readers_timed -- --ignored --nocapture \
  | grep '^|'

