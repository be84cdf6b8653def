// followLog (an async iterator over a job's output, across rotations) and
// the `signal` option of waitJob and runYield: stopping ends the native
// thread at once, checked by the threads this process has.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { getEventListeners } from 'node:events'
import v8 from 'node:v8'
import vm from 'node:vm'
import { pm, makeHome, waitFor, killPid, readRegistry, RUN_BG } from './helpers.mjs'
import { spawn } from 'node:child_process'

function useHome(t, config) {
  const fixture = makeHome(t, config)
  process.env.PROC_MANAGER_HOME = fixture.home
  return fixture
}

/** This process's threads by name (`comm` is cut to 15 characters). */
function threads() {
  return fs.readdirSync('/proc/self/task').map((tid) => {
    try {
      return fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()
    } catch {
      return '' // ended while we looked
    }
  })
}
const ours = () => threads().filter((name) => name.startsWith('proc-manager-')).length

/** The addon's worker threads are gone and the task count is back to `before`. */
async function threadsBackTo(before, what) {
  await waitFor(() => ours() === 0 && threads().length <= before, { timeout: 10_000, what: `${what}: its thread to end` })
}

const isAbort = (e) => e.name === 'AbortError' && e.code === 'ABORT_ERR'

test('followLog gives every line of a job writing across many log rotations, in order, and ends with the job', async (t) => {
  const { home } = useHome(t, { logs: { max_bytes: 4096, keep: 100 } })
  const job = pm.runBackground(
    'sleep 0.2; i=1; while [ $i -le 3000 ]; do printf "line %05d %s\\n" $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; ' +
      'if [ $((i % 100)) -eq 0 ]; then sleep 0.01; fi; i=$((i+1)); done',
  )
  const lines = []
  for await (const line of pm.followLog(job.jobId)) lines.push(line)
  assert.equal(lines.length, 3000)
  lines.forEach((line, i) => assert.equal(line.slice(0, 10), `line ${String(i + 1).padStart(5, '0')}`))
  const rotated = fs.readdirSync(path.join(home, 'jobs', job.jobId)).filter((f) => /^output\.log\.\d+$/.test(f))
  assert.ok(rotated.length >= 20, `the log rotated while followed (${rotated.length} rotated files)`)
  assert.equal(pm.checkJob(job.jobId).status, 'success')
  await threadsBackTo(Infinity, 'an ended follow')
})

// A follower is a reader like any other: with no other call looking at the
// job, it notices the supervisor's death itself, and the watcher that call
// starts takes up the output (else what the job writes after waits in the
// pipe, and is lost when the job ends). Found by a new user's pass: followLog
// stayed at the last line before the kill, and never ended.
const ticker = 'i=0; while [ $i -lt 15 ]; do i=$((i+1)); echo x$i; sleep 0.2; done'
const ticks = Array.from({ length: 15 }, (_, i) => `x${i + 1}`)

test('followLog of a job whose supervisor is killed: every line comes, and the follow ends with the job', async (t) => {
  const { home } = useHome(t)
  const job = pm.runBackground(ticker)
  t.after(() => killPid(job.pid))
  const supervisor = readRegistry(home).find((j) => j.id === job.jobId).supervisor.pid
  const lines = []
  const followed = (async () => {
    for await (const line of pm.followLog(job.jobId)) {
      lines.push(line)
      if (line === 'x3') process.kill(supervisor, 'SIGKILL')
    }
  })()
  let timer
  const stuck = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`followLog stuck after ${JSON.stringify(lines)}`)), 20_000) })
  try {
    await Promise.race([followed, stuck])
  } finally {
    clearTimeout(timer)
  }
  assert.deepEqual(lines, ticks)
  assert.ok(pm.checkJob(job.jobId).tail.includes('x15'), 'the log holds the lines after the kill')
})

test('run-bg logs --follow of a job whose supervisor is killed: every line comes, and it exits with the job', async (t) => {
  const { home } = useHome(t)
  const job = pm.runBackground(ticker)
  t.after(() => killPid(job.pid))
  const supervisor = readRegistry(home).find((j) => j.id === job.jobId).supervisor.pid
  const follower = spawn(RUN_BG, ['logs', job.jobId, '--follow'], { env: process.env })
  t.after(() => killPid(follower.pid))
  let out = ''
  follower.stdout.on('data', (d) => {
    out += d
    if (out.includes('x3\n') && !follower.killedSupervisor) {
      follower.killedSupervisor = true
      process.kill(supervisor, 'SIGKILL')
    }
  })
  const exited = new Promise((resolve) => follower.on('exit', (code, signal) => resolve(code ?? signal)))
  let timer
  const stuck = new Promise((resolve) => { timer = setTimeout(() => resolve(`still following after ${JSON.stringify(out)}`), 20_000) })
  const code = await Promise.race([exited, stuck])
  clearTimeout(timer)
  assert.ok(follower.killedSupervisor, 'the supervisor was killed while followed')
  assert.equal(code, 0, String(code))
  assert.deepEqual(out.trim().split('\n'), ticks)
})

