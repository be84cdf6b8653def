// Exit notifications against a double of OpenClaw's interrupt service
// (fixtures/interrupt-service.mjs): what it answered is what is recorded,
// its levels, retries that do not multiply wake-ups, payloads whose every
// `{{key}}` resolves.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, runBg, startJob, checkJson, waitFor, waitForQuiet, readRegistry, isAlive, freePort, pm, connectMcp, processEnvironments, killPid } from './helpers.mjs'
import { startInterruptService } from './fixtures/interrupt-service.mjs'

// Batches go out quickly; the rate limits stay the service's.
const FAST = { message: { batch_window_ms: 100 }, subagent: { batch_window_ms: 100 } }

function writeConfig(home, config) {
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify(config))
}

async function triggersOf(service, jobId) {
  return (await service.inspect()).triggers.filter((t) => t.body.data?.jobId === jobId)
}

/** Every text the agent got (each item of each dispatched batch), with the event it came from. */
async function delivered(service) {
  return (await service.inspect()).dispatched.flatMap((batch) => batch.items.map((item) => ({ ...item, pipeline: batch.pipeline })))
}

async function settled(home, jobId) {
  return waitFor(() => {
    const n = checkJson(home, jobId).notification
    return n && n.state !== 'pending' ? n : null
  }, { what: `a settled notification for ${jobId}` })
}

test('what the interrupt service answered is recorded: queued, ignored, failed on a 4xx at once', async (t) => {
  const service = await startInterruptService(t, FAST)

  const { home } = makeHome(t, { notify: { url: service.url } })
  const { jobId } = startJob(home, ['true'])
  runBg(home, ['wait', jobId])
  const queued = await settled(home, jobId)
  assert.equal(queued.state, 'queued')
  assert.equal(queued.matched, 0)
  assert.equal(queued.level, 'warn')
  assert.doesNotMatch(runBg(home, ['check', jobId]).stdout, /notification:/, 'nothing to say about a queued event')
  await waitFor(async () => (await delivered(service)).some((d) => d.data.jobId === jobId), { what: 'the agent side' })

  const info = makeHome(t, { notify: { url: service.url, level: 'info' } }).home
  const quiet = startJob(info, ['true']).jobId
  runBg(info, ['wait', quiet])
  const ignored = await settled(info, quiet)
  assert.deepEqual([ignored.state, ignored.reason, ignored.attempts], ['ignored', 'no matching rules', 1])
  assert.match(runBg(info, ['check', quiet]).stdout,
    /\n {2}notification: ignored by the interrupt service \(no matching rule at level info\)\n/)

  const wrongPath = makeHome(t, { notify: { url: `${service.base}/nope`, retry_for_ms: 3000 } }).home
  const lost = startJob(wrongPath, ['true']).jobId
  runBg(wrongPath, ['wait', lost])
  const refused = await settled(wrongPath, lost)
  await waitForQuiet(wrongPath)
  const final = checkJson(wrongPath, lost).notification
  assert.deepEqual([final.state, final.attempts, final.lastError, final.reason],
    ['failed', 1, 'HTTP 404 Not Found: Not found', 'Not found'], JSON.stringify(refused))
  assert.ok(!fs.existsSync(path.join(wrongPath, 'spool', `${lost}.success.json`)), 'a 4xx is not spooled')
  assert.match(runBg(wrongPath, ['check', lost]).stdout, /notification: failed: HTTP 404 Not Found: Not found/)

  // The service's own 400 names the field it missed.
  const noSource = makeHome(t, { notify: { url: service.url, source: '' } }).home
  const bad = startJob(noSource, ['true']).jobId
  runBg(noSource, ['wait', bad])
  const n = await settled(noSource, bad)
  assert.deepEqual([n.state, n.attempts, n.reason], ['failed', 1, 'Missing required field: source'])
})

