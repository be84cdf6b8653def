// Exit notifications against a real HTTP listener on 127.0.0.1, and command hooks.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { spawn } from 'node:child_process'
import {
  makeHome, runBg, startJob, readRegistry, checkJson, waitFor, isAlive, startListener, freePort, sleep, RUN_BG, waitForQuiet,
} from './helpers.mjs'

test('one request per job end with the right fields and an actionable message', async (t) => {
  const listener = await startListener(t)
  const { home } = makeHome(t, { notify: { url: listener.url } })
  const { jobId, logPath } = startJob(home, ['sh', '-c', 'echo line1; printf "\\033[1mbold\\033[0m\\n"; exit 3'], ['--label', 'notify me'])
  assert.equal(runBg(home, ['wait', jobId]).code, 3)
  const [request] = await waitFor(() => listener.requests().length >= 1 && listener.requests(), { what: 'the POST' })
  assert.equal(request.url, '/trigger')
  const { source, level, data } = request.json
  assert.equal(source, 'run-bg')
  assert.equal(level, 'warn')
  assert.equal(data.jobId, jobId)
  assert.equal(data.eventId, `${jobId}:failed`)
  assert.equal(data.label, 'notify me')
  assert.equal(data.status, 'failed')
  assert.equal(data.exitCode, 3)
  assert.equal(data.logPath, logPath)
  assert.ok(Number.isInteger(data.durationMs) && data.durationMs >= 0)
  assert.match(data.message, new RegExp(`^run-bg: ${jobId} \\(sh -c .*\\) failed, exit 3, after \\d+ms; run-bg check ${jobId}$`))
  assert.ok(!data.message.includes('\n'))
  assert.deepEqual(data.lastLines, ['line1', 'bold'], 'ANSI codes stripped')
  await waitFor(() => checkJson(home, jobId).notification?.state === 'delivered', { what: 'delivered state' })
  await waitForQuiet(home)
  assert.equal(listener.requests().length, 1, 'exactly one request')
})

test('success, killed and timeout are each announced once, a kill racing the exit included', async (t) => {
  const listener = await startListener(t)
  const { home } = makeHome(t, { notify: { url: listener.url }, kill: { grace_ms: 200 } })
  const ok = startJob(home, ['true'])
  const killed = startJob(home, ['sleep', '30'])
  const timed = startJob(home, ['sleep', '30'], ['--timeout', '300ms'])
  const racer = startJob(home, ['sh', '-c', 'sleep 0.2; exit 0'])
  runBg(home, ['kill', killed.jobId])
  await sleep(150) // so that this kill races the job's own exit at 200 ms
  runBg(home, ['kill', racer.jobId, '--force'])
  runBg(home, ['wait', ok.jobId, timed.jobId, racer.jobId, '--timeout', '20s'])
  const byJob = await waitFor(() => {
    const all = listener.requests()
    return all.length >= 4 ? all : null
  }, { what: 'four requests' })
  await waitForQuiet(home)
  const requests = listener.requests()
  assert.equal(requests.length, 4, JSON.stringify(requests.map((r) => r.json.data.eventId)))
  const statuses = Object.fromEntries(byJob.map((r) => [r.json.data.jobId, r.json.data.status]))
  assert.equal(statuses[ok.jobId], 'success')
  assert.equal(statuses[killed.jobId], 'killed')
  assert.equal(statuses[timed.jobId], 'timeout')
  assert.ok(['killed', 'success'].includes(statuses[racer.jobId]))
  assert.equal(new Set(requests.map((r) => r.json.data.eventId)).size, 4)
})

