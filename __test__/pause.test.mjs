// pause and resume (issue 28): SIGSTOP / SIGCONT to a job's whole tree,
// recorded as `paused`, with the --timeout clock stopped while paused; kill
// of a paused job; the CLI, JS and MCP faces, against real jobs.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { spawn } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { RUN_BG, makeHome, runBg, startJob, checkJson, waitFor, cookieProcesses, anySurvivor, connectMcp, pm, procState, killPid, isAlive } from './helpers.mjs'

function tmpDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-pause-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

// A main shell ticking into main.ticks, a child ticking into child.ticks, and
// a grandchild that left the process group (setsid) ticking into grand.ticks.
const TICKER = 'while :; do echo x >> "$0"; sleep 0.05; done'
const FORKING_TREE = [
  'sh', '-c',
  `sh -c '${TICKER}' child.ticks & ` +
  `(setsid sh -c '${TICKER}' grand.ticks &) ; ` +
  `${TICKER.replace('"$0"', 'main.ticks')}`,
]
const FILES = ['main.ticks', 'child.ticks', 'grand.ticks']

const sizes = (dir) => FILES.map((f) => { try { return fs.statSync(path.join(dir, f)).size } catch { return 0 } })

/** Waits until every file has grown past `before` (all ticking). */
async function allGrow(dir, before, what) {
  await waitFor(() => sizes(dir).every((s, i) => s > before[i]), { timeout: 10_000, what })
}

/** Over `ms`, sampled every 50 ms, no file grows. */
async function nothingGrows(dir, ms) {
  const first = sizes(dir)
  const end = Date.now() + ms
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50))
    assert.deepEqual(sizes(dir), first, 'no process of a paused job writes')
  }
}

test('pause stops every process of a forking tree (group and setsid grandchild), resume starts them again; both recorded', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  const job = startJob(home, FORKING_TREE, ['--cwd', dir, '--label', 'ticker'])
  await allGrow(dir, [0, 0, 0], 'every process ticking')
  const processes = cookieProcesses(job.jobId)
  assert.ok(processes.length >= 3, `${processes.length} processes of the job`)

  const before = Date.now()
  const paused = runBg(home, ['pause', job.jobId])
  assert.equal(paused.code, 0, paused.stderr)
  assert.match(paused.stdout, new RegExp(`^paused ${job.jobId}`))
  // Stopped when `pause` returns: nothing grows from here on.
  await nothingGrows(dir, 600)
  for (const p of cookieProcesses(job.jobId)) {
    assert.equal(procState(p.pid), 'T', `pid ${p.pid} is stopped`)
  }

  const check = checkJson(home, job.jobId)
  assert.equal(check.status, 'paused')
  assert.ok(check.pausedAt >= before - 5 && check.pausedAt <= Date.now(), `pausedAt ${check.pausedAt}`)
  const listed = JSON.parse(runBg(home, ['list', '--json']).stdout).find((j) => j.jobId === job.jobId)
  assert.equal(listed.status, 'paused')
  assert.equal(listed.pausedAt, check.pausedAt)
  assert.match(runBg(home, ['check', job.jobId]).stdout, /paused/)
  assert.match(runBg(home, ['list']).stdout, new RegExp(`${job.jobId}.*paused`))
  const onlyPaused = JSON.parse(runBg(home, ['list', '--status', 'paused', '--json']).stdout)
  assert.deepEqual(onlyPaused.map((j) => j.jobId), [job.jobId])
  // In jobs.json too, not only in the job's own record.
  const registry = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs.find((j) => j.id === job.jobId)
  assert.equal(registry?.paused_at, check.pausedAt)

  // Again: nothing to do, and it says so.
  const again = runBg(home, ['pause', job.jobId])
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stdout, /already paused/)

  const held = sizes(dir)
  const resumed = runBg(home, ['resume', job.jobId, '--json'])
  assert.equal(resumed.code, 0, resumed.stderr)
  const view = JSON.parse(resumed.stdout)
  assert.equal(view.status, 'running')
  assert.equal(view.changed, true)
  await allGrow(dir, held, 'every process ticking again after resume')
  const after = checkJson(home, job.jobId)
  assert.equal(after.status, 'running')
  assert.equal(after.pausedAt, undefined)
  const notPaused = runBg(home, ['resume', job.jobId])
  assert.equal(notPaused.code, 0, notPaused.stderr)
  assert.match(notPaused.stdout, /not paused/)
})

