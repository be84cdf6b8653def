// Where the features of issues 12, 14, 15 and 16 meet: a queued job keeps
// its run options, restarts hold a queue slot, a tie's kill is not
// restarted, the queue hand-over leaks none of the ended job's fds, and the
// new statuses reach every reader.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, runBg, startJob, checkJson, readRegistry, waitFor, pm, isAlive, connectMcp } from './helpers.mjs'
import { startInterruptService } from './fixtures/interrupt-service.mjs'

/** A job that runs until `file` exists (the test ends it when it wants). */
const untilFile = (file) => ['sh', '-c', `while [ ! -f ${JSON.stringify(file)} ]; do sleep 0.05; done`]

function anchor(extraPids) {
  const child = spawn('sleep', ['300'], { stdio: 'ignore' })
  extraPids.push(child.pid)
  return child.pid
}

const hasNull = (value) => JSON.stringify(value).includes('null')

test('a job queued --after another keeps its restart, readiness, notifyOn, stdin pipe, tie and timeout', async (t) => {
  const { home, extraPids } = makeHome(t)
  const go = path.join(home, 'go')
  const first = startJob(home, untilFile(go))
  const tied = anchor(extraPids)
  const script = 'echo READY; read line; echo "got $line"; exit 3'
  const ack = startJob(home, ['sh', '-c', script], [
    '--after', first.jobId, '--ready-log', 'READY', '--notify-on', 'got', '--restart', 'on-failure',
    '--max-restarts', '1', '--restart-delay', '100ms', '--stdin', 'pipe', '--tie-pid', String(tied), '--timeout', '60s',
  ])
  assert.equal(checkJson(home, ack.jobId).status, 'queued')
  const early = runBg(home, ['send', ack.jobId, 'too soon'])
  assert.equal(early.code, 1)
  assert.match(early.stderr, /queued: it has not started yet/, early.stderr)
  fs.writeFileSync(go, '')
  const ready = runBg(home, ['wait', ack.jobId, '--ready', '--timeout', '30s', '--json'])
  assert.equal(ready.code, 0, `wait --ready: ${ready.stdout}${ready.stderr}`)
  const started = checkJson(home, ack.jobId)
  assert.equal(started.status, 'running')
  assert.ok(started.readyAt > 0, 'readiness watched in the queued job')
  assert.equal(started.stdin, 'pipe')
  assert.equal(started.tie?.pid, tied)
  const sent = runBg(home, ['send', ack.jobId, 'hello'])
  assert.equal(sent.code, 0, `send: ${sent.stderr}`)
  const restarted = await waitFor(() => {
    const c = checkJson(home, ack.jobId)
    return c.restarts === 1 && c.status === 'running' ? c : null
  }, { what: 'the restart of the queued job' })
  assert.equal(restarted.lastRestart, 'exit 3')
  const rec = readRegistry(home).find((j) => j.id === ack.jobId)
  assert.equal(rec.timeout_ms, 60_000)
  assert.deepEqual(rec.notify_on, ['got'])
  runBg(home, ['kill', ack.jobId])
})

test('--ready-timeout counts from the real start, not from the time the job was queued', async (t) => {
  const { home } = makeHome(t)
  const go = path.join(home, 'go')
  const first = startJob(home, untilFile(go))
  const ack = startJob(home, ['sh', '-c', 'echo READY; exec sleep 300'], ['--after', first.jobId, '--ready-log', 'READY', '--ready-timeout', '200ms'])
  // Queued for longer than its readiness timeout.
  await waitFor(() => Date.now() - checkJson(home, ack.jobId).startedAt > 400, { what: 'the readiness timeout to pass while queued' })
  assert.doesNotMatch(runBg(home, ['check', ack.jobId]).stdout, /not ready after/)
  const early = runBg(home, ['wait', ack.jobId, '--ready', '--timeout', '300ms', '--json'])
  assert.equal(early.code, 124)
  assert.equal(JSON.parse(early.stdout).jobs[0].status, 'queued')
  fs.writeFileSync(go, '')
  const ready = runBg(home, ['wait', ack.jobId, '--ready', '--timeout', '30s', '--json'])
  assert.equal(ready.code, 0, ready.stdout)
  runBg(home, ['kill', ack.jobId])
})

