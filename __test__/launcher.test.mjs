// The linked run-bg command, bin/run-bg.js (a Node shim, so that npm's
// Windows wrappers run it with node): in each layout npm and pnpm make, it
// runs the very run-bg that platform.js's findRunBg names, passes its exit
// status and signals on, and hands a signal sent to it alone to run-bg. The
// layouts here are built by hand with stand-in binaries; package.test.mjs
// runs it from a packed install, __test__/windows/launcher.test.mjs from
// npm's run-bg.cmd under wine.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { root, waitFor, killPid } from './helpers.mjs'

const { platformPackage } = createRequire(import.meta.url)('../platform.js')
const NAME = platformPackage()
const SHIM = path.join(root, 'bin', 'run-bg.js')
const bash = spawnSync('bash', ['--version']).status === 0

// A space in every path: what the shim is handed must arrive whole.
let work
before(() => { work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'pm launcher-'))) })
after(() => fs.rmSync(work, { recursive: true, force: true }))

// The environment of a user with no overrides set.
function cleanEnv(extra = {}) {
  const env = { ...process.env, ...extra }
  for (const k of ['PROC_MANAGER_BINARY_PATH', 'PROC_MANAGER_SUPERVISOR', 'PROC_MANAGER_TIE_PARENT']) if (!(k in extra)) delete env[k]
  return env
}

/** The proc-manager package's files that matter here, in `dir`. */
function fakeMain(dir) {
  fs.mkdirSync(path.join(dir, 'bin'), { recursive: true })
  for (const f of ['bin/run-bg.js', 'platform.js', 'package.json']) fs.copyFileSync(path.join(root, f), path.join(dir, f))
  fs.chmodSync(path.join(dir, 'bin', 'run-bg.js'), 0o755)
  return dir
}

/**
 * A stand-in run-bg at `file` that says `tag`, its arguments, and who ran
 * it (the shim names itself in PROC_MANAGER_TIE_PARENT); `exit7`, `term` and
 * `sleep` do what they say.
 */
function fakeBinary(file, tag) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, `#!/bin/sh
case "$1" in
  exit7) exit 7 ;;
  term) kill -TERM $$ ;;
  sleep) echo $$ > "$2"; exec sleep 300 ;;
  caller) echo "caller=\${PROC_MANAGER_TIE_PARENT#*:}"; exit 0 ;;
esac
echo "${tag} by=\${PROC_MANAGER_TIE_PARENT%%:*} args=$#:$*"
`, { mode: 0o755 })
  return file
}

/** A platform package `name` in `dir` (a node_modules directory), its run-bg saying `tag` (none: no native/run-bg). */
function fakePlatform(dir, tag, name = NAME) {
  const pkg = path.join(dir, name)
  fs.mkdirSync(pkg, { recursive: true })
  fs.writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name, version: '0.1.0' }))
  if (tag) fakeBinary(path.join(pkg, 'native', 'run-bg'), tag)
  return pkg
}

function link(target, at) {
  fs.mkdirSync(path.dirname(at), { recursive: true })
  fs.symlinkSync(target, at)
  return at
}

function run(command, args, options = {}) {
  const r = spawnSync(command, args, { encoding: 'utf8', env: cleanEnv(), timeout: 30_000, ...options })
  if (r.error) throw r.error
  return r
}

/** What findRunBg says for the package in `pkg` (the stand-in's tag). */
function nodeChoice(pkg, env = cleanEnv()) {
  const r = run(process.execPath, ['-e', `try { console.log(require(${JSON.stringify(path.join(pkg, 'platform.js'))}).findRunBg()) } catch (e) { console.log('error') }`], { env })
  const found = r.stdout.trim()
  if (found === 'error') return null
  return fs.readFileSync(found, 'utf8').match(/echo "(\S+) by=/)[1]
}

/**
 * Runs the command at `bin` (as an executable; from `cwd` when given, by
 * `shell`, sh by default, as a user types a relative path) with two arguments, one
 * with a space, and checks it ran the stand-in `tag` (the one findRunBg
 * picks for `pkg`) as the shim's child with the arguments whole.
 */
function expectRuns(bin, tag, { pkg, shell, cwd, env } = {}) {
  const args = ['a b', '--x']
  const r = cwd ? run(shell ?? 'sh', ['-c', '"$0" "$@"', bin, ...args], { cwd, env }) : run(bin, args, { env })
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, new RegExp(`^${tag} by=\\d+ args=2:a b --x\\n$`), `${shell ?? ''} ${bin}`)
  if (pkg) assert.equal(nodeChoice(pkg, env), tag, 'findRunBg picks the same')
}

