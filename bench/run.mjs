#!/usr/bin/env node
// Benchmarks proc-manager against plain-shell / plain-Node baselines, side by
// side in one run: repetitions are interleaved (the order rotates every rep,
// or is shuffled for the log rows) so that noise from a shared machine hits
// every variant alike. Reports median, p90 and the range, prints a table with
// targets, writes bench/out/results.json.
//
//   node bench/run.mjs [--quick] [--only=start,idle,footprint,bin,log,tail,kill,notify,snapshot,ready,queue,scale,fleet,top,harness]
//                      [--baseline=<checkout>] [--log-reps=N] [--seed=N] [--scale=10,100,1000]
//
// --baseline runs the same rows with another checkout's build (its
// native/run-bg and addon, e.g. an older commit's worktree after
// `node scripts/build.js` there) and prints a before/after table: the log
// rows interleave both builds sample by sample, the other groups run once per
// build, back to back (the order alternating from group to group).
//
// Every sample gets its own temp PROC_MANAGER_HOME; every process started is
// killed by pid (or through run-bg by job id), and every temp dir is removed,
// also on errors and Ctrl-C.

import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { startStub, newText, newToolResults, sessionOf } from '../__test__/harness/anthropic-stub.mjs'
import { claudeSkipReason, claudeVersion, startNetns, makeClaudeHome, startClaude, descendants } from '../__test__/harness/claude.mjs'
import { benchFleet, printFleet } from './fleet.mjs'

const USAGE = `usage: node bench/run.mjs [--quick] [--only=GROUP,...] [--baseline=<checkout>] [--log-reps=N] [--seed=N] [--scale=N,...]
groups: start, idle, footprint, bin, log, tail, kill, notify, snapshot, ready, queue, scale, fleet, top, harness`
{
  // An option misspelt must not start a 10-minute run of everything.
  const known = /^--(quick|help|(only|baseline|log-reps|seed|scale)=.+)$/
  const unknown = process.argv.slice(2).filter((a) => !known.test(a))
  if (process.argv.includes('--help')) {
    console.log(USAGE)
    process.exit(0)
  }
  if (unknown.length) {
    console.error(`bench: unknown argument ${unknown.join(' ')}\n${USAGE}`)
    process.exit(2)
  }
}
const QUICK = process.argv.includes('--quick')
const GROUPS = ['start', 'idle', 'footprint', 'bin', 'log', 'tail', 'kill', 'notify', 'snapshot', 'ready', 'queue', 'scale', 'fleet', 'top', 'harness']
const ONLY = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',') ?? null
const runs = (group) => !ONLY || ONLY.includes(group)
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const option = (name) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? null
const BASELINE = option('baseline')
const OUT_FILE = path.join(ROOT, 'bench', 'out', 'results.json')
const STATLOOP_SRC = path.join(ROOT, 'bench', 'statloop.c')
const STATLOOP = path.join(ROOT, 'bench', 'out', 'statloop')
const MiB = 1024 ** 2
const GiB = 1024 ** 3

const PLAN = QUICK
  ? { startReps: 10, warmup: 2, idleJobs: 5, cpuWindowMs: 2000, logBytes: 128 * MiB, logReps: 2, tailBytes: 128 * MiB, tailReps: 10,
      killReps: 5, treeSize: 50, treeReps: 2, notifyReps: 5, snapExtra: 100, snapReps: 5, statPasses: 10, readyReps: 5, probeWindowMs: 5000,
      harnessReps: 3, harnessWarmup: 0 }
  : { startReps: 30, warmup: 3, idleJobs: 5, cpuWindowMs: 2000, logBytes: GiB, logReps: 5, tailBytes: GiB, tailReps: 30,
      killReps: 20, treeSize: 50, treeReps: 8, notifyReps: 20, snapExtra: 500, snapReps: 20, statPasses: 10, readyReps: 15, probeWindowMs: 5000,
      harnessReps: 5, harnessWarmup: 1 }
const ROTATING = { max_bytes: 100 * MiB, keep: 2 }
const UNBOUNDED = { max_bytes: 2 * GiB, keep: 2 }
const FINAL = new Set(['success', 'failed', 'killed', 'timeout', 'lost'])

/** A build to measure: a checkout's run-bg and addon. */
function loadBuild(name, root) {
  const runBg = path.join(root, 'native', 'run-bg')
  if (!fs.existsSync(runBg)) throw new Error(`${runBg} missing; run \`node scripts/build.js\` in ${root}`)
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout?.trim()
  return { name, root, runBg, commit, pm: createRequire(path.join(root, 'package.json'))(root) }
}
const BUILDS = [loadBuild('after', ROOT), ...(BASELINE ? [loadBuild('before', path.resolve(BASELINE))] : [])]
// The build the helpers below use; swapped by withBuild (the bench runs one sample at a time).
let RUN_BG = BUILDS[0].runBg
let pm = BUILDS[0].pm
let BUILD = BUILDS[0]
async function withBuild(build, fn) {
  const saved = [RUN_BG, pm, BUILD]
  ;[RUN_BG, pm, BUILD] = [build.runBg, build.pm, build]
  try {
    return await fn()
  } finally {
    ;[RUN_BG, pm, BUILD] = saved
  }
}
// Only inHome() sets it, so nothing here can touch the user's real state dir.
delete process.env.PROC_MANAGER_HOME

// ---------------------------------------------------------------- utilities

const now = () => Number(process.hrtime.bigint()) / 1e6
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const q = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`
const log = (msg) => process.stderr.write(`${msg}\n`)
const rotate = (arr, k) => arr.map((_, i) => arr[(((i + k) % arr.length) + arr.length) % arr.length])

function quantile(samples, p) {
  const s = [...samples].sort((a, b) => a - b)
  return s[Math.max(0, Math.ceil(p * s.length) - 1)]
}
const stats = (samples) =>
  samples?.length ? { n: samples.length, median: quantile(samples, 0.5), p90: quantile(samples, 0.9), min: Math.min(...samples), max: Math.max(...samples) } : null

/** A seeded shuffle (mulberry32): the order differs every repetition, the same every run. */
function shuffler(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return (arr) => {
    const out = [...arr]
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      ;[out[i], out[j]] = [out[j], out[i]]
    }
    return out
  }
}

function cpuJiffies() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  return { idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0) }
}
const memFreeKiB = () => Number(/^MemFree:\s+(\d+)/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1])

/**
 * Before a heavy sample: the previous one's writeback is flushed (sync), its
 * page cache dropped where we may (root), and we wait until the machine is
 * quiet for a moment: the CPUs under half busy and free memory no longer
 * moving (the hypervisor's free-page reporting hands freed pages back a
 * while after they are freed, and faulting them in again is slow). At most
 * `limitMs`; returns what it saw, reported with the sample.
 */
async function settle(limitMs = 5000) {
  spawnSync('sync')
  let dropped = false
  try {
    fs.writeFileSync('/proc/sys/vm/drop_caches', '1')
    dropped = true
  } catch {} // not root: the page cache stays, for every variant alike
  const t0 = now()
  let quiet = 0
  let busy = 1
  for (;;) {
    const [c0, m0] = [cpuJiffies(), memFreeKiB()]
    await sleep(200)
    const [c1, m1] = [cpuJiffies(), memFreeKiB()]
    busy = 1 - (c1.idle - c0.idle) / Math.max(1, c1.total - c0.total)
    quiet = busy < 0.5 && Math.abs(m1 - m0) < 16 * 1024 ? quiet + 1 : 0
    if (quiet >= 2 || now() - t0 > limitMs) break
  }
  return { dropped, waitedMs: now() - t0, busy, load1: os.loadavg()[0] }
}

const envFor = (home) => ({ ...process.env, PROC_MANAGER_HOME: home })

/** Runs an in-process API call against `home`; the variable never lingers,
 * because any later call would (re)create whatever home it names. */
function inHome(home, fn) {
  process.env.PROC_MANAGER_HOME = home
  try {
    return fn()
  } finally {
    delete process.env.PROC_MANAGER_HOME
  }
}

function runBg(home, args, options = {}) {
  const r = spawnSync(RUN_BG, args, { env: envFor(home), encoding: 'utf8', timeout: 300_000, ...options })
  if (r.error) throw new Error(`run-bg ${args.join(' ')}: ${r.error.message}`)
  return r
}

function mustRunBg(home, args, options) {
  const r = runBg(home, args, options)
  if (r.status !== 0) throw new Error(`run-bg ${args.join(' ')} exited ${r.status}: ${r.stderr.trim()}`)
  return r
}

const startJson = (home, argv, label) => JSON.parse(mustRunBg(home, ['--json', '--label', label, '--', ...argv]).stdout)

/**
 * The jobs as run-bg's readers see them: each job's own job.json (written
 * first, and the first to hold an outcome) over its jobs.json entry (which
 * the registry takes in when its lock is free).
 */
function readJobs(home) {
  let jobs = []
  try {
    jobs = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs
  } catch {} // absent, or (never expected: writes are atomic) unreadable
  const byId = new Map(jobs.map((j) => [j.id, j]))
  let dirs = []
  try {
    dirs = fs.readdirSync(path.join(home, 'jobs'))
  } catch {}
  for (const id of dirs) {
    try {
      const own = JSON.parse(fs.readFileSync(path.join(home, 'jobs', id, 'job.json'), 'utf8'))
      const listed = byId.get(id)
      if (!listed || (FINAL.has(own.status) && !FINAL.has(listed.status))) byId.set(id, own)
    } catch {}
  }
  return [...byId.values()]
}

/** Every home gets a config.json. Notifications are off unless a group sets a
 * url: else each ended job's supervisor would retry the default
 * http://127.0.0.1:7600/trigger for a minute after its home is gone (or reach
 * a real interrupt service listening there). */
function writeConfig(home, config = {}) {
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null }, ...config }))
}

/** /proc/<pid>/stat fields after the comm: [0] is field 3 (state). */
function procStat(pid) {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return raw.slice(raw.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}
const startTicks = (pid) => procStat(pid)?.[19] ?? null
function cpuTicks(pid) {
  const f = procStat(pid)
  return f ? Number(f[11]) + Number(f[12]) : NaN // utime + stime
}
function procStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN)
  let rollup = ''
  try {
    rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
  } catch {}
  const rk = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? NaN)
  return {
    vmRssKiB: kb('VmRSS'),
    rssAnonKiB: kb('RssAnon'),
    rssFileKiB: kb('RssFile'),
    privateDirtyKiB: rk('Private_Dirty'),
    privateCleanKiB: rk('Private_Clean'),
    pssKiB: rk('Pss'),
  }
}
const cmdline = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1)
  } catch {
    return null
  }
}

function waitForFile(file, timeoutMs = 10_000) {
  const deadline = now() + timeoutMs
  while (!fs.existsSync(file)) {
    if (now() > deadline) throw new Error(`timed out waiting for ${file}`)
  }
}

function freeBytes(dir) {
  if (fs.statfsSync) {
    const s = fs.statfsSync(dir)
    return s.bavail * s.bsize
  }
  const out = spawnSync('df', ['-Pk', dir], { encoding: 'utf8' }).stdout.trim().split('\n').pop().split(/\s+/)
  return Number(out[3]) * 1024
}

// ------------------------------------------------- process & dir bookkeeping

const tempDirs = new Set()
const strayPids = new Map() // pid -> start ticks, for processes that are nobody's child of ours
const children = new Set() // ChildProcess objects still running
const killers = new Set() // what a group started otherwise (a Claude Code session and its tree, a network namespace): each kills it by pid

function tempDir(tag) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pm-bench-${tag}-`))
  tempDirs.add(dir)
  return dir
}

function trackStray(pid) {
  strayPids.set(pid, startTicks(pid))
}

function killStray(pid) {
  const ticks = strayPids.get(pid)
  strayPids.delete(pid)
  // Only if the pid still is the process we saw (not a reused pid).
  if (ticks != null && startTicks(pid) === ticks) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {}
  }
}

function spawnChild(cmd, args, options) {
  const child = spawn(cmd, args, options)
  children.add(child)
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, t: now() })))
  child.exited.then(() => children.delete(child))
  return child
}

async function killChild(child) {
  if (children.has(child)) child.kill('SIGKILL')
  await child.exited
}

/** Kills what is left of the jobs recorded in `home`: via run-bg, then by recorded identity. */
function killJobsIn(home) {
  const live = () => readJobs(home).filter((j) => !FINAL.has(j.status))
  if (!live().length) return
  runBg(home, ['kill', '--all', '--force'], { timeout: 15_000 })
  for (const job of live()) {
    for (const who of [job.main, job.supervisor]) {
      if (who && Number(startTicks(who.pid)) === who.start_ticks) {
        try {
          process.kill(who.pid, 'SIGKILL')
        } catch {}
      }
    }
  }
}

/** Whether any process of proc-manager (a supervisor, watcher, notifier) still works for `home`. */
function busyFor(home) {
  const mine = `\0PROC_MANAGER_HOME=${home}\0`
  return fs.readdirSync('/proc').some((name) => {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) return false
    try {
      const environ = `\0${fs.readFileSync(`/proc/${name}/environ`, 'latin1')}`
      return environ.includes(mine) && environ.includes('\0PROC_MANAGER_SUPERVISOR=')
    } catch {
      return false
    }
  })
}

function removeDir(dir) {
  try {
    killJobsIn(dir)
  } finally {
    // A supervisor whose kill was just reported may still be writing the
    // registry (its job.json holds the outcome first), and a watcher may be
    // finishing: wait until nothing works for the home (5 s at most).
    const deadline = Date.now() + 5_000
    while (busyFor(dir) && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10)
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 25 })
    tempDirs.delete(dir)
  }
}