test('the service\'s levels: alert is accepted, a level per outcome, others refused by name (a kill still goes through)', async (t) => {
  const service = await startInterruptService(t, FAST)
  const { home } = makeHome(t, { notify: { url: service.url, level: 'alert', levels: { success: 'info' } } })
  const failing = startJob(home, ['sh', '-c', 'exit 2']).jobId
  const fine = startJob(home, ['true']).jobId
  runBg(home, ['wait', failing, fine])
  assert.equal((await settled(home, failing)).state, 'queued')
  assert.equal((await settled(home, fine)).state, 'ignored')
  const levels = Object.fromEntries((await service.inspect()).triggers.map((tr) => [tr.body.data.jobId, tr.body.level]))
  assert.deepEqual(levels, { [failing]: 'alert', [fine]: 'info' })
  const sub = await waitFor(async () => (await delivered(service)).find((d) => d.data.jobId === failing), { what: 'sub-agent dispatch' })
  assert.equal(sub.pipeline, 'subagent')

  // Killed with the default settings, which would announce it to the default address.
  const running = startJob(home, ['sleep', '30'], ['--no-notify'])
  writeConfig(home, { notify: { url: service.url, levels: { timeout: 'error' } } })
  const refused = runBg(home, ['list'])
  assert.equal(refused.code, 2)
  assert.match(refused.stderr, /key `notify\.levels\.timeout`: `error` is not one of the interrupt service's levels info, warn, alert/)
  const killed = runBg(home, ['kill', running.jobId])
  assert.equal(killed.code, 0, killed.stderr)
  await waitFor(() => !isAlive(running.pid), { what: 'the kill despite a bad config.json' })
  writeConfig(home, { notify: { url: null } })
})

test('a 5xx is retried at most 3 times, with one eventId; a 500 after a partial queue gives at most 3 wake-ups', async (t) => {
  const service = await startInterruptService(t, FAST)
  await service.control({ fail: { status: 500, count: 1000, afterQueue: true, error: 'boom' } })
  const { home } = makeHome(t, { notify: { url: service.url, retry_for_ms: 8000 } })
  const { jobId } = startJob(home, ['sh', '-c', 'exit 1'])
  runBg(home, ['wait', jobId])
  await waitForQuiet(home)
  const triggers = await triggersOf(service, jobId)
  assert.equal(triggers.length, 3, `POSTs: ${triggers.length}`)
  assert.deepEqual([...new Set(triggers.map((tr) => tr.body.data.eventId))], [`${jobId}:failed`])
  const n = checkJson(home, jobId).notification
  assert.deepEqual([n.state, n.attempts, n.lastError], ['failed', 3, 'HTTP 500 Internal Server Error: boom'])
  assert.match(n.reason, /after 3 server errors/)
  assert.ok(!fs.existsSync(path.join(home, 'spool', `${jobId}.failed.json`)))
  const wakeUps = await waitFor(async () => {
    const got = (await delivered(service)).filter((d) => d.data.jobId === jobId)
    return got.length >= 3 && got
  }, { what: 'the three queued copies' })
  assert.equal(wakeUps.length, 3)
})

function nulls(value, where = 'data') {
  if (value === null) return [where]
  if (typeof value !== 'object') return []
  return Object.entries(value).flatMap(([k, v]) => nulls(v, `${where}.${k}`))
}

test('no null in any payload: exitCode, signal and outcome resolve every template, killed and timed out too', async (t) => {
  const service = await startInterruptService(t, FAST)
  await service.addRule({
    id: 'ends', source: 'run-bg', action: 'message',
    message: 'job {{jobId}} {{status}} exit {{exitCode}} signal {{signal}} ({{outcome}}) owner {{owner}}',
  })
  const { home } = makeHome(t, { notify: { url: service.url }, kill: { grace_ms: 2000 } })
  const killed = startJob(home, ['sleep', '30'])
  const timed = startJob(home, ['sleep', '30'], ['--timeout', '1s'])
  const failed = startJob(home, ['sh', '-c', 'exit 3'])
  runBg(home, ['kill', killed.jobId])
  runBg(home, ['wait', killed.jobId, timed.jobId, failed.jobId, '--timeout', '20s'])
  const ids = [killed.jobId, timed.jobId, failed.jobId]
  const texts = await waitFor(async () => {
    const got = (await delivered(service)).filter((d) => ids.includes(d.data.jobId))
    return got.length >= 3 && Object.fromEntries(got.map((d) => [d.data.jobId, d]))
  }, { what: 'three dispatched texts' })
  for (const id of ids) {
    assert.deepEqual(nulls(texts[id].data), [], id)
    assert.doesNotMatch(texts[id].text, /\{\{/, texts[id].text)
  }
  assert.equal(texts[killed.jobId].text, `job ${killed.jobId} killed exit 143 signal SIGTERM (killed (signal SIGTERM)) owner `)
  assert.equal(texts[timed.jobId].text, `job ${timed.jobId} timeout exit 143 signal SIGTERM (timeout after 1.0s) owner `)
  assert.equal(texts[failed.jobId].text, `job ${failed.jobId} failed exit 3 signal  (exit 3) owner `)
})

test('a failed job\'s message ends with its first error line, which the service\'s {{key}} filling cannot touch', async (t) => {
  const service = await startInterruptService(t, FAST)
  // No message of its own: the service fills data.message as the template.
  await service.addRule({ id: 'failures', source: 'run-bg', condition: { status: 'failed' }, action: 'message' })
  const { home } = makeHome(t, { notify: { url: service.url } })
  const script = 'echo compiling; echo "error: cannot open {{jobId}}/{{{logPath}}}"; echo "npm ERR! second"; echo done; exit 1'
  const { jobId } = startJob(home, ['sh', '-c', script])
  runBg(home, ['wait', jobId])
  const got = await waitFor(async () => (await delivered(service)).find((d) => d.data.jobId === jobId), { what: 'dispatch' })
  assert.ok(got.text.startsWith(`run-bg: ${jobId} (sh -c `), got.text)
  assert.ok(got.text.endsWith('; first error: error: cannot open { {jobId} }/{ { {logPath} } }'), got.text)
  assert.equal(got.text.split(jobId).length - 1, 2, 'the job id only where we put it')
  assert.equal(checkJson(home, jobId).notification.matched, 1)
})

test('a spooled event is delivered with no run-bg invocation once the service comes back', async (t) => {
  const port = await freePort()
  const { home } = makeHome(t, { notify: { url: `http://127.0.0.1:${port}/trigger`, retry_for_ms: 300 } })
  const { jobId } = startJob(home, ['sh', '-c', 'echo done'])
  // From here on no run-bg is invoked (each would hand the spool to a deliverer itself): files only.
  const spooled = path.join(home, 'spool', `${jobId}.success.json`)
  await waitFor(() => fs.existsSync(spooled), { what: 'the spooled event' })
  const service = await startInterruptService(t, { ...FAST, port })
  const [trigger] = await waitFor(async () => {
    const got = await triggersOf(service, jobId)
    return got.length >= 1 && got
  }, { what: 'delivery by the background deliverer', timeout: 40_000, interval: 200 })
  assert.equal(trigger.body.data.eventId, `${jobId}:success`)
  const n = await waitFor(() => {
    const note = readRegistry(home).find((j) => j.id === jobId)?.notification
    return note?.state === 'queued' && note
  }, { what: 'queued recorded' })
  assert.ok(n.attempts >= 2, JSON.stringify(n))
  await waitFor(() => !fs.existsSync(spooled), { what: 'the spool emptied' })
  await waitForQuiet(home)
  assert.equal((await triggersOf(service, jobId)).length, 1, 'sent once')
})

test('the built-in address with nothing listening: no-listener, nothing spooled, nothing left running, one hint per home', async (t) => {
  const net = await import('node:net')
  const taken = await new Promise((resolve) => {
    const socket = net.connect(7600, '127.0.0.1', () => { socket.destroy(); resolve(true) })
    socket.on('error', () => resolve(false))
  })
  if (taken) return t.skip('something listens on 127.0.0.1:7600 here')
  const { home } = makeHome(t)
  writeConfig(home, { notify: { retry_for_ms: 500 } })
  const first = startJob(home, ['true']).jobId
  runBg(home, ['wait', first])
  await waitFor(() => checkJson(home, first).notification.state === 'no-listener', { what: 'no-listener' })
  const second = startJob(home, ['true']).jobId
  runBg(home, ['wait', second])
  await waitFor(() => checkJson(home, second).notification.state === 'no-listener', { what: 'no-listener' })
  await waitForQuiet(home)
  const spool = path.join(home, 'spool')
  assert.deepEqual(fs.existsSync(spool) ? fs.readdirSync(spool) : [], [], 'nothing spooled')
  const lines = [first, second].map((id) => runBg(home, ['check', id]).stdout.split('\n').filter((l) => l.includes('notification')))
  assert.deepEqual(lines[0], ['  notification: not sent: no interrupt service listens at the default address; set `notify.url` in config.json to yours, or `"notify": {"url": null}` to stop trying'])
  assert.deepEqual(lines[1], ['  notification: not sent (no interrupt service listening)'])
  await waitForQuiet(home)
})

test('12 jobs ending in a burst all reach the agent side within the service\'s rate limit, none dropped', async (t) => {
  // The service's minute and batch window scaled down 10x, and our pace with them.
  const scaled = { batch_window_ms: 200, rate_limit_max: 10, rate_limit_window_ms: 6000 }
  const service = await startInterruptService(t, { message: scaled, subagent: { batch_window_ms: 100 } })
  const { home } = makeHome(t, {
    notify: { url: service.url, max_per_minute: 10, pace_window_ms: 6000, batch_window_ms: 200 },
  })
  const go = path.join(home, 'go')
  const ids = []
  for (let i = 0; i < 12; i++) {
    // The first ten 400 ms apart: each one past the batch window of the one
    // before (4 s apart at full scale), with room for 250 ms of lateness on a
    // busy machine before two would share a batch and leave a slot free. The
    // last two together, a second later: both over the limit, held, then
    // sent as one.
    const delay = i < 10 ? i * 0.4 : 9 * 0.4 + 1
    const script = `while [ ! -e ${go} ]; do sleep 0.02; done; sleep ${delay.toFixed(1)}; exit ${i % 4 === 0 ? 1 : 0}`
    ids.push(startJob(home, ['sh', '-c', script]).jobId)
  }
  fs.writeFileSync(go, '')
  const reached = (items) => new Set(items.flatMap((d) => (d.data.jobs ?? [d.data]).map((j) => j.jobId)))
  await waitFor(async () => {
    const got = reached(await delivered(service))
    return ids.every((id) => got.has(id))
  }, { what: 'all 12 ends at the agent side', timeout: 40_000, interval: 200 })
  const { dropped, dispatched, triggers } = await service.inspect()
  t.diagnostic(`POSTs ${triggers.length}, batches dispatched ${dispatched.length}, dropped ${dropped.length}, over ${((dispatched.at(-1).at - triggers[0].at) / 1000).toFixed(1)} s`)
  assert.deepEqual(dropped, [], 'no batch dropped by the rate limit')
  assert.ok(dispatched.length <= 11, `batches: ${dispatched.length}`)
  assert.ok(triggers.length < 12, `POSTs: ${triggers.length}: the last ones went together`)
  const merged = triggers.find((tr) => tr.body.data.jobs)
  assert.ok(merged, 'a merged event')
  assert.match(merged.body.data.message, new RegExp(`^run-bg: ${merged.body.data.jobs.length} jobs ended: `))
  for (const job of merged.body.data.jobs) assert.ok(merged.body.data.message.includes(job.jobId))
  assert.deepEqual(nulls(merged.body.data), [])
  await waitFor(() => ids.every((id) => readRegistry(home).find((j) => j.id === id)?.notification?.state === 'queued'),
    { what: 'every job recorded queued' })
})

const jobOf = (home, id) => readRegistry(home).find((j) => j.id === id)

test('--wake registers a one-off rule as the job starts; the end event fires it and the service removes it', async (t) => {
  const service = await startInterruptService(t, FAST)
  // Our look at the service's rules after its batch window: at its pace.
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 100 } })
  const go = path.join(home, 'go')
  const started = runBg(home, [
    '--wake', 'job {{jobId}} {{status}}: {{outcome}} (exit {{exitCode}})', '--wake-instruction', 'tell the user',
    '--json', '--', 'sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done; exit 4`,
  ])
  assert.equal(started.code, 0, started.stderr)
  assert.equal(started.stderr, '', 'no warning for known keys')
  const { jobId } = JSON.parse(started.stdout)
  const rule = await waitFor(async () => (await service.inspect()).rules.find((r) => r.id === `run-bg-${jobId}`),
    { what: 'the wake rule at the service while the job runs' })
  assert.deepEqual(rule, {
    enabled: true, id: `run-bg-${jobId}`, label: `run-bg wake for ${jobId}`, source: 'run-bg', condition: { jobId },
    action: 'message', one_off: true, message: 'job {{jobId}} {{status}}: {{outcome}} (exit {{exitCode}})', instruction: 'tell the user',
  })
  await waitFor(() => jobOf(home, jobId)?.wake?.state === 'registered', { what: 'registered recorded' })
  assert.equal(jobOf(home, jobId).status, 'running')
  assert.match(runBg(home, ['check', jobId]).stdout, new RegExp(`\\n  wake: registered run-bg-${jobId}\\n`))
  assert.deepEqual(jobOf(home, jobId).wake,
    { ...jobOf(home, jobId).wake, state: 'registered', rule_id: `run-bg-${jobId}`, url: `${service.base}/rules`, action: 'message' })

  fs.writeFileSync(go, '')
  const got = await waitFor(async () => (await delivered(service)).find((d) => d.data.jobId === jobId), { what: 'the wake-up' })
  assert.equal(got.text, `job ${jobId} failed: exit 4 (exit 4)`)
  assert.equal(got.instruction, 'tell the user')
  assert.equal((await settled(home, jobId)).matched, 1)
  await waitForQuiet(home)
  const after = await service.inspect()
  assert.equal(after.rules.length, 0, 'the service removed its one-off rule after the dispatch')
  assert.deepEqual(after.deleted, [], 'not removed by us')
  assert.equal(jobOf(home, jobId).wake.state, 'fired')
  assert.deepEqual(checkJson(home, jobId).wake, {
    state: 'fired', action: 'message', ruleId: `run-bg-${jobId}`, message: 'job {{jobId}} {{status}}: {{outcome}} (exit {{exitCode}})',
  })
  assert.match(runBg(home, ['check', jobId]).stdout,
    new RegExp(`\\n  wake: run-bg-${jobId} fired by the job's end \\(the service dispatched it and removed the rule\\)\\n`))
})

