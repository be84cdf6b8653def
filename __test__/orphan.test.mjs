// A supervisor that dies (SIGKILL, OOM killer) must not take its job with it:
// the job runs on, orphaned and killable, and what it writes meanwhile reaches
// its log once a watcher has re-attached to the job's output pipe.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { makeHome, runBg, startJob, readRegistry, checkJson, waitFor, isAlive, processStart, killPid } from './helpers.mjs'

/**
 * A job that prints `tick N` every 50 ms and keeps N in `count` beside it, so
 * the test knows what it wrote without reading the log; once `stop` appears
 * it runs `end` (by default: prints `bye` and exits 3).
 */
function startTicker(t, home, end = 'echo bye; exit 3') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-ticker-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const script = `i=0; while [ ! -e stop ]; do i=$((i+1)); echo "tick $i"; echo $i > count.tmp && mv count.tmp count; sleep 0.05; done; ${end}`
  const job = startJob(home, ['sh', '-c', script], ['--cwd', dir])
  const count = () => {
    try {
      return Number(fs.readFileSync(path.join(dir, 'count'), 'utf8'))
    } catch {
      return 0
    }
  }
  return { ...job, dir, count, start: processStart(job.pid) }
}

/** SIGKILLs the job's supervisor; resolves with the job's tick count once it is gone. */
async function killSupervisor(home, job) {
  await waitFor(() => job.count() >= 2, { what: 'the job to tick' })
  const supervisor = readRegistry(home).find((j) => j.id === job.jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  return job.count()
}

/** The job went on writing: `more` ticks after `since`, or it died trying. */
async function ticksAfter(job, since, more) {
  await waitFor(() => job.count() >= since + more || !isAlive(job.pid), { what: `${more} more ticks or the job's death` })
  assert.ok(isAlive(job.pid), `the job (pid ${job.pid}) died when it wrote after its supervisor was killed`)
  assert.equal(processStart(job.pid), job.start, 'the same process, not a reused pid')
}

/** The `tick N` numbers in the log, in order. */
function loggedTicks(home, jobId) {
  const r = runBg(home, ['logs', jobId, '--all'])
  assert.equal(r.code, 0, r.stderr)
  return [...r.stdout.matchAll(/^tick (\d+)$/gm)].map((m) => Number(m[1]))
}

test('a SIGKILLed supervisor leaves its job running: orphaned, its later output logged by the watcher, then killable', async (t) => {
  const { home } = makeHome(t)
  const job = startTicker(t, home)
  t.after(() => killPid(job.pid))
  const atDeath = await killSupervisor(home, job)
  // Nothing reads the output pipe now until a watcher attaches: these ticks wait in it.
  await ticksAfter(job, atDeath, 5)
  const check = checkJson(home, job.jobId)
  assert.equal(check.status, 'orphaned')
  assert.equal(check.pid, job.pid)
  // The watcher started by that look takes up what waited in the pipe, and what follows.
  const target = job.count() + 3
  const ticks = await waitFor(() => {
    const ticks = loggedTicks(home, job.jobId)
    return ticks.includes(target) ? ticks : null
  }, { what: `tick ${target} in the log` })
  // `count` said atDeath after the death, so tick atDeath + 2 and every later one
  // were printed after it (atDeath + 1 may have been read by the supervisor as it died).
  const after = ticks.filter((n) => n >= atDeath + 2)
  assert.deepEqual(after, after.map((_, i) => atDeath + 2 + i), 'every tick written after the death, in order, none lost')
  assert.ok(isAlive(job.pid) && processStart(job.pid) === job.start)

  const kill = runBg(home, ['kill', job.jobId, '--grace', '2s'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.match(kill.stdout, /killed orphaned job/)
  await waitFor(() => !isAlive(job.pid), { what: 'the job to die' })
  assert.equal(checkJson(home, job.jobId).status, 'killed')
})

test('a job that ends on its own after its supervisor died reads as lost for that reason, with its last output', async (t) => {
  const { home } = makeHome(t)
  // After `stop` it waits on the FIFO `go`, then prints `bye` and exits at once:
  // before its newly started watcher can have opened the output pipe itself.
  const job = startTicker(t, home, 'touch waiting; read x < go; echo bye; exit 3')
  t.after(() => killPid(job.pid))
  assert.equal(spawnSync('mkfifo', [path.join(job.dir, 'go')]).status, 0)
  const atDeath = await killSupervisor(home, job)
  await ticksAfter(job, atDeath, 3)
  fs.writeFileSync(path.join(job.dir, 'stop'), '')
  await waitFor(() => fs.existsSync(path.join(job.dir, 'waiting')), { what: 'the job to leave its loop' })
  // The first look finds it orphaned and starts the watcher.
  assert.equal(checkJson(home, job.jobId).status, 'orphaned')
  fs.writeFileSync(path.join(job.dir, 'go'), 'go\n')
  const ended = await waitFor(() => {
    const c = checkJson(home, job.jobId)
    return c.status !== 'orphaned' ? c : null
  }, { what: 'the orphan\'s end to be recorded' })
  assert.equal(ended.status, 'lost')
  assert.equal(ended.exitCode, undefined)
  assert.equal(ended.signal, undefined)
  assert.match(ended.error, /^its supervisor \(pid \d+\) died; the job ran on without it and ended; its exit status is unknown/)
  assert.doesNotMatch(ended.error, /could not start|no exit status was recorded/)
  await waitFor(() => checkJson(home, job.jobId).tail.at(-1) === 'bye', { what: 'its last line, written with no supervisor, in the log' })
  const text = runBg(home, ['check', job.jobId]).stdout
  assert.match(text, /error: its supervisor \(pid \d+\) died; the job ran on without it and ended; its exit status is unknown/)
  assert.doesNotMatch(text, /could not start/, 'a job that ran is never said to have not started')
})

/** Pids of the `run-bg __watch <jobId>` processes. */
function watchers(jobId) {
  return fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(1, 3).join(' ') === `__watch ${jobId}`
    } catch {
      return false
    }
  })
}

