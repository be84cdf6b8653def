// The `footprint` group of bench/run.mjs (`--only=footprint`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { BUILDS, PLAN, QUICK, log, now, rotate } from './kit.mjs'

// ------------------------------------------------------- 3b. footprint

/** The supervisor binary's size, and `run-bg --version` start latency (the CLI's floor). */
export async function benchFootprint() {
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
