// The `snapshot` group of bench/run.mjs (`--only=snapshot`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { MiB, PLAN, RUN_BG, STATLOOP, STATLOOP_SRC, check, cmdline, envFor, inHome, killChild, log, now, pm, removeDir, rotate, sleep, spawnChild, stats, tempDir, writeConfig } from './kit.mjs'

// ------------------------------------------------------------- 7. snapshot speed

export function compileStatloop() {
  const r = spawnSync('gcc', ['-O2', '-o', STATLOOP, STATLOOP_SRC], { encoding: 'utf8' })
  if (r.error || r.status !== 0) throw new Error(`gcc -O2 -o ${STATLOOP} ${STATLOOP_SRC} failed: ${r.error?.message ?? r.stderr}`)
}

/** One run of the C loop: average ms per full pass over /proc, and how many processes it read. */
export function statloop(...args) {
  const r = spawnSync(STATLOOP, [String(PLAN.statPasses), ...args], { encoding: 'utf8' })
  const m = /avg_us=([\d.]+) procs=(\d+)/.exec(r.stdout)
  if (r.status !== 0 || !m) throw new Error(`statloop failed (${r.status}): ${r.stdout}${r.stderr}`)
  return { ms: Number(m[1]) / 1000, procs: Number(m[2]) }
}

export function jsStatLoop() {
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

export async function benchSnapshot() {
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
