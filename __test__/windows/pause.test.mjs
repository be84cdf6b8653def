// `pause` and `resume` on Windows: every process of the job's Job Object
// suspended (and each that joins it while paused), the --timeout clock
// stopped, a kill and a dead supervisor handled, as on Linux
// (__test__/pause.test.mjs). The job is a node.exe tree that shows whether
// anything of it runs: the main process and each child it starts append a
// tick every 100 ms to a file of their own.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import {
  skip, pm, freshHome, scratch, until, sleep, cli, startJob, checkJson, jobRecord, descendants, alive, endAll, killAfter, fileLines, nodeScript, runBg,
} from './helpers.mjs'

/** The ticking tree: main ticks into `main`, and every 400 ms starts a child that ticks into `kid-<pid>` for 1.5 s. */
const TICKER = `
const fs = require('node:fs'), path = require('node:path'), { spawn } = require('node:child_process')
const [dir, role = 'main'] = process.argv.slice(2)
const file = path.join(dir, role === 'main' ? 'main' : 'kid-' + process.pid)
let n = 0
const tick = () => fs.appendFileSync(file, role + ' ' + n++ + '\\n')
tick()
setInterval(tick, 100)
if (role === 'main') setInterval(() => spawn(process.execPath, [__filename, dir, 'kid'], { stdio: 'ignore' }), 400)
else setTimeout(() => process.exit(0), 1500)
`

/** Every tick file and its size: what the tree has done so far. */
function ticks(dir) {
  return Object.fromEntries(fs.readdirSync(dir).filter((f) => f === 'main' || f.startsWith('kid-')).map((f) => [f, fs.statSync(path.join(dir, f)).size]))
}

function startTicker(t, home, flags = []) {
  const dir = scratch(t)
  const job = startJob(home, nodeScript(dir, 'ticker.cjs', TICKER, [dir]), ['--label', 'ticker', ...flags])
  killAfter(t, home, job)
  return { dir, job }
}

/** Until the main process and at least two children have ticked. */
const ticking = (dir) => until('the tree ticking (main and two children)', () => {
  const now = ticks(dir)
  return now.main > 0 && Object.keys(now).filter((f) => f.startsWith('kid-')).length >= 2
}, 30000)

/** Asserts for `ms` that nothing of the tree ticks, nor starts: no file grows, none appears. */
async function nothingRuns(dir, held, ms) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    assert.deepEqual(ticks(dir), held, 'nothing of the paused tree runs, and no new process of it starts')
    await sleep(200)
  }
}

test('pause suspends every process of the Job Object, and none starts while paused; resume runs them again; both recorded', { skip }, async (t) => {
  const home = freshHome()
  const { dir, job } = startTicker(t, home)
  await ticking(dir)
  const before = Date.now()
  const paused = cli(['pause', job.jobId], home)
  assert.equal(paused.status, 0, paused.stderr)
  assert.match(paused.stdout, new RegExp(`^paused ${job.jobId}: \\d+ process\\(es\\) stopped`))
  // Suspended when `pause` returns: nothing ticks, no child starts.
  const held = ticks(dir)
  await nothingRuns(dir, held, 2500)

  const check = checkJson(home, job.jobId)
  assert.equal(check.status, 'paused')
  assert.ok(check.pausedAt >= before - 5 && check.pausedAt <= Date.now(), `pausedAt ${check.pausedAt}`)
  assert.match(cli(['check', job.jobId], home).stdout, /paused for/)
  assert.match(cli(['list'], home).stdout, new RegExp(`${job.jobId}.*paused`))
  const registry = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs.find((j) => j.id === job.jobId)
  assert.equal(registry?.paused_at, check.pausedAt, 'in jobs.json too')
  const again = cli(['pause', job.jobId], home)
  assert.equal(again.status, 0, again.stderr)
  assert.match(again.stdout, /already paused/)

  const resumed = cli(['resume', job.jobId, '--json'], home)
  assert.equal(resumed.status, 0, resumed.stderr)
  const view = JSON.parse(resumed.stdout)
  assert.equal(view.status, 'running')
  assert.equal(view.changed, true)
  await until('the main process ticking again', () => ticks(dir).main > held.main)
  await until('a new child after the resume', () => Object.keys(ticks(dir)).some((f) => !(f in held)))
  const after = checkJson(home, job.jobId)
  assert.equal(after.status, 'running')
  assert.equal(after.pausedAt, undefined)
  assert.ok(jobRecord(home, job.jobId).paused_ms >= 2000, `paused_ms ${jobRecord(home, job.jobId).paused_ms}`)
  assert.match(cli(['resume', job.jobId], home).stdout, /not paused/)
})

