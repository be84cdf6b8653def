#!/usr/bin/env node
// One platform package, built on the machine CI gives it, checked, tried and
// packed: what .github/workflows/ci.yml runs on each native runner (and
// release.yml publishes). Runs here the same way.
//
//   node scripts/ci-package.mjs <rust-target> [--out <dir>]
//
// Build (scripts/build-target.mjs lays out npm/<abi>/ and checks it with
// check-artifacts.mjs):
//   linux   cargo-zigbuild, as everywhere: the glibc packages against glibc
//           2.17's symbols, the musl ones with a static run-bg; a native
//           build would take the runner's newer glibc
//   darwin  on macOS, Apple's own toolchain (cargo build, MACOSX_DEPLOYMENT_TARGET
//           = check-artifacts.mjs's MACOS_FLOOR), then laid out with --from;
//           elsewhere cross-built with zig
//   win32   x86_64-pc-windows-gnu with MinGW-w64; LIBNODE_PATH made from
//           this node.exe (scripts/node-import-lib.mjs) when not given
// Try, when this machine runs the package's OS and CPU (skipped, saying so,
// otherwise: a cross-built package is tried by scripts/ci-platform-packages.sh
// under qemu, or not at all):
//   every target   scripts/smoke-run-bg.sh on native/run-bg (not win32:
//                  there __test__/windows/ runs it, via test-suite.mjs)
//   linux-*-gnu    __test__/package.test.mjs on the package (packed with the
//                  root and MCP packages, installed offline, no cargo on PATH;
//                  the checkout is built first: some of its tests run that too)
//   linux-*-musl   scripts/smoke-addon-musl.sh (musl's loader loads the addon)
//   darwin         the packed root and platform packages installed offline
//                  into an empty project: the API and the linked run-bg run a
//                  job (package.test.mjs reads /proc, so it cannot)
// Pack: npm pack npm/<abi>/ into --out (default dist/), the tarball that
// release.yml publishes.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { MACOS_FLOOR } from './check-artifacts.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const TARGETS = {
  'x86_64-unknown-linux-gnu': { abi: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'gnu' },
  'aarch64-unknown-linux-gnu': { abi: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'gnu' },
  'x86_64-unknown-linux-musl': { abi: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
  'aarch64-unknown-linux-musl': { abi: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl' },
  'x86_64-apple-darwin': { abi: 'darwin-x64', os: 'darwin', cpu: 'x64' },
  'aarch64-apple-darwin': { abi: 'darwin-arm64', os: 'darwin', cpu: 'arm64' },
  'x86_64-pc-windows-gnu': { abi: 'win32-x64-gnu', os: 'win32', cpu: 'x64' },
}

function die(message, code = 1) {
  console.error(`ci-package: ${message}`)
  process.exit(code)
}

const args = process.argv.slice(2)
let out = path.join(root, 'dist')
const positional = []
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--out') {
    if (!args[i + 1]) die('--out needs a directory', 2)
    out = path.resolve(args[++i])
  } else if (args[i].startsWith('--')) die(`unknown option ${args[i]}; usage: ci-package.mjs <rust-target> [--out <dir>]`, 2)
  else positional.push(args[i])
}
if (positional.length !== 1 || !TARGETS[positional[0]]) {
  die(`give one Rust target; accepted: ${Object.keys(TARGETS).join(', ')}`, 2)
}
const triple = positional[0]
const target = TARGETS[triple]
const pkgDir = path.join(root, 'npm', target.abi)
const native = target.os === process.platform && target.cpu === process.arch
const targetDir = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
const results = []

/** Runs argv in the checkout (npm through a shell on Windows, where it is npm.cmd). */
function run(argv, options = {}) {
  const [cmd, ...rest] = argv
  const viaShell = process.platform === 'win32' && cmd === 'npm'
  console.log(`ci-package: ${argv.map((a) => (a === process.execPath ? 'node' : a)).join(' ')}`)
  const r = spawnSync(cmd, rest, { cwd: root, stdio: 'inherit', shell: viaShell, ...options, env: { ...process.env, ...options.env } })
  if (r.error) die(`cannot run ${cmd}: ${r.error.message}`)
  return r.status === 0
}