/** Waits for the job's wake rule to be settled at the service (or for everything to be quiet), and gives the record's wake. */
async function wakeSettled(home, jobId) {
  await waitFor(() => ['fired', 'not-fired', 'removed'].includes(jobOf(home, jobId)?.wake?.state) && jobOf(home, jobId).status !== 'running',
    { what: 'the wake rule settled', timeout: 30_000 }).catch(() => {})
  await waitForQuiet(home, 30_000)
  return jobOf(home, jobId).wake
}

test('a wake rule the service keeps because its dispatch failed is removed after the batch window and recorded not fired', async (t) => {
  const service = await startInterruptService(t, FAST)
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 100 } })
  await service.control({ dispatchFail: 1 })
  const jobId = startJob(home, ['true'], ['--wake', 'done {{jobId}}']).jobId
  await waitFor(async () => (await service.inspect()).failedDispatches.length === 1, { what: 'the service\'s dispatch to fail' })
  const wake = await wakeSettled(home, jobId)
  const state = await service.inspect()
  assert.equal((await delivered(service)).filter((d) => d.data.jobId === jobId).length, 0, 'the agent was never woken')
  assert.equal((await settled(home, jobId)).matched, 1, 'the end event did match the rule')
  assert.equal(wake.state, 'not-fired', `recorded ${JSON.stringify(wake)}; the service still holds ${JSON.stringify(state.rules.map((r) => r.id))}`)
  assert.match(wake.reason, /^within [\d.]+m?s of the job's end being queued: the service still had it \(its dispatch failed, or it restarted and lost the queued end\); removed$/, wake.reason)
  assert.deepEqual(state.rules, [], 'no rule left behind')
  assert.deepEqual(state.deleted, [`run-bg-${jobId}`])
  assert.match(runBg(home, ['check', jobId]).stdout, new RegExp(`\\n  wake: run-bg-${jobId} not fired within [\\d.]+m?s of the job's end being queued: the service still had it `))
})

