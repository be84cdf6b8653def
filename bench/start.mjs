// The `start` group of bench/run.mjs (`--only=start`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { PLAN, RUN_BG, envFor, inHome, killChild, killStray, log, mustRunBg, now, pm, q, removeDir, rotate, sleep, spawnChild, tempDir, trackStray, waitForFile, writeConfig } from './kit.mjs'

// ------------------------------------------------------------ 1. start latency

// Each variant starts `touch MARK; exec sleep 30` and returns
// { returned, running }: ms until the launcher returned, and until the job
// is running (launcher returned AND the marker exists).
export const START_VARIANTS = {
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

export async function benchStart() {
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