function timed(label, fn) {
  const started = process.hrtime.bigint()
  console.log(`\n=== ci-package ${target.abi}: ${label}`)
  const ok = fn()
  const seconds = (Number(process.hrtime.bigint() - started) / 1e9).toFixed(1)
  results.push(`${ok === null ? 'skipped' : ok ? 'ok' : 'FAILED'}: ${label} (${seconds} s)`)
  return ok
}

// --- Build, lay out and check.
const built = timed('build and check', () => {
  if (target.os === 'darwin' && process.platform === 'darwin') {
    const env = { MACOSX_DEPLOYMENT_TARGET: MACOS_FLOOR }
    if (!run(['cargo', 'build', '--release', '--target', triple, '-p', 'proc-manager-node', '-p', 'proc-manager-cli', '-p', 'proc-manager-top'], { env })) return false
    return run([process.execPath, 'scripts/build-target.mjs', triple, '--from', path.join(targetDir, triple, 'release')])
  }
  if (target.os === 'win32' && !process.env.LIBNODE_PATH) {
    if (process.platform !== 'win32') die(`${triple} needs LIBNODE_PATH: source scripts/windows-env.sh first (or run scripts/test-windows.sh)`)
    const dir = path.join(targetDir, 'libnode', process.version)
    if (!run([process.execPath, 'scripts/node-import-lib.mjs', dir])) return false
    process.env.LIBNODE_PATH = dir
  }
  return run([process.execPath, 'scripts/build-target.mjs', triple])
})
if (!built) {
  console.log(results.join('\n'))
  die(`the ${target.abi} package did not build or failed its checks (above)`)
}

// --- Try it where it can run.
const why = native ? null : `this machine is ${process.platform}-${process.arch}, the package ${target.os}-${target.cpu}`
if (target.os !== 'win32') {
  timed('smoke: run-bg --version and a real job', () => {
    if (!native) return console.log(`ci-package: skipped: ${why}`) ?? null
    return run(['bash', 'scripts/smoke-run-bg.sh', path.join(pkgDir, 'native', 'run-bg')])
  })
}
if (target.libc === 'gnu') {
  timed('__test__/package.test.mjs on the package', () => {
    if (!native) return console.log(`ci-package: skipped: ${why}`) ?? null
    // Some of its tests run the checkout's own build (native/run-bg) beside the package's.
    if (!run([process.execPath, 'scripts/build.js'])) return false
    return run([process.execPath, '--test', '--test-concurrency=1', '__test__/package.test.mjs'], { env: { PROC_MANAGER_TEST_PLATFORM_DIR: pkgDir } })
  })
}
if (target.libc === 'musl') {
  timed('smoke: the addon loads with musl\'s loader', () => {
    if (!native) return console.log(`ci-package: skipped: ${why}`) ?? null
    return run(['bash', 'scripts/smoke-addon-musl.sh', path.join(pkgDir, `proc-manager.${target.abi}.node`)])
  })
}
if (target.os === 'darwin') {
  timed('packed install into an empty project: the API and the linked run-bg', () => {
    if (!native) return console.log(`ci-package: skipped: ${why}`) ?? null
    return packedSmoke()
  })
}

// --- Pack what is published.
timed(`npm pack into ${path.relative(root, out) || out}`, () => {
  fs.mkdirSync(out, { recursive: true })
  return run(['npm', 'pack', '--ignore-scripts', '--pack-destination', out], { cwd: pkgDir })
})

console.log(`\n=== ci-package ${target.abi}: summary`)
for (const r of results) console.log(`ci-package: ${r}`)
process.exit(results.some((r) => r.startsWith('FAILED')) ? 1 : 0)

/**
 * The root package and this platform package, packed and installed offline
 * into an empty project as a user gets them: require('proc-manager') loads
 * the addon from the platform package and runs a job; the linked run-bg (the
 * sh launcher) runs the platform package's run-bg, which runs another.
 */