test('the package links bin/run-bg.js, a Node script, and nothing run by sh', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  assert.deepEqual(pkg.bin, { 'run-bg': 'bin/run-bg.js' })
  // npm's cmd-shim writes run-bg.cmd/.ps1 to run what this line names.
  assert.equal(fs.readFileSync(SHIM, 'utf8').split('\n')[0], '#!/usr/bin/env node')
  assert.ok(fs.statSync(SHIM).mode & 0o111, 'executable')
})

test('npm layouts: hoisted, nested over hoisted, global nested and beside; relative and absolute paths; sh and bash', () => {
  // npm install in a project: the platform package beside proc-manager.
  const a = path.join(work, 'a')
  const aPkg = fakeMain(path.join(a, 'node_modules', 'proc-manager'))
  fakePlatform(path.join(a, 'node_modules'), 'a-hoisted')
  const aBin = link('../proc-manager/bin/run-bg.js', path.join(a, 'node_modules', '.bin', 'run-bg'))
  expectRuns(aBin, 'a-hoisted', { pkg: aPkg })
  expectRuns('node_modules/.bin/run-bg', 'a-hoisted', { cwd: a })
  expectRuns('.bin/run-bg', 'a-hoisted', { cwd: path.join(a, 'node_modules') })
  if (bash) expectRuns('node_modules/.bin/run-bg', 'a-hoisted', { shell: 'bash', cwd: a })

  // One nested under proc-manager wins over one hoisted, as in Node.
  const b = path.join(work, 'b')
  const bPkg = fakeMain(path.join(b, 'node_modules', 'proc-manager'))
  fakePlatform(path.join(bPkg, 'node_modules'), 'b-nested')
  fakePlatform(path.join(b, 'node_modules'), 'b-hoisted')
  expectRuns(link('../proc-manager/bin/run-bg.js', path.join(b, 'node_modules', '.bin', 'run-bg')), 'b-nested', { pkg: bPkg })

  // npm install -g: <prefix>/bin/run-bg -> ../lib/node_modules/proc-manager/bin/run-bg.js,
  // the platform package nested (from the registry) or beside (two global installs).
  for (const [prefix, nested] of [['c', true], ['d', false]]) {
    const g = path.join(work, prefix)
    const gPkg = fakeMain(path.join(g, 'lib', 'node_modules', 'proc-manager'))
    fakePlatform(nested ? path.join(gPkg, 'node_modules') : path.join(g, 'lib', 'node_modules'), `${prefix}-global`)
    const gBin = link('../lib/node_modules/proc-manager/bin/run-bg.js', path.join(g, 'bin', 'run-bg'))
    expectRuns(gBin, `${prefix}-global`, { pkg: gPkg })
    // Found on PATH, as a user runs it.
    const r = run('sh', ['-c', 'run-bg x'], { env: cleanEnv({ PATH: `${path.dirname(gBin)}:${process.env.PATH}` }) })
    assert.match(r.stdout, new RegExp(`^${prefix}-global by=\\d+ args=1:x\\n$`), r.stderr)
  }
})

test('pnpm layout: the package is a link into .pnpm, found from its real directory; any other link is followed', () => {
  const e = path.join(work, 'e')
  const store = path.join(e, 'node_modules', '.pnpm')
  const ePkg = fakeMain(path.join(store, 'proc-manager@0.1.0', 'node_modules', 'proc-manager'))
  fakePlatform(path.join(store, `${NAME}@0.1.0`, 'node_modules'), 'e-pnpm')
  link(`../../${NAME}@0.1.0/node_modules/${NAME}`, path.join(store, 'proc-manager@0.1.0', 'node_modules', NAME))
  link('.pnpm/proc-manager@0.1.0/node_modules/proc-manager', path.join(e, 'node_modules', 'proc-manager'))
  // Not what Node finds from the real directory: must not be taken.
  fakePlatform(path.join(e, 'node_modules'), 'e-decoy')
  // pnpm's .bin/run-bg is a sh script: exec node "$basedir/../proc-manager/bin/run-bg.js" "$@".
  const pnpmBin = path.join(e, 'node_modules', '.bin', 'run-bg')
  fs.mkdirSync(path.dirname(pnpmBin), { recursive: true })
  fs.writeFileSync(pnpmBin, '#!/bin/sh\nbasedir=$(dirname "$(echo "$0" | sed -e \'s,\\\\,/,g\')")\nexec node "$basedir/../proc-manager/bin/run-bg.js" "$@"\n', { mode: 0o755 })
  expectRuns(pnpmBin, 'e-pnpm', { pkg: ePkg })
  // A link to the command through the linked directory.
  expectRuns(link('../proc-manager/bin/run-bg.js', path.join(e, 'node_modules', '.bin', 'run-bg2')), 'e-pnpm')

  // A link of one's own, absolute or relative, to a link: followed.
  const a = path.join(work, 'a', 'node_modules', '.bin', 'run-bg')
  expectRuns(link(a, path.join(work, 'f', 'mine', 'rb')), 'a-hoisted')
  link('../mine/rb', path.join(work, 'f', 'other', 'rb2'))
  expectRuns(path.join(work, 'f', 'other', 'rb2'), 'a-hoisted')
})