test('a wake rule the service keeps because it restarted between queuing the end and its batch is removed and recorded not fired', async (t) => {
  // A batch window long enough to restart the service inside it.
  const service = await startInterruptService(t, { message: { batch_window_ms: 1000 }, subagent: { batch_window_ms: 1000 } })
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 1000 } })
  const go = path.join(home, 'go')
  const jobId = startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done`], ['--wake', 'done {{jobId}}']).jobId
  await waitFor(() => jobOf(home, jobId)?.wake?.state === 'registered', { what: 'registered' })
  fs.writeFileSync(go, '')
  await waitFor(async () => (await triggersOf(service, jobId)).length > 0, { interval: 10, what: 'the end event queued' })
  await service.restart()
  const wake = await wakeSettled(home, jobId)
  const state = await service.inspect()
  assert.equal((await settled(home, jobId)).matched, 1, 'the end event did match the rule')
  assert.equal(state.dispatched.length, 0, 'the queue went with the restart: the agent was never woken')
  assert.equal(wake.state, 'not-fired', `recorded ${JSON.stringify(wake)}; the service still holds ${JSON.stringify(state.rules.map((r) => r.id))}`)
  assert.deepEqual(state.rules, [], 'no rule left behind')
  assert.deepEqual(state.deleted, [`run-bg-${jobId}`])
  assert.match(runBg(home, ['check', jobId]).stdout, new RegExp(`\\n  wake: run-bg-${jobId} not fired within `))
})

test('a wake rule being confirmed does not hold up another job\'s held notification', async (t) => {
  // One batch per 4 s: B is held behind A, C behind B. B's rule is a
  // sub-agent's, whose dispatch may take the service 24 of its 625 ms batch
  // windows here (15 s): its confirmation lasts that long, and must not be
  // what C waits for (C, held ~4 s by the pace, would then reach the service
  // some 14 s after its end).
  const service = await startInterruptService(t, { message: { batch_window_ms: 250 }, subagent: { batch_window_ms: 625 } })
  await service.control({ dispatchFail: 100 })
  const { home } = makeHome(t, { notify: { url: service.url, max_per_minute: 1, pace_window_ms: 4000, batch_window_ms: 250 } })
  const a = startJob(home, ['true']).jobId
  const [aSent] = await waitFor(async () => (await triggersOf(service, a)).length > 0 && triggersOf(service, a), { what: 'A sent' })
  // Past the batch A opened (an end within 3/4 of it goes with it at once): held.
  await waitFor(() => Date.now() > aSent.at + 1000, { what: 'A\'s batch window over' })
  const b = startJob(home, ['true'], ['--wake', 'done {{jobId}}', '--wake-action', 'subagent']).jobId
  await waitFor(() => jobOf(home, b)?.wake?.state === 'queued', { what: 'B held, then sent and queued through its rule', timeout: 30_000 })
  const [bSent] = await triggersOf(service, b)
  assert.ok(bSent.at - checkJson(home, b).endedAt > 2000, 'B was held back by the pace')
  await waitFor(() => Date.now() > bSent.at + 1000, { what: 'B\'s batch window over' })
  const c = startJob(home, ['true']).jobId
  runBg(home, ['wait', c])
  const cEnded = checkJson(home, c).endedAt
  const [cSent] = await waitFor(async () => (await triggersOf(service, c)).length > 0 && triggersOf(service, c),
    { what: 'C sent', timeout: 60_000 })
  const bWake = jobOf(home, b).wake
  t.diagnostic(`C reached the service ${cSent.at - cEnded} ms after its end, B's rule then ${bWake.state}`)
  assert.ok(cSent.at - cEnded < 10_000,
    `C reached the service ${cSent.at - cEnded} ms after its end (B's wake by then: ${JSON.stringify(bWake)})`)
  assert.equal(bWake.state, 'queued', 'C went before B\'s confirmation was over')
  const settledB = await waitFor(() => ['fired', 'not-fired', 'removed'].includes(jobOf(home, b)?.wake?.state) && jobOf(home, b).wake,
    { what: 'B\'s rule settled', timeout: 60_000 })
  assert.equal(settledB.state, 'not-fired', JSON.stringify(settledB))
  assert.deepEqual((await service.inspect()).rules, [], 'no rule left behind')
})