let cleanedUp = false
function cleanup() {
  if (cleanedUp) return
  cleanedUp = true
  for (const kill of killers) {
    try {
      kill()
    } catch {}
  }
  for (const child of children) {
    try {
      child.kill('SIGKILL')
    } catch {}
  }
  for (const pid of [...strayPids.keys()]) killStray(pid)
  for (const dir of [...tempDirs]) {
    try {
      removeDir(dir)
    } catch (e) {
      log(`cleanup: ${dir}: ${e.message}`)
    }
  }
}
process.on('exit', cleanup)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    cleanup()
    process.exit(128 + os.constants.signals[signal])
  })
}

const checks = []
function check(name, ok, detail = '') {
  if (BUILDS.length > 1) name = `[${BUILD.name}] ${name}`
  checks.push({ name, ok, detail })
  if (!ok) log(`  CHECK FAILED: ${name}${detail ? ` (${detail})` : ''}`)
}

// ------------------------------------------------------------ 1. start latency

// Each variant starts `touch MARK; exec sleep 30` and returns
// { returned, running }: ms until the launcher returned, and until the job
// is running (launcher returned AND the marker exists).
const START_VARIANTS = {
  async shell(dir) {
    const mark = path.join(dir, 'MARK')
    const pidFile = path.join(dir, 'pid')
    const script = `nohup sh -c ${q(`touch ${q(mark)}; exec sleep 30`)} >${q(path.join(dir, 'log'))} 2>&1 & echo $! >${q(pidFile)}`
    const t0 = now()
    const r = spawnSync('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    const returned = now() - t0
    waitForFile(mark)
    const running = now() - t0
    if (r.status !== 0) throw new Error(`baseline shell exited ${r.status}`)
    const pid = Number(fs.readFileSync(pidFile, 'utf8'))
    trackStray(pid)
    killStray(pid)
    return { returned, running }
  },
  async cli(dir) {
    writeConfig(dir)
    const mark = path.join(dir, 'MARK')
    const t0 = now()
    const r = spawnSync(RUN_BG, ['--label', 'b', '--', 'sh', '-c', `touch ${q(mark)}; exec sleep 30`], {
      env: envFor(dir),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const returned = now() - t0
    waitForFile(mark)
    const running = now() - t0
    const id = /^started (\S+) /.exec(r.stdout)?.[1]
    if (r.status !== 0 || !id) throw new Error(`run-bg start failed (${r.status}): ${r.stdout}${r.stderr}`)
    mustRunBg(dir, ['kill', id, '--force'])
    return { returned, running }
  },
  async nodeSpawn(dir) {
    const mark = path.join(dir, 'MARK')
    const fd = fs.openSync(path.join(dir, 'log'), 'a')
    const t0 = now()
    const child = spawnChild('sh', ['-c', `touch ${q(mark)}; exec sleep 30`], { detached: true, stdio: ['ignore', fd, fd] })
    const returned = now() - t0
    waitForFile(mark)
    const running = now() - t0
    fs.closeSync(fd)
    await killChild(child)
    return { returned, running }
  },
  async js(dir) {
    writeConfig(dir)
    const mark = path.join(dir, 'MARK')
    const { job, returned, running } = inHome(dir, () => {
      const t0 = now()
      const job = pm.runBackground(`touch ${q(mark)}; exec sleep 30`)
      const returned = now() - t0
      waitForFile(mark)
      return { job, returned, running: now() - t0 }
    })
    const killed = await inHome(dir, () => pm.killJob(job.jobId, { force: true }))
    if (killed.status !== 'killed') throw new Error(`killJob: ${JSON.stringify(killed)}`)
    return { returned, running }
  },
}

async function benchStart() {
  log(`start latency: ${PLAN.startReps} reps (+${PLAN.warmup} warm-up) × ${Object.keys(START_VARIANTS).length} variants`)
  const samples = Object.fromEntries(Object.keys(START_VARIANTS).map((k) => [k, { returned: [], running: [] }]))
  for (let rep = -PLAN.warmup; rep < PLAN.startReps; rep++) {
    for (const name of rotate(Object.keys(START_VARIANTS), rep)) {
      const dir = tempDir('start')
      const r = await START_VARIANTS[name](dir)
      removeDir(dir)
      if (rep >= 0) {
        samples[name].returned.push(r.returned)
        samples[name].running.push(r.running)
      }
    }
  }
  return samples
}

// ----------------------------------------------------- 2. supervisor idle cost

async function benchIdle() {
  log(`supervisor idle cost: ${PLAN.idleJobs} jobs vs ${PLAN.idleJobs} idle node processes`)
  const home = tempDir('idle')
  writeConfig(home)
  const ids = []
  const nodes = []
  for (let i = 0; i < PLAN.idleJobs; i++) {
    ids.push(startJson(home, ['sleep', '60'], `idle${i}`).jobId)
    nodes.push(spawnChild(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' }))
  }
  await sleep(1000)

  const jobs = readJobs(home)
  const supervisors = ids.map((id) => jobs.find((j) => j.id === id)?.supervisor?.pid)
  // Cross-check the registry against the process table: `<path>/run-bg __supervise <id>`.
  const fromProc = new Map()
  for (const entry of fs.readdirSync('/proc')) {
    const argv = /^\d+$/.test(entry) ? cmdline(entry) : null
    if (argv?.length === 3 && path.basename(argv[0]) === 'run-bg' && argv[1] === '__supervise' && ids.includes(argv[2])) {
      fromProc.set(argv[2], Number(entry))
    }
  }
  check(
    'idle: registry supervisor pids match /proc cmdlines',
    ids.every((id, i) => supervisors[i] && fromProc.get(id) === supervisors[i]),
    JSON.stringify({ registry: supervisors, proc: Object.fromEntries(fromProc) }),
  )
  check('idle: all jobs running', ids.every((id) => jobs.find((j) => j.id === id)?.status === 'running'))

  const pids = { ours: supervisors, node: nodes.map((c) => c.pid) }
  const memory = Object.fromEntries(Object.entries(pids).map(([k, list]) => [k, list.map(procStatus)]))
  const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, list]) => [k, list.map(cpuTicks)]))
  await sleep(PLAN.cpuWindowMs)
  const cpu = Object.fromEntries(Object.entries(pids).map(([k, list]) => [k, list.map((pid, i) => cpuTicks(pid) - cpu0[k][i])]))
  const cpuSinceStart = supervisors.map(cpuTicks)

  mustRunBg(home, ['kill', '--all', '--force'])
  for (const child of nodes) await killChild(child)
  check('idle: kill --all left no job running', readJobs(home).every((j) => FINAL.has(j.status)))
  removeDir(home)
  return { pids, memory, cpuTicksInWindow: cpu, supervisorCpuTicksSinceStart: cpuSinceStart }
}

// ------------------------------------------------------------ 3. log throughput

/**
 * Resolves when `jobs.json` in `home` records job `id` as ended, woken by
 * inotify on `home` only: a watch on the job's directory would wake us for
 * every write into its log (the job timed then shares its cores with our
 * reads of the registry: 1 GiB of `yes` took 1.33× the `cat` pipe's time
 * observed that way, 1.13× observed through `home`, medians of 5).
 */
function whenEnded(home) {
  let id = null
  let settle
  let finished = false
  const done = new Promise((resolve, reject) => {
    settle = { resolve, reject }
  })
  const look = () => {
    const job = id && readJobs(home).find((j) => j.id === id)
    if (job && FINAL.has(job.status)) finish(null, { t: now(), job })
  }
  const watcher = fs.watch(home, look)
  // A safety net only: inotify sees the registry's rename first. Rare, so
  // that the bench's own reads take no CPU from the job it times (the shell
  // baseline has nothing beside it).
  const poll = setInterval(look, 250)
  const timer = setTimeout(() => finish(new Error(`job ${id} did not end in 300 s`)), 300_000)
  function finish(error, value) {
    if (finished) return
    finished = true
    watcher.close()
    clearInterval(poll)
    clearTimeout(timer)
    error ? settle.reject(error) : settle.resolve(value)
  }
  return {
    track(jobId) {
      id = jobId
      look()
      return done
    },
  }
}

/** output.log* of a job: name, size, and first and last byte (to see where rotation cut). */
function logFiles(log) {
  const dir = path.dirname(log)
  return fs
    .readdirSync(dir)
    .filter((f) => /^output\.log(\.\d+)?$/.test(f))
    .map((name) => {
      const fd = fs.openSync(path.join(dir, name), 'r')
      const size = fs.fstatSync(fd).size
      const byteAt = (pos) => {
        const b = Buffer.alloc(1)
        return size && fs.readSync(fd, b, 0, 1, pos) ? b[0] : null
      }
      const file = { name, size, first: byteAt(0), last: byteAt(size - 1) }
      fs.closeSync(fd)
      return file
    })
}

async function runOurs(dir, argv, logs) {
  writeConfig(dir, { logs })
  const ended = whenEnded(dir)
  const t0 = now()
  const { jobId } = startJson(dir, argv, 'tp')
  const waiter = spawnChild(RUN_BG, ['wait', jobId], { env: envFor(dir), stdio: 'ignore' })
  const { t, job } = await ended.track(jobId)
  const waited = await waiter.exited
  const files = logFiles(job.log_path)
  const retained = files.reduce((sum, f) => sum + f.size, 0)
  return { seconds: (t - t0) / 1000, waitSeconds: (waited.t - t0) / 1000, waitCode: waited.code, status: job.status, retained, files }
}

async function benchThroughput(size) {
  const producers = {
    zero: { ours: ['head', '-c', String(size), '/dev/zero'], shell: `head -c ${size} /dev/zero` },
    yes: { ours: ['sh', '-c', `yes | head -c ${size}`], shell: `yes | head -c ${size}` },
  }
  const variants = {
    shell: async (dir, p) => {
      const file = path.join(dir, 'FILE')
      const t0 = now()
      const r = spawnSync('sh', ['-c', `${p.shell} | cat > ${q(file)}`], { stdio: 'ignore' })
      const seconds = (now() - t0) / 1000
      if (r.status !== 0) throw new Error(`baseline pipeline exited ${r.status}`)
      return { seconds, retained: fs.statSync(file).size }
    },
  }
  for (const build of BUILDS) {
    const suffix = build === BUILDS[0] ? '' : `@${build.name}`
    variants[`ours${suffix}`] = (dir, p) => withBuild(build, () => runOurs(dir, p.ours, ROTATING))
    variants[`oursUnbounded${suffix}`] = (dir, p) => withBuild(build, () => runOurs(dir, p.ours, UNBOUNDED))
  }
  const reps = Number(option('log-reps') ?? PLAN.logReps)
  const shuffle = shuffler(Number(option('seed') ?? 1))
  const pairs = Object.keys(producers).flatMap((pname) => Object.keys(variants).map((vname) => [pname, vname]))
  log(`log throughput: ${size / MiB} MiB × ${reps} reps × ${pairs.length} (producer, variant) pairs, shuffled each rep, settled before each sample`)
  const samples = {}
  for (let rep = 0; rep < reps; rep++) {
    for (const [pname, vname] of shuffle(pairs)) {
      const producer = producers[pname]
      const dir = tempDir('log')
      const settled = await settle() // untimed
      const r = { ...(await variants[vname](dir, producer)), settled }
      removeDir(dir)
      ;(samples[`${pname}.${vname}`] ??= []).push(r)
      log(`  rep ${rep} ${pname}.${vname}: ${r.seconds.toFixed(2)} s (load ${settled.load1.toFixed(2)}, settled in ${settled.waitedMs.toFixed(0)} ms)`)
      const what = `log ${pname}.${vname} rep ${rep}`
      if (vname === 'shell') {
        check(`${what}: every byte written`, r.retained === size, `${r.retained}`)
        continue
      }
      check(`${what}: job succeeded, wait exited 0`, r.status === 'success' && r.waitCode === 0, `${r.status}, wait ${r.waitCode}`)
      if (vname.startsWith('oursUnbounded')) {
        check(`${what}: every byte logged`, r.retained === size, `${r.retained}`)
        continue
      }
      const sizes = r.files.map((f) => `${f.name}=${f.size}`).join(' ')
      check(`${what}: each file ≤ max_bytes, at most keep rotated`, r.files.length <= ROTATING.keep + 1 && r.files.every((f) => f.size <= ROTATING.max_bytes), sizes)
      if (pname === 'yes') {
        const rotated = r.files.filter((f) => f.name !== 'output.log')
        const aligned = r.files.every((f) => f.first === 0x79) && rotated.every((f) => f.last === 0x0a)
        check(`${what}: rotated files hold whole lines`, aligned, JSON.stringify(r.files))
      }
    }
  }
  return samples
}

/** The log samples as one build's rows read them: its own `ours*` under the plain names, the shared shell baseline. */
function throughputOf(samples, build) {
  if (!samples) return null
  const suffix = build === BUILDS[0] ? '' : `@${build.name}`
  const out = {}
  for (const p of ['zero', 'yes']) {
    out[`${p}.shell`] = samples[`${p}.shell`]
    out[`${p}.ours`] = samples[`${p}.ours${suffix}`]
    out[`${p}.oursUnbounded`] = samples[`${p}.oursUnbounded${suffix}`]
  }
  return out
}

// ------------------------------------------------------- 3b. footprint

/** The supervisor binary's size, and `run-bg --version` start latency (the CLI's floor). */
async function benchFootprint() {
  const reps = QUICK ? 50 : 200
  log(`footprint: run-bg --version × ${reps} (+${PLAN.warmup} warm-up) per build, interleaved`)
  const latency = Object.fromEntries(BUILDS.map((b) => [b.name, []]))
  for (let rep = -PLAN.warmup; rep < reps; rep++) {
    for (const build of rotate(BUILDS, rep)) {
      const t0 = now()
      const r = spawnSync(build.runBg, ['--version'], { stdio: 'ignore' })
      const ms = now() - t0
      if (r.status !== 0) throw new Error(`${build.runBg} --version exited ${r.status}`)
      if (rep >= 0) latency[build.name].push(ms)
    }
  }
  const floor = []
  for (let rep = 0; rep < reps; rep++) {
    const t0 = now()
    spawnSync('/bin/true', [], { stdio: 'ignore' })
    floor.push(now() - t0)
  }
  return { latency, floor, bytes: Object.fromEntries(BUILDS.map((b) => [b.name, fs.statSync(b.runBg).size])) }
}

// ------------------------------------------------ 3b'. run-bg top's idle cost

/**
 * What `run-bg top` costs while a person only watches: 50 jobs (45 idle,
 * 5 printing a line a second), the view in a tmux session 160×50 (its own
 * server, socket in a temp dir), and the CPU time the view's processes
 * (`run-bg-top` and the `run-bg top` waiting for it) use over a window
 * after it has settled, as % of one core; and the view's RSS. Only this
 * checkout's build: the view is new. Skipped, saying why, without tmux.
 */
async function benchTop() {
  if (spawnSync('tmux', ['-V']).status !== 0) {
    log('top: tmux is not installed; skipped')
    return null
  }
  const viewer = path.join(path.dirname(RUN_BG), 'run-bg-top')
  if (!fs.existsSync(viewer)) throw new Error(`${viewer} missing; run \`node scripts/build.js\``)
  const jobs = 50
  const windowMs = QUICK ? 10_000 : 30_000
  log(`top: idle cost with ${jobs} jobs over ${windowMs / 1000} s, in tmux`)
  const home = tempDir('top')
  writeConfig(home)
  for (let i = 0; i < jobs; i++) {
    const argv = i % 10 === 0 ? ['sh', '-c', 'while :; do echo tick; sleep 1; done'] : ['sleep', '600']
    startJson(home, argv, `top${i}`)
  }
  const socket = path.join(home, 'tmux.sock')
  const tmux = (...args) => spawnSync('tmux', ['-S', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' })
  const started = tmux('new-session', '-d', '-s', 'pm-bench-top', '-x', '160', '-y', '50', `env PROC_MANAGER_HOME=${q(home)} ${q(RUN_BG)} top`)
  if (started.status !== 0) throw new Error(`tmux new-session: ${started.stderr}`)
  try {
    const panePid = Number(tmux('display-message', '-p', '-t', 'pm-bench-top', '#{pane_pid}').stdout.trim())
    const childrenOf = (pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
      } catch {
        return []
      }
    }
    let viewPid = null
    const deadline = now() + 10_000
    while (!viewPid && now() < deadline) {
      viewPid = childrenOf(panePid).find((pid) => cmdline(pid)?.[0]?.endsWith('run-bg-top')) ?? null
      if (!viewPid) await sleep(50)
    }
    check('top: run-bg-top runs under run-bg top', viewPid !== null, `pane pid ${panePid}`)
    if (!viewPid) return null
    // Settled: its first looks (every job's CPU from its start) are done.
    await sleep(3000)
    const screen = tmux('capture-pane', '-p', '-t', 'pm-bench-top').stdout
    check('top: the view shows the 50 jobs', new RegExp(`${jobs} jobs, ${jobs} running`).test(screen), screen.split('\n')[0])
    const pids = [viewPid, panePid]
    const ticks0 = pids.map(cpuTicks)
    const t0 = now()
    await sleep(windowMs)
    const ticks = pids.map((pid, i) => cpuTicks(pid) - ticks0[i])
    const seconds = (now() - t0) / 1000
    const memory = procStatus(viewPid)
    return { jobs, seconds, viewTicks: ticks[0], waiterTicks: ticks[1], percent: ((ticks[0] + ticks[1]) / 100 / seconds) * 100, rssKiB: memory.vmRssKiB }
  } finally {
    tmux('kill-session', '-t', 'pm-bench-top')
    tmux('kill-server')
    mustRunBg(home, ['kill', '--all', '--force'])
    removeDir(home)
  }
}

// ------------------------------------------------ 3c. the installed command

/** `npm pack` of `dir` into `dest`: the tarball's path. */
function npmPack(dir, dest) {
  const r = spawnSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dest], { cwd: dir, encoding: 'utf8', timeout: 180_000 })
  if (r.status !== 0) throw new Error(`npm pack in ${dir} exited ${r.status}: ${r.stderr}`)
  return path.join(dest, JSON.parse(r.stdout)[0].filename)
}

