// The run-bg command npm links on Windows, with no sh anywhere on PATH:
// scripts/test-windows.sh packs proc-manager and proc-manager-win32-x64-gnu
// (PM_PACKED_ROOT_TGZ, PM_PACKED_WIN_TGZ) and fetches npm 11 and npm 12
// (PM_WINDOWS_ENV_DIR/npm-<version>/package); here each npm, run by the
// Windows node.exe under wine, installs the tarballs into an empty project
// and globally into a prefix, as on Windows (cmd-shim writes run-bg.cmd,
// run-bg.ps1 and an sh script beside them), and the command runs from cmd
// (`node_modules\.bin\run-bg`, `run-bg` on PATH after -g) and through npx.
// PowerShell runs the .ps1 when there is a real one (wine's powershell.exe
// is a stub that runs nothing: then that test skips, saying so).
// Skipped elsewhere, and without the tarballs or npm.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const envDir = process.env.PM_WINDOWS_ENV_DIR
const tarballs = [process.env.PM_PACKED_WIN_TGZ, process.env.PM_PACKED_ROOT_TGZ].filter(Boolean).map((p) => path.resolve(p))
const npms = envDir && fs.existsSync(envDir)
  ? fs.readdirSync(envDir).map((d) => /^npm-(\d+)\.\d+\.\d+$/.exec(d)).filter(Boolean)
    .map((m) => ({ major: Number(m[1]), version: m[0].slice(4), cli: path.resolve(envDir, m[0], 'package', 'bin', 'npm-cli.js') }))
    .filter((n) => fs.existsSync(n.cli)).sort((a, b) => a.major - b.major)
  : []
const skip = (process.platform !== 'win32' && 'Windows only (scripts/test-windows.sh runs it under wine)') ||
  (tarballs.length !== 2 && 'no packed tarballs (PM_PACKED_ROOT_TGZ, PM_PACKED_WIN_TGZ): scripts/test-windows.sh packs them') ||
  (!npms.length && 'no npm for Windows in PM_WINDOWS_ENV_DIR/npm-<version>: scripts/test-windows.sh fetches it')

const VERSION = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version

// Windows's own directories and node.exe's: a PATH with no sh, as on a
// Windows without Git Bash.
const systemRoot = process.env.SystemRoot || 'C:\\windows'
const basePath = [path.join(systemRoot, 'system32'), systemRoot, path.join(systemRoot, 'system32', 'wbem'), path.dirname(process.execPath)]

/** The environment with PATH (whatever its case) set to `dirs`, and its own home. */
function envWith(dirs, home) {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) if (k.toUpperCase() !== 'PATH' && !k.startsWith('npm_')) env[k] = v
  env.PATH = dirs.join(';')
  env.PROC_MANAGER_HOME = home
  env.npm_config_update_notifier = 'false'
  env.npm_config_fund = 'false'
  env.npm_config_audit = 'false'
  return env
}

function noShOn(env) {
  const found = []
  for (const dir of env.PATH.split(';')) for (const ext of ['', '.exe', '.cmd', '.bat', '.com']) {
    if (fs.existsSync(path.join(dir, `sh${ext}`))) found.push(path.join(dir, `sh${ext}`))
  }
  assert.deepEqual(found, [], 'no sh on PATH')
}

/**
 * A fresh directory, removed after test `t` when nothing holds a file in it
 * (a run-bg.exe that has not exited yet holds its image: then
 * scripts/test-windows.sh removes it once the prefix's processes are ended).
 */
function workDir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  t.after(() => { try { fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 300 }) } catch {} })
  return dir
}

/** `line` run by cmd.exe (/d /s /c), as a user types it. */
function cmd(line, options) {
  const r = spawnSync(line, { shell: true, encoding: 'utf8', timeout: 120_000, ...options })
  if (r.error) throw r.error
  return r
}

function npm(n, args, options) {
  const r = spawnSync(process.execPath, [n.cli, ...args], { encoding: 'utf8', timeout: 600_000, ...options })
  if (r.error) throw r.error
  assert.equal(r.status, 0, `npm ${n.version} ${args.join(' ')}: ${r.stdout}\n${r.stderr}`)
  return r
}