test('a listener started after the job ended still gets the event, from the spool', async (t) => {
  const port = await freePort()
  const { home } = makeHome(t, { notify: { url: `http://127.0.0.1:${port}/trigger`, retry_for_ms: 300 } })
  const { jobId } = startJob(home, ['sh', '-c', 'echo done'])
  runBg(home, ['wait', jobId])
  const spooled = path.join(home, 'spool', `${jobId}.success.json`)
  await waitFor(() => fs.existsSync(spooled), { what: 'the spooled event' })
  const pending = checkJson(home, jobId).notification
  assert.equal(pending.state, 'pending')
  assert.ok(pending.attempts >= 1)
  assert.equal(pending.lastError, `nothing listens at http://127.0.0.1:${port}/trigger (connection refused)`)
  assert.match(runBg(home, ['check', jobId]).stdout,
    /notification: pending \(\d+ attempt\(s\); nothing listens at .* — if none runs here, `"notify": \{"url": null\}` in config\.json turns this off\)/)

  const listener = await startListener(t, { port })
  // Any invocation hands what is due in the spool to a background deliverer.
  const [request] = await waitFor(() => {
    runBg(home, ['list'])
    return listener.requests().length >= 1 && listener.requests()
  }, { what: 'late delivery', interval: 250 })
  assert.equal(request.json.data.eventId, `${jobId}:success`)
  await waitFor(() => checkJson(home, jobId).notification.state === 'delivered', { what: 'delivered' })
  assert.ok(!fs.existsSync(spooled))
  runBg(home, ['list'])
  await waitForQuiet(home)
  assert.equal(listener.requests().length, 1, 'not sent again')
})

test('a listener that never answers: the job still ends cleanly and the event stays pending, not lost', async (t) => {
  const listener = await startListener(t, { mode: 'hang' })
  const { home } = makeHome(t, { notify: { url: listener.url, timeout_ms: 200, retry_for_ms: 600 } })
  const { jobId } = startJob(home, ['true'])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '5s']).code, 0)
  assert.equal(checkJson(home, jobId).status, 'success')
  await waitFor(() => fs.existsSync(path.join(home, 'spool', `${jobId}.success.json`)), { what: 'spooled' })
  const n = checkJson(home, jobId).notification
  assert.equal(n.state, 'pending')
  assert.match(n.lastError, /no answer within 200ms/)
  assert.ok(listener.requests().length >= 1, 'the listener saw the attempts')
  const supervisor = readRegistry(home)[0].supervisor
  await waitFor(() => !isAlive(supervisor.pid), { what: 'the supervisor to finish' })
  // The background deliverer would keep trying this configured service for a
  // day; turning notifications off ends it, giving the event up.
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null } }))
  await waitForQuiet(home, 40_000)
  assert.equal(checkJson(home, jobId).notification.state, 'failed')
})

test('the job\'s pipes go with its end, while its supervisor still waits on the notification', async (t) => {
  const listener = await startListener(t, { mode: 'hang' })
  const { home } = makeHome(t, { notify: { url: listener.url, timeout_ms: 1500, retry_for_ms: 3000 } })
  const { jobId } = startJob(home, ['sh', '-c', 'echo hi'], ['--stdin', 'pipe'])
  try {
    assert.equal(runBg(home, ['wait', jobId, '--timeout', '5s']).code, 0)
    const supervisor = readRegistry(home).find((j) => j.id === jobId).supervisor
    // In the home's shared pipes/ directory (docs/configuration.md), which stays.
    const pipes = [path.join(home, 'pipes', `${jobId}.output`), path.join(home, 'pipes', `${jobId}.stdin`)]
    await waitFor(() => !pipes.some((p) => fs.existsSync(p)), { what: 'the pipes to go' })
    assert.ok(fs.statSync(path.join(home, 'pipes')).isDirectory())
    assert.ok(!fs.existsSync(path.join(home, 'jobs', jobId, 'pipes')), 'no directory of the job\'s own')
    assert.ok(isAlive(supervisor.pid), 'the supervisor was still waiting on its notifier when the pipes went')
  } finally {
    // Pass or fail: the event's deliverer would retry this configured
    // service for a day; notifications off, it gives the event up.
    fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null } }))
    await waitForQuiet(home, 40_000)
  }
})

