// Issue 15, items 2 and 4: restart on failure (--restart, one job id across
// runs, nothing left of earlier trees, a separator in the log, one
// notification when it gives up, kill and timeout between runs) and stdin
// (--stdin pipe, run-bg send, sendInput).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pm, makeHome, runBg, startJob, checkJson, waitFor, waitForQuiet, isAlive, killPid, connectMcp } from './helpers.mjs'
import { startInterruptService } from './fixtures/interrupt-service.mjs'

/** A directory for a job's counters, with an empty `runs` file. */
function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-restart-'))
  fs.writeFileSync(path.join(dir, 'runs'), '')
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

const lines = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : [])

/**
 * A job that counts its runs in `dir/runs`, leaves a `sleep 300` in the
 * background each run (its pid in `dir/pids`), prints `run N`, and exits 1
 * for its first `failures` runs, then stays up.
 */
function crashingJob(dir, failures) {
  return ['sh', '-c',
    `n=$(wc -l < ${dir}/runs); n=$((n+1)); echo $n >> ${dir}/runs; ` +
    `sleep 300 & echo $! >> ${dir}/pids; echo "run $n"; ` +
    `if [ $n -le ${failures} ]; then exit 1; fi; echo up; exec sleep 600`]
}

test('a job that crashes twice then stays up: restarts 2 under one id, nothing left of the earlier trees', async (t) => {
  const { home, extraPids } = makeHome(t)
  const dir = tempDir(t)
  t.after(() => lines(path.join(dir, 'pids')).forEach((p) => killPid(Number(p))))
  const started = startJob(home, crashingJob(dir, 2), ['--restart', 'on-failure', '--restart-delay', '100ms'])
  const pidsFile = path.join(dir, 'pids')
  // After each restart, the background sleep of every earlier run is gone.
  for (const run of [2, 3]) {
    await waitFor(() => lines(pidsFile).length >= run, { what: `run ${run}` })
    const earlier = lines(pidsFile).slice(0, run - 1).map(Number)
    extraPids.push(...earlier)
    assert.deepEqual(earlier.filter(isAlive), [], `run ${run} started while a process of an earlier run lived`)
  }
  const check = await waitFor(() => {
    const c = checkJson(home, started.jobId)
    return c.tail.includes('up') ? c : null
  }, { what: 'the third run up' })
  assert.equal(check.jobId, started.jobId)
  assert.equal(check.status, 'running')
  assert.equal(check.restarts, 2)
  assert.equal(check.lastRestart, 'exit 1')
  assert.equal(typeof check.lastRestartAt, 'number')
  assert.notEqual(check.pid, started.pid, 'the record names the running main process')
  assert.ok(isAlive(check.pid))
  const [, , third] = lines(pidsFile).map(Number)
  extraPids.push(third)
  assert.ok(isAlive(third), 'the running run keeps its own processes')
  const text = runBg(home, ['check', started.jobId]).stdout
  assert.match(text, /\n {2}restarts: 2 \(last: exit 1 at \d\d:\d\d:\d\d UTC\)\n/)
  const listed = JSON.parse(runBg(home, ['list', '--all', '--json']).stdout)
  assert.deepEqual(listed.map((j) => j.jobId), [started.jobId], 'one job in the registry')
  runBg(home, ['kill', started.jobId])
  assert.equal(checkJson(home, started.jobId).status, 'killed')
  await waitFor(() => !isAlive(third), { what: 'the last run\'s tree gone after kill' })
})

test('--max-restarts 2 on a job that always fails gives up, ends failed, and notifies exactly once', async (t) => {
  const service = await startInterruptService(t, { message: { batch_window_ms: 100 }, subagent: { batch_window_ms: 100 } })
  const { home } = makeHome(t, { notify: { url: service.url } })
  const dir = tempDir(t)
  const { jobId } = startJob(home, ['sh', '-c', `echo x >> ${dir}/runs; echo failing; exit 3`],
    ['--restart', 'always', '--max-restarts', '2', '--restart-delay', '50ms'])
  const wait = runBg(home, ['wait', jobId, '--timeout', '30s'])
  assert.equal(wait.code, 3, wait.stdout + wait.stderr)
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'failed')
  assert.equal(check.exitCode, 3)
  assert.equal(check.restarts, 2)
  assert.equal(lines(path.join(dir, 'runs')).length, 3, 'the first run and 2 restarts')
  await waitForQuiet(home)
  const triggers = (await service.inspect()).triggers.filter((x) => x.body.data?.jobId === jobId)
  assert.equal(triggers.length, 1, `one notification, when it gave up: ${JSON.stringify(triggers.map((x) => x.body.data.status))}`)
  assert.equal(triggers[0].body.data.status, 'failed')
})

