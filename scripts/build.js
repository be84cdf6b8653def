#!/usr/bin/env node
// Builds the Rust core from source in a checkout (`npm run build`, and
// `npm test` first) and puts the two artifacts where index.js, the run-bg
// shim and the addon look first, ahead of any installed platform package:
//   proc-manager.<platform>.node   the Node addon (loaded by index.js)
//   native/run-bg                  the CLI, which is also each job's supervisor
//                                  (run-bg.exe on Windows)
//   native/run-bg-top              the live view `run-bg top` runs (a binary of
//                                  its own: the supervisor carries no terminal UI)
// Windows from Linux (x86_64-pc-windows-gnu under wine): scripts/test-windows.sh.
'use strict'
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.resolve(__dirname, '..')

function platformSuffix() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const glibc = process.report?.getReport?.().header?.glibcVersionRuntime
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  // The name index.js loads on win32-x64 (platform.js's abi()).
  if (platform === 'win32') return `win32-${arch}-gnu`
  return `${platform}-${arch}`
}

// The addon (crates/node), the CLI/supervisor (crates/cli), which links no
// napi, and the live view (crates/top).
const cargo = spawnSync('cargo', ['build', '--release', '-p', 'proc-manager-node', '-p', 'proc-manager-cli', '-p', 'proc-manager-top'], {
  cwd: root,
  stdio: 'inherit',
})
if (cargo.error) {
  console.error(`proc-manager: cannot run cargo (${cargo.error.message}); install Rust from https://rustup.rs`)
  process.exit(1)
}
if (cargo.status !== 0) process.exit(cargo.status ?? 1)

const release = path.join(root, 'target', 'release')
const library = { darwin: 'libproc_manager.dylib', win32: 'proc_manager.dll' }[process.platform] ?? 'libproc_manager.so'
const exe = process.platform === 'win32' ? '.exe' : ''
const addon = path.join(root, `proc-manager.${platformSuffix()}.node`)
const native = path.join(root, 'native')

// Copy to a temp name and rename: a running Node process that has the old
// addon mapped keeps its inode instead of seeing the file change under it.
function install(from, to, mode) {
  const tmp = `${to}.tmp-${process.pid}`
  fs.copyFileSync(from, tmp)
  fs.chmodSync(tmp, mode)
  fs.renameSync(tmp, to)
}
fs.mkdirSync(native, { recursive: true })
install(path.join(release, library), addon, 0o755)
install(path.join(release, `run-bg${exe}`), path.join(native, `run-bg${exe}`), 0o755)
install(path.join(release, `run-bg-top${exe}`), path.join(native, `run-bg-top${exe}`), 0o755)

// packages/mcp requires `proc-manager` by name, as it will when installed
// from the registry. In a checkout that name is this directory: npm cannot
// provide it (packages/mcp is no workspace, since npm would fetch a
// workspace's `proc-manager` dependency from the registry instead of linking
// the root), so the build links it, as `npm link` would, inside packages/mcp.
const mcpModules = path.join(root, 'packages', 'mcp', 'node_modules')
if (fs.existsSync(path.dirname(mcpModules))) {
  const link = path.join(mcpModules, 'proc-manager')
  const target = path.relative(mcpModules, root)
  let current = null
  try {
    current = fs.readlinkSync(link)
  } catch {}
  if (current !== target) {
    fs.mkdirSync(mcpModules, { recursive: true })
    fs.rmSync(link, { recursive: true, force: true })
    fs.symlinkSync(target, link, 'dir')
  }
}