test('a restarting job holds its queue slot across restarts; a kill in the restart delay frees it', async (t) => {
  const { home } = makeHome(t, { queues: { one: { max_parallel: 1 } } })
  const flaky = startJob(home, ['sh', '-c', 'exit 1'], ['--queue', 'one', '--restart', 'always', '--max-restarts', '2', '--restart-delay', '200ms'])
  const next = startJob(home, ['sleep', '300'], ['--queue', 'one'])
  const done = runBg(home, ['wait', flaky.jobId, '--timeout', '60s', '--json'])
  assert.notEqual(done.code, 124)
  const ended = checkJson(home, flaky.jobId)
  assert.equal(ended.status, 'failed')
  assert.equal(ended.restarts, 2)
  const started = await waitFor(() => {
    const c = checkJson(home, next.jobId)
    return c.status === 'running' ? c : null
  }, { what: 'the next job to start' })
  assert.ok(started.startedAt >= ended.endedAt, `started ${started.startedAt} before the restarting job ended ${ended.endedAt}`)
  runBg(home, ['kill', next.jobId])

  const waiting = startJob(home, ['sh', '-c', 'exit 1'], ['--queue', 'one', '--restart', 'always', '--restart-delay', '60s'])
  const after = startJob(home, ['sleep', '300'], ['--queue', 'one'])
  await waitFor(() => checkJson(home, waiting.jobId).restarts === 1, { what: 'the job in its restart delay' })
  assert.equal(checkJson(home, after.jobId).status, 'queued')
  assert.equal(runBg(home, ['kill', waiting.jobId]).code, 0)
  assert.equal(checkJson(home, waiting.jobId).status, 'killed')
  await waitFor(() => checkJson(home, after.jobId).status === 'running', { what: 'the slot handed on after the kill' })
  runBg(home, ['kill', after.jobId])
})