function packedSmoke() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-packed-'))
  try {
    const tarballs = path.join(work, 'pkg')
    const project = path.join(work, 'project')
    const home = path.join(work, 'home')
    for (const d of [tarballs, project, home]) fs.mkdirSync(d)
    fs.writeFileSync(path.join(home, 'config.json'), '{"notify": {"url": null}}\n')
    if (!run(['npm', 'pack', '--silent', '--ignore-scripts', '--pack-destination', tarballs], { cwd: pkgDir })) return false
    if (!run(['npm', 'pack', '--silent', '--ignore-scripts', '--pack-destination', tarballs])) return false
    fs.writeFileSync(path.join(project, 'package.json'), '{ "name": "pm-packed-project", "private": true }\n')
    const files = fs.readdirSync(tarballs).map((f) => path.join(tarballs, f))
    if (!run(['npm', 'install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', ...files], { cwd: project })) return false
    const env = { PROC_MANAGER_HOME: home, PATH: process.env.PATH }
    const addon = path.join(project, 'node_modules', `proc-manager-${target.abi}`, `proc-manager.${target.abi}.node`)
    const api = spawnSync(process.execPath, ['-e', `
      const pm = require('proc-manager')
      const { jobId } = pm.runBackground('echo api-ok', { label: 'packed' })
      pm.waitJob(jobId, { timeoutMs: 60000 }).then((r) => {
        const loaded = Object.keys(require.cache).filter((f) => f.endsWith('.node'))
        console.log(JSON.stringify({ status: r.status, code: r.shellExitCode, tail: pm.checkJob(jobId).tail, loaded }))
      })`], { cwd: project, env, encoding: 'utf8', timeout: 120_000 })
    if (api.status !== 0) {
      console.error(`ci-package: the API in the packed project failed (exit ${api.status}): ${api.stderr}`)
      return false
    }
    const got = JSON.parse(api.stdout)
    const problems = []
    if (got.status !== 'success' || got.code !== 0) problems.push(`the job ended ${got.status} (${got.code})`)
    if (!got.tail.includes('api-ok')) problems.push(`its output is ${JSON.stringify(got.tail)}`)
    if (got.loaded.length !== 1 || fs.realpathSync(got.loaded[0]) !== fs.realpathSync(addon)) problems.push(`the addon loaded is ${got.loaded.join(', ') || 'none'}, not ${addon}`)
    const linked = path.join(project, 'node_modules', '.bin', 'run-bg')
    const version = spawnSync(linked, ['--version'], { env, encoding: 'utf8' })
    if (version.status !== 0 || !/^run-bg \d/.test(version.stdout)) problems.push(`the linked run-bg --version: exit ${version.status}: ${version.stdout}${version.stderr}`)
    const started = spawnSync(linked, ['--json', '--', 'sh', '-c', 'echo linked-ok; exit 3'], { env, encoding: 'utf8' })
    if (started.status !== 0) problems.push(`the linked run-bg could not start a job: ${started.stderr}`)
    else {
      const { jobId } = JSON.parse(started.stdout)
      const waited = spawnSync(linked, ['wait', jobId, '--timeout', '60s'], { env, encoding: 'utf8' })
      if (waited.status !== 3) problems.push(`wait ${jobId} exited ${waited.status}, not the job's 3`)
      const check = spawnSync(linked, ['check', jobId], { env, encoding: 'utf8' })
      if (!check.stdout.split('\n').includes('linked-ok')) problems.push(`check ${jobId} does not show the job's output: ${check.stdout}`)
    }
    for (const p of problems) console.error(`ci-package: packed install: ${p}`)
    if (!problems.length) console.log(`ci-package: packed install: the API (addon ${path.relative(project, addon)}) and the linked run-bg ran their jobs`)
    return problems.length === 0
  } finally {
    // Jobs above have ended (waited for); nothing of theirs is left running.
    fs.rmSync(work, { recursive: true, force: true })
  }
}