test('20 jobs ending together give 20 requests, none doubled', async (t) => {
  const listener = await startListener(t)
  const { home } = makeHome(t, { notify: { url: listener.url } })
  const go = path.join(home, 'go')
  const ids = []
  for (let i = 0; i < 20; i++) {
    ids.push(startJob(home, ['sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done; exit ${i % 2}`]).jobId)
  }
  fs.writeFileSync(go, '')
  runBg(home, ['wait', ...ids, '--timeout', '30s'])
  await waitFor(() => listener.requests().length >= 20, { what: '20 requests', timeout: 20_000 })
  await waitForQuiet(home)
  const requests = listener.requests()
  assert.equal(requests.length, 20)
  assert.deepEqual(requests.map((r) => r.json.data.jobId).sort(), [...ids].sort())
})

test('command hooks get the event JSON on stdin and RUN_BG_* variables; failures are recorded, not fatal', async (t) => {
  const { home } = makeHome(t)
  const out = path.join(home, 'hook-out')
  fs.mkdirSync(out)
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({
    notify: { url: null, command: `cat > ${out}/global.json; env | grep ^RUN_BG_ | sort > ${out}/global.env`, hook_timeout_ms: 500 },
  }))
  const { jobId } = startJob(home, ['sh', '-c', 'echo hello; exit 4'], [
    '--label', 'hooked', '--on-exit', `cat > ${out}/own.json; exit 1`,
  ])
  runBg(home, ['wait', jobId])
  const job = await waitFor(() => {
    const j = checkJson(home, jobId)
    return j.hooks.length === 2 ? j : null
  }, { what: 'both hooks recorded' })
  const env = Object.fromEntries(fs.readFileSync(`${out}/global.env`, 'utf8').trim().split('\n').map((l) => l.split(/=(.*)/s).slice(0, 2)))
  assert.equal(env.RUN_BG_JOB_ID, jobId)
  assert.equal(env.RUN_BG_LABEL, 'hooked')
  assert.equal(env.RUN_BG_STATUS, 'failed')
  assert.equal(env.RUN_BG_EXIT_CODE, '4')
  assert.equal(env.RUN_BG_LOG, job.logPath)
  assert.match(env.RUN_BG_MESSAGE, new RegExp(`^run-bg: ${jobId} .* failed, exit 4`))
  for (const file of ['global.json', 'own.json']) {
    const event = JSON.parse(fs.readFileSync(`${out}/${file}`, 'utf8'))
    assert.equal(event.data.eventId, `${jobId}:failed`)
    assert.deepEqual(event.data.lastLines, ['hello'])
  }
  assert.deepEqual(job.hooks.map((h) => [h.exitCode, h.error]), [[0, undefined], [1, 'exited 1']])
  assert.equal(job.status, 'failed')
  assert.equal(job.notification, undefined, 'notify.url null: no HTTP notification')
  assert.match(runBg(home, ['check', jobId]).stdout, /hook `cat > .*own\.json; exit 1` failed: exited 1/)

  const slow = startJob(home, ['true'], ['--on-exit', 'sleep 5'])
  runBg(home, ['wait', slow.jobId])
  const hook = await waitFor(() => checkJson(home, slow.jobId).hooks.find((h) => h.command === 'sleep 5'), { what: 'slow hook' })
  assert.equal(hook.error, 'timed out after 500ms')
  assert.equal(checkJson(home, slow.jobId).status, 'success')
})

test('--no-notify sends nothing (its own --on-exit still runs); notify.url null turns HTTP off', async (t) => {
  const listener = await startListener(t)
  const { home } = makeHome(t, { notify: { url: listener.url, command: 'exit 9' } })
  const marker = path.join(home, 'on-exit-ran')
  const quiet = startJob(home, ['true'], ['--no-notify', '--on-exit', `touch ${marker}`])
  runBg(home, ['wait', quiet.jobId])
  await waitFor(() => fs.existsSync(marker), { what: 'on-exit hook' })
  const job = await waitFor(() => {
    const j = checkJson(home, quiet.jobId)
    return j.hooks.length ? j : null
  }, { what: 'hook record' })
  assert.deepEqual(job.hooks.map((h) => h.command), [`touch ${marker}`], 'notify.command is skipped too')
  assert.equal(job.notification, undefined)
  const loud = startJob(home, ['true'])
  runBg(home, ['wait', loud.jobId])
  await waitFor(() => listener.requests().length === 1, { what: 'the other job\'s request' })
  await waitForQuiet(home)
  assert.deepEqual(listener.requests().map((r) => r.json.data.jobId), [loud.jobId])
})

test('orphaned and lost jobs found by reconcile are announced once each', async (t) => {
  const listener = await startListener(t)
  const { home } = makeHome(t, { notify: { url: listener.url } })
  const { jobId, pid } = startJob(home, ['sleep', '600'])
  const supervisor = readRegistry(home)[0].supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  runBg(home, ['list'])
  runBg(home, ['reconcile'])
  runBg(home, ['check', jobId])
  await waitFor(() => listener.requests().length >= 1, { what: 'orphaned event' })
  process.kill(pid, 'SIGKILL')
  await waitFor(() => !isAlive(pid), { what: 'job death' })
  runBg(home, ['list'])
  runBg(home, ['list'])
  await waitFor(() => listener.requests().length >= 2, { what: 'lost event' })
  await waitForQuiet(home)
  const events = listener.requests().map((r) => [r.json.data.eventId, r.json.data.status])
  assert.deepEqual(events, [[`${jobId}:orphaned`, 'orphaned'], [`${jobId}:lost`, 'lost']])
  assert.match(listener.requests()[0].json.data.message, /orphaned: its supervisor is gone while its processes run/)
})

test('the JS API delivers the spool too, and runBackground takes notify and onExit', async (t) => {
  const { pm } = await import('./helpers.mjs')
  const port = await freePort()
  const { home } = makeHome(t, { notify: { url: `http://127.0.0.1:${port}/trigger`, retry_for_ms: 200 } })
  process.env.PROC_MANAGER_HOME = home
  const marker = path.join(home, 'js-hook')
  const job = pm.runBackground('echo from js', { onExit: `cat > ${marker}` })
  const silent = pm.runBackground('true', { notify: false })
  await pm.waitJob(job.jobId)
  await pm.waitJob(silent.jobId)
  await waitFor(() => fs.existsSync(path.join(home, 'spool', `${job.jobId}.success.json`)), { what: 'spooled' })
  assert.equal(JSON.parse(fs.readFileSync(marker, 'utf8')).data.jobId, job.jobId)
  const listener = await startListener(t, { port })
  await waitFor(() => {
    pm.listJobs()
    return listener.requests().length >= 1
  }, { what: 'delivery through the JS API', interval: 250 })
  assert.equal(pm.checkJob(job.jobId).notification.eventId, `${job.jobId}:success`)
  await waitFor(() => pm.checkJob(job.jobId).notification.state === 'delivered', { what: 'delivered' })
  assert.equal(pm.checkJob(silent.jobId).notification, undefined)
  await waitForQuiet(home)
  assert.deepEqual(listener.requests().map((r) => r.json.data.jobId), [job.jobId])
})

test('--wake with a service that accepts and never answers: the end is stamped when the main process ended, not after the registration gave up', async (t) => {
  const listener = await startListener(t, { mode: 'hang' })
  // Each request to it (the registration, the end event, the rule's
  // removal) waits out the 1.2 s timeout.
  const { home } = makeHome(t, { notify: { url: listener.url, timeout_ms: 1200, retry_for_ms: 500 } })
  try {
    const { jobId } = startJob(home, ['true'], ['--wake', 'done {{jobId}}'])
    const job = await waitFor(() => {
      const seen = checkJson(home, jobId)
      return seen.status !== 'running' && seen
    }, { what: 'the end recorded' })
    assert.equal(job.status, 'success')
    // The end waited for the registration (the end event must come after the
    // rule), but the wait is not the job's runtime.
    assert.match(job.wake.reason, /no answer within 1\.2s/, JSON.stringify(job.wake))
    assert.ok(job.durationMs < 1000, `durationMs ${job.durationMs} for \`true\` (the registration timeout is 1200 ms)`)
    assert.ok(job.endedAt - job.startedAt < 1000, `endedAt ${job.endedAt - job.startedAt} ms after startedAt`)
  } finally {
    fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null } }))
    await waitForQuiet(home, 40_000)
  }
})
