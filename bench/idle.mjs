// The `idle` group of bench/run.mjs (`--only=idle`).

import fs from 'node:fs'
import path from 'node:path'
import { FINAL, PLAN, check, cmdline, cpuTicks, killChild, log, mustRunBg, procStatus, readJobs, removeDir, sleep, spawnChild, startJson, tempDir, writeConfig } from './kit.mjs'

// ----------------------------------------------------- 2. supervisor idle cost

export async function benchIdle() {
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
