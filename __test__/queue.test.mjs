// Jobs that start later without a daemon: --after, queues with a parallel
// limit, priorities. Every slot is handed on by the supervisor of the job
// that ended, or by the next invocation when that supervisor died.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, runBg, startJob, readRegistry, waitFor, killPid, isAlive, pm, RUN_BG, root, startListener, waitForQuiet, connectMcp, jobFiles } from './helpers.mjs'

/** Every field `value` has is declared in index.d.ts's interface `name`, and every required one is there. */
function assertDeclared(name, value) {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const body = dts.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))
  assert.ok(body, `index.d.ts declares ${name}`)
  const fields = Object.fromEntries([...body[1].matchAll(/^ {2}(\w+)(\?)?: /gm)].map((m) => [m[1], m[2] ? 'optional' : 'required']))
  for (const key of Object.keys(value)) assert.ok(key in fields, `${name} returns ${key}, which index.d.ts does not declare`)
  for (const [key, kind] of Object.entries(fields)) {
    if (kind === 'required') assert.ok(key in value, `index.d.ts says ${name}.${key} is always there; it is not`)
  }
}

/** The most jobs whose [started_at, ended_at) overlap at any instant. */
function maxOverlap(jobs) {
  const events = []
  for (const j of jobs) {
    assert.ok(j.started_at > 0 && j.ended_at >= j.started_at, `${j.id}: ${j.status} ${j.started_at}–${j.ended_at}`)
    events.push([j.started_at, 1], [j.ended_at, -1])
  }
  // An end and a start in the same millisecond do not overlap.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let now = 0
  let most = 0
  for (const [, d] of events) {
    now += d
    most = Math.max(most, now)
  }
  return most
}

function waitJobs(home, ids) {
  const r = runBg(home, ['wait', ...ids, '--timeout', '60s', '--json'])
  assert.notEqual(r.code, 124, `wait timed out: ${r.stdout}`)
  return JSON.parse(r.stdout).jobs
}

const lines = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [])

test('--after: a chain of three starts in order; a failing middle job skips the last, which says why', async (t) => {
  const { home } = makeHome(t)
  const order = path.join(home, 'order')
  const a = startJob(home, ['sh', '-c', `echo a >> ${order}; sleep 0.3`])
  const b = startJob(home, ['sh', '-c', `echo b >> ${order}; sleep 0.1`], ['--after', a.jobId])
  assert.equal(b.status, 'queued', JSON.stringify(b))
  assert.equal(b.pid, undefined, 'no pid before it starts')
  assert.deepEqual(b.waitingFor, [a.jobId])
  const text = runBg(home, ['--after', b.jobId, '--', 'sh', '-c', `echo c >> ${order}`])
  assert.equal(text.code, 0, text.stderr)
  const c = text.stdout.match(/^queued (\S+) \(after (\S+)\) — run-bg check \1\n$/)
  assert.ok(c, text.stdout)
  assert.equal(c[2], b.jobId)
  assert.ok(text.stdout.length < 200)

  const ended = waitJobs(home, [a.jobId, b.jobId, c[1]])
  assert.deepEqual(ended.map((j) => j.status), ['success', 'success', 'success'])
  assert.deepEqual(lines(order), ['a', 'b', 'c'])
  const [ra, rb, rc] = ended
  assert.ok(rb.startedAt >= ra.endedAt && rc.startedAt >= rb.endedAt, JSON.stringify(ended))
  assert.deepEqual(rc.after, [b.jobId])

  // A failing middle job: the last never runs and ends `skipped`, with the reason.
  const never = path.join(home, 'never')
  const x = startJob(home, ['sh', '-c', 'sleep 0.2'])
  const y = startJob(home, ['sh', '-c', 'exit 1'], ['--after', x.jobId])
  const z = startJob(home, ['touch', never], ['--after', y.jobId])
  const any = startJob(home, ['true'], ['--after', y.jobId, '--after-any'])
  const [, ry, rz, rany] = waitJobs(home, [x.jobId, y.jobId, z.jobId, any.jobId])
  assert.equal(ry.status, 'failed')
  assert.equal(rz.status, 'skipped')
  assert.equal(rz.error, `skipped: ${y.jobId} failed (exit 1)`)
  assert.equal(rz.pid, undefined)
  assert.equal(rany.status, 'success', '--after-any starts whatever the outcome')
  assert.ok(!fs.existsSync(never), 'the skipped job never ran')
  const check = runBg(home, ['check', z.jobId])
  assert.match(check.stdout, new RegExp(`skipped after .*never started \\(${y.jobId} failed \\(exit 1\\)\\)`))
  assert.equal(runBg(home, ['wait', z.jobId]).code, 1, 'a skipped job is no success')
  // Submitted after its dependency failed: skipped at once.
  const late = runBg(home, ['--after', y.jobId, '--', 'touch', never])
  assert.equal(late.code, 1)
  assert.match(late.stderr, /was not started: skipped: .* failed \(exit 1\)/)
})