/**
 * What a user's `run-bg` costs: this checkout's root package and its platform
 * package (from the local build) packed and installed offline into an empty
 * project, as __test__/package.test.mjs does. Timed, interleaved: the linked
 * node_modules/.bin/run-bg (a link to bin/run-bg.js, the Node shim, as npm's
 * Windows wrappers need it), `node bin/run-bg.js` (the same shim, run by
 * node without the link and its #! line), and the platform package's run-bg
 * itself, for `--version` and `check <id>` of an ended job; and
 * `npx run-bg --version`, fewer times. (The sh launcher linked before, which
 * execed run-bg without Node, measured 1.47x and 1.22x of the native rows.)
 */
async function benchBin() {
  const platform = createRequire(path.join(ROOT, 'package.json'))('./platform.js')
  const abi = platform.abi()
  const name = platform.platformPackage()
  const manifest = path.join(ROOT, 'npm', abi, 'package.json')
  const addon = path.join(ROOT, `proc-manager.${abi}.node`)
  if (!fs.existsSync(manifest) || !fs.existsSync(addon)) throw new Error(`bin: no platform package to pack for ${abi} (${manifest}, ${addon})`)
  const work = tempDir('bin')
  const stage = path.join(work, 'stage')
  fs.mkdirSync(path.join(stage, 'native'), { recursive: true })
  fs.copyFileSync(manifest, path.join(stage, 'package.json'))
  fs.copyFileSync(path.join(ROOT, 'LICENSE'), path.join(stage, 'LICENSE'))
  fs.copyFileSync(addon, path.join(stage, path.basename(addon)))
  fs.copyFileSync(path.join(ROOT, 'native', 'run-bg'), path.join(stage, 'native', 'run-bg'))
  const tarballs = path.join(work, 'tarballs')
  fs.mkdirSync(tarballs)
  const packs = [npmPack(stage, tarballs), npmPack(ROOT, tarballs)]
  const project = path.join(work, 'project')
  fs.mkdirSync(project)
  fs.writeFileSync(path.join(project, 'package.json'), '{"name":"consumer","version":"1.0.0","private":true}\n')
  const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }
  delete npmEnv.PROC_MANAGER_BINARY_PATH
  delete npmEnv.PROC_MANAGER_SUPERVISOR
  const install = spawnSync('npm', ['install', '--offline', ...packs], { cwd: project, env: npmEnv, encoding: 'utf8', timeout: 300_000 })
  if (install.status !== 0) throw new Error(`npm install --offline of the packed packages exited ${install.status}: ${install.stderr}`)

  const home = tempDir('bin-home')
  writeConfig(home)
  const env = { ...envFor(home), PATH: process.env.PATH }
  delete env.PROC_MANAGER_BINARY_PATH
  delete env.PROC_MANAGER_SUPERVISOR
  const native = path.join(project, 'node_modules', name, 'native', 'run-bg')
  const linked = path.join(project, 'node_modules', '.bin', 'run-bg')
  const shim = path.join(project, 'node_modules', 'proc-manager', 'bin', 'run-bg.js')
  const { jobId } = JSON.parse(spawnSync(native, ['--json', '--label', 'bin', '--', 'echo', 'hi'], { env, encoding: 'utf8' }).stdout)
  spawnSync(native, ['wait', jobId, '--timeout', '30s'], { env, stdio: 'ignore' })
  const variants = {
    native: [native, []],
    linked: [linked, []],
    shim: [process.execPath, [shim]],
  }
  const calls = { version: ['--version'], check: ['check', jobId] }
  const reps = QUICK ? 30 : 100
  log(`bin: packed install in ${project}; --version and check × ${reps} (+${PLAN.warmup} warm-up) per command, interleaved`)
  const out = {}
  for (const call of Object.keys(calls)) for (const v of Object.keys(variants)) out[`${call}.${v}`] = []
  const said = (cmd, pre) => spawnSync(cmd, [...pre, 'check', jobId], { env, encoding: 'utf8' }).stdout
  check('bin: the linked command and the Node shim print what run-bg prints', said(linked, []) === said(native, []) && said(process.execPath, [shim]) === said(native, []))
  for (let rep = -PLAN.warmup; rep < reps; rep++) {
    for (const [call, args] of rotate(Object.entries(calls), rep)) {
      for (const [v, [cmd, pre]] of rotate(Object.entries(variants), rep)) {
        const t0 = now()
        const r = spawnSync(cmd, [...pre, ...args], { env, cwd: project, stdio: 'ignore' })
        const ms = now() - t0
        if (r.status !== 0) throw new Error(`bin: ${v} ${args.join(' ')} exited ${r.status ?? r.signal}`)
        if (rep >= 0) out[`${call}.${v}`].push(ms)
      }
    }
  }
  out.npx = []
  for (let rep = 0; rep < (QUICK ? 5 : 15); rep++) {
    const t0 = now()
    const r = spawnSync('npx', ['--offline', 'run-bg', '--version'], { env: { ...npmEnv, ...env }, cwd: project, stdio: 'ignore' })
    if (r.status !== 0) throw new Error(`bin: npx run-bg --version exited ${r.status ?? r.signal}`)
    out.npx.push(now() - t0)
  }
  return out
}

// ----------------------------------------------------------------------- 4. tail

const TAIL_TEXT = ' some text for the tail benchmark, sixty bytes\n'
const tailLine = (i) => `line ${String(i).padStart(9, '0')}${TAIL_TEXT}`
const LINE_BYTES = tailLine(0).length
// Runs inside the job: writes `argv[1]` numbered lines of LINE_BYTES, in 1 MiB-ish chunks.
const TAIL_GENERATOR = `
const fs = require('fs'), n = Number(process.argv[1]), text = ${JSON.stringify(TAIL_TEXT)}
const L = 14 + text.length, per = 16384, buf = Buffer.alloc(per * L)
for (let k = 0; k < per; k++) buf.write('line 000000000' + text, k * L, 'latin1')
for (let s = 0; s < n; s += per) {
  const m = Math.min(per, n - s)
  for (let k = 0; k < m; k++) for (let v = s + k, o = k * L + 13, d = 0; d < 9; d++, v = Math.floor(v / 10)) buf[o - d] = 48 + (v % 10)
  for (let off = 0; off < m * L; ) off += fs.writeSync(1, buf, off, m * L - off)
}`

function tailInJs(file, n) {
  const fd = fs.openSync(file, 'r')
  try {
    const size = fs.fstatSync(fd).size
    const buf = Buffer.alloc(Math.min(size, 64 * 1024))
    fs.readSync(fd, buf, 0, buf.length, size - buf.length)
    const lines = buf.toString('utf8').split('\n')
    if (lines.at(-1) === '') lines.pop()
    return lines.slice(-n)
  } finally {
    fs.closeSync(fd)
  }
}

async function benchTail(size) {
  const home = tempDir('tail')
  writeConfig(home, { logs: UNBOUNDED })
  const lines = Math.floor(size / LINE_BYTES)
  log(`tail: writing a ${((lines * LINE_BYTES) / MiB).toFixed(0)} MiB log through a real job`)
  const t0 = now()
  const { jobId, logPath } = startJson(home, [process.execPath, '-e', TAIL_GENERATOR, String(lines)], 'tailgen')
  const waited = runBg(home, ['wait', jobId])
  const genSeconds = (now() - t0) / 1000
  if (waited.status !== 0) throw new Error(`tail generator job failed: ${waited.stdout}${waited.stderr}`)
  check('tail: log holds every byte', fs.statSync(logPath).size === lines * LINE_BYTES, `${fs.statSync(logPath).size}`)

  const expected = Array.from({ length: 20 }, (_, i) => tailLine(lines - 20 + i).slice(0, -1))
  const same = (got) => JSON.stringify(got) === JSON.stringify(expected)
  const cli = runBg(home, ['check', jobId]).stdout.trimEnd().split('\n')
  check('tail: tail -n 20 gives the last lines', same(spawnSync('tail', ['-n', '20', logPath], { encoding: 'utf8' }).stdout.trimEnd().split('\n')))
  check('tail: run-bg check gives the last lines', same(cli.slice(1)), cli[0])
  check('tail: checkJob gives the last lines', same(inHome(home, () => pm.checkJob(jobId)).tail))
  check('tail: JS read gives the last lines', same(tailInJs(logPath, 20)))

  const variants = {
    tail: () => spawnSync('tail', ['-n', '20', logPath], { stdio: ['ignore', 'pipe', 'ignore'] }),
    cli: () => spawnSync(RUN_BG, ['check', jobId], { env: envFor(home), stdio: ['ignore', 'pipe', 'ignore'] }),
    js: () => pm.checkJob(jobId), // inside inHome() below
    jsRead: () => tailInJs(logPath, 20),
  }
  log(`tail: ${PLAN.tailReps} reps (+${PLAN.warmup} warm-up) × ${Object.keys(variants).length} variants`)
  const samples = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
  inHome(home, () => {
    for (let rep = -PLAN.warmup; rep < PLAN.tailReps; rep++) {
      for (const name of rotate(Object.keys(variants), rep)) {
        const t = now()
        variants[name]()
        if (rep >= 0) samples[name].push(now() - t)
      }
    }
  })
  removeDir(home)
  return { samples, genSeconds, lines, bytes: lines * LINE_BYTES }
}