test('notify.on_restart: true also announces each restart', async (t) => {
  const service = await startInterruptService(t, { message: { batch_window_ms: 100 }, subagent: { batch_window_ms: 100 } })
  const { home } = makeHome(t, { notify: { url: service.url, on_restart: true } })
  const { jobId } = startJob(home, ['sh', '-c', 'exit 3'], ['--restart', 'on-failure', '--max-restarts', '2', '--restart-delay', '50ms'])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '30s']).code, 3)
  await waitForQuiet(home)
  const data = (await service.inspect()).triggers.map((x) => x.body.data).filter((d) => d?.jobId === jobId)
  assert.deepEqual(data.map((d) => d.eventId).sort(), [`${jobId}:failed`, `${jobId}:restart-1`, `${jobId}:restart-2`])
  const second = data.find((d) => d.eventId === `${jobId}:restart-2`)
  assert.equal(second.status, 'restarted')
  assert.equal(second.exitCode, 3)
  assert.equal(second.outcome, 'restart 2 after exit 3')
  assert.match(second.message, new RegExp(`^run-bg: ${jobId} \\(sh -c 'exit 3'\\) restarted after exit 3 \\(restart 2, next run in 100ms\\); run-bg check ${jobId}$`))
})

test('on-failure ends at exit 0; always restarts after it', async (t) => {
  const { home } = makeHome(t)
  const clean = startJob(home, ['sh', '-c', 'echo fine'], ['--restart', 'on-failure', '--restart-delay', '50ms'])
  assert.equal(runBg(home, ['wait', clean.jobId, '--timeout', '30s']).code, 0)
  const done = checkJson(home, clean.jobId)
  assert.equal(done.status, 'success')
  assert.equal(done.restarts, 0)
  assert.doesNotMatch(runBg(home, ['check', clean.jobId]).stdout, /restarts:/, 'nothing to say without a restart')

  const again = startJob(home, ['sh', '-c', 'echo fine'], ['--restart', 'always', '--max-restarts', '1', '--restart-delay', '50ms'])
  assert.equal(runBg(home, ['wait', again.jobId, '--timeout', '30s']).code, 0)
  const twice = checkJson(home, again.jobId)
  assert.equal(twice.restarts, 1)
  assert.equal(twice.lastRestart, 'exit 0')
  assert.deepEqual(twice.tail, ['fine', '--- run-bg: restart 1 after exit 0 (delay 50ms) ---', 'fine'])
})

test('a separator line marks each restart in the log, and cursors stay positions in everything written', async (t) => {
  const { home } = makeHome(t)
  const dir = tempDir(t)
  // Each run ends in a line without its newline: the separator still starts a line of its own.
  const { jobId, logPath } = startJob(home,
    ['sh', '-c', `n=$(wc -l < ${dir}/runs); n=$((n+1)); echo $n >> ${dir}/runs; echo line-$n; printf partial-$n; exit 1`],
    ['--restart', 'on-failure', '--max-restarts', '2', '--restart-delay', '50ms'])
  runBg(home, ['wait', jobId, '--timeout', '30s'])
  const expected = [
    'line-1', 'partial-1', '--- run-bg: restart 1 after exit 1 (delay 50ms) ---',
    'line-2', 'partial-2', '--- run-bg: restart 2 after exit 1 (delay 100ms) ---',
    'line-3', 'partial-3',
  ]
  const raw = fs.readFileSync(logPath, 'utf8')
  assert.equal(raw, expected.join('\n'))
  // `logs` prints lines: the last one gets its newline.
  assert.equal(runBg(home, ['logs', jobId]).stdout, raw + '\n')
  assert.deepEqual(checkJson(home, jobId, ['-n', '20']).tail, expected)
  // A read by cursor holds back an unterminated last line while a writer may
  // still add to it: until the supervisor is gone (it stays for its notifier).
  const supervisor = JSON.parse(fs.readFileSync(path.join(home, 'jobs', jobId, 'job.json'), 'utf8')).supervisor.pid
  await waitFor(() => !isAlive(supervisor), { what: 'the supervisor gone' })
  // From every line start, `logs --since` gives exactly the lines after it.
  let offset = 0
  for (let i = 0; i < expected.length; i++) {
    const read = JSON.parse(runBg(home, ['logs', jobId, '--since', String(offset), '--json']).stdout)
    assert.deepEqual(read.lines, expected.slice(i), `since ${offset}`)
    assert.equal(read.cursor, Buffer.byteLength(raw))
    offset += Buffer.byteLength(expected[i]) + 1
  }
})