test('a skipped job is announced once, its message saying which job it waited for did not succeed', async (t) => {
  const listener = await startListener(t)
  const { home } = makeHome(t, { notify: { url: listener.url } })
  const gate = path.join(home, 'gate')
  const a = startJob(home, ['sh', '-c', `while [ ! -e ${gate} ]; do sleep 0.02; done; exit 2`], ['--no-notify'])
  const b = startJob(home, ['true'], ['--after', a.jobId])
  fs.writeFileSync(gate, '')
  assert.equal(runBg(home, ['wait', b.jobId]).code, 1)
  const [request] = await waitFor(() => listener.requests().length >= 1 && listener.requests(), { what: 'the POST' })
  const { data } = request.json
  assert.equal(data.jobId, b.jobId)
  assert.equal(data.status, 'skipped')
  assert.equal(data.eventId, `${b.jobId}:skipped`)
  assert.match(data.message, new RegExp(`^run-bg: ${b.jobId} \\(true\\) skipped, never started \\(${a.jobId} failed \\(exit 2\\)\\), after \\S+; run-bg check ${b.jobId}$`))
  await waitForQuiet(home)
  assert.equal(listener.requests().length, 1, 'exactly one request: the skipped job (a has --no-notify)')
})

test('--timeout counts from the real start, not from the submit', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const blocker = startJob(home, ['sleep', '1.5'], ['--queue', 'q'])
  const late = startJob(home, ['sleep', '0.2'], ['--queue', 'q', '--timeout', '1s'])
  assert.equal(late.status, 'queued')
  const [first, done] = waitJobs(home, [blocker.jobId, late.jobId])
  assert.equal(done.status, 'success', 'queued 1.5 s, ran 0.2 s: within its 1 s timeout')
  assert.ok(done.startedAt >= first.endedAt, 'its startedAt is its real start')
  assert.ok(done.durationMs < 1000, `ran ${done.durationMs} ms`)
})