// ------------------------------------------------------------------ 5. kill speed

/** Alive: /proc/<pid>/stat still shows the same start ticks (field 22) and is no zombie. */
function isAlive(pid, ticks) {
  const f = procStat(pid)
  return f != null && f[19] === ticks && f[0] !== 'Z' && f[0] !== 'X'
}
const comm = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}
const numericProcEntries = () => fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number)

/** Live processes whose environment holds PROC_MANAGER_JOB=<jobId>: { pid, ticks, comm }. */
function cookieCarriers(jobId) {
  const cookie = `PROC_MANAGER_JOB=${jobId}`
  const found = []
  for (const pid of numericProcEntries()) {
    let env
    try {
      env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1')
    } catch {
      continue
    }
    const f = procStat(pid)
    if (f && f[0] !== 'Z' && env.split('\0').includes(cookie)) found.push({ pid, ticks: f[19], comm: comm(pid) })
  }
  return found
}

/** Live members of process group `pgid`: { pid, ticks, comm }. */
function groupMembers(pgid) {
  const found = []
  for (const pid of numericProcEntries()) {
    const f = procStat(pid)
    if (f && f[0] !== 'Z' && Number(f[2]) === pgid) found.push({ pid, ticks: f[19], comm: comm(pid) })
  }
  return found
}

/** Polls `list()` (fresh each time) until `n` of its processes are `sleep`s; returns the last list. */
async function waitForSleeps(list, n, what, timeoutMs = 20_000) {
  const deadline = now() + timeoutMs
  for (;;) {
    const procs = list()
    if (procs.filter((p) => p.comm === 'sleep').length >= n) return procs
    if (now() > deadline) throw new Error(`${what}: only ${procs.length} processes (${procs.filter((p) => p.comm === 'sleep').length} sleeps) after ${timeoutMs} ms`)
    await sleep(10)
  }
}

/** A `sleep 600` left in the background by `sh -c '… &'` (so init, not us, reaps it); returns it once it runs sleep. */
async function straySleep() {
  const r = spawnSync('sh', ['-c', 'sleep 600 </dev/null >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' })
  const pid = Number(r.stdout.trim())
  if (r.status !== 0 || !pid) throw new Error(`could not start a stray sleep: ${r.stderr}`)
  trackStray(pid) // exec keeps the start time: the identity recorded now stays valid
  const deadline = now() + 5000
  while (cmdline(pid)?.[0] !== 'sleep') {
    if (now() > deadline) throw new Error(`stray ${pid} never ran sleep`)
    await sleep(1)
  }
  return { pid, ticks: strayPids.get(pid) }
}

const TREE_SCRIPTS = {
  plain: (n) => `for i in $(seq ${n}); do sleep 600 & done; wait`,
  // dash keeps each inner sh (it has a trap), so the tree is 1 + 2n processes; the
  // ignored SIGTERM is inherited by the sleeps across exec.
  ignoresTerm: (n) => `for i in $(seq ${n}); do sh -c "trap \\"\\" TERM; sleep 600" & done; wait`,
}

/** Runs `run-bg kill <id> --grace <grace>` on a fresh job of `argv` once `ready(jobId)` gives its processes. */
async function killOurs(argv, grace, ready, what) {
  const home = tempDir('kill')
  writeConfig(home)
  try {
    const { jobId } = startJson(home, argv, 'k')
    const procs = await ready(jobId)
    const t0 = now()
    const r = runBg(home, ['kill', jobId, '--grace', grace])
    const ms = now() - t0
    const survivors = procs.filter((p) => isAlive(p.pid, p.ticks))
    const status = readJobs(home).find((j) => j.id === jobId)?.status
    check(`${what}: kill exited 0, job killed, none of ${procs.length} recorded processes alive`, r.status === 0 && status === 'killed' && !survivors.length,
      `exit ${r.status} ${r.stderr.trim()}, status ${status}, alive ${survivors.map((p) => p.pid).join(' ')}`)
    return { ms, procs: procs.length }
  } finally {
    removeDir(home)
  }
}

/** Signals each recorded process by pid (if it still is that process). */
function signalEach(procs, signal) {
  for (const p of procs) {
    if (isAlive(p.pid, p.ticks)) {
      try {
        process.kill(p.pid, signal)
      } catch {}
    }
  }
}

/** Baseline for a tree: SIGTERM to each process, poll /proc; after `graceMs` SIGKILL to what is left, poll. */
function killPoll(procs, graceMs) {
  const t0 = now()
  signalEach(procs, 'SIGTERM')
  let alive = procs
  while ((alive = alive.filter((p) => isAlive(p.pid, p.ticks))).length && now() - t0 < graceMs) {}
  if (alive.length) {
    signalEach(alive, 'SIGKILL')
    while ((alive = alive.filter((p) => isAlive(p.pid, p.ticks))).length) {
      if (now() - t0 > graceMs + 10_000) throw new Error(`baseline: ${alive.length} processes survive SIGKILL`)
    }
  }
  return now() - t0
}

async function benchKill() {
  const n = PLAN.treeSize
  log(`kill: sleep job ${PLAN.killReps} reps, ${n}-process trees ${PLAN.treeReps} reps (+1 warm-up) × 2 variants × 2 kinds`)
  const samples = {}
  const push = (key, v) => (samples[key] ??= []).push(v)

  const single = {
    async ours() {
      const r = await killOurs(['sleep', '600'], '5s', async (jobId) => {
        const [main] = await waitForSleeps(() => cookieCarriers(jobId), 1, 'sleep job')
        return [main]
      }, 'kill sleep job')
      return r.ms
    },
    async baseline() {
      const s = await straySleep()
      const ms = killPoll([s], 10_000)
      strayPids.delete(s.pid)
      return ms
    },
  }
  for (let rep = -1; rep < PLAN.killReps; rep++) {
    for (const name of rotate(Object.keys(single), rep)) {
      const ms = await single[name]()
      if (rep >= 0) push(`single.${name}`, ms)
    }
  }

  for (const [kind, script] of Object.entries(TREE_SCRIPTS)) {
    const graceMs = 1000
    const variants = {
      async ours() {
        const r = await killOurs(['sh', '-c', script(n)], `${graceMs}ms`, (jobId) => waitForSleeps(() => cookieCarriers(jobId), n, `${kind} tree job`), `kill ${kind} tree`)
        return r
      },
      async baseline() {
        const child = spawnChild('sh', ['-c', script(n)], { detached: true, stdio: 'ignore' })
        const members = () => {
          const found = groupMembers(child.pid)
          for (const p of found) strayPids.set(p.pid, p.ticks) // cleanup kills them by pid, should anything throw
          return found
        }
        const procs = await waitForSleeps(members, n, `${kind} baseline tree`)
        const ms = killPoll(procs, graceMs)
        for (const p of procs) strayPids.delete(p.pid)
        await killChild(child)
        return { ms, procs: procs.length }
      },
    }
    for (let rep = -1; rep < PLAN.treeReps; rep++) {
      for (const name of rotate(Object.keys(variants), rep)) {
        const r = await variants[name]()
        log(`  ${kind}.${name} rep ${rep}: ${r.ms.toFixed(0)} ms, ${r.procs} processes`)
        if (rep < 0) continue
        push(`${kind}.${name}`, r.ms)
        push(`${kind}.${name}.procs`, r.procs)
        if (kind === 'ignoresTerm' && name === 'ours') check(`kill ${kind} tree: waited out the grace period`, r.ms >= graceMs, `${r.ms.toFixed(0)} ms`)
      }
    }
  }
  return samples
}

// --------------------------------------------------------- 6. notification latency

/** An HTTP listener in a child process; it appends `{at: Date.now(), url, body}` per request and answers `status`. */
async function startListener({ status = 200 } = {}) {
  const dir = tempDir('listener')
  const record = path.join(dir, 'requests.jsonl')
  const script = `
    const http = require('node:http'), fs = require('node:fs')
    const server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (d) => (body += d))
      req.on('end', () => {
        fs.appendFileSync(${JSON.stringify(record)}, JSON.stringify({ at: Date.now(), url: req.url, body }) + '\\n')
        res.statusCode = ${status}
        res.end(${status} === 200 ? 'ok' : '{"error":"busy"}')
      })
    })
    server.listen(0, '127.0.0.1', () => console.log(server.address().port))
  `
  const child = spawnChild(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())))
    child.exited.then(({ code }) => reject(new Error(`listener exited ${code}`)))
  })
  const requests = () => {
    try {
      return fs.readFileSync(record, 'utf8').split('\n').filter(Boolean).map((l) => {
        const r = JSON.parse(l)
        return { ...r, json: JSON.parse(r.body) }
      })
    } catch {
      return []
    }
  }
  return { url: `http://127.0.0.1:${port}/trigger`, port, child, dir, requests }
}

async function waitForRequest(listener, jobId, timeoutMs = 10_000) {
  const deadline = now() + timeoutMs
  for (;;) {
    const hit = listener.requests().find((r) => r.json?.data?.jobId === jobId)
    if (hit) return hit
    if (now() > deadline) throw new Error(`no request for ${jobId} within ${timeoutMs} ms`)
    await sleep(5)
  }
}

function postJson(url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume()
      res.on('end', resolve)
    })
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

const readMark = (file) => Number(fs.readFileSync(file, 'utf8').trim())
const JOB_WITH_MARK = (mark) => `sleep 0.2; date +%s%3N > ${q(mark)}`

async function benchNotify() {
  log(`notification latency: ${PLAN.notifyReps} reps (+${PLAN.warmup} warm-up) × 2 variants`)
  const listener = await startListener()
  const samples = { ours: [], oursEndedAt: [], endedAtAfterMark: [], baseline: [] }
  const ids = []
  const variants = {
    async ours() {
      const home = tempDir('notify')
      writeConfig(home, { notify: { url: listener.url } })
      const mark = path.join(home, 'MARK')
      try {
        const { jobId } = startJson(home, ['sh', '-c', JOB_WITH_MARK(mark)], 'n')
        ids.push(jobId)
        const request = await waitForRequest(listener, jobId)
        const checked = JSON.parse(runBg(home, ['check', jobId, '--json']).stdout)
        const job = readJobs(home).find((j) => j.id === jobId)
        // The supervisor leaves once the notification is recorded as delivered: let it, before its home goes.
        const deadline = now() + 5000
        while (job?.supervisor && isAlive(job.supervisor.pid, String(job.supervisor.start_ticks)) && now() < deadline) await sleep(5)
        check(`notify ${jobId}: success announced, endedAt recorded`, request.json.data.status === 'success' && checked.endedAt > 0, `${request.json.data.status} ${checked.endedAt}`)
        const markAt = readMark(mark)
        return { latency: request.at - markAt, fromEndedAt: request.at - checked.endedAt, endedAtAfterMark: checked.endedAt - markAt }
      } finally {
        removeDir(home)
      }
    },
    async baseline() {
      const dir = tempDir('notify-base')
      const mark = path.join(dir, 'MARK')
      try {
        const child = spawnChild('sh', ['-c', JOB_WITH_MARK(mark)], { stdio: 'ignore' })
        await child.exited
        const token = `base-${path.basename(dir)}`
        await postJson(listener.url, { source: 'bench', data: { jobId: token } })
        const request = await waitForRequest(listener, token)
        return { latency: request.at - readMark(mark) }
      } finally {
        removeDir(dir)
      }
    },
  }
  try {
    for (let rep = -PLAN.warmup; rep < PLAN.notifyReps; rep++) {
      for (const name of rotate(Object.keys(variants), rep)) {
        const r = await variants[name]()
        if (rep < 0) continue
        samples[name].push(r.latency)
        if (name === 'ours') {
          samples.oursEndedAt.push(r.fromEndedAt)
          samples.endedAtAfterMark.push(r.endedAtAfterMark)
        }
      }
    }
    await sleep(300) // a duplicate would show up by now
    const counts = ids.map((id) => listener.requests().filter((r) => r.json?.data?.jobId === id).length)
    check('notify: each job announced exactly once', counts.every((c) => c === 1), JSON.stringify(counts))
  } finally {
    await killChild(listener.child)
    removeDir(listener.dir)
  }
  return samples
}

// ----------------------------------------------------------- 8. readiness (issue 15)

// A dev server: listens on PORT after DELAY ms and prints when, by its own clock.
const READY_SERVER = `const [port, delay] = process.argv.slice(1)
setTimeout(() => require('node:net').createServer(() => {}).listen(Number(port), '127.0.0.1', () => console.log('listening at ' + Date.now())), Number(delay))`

