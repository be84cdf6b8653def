#!/usr/bin/env bash
# Checks that a built run-bg binary works as shipped: prints its version,
# starts a real job (which re-executes the binary as the job's supervisor),
# waits for it and reads its status and output back.
#
#   scripts/smoke-run-bg.sh <run-bg> [emulator]
#   QEMU_LD_PREFIX=/usr/aarch64-linux-gnu \
#     scripts/smoke-run-bg.sh npm/linux-arm64-gnu/native/run-bg qemu-aarch64
#
# A binary for another architecture runs under the emulator. Its job start
# re-executes it through the kernel, which runs a foreign binary only when
# binfmt_misc names an interpreter for it: if the machine has none, the
# script re-runs itself in a private user and mount namespace with its own
# binfmt_misc instance (Linux >= 6.7) that names the emulator. Where that is
# not permitted, only --version is checked and the job start is reported as
# skipped, saying why. A dynamically linked glibc binary finds its foreign
# libraries through QEMU_LD_PREFIX (qemu's -L), which the job start passes on.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 <run-bg> [emulator]" >&2
  exit 2
fi
bin=$1
emulator=${2:-}
if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
  echo "smoke: $bin is not an executable file" >&2
  exit 2
fi
fail() { echo "smoke: $bin: $*" >&2; exit 1; }

check_version() {
  local version
  version=$("$@" --version) || fail "--version exited $?"
  case $version in
    "run-bg "[0-9]*) echo "smoke: $version" ;;
    *) fail "--version printed '$version', expected 'run-bg <version>'" ;;
  esac
}

# A binfmt_misc entry for the binary's ELF machine, run by the emulator:
# ELF64, little-endian, an executable or a PIE.
register_binfmt() {
  local machine interpreter magic mask
  machine=$(od -An -tu2 -j18 -N2 "$bin" | tr -d ' ')
  interpreter=$(command -v "$emulator") || return 1
  magic=$(printf '\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\x%02x\\x%02x' $((machine & 255)) $((machine >> 8)))
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || return 1
  # F: the kernel opens the interpreter now, so it need not be visible later.
  printf ':smoke-run-bg:M::%s:%s:%s:F' "$magic" "$mask" "$interpreter" >/proc/sys/fs/binfmt_misc/register || return 1
}

# 126: the kernel refused to execute it (ENOEXEC, a foreign architecture).
direct=0
"$bin" --version >/dev/null 2>&1 || direct=$?
if [ "${SMOKE_RUN_BG_IN_NS:-}" = 1 ]; then
  register_binfmt || fail "cannot register $emulator in the private binfmt_misc"
elif [ "$direct" = 126 ]; then
  [ -n "$emulator" ] || fail "the kernel cannot execute it (a foreign architecture?); name an emulator"
  check_version "$emulator" "$bin"
  why=$(unshare --user --map-root-user --mount true 2>&1) || {
    echo "smoke: SKIPPED job start for $bin: the kernel cannot run it (no binfmt_misc entry) and no user namespace is permitted for a private one: $why" >&2
    exit 0
  }
  if ! unshare --user --map-root-user --mount sh -c 'mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc' 2>/dev/null; then
    echo "smoke: SKIPPED job start for $bin: the kernel cannot run it (no binfmt_misc entry) and has no binfmt_misc per user namespace (Linux >= 6.7; this is $(uname -r))" >&2
    exit 0
  fi
  echo "smoke: job start under $emulator through a private binfmt_misc"
  SMOKE_RUN_BG_IN_NS=1 exec unshare --user --map-root-user --mount "$0" "$bin" "$emulator"
fi

check_version "$bin"

home=$(mktemp -d)
job_pid=
cleanup() {
  # A job that outlived a failed check is ours: end it by its pid.
  if [ -n "$job_pid" ] && [ "$job_pid" -gt 1 ] && kill -0 "$job_pid" 2>/dev/null; then
    kill -KILL "$job_pid" 2>/dev/null || true
  fi
  rm -rf "$home"
}
trap cleanup EXIT
export PROC_MANAGER_HOME=$home
# Nothing listens for exit notifications here; without this the check output
# carries a pending-notification line and a spool file.
printf '{"notify": {"url": null}}\n' >"$home/config.json"

marker="smoke-$$-$RANDOM"
ack=$("$bin" --json --label smoke -- sh -c "echo $marker") || fail "job start exited $? (output: $ack)"
id=$(printf '%s' "$ack" | sed -n 's/.*"jobId":"\([^"]*\)".*/\1/p')
job_pid=$(printf '%s' "$ack" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
[ -n "$id" ] || fail "job start printed no jobId: $ack"

"$bin" wait "$id" --timeout 60s >/dev/null || fail "wait $id exited $?"
check=$("$bin" check "$id") || fail "check $id exited $?: $check"
printf '%s\n' "$check" | grep -q "success (exit 0)" || fail "check $id does not report success: $check"
printf '%s\n' "$check" | grep -qx "$marker" || fail "check $id does not show the job's output '$marker': $check"
echo "smoke: job $id ran and reported: $(printf '%s\n' "$check" | head -1)"