test('--after an unknown job, an unknown queue, --after-any alone and a lone --priority are refused at submit', (t) => {
  const { home } = makeHome(t, { queues: { heavy: { max_parallel: 1 } } })
  const unknown = runBg(home, ['--after', 'nope-123456', '--', 'true'])
  assert.equal(unknown.code, 2)
  assert.match(unknown.stderr, /--after: no job `nope-123456` in the registry/)
  const queue = runBg(home, ['--queue', 'light', '--', 'true'])
  assert.equal(queue.code, 2)
  assert.match(queue.stderr, /unknown queue `light`: config.json's `queues` names heavy/)
  assert.match(runBg(home, ['--after-any', '--', 'true']).stderr, /--after-any needs/)
  assert.match(runBg(home, ['--priority', '3', '--', 'true']).stderr, /--priority orders a queue/)
  assert.equal(fs.readdirSync(path.join(home, 'jobs')).length, 0, 'nothing recorded')
})

test('a queue of max_parallel 2 never runs more than 2 of its 10 jobs at once, and all finish', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 2 } } })
  const go = path.join(home, 'go')
  const ids = []
  for (let i = 0; i < 10; i++) {
    ids.push(startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.01; done; sleep 0.05`], ['--queue', 'q']).jobId)
  }
  const count = (jobs, status) => jobs.filter((j) => j.status === status).length
  const before = jobFiles(home)
  assert.deepEqual([count(before, 'running'), count(before, 'queued')], [2, 8])
  fs.writeFileSync(go, '')
  let most = 0
  await waitFor(() => {
    const jobs = jobFiles(home)
    most = Math.max(most, count(jobs, 'running'))
    return jobs.length === 10 && jobs.every((j) => j.status === 'success')
  }, { timeout: 60_000, interval: 20, what: 'the ten jobs to finish' })
  assert.ok(most <= 2, `${most} ran at once in a sample`)
  const records = jobFiles(home)
  assert.equal(records.length, 10)
  assert.equal(maxOverlap(records), 2, 'never more than 2 at once, and the slots were used')
})

test('priorities reorder the queue: higher first, first come first served within one', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  const order = path.join(home, 'order')
  const blocker = startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done`], ['--queue', 'q'])
  assert.equal(blocker.status, 'running')
  const job = (name, priority) =>
    startJob(home, ['sh', '-c', `echo ${name} >> ${order}`], ['--queue', 'q', '--priority', String(priority)])
  const p1 = job('p1', 0)
  const p2 = job('p2', 5)
  const p3 = job('p3', 5)
  const p4 = job('p4', -1)
  assert.deepEqual([p1.position, p2.position, p3.position, p4.position], [1, 1, 2, 4])
  const listed = JSON.parse(runBg(home, ['list', '--json']).stdout)
  const place = Object.fromEntries(listed.map((j) => [j.jobId, j.position]))
  assert.deepEqual([place[p2.jobId], place[p3.jobId], place[p1.jobId], place[p4.jobId]], [1, 2, 3, 4])
  assert.equal(listed.find((j) => j.jobId === p2.jobId).priority, 5)
  const text = runBg(home, ['list']).stdout
  assert.match(text, new RegExp(`${p3.jobId}  queued: 2nd in queue q  `), text)
  fs.writeFileSync(go, '')
  waitJobs(home, [blocker.jobId, p1.jobId, p2.jobId, p3.jobId, p4.jobId])
  assert.deepEqual(lines(order), ['p2', 'p3', 'p1', 'p4'])
})