test('a kill during the restart delay ends the job, and no run starts after it', async (t) => {
  const { home } = makeHome(t)
  const dir = tempDir(t)
  const runs = path.join(dir, 'runs')
  const { jobId, logPath } = startJob(home, ['sh', '-c', `echo x >> ${runs}; exit 1`],
    ['--restart', 'on-failure', '--restart-delay', '1m'])
  await waitFor(() => fs.readFileSync(logPath, 'utf8').includes('restart 1 after exit 1 (delay 1m00s)'), { what: 'the restart scheduled' })
  const supervisor = JSON.parse(fs.readFileSync(path.join(home, 'jobs', jobId, 'job.json'), 'utf8')).supervisor.pid
  const before = Date.now()
  const kill = runBg(home, ['kill', jobId, '--json'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.ok(Date.now() - before < 10_000, 'the kill did not wait for the delay')
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'killed')
  assert.equal(check.restarts, 1)
  await waitFor(() => !isAlive(supervisor), { what: 'the supervisor gone' })
  assert.equal(lines(runs).length, 1, 'a run started after the kill')
})

test('during the restart delay the job is not ready, and says when its next run starts', async (t) => {
  // It read "running (ready after 318ms)" with the crashed run's pid, and
  // `wait --ready` returned 0 while nothing listened.
  const { home } = makeHome(t)
  const { jobId, logPath } = startJob(home, ['sh', '-c', 'echo ready; sleep 0.3; exit 1'],
    ['--restart', 'on-failure', '--restart-delay', '1m', '--ready-log', '^ready$'])
  t.after(() => runBg(home, ['kill', jobId, '--force']))
  await waitFor(() => fs.readFileSync(logPath, 'utf8').includes('restart 1 after exit 1 (delay 1m00s)'), { what: 'the restart scheduled' })
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'running')
  assert.equal(check.readyAt, undefined, 'the ended run\'s readiness is gone')
  assert.ok(check.nextRunAt > Date.now() + 50_000 && check.nextRunAt < Date.now() + 61_000, `nextRunAt ${check.nextRunAt}`)
  assert.match(runBg(home, ['check', jobId]).stdout, /restarts: 1 \(last: exit 1 at [\d:]+ UTC\); run 2 starts in (5\d|60)s/)
  const ready = runBg(home, ['wait', jobId, '--ready', '--timeout', '300ms'])
  assert.equal(ready.code, 124, 'not ready while it waits to restart')
})

test('a kill during the restart delay is stamped when it happens, not at the previous run\'s end', async (t) => {
  const { home } = makeHome(t)
  const { jobId, logPath } = startJob(home, ['sh', '-c', 'exit 3'], ['--restart', 'always', '--restart-delay', '20s'])
  await waitFor(() => fs.readFileSync(logPath, 'utf8').includes('restart 1 after exit 3'), { what: 'the restart scheduled' })
  const requested = Date.now()
  const kill = runBg(home, ['kill', jobId, '--json'])
  assert.equal(kill.code, 0, kill.stderr)
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'killed')
  assert.ok(check.endedAt >= requested, `endedAt ${check.endedAt} is ${requested - check.endedAt} ms before the kill was asked for (${requested})`)
  assert.ok(check.endedAt >= check.lastRestartAt, `endedAt ${check.endedAt} before lastRestartAt ${check.lastRestartAt}`)
  assert.equal(check.durationMs, check.endedAt - check.startedAt)
})

