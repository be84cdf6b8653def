// Kill at scale (issue 25, items 7, 9, 12, 15): many jobs killed at once are
// each reported once whatever the registry's cap evicts, the registry is
// written a fixed number of times however many jobs end, a supervisor that
// records slowly is not taken for a job that had ended, and what a tree
// forks during the grace period gets SIGTERM too; the notifiers of many
// killed jobs do not rewrite the registry per attempt, and a supervisor whose
// notifier outlives the kill sleeps meanwhile; `orphans --kill` is recorded
// once, not once more by each orphan's watcher.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { makeHome, runBg, startJob, checkJson, readRegistry, waitFor, waitForQuiet, isAlive, killPid, cookieProcesses, processStart, RUN_BG } from './helpers.mjs'

function startSleeps(home, n, seconds = 300) {
  const ids = []
  for (let i = 0; i < n; i++) ids.push(startJob(home, ['sleep', String(seconds + i)]).jobId)
  return ids
}

/** Resolves with {code, stdout, stderr} of a run-bg call run in the background. */
function runBgAsync(home, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(RUN_BG, args, { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

test('kill --all over the registry cap exits 0 and reports each job once, evicted or not', async (t) => {
  // A cap of 2 with 10 jobs: each end recorded evicts the oldest ended jobs
  // at once, while their kills are still being reported.
  const { home } = makeHome(t, { registry: { max_jobs: 2 } })
  const ids = startSleeps(home, 10)
  const r = runBg(home, ['kill', '--all', '--json'])
  assert.equal(r.code, 0, `stderr: ${r.stderr}`)
  assert.doesNotMatch(r.stderr, /no job with id/)
  const views = JSON.parse(r.stdout)
  assert.deepEqual(views.map((v) => v.jobId).sort(), [...ids].sort(), 'each job once')
  for (const v of views) assert.equal(v.status, 'killed', JSON.stringify(v))
  for (const id of ids) assert.deepEqual(cookieProcesses(id), [], `${id} left nothing`)
})

test('kill --all over the cap: the directories of the jobs it forgets are deleted after it, in the background', async (t) => {
  // 20 jobs, a cap of 2: 18 forgotten at once, more than a write deletes itself.
  const { home } = makeHome(t, { registry: { max_jobs: 2 } })
  const ids = startSleeps(home, 20)
  const r = runBg(home, ['kill', '--all', '--json'])
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(JSON.parse(r.stdout).map((v) => v.jobId).sort(), [...ids].sort(), 'each job once')
  // Forgotten by the detached `run-bg __take-in` that records the ends,
  // and deleted by the `run-bg __sweep` it starts.
  await waitFor(() => JSON.parse(runBg(home, ['list', '--json']).stdout).length === 2, { what: 'the registry to keep only 2 jobs' })
  const left = () => fs.readdirSync(path.join(home, 'jobs')).sort()
  await waitFor(() => left().length === 2, { what: 'only the 2 kept jobs\' directories', timeout: 30_000 })
  assert.ok(left().every((name) => ids.includes(name)), left().join(' '))
})

test('kill --all of many jobs: their ends reach jobs.json after it returns, by a detached __take-in that then exits', async (t) => {
  const { home } = makeHome(t)
  const ids = startSleeps(home, 20)
  // Every start has been taken into jobs.json: each of them reads running there.
  runBg(home, ['list'])
  const r = runBg(home, ['kill', '--all', '--json'])
  assert.equal(r.code, 0, r.stderr)
  for (const v of JSON.parse(r.stdout)) assert.equal(v.status, 'killed', JSON.stringify(v))
  // jobs.json itself, not a reader's merge with the job.json files: only a
  // registry write puts the ends there.
  const registryStatuses = () => {
    try {
      const jobs = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs
      return ids.map((id) => jobs.find((j) => j.id === id)?.status ?? 'missing')
    } catch {
      return []
    }
  }
  await waitFor(() => {
    const statuses = registryStatuses()
    return statuses.length === ids.length && statuses.every((s) => s === 'killed')
  }, { what: 'jobs.json to record every end' })
  // The errand runs in the home's name, marked as our helper, and is gone
  // once it has written (with every other background process of the home).
  await waitForQuiet(home)
})

test('kill --all writes the registry a fixed number of times, not once per job', async (t) => {
  const { home } = makeHome(t)
  const n = 20
  const ids = startSleeps(home, n)
  // Every start has been taken into jobs.json before we count.
  runBg(home, ['list'])
  let writes = 0
  // Each registry write is a rename of a new file over jobs.json.
  const watcher = fs.watch(home, (event, name) => {
    if (name === 'jobs.json') writes++
  })
  t.after(() => watcher.close())
  const r = runBg(home, ['kill', '--all'])
  assert.equal(r.code, 0, r.stderr)
  // Let inotify's last events arrive.
  await new Promise((resolve) => setTimeout(resolve, 300))
  watcher.close()
  for (const id of ids) assert.equal(checkJson(home, id).status, 'killed')
  // Renames show as one or two events each; a write per job would be >= n.
  assert.ok(writes <= 6, `jobs.json was replaced ${writes} times while ${n} jobs were killed`)
})

test('a supervisor that kills at once but records late: kill says killed, not "had already ended"', async (t) => {
  const { home, extraPids } = makeHome(t)
  // The main process dies on SIGTERM; its child ignores it (the disposition
  // survives exec), so the supervisor waits for the grace period's SIGKILL
  // before it can record, and we stop it in the meantime.
  const { jobId, pid } = startJob(home, ['sh', '-c', '(trap "" TERM; exec sleep 301) & exec sleep 300'])
  const job = await waitFor(() => {
    const recorded = readRegistry(home).find((j) => j.id === jobId)
    return cookieProcesses(jobId).length >= 2 && recorded?.supervisor ? recorded : null
  }, { what: 'the job and its child' })
  const supervisor = job.supervisor.pid
  assert.ok(supervisor > 1)
  extraPids.push(supervisor)
  t.after(() => {
    try {
      process.kill(supervisor, 'SIGCONT')
    } catch {}
  })
  const kill = runBgAsync(home, ['kill', jobId, '--grace', '3s'])
  await waitFor(() => !isAlive(pid), { what: 'the main process to die of SIGTERM', timeout: 10_000 })
  process.kill(supervisor, 'SIGSTOP')
  const r = await kill
  assert.equal(r.code, 0, r.stderr)
  assert.doesNotMatch(r.stdout, /had already ended/, r.stdout)
  assert.match(r.stdout, new RegExp(`killed ${jobId} \\(killed\\) without its supervisor, which did not answer in time`))
  assert.deepEqual(cookieProcesses(jobId), [])
  process.kill(supervisor, 'SIGCONT')
  await waitFor(() => !isAlive(supervisor), { what: 'the supervisor to finish', timeout: 10_000 })
  assert.equal(checkJson(home, jobId).status, 'killed')
})

test('what a tree forks after the SIGTERM gets SIGTERM too, long before the grace period ends', async (t) => {
  const { home } = makeHome(t)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-forker-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  // Each generation answers SIGTERM by starting the next one and exiting:
  // every one after the first is born after the kill's first pass.
  const script = path.join(dir, 'fork-on-term.sh')
  fs.writeFileSync(script, [
    '#!/bin/sh',
    'n=$1',
    'if [ "$n" -gt 0 ]; then trap "\\"$0\\" $((n - 1)) & exit 0" TERM; fi',
    'while :; do sleep 0.05; done',
    '',
  ].join('\n'), { mode: 0o755 })
  const { jobId } = startJob(home, [script, '4'])
  await waitFor(() => cookieProcesses(jobId).length >= 1, { what: 'the job to run' })
  const started = Date.now()
  const r = runBg(home, ['kill', jobId, '--grace', '20s'])
  const took = Date.now() - started
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(cookieProcesses(jobId), [], 'no survivor')
  assert.ok(took < 8000, `the kill took ${took} ms: a generation waited for the SIGKILL at the end of the grace period`)
  assert.equal(checkJson(home, jobId).status, 'killed')
})

/** Counts the renames over `home`/jobs.json (each registry write is one) while `action` runs. */
async function registryWritesDuring(home, action) {
  let writes = 0
  const watcher = fs.watch(home, (event, name) => {
    if (name === 'jobs.json') writes++
  })
  try {
    const result = await action()
    // Let inotify's last events arrive.
    await new Promise((resolve) => setTimeout(resolve, 300))
    return { result, writes }
  } finally {
    watcher.close()
  }
}

test('a start into a home does not rewrite jobs.json: its cost does not grow with the registry', async (t) => {
  const { home } = makeHome(t)
  startSleeps(home, 3)
  // Something to rewrite: the three are in jobs.json once a full write took them in.
  runBg(home, ['kill', startSleeps(home, 1)[0]])
  const { result: id, writes } = await registryWritesDuring(home, () => startJob(home, ['sleep', '300']).jobId)
  assert.equal(writes, 0, `a start replaced jobs.json ${writes} time(s)`)
  assert.equal(checkJson(home, id).status, 'running', 'listed from its job.json meanwhile')
  assert.equal(JSON.parse(runBg(home, ['list', '--json']).stdout).filter((j) => j.status === 'running').length, 4)
})

test('after every supervisor died, one look records each job lost and prune forgets them, in a fixed number of registry writes', async (t) => {
  const { home } = makeHome(t)
  const n = 20
  const ids = startSleeps(home, n)
  const jobs = readRegistry(home).filter((j) => ids.includes(j.id))
  assert.equal(jobs.length, n)
  // Only what these starts made: each process checked by its start time first.
  const ours = jobs.flatMap((j) => [j.supervisor, j.main]).filter((who) => who && who.pid > 1)
  for (const who of ours) {
    if (Number(processStart(who.pid)) === who.start_ticks) killPid(who.pid)
  }
  await waitFor(() => ours.every((who) => Number(processStart(who.pid)) !== who.start_ticks), { what: 'the supervisors and their jobs to be gone' })
  const looked = await registryWritesDuring(home, () => runBg(home, ['list', '--json']))
  assert.equal(looked.result.code, 0, looked.result.stderr)
  const listed = JSON.parse(looked.result.stdout)
  assert.deepEqual(listed.filter((j) => j.status === 'lost').map((j) => j.jobId).sort(), [...ids].sort(), 'every job lost')
  // One write per job would be >= n.
  assert.ok(looked.writes <= 4, `jobs.json was replaced ${looked.writes} times while ${n} jobs were found lost`)
  const pruned = await registryWritesDuring(home, () => runBg(home, ['prune', '--json']))
  assert.equal(pruned.result.code, 0, pruned.result.stderr)
  assert.deepEqual(JSON.parse(pruned.result.stdout).removed.sort(), [...ids].sort(), 'every job pruned')
  assert.ok(pruned.writes <= 4, `jobs.json was replaced ${pruned.writes} times while ${n} jobs were pruned`)
})

/** True when something listens on the built-in notify address (127.0.0.1:7600) here. */
async function defaultAddressTaken() {
  const net = await import('node:net')
  return new Promise((resolve) => {
    const socket = net.connect(7600, '127.0.0.1', () => { socket.destroy(); resolve(true) })
    socket.on('error', () => resolve(false))
  })
}

/** Voluntary plus involuntary context switches of `pid` so far: how often it woke. */
function wakeups(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  return [...status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
}

test('the notifiers of many killed jobs record every attempt without a registry write each', async (t) => {
  if (await defaultAddressTaken()) return t.skip('something listens on 127.0.0.1:7600 here')
  // The built-in address with nothing there: each notifier tries for the
  // retry period (5 attempts in 2 s), then records no-listener. Recorded
  // through the registry, that was 6 writes a job (1,000 jobs: 6,000 writes
  // of a 1,000-job registry, minutes at load 1,000).
  const { home } = makeHome(t, { notify: { retry_for_ms: 2000 } })
  const n = 20
  const ids = startSleeps(home, n)
  runBg(home, ['list'])
  const { writes } = await registryWritesDuring(home, async () => {
    const r = runBg(home, ['kill', '--all'])
    assert.equal(r.code, 0, r.stderr)
    await waitForQuiet(home)
  })
  const notifications = ids.map((id) => checkJson(home, id).notification)
  for (const n of notifications) assert.equal(n?.state, 'no-listener', JSON.stringify(n))
  assert.ok(notifications.every((n) => n.attempts >= 3), `attempts: ${notifications.map((n) => n.attempts)}`)
  const hinted = ids.filter((id) => runBg(home, ['check', id]).stdout.includes('no interrupt service listens at the default address; set `notify.url`'))
  assert.equal(hinted.length, 1, 'one hint for the home')
  t.diagnostic(`jobs.json written ${writes} times for ${notifications.reduce((s, n) => s + n.attempts, 0)} attempts`)
  // The kill's own write or two, then at most one fold a second.
  assert.ok(writes <= 12, `jobs.json was replaced ${writes} times while ${n} notifiers made ${notifications.reduce((s, n) => s + n.attempts, 0)} attempts`)
  // Folded into the registry itself, not only laid over by readers.
  for (const id of ids) assert.equal(readRegistry(home).find((j) => j.id === id)?.notification?.state, 'no-listener')
})

test('a killed job\'s supervisor sleeps while its notifier retries past the kill\'s SIGKILL deadline', async (t) => {
  if (await defaultAddressTaken()) return t.skip('something listens on 127.0.0.1:7600 here')
  const { home } = makeHome(t, { notify: { retry_for_ms: 4000 }, kill: { grace_ms: 100 } })
  const [id] = startSleeps(home, 1)
  const supervisor = readRegistry(home).find((j) => j.id === id).supervisor.pid
  assert.equal(runBg(home, ['kill', id]).code, 0)
  // Past the SIGKILL deadline, the notifier still retrying.
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const before = wakeups(supervisor)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const woke = wakeups(supervisor) - before
  assert.ok(processStart(supervisor) !== null, 'the supervisor waits for its notifier')
  // Once a millisecond before (about 1,000 a second on an idle core).
  assert.ok(woke < 50, `the supervisor woke ${woke} times in a second with nothing to do`)
  await waitForQuiet(home)
})

test('orphans --kill of many orphans is recorded once, not once more by each orphan\'s watcher', async (t) => {
  const { home } = makeHome(t)
  const n = 20
  const ids = startSleeps(home, n)
  const jobs = readRegistry(home).filter((j) => ids.includes(j.id))
  // Only the supervisors, each checked by its start time first: the jobs live on, orphaned.
  const supervisors = jobs.map((j) => j.supervisor).filter((who) => who && who.pid > 1)
  for (const who of supervisors) {
    if (Number(processStart(who.pid)) === who.start_ticks) killPid(who.pid)
  }
  await waitFor(() => supervisors.every((who) => Number(processStart(who.pid)) !== who.start_ticks), { what: 'the supervisors to be gone' })
  // The first look records them orphaned and gives each a watcher.
  const listed = JSON.parse(runBg(home, ['list', '--json']).stdout)
  assert.equal(listed.filter((j) => j.status === 'orphaned').length, n)
  const { result, writes } = await registryWritesDuring(home, async () => {
    const r = runBg(home, ['orphans', '--kill'])
    await waitForQuiet(home)
    return r
  })
  assert.equal(result.code, 0, result.stderr)
  for (const id of ids) assert.equal(checkJson(home, id).status, 'killed')
  t.diagnostic(`jobs.json written ${writes} times`)
  // One write per watcher would be >= n.
  assert.ok(writes <= 6, `jobs.json was replaced ${writes} times while ${n} orphans were killed`)
})

test('kill --all of jobs started at once returns only once every one of their processes and supervisors is gone', async (t) => {
  // Issue 40: supervisors and job processes were found alive after kill
  // --all had returned 0 with every job `killed`. Started at once, so that
  // the last supervisors are still settling when the kill comes.
  const { home } = makeHome(t)
  const n = 40
  const started = await Promise.all(Array.from({ length: n }, (_, i) => runBgAsync(home, ['--json', '--label', `a${i}`, '--', 'sleep', '300'])))
  for (const r of started) assert.equal(r.code, 0, r.stderr)
  const ids = started.map((r) => JSON.parse(r.stdout).jobId)
  const recorded = ids.flatMap((id) => {
    const job = JSON.parse(fs.readFileSync(path.join(home, 'jobs', id, 'job.json'), 'utf8'))
    return [job.main, job.supervisor].map((who) => ({ id, ...who }))
  })
  const r = runBg(home, ['kill', '--all', '--json'])
  // Looked at before anything else: what the kill says must hold as it returns.
  const alive = recorded.filter((who) => processStart(who.pid) === String(who.start_ticks))
  assert.equal(r.code, 0, r.stderr)
  const views = JSON.parse(r.stdout)
  assert.deepEqual(views.map((v) => v.jobId).sort(), [...ids].sort(), 'each job once')
  for (const v of views) assert.equal(v.status, 'killed', JSON.stringify(v))
  assert.deepEqual(alive, [], 'no main process or supervisor alive as kill --all returned')
})

test('kill --all of process trees, a job that ignores SIGTERM and one whose supervisor is SIGKILLed mid-kill: each killed, nothing left', async (t) => {
  // The kill sends each tree its SIGTERM itself (its supervisor only records
  // the end): every tree must still go, the stubborn one after the grace
  // period, and a job whose supervisor dies meanwhile is killed without it.
  const { home, extraPids } = makeHome(t)
  const ids = []
  for (let i = 0; i < 6; i++) ids.push(startJob(home, ['sh', '-c', 'sleep 300 & sleep 301']).jobId)
  const stubborn = startJob(home, ['sh', '-c', 'trap "" TERM; sleep 302']).jobId
  const orphaned = startJob(home, ['sh', '-c', 'trap "" TERM; sleep 303']).jobId
  ids.push(stubborn, orphaned)
  await waitFor(() => ids.every((id, i) => cookieProcesses(id).length >= (i < 6 ? 3 : 2)), { what: 'every tree to run' })
  const supervisor = readRegistry(home).find((j) => j.id === orphaned).supervisor
  assert.ok(supervisor?.pid > 1)
  extraPids.push(supervisor.pid)
  const started = Date.now()
  const kill = runBgAsync(home, ['kill', '--all', '--grace', '1500ms', '--json'])
  // During the grace period the stubborn trees live on; its supervisor goes.
  await waitFor(() => fs.existsSync(path.join(home, 'jobs', orphaned, 'kill-request.json')), { what: 'the kill request', timeout: 10_000 })
  if (processStart(supervisor.pid) === String(supervisor.start_ticks)) process.kill(supervisor.pid, 'SIGKILL')
  const r = await kill
  assert.equal(r.code, 0, r.stderr)
  assert.ok(Date.now() - started >= 1500, 'the stubborn job had its grace period')
  const views = JSON.parse(r.stdout)
  assert.deepEqual(views.map((v) => v.jobId).sort(), [...ids].sort(), 'each job once')
  for (const v of views) assert.equal(v.status, 'killed', JSON.stringify(v))
  for (const id of ids) {
    assert.deepEqual(cookieProcesses(id), [], `${id} left nothing`)
    assert.equal(checkJson(home, id).status, 'killed', id)
  }
  // Those whose supervisor recorded the end: by the signal that ended the main process.
  for (const id of ids.slice(0, 6)) assert.equal(checkJson(home, id).signal, 'SIGTERM', id)
  assert.equal(checkJson(home, stubborn).signal, 'SIGKILL')
})