test('killing a queued job removes it from the queue as killed, and starts nothing', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  const ran = path.join(home, 'ran')
  const blocker = startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done`], ['--queue', 'q'])
  const x = startJob(home, ['touch', ran], ['--queue', 'q'])
  assert.equal(x.status, 'queued')
  const killed = runBg(home, ['kill', x.jobId, '--json'])
  assert.equal(killed.code, 0, killed.stderr)
  const [result] = JSON.parse(killed.stdout)
  assert.equal(result.status, 'killed')
  assert.equal(result.signalled, false)
  assert.match(result.message, /it was queued; nothing had started/)
  assert.equal(JSON.parse(runBg(home, ['check', x.jobId, '--json']).stdout).pid, undefined)
  // A job queued after it: if the killed one could still start, it would start first.
  const y = startJob(home, ['true'], ['--queue', 'q'])
  fs.writeFileSync(go, '')
  const [, rx, ry] = waitJobs(home, [blocker.jobId, x.jobId, y.jobId])
  assert.equal(rx.status, 'killed')
  assert.equal(ry.status, 'success')
  assert.ok(!fs.existsSync(ran), 'the killed queued job never ran')
})

test('a supervisor SIGKILLed mid-queue: the next invocation hands its slot on and the queue drains', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const ran = path.join(home, 'ran')
  const a = startJob(home, ['sleep', '30'], ['--queue', 'q'])
  const b = startJob(home, ['sh', '-c', `echo b >> ${ran}`], ['--queue', 'q'])
  const c = startJob(home, ['sh', '-c', `echo c >> ${ran}`], ['--queue', 'q'])
  const record = await waitFor(() => readRegistry(home).find((j) => j.id === a.jobId && j.supervisor && j.main))
  killPid(record.supervisor.pid)
  killPid(record.main.pid)
  await waitFor(() => !isAlive(record.supervisor.pid) && !isAlive(record.main.pid), { what: 'both gone' })
  assert.equal(jobFiles(home).find((j) => j.id === b.jobId).status, 'queued', 'nobody handed the slot on')
  // Any invocation: it finds a's supervisor gone and starts b; b's supervisor hands on to c.
  assert.equal(runBg(home, ['list']).code, 0)
  await waitFor(() => {
    const jobs = jobFiles(home)
    return [b.jobId, c.jobId].every((id) => jobs.find((j) => j.id === id)?.status === 'success')
  }, { what: 'b and c to run' })
  assert.deepEqual(lines(ran), ['b', 'c'])
  assert.equal(readRegistry(home).find((j) => j.id === a.jobId).status, 'lost')
})

test('a wait on a queued job starts it when the supervisor holding its slot dies, with no other invocation', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const a = startJob(home, ['sleep', '30'], ['--queue', 'q'])
  const b = startJob(home, ['true'], ['--queue', 'q'])
  const record = await waitFor(() => readRegistry(home).find((j) => j.id === a.jobId && j.supervisor && j.main))
  const waiting = new Promise((resolve, reject) => {
    const child = spawn(RUN_BG, ['wait', b.jobId, '--timeout', '60s'], { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: 'ignore' })
    child.on('error', reject)
    child.on('close', resolve)
  })
  killPid(record.supervisor.pid)
  killPid(record.main.pid)
  assert.equal(await waiting, 0, 'b ran and succeeded, started by the wait itself')
})

test('50 jobs queued at once from 50 processes: none lost, none started twice', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 3 } } })
  const starts = path.join(home, 'starts')
  const submit = () =>
    new Promise((resolve, reject) => {
      const child = spawn(RUN_BG, ['--queue', 'q', '--json', '--', 'sh', '-c', `echo $PROC_MANAGER_JOB >> ${starts}`], {
        env: { ...process.env, PROC_MANAGER_HOME: home },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      let err = ''
      child.stdout.on('data', (d) => (out += d))
      child.stderr.on('data', (d) => (err += d))
      child.on('error', reject)
      child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}: ${err}`))))
    })
  const acks = await Promise.all(Array.from({ length: 50 }, submit))
  const ids = acks.map((a) => a.jobId)
  assert.equal(new Set(ids).size, 50)
  const ended = waitJobs(home, ids)
  assert.deepEqual(new Set(ended.map((j) => j.status)), new Set(['success']))
  const started = lines(starts)
  assert.equal(started.length, 50, 'each job ran once')
  assert.deepEqual(new Set(started), new Set(ids))
  assert.ok(maxOverlap(jobFiles(home)) <= 3)
})