test('followLog with lines starts with the last lines; a last line without newline is still given', async (t) => {
  useHome(t)
  const job = pm.runBackground('seq 1 50; printf tail')
  await pm.waitJob(job.jobId)
  const lines = []
  for await (const line of pm.followLog(job.jobId, { lines: 3 })) lines.push(line)
  assert.deepEqual(lines, ['49', '50', 'tail'])
})

test('break out of followLog on a job that never ends: the native thread ends at once', async (t) => {
  useHome(t)
  const before = threads().length
  const job = pm.runBackground('i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.01; done')
  const seen = []
  for await (const line of pm.followLog(job.jobId)) {
    seen.push(line)
    if (seen.length === 5) break
  }
  assert.deepEqual(seen, ['tick 1', 'tick 2', 'tick 3', 'tick 4', 'tick 5'])
  await threadsBackTo(before, 'followLog after break')
  assert.equal(pm.checkJob(job.jobId).status, 'running', 'stopping the follow leaves the job running')
})

test('an aborted signal rejects followLog\'s pending next() with an AbortError and ends its thread', async (t) => {
  useHome(t)
  const before = threads().length
  const job = pm.runBackground('sleep 300')
  const controller = new AbortController()
  const lines = pm.followLog(job.jobId, { signal: controller.signal })
  const pending = lines.next()
  await waitFor(() => ours() === 1, { what: 'the follow thread' })
  controller.abort()
  await assert.rejects(pending, isAbort)
  await assert.rejects(lines.next(), isAbort, 'later calls say so too')
  await threadsBackTo(before, 'an aborted followLog')
  assert.throws(() => pm.followLog(job.jobId, { signal: controller.signal }), isAbort, 'an aborted signal is refused at once')
  assert.throws(() => pm.followLog(job.jobId, { signal: {} }), /bad signal: an object; give an AbortSignal/)
})

test('aborting waitJob on a job that never ends rejects with an AbortError and ends the wait thread at once', async (t) => {
  useHome(t)
  const before = threads().length
  const job = pm.runBackground('sleep 300')
  const controller = new AbortController()
  const waiting = pm.waitJob(job.jobId, { signal: controller.signal })
  await waitFor(() => ours() === 1, { what: 'the wait thread' })
  controller.abort()
  await assert.rejects(waiting, isAbort)
  await threadsBackTo(before, 'an aborted waitJob')
  assert.equal(pm.checkJob(job.jobId).status, 'running', 'the job runs on')

  await assert.rejects(pm.waitJob(job.jobId, { signal: controller.signal }), isAbort, 'already aborted: rejected at once')
  await assert.rejects(pm.waitJob(job.jobId, { signal: 'stop' }), /bad signal: "stop"; give an AbortSignal/)
  // A signal that never aborts changes nothing.
  const quick = pm.runBackground('exit 3')
  const done = await pm.waitJob(quick.jobId, { signal: new AbortController().signal })
  assert.deepEqual([done.status, done.shellExitCode], ['failed', 3])
  await threadsBackTo(before, 'a completed waitJob')
})

test('aborting runYield stops its wait at once with an AbortError and leaves the job running', async (t) => {
  useHome(t)
  const before = threads().length
  const controller = new AbortController()
  const yielding = pm.runYield('sleep 300', { yieldMs: 3_600_000, label: 'long', signal: controller.signal })
  await waitFor(() => ours() === 1, { what: 'the yield thread' })
  controller.abort()
  await assert.rejects(yielding, isAbort)
  await threadsBackTo(before, 'an aborted runYield')
  const [job] = pm.listJobs({ status: 'running' })
  assert.equal(job.label, 'long')

  const quick = await pm.runYield('echo fast', { yieldMs: 20_000, signal: new AbortController().signal })
  assert.deepEqual([quick.done, quick.check.tail], [true, ['fast']])
})