test('a kill while the ended run\'s tree is being killed ends the job without a restart', async (t) => {
  // The ended run leaves a process that ignores SIGTERM: its clean-up waits for the grace period.
  // Ignored from its fork on (inherited), not from a trap of its own: the
  // run's end sends SIGTERM at once, and on a busy machine that came before
  // the trap, so the first run's tree was gone and a second run started.
  const { home, extraPids } = makeHome(t, { kill: { grace_ms: 60_000 } })
  const dir = tempDir(t)
  const runs = path.join(dir, 'runs')
  const { jobId, pid, logPath } = startJob(home,
    ['sh', '-c', `echo x >> ${runs}; trap "" TERM; sh -c 'echo $$ > ${dir}/stubborn; while :; do sleep 1; done' & exit 1`],
    ['--restart', 'on-failure', '--restart-delay', '50ms'])
  const stubborn = await waitFor(() => lines(path.join(dir, 'stubborn'))[0], { what: 'the stubborn process' })
  extraPids.push(Number(stubborn))
  await waitFor(() => !isAlive(pid), { what: 'the first run to end' })
  const supervisor = JSON.parse(fs.readFileSync(path.join(home, 'jobs', jobId, 'job.json'), 'utf8')).supervisor.pid
  assert.equal(checkJson(home, jobId).status, 'running', 'the job runs on while the ended run is cleaned up')
  const kill = runBg(home, ['kill', jobId, '--grace', '200ms'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.equal(checkJson(home, jobId).status, 'killed')
  await waitFor(() => !isAlive(supervisor), { what: 'the supervisor gone' })
  assert.ok(!isAlive(Number(stubborn)), 'the ended run\'s tree is gone')
  assert.equal(lines(runs).length, 1, 'no run started after the kill')
  assert.doesNotMatch(fs.readFileSync(logPath, 'utf8'), /restart 1/)
})

test('separators across log rotations: logs --since from each line start gives the rest', async (t) => {
  // 4 runs of 10 lines of 300 bytes, 4096-byte files: 3 rotations at least.
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 50 } })
  const dir = tempDir(t)
  const pad = 'p'.repeat(280)
  const { jobId } = startJob(home,
    ['sh', '-c', `n=$(wc -l < ${dir}/runs); n=$((n+1)); echo $n >> ${dir}/runs; for i in 1 2 3 4 5 6 7 8 9 10; do echo run-$n-line-$i-${pad}; done; exit 1`],
    ['--restart', 'on-failure', '--max-restarts', '3', '--restart-delay', '10ms'])
  runBg(home, ['wait', jobId, '--timeout', '30s'])
  const expected = []
  for (let n = 1; n <= 4; n++) {
    for (let i = 1; i <= 10; i++) expected.push(`run-${n}-line-${i}-${pad}`)
    if (n < 4) expected.push(`--- run-bg: restart ${n} after exit 1 (delay ${10 * 2 ** (n - 1)}ms) ---`)
  }
  const all = JSON.parse(runBg(home, ['logs', jobId, '--since', '0', '-n', '1000', '--json']).stdout)
  assert.deepEqual(all.lines, expected)
  assert.ok(fs.readdirSync(path.join(home, 'jobs', jobId)).filter((f) => /^output\.log\.\d+$/.test(f)).length >= 3, 'the log rotated')
  let offset = 0
  for (let i = 0; i < expected.length; i++) {
    const read = JSON.parse(runBg(home, ['logs', jobId, '--since', String(offset), '-n', '1000', '--json']).stdout)
    assert.deepEqual(read.lines, expected.slice(i), `since ${offset}`)
    assert.equal(read.cursor, all.cursor)
    offset += Buffer.byteLength(expected[i]) + 1
  }
})

test('--timeout covers the whole job, across restarts', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'sleep 0.2; exit 1'],
    ['--restart', 'always', '--max-restarts', '1000', '--restart-delay', '100ms', '--timeout', '2s'])
  runBg(home, ['wait', jobId, '--timeout', '30s'])
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'timeout')
  assert.ok(check.restarts >= 2, `restarted within the 2 s: ${check.restarts}`)
  assert.ok(check.durationMs < 10_000, `ended at the timeout, not later: ${check.durationMs} ms`)
})