/** A port nothing listens on (bound, then released). */
function freePortNow() {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** Whether the build being measured (`RUN_BG`) knows a start option: a baseline may predate it. */
const buildHasOption = (option) => spawnSync(RUN_BG, ['--help'], { encoding: 'utf8' }).stdout.includes(option)

/**
 * `--yield 30s --ready-port`: how long after the port opened the supervisor
 * recorded readyAt and `run-bg` returned (wall clocks of the same machine);
 * and the supervisor's CPU (utime+stime) over `probeWindowMs` of probing a
 * port that never opens, next to an idle supervisor's over the same window.
 */
async function benchReady() {
  if (!buildHasOption('--ready-port')) {
    log('readiness: this build has no --ready-port; skipped')
    return null
  }
  log(`readiness: ${PLAN.readyReps} reps (+${PLAN.warmup} warm-up), then ${PLAN.probeWindowMs / 1000} s of probing`)
  const samples = { readyAt: [], returned: [] }
  for (let rep = -PLAN.warmup; rep < PLAN.readyReps; rep++) {
    const home = tempDir('ready')
    writeConfig(home)
    try {
      const port = await freePortNow()
      const r = runBg(home, ['--yield', '30s', '--ready-port', String(port), '--json', '--', process.execPath, '-e', READY_SERVER, String(port), '500'])
      const returned = Date.now()
      const out = JSON.parse(r.stdout)
      const listened = Number(/listening at (\d+)/.exec(fs.readFileSync(out.logPath, 'utf8'))?.[1])
      check(`ready ${out.jobId}: ready while running`, r.status === 0 && out.status === 'running' && out.readyAt > 0 && listened > 0, r.stdout.slice(0, 200))
      if (rep >= 0) {
        samples.readyAt.push(out.readyAt - listened)
        samples.returned.push(returned - listened)
      }
      mustRunBg(home, ['kill', out.jobId, '--force'])
    } finally {
      removeDir(home)
    }
  }
  const home = tempDir('ready-probe')
  writeConfig(home)
  try {
    const port = await freePortNow()
    const probe = JSON.parse(mustRunBg(home, ['--json', '--label', 'probing', '--ready-port', String(port), '--', 'sleep', '60']).stdout)
    const idle = startJson(home, ['sleep', '60'], 'idle')
    await sleep(500)
    const jobs = readJobs(home)
    const pids = [probe.jobId, idle.jobId].map((id) => jobs.find((j) => j.id === id)?.supervisor?.pid)
    const before = pids.map(cpuTicks)
    await sleep(PLAN.probeWindowMs)
    const ticks = pids.map((pid, i) => cpuTicks(pid) - before[i])
    check('ready: the probed port never opened', !readJobs(home).find((j) => j.id === probe.jobId)?.ready_at)
    mustRunBg(home, ['kill', '--all', '--force'])
    return { ...samples, probeTicks: [ticks[0]], idleTicks: [ticks[1]] }
  } finally {
    removeDir(home)
  }
}

// ------------------------------------------------------------- 7. snapshot speed

function compileStatloop() {
  const r = spawnSync('gcc', ['-O2', '-o', STATLOOP, STATLOOP_SRC], { encoding: 'utf8' })
  if (r.error || r.status !== 0) throw new Error(`gcc -O2 -o ${STATLOOP} ${STATLOOP_SRC} failed: ${r.error?.message ?? r.stderr}`)
}

/** One run of the C loop: average ms per full pass over /proc, and how many processes it read. */
function statloop(...args) {
  const r = spawnSync(STATLOOP, [String(PLAN.statPasses), ...args], { encoding: 'utf8' })
  const m = /avg_us=([\d.]+) procs=(\d+)/.exec(r.stdout)
  if (r.status !== 0 || !m) throw new Error(`statloop failed (${r.status}): ${r.stdout}${r.stderr}`)
  return { ms: Number(m[1]) / 1000, procs: Number(m[2]) }
}

function jsStatLoop() {
  let procs = 0
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      fs.readFileSync(`/proc/${entry}/stat`)
      procs++
    } catch {}
  }
  return procs
}

async function benchSnapshot() {
  const extra = PLAN.snapExtra
  const home = tempDir('snap')
  writeConfig(home)
  log(`snapshot: starting ${extra} extra sleep processes`)
  const sleeps = []
  try {
    for (let i = 0; i < extra; i++) sleeps.push(spawnChild('sleep', ['600'], { detached: false, stdio: 'ignore' }))
    const deadline = now() + 60_000
    while (!sleeps.every((c) => cmdline(c.pid)?.[0] === 'sleep')) {
      if (now() > deadline) throw new Error('extra sleeps did not start in 60 s')
      await sleep(20)
    }
    const visible = { snapshot: [], ps: [], c: [], cCmdline: [], js: [] }
    const variants = {
      snapshot: () =>
        inHome(home, () => {
          const t = now()
          const s = pm.snapshot()
          const ms = now() - t
          visible.snapshot.push(s.processes.length)
          return { ms, s }
        }),
      cli: () => {
        const t = now()
        const r = spawnSync(RUN_BG, ['ps', '--json'], { env: envFor(home), stdio: ['ignore', 'ignore', 'pipe'] })
        const ms = now() - t
        if (r.status !== 0) throw new Error(`run-bg ps --json exited ${r.status}: ${r.stderr}`)
        return { ms }
      },
      ps: () => {
        const t = now()
        const r = spawnSync('ps', ['-eo', 'pid,ppid,rss,lstart,args'], { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * MiB })
        const ms = now() - t
        if (r.status !== 0) throw new Error(`ps exited ${r.status}`)
        visible.ps.push(r.stdout.toString().trimEnd().split('\n').length - 1)
        return { ms }
      },
      c: () => {
        const r = statloop()
        visible.c.push(r.procs)
        return r
      },
      cCmdline: () => {
        const r = statloop('--cmdline')
        visible.cCmdline.push(r.procs)
        return r
      },
      js: () => {
        const t = now()
        visible.js.push(jsStatLoop())
        return { ms: now() - t }
      },
    }
    log(`snapshot: ${PLAN.snapReps} reps (+${PLAN.warmup} warm-up) × ${Object.keys(variants).length} variants, C loop ${PLAN.statPasses} passes per rep`)
    const samples = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
    let last = null
    for (let rep = -PLAN.warmup; rep < PLAN.snapReps; rep++) {
      for (const name of rotate(Object.keys(variants), rep)) {
        const r = variants[name]()
        if (r.s) last = r.s
        if (rep >= 0) samples[name].push(r.ms)
      }
    }
    const seen = new Map(last.processes.map((p) => [p.pid, p]))
    const missing = sleeps.filter((c) => seen.get(c.pid)?.command !== 'sleep 600')
    check(`snapshot: lists all ${extra} extra sleeps as "sleep 600"`, !missing.length, `missing ${missing.length}`)
    check('snapshot: every variant saw the extra processes', Object.values(visible).every((list) => list.every((k) => k >= extra)), JSON.stringify(Object.fromEntries(Object.entries(visible).map(([k, v]) => [k, stats(v)?.median]))))
    return { samples, visible: Object.fromEntries(Object.entries(visible).map(([k, v]) => [k, stats(v)])) }
  } finally {
    await Promise.all(sleeps.map(killChild))
    removeDir(home)
  }
}

// ------------------------------------------------------ 9. queue hand-over