test('an aborted call\'s AbortError carries the signal\'s reason as its cause, as Node\'s own APIs do', async (t) => {
  useHome(t)
  const job = pm.runBackground('sleep 300')
  const why = new Error('the user pressed Esc')
  const waitController = new AbortController()
  const waiting = pm.waitJob(job.jobId, { signal: waitController.signal })
  await waitFor(() => ours() === 1, { what: 'the wait thread' })
  waitController.abort(why)
  await assert.rejects(waiting, (e) => isAbort(e) && e.cause === why)
  await assert.rejects(pm.waitJob(job.jobId, { signal: waitController.signal }), (e) => isAbort(e) && e.cause === why, 'already aborted')

  const followController = new AbortController()
  const lines = pm.followLog(job.jobId, { signal: followController.signal })
  const pending = lines.next()
  await waitFor(() => ours() === 1, { what: 'the follow thread' })
  followController.abort('timeout')
  await assert.rejects(pending, (e) => isAbort(e) && e.cause === 'timeout')
  assert.throws(() => pm.followLog(job.jobId, { signal: followController.signal }), (e) => isAbort(e) && e.cause === 'timeout')

  const yieldController = new AbortController()
  const yielding = pm.runYield('sleep 300', { yieldMs: 3_600_000, signal: yieldController.signal })
  await waitFor(() => ours() === 1, { what: 'the yield thread' })
  yieldController.abort()
  const aborted = await yielding.then(() => assert.fail('runYield resolved'), (e) => e)
  assert.ok(isAbort(aborted) && aborted.cause instanceof DOMException && aborted.cause.name === 'AbortError', 'abort() without a reason: the DOMException it makes')
  const timed = pm.waitJob(job.jobId, { signal: AbortSignal.timeout(50) })
  await assert.rejects(timed, (e) => isAbort(e) && e.cause?.name === 'TimeoutError', 'AbortSignal.timeout says it timed out')
})

const listeners = (signal) => getEventListeners(signal, 'abort').length
const openFds = () => fs.readdirSync('/proc/self/fd').length

test('a signal shared by many calls keeps no listener once each call has settled', async (t) => {
  useHome(t)
  const { signal } = new AbortController()
  for (let i = 0; i < 15; i++) {
    const done = await pm.waitJob(pm.runBackground('exit 0').jobId, { signal })
    assert.equal(done.status, 'success')
  }
  assert.equal(listeners(signal), 0, 'after 15 waitJob calls that resolved')
  const long = pm.runBackground('sleep 300')
  t.after(() => killPid(long.pid))
  assert.equal((await pm.waitJob(long.jobId, { signal, timeoutMs: 50 })).timedOut, true)
  assert.equal(listeners(signal), 0, 'after a waitJob that timed out')
  assert.equal((await pm.runYield('echo fast', { yieldMs: 20_000, signal })).done, true)
  const yielded = await pm.runYield('sleep 300', { yieldMs: 50, signal })
  // Its pid is read now: a later hook calling the API would open the home
  // again after the home's own cleanup deleted it, and so create it anew.
  const yieldedPid = pm.checkJob(yielded.jobId).pid
  t.after(() => killPid(yieldedPid))
  assert.equal(yielded.done, false)
  assert.equal(listeners(signal), 0, 'after runYield calls that resolved')

  const ended = pm.runBackground('seq 1 3')
  const seen = []
  for await (const line of pm.followLog(ended.jobId, { signal })) seen.push(line)
  assert.deepEqual(seen, ['1', '2', '3'])
  assert.equal(listeners(signal), 0, 'after a followLog that reached the end')
  const follow = pm.followLog(long.jobId, { signal })
  const next = follow.next()
  await follow.return()
  assert.deepEqual(await next, { done: true })
  assert.equal(listeners(signal), 0, 'after a followLog stopped with return()')
  const ends = pm.watchJobs({ signal })
  await ends.return()
  assert.equal(listeners(signal), 0, 'after a watchJobs stopped with return()')

  // Dropped without return(): collecting the iterator lets go of its listener.
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc')
  ;(() => pm.followLog(long.jobId, { signal }))()
  ;(() => pm.watchJobs({ signal }))()
  assert.equal(listeners(signal), 2)
  await waitFor(() => { gc(); return listeners(signal) === 0 }, { what: 'the collected iterators to let go of their listeners' })
})

test('runYield that cannot start its job leaks no file descriptor and no listener', async (t) => {
  useHome(t)
  const { signal } = new AbortController()
  const attempt = () => assert.rejects(pm.runYield('true', { yieldMs: 1000, cwd: '/no/such/dir', signal }), /no\/such\/dir/)
  await attempt()
  const before = openFds()
  for (let i = 0; i < 20; i++) await attempt()
  assert.equal(openFds(), before, 'open fds after 20 failed runYield calls')
  assert.equal(listeners(signal), 0)
})

test('aborting runYield says which job it started (jobId on the AbortError)', async (t) => {
  useHome(t)
  const controller = new AbortController()
  const yielding = pm.runYield('sleep 300', { yieldMs: 3_600_000, label: 'named', signal: controller.signal })
  await waitFor(() => ours() === 1, { what: 'the yield thread' })
  controller.abort()
  const error = await yielding.then(() => assert.fail('resolved'), (e) => e)
  assert.ok(isAbort(error))
  const [job] = pm.listJobs({ status: 'running' })
  t.after(() => killPid(job.pid))
  assert.equal(job.label, 'named')
  assert.equal(error.jobId, job.jobId)
})
