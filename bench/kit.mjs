// What every group of bench/run.mjs shares: its options and plan, the builds
// measured, utilities, and the bookkeeping that kills and removes everything
// a group started (by pid), also on errors and Ctrl-C.

import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export const USAGE = `usage: node bench/run.mjs [--quick] [--only=GROUP,...] [--baseline=<checkout>] [--log-reps=N] [--seed=N] [--scale=N,...]
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
export const QUICK = process.argv.includes('--quick')
export const GROUPS = ['start', 'idle', 'footprint', 'bin', 'log', 'tail', 'kill', 'notify', 'snapshot', 'ready', 'queue', 'scale', 'fleet', 'top', 'harness']
export const ONLY = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',') ?? null
export const runs = (group) => !ONLY || ONLY.includes(group)
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const option = (name) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? null
export const BASELINE = option('baseline')
export const OUT_FILE = path.join(ROOT, 'bench', 'out', 'results.json')
export const STATLOOP_SRC = path.join(ROOT, 'bench', 'statloop.c')
export const STATLOOP = path.join(ROOT, 'bench', 'out', 'statloop')
export const MiB = 1024 ** 2
export const GiB = 1024 ** 3

export const PLAN = QUICK
  ? { startReps: 10, warmup: 2, idleJobs: 5, cpuWindowMs: 2000, logBytes: 128 * MiB, logReps: 2, tailBytes: 128 * MiB, tailReps: 10,
      killReps: 5, treeSize: 50, treeReps: 2, notifyReps: 5, snapExtra: 100, snapReps: 5, statPasses: 10, readyReps: 5, probeWindowMs: 5000,
      harnessReps: 3, harnessWarmup: 0 }
  : { startReps: 30, warmup: 3, idleJobs: 5, cpuWindowMs: 2000, logBytes: GiB, logReps: 5, tailBytes: GiB, tailReps: 30,
      killReps: 20, treeSize: 50, treeReps: 8, notifyReps: 20, snapExtra: 500, snapReps: 20, statPasses: 10, readyReps: 15, probeWindowMs: 5000,
      harnessReps: 5, harnessWarmup: 1 }
export const ROTATING = { max_bytes: 100 * MiB, keep: 2 }
export const UNBOUNDED = { max_bytes: 2 * GiB, keep: 2 }
export const FINAL = new Set(['success', 'failed', 'killed', 'timeout', 'lost'])

/** A build to measure: a checkout's run-bg and addon. */
export function loadBuild(name, root) {
  const runBg = path.join(root, 'native', 'run-bg')
  if (!fs.existsSync(runBg)) throw new Error(`${runBg} missing; run \`node scripts/build.js\` in ${root}`)
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout?.trim()
  return { name, root, runBg, commit, pm: createRequire(path.join(root, 'package.json'))(root) }
}
export const BUILDS = [loadBuild('after', ROOT), ...(BASELINE ? [loadBuild('before', path.resolve(BASELINE))] : [])]
// The build the helpers below use; swapped by withBuild (the bench runs one sample at a time).
export let RUN_BG = BUILDS[0].runBg
export let pm = BUILDS[0].pm
export let BUILD = BUILDS[0]
export async function withBuild(build, fn) {
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

export const now = () => Number(process.hrtime.bigint()) / 1e6
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
export const q = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`
export const log = (msg) => process.stderr.write(`${msg}\n`)
export const rotate = (arr, k) => arr.map((_, i) => arr[(((i + k) % arr.length) + arr.length) % arr.length])

export function quantile(samples, p) {
  const s = [...samples].sort((a, b) => a - b)
  return s[Math.max(0, Math.ceil(p * s.length) - 1)]
}
export const stats = (samples) =>
  samples?.length ? { n: samples.length, median: quantile(samples, 0.5), p90: quantile(samples, 0.9), min: Math.min(...samples), max: Math.max(...samples) } : null

/** A seeded shuffle (mulberry32): the order differs every repetition, the same every run. */
export function shuffler(seed) {
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

export function cpuJiffies() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  return { idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0) }
}
export const memFreeKiB = () => Number(/^MemFree:\s+(\d+)/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1])

/**
 * Before a heavy sample: the previous one's writeback is flushed (sync), its
 * page cache dropped where we may (root), and we wait until the machine is
 * quiet for a moment: the CPUs under half busy and free memory no longer
 * moving (the hypervisor's free-page reporting hands freed pages back a
 * while after they are freed, and faulting them in again is slow). At most
 * `limitMs`; returns what it saw, reported with the sample. `dropCaches:
 * false` keeps the page cache: a kill of running jobs is timed with their
 * programs' pages cached, as they are while they run.
 */
export async function settle(limitMs = 5000, { dropCaches = true } = {}) {
  spawnSync('sync')
  let dropped = false
  if (dropCaches) {
    try {
      fs.writeFileSync('/proc/sys/vm/drop_caches', '1')
      dropped = true
    } catch {} // not root: the page cache stays, for every variant alike
  }
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

export const envFor = (home) => ({ ...process.env, PROC_MANAGER_HOME: home })

/** Runs an in-process API call against `home`; the variable never lingers,
 * because any later call would (re)create whatever home it names. */
export function inHome(home, fn) {
  process.env.PROC_MANAGER_HOME = home
  try {
    return fn()
  } finally {
    delete process.env.PROC_MANAGER_HOME
  }
}

export function runBg(home, args, options = {}) {
  const r = spawnSync(RUN_BG, args, { env: envFor(home), encoding: 'utf8', timeout: 300_000, ...options })
  if (r.error) throw new Error(`run-bg ${args.join(' ')}: ${r.error.message}`)
  return r
}

export function mustRunBg(home, args, options) {
  const r = runBg(home, args, options)
  if (r.status !== 0) throw new Error(`run-bg ${args.join(' ')} exited ${r.status}: ${r.stderr.trim()}`)
  return r
}

export const startJson = (home, argv, label) => JSON.parse(mustRunBg(home, ['--json', '--label', label, '--', ...argv]).stdout)

/**
 * The jobs as run-bg's readers see them: each job's own job.json (written
 * first, and the first to hold an outcome) over its jobs.json entry (which
 * the registry takes in when its lock is free).
 */
export function readJobs(home) {
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
export function writeConfig(home, config = {}) {
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null }, ...config }))
}

/** /proc/<pid>/stat fields after the comm: [0] is field 3 (state). */
export function procStat(pid) {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return raw.slice(raw.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}
export const startTicks = (pid) => procStat(pid)?.[19] ?? null
export function cpuTicks(pid) {
  const f = procStat(pid)
  return f ? Number(f[11]) + Number(f[12]) : NaN // utime + stime
}
export function procStatus(pid) {
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
export const cmdline = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1)
  } catch {
    return null
  }
}

export function waitForFile(file, timeoutMs = 10_000) {
  const deadline = now() + timeoutMs
  while (!fs.existsSync(file)) {
    if (now() > deadline) throw new Error(`timed out waiting for ${file}`)
  }
}

export function freeBytes(dir) {
  if (fs.statfsSync) {
    const s = fs.statfsSync(dir)
    return s.bavail * s.bsize
  }
  const out = spawnSync('df', ['-Pk', dir], { encoding: 'utf8' }).stdout.trim().split('\n').pop().split(/\s+/)
  return Number(out[3]) * 1024
}

// ------------------------------------------------- process & dir bookkeeping

export const tempDirs = new Set()
export const strayPids = new Map() // pid -> start ticks, for processes that are nobody's child of ours
export const children = new Set() // ChildProcess objects still running
export const killers = new Set() // what a group started otherwise (a Claude Code session and its tree, a network namespace): each kills it by pid

export function tempDir(tag) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pm-bench-${tag}-`))
  tempDirs.add(dir)
  return dir
}

export function trackStray(pid) {
  strayPids.set(pid, startTicks(pid))
}

export function killStray(pid) {
  const ticks = strayPids.get(pid)
  strayPids.delete(pid)
  // Only if the pid still is the process we saw (not a reused pid).
  if (ticks != null && startTicks(pid) === ticks) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {}
  }
}

export function spawnChild(cmd, args, options) {
  const child = spawn(cmd, args, options)
  children.add(child)
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, t: now() })))
  child.exited.then(() => children.delete(child))
  return child
}

export async function killChild(child) {
  if (children.has(child)) child.kill('SIGKILL')
  await child.exited
}

/** Kills what is left of the jobs recorded in `home`: via run-bg, then by recorded identity. */
export function killJobsIn(home) {
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
export function busyFor(home) {
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

export function removeDir(dir) {
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

export let cleanedUp = false
export function cleanup() {
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

export const checks = []
export function check(name, ok, detail = '') {
  if (BUILDS.length > 1) name = `[${BUILD.name}] ${name}`
  checks.push({ name, ok, detail })
  if (!ok) log(`  CHECK FAILED: ${name}${detail ? ` (${detail})` : ''}`)
}
