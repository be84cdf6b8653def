#!/usr/bin/env bash
# Loads a musl build of the addon with musl's own dynamic loader, as Node on
# Alpine would: dlopen with RTLD_NOW (every symbol resolved, constructors
# run), then look up the entry point Node calls. Node itself is not run; this
# machine has no musl build of it. Like the node executable, the loading
# program exports the Node-API functions the addon imports (here as stubs,
# never called: loading runs no Node-API call), so what must resolve from
# musl's libc still has to. Needs musl-gcc (Debian: musl-tools) and nm
# (binutils), and runs only an addon for this machine's architecture.
#
#   scripts/smoke-addon-musl.sh npm/linux-x64-musl/proc-manager.linux-x64-musl.node
set -euo pipefail
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 <addon.node> (a musl build for this machine's architecture)" >&2
  exit 2
fi
addon=$(realpath "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/load.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!handle) { fprintf(stderr, "dlopen failed: %s\n", dlerror()); return 1; }
  if (!dlsym(handle, "napi_register_module_v1")) { fprintf(stderr, "no napi_register_module_v1: %s\n", dlerror()); return 1; }
  return 0;
}
C
# The Node-API functions the addon imports, defined by the program and
# exported from it (-rdynamic), as node exports them.
nm -D --undefined-only "$addon" | awk '{print $NF}' | sed 's/@.*//' | grep -E '^(napi|node_api)_' | sort -u |
  while read -r symbol; do echo "void $symbol(void) {}"; done >>"$dir/load.c"
musl-gcc -rdynamic -o "$dir/load" "$dir/load.c"
if "$dir/load" "$addon"; then
  echo "smoke: $1 loads with musl's loader and exports napi_register_module_v1"
else
  echo "smoke: $1 does not load with musl's loader" >&2
  exit 1
fi
