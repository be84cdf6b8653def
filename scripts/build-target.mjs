#!/usr/bin/env node
// Builds the Node addon and the run-bg executable for one Rust target and
// lays them out as that target's napi-rs platform package:
//
//   npm/<abi>/package.json               name proc-manager-<abi>, os, cpu, libc
//   npm/<abi>/proc-manager.<abi>.node    the addon (`main`)
//   npm/<abi>/native/run-bg              the CLI and supervisor; the addon looks
//                                        for it under native/ next to itself
//                                        (native/run-bg.exe for win32)
//   npm/<abi>/native/run-bg-top          the live view `run-bg top` runs, found
//                                        beside run-bg (its own binary: the
//                                        supervisor carries no terminal UI)
//
// usage: node scripts/build-target.mjs <rust-target> [--manifest-only] [--from <dir>] [--pack <dest>]
//        node scripts/build-target.mjs --list
//
// --manifest-only writes npm/<abi>/package.json and builds nothing (for the
// targets a machine cannot build, such as macOS ones on Linux).
// --from <dir> builds nothing either: it lays out the package from the addon
// run-bg and run-bg-top cargo already built into <dir> (cargo's names:
// libproc_manager.so or .dylib, proc_manager.dll; run-bg, run-bg.exe,
// run-bg-top, run-bg-top.exe), e.g. scripts/test-windows.sh's.
// --pack <dest> then `npm pack`s npm/<abi>/ into <dest> and prints the tarball.
//
// Linux targets cross-compile with cargo-zigbuild, which links with zig:
//   glibc: against the symbol versions of glibc GLIBC_FLOOR (2.17), whatever
//          the build machine's glibc is.
//   musl:  the addon dynamically against musl (Node on Alpine loads it with
//          musl's loader; a static addon would carry a second libc), run-bg
//          and run-bg-top statically (no loader, no libc needed at run time).
//   macOS: also with zig, without Apple's SDK (zig carries libSystem's
//          stubs), for MACOSX_DEPLOYMENT_TARGET MACOS_FLOOR (11.0); the
//          core links nothing but libSystem (os/macos.rs reads the process
//          table through libproc), and the addon leaves its napi_* functions
//          to dynamic lookup (Node has them). Ad-hoc signed by the linker.
// Needs: rustup target add <target>; cargo install cargo-zigbuild; zig
// (pip install ziglang).
// x86_64-pc-windows-gnu builds with plain cargo and mingw-w64, in the
// environment of scripts/windows-env.sh (source it first: LIBNODE_PATH, the
// import library for node.exe's napi_* that napi-build links against).
// The result is checked with check-artifacts.mjs (architecture, glibc
// floor, static run-bg for musl; for macOS the Mach-O's libraries, minimum
// OS, signature and exports; for Windows the PE machine and imports).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { GLIBC_FLOOR, MACOS_FLOOR, checkPackage } from './check-artifacts.mjs'

