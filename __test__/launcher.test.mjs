// The linked run-bg command (bin/run-bg, a sh launcher that is also valid
// JavaScript): in each layout npm and pnpm make, it execs the very run-bg that
// platform.js's findRunBg names, without starting Node; it leaves to the Node
// shim (bin/run-bg.js) what it cannot decide. The layouts here are built by
// hand with stand-in binaries; package.test.mjs runs it from a packed install.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { root } from './helpers.mjs'

const { platformPackage } = createRequire(import.meta.url)('../platform.js')
const NAME = platformPackage()
const LAUNCHER = path.join(root, 'bin', 'run-bg')
const bash = spawnSync('bash', ['--version']).status === 0

// A space in every path: the launcher quotes what it expands.
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
  for (const f of ['bin/run-bg', 'bin/run-bg.js', 'platform.js', 'package.json']) fs.copyFileSync(path.join(root, f), path.join(dir, f))
  fs.chmodSync(path.join(dir, 'bin', 'run-bg'), 0o755)
  return dir
}

/** A stand-in run-bg at `file` that says `tag`, and whether the Node shim ran it (it sets PROC_MANAGER_TIE_PARENT). */
function fakeBinary(file, tag) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, `#!/bin/sh
case "$1" in exit7) exit 7 ;; term) kill -TERM $$ ;; esac
if [ -n "$PROC_MANAGER_TIE_PARENT" ]; then via=node; else via=direct; fi
echo "${tag} $via"
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

/** What findRunBg, the Node shim's search, says for the package in `pkg`. */
function nodeChoice(pkg, env = cleanEnv()) {
  const r = run(process.execPath, ['-e', `try { console.log(require(${JSON.stringify(path.join(pkg, 'platform.js'))}).findRunBg()) } catch (e) { console.log('error') }`], { env })
  const found = r.stdout.trim()
  if (found === 'error') return null
  return fs.readFileSync(found, 'utf8').match(/echo "(\S+) \$via"/)[1]
}

/** Runs the command at `bin` (with `shell`, else as an executable) and checks it ran `tag` directly, as findRunBg would pick it. */
function expectDirect(bin, tag, { pkg, shell, cwd, env } = {}) {
  // A relative path is run by a shell in `cwd`, as a user types it.
  const r = shell ? run(shell, [bin], { cwd, env }) : cwd ? run('sh', ['-c', '"$0"', bin], { cwd, env }) : run(bin, [], { env })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout, `${tag} direct\n`, `${shell ?? ''} ${bin}`)
  if (pkg) assert.equal(nodeChoice(pkg, env), tag, 'findRunBg picks the same')
}

test('npm layouts: hoisted, nested over hoisted, global nested and beside; relative and absolute paths; sh and bash', () => {
  // npm install in a project: the platform package beside proc-manager.
  const a = path.join(work, 'a')
  const aPkg = fakeMain(path.join(a, 'node_modules', 'proc-manager'))
  fakePlatform(path.join(a, 'node_modules'), 'a-hoisted')
  const aBin = link('../proc-manager/bin/run-bg', path.join(a, 'node_modules', '.bin', 'run-bg'))
  expectDirect(aBin, 'a-hoisted', { pkg: aPkg })
  expectDirect('node_modules/.bin/run-bg', 'a-hoisted', { cwd: a })
  expectDirect('.bin/run-bg', 'a-hoisted', { cwd: path.join(a, 'node_modules') })
  if (bash) expectDirect(aBin, 'a-hoisted', { shell: 'bash' })

  // One nested under proc-manager wins over one hoisted, as in Node.
  const b = path.join(work, 'b')
  const bPkg = fakeMain(path.join(b, 'node_modules', 'proc-manager'))
  fakePlatform(path.join(bPkg, 'node_modules'), 'b-nested')
  fakePlatform(path.join(b, 'node_modules'), 'b-hoisted')
  expectDirect(link('../proc-manager/bin/run-bg', path.join(b, 'node_modules', '.bin', 'run-bg')), 'b-nested', { pkg: bPkg })

  // npm install -g: <prefix>/bin/run-bg -> ../lib/node_modules/proc-manager/bin/run-bg,
  // the platform package nested (from the registry) or beside (two global installs).
  for (const [prefix, nested] of [['c', true], ['d', false]]) {
    const g = path.join(work, prefix)
    const gPkg = fakeMain(path.join(g, 'lib', 'node_modules', 'proc-manager'))
    fakePlatform(nested ? path.join(gPkg, 'node_modules') : path.join(g, 'lib', 'node_modules'), `${prefix}-global`)
    const gBin = link('../lib/node_modules/proc-manager/bin/run-bg', path.join(g, 'bin', 'run-bg'))
    expectDirect(gBin, `${prefix}-global`, { pkg: gPkg })
    // Found on PATH, as a user runs it.
    const r = run('sh', ['-c', 'run-bg'], { env: cleanEnv({ PATH: `${path.dirname(gBin)}:${process.env.PATH}` }) })
    assert.equal(r.stdout, `${prefix}-global direct\n`, r.stderr)
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
  // pnpm's .bin/run-bg is a sh script: exec /bin/sh "$basedir/../proc-manager/bin/run-bg" "$@".
  expectDirect(path.join(e, 'node_modules', '.bin', '..', 'proc-manager', 'bin', 'run-bg'), 'e-pnpm', { shell: '/bin/sh', pkg: ePkg })
  // A link to the launcher through the linked directory.
  expectDirect(link('../proc-manager/bin/run-bg', path.join(e, 'node_modules', '.bin', 'run-bg')), 'e-pnpm')

  // A link of one's own, absolute or relative, to a link: followed (with readlink).
  const a = path.join(work, 'a', 'node_modules', '.bin', 'run-bg')
  expectDirect(link(a, path.join(work, 'f', 'mine', 'rb')), 'a-hoisted')
  link('../mine/rb', path.join(work, 'f', 'other', 'rb2'))
  expectDirect(path.join(work, 'f', 'other', 'rb2'), 'a-hoisted')
})

test("a checkout's native/run-bg comes first, then the overrides come before it", () => {
  const g = path.join(work, 'g')
  const gPkg = fakeMain(path.join(g, 'node_modules', 'proc-manager'))
  fakeBinary(path.join(gPkg, 'native', 'run-bg'), 'g-checkout')
  fakePlatform(path.join(g, 'node_modules'), 'g-hoisted')
  const gBin = link('../proc-manager/bin/run-bg', path.join(g, 'node_modules', '.bin', 'run-bg'))
  expectDirect(gBin, 'g-checkout', { pkg: gPkg })

  const mine = fakeBinary(path.join(work, 'overrides', 'my-run-bg'), 'override')
  expectDirect(gBin, 'override', { pkg: gPkg, env: cleanEnv({ PROC_MANAGER_BINARY_PATH: mine }) })
  expectDirect(gBin, 'override', { pkg: gPkg, env: cleanEnv({ PROC_MANAGER_SUPERVISOR: mine }) })
  // A supervisor's mark (a job id) is no binary.
  expectDirect(gBin, 'g-checkout', { pkg: gPkg, env: cleanEnv({ PROC_MANAGER_SUPERVISOR: 'job-1234' }) })
  // An override that cannot run: the Node shim says so.
  const r = run(gBin, ['--version'], { env: cleanEnv({ PROC_MANAGER_BINARY_PATH: path.join(work, 'overrides', 'absent') }) })
  assert.equal(r.status, 1)
  assert.match(r.stderr, /run-bg: cannot run .*absent \(from PROC_MANAGER_BINARY_PATH\)/)
})

test('without a platform package, or with one that lacks run-bg, the Node shim runs and names the fix', () => {
  const h = path.join(work, 'h')
  fakeMain(path.join(h, 'node_modules', 'proc-manager'))
  const hBin = link('../proc-manager/bin/run-bg', path.join(h, 'node_modules', '.bin', 'run-bg'))
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

test('exit status and signals pass through; run with node, the file is the Node shim', () => {
  const aBin = path.join(work, 'a', 'node_modules', '.bin', 'run-bg')
  assert.equal(run(aBin, ['exit7']).status, 7)
  const killed = run(aBin, ['term'])
  assert.equal(killed.signal, 'SIGTERM')
  // Yarn Berry runs a bin with node whatever its #! line says.
  const viaNode = run(process.execPath, [aBin])
  assert.equal(viaNode.status, 0, viaNode.stderr)
  assert.equal(viaNode.stdout, 'a-hoisted node\n')
  assert.equal(run(process.execPath, [aBin, 'exit7']).status, 7)
  // And the checkout's own: bin/run-bg runs native/run-bg.
  const own = run(LAUNCHER, ['--version'])
  assert.equal(own.status, 0, own.stderr)
  assert.match(own.stdout, /^run-bg \d+\.\d+\.\d+/)
})