test('a paused job\'s --timeout clock stops: paused past its timeout it is not timed out, and times out after resume', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  const job = startJob(home, ['sh', '-c', 'while :; do echo x >> ticks; sleep 0.05; done'], ['--cwd', dir, '--timeout', '2s'])
  const started = checkJson(home, job.jobId).startedAt
  assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
  const pausedAt = checkJson(home, job.jobId).pausedAt
  const ranBeforePause = pausedAt - started
  // Paused for 3 s, past the 2 s timeout: still paused, not ended.
  const until = Date.now() + 3000
  while (Date.now() < until) {
    assert.equal(checkJson(home, job.jobId).status, 'paused', 'not timed out while paused')
    await new Promise((r) => setTimeout(r, 200))
  }
  const resumedAt = Date.now()
  assert.equal(runBg(home, ['resume', job.jobId]).code, 0)
  const ended = await waitFor(() => {
    const c = checkJson(home, job.jobId)
    return c.status !== 'running' && c.status !== 'paused' && c
  }, { timeout: 10_000, what: 'the timeout after resume' })
  assert.equal(ended.status, 'timeout')
  const remaining = 2000 - ranBeforePause
  const afterResume = ended.endedAt - resumedAt
  console.log(`ran ${ranBeforePause} ms before the pause; timed out ${afterResume} ms after resume (remaining was ${remaining} ms)`)
  assert.ok(afterResume >= remaining - 150, `the rest of the timeout ran after resume: ${afterResume} ms >= ${remaining} ms`)
  assert.ok(afterResume < remaining + 2000, `and not much more: ${afterResume} ms`)
})

test('kill of a paused job: its tree gets SIGCONT after SIGTERM, acts on it within the grace period, 0 survivors', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  const job = startJob(home, [
    'sh', '-c',
    '(setsid sleep 600 &); trap "echo term > got-term; exit 0" TERM; echo ready > ready; while :; do sleep 0.1; done',
  ], ['--cwd', dir])
  await waitFor(() => fs.existsSync(path.join(dir, 'ready')), { what: 'the job ready' })
  await waitFor(() => cookieProcesses(job.jobId).length >= 3, { what: 'the setsid sleep' })
  const processes = cookieProcesses(job.jobId)
  assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
  const started = Date.now()
  const kill = runBg(home, ['kill', job.jobId, '--grace', '8s', '--json'])
  const took = Date.now() - started
  assert.equal(kill.code, 0, kill.stderr)
  const [view] = JSON.parse(kill.stdout)
  assert.equal(view.status, 'killed')
  assert.ok(fs.existsSync(path.join(dir, 'got-term')), 'the stopped shell ran its TERM trap: it was continued')
  assert.ok(took < 6000, `the kill did not wait out the 8 s grace period: ${took} ms`)
  assert.deepEqual(anySurvivor(processes), [], '0 survivors')
  assert.deepEqual(cookieProcesses(job.jobId), [])
  const check = checkJson(home, job.jobId)
  assert.equal(check.status, 'killed')
  assert.equal(check.pausedAt, undefined, 'an ended job is no longer paused')
})

test('pause and resume refuse what cannot be paused, saying why', async (t) => {
  const { home } = makeHome(t, { queues: { one: { max_parallel: 1 } } })
  const unknown = runBg(home, ['pause', 'nosuch-123456'])
  assert.equal(unknown.code, 1)
  assert.match(unknown.stderr, /nosuch-123456/)
  const bad = runBg(home, ['resume', '../etc'])
  assert.notEqual(bad.code, 0)
  assert.match(bad.stderr, /job id/)
  const done = startJob(home, ['true'])
  assert.equal(runBg(home, ['wait', done.jobId]).code, 0)
  for (const verb of ['pause', 'resume']) {
    const ended = runBg(home, [verb, done.jobId])
    assert.equal(ended.code, 1, `${verb} of an ended job`)
    assert.match(ended.stderr, new RegExp(`${done.jobId} has ended \\(success`))
  }
  // --json gives each refusal its own entry, as kill does; only unknown ids give none.
  const running = startJob(home, ['sleep', '30'])
  const both = runBg(home, ['pause', done.jobId, running.jobId, 'nosuch-123456', '--json'])
  assert.equal(both.code, 1)
  const views = JSON.parse(both.stdout)
  assert.deepEqual(views.map((v) => [v.jobId, v.status, v.changed]), [[done.jobId, 'success', false], [running.jobId, 'paused', true]])
  assert.match(views[0].error, /has ended/)
  const alone = JSON.parse(runBg(home, ['resume', done.jobId, '--json']).stdout)
  assert.deepEqual([alone.jobId, alone.changed, /has ended/.test(alone.error)], [done.jobId, false, true])
  runBg(home, ['kill', running.jobId, '--force'])
  const first = startJob(home, ['sleep', '30'], ['--queue', 'one'])
  const waiting = startJob(home, ['sleep', '30'], ['--queue', 'one'])
  assert.equal(waiting.status, 'queued')
  const queued = runBg(home, ['pause', waiting.jobId])
  assert.equal(queued.code, 1)
  assert.match(queued.stderr, /queued/)
  runBg(home, ['kill', first.jobId, waiting.jobId, '--force'])
})

