#!/usr/bin/env bash
# Installs the agent harnesses the optional tests in __test__/harness-*.e2e.mjs
# drive for real (Claude Code, Codex, Gemini CLI, from the npm registry) into
# $PM_HARNESS_DIR (default ~/.cache/proc-manager-harnesses), where the tests
# look for them. Pinned versions: the tests read their hook contracts.
# Already there at these versions: nothing is fetched. Exit 2 when npm
# cannot install them (the tests then skip, saying why).
set -euo pipefail
dir="${PM_HARNESS_DIR:-$HOME/.cache/proc-manager-harnesses}"
packages=(@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0)
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"proc-manager-harnesses","private":true}' > package.json
have() {
  local name="${1%@*}" version="${1##*@}"
  [ "$(node -p "try { require('./node_modules/$name/package.json').version } catch { '' }")" = "$version" ]
}
missing=()
for package in "${packages[@]}"; do
  have "$package" || missing+=("$package")
done
if [ "${#missing[@]}" = 0 ]; then
  echo "harnesses: already installed in $dir"
  exit 0
fi
if ! npm install --no-audit --no-fund "${missing[@]}" >"$dir/install.log" 2>&1; then
  echo "harnesses: npm could not install ${missing[*]}; see $dir/install.log" >&2
  tail -20 "$dir/install.log" >&2
  exit 2
fi
echo "harnesses: installed ${missing[*]} in $dir"