// A queue of max_parallel 1 holds a blocker and N jobs; once the blocker is
// let go, each job's supervisor starts the next when its job ends. A sample
// is one hand-over: the next job's recorded startedAt − the previous one's
// endedAt (both the core's clock), and the next job's first command
// (`date +%s%3N`) − that endedAt: when it really runs.
async function benchQueue() {
  // A baseline from before queues (issue 16) has no rows here, as with readiness.
  if (!buildHasOption('--queue')) {
    log('queue hand-over: this build has no --queue; skipped')
    return null
  }
  const n = QUICK ? 10 : 30
  log(`queue hand-over: ${n} jobs through a queue of max_parallel 1`)
  const home = tempDir('queue')
  writeConfig(home, { queues: { q: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  try {
    mustRunBg(home, ['--queue', 'q', '--', 'sh', '-c', `while [ ! -e ${q(go)} ]; do sleep 0.01; done`])
    const ids = []
    for (let i = 0; i < n; i++) {
      const ack = JSON.parse(mustRunBg(home, ['--queue', 'q', '--json', '--', 'sh', '-c', `date +%s%3N > ${q(home)}/mark-$PROC_MANAGER_JOB`]).stdout)
      ids.push(ack.jobId)
    }
    fs.writeFileSync(go, '')
    mustRunBg(home, ['wait', ...ids, '--timeout', '120s'])
    const jobs = readJobs(home).filter((j) => ids.includes(j.id)).sort((a, b) => a.started_at - b.started_at)
    check('queue: every job ran, one at a time', jobs.length === n && jobs.every((j, i) => j.status === 'success' && (i === 0 || j.started_at >= jobs[i - 1].ended_at)))
    const started = []
    const running = []
    for (let i = 1; i < jobs.length; i++) {
      started.push(jobs[i].started_at - jobs[i - 1].ended_at)
      running.push(Number(fs.readFileSync(path.join(home, `mark-${jobs[i].id}`), 'utf8')) - jobs[i - 1].ended_at)
    }
    return { started, running }
  } finally {
    removeDir(home)
  }
}

// ------------------------------------------------------------ 10. at scale

// N running `sleep` jobs in one home (registry.max_jobs left at its 200, so
// from N = 1,000 the registry is over its cap): each start, `list --json`,
// every supervisor's PSS once all run, then one `kill --all`. What one job
// costs must not grow with N (issue 25: kill --all took 75 ms a job at 1,000).
const SCALE_NS = (option('scale') ?? (QUICK ? '10,100' : '10,100,1000')).split(',').map(Number)

async function benchScale() {
  if (SCALE_NS.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--scale: give job counts, e.g. --scale=10,100,1000`)
  const pueue = spawnSync('sh', ['-c', 'command -v pueue'], { encoding: 'utf8' }).stdout.trim()
  if (!pueue) log('scale: pueue is not installed; its rows are skipped')
  const out = {}
  for (const n of SCALE_NS) {
    log(`scale: ${n} sleep jobs: start each, list, PSS per supervisor, kill --all`)
    const home = tempDir(`scale${n}`)
    writeConfig(home)
    try {
      const start = []
      const ids = []
      let lastStart = now()
      for (let i = 0; i < n; i++) {
        const t = now()
        ids.push(startJson(home, ['sleep', '600'], `s${i}`).jobId)
        start.push(now() - t)
        lastStart = now()
      }
      const list = []
      for (let rep = 0; rep < 5; rep++) {
        const t = now()
        const r = mustRunBg(home, ['list', '--json'], { maxBuffer: 256 * MiB })
        list.push(now() - t)
        if (rep === 0) check(`scale ${n}: list shows every job running`, JSON.parse(r.stdout).filter((j) => j.status === 'running').length === n)
      }
      // Settled: 7 s after its start a supervisor looks for new processes
      // once every 5 s, and each look's code is resident until it is
      // released 100 ms later; of two reads 250 ms apart the lower is the
      // footprint between looks.
      await sleep(Math.max(0, lastStart + 8000 - now()))
      const jobs = readJobs(home)
      const supervisors = ids.map((id) => jobs.find((j) => j.id === id)?.supervisor?.pid).filter(Boolean)
      const first = supervisors.map(procStatus)
      await sleep(250)
      const memory = supervisors.map(procStatus).map((m, i) => (m.pssKiB <= first[i].pssKiB ? m : first[i]))
      const pss = memory.map((m) => m.pssKiB / 1024)
      const anon = memory.map((m) => m.rssAnonKiB / 1024)
      check(`scale ${n}: a supervisor for every job`, pss.length === n && pss.every((p) => p > 0))
      const t = now()
      const kill = runBg(home, ['kill', '--all', '--json'], { maxBuffer: 256 * MiB, timeout: 600_000 })
      const killMs = now() - t
      let reported = []
      try {
        reported = JSON.parse(kill.stdout)
      } catch {}
      check(`scale ${n}: kill --all exits 0, each job reported once`, kill.status === 0 && reported.length === n && new Set(reported.map((v) => v.jobId)).size === n, `exit ${kill.status}, ${reported.length} reported; ${kill.stderr.split('\n').slice(0, 3).join(' / ')}`)
      out[n] = { start, list, pss, anon, killMs, killPerJob: killMs / n, ...(await scaleAfterSupervisorsDied(n)), ...(await scaleOrphansKill(n)), ...(await scaleKillNotifying(n)) }
    } finally {
      removeDir(home)
    }
  }
  return out
}

/** Polls `predicate` every 20 ms until it holds; throws after `timeoutMs`. */
async function waitUntil(predicate, timeoutMs) {
  const deadline = now() + timeoutMs
  while (!predicate()) {
    if (now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`)
    await sleep(20)
  }
}

/**
 * SIGKILLs each recorded process that still lives (only what this bench's
 * starts made, each checked by its start time before the signal) and waits
 * until none does: dead, or a zombie nobody reaped yet (isAlive tells these
 * from the living).
 */
async function sigkillRecorded(recorded) {
  const ours = recorded.filter((who) => who && who.pid > 1)
  const alive = (who) => isAlive(who.pid, String(who.start_ticks))
  for (const who of ours) if (alive(who)) process.kill(who.pid, 'SIGKILL')
  await waitUntil(() => !ours.some(alive), 30_000)
}

/** How long the first `list` takes once supervisors died; it must find all `n` jobs `status`. */
function timedFirstLook(home, n, status) {
  const t = now()
  const listed = JSON.parse(mustRunBg(home, ['list', '--json'], { maxBuffer: 256 * MiB }).stdout)
  const ms = now() - t
  const found = listed.filter((j) => j.status === status).length
  check(`scale ${n}: the first look after the supervisors died finds each job ${status}`, found === n, `${found} of ${n} ${status}`)
  return ms
}

// N jobs whose supervisors and processes were SIGKILLed (an OOM kill, a
// crash): the first look (`list`) records every one `lost`, and `prune` then
// forgets them. Each must cost the same per job at any N (issue 25: a look
// and a registry rewrite per job made both quadratic).
async function scaleAfterSupervisorsDied(n) {
  const home = tempDir(`scale-lost${n}`)
  writeConfig(home)
  try {
    for (let i = 0; i < n; i++) startJson(home, ['sleep', '600'], `l${i}`)
    await sigkillRecorded(readJobs(home).flatMap((j) => [j.supervisor, j.main]))
    const lookMs = timedFirstLook(home, n, 'lost')
    const t = now()
    const pruned = runBg(home, ['prune', '--json'], { maxBuffer: 256 * MiB })
    const pruneMs = now() - t
    check(`scale ${n}: prune after them exits 0`, pruned.status === 0, pruned.stderr.trim())
    return { lostLookPerJob: lookMs / n, prunePerJob: pruneMs / n }
  } finally {
    removeDir(home)
  }
}

// N jobs whose supervisors alone were SIGKILLed: their `sleep`s run on,
// orphaned. The first look (`list`) hands each to a watcher of its own;
// `orphans --kill` then kills them all and records them in one write, and
// the watchers see it and go. Issue 25: each watcher parsed the whole
// registry as it started and looked over /proc as it ended, so 400 orphans
// cost 6 ms a job to look at and 5 to kill (1.1 and 1.5 at 100).
async function scaleOrphansKill(n) {
  const home = tempDir(`scale-orphans${n}`)
  // Every killed job stays in the registry to be counted.
  writeConfig(home, { registry: { max_jobs: n } })
  try {
    for (let i = 0; i < n; i++) startJson(home, ['sleep', '600'], `o${i}`)
    const jobs = readJobs(home)
    const mains = jobs.map((j) => j.main).filter((who) => who && who.pid > 1)
    const alive = (who) => isAlive(who.pid, String(who.start_ticks))
    await sigkillRecorded(jobs.map((j) => j.supervisor))
    const lookMs = timedFirstLook(home, n, 'orphaned')
    let t = now()
    const killed = runBg(home, ['orphans', '--kill', '--json'], { maxBuffer: 256 * MiB, timeout: 600_000 })
    const killMs = now() - t
    let report = {}
    try {
      report = JSON.parse(killed.stdout)
    } catch {}
    check(`scale ${n}: orphans --kill exits 0 and kills every orphan`, killed.status === 0 && report.killed?.length === n, `exit ${killed.status}, ${report.killed?.length} killed; ${killed.stderr.split('\n').slice(0, 3).join(' / ')}`)
    check(`scale ${n}: no orphan's process is left`, !mains.some(alive))
    const ended = readJobs(home).filter((j) => j.status === 'killed').length
    check(`scale ${n}: every orphaned job recorded killed`, ended === n, `${ended} of ${n}`)
    t = now()
    await waitUntil(() => !busyFor(home), 30_000).catch(() => {})
    const settledMs = now() - t
    check(`scale ${n}: every watcher gone within 30 s of orphans --kill`, !busyFor(home))
    return { orphanLookPerJob: lookMs / n, orphansKillPerJob: killMs / n, watchersGoneMs: settledMs }
  } finally {
    removeDir(home)
  }
}

// N jobs killed at once with notifications on, to a service that answers
// 503 (each event tried 3 times, 0.25 and 0.5 s apart, then given up): how
// long from `kill --all` until every supervisor is gone (each waits for its
// notifier) and how much CPU the machine spent meanwhile. Issue 25: each
// attempt rewrote the whole registry under its lock, so 1,000 jobs took
// 520 s at load 1,600.
async function scaleKillNotifying(n) {
  const listener = await startListener({ status: 503 })
  const home = tempDir(`scale-notify${n}`)
  // No event held back by the pace: every one is tried at once; no job
  // forgotten over the cap, so that each one's notification can be read.
  writeConfig(home, { notify: { url: listener.url, max_per_minute: 100_000, retry_for_ms: 5000 }, registry: { max_jobs: Math.max(200, n) } })
  try {
    for (let i = 0; i < n; i++) startJson(home, ['sleep', '600'], `n${i}`)
    const supervisors = readJobs(home).map((j) => j.supervisor).filter((who) => who && who.pid > 1)
    const cpuBefore = machineCpuSeconds()
    const t = now()
    const kill = runBg(home, ['kill', '--all'], { maxBuffer: 256 * MiB, timeout: 600_000 })
    check(`scale ${n}: kill --all with notifications on exits 0`, kill.status === 0, kill.stderr.split('\n').slice(0, 3).join(' / '))
    // Looked at every 250 ms: the looks' own CPU stays out of the count.
    let left = supervisors
    while ((left = left.filter((who) => isAlive(who.pid, String(who.start_ticks)))).length > 0) {
      if (now() - t > 600_000) throw new Error(`${left.length} supervisors still alive after 600 s`)
      await sleep(250)
    }
    const settledMs = now() - t
    const cpu = machineCpuSeconds() - cpuBefore
    const failed = JSON.parse(mustRunBg(home, ['list', '--json'], { maxBuffer: 256 * MiB }).stdout).filter((j) => j.notification?.state === 'failed').length
    check(`scale ${n}: every event tried and recorded failed after the 503s`, failed === n, `${failed} of ${n}`)
    return { notifySettledPerJob: settledMs / n, notifySettledMs: settledMs, notifyCpuSeconds: cpu }
  } finally {
    await killChild(listener.child)
    removeDir(home)
  }
}

/** CPU seconds the whole machine spent (all cores, user + system), from /proc/stat. */
function machineCpuSeconds() {
  const [, user, nice, system, , , irq, softirq] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number)
  // In USER_HZ ticks, 100 a second on Linux.
  return (user + nice + system + irq + softirq) / 100
}

// ------------------------------------------------- 11. agent harness: the wake

// The real Claude Code (PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses)
// against the stub model of __test__/harness/, inside the private network
// namespace the harness tests use: how long after a background job ends the
// model hears of it. Two variants, interleaved, a fresh Claude Code session
// (and HOME, and PROC_MANAGER_HOME) per round, each kept open (stream-json,
// stdin held) until the wake's request reaches the stub and its turn ends:
//   ours: hooks from `run-bg hooks install claude-code`; the model runs
//     `run-bg --label b -- <job>` through Bash and ends its turn; from the
//     job's ended_at (its job.json: `run-bg check` would mark the end seen,
//     and a seen end wakes nobody) to the request carrying the hook's line;
//   builtin: no hooks; the model runs the job with Bash `run_in_background:
//     true` and ends its turn; from the job's own clock (`date +%s%3N` as its
//     last command before `exit 1`) to the request carrying Claude Code's
//     `<task-notification>` for that task.
// Skipped, saying why, without the harness or a network namespace.
const HARNESS_JOB = `sleep 2; echo "error: 2 tests failed"; exit 1`
const HARNESS_FIRST_ERROR = 'error: 2 tests failed'
const HARNESS_WAKE_MS = 30_000

/** The stub's model: `RUN: <cmd>` runs it with Bash, `BG: <cmd>` with Bash in the background; a tool result or anything else ends the turn. */
function harnessModel(record) {
  if (record.kind !== 'main') return undefined
  if (newToolResults(record.body).length) return { text: 'Started it in the background; I will be told when it ends.' }
  const said = newText(record.body)
  const run = /^RUN: (.+)$/m.exec(said)
  if (run) return { bash: run[1], description: 'Run the tests in the background' }
  const bg = /^BG: (.+)$/m.exec(said)
  if (bg) return { bash: bg[1], description: 'Run the tests in the background', runInBackground: true }
  return { text: 'Noted.' }
}

/** One round of `variant` in a fresh session: { lag, startMs, exitMs, idle, text } (lag null: no wake within HARNESS_WAKE_MS). */
async function harnessRound(variant, stub, ns) {
  const pmHome = tempDir('harness')
  writeConfig(pmHome)
  const claude = makeClaudeHome(undefined, {})
  tempDirs.add(claude.home)
  const mark = path.join(pmHome, 'END')
  if (variant === 'ours') {
    mustRunBg(pmHome, ['hooks', 'install', 'claude-code', '--user'], { env: { ...envFor(pmHome), HOME: claude.home }, cwd: claude.project })
  }
  const prompt = variant === 'ours'
    ? `Run the tests in the background.\nRUN: ${RUN_BG} --label b -- sh -c ${q(HARNESS_JOB)}`
    : `Run the tests in the background.\nBG: sh -c ${q(HARNESS_JOB.replace('exit 1', `date +%s%3N > ${q(mark)}; exit 1`))}`
  const s = startClaude(undefined, {
    ns,
    home: claude.home,
    cwd: claude.project,
    env: { PROC_MANAGER_HOME: pmHome, PATH: `${path.dirname(RUN_BG)}:${process.env.PATH}` },
  })
  const kill = () => s.kill()
  killers.add(kill)
  // Claude Code's per-project task files and its messaging socket, both named after us.
  const claudeTmp = path.join(os.tmpdir(), `claude-${process.getuid()}`, claude.project.replace(/[^A-Za-z0-9]/g, '-'))
  const socket = path.join(os.tmpdir(), 'cc-socks', `${s.pid}.sock`)
  try {
    s.send(prompt)
    const init = await s.waitForEvent((e) => e.type === 'system' && e.subtype === 'init', { what: 'claude to name its session', timeout: 60_000 })
    const sid = init.session_id
    const ofSession = (r) => r.kind === 'main' && sessionOf(r) === sid
    let wake
    let endedAt
    let toldAt = null
    try {
      if (variant === 'ours') {
        let id = null
        await waitUntil(() => (id = readJobs(pmHome).find((j) => j.label === 'b')?.id ?? null), 30_000)
        const said = (r) => newText(r.body).split('\n').some((line) => line.includes(id) && /\bfailed\b/.test(line))
        wake = await stub.waitForRequest((r) => ofSession(r) && said(r), { what: `the wake for ${id}`, timeout: HARNESS_WAKE_MS })
        endedAt = JSON.parse(fs.readFileSync(path.join(pmHome, 'jobs', id, 'job.json'), 'utf8')).ended_at
        // The waiting hook appends the job to <session>.told as it tells, then exits 2: where the time goes.
        toldAt = fs.statSync(path.join(pmHome, 'sessions', `${sid}.told`)).mtimeMs
      } else {
        // Its answer names the task: "Command running in background with ID: <task>. …"
        const started = await stub.waitForRequest((r) => ofSession(r) && newToolResults(r.body).some((t) => /in background with ID: \w+/.test(t.text)),
          { what: 'the background task to start', timeout: 30_000 })
        const task = newToolResults(started.body).map((t) => /in background with ID: (\w+)/.exec(t.text)?.[1]).find(Boolean)
        wake = await stub.waitForRequest((r) => ofSession(r) && newText(r.body).includes(`<task-id>${task}</task-id>`),
          { what: `the notification of task ${task}`, timeout: HARNESS_WAKE_MS })
        endedAt = readMark(mark)
      }
    } catch (e) {
      log(`  harness ${variant}: ${e.message}`)
      return { lag: null }
    }
    check(`harness ${variant}: the job's end recorded before the wake`, endedAt > 0 && endedAt <= wake.at, `end ${endedAt}, request ${wake.at}`)
    // Was the session idle (its first turn over) when the job ended?
    const firstResult = s.events.find((e) => e.type === 'result')
    await s.waitForEvent(() => s.events.filter((e) => e.type === 'result').length >= 2, { what: "the wake's turn to end", timeout: 60_000 })
    const under = descendants(s.pid).map((pid) => ({ pid, ticks: startTicks(pid) }))
    const exit = await s.end({ timeout: 60_000 })
    // What it left behind (nothing expected): each by pid, if still the process we saw.
    for (const p of under) {
      if (p.ticks != null && startTicks(p.pid) === p.ticks) {
        check(`harness ${variant}: claude's processes end with it`, false, `pid ${p.pid} ${cmdline(p.pid)?.join(' ')}`)
        try {
          process.kill(p.pid, 'SIGKILL')
        } catch {}
      }
    }
    return {
      lag: wake.at - endedAt,
      told: toldAt == null ? null : { afterEnd: toldAt - endedAt, beforeWake: wake.at - toldAt },
      startMs: init._at - s.startedAt,
      exitMs: exit.ms,
      exitCode: exit.code,
      idle: firstResult != null && firstResult._at <= endedAt,
      text: newText(wake.body),
    }
  } finally {
    s.kill()
    killers.delete(kill)
    removeDir(pmHome)
    removeDir(claude.home)
    fs.rmSync(claudeTmp, { recursive: true, force: true })
    fs.rmSync(socket, { force: true })
  }
}

/**
 * What a hook costs the harness when it has nothing to say (no job of the
 * session runs, nothing ended untold): `run-bg hook claude-code
 * post-tool-use`, run after every Bash call, against spawning `true`.
 */
function hookCost() {
  const home = tempDir('hook-cost')
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null } }))
  const env = { ...process.env, PROC_MANAGER_HOME: home }
  for (const name of ['RUN_BG_SESSION', 'CLAUDE_CODE_SESSION_ID', 'CODEX_THREAD_ID']) delete env[name]
  const input = JSON.stringify({ session_id: 'bench-quiet', cwd: home, hook_event_name: 'PostToolUse', tool_name: 'Bash', tool_input: { command: 'ls' }, tool_response: { stdout: '' } })
  const time = (file, args) => {
    const t0 = process.hrtime.bigint()
    const r = spawnSync(file, args, { env, input })
    const ms = Number(process.hrtime.bigint() - t0) / 1e6
    return r.status === 0 && r.stdout.length === 0 ? ms : null
  }
  const ours = []
  const base = []
  for (let i = 0; i < 30; i++) {
    ours.push(time(RUN_BG, ['hook', 'claude-code', 'post-tool-use']))
    base.push(time('true', []))
  }
  check('harness: a hook with nothing to say exits 0, silent, every time', ours.every((ms) => ms != null), `${ours.filter((ms) => ms == null).length} of 30 said something or failed`)
  return { ours: ours.filter((ms) => ms != null), base }
}