test('JS pauseJob / resumeJob and the MCP tool control_job pause / resume', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const dir = tmpDir(t)
  const job = pm.runBackground(`while :; do echo x >> ticks; sleep 0.05; done`, { cwd: dir })
  const ticks = () => { try { return fs.statSync(path.join(dir, 'ticks')).size } catch { return 0 } }
  await waitFor(() => ticks() > 0, { what: 'ticking' })

  const paused = await pm.pauseJob(job.jobId)
  assert.equal(paused.jobId, job.jobId)
  assert.equal(paused.status, 'paused')
  assert.equal(paused.changed, true)
  assert.equal(typeof paused.pausedAt, 'number')
  assert.equal(pm.checkJob(job.jobId).status, 'paused')
  assert.equal(pm.listJobs().find((j) => j.jobId === job.jobId).status, 'paused')
  const held = ticks()
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(ticks(), held)
  const resumed = await pm.resumeJob(job.jobId)
  assert.equal(resumed.status, 'running')
  await waitFor(() => ticks() > held, { what: 'ticking after resumeJob' })
  await assert.rejects(pm.pauseJob('nosuch-123456'), /nosuch-123456/)

  const client = await connectMcp(t, home)
  const { tools } = await client.listTools()
  const control = tools.find((x) => x.name === 'control_job')
  assert.deepEqual(control.inputSchema.properties.action.enum.filter((a) => a === 'pause' || a === 'resume'), ['pause', 'resume'])
  assert.notEqual(control.annotations?.readOnlyHint, true, 'control_job changes the job')
  assert.ok(control.outputSchema?.properties?.status && control.outputSchema?.properties?.changed, 'control_job outputs status and changed')
  const call = (name, args) => client.callTool({ name, arguments: args })
  const p = await call('control_job', { jobId: job.jobId, action: 'pause' })
  assert.equal(p.isError, undefined, p.content[0].text)
  assert.deepEqual(p.structuredContent, { jobId: job.jobId, status: 'paused', changed: true })
  assert.match(p.content[0].text, /paused/)
  const held2 = ticks()
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(ticks(), held2)
  const again = await call('control_job', { jobId: job.jobId, action: 'pause' })
  assert.equal(again.structuredContent.changed, false, 'pausing a paused job changes nothing')
  const r = await call('control_job', { jobId: job.jobId, action: 'resume' })
  assert.equal(r.structuredContent.status, 'running')
  await waitFor(() => ticks() > held2, { what: 'ticking after control_job resume' })
  const unknown = await call('control_job', { jobId: 'nosuch-123456', action: 'pause' })
  assert.equal(unknown.isError, true)
  assert.doesNotMatch(unknown.content[0].text, /run-bg /, 'no CLI command in an MCP answer')
})

// Issue 37: pause under attack.

const lineCount = (file) => { try { return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length } catch { return 0 } }
const supervisorOf = (home, id) => JSON.parse(fs.readFileSync(path.join(home, 'jobs', id, 'job.json'), 'utf8')).supervisor.pid

/** Every process of the job that lives (not a zombie), with its state letter. */
function states(jobId) {
  return cookieProcesses(jobId).map((p) => ({ ...p, state: procState(p.pid) })).filter((p) => p.state && p.state !== 'Z' && p.state !== 'X')
}

/** Over `ms`, sampled every 100 ms, `assertion()` holds. */
async function holds(ms, assertion) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    await assertion()
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** Kills what is left of a job's processes by pid (its supervisor may be gone). */
function cleanUpJob(t, home, jobId) {
  t.after(() => {
    runBg(home, ['kill', jobId, '--force'])
    for (const p of cookieProcesses(jobId)) killPid(p.pid)
  })
}