test('a wake confirmation whose process is SIGKILLed is taken up by a later invocation: the rule is removed, recorded not fired', async (t) => {
  const service = await startInterruptService(t, { message: { batch_window_ms: 500 }, subagent: { batch_window_ms: 500 } })
  await service.control({ dispatchFail: 100 })
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 500 } })
  const jobId = startJob(home, ['true'], ['--wake', 'done {{jobId}}']).jobId
  await waitFor(() => jobOf(home, jobId)?.wake?.state === 'queued', { what: 'queued through its rule' })
  // Whichever of this home's background processes is confirming it (all
  // started by this test, through run-bg).
  const mine = `\0PROC_MANAGER_HOME=${home}\0`
  const background = processEnvironments().filter(({ environ }) => environ.includes(mine) && environ.includes('\0PROC_MANAGER_SUPERVISOR='))
  assert.ok(background.length > 0, 'something confirms the rule')
  for (const { pid } of background) killPid(pid)
  await waitFor(() => background.every(({ pid }) => !isAlive(pid)), { what: 'the background processes gone' })
  assert.equal(jobOf(home, jobId).wake.state, 'queued', 'killed before its window was over')
  // Any later invocation takes it up once its window is over.
  const wake = await waitFor(() => {
    runBg(home, ['list'])
    const w = jobOf(home, jobId).wake
    return w.state !== 'queued' && w
  }, { what: 'the wake settled by a later invocation', timeout: 30_000, interval: 500 })
  const state = await service.inspect()
  assert.equal(wake.state, 'not-fired', JSON.stringify(wake))
  assert.deepEqual(state.rules, [], 'no rule left behind')
  assert.deepEqual(state.deleted, [`run-bg-${jobId}`])
  await waitForQuiet(home)
})