test('a paused job\'s --timeout clock stops: paused past its timeout it is not timed out, and times out after resume', { skip }, async (t) => {
  const home = freshHome()
  const job = startJob(home, ['ping', '-n', '120', '127.0.0.1'], ['--timeout', '3s'])
  killAfter(t, home, job)
  assert.equal(cli(['pause', job.jobId], home).status, 0)
  const atPause = checkJson(home, job.jobId)
  const ranBeforePause = atPause.pausedAt - atPause.startedAt
  // Paused for 4 s, past the 3 s timeout: still paused, not ended.
  const pausedUntil = Date.now() + 4000
  while (Date.now() < pausedUntil) {
    assert.equal(checkJson(home, job.jobId).status, 'paused', 'not timed out while paused')
    await sleep(250)
  }
  const resumedAt = Date.now()
  assert.equal(cli(['resume', job.jobId], home).status, 0)
  const ended = await until('the timeout after the resume', () => {
    const c = checkJson(home, job.jobId)
    return c.status !== 'running' && c.status !== 'paused' && c
  }, 20000)
  assert.equal(ended.status, 'timeout')
  const remaining = 3000 - ranBeforePause
  const afterResume = ended.endedAt - resumedAt
  assert.ok(afterResume >= remaining - 300, `the rest of the timeout ran after the resume: ${afterResume} ms >= ${remaining} ms`)
  assert.ok(afterResume < remaining + 3000, `and not much more: ${afterResume} ms`)
})

test('kill of a paused job ends every process of it, none left suspended, and records it killed, not paused', { skip }, async (t) => {
  const home = freshHome()
  const { dir, job } = startTicker(t, home)
  await ticking(dir)
  assert.equal(cli(['pause', job.jobId], home).status, 0)
  const tree = [job.pid, ...descendants(job.pid).map((p) => p.pid)]
  assert.ok(tree.length >= 2, `the tree: ${tree}`)
  const started = Date.now()
  const kill = cli(['kill', job.jobId, '--grace', '8s', '--json'], home)
  assert.equal(kill.status, 0, kill.stderr)
  assert.equal(JSON.parse(kill.stdout)[0].status, 'killed')
  // The job was resumed to take the kill's CTRL_BREAK (under wine the
  // break is refused and the kill ends the Job Object at once).
  assert.ok(Date.now() - started < 6000, `the kill did not wait out the 8 s grace: ${Date.now() - started} ms`)
  await until('every process of the tree gone', () => alive(tree).length === 0)
  const check = checkJson(home, job.jobId)
  assert.equal(check.status, 'killed')
  assert.equal(check.pausedAt, undefined, 'an ended job is no longer paused')
})

test('a paused job whose supervisor is killed stays suspended, orphaned and paused; resume runs it again, kill ends it', { skip }, async (t) => {
  const home = freshHome()
  const { dir, job } = startTicker(t, home)
  await ticking(dir)
  assert.equal(cli(['pause', job.jobId], home).status, 0)
  const held = ticks(dir)
  const supervisor = jobRecord(home, job.jobId).supervisor.pid
  process.kill(supervisor)
  await until('the supervisor gone', () => alive([supervisor]).length === 0)
  await nothingRuns(dir, held, 1500)
  const check = checkJson(home, job.jobId)
  assert.equal(check.status, 'orphaned')
  assert.ok(check.pausedAt > 0, 'still paused')
  assert.match(cli(['check', job.jobId], home).stdout, /orphaned and paused/)
  const pause = cli(['pause', job.jobId], home)
  assert.equal(pause.status, 1)
  assert.match(pause.stderr, /orphaned/)
  const resumed = cli(['resume', job.jobId], home)
  assert.equal(resumed.status, 0, resumed.stderr)
  assert.match(resumed.stdout, new RegExp(`resumed orphaned job ${job.jobId}: \\d+ process\\(es\\) continued`))
  await until('the main process ticking again', () => ticks(dir).main > held.main)
  const tree = [job.pid, ...descendants(job.pid).map((p) => p.pid)]
  assert.equal(cli(['kill', job.jobId], home).status, 0)
  await until('every process of the orphaned tree gone', () => alive(tree).length === 0)
  assert.equal(checkJson(home, job.jobId).status, 'killed')
})

