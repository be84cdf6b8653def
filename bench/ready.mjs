// The `ready` group of bench/run.mjs (`--only=ready`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import { PLAN, RUN_BG, check, cpuTicks, log, mustRunBg, option, readJobs, removeDir, runBg, sleep, startJson, tempDir, writeConfig } from './kit.mjs'

// ----------------------------------------------------------- 8. readiness (issue 15)

// A dev server: listens on PORT after DELAY ms and prints when, by its own clock.
export const READY_SERVER = `const [port, delay] = process.argv.slice(1)
setTimeout(() => require('node:net').createServer(() => {}).listen(Number(port), '127.0.0.1', () => console.log('listening at ' + Date.now())), Number(delay))`

/** A port nothing listens on (bound, then released). */
export function freePortNow() {
  return new Promise((resolve) => {
    const server = net.createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** Whether the build being measured (`RUN_BG`) knows a start option: a baseline may predate it. */
export const buildHasOption = (option) => spawnSync(RUN_BG, ['--help'], { encoding: 'utf8' }).stdout.includes(option)

/**
 * `--yield 30s --ready-port`: how long after the port opened the supervisor
 * recorded readyAt and `run-bg` returned (wall clocks of the same machine);
 * and the supervisor's CPU (utime+stime) over `probeWindowMs` of probing a
 * port that never opens, next to an idle supervisor's over the same window.
 */
export async function benchReady() {
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