test('restart options are checked', async (t) => {
  const { home } = makeHome(t)
  const bad = runBg(home, ['--restart', 'sometimes', '--', 'true'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /on-failure/)
  const alone = runBg(home, ['--max-restarts', '3', '--', 'true'])
  assert.equal(alone.code, 2)
  assert.match(alone.stderr, /--restart/)
  process.env.PROC_MANAGER_HOME = home
  assert.throws(() => pm.runBackground('true', { restart: 'sometimes' }), /bad restart: "sometimes"; give one of 'on-failure', 'always'/)
  assert.throws(() => pm.runBackground('true', { maxRestarts: 2 }), /maxRestarts and restartDelayMs go with restart/)
  assert.throws(() => pm.runBackground('true', { stdin: 'tty' }), /bad stdin: "tty"; give one of 'pipe', 'null'/)
})

test('runBackground takes restart, maxRestarts and restartDelayMs', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const job = pm.runBackground('echo try; exit 4', { restart: 'on-failure', maxRestarts: 1, restartDelayMs: 20 })
  const result = await pm.waitJob(job.jobId, { timeoutMs: 30_000 })
  assert.equal(result.status, 'failed')
  assert.equal(result.exitCode, 4)
  assert.equal(result.restarts, 1)
  assert.deepEqual(pm.checkJob(job.jobId).tail, ['try', '--- run-bg: restart 1 after exit 4 (delay 20ms) ---', 'try'])
})

test('run-bg send reaches a read in the job; --eof closes its stdin', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'read x; echo got:$x; cat; echo eof'], ['--stdin', 'pipe'])
  assert.equal(checkJson(home, jobId).stdin, 'pipe')
  const sent = runBg(home, ['send', jobId, 'hello world'])
  assert.equal(sent.code, 0, sent.stderr)
  assert.match(sent.stdout, new RegExp(`^sent 12 bytes to ${jobId}\\n$`))
  await waitFor(() => checkJson(home, jobId).tail.includes('got:hello world'), { what: 'the read line' })
  assert.equal(checkJson(home, jobId).status, 'running', 'stdin stays open between sends')
  assert.equal(runBg(home, ['send', jobId, '-y']).code, 0, 'a text starting with a dash')
  assert.equal(runBg(home, ['send', jobId, '--no-newline', 'tail']).code, 0)
  const closed = JSON.parse(runBg(home, ['send', jobId, '--eof', '--json']).stdout)
  assert.deepEqual(closed, { jobId, bytes: 0, closed: true })
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '30s']).code, 0)
  assert.deepEqual(checkJson(home, jobId).tail, ['got:hello world', '-y', 'taileof'])
  const late = runBg(home, ['send', jobId, 'more'])
  assert.equal(late.code, 1)
  assert.match(late.stderr, /has ended \(success\); nothing reads its stdin any more/)
})

test('send after send --eof is refused at once, saying the stdin was closed', async (t) => {
  // It waited 5 s, then said the job had not read its stdin (the pipe is full).
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'cat; echo eof; sleep 30'], ['--stdin', 'pipe'])
  t.after(() => runBg(home, ['kill', jobId, '--force']))
  assert.equal(runBg(home, ['send', jobId, '--eof']).code, 0)
  await waitFor(() => checkJson(home, jobId).tail.includes('eof'), { what: 'cat to read end-of-file' })
  const began = Date.now()
  const late = runBg(home, ['send', jobId, 'hi'])
  assert.equal(late.code, 1)
  assert.match(late.stderr, /its stdin was closed by an earlier `send --eof`; nothing more can be sent to it/)
  assert.ok(Date.now() - began < 2000, `refused after ${Date.now() - began} ms`)
  assert.equal(runBg(home, ['send', jobId, '--eof']).code, 1, 'a second --eof is refused too')
})

test('send to a job without --stdin pipe fails clearly', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sleep', '30'])
  const r = runBg(home, ['send', jobId, 'y'])
  assert.equal(r.code, 2)
  assert.match(r.stderr, /was not started with `--stdin pipe`.*its stdin is \/dev\/null/)
  runBg(home, ['kill', jobId, '--force'])
})