test('a tie that fires kills a restarting job for good: while it runs and in its restart delay', async (t) => {
  const { home, extraPids } = makeHome(t)
  const tied = anchor(extraPids)
  const running = startJob(home, ['sleep', '300'], ['--restart', 'always', '--restart-delay', '100ms', '--tie-pid', String(tied)])
  const pid = checkJson(home, running.jobId).pid
  process.kill(tied, 'SIGKILL')
  const ended = await waitFor(() => {
    const c = checkJson(home, running.jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the tied job to end', timeout: 10_000 })
  assert.equal(ended.status, 'killed', JSON.stringify(ended))
  assert.equal(ended.restarts ?? 0, 0, 'not restarted after the tie killed it')
  assert.equal(ended.pid, pid)

  const tied2 = anchor(extraPids)
  const delayed = startJob(home, ['sh', '-c', 'exit 1'], ['--restart', 'always', '--restart-delay', '60s', '--tie-pid', String(tied2)])
  await waitFor(() => checkJson(home, delayed.jobId).restarts === 1, { what: 'the restart delay' })
  process.kill(tied2, 'SIGKILL')
  const killed = await waitFor(() => {
    const c = checkJson(home, delayed.jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the job killed in its delay', timeout: 10_000 })
  assert.equal(killed.status, 'killed')
  assert.equal(killed.restarts, 1)
  assert.equal(killed.tie.reason, `the process it was tied to (pid ${tied2}) exited`)
})

test('a queued job tied to a process that exited meanwhile never starts: it ends killed', async (t) => {
  const { home, extraPids } = makeHome(t)
  const go = path.join(home, 'go')
  const marker = path.join(home, 'ran')
  const first = startJob(home, untilFile(go))
  const tied = anchor(extraPids)
  const ack = startJob(home, ['sh', '-c', `touch ${JSON.stringify(marker)}; exec sleep 300`], ['--after', first.jobId, '--tie-pid', String(tied)])
  process.kill(tied, 'SIGKILL')
  await waitFor(() => !isAlive(tied), { what: 'the tied process gone' })
  fs.writeFileSync(go, '')
  const ended = await waitFor(() => {
    const c = checkJson(home, ack.jobId)
    return c.status !== 'queued' && c.status !== 'running' ? c : null
  }, { what: 'the tied job to end' })
  assert.equal(ended.status, 'killed')
  assert.equal(ended.tie.reason, `the process it was tied to (pid ${tied}) exited`)
  assert.equal(ended.pid, undefined, 'no process was started')
  assert.equal(fs.existsSync(marker), false, 'its command never ran')
})

test('a --notify-on match while the wake rule is being registered neither stalls the output nor is lost', async (t) => {
  // The service answers the rule only after our notify.timeout_ms: its
  // registration runs for the whole first second of the job.
  const service = await startInterruptService(t)
  await service.control({ ruleAnswerDelayMs: 3000 })
  const { home } = makeHome(t, { notify: { url: service.url, timeout_ms: 2000 } })
  const go = path.join(home, 'go')
  const { jobId, logPath } = startJob(home, ['sh', '-c', `echo boom; echo after-boom; while [ ! -f ${JSON.stringify(go)} ]; do sleep 0.05; done`],
    ['--wake', 'job {{jobId}} {{status}}', '--notify-on', 'boom'])
  await waitFor(() => fs.existsSync(logPath) && fs.readFileSync(logPath, 'utf8').includes('after-boom'), { what: 'the output after the match' })
  assert.equal(checkJson(home, jobId).wake?.state, 'pending', 'the output came while the rule was still being registered')
  const triggers = async () => (await service.inspect()).triggers.map((r) => r.body?.data ?? r.data ?? r).filter((d) => d?.jobId === jobId)
  const matched = await waitFor(async () => (await triggers()).find((d) => d.status === 'matched'),
    { what: 'the matched event, once the registration is over', timeout: 30_000 })
  assert.match(JSON.stringify(matched), /boom/)
  fs.writeFileSync(go, '')
  assert.notEqual(runBg(home, ['wait', jobId, '--timeout', '30s']).code, 124)
  const all = await waitFor(async () => { const got = await triggers(); return got.some((d) => d.status === 'success') && got },
    { what: 'the end event', timeout: 30_000 })
  assert.ok(all.findIndex((d) => d.status === 'matched') < all.findIndex((d) => d.status === 'success'), 'the match went out before the end')
})

/** What `pid`'s fds point at. */
function fdTargets(pid) {
  const dir = `/proc/${pid}/fd`
  const out = []
  for (const fd of fs.readdirSync(dir)) {
    try {
      out.push(fs.readlinkSync(path.join(dir, fd)))
    } catch {}
  }
  return out
}

test('the queue hand-over starts the next supervisor without the ended job\'s fds', async (t) => {
  const { home, extraPids } = makeHome(t, { queues: { one: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  const tied = anchor(extraPids)
  const first = startJob(home, untilFile(go), ['--queue', 'one', '--stdin', 'pipe', '--tie-pid', String(tied), '--restart', 'on-failure'])
  const second = startJob(home, ['sleep', '300'], ['--queue', 'one'])
  assert.equal(checkJson(home, second.jobId).status, 'queued')
  fs.writeFileSync(go, '')
  const rec = await waitFor(() => {
    const j = readRegistry(home).find((j) => j.id === second.jobId)
    return j?.status === 'running' && j.supervisor && j.main ? j : null
  }, { what: 'the second job started' })
  const firstDir = path.join(home, 'jobs', first.jobId)
  for (const pid of [rec.supervisor.pid, rec.main.pid]) {
    assert.ok(isAlive(pid))
    const targets = fdTargets(pid)
    assert.deepEqual(targets.filter((t) => t.startsWith(firstDir) || t.includes('pidfd')), [], `${pid} holds ${targets.join(', ')}`)
  }
  runBg(home, ['kill', second.jobId])
})

test('a job with every new option: check --json, list --json, checkJob and listJobs agree, with no null', async (t) => {
  const { home, extraPids } = makeHome(t, { queues: { one: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  const first = startJob(home, untilFile(go), ['--queue', 'one'])
  const tied = anchor(extraPids)
  const ack = startJob(home, ['sh', '-c', 'echo READY; exec sleep 300'], [
    '--after', first.jobId, '--queue', 'one', '--priority', '5', '--ready-log', 'READY', '--notify-on', 'x',
    '--restart', 'always', '--stdin', 'pipe', '--tie-pid', String(tied), '--timeout', '60s',
  ])
  const compare = (expectStatus) => {
    const check = checkJson(home, ack.jobId)
    const list = JSON.parse(runBg(home, ['list', '--all', '--json']).stdout)
    const listed = (list.jobs ?? list).find((j) => j.jobId === ack.jobId)
    process.env.PROC_MANAGER_HOME = home
    try {
      const js = pm.checkJob(ack.jobId)
      const jsListed = pm.listJobs({ all: true }).find((j) => j.jobId === ack.jobId)
      for (const [what, v] of [['check --json', check], ['list --json', listed], ['checkJob', js], ['listJobs', jsListed]]) {
        assert.ok(v, `${what} has the job`)
        assert.equal(v.status, expectStatus, what)
        assert.ok(!hasNull(v), `${what}: ${JSON.stringify(v)}`)
        for (const key of ['queue', 'priority', 'after', 'stdin', 'tie', 'restarts']) {
          if (key === 'restarts' && v.restarts === undefined) continue
          assert.deepEqual(v[key], check[key], `${what}.${key}`)
        }
      }
      const { tail, cursor, text, ...checkFields } = js
      assert.deepEqual(Object.keys(check).sort(), Object.keys(js).sort(), 'CLI and JS check agree')
      assert.deepEqual(Object.keys(listed).sort(), Object.keys(jsListed).sort(), 'CLI and JS list agree')
      void checkFields
    } finally {
      delete process.env.PROC_MANAGER_HOME
    }
    return check
  }
  const queued = compare('queued')
  assert.equal(queued.queue, 'one')
  assert.equal(queued.priority, 5)
  assert.deepEqual(queued.after, [first.jobId])
  fs.writeFileSync(go, '')
  await waitFor(() => checkJson(home, ack.jobId).readyAt, { what: 'ready' })
  compare('running')
  runBg(home, ['kill', ack.jobId])
})

test('skipped and queued jobs in summary, wait and the MCP check_job', async (t) => {
  const { home } = makeHome(t)
  const go = path.join(home, 'go')
  const fail = path.join(home, 'fail')
  const failing = startJob(home, ['sh', '-c', `while [ ! -f ${JSON.stringify(fail)} ]; do sleep 0.05; done; exit 4`])
  const skipped = startJob(home, ['true'], ['--after', failing.jobId])
  fs.writeFileSync(fail, '')
  const blocker = startJob(home, untilFile(go))
  const queued = startJob(home, ['true'], ['--after', blocker.jobId])
  // Not with check or wait: a job looked at leaves the summary.
  await waitFor(() => readRegistry(home).find((j) => j.id === skipped.jobId)?.status === 'skipped', { what: 'the skip' })
  const summary = runBg(home, ['summary']).stdout
  assert.match(summary, new RegExp(`${skipped.jobId}[^\\n]*skipped`), summary)
  assert.match(summary, new RegExp(`${queued.jobId}[^\\n]*queued`), summary)
  const waited = runBg(home, ['wait', skipped.jobId, '--timeout', '10s'])
  assert.notEqual(waited.code, 0, 'a skipped job is no success')
  assert.notEqual(waited.code, 124)
  const pending = runBg(home, ['wait', queued.jobId, '--timeout', '300ms'])
  assert.equal(pending.code, 124, 'a queued job is waited for')
  const client = await connectMcp(t, home)
  for (const [id, status] of [[skipped.jobId, 'skipped'], [queued.jobId, 'queued']]) {
    const answer = await client.callTool({ name: 'check_job', arguments: { jobId: id } })
    assert.equal(answer.isError ?? false, false, JSON.stringify(answer))
    assert.equal(answer.structuredContent.status, status, JSON.stringify(answer.structuredContent))
    assert.ok(!hasNull(answer.structuredContent))
  }
  fs.writeFileSync(go, '')
  const done = runBg(home, ['wait', queued.jobId, '--timeout', '30s'])
  assert.equal(done.code, 0)
})