test('a paused --restart job whose main process is ended starts no new run until it is resumed', { skip }, async (t) => {
  const home = freshHome({ notify: { url: null } })
  const dir = scratch(t)
  const argv = nodeScript(dir, 'run.cjs', `
require('node:fs').appendFileSync(${JSON.stringify(path.join(dir, 'runs'))}, process.pid + '\\n')
setInterval(() => {}, 1000)
`)
  const job = startJob(home, argv, ['--restart', 'always', '--restart-delay', '100ms'])
  killAfter(t, home, job)
  await until('the first run', () => fileLines(path.join(dir, 'runs')).length === 1)
  assert.equal(cli(['pause', job.jobId], home).status, 0)
  const [first] = fileLines(path.join(dir, 'runs')).map(Number)
  process.kill(first)
  await until('the first run gone', () => alive([first]).length === 0)
  await sleep(2000)
  assert.equal(fileLines(path.join(dir, 'runs')).length, 1, 'no new run while paused')
  assert.equal(checkJson(home, job.jobId).status, 'paused')
  assert.equal(cli(['resume', job.jobId], home).status, 0)
  await until('the next run after the resume', () => fileLines(path.join(dir, 'runs')).length === 2)
  assert.equal(checkJson(home, job.jobId).restarts, 1)
})

test('pause and resume refuse what cannot be paused, saying why; JS pauseJob and resumeJob', { skip }, async (t) => {
  const home = freshHome({ queues: { one: { max_parallel: 1 } } })
  const done = startJob(home, ['cmd', '/c', 'exit 0'])
  assert.equal(cli(['wait', done.jobId], home).status, 0)
  for (const verb of ['pause', 'resume']) {
    const ended = cli([verb, done.jobId], home)
    assert.equal(ended.status, 1, `${verb} of an ended job`)
    assert.match(ended.stderr, new RegExp(`${done.jobId} has ended \\(success`))
  }
  const first = startJob(home, ['ping', '-n', '60', '127.0.0.1'], ['--queue', 'one'])
  const waiting = startJob(home, ['ping', '-n', '60', '127.0.0.1'], ['--queue', 'one'])
  t.after(() => cli(['kill', first.jobId, waiting.jobId, '--force'], home))
  assert.equal(waiting.status, 'queued')
  const queued = cli(['pause', waiting.jobId], home)
  assert.equal(queued.status, 1)
  assert.match(queued.stderr, /queued/)

  const paused = await pm.pauseJob(first.jobId)
  assert.equal(paused.status, 'paused')
  assert.equal(paused.changed, true)
  assert.equal(pm.checkJob(first.jobId).status, 'paused')
  const resumed = await pm.resumeJob(first.jobId)
  assert.equal(resumed.status, 'running')
  assert.equal(resumed.changed, true)
  endAll([first.pid])
})

test('16 concurrent pause and resume requests of one job: each answered rightly; the record and the tree agree after', { skip }, async (t) => {
  const home = freshHome()
  const { dir, job } = startTicker(t, home)
  await ticking(dir)
  const call = (verb) => new Promise((resolve) => {
    const child = spawn(runBg, [verb, job.jobId], { env: { ...process.env, PROC_MANAGER_HOME: home } })
    let stdout = '', stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('close', (status) => resolve({ verb, status, stdout, stderr }))
  })
  const answers = []
  for (let round = 0; round < 2; round++) {
    answers.push(...await Promise.all(Array.from({ length: 8 }, (_, i) => call(i % 2 ? 'resume' : 'pause'))))
  }
  assert.deepEqual(answers.filter((a) => a.status !== 0).map((a) => `${a.verb}: ${a.stderr.trim()}`), [], 'every request answered')
  for (const a of answers) {
    const right = a.verb === 'pause' ? /^(paused \S+: \d+ process|\S+ is already paused)/ : /^(resumed \S+: \d+ process|\S+ is not paused)/
    assert.match(a.stdout, right, `${a.verb} answered ${a.stdout}`)
  }
  // What the record says is what the tree does.
  const agree = async () => {
    const paused = checkJson(home, job.jobId).status === 'paused'
    const before = ticks(dir)
    await sleep(1500)
    const grew = ticks(dir).main > before.main
    assert.equal(grew, !paused, `recorded ${paused ? 'paused' : 'running'}, the main process ${grew ? 'ticked' : 'did not tick'}`)
  }
  await agree()
  assert.equal(cli(['pause', job.jobId], home).status, 0)
  await agree()
  assert.equal(cli(['resume', job.jobId], home).status, 0)
  await agree()
})