test("a checkout's native/run-bg comes first, then the overrides come before it", () => {
  const g = path.join(work, 'g')
  const gPkg = fakeMain(path.join(g, 'node_modules', 'proc-manager'))
  fakeBinary(path.join(gPkg, 'native', 'run-bg'), 'g-checkout')
  fakePlatform(path.join(g, 'node_modules'), 'g-hoisted')
  const gBin = link('../proc-manager/bin/run-bg.js', path.join(g, 'node_modules', '.bin', 'run-bg'))
  expectRuns(gBin, 'g-checkout', { pkg: gPkg })

  const mine = fakeBinary(path.join(work, 'overrides', 'my-run-bg'), 'override')
  expectRuns(gBin, 'override', { pkg: gPkg, env: cleanEnv({ PROC_MANAGER_BINARY_PATH: mine }) })
  expectRuns(gBin, 'override', { pkg: gPkg, env: cleanEnv({ PROC_MANAGER_SUPERVISOR: mine }) })
  // A supervisor's mark (a job id) is no binary.
  expectRuns(gBin, 'g-checkout', { pkg: gPkg, env: cleanEnv({ PROC_MANAGER_SUPERVISOR: 'job-1234' }) })
  // An override that cannot run: the shim says so.
  const r = run(gBin, ['--version'], { env: cleanEnv({ PROC_MANAGER_BINARY_PATH: path.join(work, 'overrides', 'absent') }) })
  assert.equal(r.status, 1)
  assert.match(r.stderr, /run-bg: cannot run .*absent \(from PROC_MANAGER_BINARY_PATH\)/)
})

test('without a platform package, or with one that lacks run-bg, the shim names the fix', () => {
  const h = path.join(work, 'h')
  fakeMain(path.join(h, 'node_modules', 'proc-manager'))
  const hBin = link('../proc-manager/bin/run-bg.js', path.join(h, 'node_modules', '.bin', 'run-bg'))
  // Another platform's package is no stand-in for this one's.
  fakePlatform(path.join(h, 'node_modules'), 'h-other', NAME.includes('-x64') ? NAME.replace('-x64', '-arm64') : NAME.replace('-arm64', '-x64'))
  const missing = run(hBin, ['--version'])
  assert.equal(missing.status, 1)
  assert.match(missing.stderr, new RegExp(`the platform package ${NAME} is not installed`))
  assert.ok(missing.stderr.includes(`npm install ${NAME}@`), missing.stderr)

  fakePlatform(path.join(h, 'node_modules'), null)
  const empty = run(hBin, ['--version'])
  assert.equal(empty.status, 1)
  assert.match(empty.stderr, new RegExp(`${NAME} is installed \\(.*\\) but its run-bg executable is not usable`))
})