test('a paused --restart always job whose main process is SIGKILLed starts no new run until it is resumed', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  const job = startJob(home, ['sh', '-c', 'echo run >> runs; sleep 600 & while :; do sleep 0.05; done'],
    ['--cwd', dir, '--restart', 'always', '--restart-delay', '50ms'])
  cleanUpJob(t, home, job.jobId)
  await waitFor(() => lineCount(path.join(dir, 'runs')) === 1 && states(job.jobId).length >= 3, { what: 'the first run with its sleep' })
  assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
  const paused = checkJson(home, job.jobId)
  process.kill(paused.pid, 'SIGKILL')
  await holds(2000, () => {
    const now = checkJson(home, job.jobId)
    assert.equal(now.status, 'paused', 'still paused')
    assert.equal(now.pausedAt, paused.pausedAt)
    assert.equal(now.restarts ?? 0, 0, 'no restart while paused')
    assert.equal(lineCount(path.join(dir, 'runs')), 1, 'no new run while paused')
    for (const p of states(job.jobId)) assert.equal(p.state, 'T', `pid ${p.pid} stays stopped`)
  })
  const resumed = runBg(home, ['resume', job.jobId])
  assert.equal(resumed.code, 0, resumed.stderr)
  assert.match(resumed.stdout, /^resumed /)
  const after = await waitFor(() => {
    const c = checkJson(home, job.jobId)
    return lineCount(path.join(dir, 'runs')) === 2 && c.restarts === 1 && c
  }, { what: 'the restart once resumed' })
  assert.equal(after.status, 'running')
  assert.equal(after.pausedAt, undefined)
  assert.equal(runBg(home, ['kill', job.jobId]).code, 0)
})

test('a pause pauses --ready-timeout too: a server paused during start-up past its ready timeout is ready once it says so', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  const job = startJob(home, ['sh', '-c', 'echo starting; sleep 1; echo now listening; sleep 600'],
    ['--cwd', dir, '--ready-log', 'now listening', '--ready-timeout', '3s'])
  cleanUpJob(t, home, job.jobId)
  assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
  // Paused for longer than its ready timeout: not judged while paused.
  await holds(3500, () => {
    assert.doesNotMatch(runBg(home, ['check', job.jobId]).stdout, /not ready after/)
  })
  assert.equal(runBg(home, ['resume', job.jobId]).code, 0)
  const ready = await waitFor(() => { const c = checkJson(home, job.jobId); return c.readyAt && c }, { what: 'readyAt after the resume' })
  assert.ok(ready.readyAt > ready.startedAt)
  assert.match(runBg(home, ['check', job.jobId]).stdout, /ready after/)
  assert.doesNotMatch(runBg(home, ['check', job.jobId]).stdout, /not ready/)
})

test('a ready timeout left after a pause runs on from where it stopped', async (t) => {
  const { home } = makeHome(t)
  const job = startJob(home, ['sleep', '600'], ['--ready-log', 'never', '--ready-timeout', '1500ms'])
  cleanUpJob(t, home, job.jobId)
  assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
  // Past its 1.5 s while paused, looked at all along: never judged meanwhile.
  await holds(2000, () => assert.doesNotMatch(runBg(home, ['check', job.jobId]).stdout, /not ready after/))
  const resumedAt = Date.now()
  assert.equal(runBg(home, ['resume', job.jobId]).code, 0)
  await waitFor(() => /not ready after 1\.5s/.test(runBg(home, ['check', job.jobId]).stdout), { what: 'not ready after the rest of the timeout' })
  assert.ok(Date.now() - resumedAt >= 500, 'the rest of the timeout ran after the resume')
})

