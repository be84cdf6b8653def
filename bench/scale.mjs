// The `scale` group of bench/run.mjs (`--only=scale`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { isAlive } from './kill.mjs'
import { MiB, QUICK, busyFor, check, killChild, log, mustRunBg, now, option, procStatus, readJobs, removeDir, runBg, sleep, startJson, tempDir, writeConfig } from './kit.mjs'
import { startListener } from './notify.mjs'

// ------------------------------------------------------------ 10. at scale

// N running `sleep` jobs in one home (registry.max_jobs left at its 200, so
// from N = 1,000 the registry is over its cap): each start, `list --json`,
// every supervisor's PSS once all run, then one `kill --all`. What one job
// costs must not grow with N (issue 25: kill --all took 75 ms a job at 1,000).
export const SCALE_NS = (option('scale') ?? (QUICK ? '10,100' : '10,100,1000')).split(',').map(Number)

export async function benchScale() {
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
export async function waitUntil(predicate, timeoutMs) {
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
export async function sigkillRecorded(recorded) {
  const ours = recorded.filter((who) => who && who.pid > 1)
  const alive = (who) => isAlive(who.pid, String(who.start_ticks))
  for (const who of ours) if (alive(who)) process.kill(who.pid, 'SIGKILL')
  await waitUntil(() => !ours.some(alive), 30_000)
}

/** How long the first `list` takes once supervisors died; it must find all `n` jobs `status`. */
export function timedFirstLook(home, n, status) {
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
export async function scaleAfterSupervisorsDied(n) {
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
export async function scaleOrphansKill(n) {
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
export async function scaleKillNotifying(n) {
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
export function machineCpuSeconds() {
  const [, user, nice, system, , , irq, softirq] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number)
  // In USER_HZ ticks, 100 a second on Linux.
  return (user + nice + system + irq + softirq) / 100
}