test('sendInput from JS reaches a read in the job', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const job = pm.runBackground('read x; echo got:$x', { stdin: 'pipe' })
  assert.deepEqual(await pm.sendInput(job.jobId, 'from-js'), { jobId: job.jobId, bytes: 8, closed: false })
  const result = await pm.waitJob(job.jobId, { timeoutMs: 30_000 })
  assert.equal(result.status, 'success')
  assert.deepEqual(pm.checkJob(job.jobId).tail, ['got:from-js'])
  const plain = pm.runBackground('sleep 30')
  await assert.rejects(pm.sendInput(plain.jobId, 'y'), /was not started with `--stdin pipe`/)
  await assert.rejects(pm.sendInput(job.jobId, 'y', { newlines: true }), /unknown option `newlines` for sendInput; accepted: newline, eof/)
  await pm.killJob(plain.jobId, { force: true })
})

test('a restarted job keeps its stdin pipe: each run reads what is sent to it', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'read x; echo got:$x; exit 1'],
    ['--stdin', 'pipe', '--restart', 'on-failure', '--max-restarts', '1', '--restart-delay', '50ms'])
  runBg(home, ['send', jobId, 'one'])
  await waitFor(() => checkJson(home, jobId).restarts === 1, { what: 'the restart' })
  runBg(home, ['send', jobId, 'two'])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '30s']).code, 1)
  assert.deepEqual(checkJson(home, jobId).tail, ['got:one', '--- run-bg: restart 1 after exit 1 (delay 50ms) ---', 'got:two'])
})

test('MCP: run_background takes restart and stdin, control_job send reaches the job', async (t) => {
  const { home } = makeHome(t)
  const client = await connectMcp(t, home)
  await client.listTools()
  const call = (name, args) => client.callTool({ name, arguments: args })
  const text = (result) => result.content.map((c) => c.text).join('\n')
  const run = await call('run_background', {
    command: 'read x; echo got:$x; exit 1', stdin: 'pipe', restart: 'on-failure', maxRestarts: 1, restartDelayMs: 50,
  })
  assert.ok(!run.isError, text(run))
  const { jobId } = run.structuredContent
  const sent = await call('control_job', { jobId, action: 'send', text: 'one' })
  assert.deepEqual(sent.structuredContent, { jobId, bytes: 4, closed: false })
  assert.equal(text(sent), `sent 4 bytes to jobId ${jobId}`)
  await waitFor(() => checkJson(home, jobId).restarts === 1, { what: 'the restart' })
  await call('control_job', { jobId, action: 'send', text: 'two' })
  const waited = await call('wait_job', { jobId, timeoutMs: 30_000 })
  assert.equal(waited.structuredContent.status, 'failed')
  assert.match(text(waited), /\n {2}restarts: 1 \(last: exit 1 at [\d:]+ UTC\)\n[^]*got:one\n--- run-bg: restart 1 after exit 1 \(delay 50ms\) ---\ngot:two/)
  const refused = await call('control_job', { jobId, action: 'send', text: 'three' })
  assert.equal(refused.isError, true)
  assert.match(text(refused), /has ended \(failed\); nothing reads its stdin any more/)
})

test('send refuses too much input at once, and says how much went in when the job does not read', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sleep', '60'], ['--stdin', 'pipe'])
  process.env.PROC_MANAGER_HOME = home
  await assert.rejects(pm.sendInput(jobId, 'x'.repeat(2 * 1024 * 1024)), /too much input for one send \(2097153 bytes\); at most 1048576 bytes/)
  // More than the pipe holds (64 KiB), to a job that never reads: the rest waits 5 s, then the send fails.
  const started = Date.now()
  const r = runBg(home, ['send', jobId, 'y'.repeat(100_000)])
  assert.equal(r.code, 1)
  assert.match(r.stderr, new RegExp(`${jobId}: \\d+ of 100001 bytes sent to its stdin: the job did not read its stdin for 5s \\(the pipe is full\\)`))
  assert.ok(Date.now() - started >= 4_500, 'it waited for the job to read')
  runBg(home, ['kill', jobId, '--force'])
})