async function benchHarness() {
  const cost = hookCost()
  const skip = claudeSkipReason()
  if (skip) {
    log(`harness: ${skip}; the wake rows skipped (the hook's own cost measured)`)
    return { hookCost: cost, skipped: true, texts: {} }
  }
  const variants = ['ours', 'builtin']
  log(`harness: Claude Code ${claudeVersion()}, job end → wake, ${PLAN.harnessReps} rounds (+${PLAN.harnessWarmup} warm-up) × ${variants.length} variants, a fresh session each`)
  const stub = await startStub({ reply: harnessModel })
  let ns = null
  const closeNs = () => ns?.close()
  killers.add(closeNs)
  const out = { version: claudeVersion(), hookCost: cost, texts: {}, misses: {}, idle: {}, toldAfterEnd: [], wakeAfterTold: [] }
  for (const v of variants) {
    out[v] = []
    out[`${v}Start`] = []
    out[`${v}Exit`] = []
    out.misses[v] = 0
    out.idle[v] = 0
  }
  try {
    ns = await startNetns(stub)
    for (let rep = -PLAN.harnessWarmup; rep < PLAN.harnessReps; rep++) {
      for (const v of rotate(variants, rep)) {
        const r = await harnessRound(v, stub, ns)
        if (r.text && !out.texts[v]) out.texts[v] = r.text
        if (rep < 0) continue
        if (r.lag == null) {
          out.misses[v]++
          continue
        }
        log(`  ${v}: woken ${r.lag} ms after the end${r.idle ? '' : ' (its first turn still running at the end)'}; claude exited ${r.exitMs} ms after stdin closed`)
        out[v].push(r.lag)
        out[`${v}Start`].push(r.startMs)
        out[`${v}Exit`].push(r.exitMs)
        if (r.idle) out.idle[v]++
        if (r.told) {
          out.toldAfterEnd.push(r.told.afterEnd)
          out.wakeAfterTold.push(r.told.beforeWake)
        }
      }
    }
  } finally {
    closeNs()
    killers.delete(closeNs)
    await stub.close()
  }
  for (const v of variants) check(`harness ${v}: every round woken within ${HARNESS_WAKE_MS / 1000} s`, out.misses[v] === 0, `${out.misses[v]} of ${PLAN.harnessReps} not`)
  const ours = out.texts.ours ?? ''
  check('harness: our wake names the outcome, the exit status and the first error', /\bfailed\b/.test(ours) && /\bexit 1\b/.test(ours) && ours.includes(HARNESS_FIRST_ERROR), ours.slice(-300))
  out.builtinHasFirstError = (out.texts.builtin ?? '').includes(HARNESS_FIRST_ERROR)
  return out
}

/** The wake each variant's request brought (its new turn, verbatim), once. */
function printHarnessTexts(harness) {
  for (const [v, name] of [['ours', 'ours (run-bg hooks)'], ['builtin', "built-in (Bash run_in_background)"]]) {
    const text = harness.texts[v]
    console.log(`\nharness: the wake ${name} brought:`)
    console.log(text == null ? '  (none arrived)' : text.split('\n').map((l) => `  | ${l}`).join('\n'))
  }
  const carries = (t) => [/\bfailed\b/.test(t ?? '') && 'failed', /exit (code )?1\b/.test(t ?? '') && 'exit 1', (t ?? '').includes(HARNESS_FIRST_ERROR) && 'the first error'].filter(Boolean).join(', ') || 'none of them'
  console.log(`harness: outcome, exit status, "${HARNESS_FIRST_ERROR}": ours carries ${carries(harness.texts.ours)}; the built-in ${carries(harness.texts.builtin)}`)
}

// ----------------------------------------------------------------- reporting

function row(name, unit, ours, base, target, passes) {
  const o = stats(ours)
  const b = stats(base)
  const ratio = o && b && b.median > 0 ? o.median / b.median : null
  return { name, unit, ours: o, baseline: b, ratio, target: target ?? '—', pass: passes ? passes(o, ratio) : null }
}

function fmt(v, unit) {
  if (v == null || Number.isNaN(v)) return '—'
  const digits = unit === 'ticks' ? 0 : unit === 'ms' ? (v < 10 ? 2 : v < 100 ? 1 : 0) : 2
  return `${v.toFixed(digits)} ${unit}`
}

function printTable(rows) {
  const header = ['measurement', 'ours med', 'ours p90', 'ours min–max', 'base med', 'base p90', 'base min–max', 'ratio', 'target', 'result']
  const range = (s, unit) => (s ? `${fmt(s.min, unit).split(' ')[0]}–${fmt(s.max, unit)}` : '—')
  const cells = rows.map((r) => [
    r.name,
    fmt(r.ours?.median, r.unit),
    fmt(r.ours?.p90, r.unit),
    range(r.ours, r.unit),
    fmt(r.baseline?.median, r.unit),
    fmt(r.baseline?.p90, r.unit),
    range(r.baseline, r.unit),
    r.ratio == null ? '—' : `${r.ratio.toFixed(2)}x`,
    r.target,
    r.pass == null ? 'info' : r.pass ? 'PASS' : 'FAIL',
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const c of cells) console.log(line(c))
}

/** Before (the baseline build) and after (this checkout), row by row: ours' medians and their ratios to the plain baseline. */
function printComparison(before, after) {
  const header = ['measurement', 'before med', 'after med', 'after/before', 'before vs base', 'after vs base']
  const ratio = (r) => (r?.ratio == null ? '—' : `${r.ratio.toFixed(2)}x`)
  const cells = after.map((a) => {
    const b = before.find((r) => r.name === a.name)
    const change = b?.ours?.median > 0 && a.ours ? `${(a.ours.median / b.ours.median).toFixed(2)}x` : '—'
    return [a.name, fmt(b?.ours?.median, a.unit), fmt(a.ours?.median, a.unit), change, ratio(b), ratio(a)]
  })
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const c of cells) console.log(line(c))
}


