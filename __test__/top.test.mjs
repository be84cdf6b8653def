// `run-bg top` as a person sees it: run in tmux at a fixed size (on a tmux
// server of this test's own), keys sent with send-keys, the screen read
// with capture-pane, polled with a deadline. Each session has a unique name
// and is killed in cleanup, with the private server (its own socket, -S).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { makeHome, startJob, waitFor, runBg, procState, RUN_BG, cookieProcesses, anySurvivor, processStart, ESCAPING_TREE } from './helpers.mjs'

const tmuxVersion = spawnSync('tmux', ['-V'], { encoding: 'utf8' })
const skip =
  process.platform === 'win32'
    ? 'tmux runs on Unix; the view itself is built for Windows too'
    : tmuxVersion.status !== 0
      ? 'tmux is not installed (CI installs it: .ci/run optional_programs): the view is driven through tmux'
      : false

const q = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`
let sessions = 0

/** A tmux session `width`×`height` running `command` in `home`, on a private server; killed after the test. */
function tmuxSession(t, home, command, { width = 140, height = 36 } = {}) {
  const socket = path.join(os.tmpdir(), `pm-top-${process.pid}.tmux`)
  const name = `pm-top-${process.pid}-${++sessions}`
  const tmux = (...args) => spawnSync('tmux', ['-S', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' })
  const started = tmux('new-session', '-d', '-s', name, '-x', String(width), '-y', String(height), `env PROC_MANAGER_HOME=${q(home)} NO_COLOR= TERM=xterm-256color ${command}`)
  assert.equal(started.status, 0, started.stderr)
  // The session stays after its command ends, so that what it left on the screen can be read.
  tmux('set-option', '-t', name, 'remain-on-exit', 'on')
  t.after(() => {
    tmux('kill-session', '-t', name)
    if (tmux('list-sessions').status !== 0) {
      tmux('kill-server')
      fs.rmSync(socket, { force: true })
    }
  })
  const screen = () => tmux('capture-pane', '-p', '-t', name).stdout
  return {
    name,
    screen,
    keys: (...keys) => assert.equal(tmux('send-keys', '-t', name, ...keys).status, 0),
    resize: (w, h) => assert.equal(tmux('resize-window', '-t', name, '-x', String(w), '-y', String(h)).status, 0),
    display: (format) => tmux('display-message', '-p', '-t', name, format).stdout.trim(),
    /** Polls the screen until `pattern` shows; returns the screen. */
    until: (pattern, what, timeout = 20_000) =>
      waitFor(() => (pattern.test(screen()) ? screen() : null), { timeout, what: `${what}; the screen:\n${screen()}` }).catch((e) => {
        throw new Error(`${e.message}\n${screen()}`)
      }),
  }
}

/** The row of job `id` on the screen. */
const rowOf = (screen, id) => screen.split('\n').find((line) => line.startsWith(id)) ?? ''

test('top shows the jobs with their status, and a job that ends shows as ended', { skip }, async (t) => {
  const { home } = makeHome(t)
  const stays = startJob(home, ['sleep', '600'], ['--label', 'stays'])
  const brief = startJob(home, ['sh', '-c', 'echo working; sleep 2; echo done-now'], ['--label', 'brief'])
  const view = tmuxSession(t, home, `${q(RUN_BG)} top`)
  await view.until(new RegExp(`${stays.jobId} +stays +running`), 'the running job')
  assert.match(rowOf(view.screen(), brief.jobId), /brief +(running|success)/)
  assert.match(view.screen(), /ID +LABEL +STATUS +RUNTIME +CPU% +MEM/)
  await view.until(new RegExp(`${brief.jobId} +brief +success`), 'the brief job to show as ended', 30_000)
  assert.match(rowOf(view.screen(), stays.jobId), /running/, 'the other one still runs')
})

test('a kill from the view, confirmed, leaves no process of the tree alive', { skip }, async (t) => {
  const { home } = makeHome(t, { kill: { grace_ms: 500 } })
  const victim = startJob(home, ESCAPING_TREE, ['--label', 'victim'])
  await waitFor(() => cookieProcesses(victim.jobId).length >= 7, { what: 'the seven processes of the tree' })
  const tree = cookieProcesses(victim.jobId)
  const view = tmuxSession(t, home, `${q(RUN_BG)} top`)
  await view.until(new RegExp(`${victim.jobId} +victim +running`), 'the job')
  view.keys('x')
  await view.until(/Kill victim-\S+ .*\? y\/n/, 'the confirmation')
  assert.equal(anySurvivor(tree).length, tree.length, 'nothing is killed before the answer')
  view.keys('y')
  await view.until(new RegExp(`${victim.jobId} +victim +killed`), 'the job shown killed')
  await waitFor(() => anySurvivor(tree).length === 0, { timeout: 10_000, what: `every process of the tree to be gone: ${JSON.stringify(anySurvivor(tree))}` })
  assert.equal(cookieProcesses(victim.jobId).length, 0)
})

test('a resize does not end the view; q quits and gives the terminal back', { skip }, async (t) => {
  const { home } = makeHome(t)
  const job = startJob(home, ['sh', '-c', 'echo first line; sleep 600'], ['--label', 'resized'])
  // After the view: its exit code, then whether the terminal is cooked again.
  const view = tmuxSession(t, home, `sh -c ${q(`${q(RUN_BG)} top; echo "top exited $?"; stty -a | tr ';' '\\n' | grep -ow -e -icanon -e icanon -e -echo -e echo | tr '\\n' ' '; echo; exec sleep 600`)}`)
  await view.until(new RegExp(`${job.jobId} +resized +running`), 'the job')
  const pid = Number(view.display('#{pane_pid}'))
  for (const [w, h] of [[40, 10], [200, 50], [20, 5], [100, 30]]) {
    view.resize(w, h)
    await view.until(/run-bg top/, `the view redrawn at ${w}×${h}`)
  }
  await view.until(new RegExp(`${job.jobId} +resized +running`), 'the table back at 100 columns')
  assert.match(view.screen(), /first line/, 'the selected job\'s output below')
  assert.equal(view.display('#{alternate_on}'), '1', 'full screen')
  view.keys('q')
  const after = await view.until(/top exited \d+\s*\n-?icanon/, 'the view to quit and stty to answer')
  assert.match(after, /top exited 0/)
  assert.match(after, /^icanon echo\s*$/m, `the terminal is cooked and echoes again: ${after}`)
  assert.equal(view.display('#{alternate_on}'), '0', 'back on the main screen')
  assert.doesNotMatch(view.screen(), /ID +LABEL +STATUS/, 'nothing of the view is left on the screen')
  assert.ok(processStart(pid) !== null, 'the shell that ran it goes on')
})

test('p pauses the selected job\'s tree, r resumes it, R reruns an ended job as a new one', { skip }, async (t) => {
  const { home } = makeHome(t)
  const job = startJob(home, ['sh', '-c', 'sleep 600 & sleep 600 & wait'], ['--label', 'pausable'])
  await waitFor(() => cookieProcesses(job.jobId).length >= 3, { what: 'the shell and its two sleeps' })
  const tree = cookieProcesses(job.jobId)
  t.after(() => runBg(home, ['kill', job.jobId]))
  const view = tmuxSession(t, home, `${q(RUN_BG)} top`)
  await view.until(new RegExp(`${job.jobId} +pausable +running`), 'the job')
  view.keys('p')
  await view.until(new RegExp(`${job.jobId} +pausable +paused`), 'the job shown paused')
  await waitFor(() => tree.every((p) => procState(p.pid) === 'T'), { what: `every process of the tree stopped: ${tree.map((p) => procState(p.pid))}` })
  view.keys('r')
  await view.until(new RegExp(`${job.jobId} +pausable +running`), 'the job shown running again')
  await waitFor(() => tree.every((p) => ['S', 'R'].includes(procState(p.pid))), { what: `every process of the tree running again: ${tree.map((p) => procState(p.pid))}` })
  assert.equal(runBg(home, ['kill', job.jobId]).code, 0)
  await view.until(new RegExp(`${job.jobId} +pausable +killed`), 'the job shown killed')
  view.keys('R')
  const screen = await view.until(/started, a rerun of/, 'the rerun\'s answer')
  const rerunId = /(\S+) started, a rerun of/.exec(screen)[1]
  t.after(() => runBg(home, ['kill', rerunId]))
  await view.until(new RegExp(`${rerunId} +pausable +running`), 'the rerun in the table')
  const record = JSON.parse(runBg(home, ['check', rerunId, '--json']).stdout)
  assert.equal(record.rerunOf, job.jobId)
})

test('off a terminal, top refuses and says what to use instead', { skip: process.platform === 'win32' ? 'Unix pipes' : false }, (t) => {
  const { home } = makeHome(t)
  const r = spawnSync(RUN_BG, ['top'], { env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8', timeout: 10_000 })
  assert.equal(r.status, 2, r.stderr)
  assert.match(r.stderr, /needs a terminal.*run-bg list --json/)
})

test('CPU % is what a job uses now, from the first frame: a job busy for a while then asleep shows about 0, not its lifetime average', { skip }, async (t) => {
  const { home } = makeHome(t)
  // Busy for 2 s of CPU, then asleep: over its life about half a core.
  // (A loop in the shell itself: CPU of its own, not of children it forks.)
  const job = startJob(home, ['sh', '-c', 'i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done; echo idle-now; sleep 600'], ['--label', 'was-busy'])
  await waitFor(() => fs.readFileSync(job.logPath, 'utf8').includes('idle-now'), { timeout: 30_000, what: 'the busy part to end' })
  const view = tmuxSession(t, home, `${q(RUN_BG)} top`)
  const screen = await view.until(new RegExp(`${job.jobId} +was-busy +running +\\S+ +[0-9.]+`), 'the job\'s row with its CPU %')
  const cpu = Number(rowOf(screen, job.jobId).split(/\s+/)[4])
  assert.ok(cpu < 10, `the first frame shows ${cpu} % for a job asleep now (its lifetime average is about 50 %): ${rowOf(screen, job.jobId)}`)
})