// Portable (macOS runs this file): the shim's child is reparented and reaped
// once it dies, so kill(pid, 0) stops finding it.
function exists(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

test('exit status and signals pass through, and a signal to the command alone reaches run-bg', async (t) => {
  const aBin = path.join(work, 'a', 'node_modules', '.bin', 'run-bg')
  assert.equal(run(aBin, ['exit7']).status, 7)
  const killed = run(aBin, ['term'])
  assert.equal(killed.signal, 'SIGTERM')
  // Yarn Berry runs a bin with node: the same.
  assert.equal(run(process.execPath, [aBin, 'exit7']).status, 7)

  // A tool's timeout kills the pid it started, the shim's: run-bg (here a
  // sleep in its place) ends too, and the shim ends by the same signal.
  for (const signal of ['SIGTERM', 'SIGHUP', 'SIGINT']) {
    const pidFile = path.join(work, `sleeper-${signal}`)
    const shim = spawn(aBin, ['sleep', pidFile], { env: cleanEnv(), stdio: 'ignore' })
    const exited = new Promise((resolve) => shim.once('exit', (code, sig) => resolve({ code, signal: sig })))
    const child = await waitFor(() => { try { return Number(fs.readFileSync(pidFile, 'utf8')) || null } catch { return null } }, { what: 'run-bg under the shim' })
    t.after(() => killPid(child))
    process.kill(shim.pid, signal)
    assert.deepEqual(await exited, { code: null, signal })
    await waitFor(() => !exists(child), { what: `run-bg to end on the shim's ${signal}` })
  }

  // And the checkout's own: bin/run-bg.js runs native/run-bg.
  const own = run(SHIM, ['--version'])
  assert.equal(own.status, 0, own.stderr)
  assert.match(own.stdout, /^run-bg \d+\.\d+\.\d+/)
})

/**
 * What `npx run-bg …` makes: npm (a node process titled `npm exec …`, with
 * `npm_command=exec` in the environment it hands on) runs the bin through
 * `sh -c`, and on SIGTERM ends that shell alone. Says its own parent's pid
 * (`npmParent=`), then passes the bin's output on.
 */
function fakeNpx(dir, shell = 'sh') {
  const file = path.join(dir, `npm-exec-${shell}.js`)
  fs.writeFileSync(file, `process.title = 'npm exec run-bg'
const { spawn } = require('node:child_process')
console.log('npmParent=' + process.ppid)
const shell = spawn('${shell}', ['-c', '"$0" "$@"', ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, npm_command: 'exec', npm_lifecycle_event: 'npx' } })
process.on('SIGTERM', () => { shell.kill('SIGTERM'); process.exit(143) })
shell.on('exit', (code) => process.exit(code ?? 1))
`)
  return file
}

test('under npx, the caller a tie goes to is the shell that ran npx, and npx ended ends run-bg', async (t) => {
  // npm's `sh -c` exits as soon as run-bg does: tied to it, a job was killed
  // as soon as npx returned; and npm, ended by a tool's timeout, ends that
  // shell alone, so a `run-bg wait` ran on.
  const project = path.join(work, 'npx')
  fakeMain(path.join(project, 'node_modules', 'proc-manager'))
  fakePlatform(path.join(project, 'node_modules'), 'npx')
  const aBin = link('../proc-manager/bin/run-bg.js', path.join(project, 'node_modules', '.bin', 'run-bg'))
  const npx = fakeNpx(work)
  const said = run('sh', ['-c', '"$0" "$@"; true', process.execPath, npx, aBin, 'caller'])
  assert.equal(said.status, 0, said.stderr)
  const npmParent = said.stdout.match(/^npmParent=(\d+)$/m)?.[1]
  const caller = said.stdout.match(/^caller=(\d+)$/m)?.[1]
  assert.ok(npmParent && caller, said.stdout)
  assert.equal(caller, npmParent, 'the process that ran npx, not npm\'s sh -c')
  // Where sh is bash (macOS, Fedora), it execs run-bg: npm is then its parent.
  if (bash) {
    const viaBash = run('sh', ['-c', '"$0" "$@"; true', process.execPath, fakeNpx(work, 'bash'), aBin, 'caller'])
    assert.equal(viaBash.stdout.match(/^caller=(\d+)$/m)?.[1], viaBash.stdout.match(/^npmParent=(\d+)$/m)?.[1], viaBash.stdout)
  }
  // Handed npm_command by a tool npx ran, but not under npm itself: its own parent, and no watch.
  const inherited = run('sh', ['-c', 'echo "shell=$$"; "$0" caller; true', aBin], { env: cleanEnv({ npm_command: 'exec' }) })
  assert.equal(inherited.stdout.match(/^caller=(\d+)$/m)?.[1], inherited.stdout.match(/^shell=(\d+)$/m)?.[1], inherited.stdout)
  // Outside npx the shim's own parent is the caller, as before.
  const plain = run('sh', ['-c', 'echo "shell=$$"; "$0" caller; true', aBin])
  assert.equal(plain.stdout.match(/^caller=(\d+)$/m)?.[1], plain.stdout.match(/^shell=(\d+)$/m)?.[1], plain.stdout)

  const pidFile = path.join(work, 'sleeper-npx')
  const npm = spawn(process.execPath, [npx, aBin, 'sleep', pidFile], { env: cleanEnv(), stdio: 'ignore' })
  const child = await waitFor(() => { try { return Number(fs.readFileSync(pidFile, 'utf8')) || null } catch { return null } }, { what: 'run-bg under npx' })
  t.after(() => killPid(child))
  process.kill(npm.pid, 'SIGTERM')
  await waitFor(() => !exists(child), { what: 'run-bg to end once npx was ended' })
})
