// The `queue` group of bench/run.mjs (`--only=queue`).

import fs from 'node:fs'
import path from 'node:path'
import { QUICK, check, log, mustRunBg, q, readJobs, removeDir, sleep, tempDir, writeConfig } from './kit.mjs'
import { buildHasOption } from './ready.mjs'

// ------------------------------------------------------ 9. queue hand-over

// A queue of max_parallel 1 holds a blocker and N jobs; once the blocker is
// let go, each job's supervisor starts the next when its job ends. A sample
// is one hand-over: the next job's recorded startedAt − the previous one's
// endedAt (both the core's clock), and the next job's first command
// (`date +%s%3N`) − that endedAt: when it really runs.
export async function benchQueue() {
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