/** run-bg as a child, without blocking the event loop. */
function runBgAsync(home, args) {
  return new Promise((resolve) => {
    const child = spawn(RUN_BG, args, { env: { ...process.env, PROC_MANAGER_HOME: home } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

test('400 concurrent pause and resume requests of one job: every one answered rightly, the end state right', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  const job = startJob(home, ['sh', '-c', 'while :; do echo x >> ticks; sleep 0.05; done'], ['--cwd', dir])
  cleanUpJob(t, home, job.jobId)
  // Bursts of 20, half pause and half resume, all started at once.
  const answers = []
  for (let round = 0; round < 20; round++) {
    const verbs = Array.from({ length: 20 }, (_, i) => (i % 2 ? 'resume' : 'pause'))
    answers.push(...await Promise.all(verbs.map(async (verb) => ({ verb, ...(await runBgAsync(home, [verb, job.jobId])) }))))
  }
  const failed = answers.filter((a) => a.code !== 0)
  assert.deepEqual(failed.map((a) => `${a.verb}: ${a.stderr.trim()}`), [], 'every request answered')
  for (const a of answers) {
    const right = a.verb === 'pause' ? /^(paused \S+: \d+ process|\S+ is already paused)/ : /^(resumed \S+: \d+ process|\S+ is not paused)/
    assert.match(a.stdout, right, `${a.verb} answered ${a.stdout}`)
  }
  // The record and the processes agree, now and after one last pause and resume.
  const agree = () => {
    const status = checkJson(home, job.jobId).status
    const stopped = states(job.jobId).map((p) => p.state === 'T')
    assert.ok(stopped.length >= 1)
    assert.deepEqual(stopped, stopped.map(() => status === 'paused'), `${status}: ${JSON.stringify(states(job.jobId))}`)
  }
  await waitFor(() => { try { agree(); return true } catch { return false } }, { timeout: 3000, what: 'the record and the processes agree' })
  assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
  agree()
  assert.equal(runBg(home, ['resume', job.jobId]).code, 0)
  await waitFor(() => { try { agree(); return true } catch { return false } }, { timeout: 3000, what: 'every process continued' })
  assert.equal(checkJson(home, job.jobId).status, 'running')
})

for (const [kind, script] of [
  ['a plain job', TICKER.replace('"$0"', 'ticks')],
  ['a job that ignores SIGHUP', `trap "" HUP; ${TICKER.replace('"$0"', 'ticks')}`],
]) {
  test(`${kind}, paused, stays stopped when its supervisor is SIGKILLed, shown orphaned and paused; resume continues it, kill ends it`, async (t) => {
    const { home } = makeHome(t)
    const dir = tmpDir(t)
    const job = startJob(home, ['sh', '-c', `sh -c '${script}' & (setsid sh -c 'sleep 600' &); ${script}`], ['--cwd', dir])
    cleanUpJob(t, home, job.jobId)
    await waitFor(() => lineCount(path.join(dir, 'ticks')) > 2 && states(job.jobId).length >= 4, { what: 'the job ticking' })
    assert.equal(runBg(home, ['pause', job.jobId]).code, 0)
    const processes = states(job.jobId)
    const supervisor = supervisorOf(home, job.jobId)
    process.kill(supervisor, 'SIGKILL')
    await waitFor(() => !isAlive(supervisor), { what: 'the supervisor gone' })
    const ticks = lineCount(path.join(dir, 'ticks'))
    await holds(3000, () => {
      for (const p of processes) assert.equal(procState(p.pid), 'T', `pid ${p.pid} stays stopped`)
      assert.equal(lineCount(path.join(dir, 'ticks')), ticks, 'nothing of it runs')
    })
    const shown = checkJson(home, job.jobId)
    assert.equal(shown.status, 'orphaned')
    assert.equal(typeof shown.pausedAt, 'number', 'still paused')
    assert.match(runBg(home, ['check', job.jobId]).stdout, /paused/)
    const resumed = runBg(home, ['resume', job.jobId])
    assert.equal(resumed.code, 0, resumed.stderr)
    await waitFor(() => lineCount(path.join(dir, 'ticks')) > ticks + 2, { what: 'ticking again after resume' })
    for (const p of processes) assert.notEqual(procState(p.pid), 'T', `pid ${p.pid} continued`)
    assert.equal(checkJson(home, job.jobId).pausedAt, undefined)
    assert.equal(runBg(home, ['kill', job.jobId]).code, 0)
    await waitFor(() => anySurvivor(processes).length === 0, { what: 'every process ended by the kill' })
  })
}

test('pause stops a chain of processes that each start the next in a new session: nothing of it runs, the chain stops growing', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  // Bounded, so a failure cannot fill the process table: 1,500 links.
  fs.writeFileSync(path.join(dir, 'link.sh'), 'n=$1; if [ "$n" -lt 1500 ]; then setsid sh "$0" $((n+1)) & fi; exec sleep 600\n')
  const job = startJob(home, ['sh', 'link.sh', '0'], ['--cwd', dir])
  cleanUpJob(t, home, job.jobId)
  await waitFor(() => states(job.jobId).length >= 150, { what: 'the chain growing' })
  const paused = runBg(home, ['pause', job.jobId])
  assert.equal(paused.code, 0, paused.stderr)
  const count = states(job.jobId).length
  assert.ok(count < 1400, `paused before the chain ended (${count} links)`)
  await holds(1500, () => {
    const now = states(job.jobId)
    const running = now.filter((p) => p.state !== 'T')
    assert.deepEqual(running.map((p) => `${p.pid} ${p.state}`), [], `of ${now.length}, none runs`)
    assert.equal(now.length, count, 'the chain does not grow')
  })
  const killed = runBg(home, ['kill', job.jobId, '--force'])
  assert.equal(killed.code, 0, killed.stderr)
  await waitFor(() => states(job.jobId).length === 0, { what: 'the chain gone after kill' })
})
