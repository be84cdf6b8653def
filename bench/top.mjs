// The `top` group of bench/run.mjs (`--only=top`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { QUICK, RUN_BG, check, children, cmdline, cpuTicks, log, mustRunBg, now, procStatus, q, removeDir, sleep, startJson, tempDir, writeConfig } from './kit.mjs'

// ------------------------------------------------ 3b'. run-bg top's idle cost

/**
 * What `run-bg top` costs while a person only watches: 50 jobs (45 idle,
 * 5 printing a line a second), the view in a tmux session 160×50 (its own
 * server, socket in a temp dir), and the CPU time the view's processes
 * (`run-bg-top` and the `run-bg top` waiting for it) use over a window
 * after it has settled, as % of one core; and the view's RSS. Only this
 * checkout's build: the view is new. Skipped, saying why, without tmux.
 */
export async function benchTop() {
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