test('sendInput to a job that does not read leaves the event loop running', async (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '60'], ['--stdin', 'pipe'])
  t.after(() => killPid(pid))
  process.env.PROC_MANAGER_HOME = home
  // More than the pipe holds (64 KiB): the send waits 5 s for a read that never comes.
  let ticks = 0
  const timer = setInterval(() => ticks++, 50)
  const started = Date.now()
  const outcome = await (async () => pm.sendInput(jobId, 'y'.repeat(100_000)))().then((v) => v, (e) => e)
  clearInterval(timer)
  const took = Date.now() - started
  assert.match(String(outcome?.message), /bytes sent to its stdin: the job did not read its stdin for 5s/)
  assert.ok(took >= 4_500, `it waited for the job to read (${took} ms)`)
  assert.ok(ticks >= 10, `a 50 ms timer fired ${ticks} times during a ${took} ms sendInput`)
})

test('sendInput calls not awaited are written in call order, one at a time, and an eof send closes stdin after the text before it', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const { jobId, pid } = pm.runBackground('cat', { stdin: 'pipe' })
  t.after(() => killPid(pid))
  // Every 30th line is longer than PIPE_BUF (4 KiB), which one write(2) no longer keeps whole.
  const expected = Array.from({ length: 300 }, (_, i) => (i % 30 === 29 ? `${i}:${String(i % 10).repeat(20_000)}` : `line ${i}`))
  const sends = expected.map((line) => pm.sendInput(jobId, line))
  sends.push(pm.sendInput(jobId, 'last'), pm.sendInput(jobId, '', { eof: true, newline: false }))
  const results = await Promise.all(sends)
  assert.equal(results.at(-1).closed, true)
  const ended = await pm.waitJob(jobId, { timeoutMs: 30_000 })
  assert.equal(ended.status, 'success', 'cat read end-of-file and ended')
  const got = fs.readFileSync(pm.checkJob(jobId).logPath, 'utf8').split('\n')
  assert.equal(got.pop(), '', 'the log ends with a newline')
  const misplaced = got.filter((line, i) => line !== [...expected, 'last'][i]).length
  assert.equal(misplaced, 0, `${misplaced} of ${got.length} lines out of place (first: ${got.findIndex((line, i) => line !== [...expected, 'last'][i])})`)
  assert.equal(got.length, 301)
})

test('a sendInput that fails does not hold up the next one to the same job, and one to a job that does not read does not hold up another job', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const stuck = pm.runBackground('sleep 60', { stdin: 'pipe' })
  const reader = pm.runBackground('read x; echo got:$x', { stdin: 'pipe' })
  t.after(() => [stuck, reader].forEach((job) => killPid(job.pid)))
  const refused = pm.sendInput(reader.jobId, 'x'.repeat(2 * 1024 * 1024)).then((v) => v, (e) => e)
  const after = pm.sendInput(reader.jobId, 'after-refusal')
  assert.match(String((await refused).message), /too much input for one send/)
  assert.equal((await after).bytes, 14)
  assert.equal((await pm.waitJob(reader.jobId, { timeoutMs: 30_000 })).status, 'success')
  assert.deepEqual(pm.checkJob(reader.jobId).tail, ['got:after-refusal'])
  // More than the pipe holds: this send waits 5 s for a read that never comes.
  let stuckSettled = false
  const waiting = pm.sendInput(stuck.jobId, 'y'.repeat(100_000)).then((v) => v, (e) => e).finally(() => { stuckSettled = true })
  const other = pm.runBackground('read x; echo got:$x', { stdin: 'pipe' })
  t.after(() => killPid(other.pid))
  const started = Date.now()
  await pm.sendInput(other.jobId, 'meanwhile')
  const took = Date.now() - started
  assert.equal(stuckSettled, false, 'the stuck send is still waiting')
  assert.ok(took < 2_000, `a send to another job took ${took} ms while one to a job that does not read waited`)
  assert.match(String((await waiting).message), /did not read its stdin for 5s/)
})