const TARGETS = {
  'x86_64-unknown-linux-gnu': { abi: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc' },
  'aarch64-unknown-linux-gnu': { abi: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'x86_64-unknown-linux-musl': { abi: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
  'aarch64-unknown-linux-musl': { abi: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl' },
  'x86_64-apple-darwin': { abi: 'darwin-x64', os: 'darwin', cpu: 'x64' },
  'aarch64-apple-darwin': { abi: 'darwin-arm64', os: 'darwin', cpu: 'arm64' },
  'x86_64-pc-windows-gnu': { abi: 'win32-x64-gnu', os: 'win32', cpu: 'x64' },
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const binaryName = pkg.napi?.binaryName ?? pkg.name

function die(message) {
  console.error(`build-target: ${message}`)
  process.exit(1)
}

const args = process.argv.slice(2)
if (args.includes('--list')) {
  for (const [triple, t] of Object.entries(TARGETS)) console.log(`${triple}\t${t.abi}`)
  process.exit(0)
}
const manifestOnly = args.includes('--manifest-only')
// Options with a value: --from <dir>, --pack <dest>.
const valued = {}
const rest = []
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--from' || args[i] === '--pack') {
    if (!args[i + 1] || args[i + 1].startsWith('--')) die(`${args[i]} needs a directory`)
    valued[args[i].slice(2)] = path.resolve(args[++i])
  } else rest.push(args[i])
}
const positional = rest.filter((a) => !a.startsWith('--'))
const unknown = rest.filter((a) => a.startsWith('--') && a !== '--manifest-only')
if (unknown.length || positional.length !== 1) {
  die(
    `${unknown.length ? `unknown option ${unknown[0]}` : 'expected exactly one Rust target'}; ` +
      `usage: build-target.mjs <target> [--manifest-only] [--from <dir>] [--pack <dest>]; targets: ${Object.keys(TARGETS).join(', ')}`,
  )
}
const triple = positional[0]
const target = TARGETS[triple]
if (!target) die(`unknown target '${triple}'; accepted: ${Object.keys(TARGETS).join(', ')}`)

const outDir = path.join(root, 'npm', target.abi)
const targetDir = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
const addonName = `${binaryName}.${target.abi}.node`
const exe = target.os === 'win32' ? '.exe' : ''
const runBgName = `native/run-bg${exe}`
const topName = `native/run-bg-top${exe}`
// cargo's names for the two artifacts of this target.
const cargoAddon = { darwin: 'libproc_manager.dylib', win32: 'proc_manager.dll' }[target.os] ?? 'libproc_manager.so'
const cargoRunBg = `run-bg${exe}`
const cargoTop = `run-bg-top${exe}`

function writeManifest() {
  const manifest = {
    name: `${pkg.name}-${target.abi}`,
    version: pkg.version,
    description: `The ${target.abi} addon and the run-bg and run-bg-top executables of ${pkg.name}`,
    license: pkg.license,
    ...(pkg.repository ? { repository: { ...pkg.repository, directory: `npm/${target.abi}` } } : {}),
    os: [target.os],
    cpu: [target.cpu],
    ...(target.libc ? { libc: [target.libc] } : {}),
    main: addonName,
    files: [addonName, runBgName, topName],
    ...(pkg.engines ? { engines: pkg.engines } : {}),
  }
  fs.mkdirSync(outDir, { recursive: true })
  fs.writeFileSync(path.join(outDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  // npm packs a LICENSE it finds in the package directory (git-ignored copy).
  fs.copyFileSync(path.join(root, 'LICENSE'), path.join(outDir, 'LICENSE'))
}

writeManifest()
if (manifestOnly) {
  console.log(`build-target: wrote ${path.relative(root, path.join(outDir, 'package.json'))}`)
  process.exit(0)
}

// One cargo invocation; returns its wall time in seconds.
function cargo(argv, rustflags, label, extraEnv = {}) {
  const env = { ...process.env, ...extraEnv }
  if (rustflags) env.RUSTFLAGS = [process.env.RUSTFLAGS, rustflags].filter(Boolean).join(' ')
  const shown = Object.entries(extraEnv).map(([k, v]) => `${k}=${v} `).join('')
  console.log(`build-target: ${shown}${rustflags ? `RUSTFLAGS='${env.RUSTFLAGS}' ` : ''}cargo ${argv.join(' ')}`)
  const started = process.hrtime.bigint()
  const result = spawnSync('cargo', argv, { cwd: root, env, stdio: 'inherit' })
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  if (result.error) die(`cannot run cargo (${result.error.message}); install Rust from https://rustup.rs`)
  if (result.status !== 0) die(`${label} build failed (cargo exited ${result.status ?? result.signal})`)
  return { label, seconds }
}

const builds = []
let addonFrom
let runBgFrom
let topFrom
if (valued.from) {
  addonFrom = path.join(valued.from, cargoAddon)
  runBgFrom = path.join(valued.from, cargoRunBg)
  topFrom = path.join(valued.from, cargoTop)
} else if (target.os === 'win32') {
  if (!process.env.LIBNODE_PATH) die(`${triple} needs the Windows environment: source scripts/windows-env.sh first (no LIBNODE_PATH)`)
  builds.push(cargo(['build', '--release', '--target', triple, '-p', 'proc-manager-node', '-p', 'proc-manager-cli', '-p', 'proc-manager-top'], null, 'addon + run-bg + run-bg-top'))
  const dir = path.join(targetDir, triple, 'release')
  addonFrom = path.join(dir, cargoAddon)
  runBgFrom = path.join(dir, cargoRunBg)
  topFrom = path.join(dir, cargoTop)
} else if (target.os === 'darwin') {
  builds.push(
    cargo(['zigbuild', '--release', '--target', triple, '-p', 'proc-manager-node', '-p', 'proc-manager-cli', '-p', 'proc-manager-top'], null, 'addon + run-bg + run-bg-top', {
      MACOSX_DEPLOYMENT_TARGET: MACOS_FLOOR,
    }),
  )
  const dir = path.join(targetDir, triple, 'release')
  addonFrom = path.join(dir, 'libproc_manager.dylib')
  runBgFrom = path.join(dir, 'run-bg')
  topFrom = path.join(dir, 'run-bg-top')
} else if (target.libc === 'glibc') {
  // The `.2.17` suffix is cargo-zigbuild's: zig links against that glibc's
  // symbol versions. Artifacts land under target/<triple>/ without it.
  builds.push(
    cargo(['zigbuild', '--release', '--target', `${triple}.${GLIBC_FLOOR}`, '-p', 'proc-manager-node', '-p', 'proc-manager-cli', '-p', 'proc-manager-top'], null, 'addon + run-bg + run-bg-top'),
  )
  const dir = path.join(targetDir, triple, 'release')
  addonFrom = path.join(dir, 'libproc_manager.so')
  runBgFrom = path.join(dir, 'run-bg')
  topFrom = path.join(dir, 'run-bg-top')
} else {
  // musl's default is crt-static, under which rustc builds no cdylib at all.
  builds.push(
    cargo(['zigbuild', '--release', '--target', triple, '-p', 'proc-manager-node'], '-C target-feature=-crt-static', 'addon'),
  )
  addonFrom = path.join(targetDir, triple, 'release', 'libproc_manager.so')
  // Static and not a PIE (see build.rs): relocation-model=static makes rustc
  // link with crt1.o instead of the self-relocating static-PIE start file.
  // Other RUSTFLAGS than the addon's, so its own target dir: sharing one,
  // each build would invalidate the other's cache.
  const staticDir = path.join(targetDir, 'static')
  builds.push(
    cargo(
      ['zigbuild', '--release', '--target', triple, '-p', 'proc-manager-cli', '-p', 'proc-manager-top', '--target-dir', staticDir],
      '-C target-feature=+crt-static -C relocation-model=static',
      'run-bg + run-bg-top (static)',
    ),
  )
  runBgFrom = path.join(staticDir, triple, 'release', 'run-bg')
  topFrom = path.join(staticDir, triple, 'release', 'run-bg-top')
}

// Copy to a temp name and rename, so a process that has the old file mapped
// keeps its inode.
function install(from, to) {
  if (!fs.existsSync(from)) die(`the build finished but ${path.relative(root, from)} does not exist`)
  fs.mkdirSync(path.dirname(to), { recursive: true })
  const tmp = `${to}.tmp-${process.pid}`
  fs.copyFileSync(from, tmp)
  fs.chmodSync(tmp, 0o755)
  fs.renameSync(tmp, to)
}
const addonTo = path.join(outDir, addonName)
const runBgTo = path.join(outDir, runBgName)
install(addonFrom, addonTo)
install(runBgFrom, runBgTo)
install(topFrom, path.join(outDir, topName))

const { files, problems } = checkPackage(outDir)
for (const f of files) {
  console.log(`build-target: ${f.file}: ${f.size} bytes (${(f.size / 1048576).toFixed(2)} MiB)${f.notes.length ? `, ${f.notes.join(', ')}` : ''}`)
}
for (const b of builds) console.log(`build-target: ${b.label}: ${b.seconds.toFixed(1)} s`)
if (problems.length) die(problems.join('; '))

if (valued.pack) {
  fs.mkdirSync(valued.pack, { recursive: true })
  const packed = spawnSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', valued.pack], { cwd: outDir, encoding: 'utf8' })
  if (packed.error || packed.status !== 0) die(`npm pack in ${path.relative(root, outDir)} failed: ${packed.error?.message ?? packed.stderr.trim()}`)
  const [info] = JSON.parse(packed.stdout)
  console.log(`build-target: packed ${path.join(valued.pack, info.filename)}: ${info.files.map((f) => f.path).sort().join(', ')} (${info.size} bytes)`)
}