test('JS: runBackground takes after, queue and priority; a queued job says so and waitJob waits through the queue', async (t) => {
  const { home } = makeHome(t, { queues: { heavy: { max_parallel: 1 } } })
  process.env.PROC_MANAGER_HOME = home
  t.after(() => delete process.env.PROC_MANAGER_HOME)
  const go = path.join(home, 'go')
  const first = pm.runBackground(`while [ ! -e ${go} ]; do sleep 0.02; done`, { queue: 'heavy' })
  assert.equal(first.status, 'running')
  const second = pm.runBackground('true', { queue: 'heavy', priority: 2 })
  assert.deepEqual({ status: second.status, position: second.position, queue: second.queue }, { status: 'queued', position: 1, queue: 'heavy' })
  const third = pm.runBackground('true', { after: [second.jobId], afterAny: true })
  assert.equal(third.status, 'queued')
  for (const started of [first, second, third]) assertDeclared('RunResult', started)
  for (const job of pm.listJobs()) assertDeclared('JobSummary', job)
  const listed = pm.listJobs().find((j) => j.jobId === third.jobId)
  assert.deepEqual([listed.status, listed.position, listed.waitingFor, listed.after], ['queued', 1, [second.jobId], [second.jobId]])
  assert.match(pm.listJobsText(), new RegExp(`${third.jobId}  queued: after ${second.jobId}`))
  assert.throws(() => pm.runBackground('true', { priority: 1.5, queue: 'heavy' }), /bad priority: 1.5; give a whole number/)
  assert.throws(() => pm.runBackground('true', { after: ['nope-123456'] }), /no job `nope-123456`/)
  const waiting = pm.waitJob(third.jobId, { timeoutMs: 60_000 })
  fs.writeFileSync(go, '')
  const done = await waiting
  assert.equal(done.status, 'success')
  assert.equal(done.timedOut, false)
})

test('MCP: run_background takes after, queue and priority and says when the job is queued', async (t) => {
  const { home } = makeHome(t, { queues: { heavy: { max_parallel: 1 } } })
  const client = await connectMcp(t, home)
  const go = path.join(home, 'go')
  const call = (args) => client.callTool({ name: 'run_background', arguments: args })
  const first = await call({ command: `while [ ! -e ${go} ]; do sleep 0.02; done`, queue: 'heavy' })
  assert.equal(first.structuredContent.status, 'running')
  const second = await call({ command: 'true', queue: 'heavy', priority: 3 })
  assert.equal(second.structuredContent.status, 'queued')
  const id = second.structuredContent.jobId
  assert.match(second.content[0].text, new RegExp(`^queued jobId: ${id} \\(#1 in queue heavy\\); check it with check_job or wait_job$`))
  const third = await call({ command: 'true', after: [id] })
  assert.match(third.content[0].text, new RegExp(`\\(after ${id}\\)`))
  const bad = await call({ command: 'true', after: ['nope-123456'] })
  assert.equal(bad.isError, true)
  assert.match(bad.content[0].text, /no job `nope-123456`/)
  const listed = await client.callTool({ name: 'list_jobs', arguments: { status: 'queued' } })
  assert.equal(listed.structuredContent.jobs.length, 2)
  fs.writeFileSync(go, '')
  const waited = await client.callTool({ name: 'wait_job', arguments: { jobId: third.structuredContent.jobId } })
  assert.equal(waited.structuredContent.status, 'success')
})