// npm's run-bg.cmd ends in `endLocal & goto #_undefined_# 2>NUL || title
// %COMSPEC% & "%_prog%" …`: Windows's cmd fails the goto, so what follows
// `||` runs (and no "Terminate batch job?" comes after it). Wine's cmd ends
// the batch there instead, so under wine no npm .cmd wrapper runs anything.
const TRICK = 'goto #_undefined_# 2>NUL || title %COMSPEC% & '
let quirk
/** Whether this cmd.exe ends a batch at a goto to a missing label (wine's does). */
function gotoEndsBatch(dir) {
  if (quirk === undefined) {
    const probe = path.join(dir, 'probe.cmd')
    fs.writeFileSync(probe, '@echo off\r\ngoto #_undefined_# 2>NUL || echo after\r\n')
    quirk = !cmd(`"${probe}"`, { cwd: dir }).stdout.includes('after')
  }
  return quirk
}

/**
 * npm's wrappers in `dir`: run-bg.cmd and run-bg.ps1 run node on
 * bin\run-bg.js, never sh. Where cmd.exe ends a batch at a missing goto
 * (wine), run-bg.cmd loses that one clause, the rest kept as npm wrote it.
 */
function checkWrappers(t, dir) {
  const cmdPath = path.join(dir, 'run-bg.cmd')
  const cmdFile = fs.readFileSync(cmdPath, 'utf8')
  const ps1 = fs.readFileSync(path.join(dir, 'run-bg.ps1'), 'utf8')
  for (const [name, text] of [['run-bg.cmd', cmdFile], ['run-bg.ps1', ps1]]) {
    assert.match(text, /_prog=node"|node\$exe"/, `${name} runs node`)
    assert.match(text, /proc-manager[\\/]bin[\\/]run-bg\.js/, `${name} runs bin/run-bg.js`)
    assert.doesNotMatch(text, /["/\\ ]sh(\.exe)?["\s]/, `${name} runs no sh`)
  }
  if (gotoEndsBatch(path.dirname(dir))) {
    assert.equal(cmdFile.split(TRICK).length, 2, `run-bg.cmd has npm's goto clause once: ${cmdFile}`)
    fs.writeFileSync(cmdPath, cmdFile.replace(TRICK, ''))
    t.diagnostic(`this cmd.exe ends a batch at a goto to a missing label (wine's does): run-bg.cmd runs without npm's "${TRICK.trim()}"`)
  }
}

/**
 * The README's job by the command `runBg` (a cmd.exe line prefix), and with
 * `all` a job's exit status and a usage error through it. (Each run-bg under
 * wine costs a second or more: the other ways in run --version and a job.)
 */
function jobThrough(runBg, options, all = false) {
  const version = cmd(`${runBg} --version`, options)
  assert.equal(version.status, 0, version.stdout + version.stderr)
  assert.equal(version.stdout.trim(), `run-bg ${VERSION}`)
  // A label with a space: %* hands the arguments on whole.
  const started = cmd(`${runBg} --label "demo job" -- cmd /c "echo hi"`, options)
  assert.equal(started.status, 0, started.stdout + started.stderr)
  const id = /started (\S+)/.exec(started.stdout)?.[1]
  assert.ok(id, started.stdout)
  const waited = cmd(`${runBg} wait ${id} --timeout 60s`, options)
  assert.equal(waited.status, 0, waited.stdout + waited.stderr)
  assert.match(waited.stdout, /success \(exit 0\)/)
  if (!all) return
  const checked = JSON.parse(cmd(`${runBg} check ${id} --json`, options).stdout)
  assert.equal(checked.label, 'demo job')
  const failing = /started (\S+)/.exec(cmd(`${runBg} -- cmd /c "exit 7"`, options).stdout)?.[1]
  assert.ok(failing)
  assert.equal(cmd(`${runBg} wait ${failing} --timeout 60s`, options).status, 7, 'the exit status comes back through run-bg.cmd')
  assert.equal(cmd(`${runBg} --no-such-flag`, options).status, 2)
}