test('an orphan keeps up to a pipe\'s worth (1 MiB) of output with no reader, and a watcher killed in turn is replaced', async (t) => {
  const { home, extraPids } = makeHome(t)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-burst-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  // On `go`: 900,000 bytes at once, then `written`; on `more`: one line; on `stop`: the end.
  const script = 'until [ -e go ]; do sleep 0.02; done; head -c 900000 /dev/zero | tr "\\0" x; echo; touch written; ' +
    'until [ -e more ]; do sleep 0.02; done; echo after-the-second-watcher; until [ -e stop ]; do sleep 0.02; done'
  const job = startJob(home, ['sh', '-c', script], ['--cwd', dir])
  t.after(() => killPid(job.pid))
  const supervisor = readRegistry(home).find((j) => j.id === job.jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  fs.writeFileSync(path.join(dir, 'go'), '')
  // Nobody reads the pipe: the burst must fit in it, neither killing nor blocking the writer.
  await waitFor(() => fs.existsSync(path.join(dir, 'written')) || !isAlive(job.pid), { what: 'the burst to be written' })
  assert.ok(isAlive(job.pid), 'the job died writing with no supervisor')
  assert.equal(checkJson(home, job.jobId).status, 'orphaned')
  const logged = () => runBg(home, ['logs', job.jobId, '--all']).stdout
  await waitFor(() => logged().includes('x'.repeat(900000)), { what: 'the burst in the log' })

  const first = await waitFor(() => watchers(job.jobId).at(0), { what: 'the watcher' })
  extraPids.push(first)
  process.kill(first, 'SIGKILL')
  await waitFor(() => !isAlive(first), { what: 'the watcher\'s death' })
  fs.writeFileSync(path.join(dir, 'more'), '')
  assert.equal(checkJson(home, job.jobId).status, 'orphaned')
  await waitFor(() => logged().includes('after-the-second-watcher\n'), { what: 'output taken up by a new watcher' })
  assert.ok(!watchers(job.jobId).includes(first))
  assert.ok(fs.existsSync(path.join(home, 'pipes', `${job.jobId}.output`)), 'the pipe is there while the job runs')
  fs.writeFileSync(path.join(dir, 'stop'), '')
  const ended = await waitFor(() => {
    const c = checkJson(home, job.jobId)
    return c.status !== 'orphaned' ? c : null
  }, { what: 'the end' })
  assert.equal(ended.status, 'lost')
  await waitFor(() => !fs.existsSync(path.join(home, 'pipes', `${job.jobId}.output`)), { what: 'the pipe to go with the job\'s last process' })
})

test('a supervisor SIGKILLed right after the CLI start answered: no start record made yet, and the log read and taken up with every position right', async (t) => {
  // Files of 4,096 bytes, two kept: the watcher rotates and drops while the job writes.
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 2 } })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-lazy-record-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const line = (n) => `line ${String(n).padStart(5, '0')}`
  const BYTES = line(0).length + 1
  const COUNT = 2000
  // Two lines, then (once `go` appears) COUNT - 2 more, then it waits for `stop`.
  const script = [
    `printf '%s\\n' '${line(0)}' '${line(1)}'`,
    'while [ ! -e go ]; do sleep 0.02; done',
    `n=2; while [ $n -lt ${COUNT} ]; do printf 'line %05d\\n' $n; n=$((n+1)); done`,
    'while [ ! -e stop ]; do sleep 0.05; done',
  ].join('\n')
  const job = startJob(home, ['sh', '-c', script], ['--cwd', dir])
  t.after(() => killPid(job.pid))
  const supervisor = readRegistry(home).find((j) => j.id === job.jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  const jobDir = path.join(home, 'jobs', job.jobId)
  // The record is made at the first rotation only: a new log without one starts at 0.
  assert.equal(fs.existsSync(path.join(jobDir, '.output.log.start')), false, 'no start record before any rotation')

  const read = () => {
    const r = runBg(home, ['logs', job.jobId, '--since', '0', '-n', String(COUNT), '--json'])
    assert.equal(r.code, 0, r.stderr)
    return JSON.parse(r.stdout)
  }
  // A reader of the log as the killed supervisor left it (the lines may still wait in the pipe).
  const early = read()
  assert.ok(early.lines.every((l, i) => l === line(i)), JSON.stringify(early))
  assert.equal(early.cursor, early.lines.length * BYTES)
  // The look finds it orphaned and starts a watcher, which rotates from here on.
  assert.equal(checkJson(home, job.jobId).status, 'orphaned')
  fs.writeFileSync(path.join(dir, 'go'), '')
  const last = await waitFor(() => {
    const r = read()
    return r.lines.at(-1) === line(COUNT - 1) ? r : null
  }, { what: 'the last line in the log' })
  assert.ok(fs.existsSync(path.join(jobDir, '.output.log.start')), 'the first rotation made the record')
  // Positions count everything written: the cursor is the whole output, and
  // what was dropped plus what is kept is all of it, the kept lines the last ones in order.
  assert.equal(last.cursor, COUNT * BYTES)
  assert.ok(last.rotatedAwayBytes > 0, 'files were dropped')
  assert.equal(last.rotatedAwayBytes + last.lines.length * BYTES, COUNT * BYTES)
  const first = COUNT - last.lines.length
  assert.deepEqual(last.lines, Array.from({ length: last.lines.length }, (_, i) => line(first + i)))
  // Read on from a cursor taken before the rotations: said rotated away, never repeated.
  const since = runBg(home, ['logs', job.jobId, '--since', String(early.cursor), '-n', String(COUNT), '--json'])
  assert.equal(since.code, 0, since.stderr)
  const after = JSON.parse(since.stdout)
  assert.equal(after.cursor, COUNT * BYTES)
  assert.equal(after.rotatedAwayBytes + after.lines.length * BYTES + early.cursor, COUNT * BYTES)
  fs.writeFileSync(path.join(dir, 'stop'), '')
})