test('a queued job whose job.json cannot be read is listed as corrupt naming the file, check says so, and kill and prune remove its directory and spec.json', async (t) => {
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  const blocker = startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done`], ['--queue', 'q'])
  t.after(() => killPid(blocker.pid))
  const queued = [0, 1].map(() => startJob(home, ['true'], ['--queue', 'q']))
  for (const job of queued) {
    assert.equal(job.status, 'queued')
    const dir = path.join(home, 'jobs', job.jobId)
    assert.ok(fs.existsSync(path.join(dir, 'spec.json')), 'a queued job keeps its launch spec')
    fs.writeFileSync(path.join(dir, 'job.json'), '{"id": "' + job.jobId + '", "status": "queu')
  }
  const [byKill, byPrune] = queued.map((j) => j.jobId)
  const record = (id) => path.join(home, 'jobs', id, 'job.json')

  const list = runBg(home, ['list'])
  assert.equal(list.code, 0, list.stderr)
  for (const id of [byKill, byPrune]) {
    assert.match(list.stdout, new RegExp(`^${id}  corrupt: record ${record(id).replaceAll('/', '\\/')} cannot be read \\(.+\\) — \`run-bg kill ${id}\` removes it$`, 'm'))
  }
  const listed = JSON.parse(runBg(home, ['list', '--json']).stdout).find((j) => j.jobId === byKill)
  assert.deepEqual([listed?.status, listed?.recordFile], ['corrupt', record(byKill)])
  process.env.PROC_MANAGER_HOME = home
  assertDeclared('CorruptJob', pm.listJobs().find((j) => j.jobId === byKill))
  assert.match(pm.listJobsText(), new RegExp(`^${byKill}  corrupt: `, 'm'))

  const check = runBg(home, ['check', byKill])
  assert.notEqual(check.code, 0)
  assert.doesNotMatch(check.stderr, /no job with id/)
  assert.match(check.stderr, new RegExp(`job ${byKill} is corrupt: its record ${record(byKill).replaceAll('/', '\\/')} cannot be read`))

  const killed = runBg(home, ['kill', byKill, '--json'])
  assert.equal(killed.code, 0, killed.stderr)
  const [outcome] = JSON.parse(killed.stdout)
  assert.deepEqual([outcome.jobId, outcome.signalled], [byKill, false])
  assert.match(outcome.message, /could not be read .*its directory, launch spec included, is deleted/)
  assert.ok(!fs.existsSync(path.join(home, 'jobs', byKill)), 'kill removed its directory')

  const pruned = runBg(home, ['prune', '--json'])
  assert.equal(pruned.code, 0, pruned.stderr)
  assert.ok(JSON.parse(pruned.stdout).removed.includes(byPrune), pruned.stdout)
  assert.ok(!fs.existsSync(path.join(home, 'jobs', byPrune)), 'prune removed its directory, spec.json with it')
  assert.doesNotMatch(runBg(home, ['list']).stdout, /corrupt/)
  assert.equal(JSON.parse(runBg(home, ['check', blocker.jobId, '--json']).stdout).status, 'running', 'the running job is untouched')
  fs.writeFileSync(go, '')
  assert.equal(waitJobs(home, [blocker.jobId])[0].status, 'success')
})

test('a job.json that is valid JSON but not a record this version reads (a newer status) is listed, but kill and prune never remove its directory', async (t) => {
  // Counted as corrupt, it was deleted, spec.json and all, by prune or kill:
  // a newer version's record, or a read that failed for a moment (EMFILE,
  // EIO), is not garbage.
  const { home } = makeHome(t, { queues: { q: { max_parallel: 1 } } })
  const go = path.join(home, 'go')
  const blocker = startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done`], ['--queue', 'q'])
  t.after(() => killPid(blocker.pid))
  const job = startJob(home, ['true'], ['--queue', 'q'])
  assert.equal(job.status, 'queued')
  const dir = path.join(home, 'jobs', job.jobId)
  const file = path.join(dir, 'job.json')
  const record = JSON.parse(fs.readFileSync(file, 'utf8'))
  record.status = 'hibernating'
  fs.writeFileSync(file, JSON.stringify(record))
  const old = new Date(Date.now() - 30 * 24 * 3600 * 1000)
  fs.utimesSync(file, old, old)

  const list = runBg(home, ['list'])
  assert.equal(list.code, 0, list.stderr)
  assert.match(list.stdout, new RegExp(`^${job.jobId}  `, 'm'), 'it is still listed')
  const killed = runBg(home, ['kill', job.jobId])
  assert.notEqual(killed.code, 0, 'kill cannot know what to signal, and must not delete it')
  assert.match(killed.stderr, /not removed/)
  assert.ok(fs.existsSync(path.join(dir, 'spec.json')), 'kill left its directory')
  const pruned = runBg(home, ['prune', '--json'])
  assert.equal(pruned.code, 0, pruned.stderr)
  assert.ok(!JSON.parse(pruned.stdout).removed.includes(job.jobId), pruned.stdout)
  assert.ok(fs.existsSync(path.join(dir, 'spec.json')), 'prune left its directory, spec.json with it')
  fs.writeFileSync(go, '')
  assert.equal(waitJobs(home, [blocker.jobId])[0].status, 'success')
})