for (const n of npms.length ? npms : [{ major: 0, version: 'none' }]) {
  test(`npm ${n.version}: node_modules\\.bin\\run-bg and npx run-bg run from cmd with no sh on PATH`, { skip }, (t) => {
    const work = workDir(t, `pm-win-bin-${n.major}-`)
    const home = path.join(work, 'home')
    fs.mkdirSync(home)
    const project = path.join(work, 'project')
    fs.mkdirSync(project)
    fs.writeFileSync(path.join(project, 'package.json'), '{"name":"consumer","version":"1.0.0","private":true}\n')
    const env = envWith(basePath, home)
    noShOn(env)
    const t0 = Date.now()
    npm(n, ['install', '--offline', '--cache', path.join(work, 'cache'), ...tarballs], { cwd: project, env })
    t.diagnostic(`npm ${n.version} install (under wine): ${((Date.now() - t0) / 1000).toFixed(1)} s`)
    const bin = path.join(project, 'node_modules', '.bin')
    checkWrappers(t, bin)
    jobThrough('node_modules\\.bin\\run-bg', { cwd: project, env }, true)
    // With .bin on PATH, as npm scripts and a user's PATH have it.
    const onPath = cmd('run-bg --version', { cwd: project, env: { ...env, PATH: `${bin};${env.PATH}` } })
    assert.equal(onPath.stdout.trim(), `run-bg ${VERSION}`, onPath.stderr)

    // npx: npm finds run-bg among the project's bins and runs it with cmd.
    const npx = path.join(path.dirname(n.cli), 'npx-cli.js')
    const viaNpx = spawnSync(process.execPath, [npx, '--offline', '--cache', path.join(work, 'cache'), 'run-bg', '--version'], { cwd: project, env, encoding: 'utf8', timeout: 300_000 })
    assert.equal(viaNpx.status, 0, viaNpx.stdout + viaNpx.stderr)
    assert.equal(viaNpx.stdout.trim(), `run-bg ${VERSION}`)
  })

  // npm 11 and 12 link a global bin as a local one (cmd-shim, into the
  // prefix): one of them is run here, the one Node 24 comes with.
  test(`npm ${n.version}: npm install -g puts run-bg on PATH for cmd with no sh on PATH`, { skip: skip || (n.major !== npms[0].major && `global install: run with npm ${npms[0].version}`) }, (t) => {
    const work = workDir(t, `pm-win-global-${n.major}-`)
    const home = path.join(work, 'home')
    fs.mkdirSync(home)
    const prefix = path.join(work, 'prefix')
    const env = envWith(basePath, home)
    const t0 = Date.now()
    npm(n, ['install', '--global', '--prefix', prefix, '--offline', '--cache', path.join(work, 'cache'), ...tarballs], { cwd: work, env })
    t.diagnostic(`npm ${n.version} install -g (under wine): ${((Date.now() - t0) / 1000).toFixed(1)} s`)
    // Global bins on Windows go in the prefix itself.
    checkWrappers(t, prefix)
    const onPath = { cwd: work, env: { ...env, PATH: `${prefix};${env.PATH}` } }
    noShOn(onPath.env)
    jobThrough('run-bg', onPath)
  })
}

// Wine's powershell.exe runs nothing and exits 0; a real one exits 3 here.
const powershell = skip ? null : spawnSync('powershell.exe', ['-NoProfile', '-NonInteractive', '-Command', 'exit 3'], { encoding: 'utf8', timeout: 60_000 })
const noPowerShell = skip || (powershell?.status !== 3 && `no PowerShell that runs scripts (powershell.exe -Command "exit 3" gave ${powershell?.status ?? powershell?.error?.message}: wine's is a stub)`)

test('PowerShell runs node_modules\\.bin\\run-bg.ps1 with no sh on PATH', { skip: noPowerShell }, (t) => {
  const n = npms[npms.length - 1]
  const work = workDir(t, 'pm-win-ps1-')
  const home = path.join(work, 'home')
  fs.mkdirSync(home)
  const project = path.join(work, 'project')
  fs.mkdirSync(project)
  fs.writeFileSync(path.join(project, 'package.json'), '{"name":"consumer","version":"1.0.0","private":true}\n')
  const env = envWith(basePath, home)
  npm(n, ['install', '--offline', '--cache', path.join(work, 'cache'), ...tarballs], { cwd: project, env })
  const r = spawnSync('powershell.exe', ['-NoProfile', '-NonInteractive', '-ExecutionPolicy', 'Bypass', '-Command', '& .\\node_modules\\.bin\\run-bg.ps1 --version; exit $LASTEXITCODE'], { cwd: project, env, encoding: 'utf8', timeout: 120_000 })
  assert.equal(r.status, 0, r.stdout + r.stderr)
  assert.equal(r.stdout.trim(), `run-bg ${VERSION}`)
})