/** The table's rows for one build's results; `notes` gets the baselines' descriptions. */
function rowsFor({ start, idle, footprint, top, bin, throughput, tail, kill, notify, snap, ready, queue, scale, harness, build }, notes) {
  const size = `${PLAN.logBytes >= GiB ? `${PLAN.logBytes / GiB} GiB` : `${PLAN.logBytes / MiB} MiB`}`
  const secs = (key, field = 'seconds') => throughput[key].map((r) => r[field])
  const bound = ROTATING.max_bytes * (ROTATING.keep + 1)
  const mib = (kib) => kib / 1024
  const rows = []
  if (start) {
    rows.push(
      row('start: run-bg CLI → job running', 'ms', start.cli.running, start.shell.running, '≤ 3x base', (o, r) => r <= 3),
      row('start: run-bg CLI returns', 'ms', start.cli.returned, start.shell.returned),
      row('start: runBackground() returns', 'ms', start.js.returned, start.nodeSpawn.returned, 'med < 10 ms', (o) => o.median < 10),
      row('start: runBackground() → job running', 'ms', start.js.running, start.nodeSpawn.running),
    )
    notes.push('start = sh -c "nohup … &" (CLI rows) / child_process.spawn detached (JS rows)')
  }
  if (idle) {
    rows.push(
      row('idle: VmRSS (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.vmRssKiB)), idle.memory.node.map((m) => mib(m.vmRssKiB)), 'each ≤ 2 MiB', (o) => o.max <= 2),
      row('idle: RssAnon (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.rssAnonKiB)), idle.memory.node.map((m) => mib(m.rssAnonKiB))),
      row('idle: RssFile (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.rssFileKiB)), idle.memory.node.map((m) => mib(m.rssFileKiB))),
      row('idle: Private_Dirty (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.privateDirtyKiB)), idle.memory.node.map((m) => mib(m.privateDirtyKiB))),
      row('idle: Pss (vs idle node)', 'MiB', idle.memory.ours.map((m) => mib(m.pssKiB)), idle.memory.node.map((m) => mib(m.pssKiB))),
      row(`idle: CPU over ${PLAN.cpuWindowMs / 1000} s`, 'ticks', idle.cpuTicksInWindow.ours, idle.cpuTicksInWindow.node, 'each = 0', (o) => o.max === 0),
    )
    notes.push('idle = node -e setTimeout')
  }
  if (footprint) {
    rows.push(
      row('footprint: run-bg binary', 'MiB', [footprint.bytes[build.name] / MiB]),
      row('footprint: run-bg --version vs /bin/true', 'ms', footprint.latency[build.name], footprint.floor),
    )
    notes.push('footprint = wall time of spawnSync (its own cost included on both sides)')
  }
  if (top && build === BUILDS[0]) {
    rows.push(
      row(`top: idle CPU, ${top.jobs} jobs, ${top.seconds.toFixed(0)} s (% of a core)`, '%', [top.percent], null, '< 2 %', (o) => o.median < 2),
      row('top: run-bg-top VmRSS', 'MiB', [top.rssKiB / 1024]),
    )
  }
  if (bin) {
    rows.push(
      row('bin: linked run-bg --version vs native', 'ms', bin['version.linked'], bin['version.native']),
      row('bin: linked run-bg check vs native', 'ms', bin['check.linked'], bin['check.native']),
      row('bin: linked run-bg --version vs node shim', 'ms', bin['version.linked'], bin['version.shim'], '≤ 1.2x base', (o, r) => r <= 1.2),
      row('bin: linked run-bg check vs node shim', 'ms', bin['check.linked'], bin['check.shim'], '≤ 1.2x base', (o, r) => r <= 1.2),
      row('bin: npx run-bg --version vs native', 'ms', bin.npx, bin['version.native']),
    )
    notes.push('bin = the packed packages installed offline into an empty project: node_modules/.bin/run-bg (a link')
    notes.push('      to bin/run-bg.js, the Node shim npm links on every platform) and node bin/run-bg.js vs the')
    notes.push("      platform package's native/run-bg, interleaved; wall time of spawnSync; check = of an ended job.")
    notes.push('      The sh launcher linked before (no Node; not runnable by npm on Windows) was 1.47x / 1.22x native.')
  }
  if (throughput) {
    rows.push(
      row(`log ${size} zero: rotating`, 's', secs('zero.ours'), secs('zero.shell'), '≤ 1.0x base', (o, r) => r <= 1.0),
      row(`log ${size} zero: no rotation`, 's', secs('zero.oursUnbounded'), secs('zero.shell')),
      row(`log ${size} yes: rotating`, 's', secs('yes.ours'), secs('yes.shell'), '≤ 1.0x base', (o, r) => r <= 1.0),
      row(`log ${size} yes: no rotation`, 's', secs('yes.oursUnbounded'), secs('yes.shell')),
      row('log: `run-bg wait` lag after end', 'ms', ['zero.ours', 'yes.ours', 'zero.oursUnbounded', 'yes.oursUnbounded'].flatMap((k) => throughput[k].map((r) => (r.waitSeconds - r.seconds) * 1000))),
      row('log: disk use after (rotating)', 'MiB', [...throughput['zero.ours'], ...throughput['yes.ours']].map((r) => r.retained / MiB), null, `≤ ${bound / MiB} MiB`, (o) => o.max <= bound / MiB),
    )
    notes.push('log = sh -c "<producer> | cat > FILE"')
  }
  if (tail) {
    rows.push(
      row(`tail ${size}: run-bg check vs tail -n 20`, 'ms', tail.samples.cli, tail.samples.tail, '≤ 2x base', (o, r) => r <= 2),
      row(`tail ${size}: checkJob() vs JS read`, 'ms', tail.samples.js, tail.samples.jsRead, 'med < 5 ms', (o) => o.median < 5),
    )
    notes.push('tail = tail -n 20 (CLI) / fs read of the last 64 KiB (JS)')
  }
  if (kill) {
    const n = PLAN.treeSize
    rows.push(
      row('kill: sleep job, --grace 5s', 'ms', kill['single.ours'], kill['single.baseline'], 'med < 500 ms', (o) => o.median < 500),
      row(`kill: ${n}-proc tree, --grace 1s`, 'ms', kill['plain.ours'], kill['plain.baseline'], 'each < 2000 ms', (o) => o.max < 2000),
      row(`kill: ${n}-proc tree ignoring TERM, --grace 1s`, 'ms', kill['ignoresTerm.ours'], kill['ignoresTerm.baseline'], 'each < 2000 ms', (o) => o.max < 2000),
    )
    notes.push('kill = wall time of `run-bg kill` (a process spawn included) vs, in-process, kill(2) of each pid then a tight')
    notes.push(`       poll of /proc/<pid>/stat until gone or a zombie (SIGKILL after 1 s when TERM is ignored); trees: ${stats(kill['plain.ours.procs'])?.median} / ${stats(kill['ignoresTerm.ours.procs'])?.median} processes`)
  }
  if (notify) {
    rows.push(
      row("notify: POST after the job's last write", 'ms', notify.ours, notify.baseline, 'med < 100 ms', (o) => o.median < 100),
      row('notify: POST after the recorded endedAt', 'ms', notify.oursEndedAt),
      row('notify: recorded endedAt after last write', 'ms', notify.endedAtAfterMark),
    )
    notes.push("notify = listener's Date.now() at the request − the job's last command, `date +%s%3N`; baseline: the bench")
    notes.push("         awaits its own child's 'exit' event, then POSTs with http.request to the same listener")
  }
  if (snap) {
    const x = PLAN.snapExtra
    const seen = snap.visible.snapshot?.median
    rows.push(
      row(`snap +${x}: snapshot() vs ps -eo (spawn incl.)`, 'ms', snap.samples.snapshot, snap.samples.ps, '≤ 0.5x base', (o, r) => r <= 0.5),
      row(`snap +${x}: snapshot() vs C stat loop`, 'ms', snap.samples.snapshot, snap.samples.c, '≤ 2x base', (o, r) => r <= 2),
      row(`snap +${x}: snapshot() vs C stat+cmdline`, 'ms', snap.samples.snapshot, snap.samples.cCmdline),
      row(`snap +${x}: run-bg ps --json vs ps -eo`, 'ms', snap.samples.cli, snap.samples.ps),
      row(`snap +${x}: C stat+cmdline vs C stat loop`, 'ms', snap.samples.cCmdline, snap.samples.c),
      row(`snap +${x}: JS stat loop vs C stat loop`, 'ms', snap.samples.js, snap.samples.c),
    )
    notes.push(`snap = ${seen} processes. ps -eo pid,ppid,rss,lstart,args: wall time of spawnSync, stdout to a pipe (its process`)
    notes.push('       spawn is part of what a user pays). C stat loop (bench/statloop.c): average per pass over /proc reading')
    notes.push('       only <pid>/stat; snapshot() also reads <pid>/cmdline (C stat+cmdline is that floor), loads config.json,')
    notes.push('       and converts every process to a JS object through napi; JS stat loop = readdirSync + readFileSync')
  }
  if (ready) {
    rows.push(
      row('ready: readyAt after the port opened', 'ms', ready.readyAt, null, 'med ≤ 150 ms', (o) => o.median <= 150),
      row('ready: --yield returns after the port opened', 'ms', ready.returned, null, 'med < 200 ms', (o) => o.median < 200),
      row('ready: --yield returns after readyAt', 'ms', ready.returned.map((r, i) => r - ready.readyAt[i])),
      row(`ready: CPU over ${PLAN.probeWindowMs / 1000} s probing (vs idle supervisor)`, 'ticks', ready.probeTicks, ready.idleTicks, '≤ 2 ticks', (o) => o.max <= 2),
    )
    notes.push('ready = a node server listening 500 ms after its start; its own Date.now() at listen vs readyAt / run-bg\'s return')
  }
  if (queue) {
    rows.push(
      row("queue: next job's startedAt after one's endedAt", 'ms', queue.started, null, 'med < 10 ms', (o) => o.median < 10),
      row("queue: next job's first command after endedAt", 'ms', queue.running),
    )
  }
  if (scale) {
    for (const [n, s] of Object.entries(scale)) {
      const last = s.start.slice(-Math.max(1, Math.ceil(s.start.length / 10)))
      // Per job, a call's fixed cost (starting run-bg, 10-20 ms) is what a
      // small N measures: the target is the slope, judged from N = 100 on.
      const perJob = ['≤ 2 ms (N ≥ 100)', (o) => (Number(n) < 100 ? null : o.median <= 2)]
      rows.push(
        row(`scale ${n}: start (CLI), each`, 'ms', s.start),
        row(`scale ${n}: start, the last tenth`, 'ms', last),
        row(`scale ${n}: list --json`, 'ms', s.list),
        row(`scale ${n}: PSS per supervisor`, 'MiB', s.pss, null, 'each ≤ 0.3 MiB', (o) => o.max <= 0.3),
        ...(s.anon ? [row(`scale ${n}: RssAnon per supervisor`, 'MiB', s.anon)] : []),
        row(`scale ${n}: kill --all, per job`, 'ms', [s.killPerJob], null, ...perJob),
        row(`scale ${n}: kill --all, total`, 'ms', [s.killMs]),
        ...(s.lostLookPerJob == null ? [] : [
          row(`scale ${n}: first list after every supervisor died, per job`, 'ms', [s.lostLookPerJob], null, ...perJob),
          row(`scale ${n}: prune of them, per job`, 'ms', [s.prunePerJob], null, ...perJob),
        ]),
        ...(s.orphansKillPerJob == null ? [] : [
          row(`scale ${n}: first list after the supervisors died, orphans alive, per job`, 'ms', [s.orphanLookPerJob], null, ...perJob),
          row(`scale ${n}: orphans --kill of them, per job`, 'ms', [s.orphansKillPerJob], null, ...perJob),
          row(`scale ${n}: then until every watcher exited`, 'ms', [s.watchersGoneMs]),
        ]),
        ...(s.notifySettledMs == null ? [] : [
          row(`scale ${n}: kill --all, notifying a 503 service, until every supervisor exited`, 'ms', [s.notifySettledMs]),
          row(`scale ${n}: machine CPU meanwhile`, 's', [s.notifyCpuSeconds], null, '≤ 0.02 s a job', (o) => o.median <= 0.02 * Number(n)),
        ]),
      )
    }
    notes.push('scale = N `sleep 600` jobs in one home (registry.max_jobs 200): wall time of each `run-bg` call; PSS from')
    notes.push('        smaps_rollup of every supervisor 8 s after the last start (the lower of two reads 250 ms apart);')
    notes.push('        pueue beside it only when installed')
  }
  if (harness?.hookCost && build === BUILDS[0]) {
    rows.push(row('harness: a hook with nothing to say (post-tool-use, spawned), vs spawning `true`', 'ms', harness.hookCost.ours, harness.hookCost.base, '< 50 ms', (s) => s.median < 50))
  }
  if (harness && !harness.skipped && build === BUILDS[0]) {
    const base = stats(harness.builtin)
    const o = stats(harness.ours)
    const goal = 'ours ≤ built-in + 0.5 s'
    rows.push(
      row('harness: job end → wake request, ours vs built-in', 'ms', harness.ours, harness.builtin, goal, (s) => base != null && s.median <= base.median + 500),
      row('harness: ours − built-in, medians', 'ms', o && base ? [o.median - base.median] : null, null, '≤ 500 ms', (s) => s.median <= 500),
      row('harness: ours − built-in, max', 'ms', o && base ? [o.max - base.max] : null),
      row('harness: ours, job end → the hook records the tell', 'ms', harness.toldAfterEnd),
      row('harness: ours, the tell recorded → wake request', 'ms', harness.wakeAfterTold),
      row('harness: claude spawn → session named', 'ms', harness.oursStart, harness.builtinStart),
      row('harness: claude exit after stdin closed', 'ms', harness.oursExit, harness.builtinExit),
    )
    const n = (v) => `${harness[v].length}${harness.misses[v] ? ` (+${harness.misses[v]} never woken)` : ''}`
    notes.push(`harness = Claude Code ${harness.version} against the stub model, in a private network namespace, a fresh session per round`)
    notes.push('          (stream-json, stdin open until the wake\'s turn ends), rounds interleaved. Ours: `run-bg --label b -- sh -c')
    notes.push("          '<job>'` through Bash, hooks of `run-bg hooks install claude-code`, from ended_at in its job.json; built-in:")
    notes.push('          Bash run_in_background, no hooks, from the job\'s `date +%s%3N` just before its `exit 1`; to the stub\'s')
    notes.push(`          receipt of the request bringing the wake. Rounds: ours ${n('ours')}, built-in ${n('builtin')}; session idle when`)
    notes.push(`          the job ended: ours ${harness.idle.ours}, built-in ${harness.idle.builtin}. The tell: the mtime of <session>.told in the`)
    notes.push('          home (the hook appends the job as it tells, then exits 2; kernel file times, a few ms coarse)')
  }

  return rows
}

// ---------------------------------------------------------------------- main

async function main() {
  const unknown = ONLY?.filter((g) => !GROUPS.includes(g)) ?? []
  if (unknown.length) throw new Error(`--only: unknown group ${unknown.join(', ')}; groups: ${GROUPS.join(', ')}`)
  if (!fs.existsSync(RUN_BG)) throw new Error(`${RUN_BG} missing; run \`node scripts/build.js\``)
  // Git ignores bench/out (the compiled C loop, results.json): a fresh clone has none.
  fs.mkdirSync(path.dirname(OUT_FILE), { recursive: true })
  const began = now()
  const meta = {
    date: new Date().toISOString(),
    quick: QUICK,
    only: ONLY,
    plan: { ...PLAN },
    node: process.version,
    kernel: os.release(),
    cpus: os.cpus().length,
    loadavgStart: os.loadavg(),
    commit: spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim(),
    tmpdir: os.tmpdir(),
    binary: { path: RUN_BG, mtime: fs.statSync(RUN_BG).mtime.toISOString(), bytes: fs.statSync(RUN_BG).size },
    warnings: [],
  }
  const free = freeBytes(os.tmpdir())
  meta.freeBytes = free
  if (free < 5 * GiB) {
    const scaled = Math.max(16 * MiB, Math.floor(free / 5 / MiB) * MiB)
    if (free < 100 * MiB) throw new Error(`only ${(free / MiB).toFixed(0)} MiB free in ${os.tmpdir()}`)
    if (scaled < PLAN.logBytes) {
      const warning = `only ${(free / GiB).toFixed(2)} GiB free in ${os.tmpdir()}: log sizes scaled down to ${scaled / MiB} MiB`
      log(`WARNING: ${warning}`)
      meta.warnings.push(warning)
      PLAN.logBytes = PLAN.tailBytes = scaled
      meta.plan = { ...PLAN }
    }
  }

  if (runs('snapshot')) compileStatloop() // first: no point measuring anything if it cannot build
  meta.builds = BUILDS.map((b) => ({ name: b.name, root: b.root, commit: b.commit, bytes: fs.statSync(b.runBg).size }))
  // Each group once per build, back to back, the order alternating from group to group.
  let turn = 0
  const perBuild = async (group, fn) => {
    if (!runs(group)) return Object.fromEntries(BUILDS.map((b) => [b.name, null]))
    const out = {}
    for (const build of rotate(BUILDS, turn++)) out[build.name] = await withBuild(build, fn)
    return out
  }
  const load = {}
  const timed = async (group, fn) => {
    const before = os.loadavg()
    const r = await fn()
    load[group] = { start: before, end: os.loadavg() }
    return r
  }
  const start = await timed('start', () => perBuild('start', benchStart))
  const idle = await timed('idle', () => perBuild('idle', benchIdle))
  const footprint = runs('footprint') ? await timed('footprint', benchFootprint) : null
  const top = runs('top') ? await timed('top', benchTop) : null
  const bin = runs('bin') ? await timed('bin', benchBin) : null
  const throughputAll = runs('log') ? await timed('log', () => benchThroughput(PLAN.logBytes)) : null
  const tail = await timed('tail', () => perBuild('tail', () => benchTail(PLAN.tailBytes)))
  const kill = await timed('kill', () => perBuild('kill', benchKill))
  const notify = await timed('notify', () => perBuild('notify', benchNotify))
  const snap = await timed('snapshot', () => perBuild('snapshot', benchSnapshot))
  const ready = await timed('ready', () => perBuild('ready', benchReady))
  const queue = await timed('queue', () => perBuild('queue', benchQueue))
  const scale = await timed('scale', () => perBuild('scale', benchScale))
  // Every build at once, side by side (bench/fleet.mjs).
  const fleetKit = { builds: BUILDS, ns: SCALE_NS, quick: QUICK, tempDir, removeDir, check, log, writeConfig, spawnChild }
  const fleet = runs('fleet') ? await timed('fleet', () => benchFleet(fleetKit)) : null
  const harness = runs('harness') ? await timed('harness', benchHarness) : null
  meta.loadavgEnd = os.loadavg()
  meta.seconds = (now() - began) / 1000
  meta.loadByGroup = load

  const notes = []
  const tables = {}
  for (const build of BUILDS) {
    const b = build.name
    const r = rowsFor({ start: start[b], idle: idle[b], footprint, top, bin, throughput: throughputOf(throughputAll, build), tail: tail[b], kill: kill[b], notify: notify[b], snap: snap[b], ready: ready[b], queue: queue[b], scale: scale[b], harness, build }, build === BUILDS[0] ? notes : [])
    tables[b] = r
  }
  const rows = tables.after
  console.log(`\nproc-manager bench${QUICK ? ' (--quick)' : ''}${ONLY ? ` --only=${ONLY.join(',')}` : ''}: ${meta.cpus} CPUs, load ${meta.loadavgStart.map((l) => l.toFixed(2)).join(' ')} → ${meta.loadavgEnd.map((l) => l.toFixed(2)).join(' ')}, ${meta.seconds.toFixed(0)} s`)
  console.log(notes.map((n, i) => `${i ? '      ' : 'base: '}${n}`).join('\n') + '\n')
  printTable(rows)
  if (harness && !harness.skipped) printHarnessTexts(harness)
  printFleet(fleet, BUILDS)
  const groupLoad = Object.entries(load).filter(([g]) => runs(g)).map(([g, l]) => `${g} ${l.start[0].toFixed(2)}→${l.end[0].toFixed(2)}`).join(', ')
  console.log(`\nload average (1 min) by group: ${groupLoad}`)
  if (tables.before) {
    console.log(`\nbefore (${BUILDS[1].commit}, ${BUILDS[1].root}) → after (${BUILDS[0].commit}): ours' medians`)
    printComparison(tables.before, tables.after)
  }
  const failedChecks = checks.filter((c) => !c.ok)
  console.log(`\nsanity checks: ${checks.length - failedChecks.length}/${checks.length} ok${failedChecks.map((c) => `\n  FAILED ${c.name}: ${c.detail}`).join('')}`)
  for (const w of meta.warnings) console.log(`warning: ${w}`)

  const raw = { start, idle, footprint, top, bin, throughput: throughputAll, tail, kill, notify, snapshot: snap, ready, queue, scale, fleet, harness }
  fs.writeFileSync(OUT_FILE, `${JSON.stringify({ meta, rows, tables, checks, raw }, null, 2)}\n`)
  console.log(`results: ${path.relative(process.cwd(), OUT_FILE) || OUT_FILE}`)
}

try {
  await main()
} catch (e) {
  log(`bench failed: ${e.stack ?? e}`)
  cleanup()
  process.exitCode = 1
}
