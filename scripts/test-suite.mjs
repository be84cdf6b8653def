#!/usr/bin/env node
// Which tests run on which desktop, in one place; CI's native runners call
// this (.github/workflows/ci.yml), and it runs here the same way.
//
//   node scripts/test-suite.mjs [--platform linux|darwin|win32] [--list] [-- <node --test options>]
//   node scripts/test-suite.mjs --check [--root <checkout>]
//
// linux   `npm test`: every Rust test and every suite in __test__/.
// darwin  the Rust core's tests (cargo test -p proc-manager-core) and the
//         Node suites in DARWIN below: those that drive the real addon and
//         run-bg and read nothing macOS lacks. The others are in
//         NOT_ON_DARWIN, each with its reason. On Linux this runs the same
//         files (they are platform-neutral), which is how the list is tried
//         here.
// win32   natively on Windows (x86_64-pc-windows-gnu, the published
//         package's target): the addon, run-bg and run-bg-top built and put
//         where the tests look, the core's Rust tests, the packed packages
//         installed into an empty project (PM_PACKED_PROJECT), and
//         __test__/windows/. Under wine on Linux the same runs through
//         scripts/test-windows.sh instead.
// --platform defaults to this machine's. --list prints the steps without
// running them. --check verifies the lists: every __test__/*.test.mjs is in
// exactly one of DARWIN and NOT_ON_DARWIN, and no file in DARWIN reads
// what macOS lacks (see LINUX_ONLY); a new suite fails --check until it is
// placed. Steps run in order; a failed build stops the run, a failed test
// step does not (every step reports), and the exit code is 1 if any failed.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

let root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** The Node suites macOS runs: platform-neutral, driving the real addon and run-bg. */
export const DARWIN = [
  'docs.test.mjs',
  'dts.test.mjs',
  'handoff.test.mjs',
  'hostile-views.test.mjs',
  'launcher.test.mjs',
  'options-parity.test.mjs',
  'quiet-host.test.mjs',
  'rerun.test.mjs',
  'shapes.test.mjs',
  'watch-jobs.test.mjs',
]

// The /proc readers of __test__/helpers.mjs: on macOS isAlive() would say
// false of every process, so a test would fail or, worse, pass without
// looking. A portable helpers.mjs (kill(pid, 0) and `ps -o lstart=`) would
// let most of these files run on macOS too.
const PROC_HELPERS = 'uses helpers.mjs\'s /proc readers (isAlive, processStart, cookieProcesses, anySurvivor, procState)'

/** Every other suite, and why macOS does not run it. */
export const NOT_ON_DARWIN = {
  'agent.test.mjs': PROC_HELPERS,
  'api.test.mjs': `${PROC_HELPERS}; setsid(1)`,
  'bench.test.mjs': 'the bench\'s C floor (bench/statloop.c) reads /proc',
  'bytes.test.mjs': 'names that are no UTF-8: APFS refuses them',
  'cli.test.mjs': `${PROC_HELPERS}; /proc/<pid>/status`,
  'cursor.test.mjs': 'reads /proc/self/io',
  'diagnostics.test.mjs': `${PROC_HELPERS}; setsid(1)`,
  'follow.test.mjs': 'counts threads and fds in /proc/self',
  'home.test.mjs': `${PROC_HELPERS}; mount and user namespaces (unshare)`,
  'input.test.mjs': PROC_HELPERS,
  'interplay.test.mjs': `${PROC_HELPERS}; /proc/<pid>/fd`,
  'interrupt-service.test.mjs': PROC_HELPERS,
  'kill-scale.test.mjs': PROC_HELPERS,
  'layers.test.mjs': 'reads the Rust sources only: the same on every platform, Linux runs it',
  'list-table.test.mjs': 'skips itself off Linux (util-linux script(1) for a pty)',
  'logs-all.test.mjs': 'counts threads in /proc/self/task',
  'mcp.test.mjs': `${PROC_HELPERS}; /proc/<pid>/task`,
  'nice.test.mjs': 'reads the nice value from /proc/<pid>/stat',
  'notify.test.mjs': PROC_HELPERS,
  'orphan.test.mjs': `${PROC_HELPERS}; /proc/<pid>/cmdline`,
  'package.test.mjs': 'reads /proc/self/maps and /proc/<pid>/exe (the macOS package is installed and run by scripts/ci-package.mjs instead)',
  'pause.test.mjs': `${PROC_HELPERS}; setsid(1)`,
  'procset.test.mjs': `${PROC_HELPERS}; PID namespaces`,
  'queue.test.mjs': PROC_HELPERS,
  'ready.test.mjs': '--ready-port tells a stranger\'s listener from the job\'s by /proc/net/tcp; on macOS any listener counts (README, Limits)',
  'release.test.mjs': 'checks the release scripts and the files they write: the same everywhere, Linux runs it',
  'restart.test.mjs': PROC_HELPERS,
  'safety.test.mjs': `${PROC_HELPERS}; PID namespaces`,
  'sessions.test.mjs': `${PROC_HELPERS}; flock(1)`,
  'stacks.test.mjs': PROC_HELPERS,
  'store.test.mjs': `${PROC_HELPERS}; /proc/locks, tmpfs in a namespace`,
  'surface.test.mjs': '--tie (tiePid) needs a pidfd: Linux only',
  'tie.test.mjs': '--tie needs a pidfd: Linux only',
  'top.test.mjs': `${PROC_HELPERS}; tmux`,
  'tracker.test.mjs': `${PROC_HELPERS}; setsid(1), Chromium`,
  'tree.test.mjs': `${PROC_HELPERS}; setsid(1)`,
}