test('a wake rule its end event did not go through is removed with DELETE: a failed event, a registration answered too late', async (t) => {
  const service = await startInterruptService(t, FAST)
  await service.control({ fail: { status: 500, count: 1000, error: 'boom' } })
  const { home } = makeHome(t, { notify: { url: service.url, retry_for_ms: 3000 } })
  const go = path.join(home, 'go')
  const failing = startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done`], ['--wake', 'done {{jobId}}']).jobId
  await waitFor(async () => (await service.inspect()).rules.some((r) => r.id === `run-bg-${failing}`), { what: 'the rule' })
  fs.writeFileSync(go, '')
  await waitFor(() => jobOf(home, failing)?.wake?.state === 'removed', { what: 'the rule removed', timeout: 30_000 })
  const wake = jobOf(home, failing).wake
  assert.match(wake.reason, /^its end event was not taken \(HTTP 500 Internal Server Error: boom\)$/)
  const state = await service.inspect()
  assert.deepEqual(state.deleted, [`run-bg-${failing}`])
  assert.deepEqual(state.rules, [])
  assert.equal(checkJson(home, failing).notification.state, 'failed')
  assert.match(runBg(home, ['check', failing]).stdout,
    new RegExp(`\\n  wake: run-bg-${failing} removed: its end event was not taken \\(HTTP 500 Internal Server Error: boom\\)\\n`))

  // The service takes the rule at once but answers after our timeout: the
  // job has ended by then, and its rule is not known to be there.
  await service.control({ ruleAnswerDelayMs: 1500 })
  const slow = makeHome(t, { notify: { url: service.url, timeout_ms: 300 } }).home
  const quick = startJob(slow, ['true'], ['--wake', 'quick {{jobId}} {{status}}']).jobId
  await waitFor(() => jobOf(slow, quick)?.wake?.state === 'removed', { what: 'the late rule removed', timeout: 30_000 })
  const late = jobOf(slow, quick).wake
  assert.match(late.reason, /^its registration was not confirmed \(no answer within 300ms\)$/, late.reason)
  assert.ok((await service.inspect()).deleted.includes(`run-bg-${quick}`))
  assert.ok(!(await service.inspect()).rules.some((r) => r.id === `run-bg-${quick}`))
  // Its event had matched the rule before the removal: the agent still hears of it, once.
  const texts = (await waitFor(async () => {
    const got = (await delivered(service)).filter((d) => d.data.jobId === quick)
    return got.length && got
  }, { what: 'the wake-up' })).map((d) => d.text)
  assert.deepEqual(texts, [`quick ${quick} success`])
})

test('--wake: a bad action, no notification to match it, unknown template keys', async (t) => {
  const service = await startInterruptService(t, FAST)
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 100 } })
  const bad = runBg(home, ['--wake', 'x', '--wake-action', 'agent', '--', 'true'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /bad wake action `agent`: expected message or subagent/)
  const alone = runBg(home, ['--wake-action', 'subagent', '--', 'true'])
  assert.equal(alone.code, 2)
  assert.match(alone.stderr, /--wake/)
  const muted = runBg(home, ['--wake', 'x', '--no-notify', '--', 'true'])
  assert.equal(muted.code, 2)
  assert.match(muted.stderr, /wake rule .* --no-notify/)
  const off = makeHome(t).home
  const none = runBg(off, ['--wake', 'x', '--', 'true'])
  assert.equal(none.code, 2)
  assert.match(none.stderr, /no(ne is)? configured: notify\.url is null/)
  assert.deepEqual([readRegistry(home).length, readRegistry(off).length], [0, 0], 'nothing started')

  const warned = runBg(home, ['--wake', '{{jobid}} ended with {{exit}}', '--json', '--', 'true'])
  assert.equal(warned.code, 0, warned.stderr)
  assert.match(warned.stderr, /warning: wake message: \{\{jobid\}\}, \{\{exit\}\} is not a key of the event's data .* the keys are eventId, jobId, /)
  assert.equal(JSON.parse(warned.stdout).warnings.length, 1)
  // Settled while the service still runs (else it is retried for a day).
  await settled(home, JSON.parse(warned.stdout).jobId)
  await waitForQuiet(home)
})

test('the JS wake option registers the rule; a bad one is refused', async (t) => {
  const service = await startInterruptService(t, FAST)
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 100 } })
  process.env.PROC_MANAGER_HOME = home
  const started = pm.runBackground('exit 0', { wake: { message: 'js {{jobId}} {{status}}', action: 'subagent', instruction: 'check it' } })
  assert.equal(started.warnings, undefined)
  const got = await waitFor(async () => (await delivered(service)).find((d) => d.data.jobId === started.jobId), { what: 'the wake-up' })
  assert.deepEqual([got.pipeline, got.text, got.instruction], ['subagent', `js ${started.jobId} success`, 'check it'])
  await waitFor(() => jobOf(home, started.jobId)?.wake?.state === 'fired', { what: 'fired' })
  assert.throws(() => pm.runBackground('true', { wake: { action: 'sms' } }), /bad wake action `sms`: expected message or subagent/)
  assert.throws(() => pm.runBackground('true', { wake: { mesage: 'x' } }), /unknown option `mesage` for wake; accepted: message, instruction, action/)
  assert.throws(() => pm.runBackground('true', { wake: { message: 'x' }, notify: false }), /notify: false/)
  const warned = pm.runBackground('true', { wake: { message: '{{nope}}' } })
  assert.match(warned.warnings[0], /\{\{nope\}\} is not a key/)
  await settled(home, warned.jobId)
  await waitForQuiet(home)
})

test('MCP run_background takes wake and says the warnings', async (t) => {
  const service = await startInterruptService(t, FAST)
  const { home } = makeHome(t, { notify: { url: service.url, batch_window_ms: 100 } })
  const client = await connectMcp(t, home)
  const { tools } = await client.listTools()
  assert.equal(tools.find((x) => x.name === 'run_background').inputSchema.properties.wake.type, 'string')
  const answer = await client.callTool({ name: 'run_background', arguments: { command: 'exit 0', wake: 'mcp {{jobId}} {{statu}}' } })
  assert.ok(!answer.isError, JSON.stringify(answer))
  const { jobId } = answer.structuredContent
  assert.match(answer.content[0].text, /\nwarning: wake message: \{\{statu\}\} is not a key of the event's data/)
  const got = await waitFor(async () => (await delivered(service)).find((d) => d.data.jobId === jobId), { what: 'the wake-up' })
  assert.equal(got.text, `mcp ${jobId} {{statu}}`)
  const refused = await client.callTool({ name: 'run_background', arguments: { command: 'true', wake: 'x', notify: false } })
  assert.ok(refused.isError)
  assert.match(refused.content[0].text, /notify: false/)
  await settled(home, jobId)
  await waitForQuiet(home)
})

test('a wake rule whose end event went out merged under the pace is removed: the merged event names every job and matches no one rule', async (t) => {
  const service = await startInterruptService(t, FAST)
  // One batch per 2 s window: the second and third end are held, then sent together.
  const { home } = makeHome(t, { notify: { url: service.url, max_per_minute: 1, pace_window_ms: 2000, batch_window_ms: 100 } })
  const go = path.join(home, 'go')
  const after = (s) => `while [ ! -e ${go} ]; do sleep 0.02; done; sleep ${s}`
  const first = startJob(home, ['sh', '-c', after(0)]).jobId
  const woken = startJob(home, ['sh', '-c', after(0.4)], ['--wake', 'woken {{jobId}}']).jobId
  const third = startJob(home, ['sh', '-c', after(0.4)]).jobId
  await waitFor(async () => (await service.inspect()).rules.some((r) => r.id === `run-bg-${woken}`), { what: 'the rule' })
  fs.writeFileSync(go, '')
  await waitFor(() => jobOf(home, woken)?.wake?.state === 'removed', { what: 'the rule removed', timeout: 30_000 })
  assert.equal(jobOf(home, woken).wake.reason, 'its end event went merged with others\' under the rate limit')
  const { triggers, deleted, rules } = await service.inspect()
  const merged = triggers.find((tr) => tr.body.data.jobs)
  assert.deepEqual(merged.body.data.jobs.map((j) => j.jobId).sort(), [woken, third].sort())
  assert.equal(triggers.length, 2, 'the first alone, then the two held ones together')
  assert.deepEqual([deleted, rules], [[`run-bg-${woken}`], []])
  assert.equal(triggers[0].body.data.jobId, first)
  await waitForQuiet(home)
})
