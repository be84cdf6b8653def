// The `kill` group of bench/run.mjs (`--only=kill`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { PLAN, check, cmdline, killChild, log, now, procStat, readJobs, removeDir, rotate, runBg, sleep, spawnChild, startJson, strayPids, tempDir, trackStray, writeConfig } from './kit.mjs'

// ------------------------------------------------------------------ 5. kill speed

/** Alive: /proc/<pid>/stat still shows the same start ticks (field 22) and is no zombie. */
export function isAlive(pid, ticks) {
  const f = procStat(pid)
  return f != null && f[19] === ticks && f[0] !== 'Z' && f[0] !== 'X'
}
export const comm = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}
export const numericProcEntries = () => fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number)

/** Live processes whose environment holds PROC_MANAGER_JOB=<jobId>: { pid, ticks, comm }. */
export function cookieCarriers(jobId) {
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
export function groupMembers(pgid) {
  const found = []
  for (const pid of numericProcEntries()) {
    const f = procStat(pid)
    if (f && f[0] !== 'Z' && Number(f[2]) === pgid) found.push({ pid, ticks: f[19], comm: comm(pid) })
  }
  return found
}

/** Polls `list()` (fresh each time) until `n` of its processes are `sleep`s; returns the last list. */
export async function waitForSleeps(list, n, what, timeoutMs = 20_000) {
  const deadline = now() + timeoutMs
  for (;;) {
    const procs = list()
    if (procs.filter((p) => p.comm === 'sleep').length >= n) return procs
    if (now() > deadline) throw new Error(`${what}: only ${procs.length} processes (${procs.filter((p) => p.comm === 'sleep').length} sleeps) after ${timeoutMs} ms`)
    await sleep(10)
  }
}

/** A `sleep 600` left in the background by `sh -c '… &'` (so init, not us, reaps it); returns it once it runs sleep. */
export async function straySleep() {
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

export const TREE_SCRIPTS = {
  plain: (n) => `for i in $(seq ${n}); do sleep 600 & done; wait`,
  // dash keeps each inner sh (it has a trap), so the tree is 1 + 2n processes; the
  // ignored SIGTERM is inherited by the sleeps across exec.
  ignoresTerm: (n) => `for i in $(seq ${n}); do sh -c "trap \\"\\" TERM; sleep 600" & done; wait`,
}

/** Runs `run-bg kill <id> --grace <grace>` on a fresh job of `argv` once `ready(jobId)` gives its processes. */
export async function killOurs(argv, grace, ready, what) {
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
export function signalEach(procs, signal) {
  for (const p of procs) {
    if (isAlive(p.pid, p.ticks)) {
      try {
        process.kill(p.pid, signal)
      } catch {}
    }
  }
}

/** Baseline for a tree: SIGTERM to each process, poll /proc; after `graceMs` SIGKILL to what is left, poll. */
export function killPoll(procs, graceMs) {
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

export async function benchKill() {
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