test('MCP: the server answers another tool call while a control_job send to a job that does not read waits', async (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '60'], ['--stdin', 'pipe'])
  t.after(() => killPid(pid))
  const client = await connectMcp(t, home)
  const call = (name, args) => client.callTool({ name, arguments: args })
  let sendSettled = false
  const sending = call('control_job', { jobId, action: 'send', text: 'z'.repeat(100_000) }).then((r) => { sendSettled = true; return r })
  await new Promise((resolve) => setTimeout(resolve, 200)) // the send is under way
  const listStarted = Date.now()
  const listed = await call('list_jobs', {})
  const listTook = Date.now() - listStarted
  assert.ok(!listed.isError, JSON.stringify(listed))
  assert.equal(sendSettled, false, `list_jobs answered only after the send (${listTook} ms)`)
  assert.ok(listTook < 2_000, `list_jobs took ${listTook} ms while a send waited`)
  const sent = await sending
  assert.equal(sent.isError, true)
  assert.match(sent.content[0].text, /did not read its stdin for 5s/)
})

test('MCP: control_job sends made at once are written in the order they were made', async (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['cat'], ['--stdin', 'pipe'])
  t.after(() => killPid(pid))
  const client = await connectMcp(t, home)
  const expected = Array.from({ length: 100 }, (_, i) => (i % 20 === 19 ? `${i}:${'m'.repeat(20_000)}` : `line ${i}`))
  const sent = await Promise.all([
    ...expected.map((text) => client.callTool({ name: 'control_job', arguments: { jobId, action: 'send', text } })),
    client.callTool({ name: 'control_job', arguments: { jobId, action: 'send', text: '', newline: false, eof: true } }),
  ])
  assert.deepEqual(sent.filter((r) => r.isError), [])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '30s']).code, 0)
  const got = fs.readFileSync(checkJson(home, jobId).logPath, 'utf8').split('\n').slice(0, -1)
  const misplaced = got.filter((line, i) => line !== expected[i]).length
  assert.equal(misplaced, 0, `${misplaced} of ${got.length} lines out of place`)
  assert.equal(got.length, expected.length)
})

test('sendInput is a named export of the ESM entry, as the other functions are', async () => {
  const esm = await import('../index.js')
  assert.equal(typeof esm.sendInput, 'function')
  assert.equal(esm.sendInput, pm.sendInput)
})

test('a restarted server is ready again only when its new run says so: readyAt is watched afresh each run', async (t) => {
  const { home } = makeHome(t)
  const dir = tempDir(t)
  t.after(() => lines(path.join(dir, 'pids')).forEach((p) => killPid(Number(p))))
  // Run 1 is ready at once, then crashes after 300 ms; run 2 says ready only
  // after 400 ms, so a readyAt carried over from run 1 would show meanwhile.
  const job = ['sh', '-c',
    `n=$(wc -l < ${dir}/runs); n=$((n+1)); echo $n >> ${dir}/runs; echo $$ >> ${dir}/pids; ` +
    `if [ $n -le 1 ]; then echo ready; sleep 0.3; exit 1; fi; sleep 0.4; echo ready; exec sleep 600`]
  const started = startJob(home, job, ['--restart', 'on-failure', '--restart-delay', '100ms', '--ready-log', '^ready$'])
  const first = await waitFor(() => { const j = checkJson(home, started.jobId); return j.readyAt && j }, { what: 'run 1 ready' })
  assert.equal(first.restarts ?? 0, 0)
  // Between the restart and run 2's ready line: not ready.
  const between = await waitFor(() => { const j = checkJson(home, started.jobId); return j.restarts === 1 && j }, { what: 'the restart' })
  if (lines(path.join(dir, 'runs')).length === 2 && between.readyAt) {
    assert.ok(between.readyAt > between.lastRestartAt, `readyAt ${between.readyAt} carried over from run 1 (restart at ${between.lastRestartAt})`)
  }
  const again = await waitFor(() => { const j = checkJson(home, started.jobId); return j.readyAt && j.readyAt > j.lastRestartAt && j }, { what: 'run 2 ready', timeout: 10_000 })
  assert.equal(again.status, 'running')
  const w = runBg(home, ['wait', started.jobId, '--ready', '--timeout', '5s'])
  assert.equal(w.code, 0, w.stdout + w.stderr)
  runBg(home, ['kill', started.jobId])
})