/** What a file in DARWIN must not contain: each pattern with what it means. */
const LINUX_ONLY = [
  [/\/proc\//, 'reads /proc'],
  [/\b(processStart|isAlive|processEnvironments|cookieProcesses|anySurvivor|procState)\b/, 'uses a /proc reader of helpers.mjs'],
  [/\bunshare\b/, 'runs unshare (Linux namespaces)'],
  [/\bsetsid\s+[\w"'$-]/, 'runs setsid(1) (util-linux; not on macOS)'],
  [/\btiePid\b|--tie\b/, 'ties a job (pidfd: Linux only)'],
]

const WINDOWS_TRIPLE = 'x86_64-pc-windows-gnu'

function die(message, code = 2) {
  console.error(`test-suite: ${message}`)
  process.exit(code)
}

/** Problems with the lists (empty when they are right). */
export function checkLists() {
  const problems = []
  const files = fs.readdirSync(path.join(root, '__test__')).filter((f) => f.endsWith('.test.mjs')).sort()
  for (const f of files) {
    const listed = DARWIN.includes(f)
    const excluded = Object.hasOwn(NOT_ON_DARWIN, f)
    if (listed && excluded) problems.push(`${f} is both in DARWIN and in NOT_ON_DARWIN`)
    if (!listed && !excluded) problems.push(`${f} is in neither DARWIN nor NOT_ON_DARWIN: say whether macOS runs it (scripts/test-suite.mjs)`)
  }
  for (const f of [...DARWIN, ...Object.keys(NOT_ON_DARWIN)]) {
    if (!files.includes(f)) problems.push(`${f} is listed but __test__/${f} does not exist`)
  }
  for (const f of DARWIN.filter((x) => files.includes(x))) {
    const text = fs.readFileSync(path.join(root, '__test__', f), 'utf8')
    for (const [re, what] of LINUX_ONLY) {
      const m = re.exec(text)
      if (m) problems.push(`${f} is in DARWIN but ${what}: line ${text.slice(0, m.index).split('\n').length}: ${m[0]}`)
    }
  }
  return problems
}

/** A command as a step: [label, argv, options]. */
const step = (label, argv, options = {}) => ({ label, argv, ...options })

function npmArgv(args) {
  return ['npm', ...args]
}

function stepsFor(platform, nodeTestArgs) {
  const nodeTest = (files) => [process.execPath, '--test', '--test-concurrency=1', ...nodeTestArgs, ...files]
  if (platform === 'linux') {
    return [step('npm test (every Rust test, every suite in __test__/)', npmArgv(['test', ...(nodeTestArgs.length ? ['--', ...nodeTestArgs] : [])]))]
  }
  if (platform === 'darwin') {
    return [
      step('build (scripts/build.js)', [process.execPath, 'scripts/build.js'], { fatal: true }),
      step('cargo test --release -p proc-manager-core', ['cargo', 'test', '--release', '-p', 'proc-manager-core']),
      step(`node --test: ${DARWIN.length} suites`, nodeTest(DARWIN.map((f) => path.join('__test__', f)))),
    ]
  }
  if (platform === 'win32') {
    const windowsTests = fs.readdirSync(path.join(root, '__test__', 'windows')).filter((f) => f.endsWith('.test.mjs')).sort()
    const release = path.join(targetDir(), WINDOWS_TRIPLE, 'release')
    return [
      step('LIBNODE_PATH (scripts/node-import-lib.mjs)', null, { fatal: true, run: ensureLibnode }),
      step(`cargo build --release --target ${WINDOWS_TRIPLE}`, ['cargo', 'build', '--release', '--target', WINDOWS_TRIPLE,
        '-p', 'proc-manager-node', '-p', 'proc-manager-cli', '-p', 'proc-manager-top'], { fatal: true }),
      step('the addon and native/run-bg.exe, run-bg-top.exe into the checkout', null, { fatal: true, run: () => installWindows(release) }),
      step(`cargo test --release --target ${WINDOWS_TRIPLE} -p proc-manager-core`, ['cargo', 'test', '--release', '--target', WINDOWS_TRIPLE, '-p', 'proc-manager-core']),
      step('packed install: proc-manager and proc-manager-win32-x64-gnu into an empty project', null, { run: () => packedInstall(release) }),
      step(`node --test: __test__/windows/ (${windowsTests.length} suites)`, nodeTest(windowsTests.map((f) => path.join('__test__', 'windows', f)))),
    ]
  }
  die(`unknown platform '${platform}'; accepted: linux, darwin, win32`)
}

function targetDir() {
  return process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
}

/** Runs argv; on Windows npm is npm.cmd, which only a shell runs. */
function run(argv, options = {}) {
  const [cmd, ...args] = argv
  const viaShell = process.platform === 'win32' && cmd === 'npm'
  const quoted = viaShell ? args.map((a) => (/[\s"&|<>^]/.test(a) ? `"${a.replace(/"/g, '""')}"` : a)) : args
  return spawnSync(cmd, quoted, { cwd: root, stdio: 'inherit', shell: viaShell, ...options })
}

// The Windows build links the addon against node.exe's napi_* (napi-build
// needs LIBNODE_PATH for windows-gnu); made from this node.exe unless given.
function ensureLibnode() {
  if (process.env.LIBNODE_PATH) {
    console.log(`test-suite: LIBNODE_PATH=${process.env.LIBNODE_PATH} (given)`)
    return true
  }
  const dir = path.join(targetDir(), 'libnode', process.version)
  const r = run([process.execPath, 'scripts/node-import-lib.mjs', dir])
  if (r.status !== 0) return false
  process.env.LIBNODE_PATH = dir
  return true
}

function installWindows(release) {
  const copy = (from, to) => {
    const tmp = `${to}.tmp-${process.pid}`
    fs.copyFileSync(path.join(release, from), tmp)
    fs.renameSync(tmp, path.join(root, to))
  }
  fs.mkdirSync(path.join(root, 'native'), { recursive: true })
  copy('proc_manager.dll', 'proc-manager.win32-x64-gnu.node')
  copy('run-bg.exe', path.join('native', 'run-bg.exe'))
  copy('run-bg-top.exe', path.join('native', 'run-bg-top.exe'))
  return true
}

// As scripts/test-windows.sh does under wine: __test__/windows/packed.test.mjs
// runs the README's job from the project named by PM_PACKED_PROJECT.
function packedInstall(release) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-packed-'))
  const pkgDir = path.join(work, 'pkg')
  const project = path.join(work, 'project')
  fs.mkdirSync(project, { recursive: true })
  if (run([process.execPath, 'scripts/build-target.mjs', WINDOWS_TRIPLE, '--from', release, '--pack', pkgDir]).status !== 0) return false
  if (run(npmArgv(['pack', '--silent', '--ignore-scripts', '--pack-destination', pkgDir])).status !== 0) return false
  const tarballs = fs.readdirSync(pkgDir).filter((f) => f.endsWith('.tgz')).map((f) => path.join(pkgDir, f))
  fs.writeFileSync(path.join(project, 'package.json'), '{ "name": "pm-packed-project", "private": true }\n')
  const installed = run(npmArgv(['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', ...tarballs]), { cwd: project })
  if (installed.status !== 0) return false
  const exe = path.join(project, 'node_modules', 'proc-manager-win32-x64-gnu', 'native', 'run-bg.exe')
  if (!fs.existsSync(exe)) {
    console.error(`test-suite: the packed install has no ${exe}`)
    return false
  }
  process.env.PM_PACKED_PROJECT = project
  console.log(`test-suite: PM_PACKED_PROJECT=${project}`)
  return true
}

const args = process.argv.slice(2)
const dashdash = args.indexOf('--')
const own = dashdash < 0 ? args : args.slice(0, dashdash)
const nodeTestArgs = dashdash < 0 ? [] : args.slice(dashdash + 1)
let platform = process.platform
let list = false
let check = false
for (let i = 0; i < own.length; i++) {
  if (own[i] === '--root') {
    // Another checkout's __test__/ for --check (the tests use a copy).
    if (!own[i + 1]) die('--root needs a directory')
    root = path.resolve(own[++i])
  } else if (own[i] === '--platform') {
    platform = own[++i]
    if (!platform) die('--platform needs linux, darwin or win32')
  } else if (own[i] === '--list') list = true
  else if (own[i] === '--check') check = true
  else die(`unknown argument '${own[i]}'; usage: test-suite.mjs [--platform linux|darwin|win32] [--list] [--check] [-- <node --test options>]`)
}
if (!['linux', 'darwin', 'win32'].includes(platform)) die(`unknown platform '${platform}'; accepted: linux, darwin, win32`)

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) {
  if (check) {
    const problems = checkLists()
    if (problems.length) {
      for (const p of problems) console.error(`test-suite: ${p}`)
      process.exit(1)
    }
    console.log(`test-suite: lists hold: ${DARWIN.length} suites on macOS, ${Object.keys(NOT_ON_DARWIN).length} not (each with its reason)`)
    process.exit(0)
  }
  const steps = stepsFor(platform, nodeTestArgs)
  if (list) {
    for (const s of steps) console.log(`${s.label}${s.argv ? `\n    ${s.argv.map((a) => (a === process.execPath ? 'node' : a)).join(' ')}` : ''}`)
    if (platform === 'darwin') for (const [f, why] of Object.entries(NOT_ON_DARWIN)) console.log(`  not on macOS: ${f}: ${why}`)
    process.exit(0)
  }
  if (platform === 'win32' && process.platform !== 'win32') {
    die('the Windows suite runs natively on Windows; on Linux run it under wine with scripts/test-windows.sh (--list shows the steps)')
  }
  if (platform === 'darwin' && process.platform === 'win32') die('the macOS list runs on macOS or Linux')
  const results = []
  let failed = false
  for (const s of steps) {
    console.log(`\n=== test-suite (${platform}): ${s.label}`)
    const started = process.hrtime.bigint()
    let ok
    if (s.run) ok = s.run()
    else {
      const r = run(s.argv)
      if (r.error) console.error(`test-suite: cannot run ${s.argv[0]}: ${r.error.message}`)
      ok = r.status === 0
    }
    const seconds = (Number(process.hrtime.bigint() - started) / 1e9).toFixed(1)
    results.push(`${ok ? 'ok' : 'FAILED'}: ${s.label} (${seconds} s)`)
    if (!ok) {
      failed = true
      if (s.fatal) {
        results.push('(stopped: the steps after it need what it makes)')
        break
      }
    }
  }
  console.log(`\n=== test-suite (${platform}): summary`)
  for (const r of results) console.log(`test-suite: ${r}`)
  process.exit(failed ? 1 : 0)
}
