// The JS API of the built addon, in this process and in Node processes that exit.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { pm, root, makeHome, runNode, waitFor, isAlive, readRegistry, RUN_BG } from './helpers.mjs'

function useHome(t, config) {
  const fixture = makeHome(t, config)
  process.env.PROC_MANAGER_HOME = fixture.home
  return fixture
}

test('runBackground returns once the main process runs; checkJob and waitJob see it end', async (t) => {
  useHome(t)
  const job = pm.runBackground('echo "out $((1+2))"; echo err >&2; sleep 0.3; exit 5', { label: 'api job' })
  assert.match(job.jobId, /^api-job-[0-9a-f]{6}$/)
  assert.equal(job.label, 'api job')
  assert.ok(isAlive(job.pid), 'the main process is running when the call returns')
  assert.ok(fs.existsSync(job.logPath))
  const running = pm.checkJob(job.jobId)
  assert.equal(running.status, 'running')
  assert.equal(running.pid, job.pid)
  const result = await pm.waitJob(job.jobId)
  assert.deepEqual(
    { status: result.status, exitCode: result.exitCode, timedOut: result.timedOut, shell: result.shellExitCode },
    { status: 'failed', exitCode: 5, timedOut: false, shell: 5 },
  )
  const done = pm.checkJob(job.jobId, { lines: 5 })
  assert.deepEqual(done.tail, ['out 3', 'err'])
  assert.equal(done.command, 'echo "out $((1+2))"; echo err >&2; sleep 0.3; exit 5')
  assert.ok(done.durationMs >= 300)
  assert.deepEqual(pm.checkJob(job.jobId, { grep: '^err$' }).tail, ['err'])
})

test('a job handed its caller\'s whole environment, cookie included, carries only its own cookie', async (t) => {
  useHome(t)
  // A harness running inside another job passes process.env through.
  const job = pm.runBackground('env', { env: { ...process.env, PROC_MANAGER_JOB: 'outer-job-1', EXTRA: 'kept' } })
  await pm.waitJob(job.jobId)
  const env = pm.checkJob(job.jobId, { lines: 1000 }).tail
  assert.deepEqual(env.filter((line) => line.startsWith('PROC_MANAGER_JOB=')), [`PROC_MANAGER_JOB=${job.jobId}`])
  assert.ok(env.includes('EXTRA=kept'))
})

test('args runs a program without a shell', async (t) => {
  useHome(t)
  const job = pm.runBackground('printf', { args: ['%s|', 'a b', '$HOME'] })
  await pm.waitJob(job.jobId)
  assert.deepEqual(pm.checkJob(job.jobId).tail, ['a b|$HOME|'])
  assert.equal(pm.checkJob(job.jobId).label, 'printf')
})

test('a Node caller that exits while its job runs: the job goes on and its end is recorded', async (t) => {
  const { home } = useHome(t)
  const script = `
    import { createRequire } from 'node:module'
    const pm = createRequire(${JSON.stringify(root + '/')})('./')
    const job = pm.runBackground('sleep 3; echo finished after caller left', { label: 'orphan-proof' })
    console.log(JSON.stringify(job))
  `
  const caller = await runNode(script, { PROC_MANAGER_HOME: home })
  assert.equal(caller.code, 0)
  assert.ok(!isAlive(caller.pid), 'the caller has exited')
  const job = JSON.parse(caller.stdout)
  assert.ok(isAlive(job.pid), 'the job still runs after its caller exited')
  assert.equal(pm.checkJob(job.jobId).status, 'running')
  const result = await pm.waitJob(job.jobId, { timeoutMs: 20_000 })
  assert.equal(result.status, 'success')
  assert.deepEqual(pm.checkJob(job.jobId).tail, ['finished after caller left'])
  // The supervisor double-forked: the caller never had a zombie to reap, and it is gone too.
  const entry = readRegistry(home).find((j) => j.id === job.jobId)
  await waitFor(() => !isAlive(entry.supervisor.pid), { what: 'supervisor exit' })
})

test('listJobs filters by status and owner; killJob and killAll by owner', async (t) => {
  useHome(t)
  const mine = pm.runBackground('sleep 30', { owner: 'alice' })
  const theirs = pm.runBackground('sleep 30', { owner: 'bob' })
  const finished = pm.runBackground('true', { owner: 'alice' })
  await pm.waitJob(finished.jobId)
  assert.deepEqual(pm.listJobs({ owner: 'alice', status: 'running' }).map((j) => j.jobId), [mine.jobId])
  assert.deepEqual(pm.listJobs({ owner: 'alice' }).map((j) => j.jobId).sort(), [mine.jobId, finished.jobId].sort())
  const killed = await pm.killAll({ owner: 'alice', graceMs: 2000 })
  assert.deepEqual(killed.map((k) => [k.jobId, k.status]), [[mine.jobId, 'killed']])
  assert.ok(!isAlive(mine.pid))
  assert.ok(isAlive(theirs.pid), "bob's job is left alone")
  const one = await pm.killJob(theirs.jobId, { force: true })
  assert.equal(one.status, 'killed')
  assert.equal(one.signalled, true)
  assert.equal(pm.checkJob(theirs.jobId).signal, 'SIGKILL')
  const again = await pm.killJob(theirs.jobId)
  assert.equal(again.signalled, false)
})

test('killJob and killAll work with a broken config.json (defaults); other calls refuse it', async (t) => {
  const { home } = useHome(t)
  const one = pm.runBackground('sleep', { args: ['600'] })
  const two = pm.runBackground('sleep', { args: ['600'] })
  fs.writeFileSync(path.join(home, 'config.json'), '{ not json')
  assert.throws(() => pm.listJobs(), /config\.json: not valid JSON/)
  assert.equal((await pm.killJob(one.jobId)).status, 'killed')
  assert.deepEqual((await pm.killAll()).map((r) => [r.jobId, r.status]), [[two.jobId, 'killed']])
  assert.ok(!isAlive(one.pid) && !isAlive(two.pid))
})

test('killAll of a job that ends on its own as the kill begins does not say it killed it', async (t) => {
  // A job listed running whose main process exits before its supervisor
  // answers keeps its own outcome: it read "killed x (success): 0
  // process(es) signalled", signalled true, and MCP listed it as killed.
  useHome(t)
  let raced = 0
  for (let i = 0; i < 8; i++) {
    const job = pm.runBackground('true', { owner: `race-${i}` })
    for (const outcome of await pm.killAll({ owner: `race-${i}` })) {
      assert.equal(outcome.jobId, job.jobId)
      if (outcome.status === 'killed') continue
      raced++
      assert.equal(outcome.signalled, false, outcome.message)
      // Its supervisor still there (asked), or gone already (then it is simply not running).
      assert.match(outcome.message, new RegExp(`^${job.jobId} (ended on its own \\(success\\) before the kill; nothing was signalled|is not running \\(success\\); nothing to kill)$`))
    }
  }
  t.diagnostic(`${raced} of 8 kills met a job that had ended on its own`)
})

test('waitJob with timeoutMs resolves timedOut while the job runs on', async (t) => {
  useHome(t)
  const job = pm.runBackground('sleep 30')
  const result = await pm.waitJob(job.jobId, { timeoutMs: 100 })
  assert.equal(result.timedOut, true)
  assert.equal(result.shellExitCode, 124, 'as `run-bg wait` exits on its own timeout')
  assert.equal(result.status, 'running')
  assert.ok(isAlive(job.pid))
})

test('timeoutMs ends the job as timeout', async (t) => {
  useHome(t)
  const job = pm.runBackground('sleep 30', { timeoutMs: 200 })
  const result = await pm.waitJob(job.jobId, { timeoutMs: 20_000 })
  assert.equal(result.status, 'timeout')
  assert.ok(!isAlive(job.pid))
})

test('misuse throws an Error that says what is wrong and what is accepted, its code the kind of failure', async (t) => {
  const { home } = useHome(t)
  // `code` tells the kinds apart without parsing the message; `jobId` names the job a failure is about.
  const failure = (re, code, jobId) => (e) => e instanceof Error && re.test(e.message) && e.code === code && e.jobId === jobId
  const throwsWith = (fn, re, code, jobId) => assert.throws(fn, failure(re, code, jobId))
  throwsWith(() => pm.checkJob('../../etc'), /invalid job id `\.\.\/\.\.\/etc`: a job id is 1 to 64 characters/, 'ERR_USAGE')
  throwsWith(() => pm.checkJob(''), /invalid job id/, 'ERR_USAGE')
  throwsWith(() => pm.checkJob('z'.repeat(200)), /invalid job id/, 'ERR_USAGE')
  // What to do next is said as the call, not as the CLI command.
  throwsWith(() => pm.checkJob('unknown-1'), /^no job with id `unknown-1` \(call `listJobs\(\{ all: true \}\)` to see known jobs\)$/, 'ERR_UNKNOWN_JOB', 'unknown-1')
  // Options are named as the caller gave them, not by the CLI's flags.
  throwsWith(() => pm.checkJob('unknown-1', { grep: '[' }), /^bad grep pattern `\[`/, 'ERR_USAGE')
  throwsWith(() => pm.checkJob('unknown-1', { grep: 'x', errors: true }), /^give either grep or errors, not both$/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground('true', { afterAny: true }), /^afterAny needs the jobs to run after: give after <id>/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground('true', { readyUrl: 'https://127.0.0.1:1/' }), /probe the plain port with readyPort instead/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground('', { args: ['x'] }), /^empty program name: give the program to run as command$/, 'ERR_USAGE')
  throwsWith(() => pm.checkJob(5), /bad jobId: 5; give a string/, 'ERR_USAGE')
  throwsWith(() => pm.checkJob('unknown-1', { lnes: 3 }), /unknown option `lnes` for checkJob; accepted: lines/, 'ERR_USAGE')
  throwsWith(() => pm.readLog('unknown-1'), /no job with id `unknown-1`/, 'ERR_UNKNOWN_JOB', 'unknown-1')
  throwsWith(() => pm.followLog('unknown-1'), /no job with id `unknown-1`/, 'ERR_UNKNOWN_JOB', 'unknown-1')
  throwsWith(() => pm.listJobs({ status: 'finished' }), /bad status `finished`: expected one of running/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground(''), /empty command/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground('true', { timeoutMs: -5 }), /bad timeoutMs: -5/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground('true', { env: { 'A=B': 'x' } }), /bad environment variable name `A=B`/, 'ERR_USAGE')
  // A start that fails is recorded as a failed job: `jobId` names it.
  const startFailure = (fn, re) => {
    let thrown
    assert.throws(fn, (e) => (thrown = e) instanceof Error && re.test(e.message) && e.code === 'ERR_START_FAILED')
    assert.equal(thrown.jobId, thrown.message.match(/\(recorded as failed job (\S+)\)$/)?.[1], thrown.message)
    assert.equal(pm.checkJob(thrown.jobId).status, 'failed')
  }
  startFailure(() => pm.runBackground('no-such-program-xyz', { args: [] }), /command not found in PATH \(recorded as failed job no-such-program-xyz-/)
  startFailure(() => pm.runBackground('true', { cwd: '/no/such/dir' }), /working directory `\/no\/such\/dir` does not exist/)
  throwsWith(() => pm.runBackground('true', { timeoutMs: 0 }), /bad timeoutMs: 0; give a number of milliseconds >= 1/, 'ERR_USAGE')
  throwsWith(() => pm.checkJob('unknown-1', { lines: -1 }), /bad lines: -1; give a whole number of lines >= 0/, 'ERR_USAGE')
  throwsWith(() => new pm.ResourceTracker({ enabld: false }), /unknown option `enabld` for ResourceTracker/, 'ERR_USAGE')
  // An empty cwd names no directory (it ran the job in this one); line numbers start at 1, both messages say so.
  throwsWith(() => pm.runBackground('pwd', { cwd: '' }), /^bad cwd: ""; give a path that is not empty$/, 'ERR_USAGE')
  throwsWith(() => pm.readLog('unknown-1', { fromLine: -1 }), /^bad fromLine: -1; give a whole line number >= 1 \(1 = the oldest line kept\)$/, 'ERR_USAGE')
  throwsWith(() => pm.readLog('unknown-1', { fromLine: 0 }), /^bad fromLine: 0; give a whole line number >= 1/, 'ERR_USAGE')
  startFailure(() => pm.runBackground(os.tmpdir(), { args: [] }), /permission denied \(a directory, or a file without execute permission\)/)
  // What a call does not take is refused, not dropped (napi ignores extra arguments).
  throwsWith(() => pm.reconcile({ x: 1 }), /^bad argument to reconcile: an object; it takes no arguments$/, 'ERR_USAGE')
  throwsWith(() => pm.snapshot({}), /^bad argument to snapshot: an object; it takes no arguments$/, 'ERR_USAGE')
  assert.ok(pm.reconcile(undefined) && pm.snapshot(null), 'undefined and null are not given')
  await assert.rejects(pm.pauseJob('unknown-1', { force: true }), failure(/^bad argument to pauseJob: an object; it takes only jobId$/, 'ERR_USAGE'))
  await assert.rejects(pm.resumeJob('unknown-1', 5), failure(/^bad argument to resumeJob: 5; it takes only jobId$/, 'ERR_USAGE'))
  throwsWith(() => pm.jobEvents({ bogus: 1 }), /^unknown option `bogus` for jobEvents/, 'ERR_USAGE')
  // Past the largest value a bound is named (it read "give a whole number of lines >= 0" of 2^53).
  throwsWith(() => pm.checkJob('unknown-1', { lines: 2 ** 53 }), /^bad lines: 9007199254740992; give a whole number of lines >= 0, at most 9007199254740991$/, 'ERR_USAGE')
  throwsWith(() => pm.runBackground('true', { queue: 'q', priority: 2 ** 60 }), /, at most 9007199254740991$/, 'ERR_USAGE')
  // And past the options, for every function that takes some.
  for (const [name, call] of [
    ['checkJob', () => pm.checkJob('unknown-1', {}, 5)],
    ['checkJobText', () => pm.checkJobText('unknown-1', {}, 5)],
    ['listJobs', () => pm.listJobs({}, 1)],
    ['listJobsText', () => pm.listJobsText({}, 1)],
    ['readLog', () => pm.readLog('unknown-1', {}, 3)],
    ['summary', () => pm.summary({}, 2)],
    ['runBackground', () => pm.runBackground('true', {}, 3)],
    ['rerunJob', () => pm.rerunJob('unknown-1', {}, 3)],
    ['pruneJobs', () => pm.pruneJobs({}, 3)],
    ['watchJobs', () => pm.watchJobs({}, 3)],
    ['followLog', () => pm.followLog('unknown-1', {}, 3)],
    ['followLogs', () => pm.followLogs({}, 3)],
    ['jobEvents', () => pm.jobEvents({}, 3)],
  ]) throwsWith(call, new RegExp(`^bad argument to ${name}: \\d; it takes `), 'ERR_USAGE')
  for (const [name, call] of [
    ['killJob', () => pm.killJob('unknown-1', {}, 3)],
    ['killAll', () => pm.killAll({}, 3)],
    ['waitJob', () => pm.waitJob('unknown-1', {}, 3)],
    ['runYield', () => pm.runYield('true', { yieldMs: 1 }, 3)],
    ['cleanupOrphans', () => pm.cleanupOrphans({}, 3)],
    ['sendInput', () => pm.sendInput('unknown-1', 'x', {}, 3)],
    ['up', () => pm.up('run-bg.json', {}, 3)],
    ['down', () => pm.down('run-bg.json', {}, 3)],
  ]) await assert.rejects(call(), failure(new RegExp(`^bad argument to ${name}: 3; it takes `), 'ERR_USAGE'), name)
  // Promise-returning calls reject, as async functions do, instead of throwing.
  await assert.rejects(pm.killJob('..'), failure(/invalid job id/, 'ERR_USAGE'))
  await assert.rejects(pm.killJob('unknown-1'), failure(/no job with id `unknown-1`/, 'ERR_UNKNOWN_JOB', 'unknown-1'))
  await assert.rejects(pm.waitJob('a/b'), failure(/invalid job id/, 'ERR_USAGE'))
  await assert.rejects(pm.waitJob('unknown-1'), failure(/no job with id `unknown-1`/, 'ERR_UNKNOWN_JOB', 'unknown-1'))
  await assert.rejects(pm.killAll({ graceMs: -1 }), failure(/bad graceMs: -1/, 'ERR_USAGE'))
  await assert.rejects(pm.runYield('true', { yieldMs: -1 }), failure(/bad yieldMs: -1/, 'ERR_USAGE'))
  assert.deepEqual(readRegistry(home).map((j) => j.status), ['failed', 'failed', 'failed'])
})

test('reconcile marks a job whose supervisor was SIGKILLed: orphaned while it runs, lost once gone', async (t) => {
  const { home } = useHome(t)
  const job = pm.runBackground('sleep 30')
  const entry = readRegistry(home).find((j) => j.id === job.jobId)
  process.kill(entry.supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(entry.supervisor.pid), { what: 'supervisor death' })
  const first = pm.reconcile()
  assert.deepEqual(first.orphaned.map((j) => j.jobId), [job.jobId])
  assert.equal(pm.checkJob(job.jobId).status, 'orphaned')
  // kill works on an orphaned job, identity-checked.
  const killed = await pm.killJob(job.jobId, { graceMs: 1000 })
  assert.equal(killed.status, 'killed')
  assert.ok(!isAlive(job.pid))

  // No shell: the main process is the only process of the job.
  const second = pm.runBackground('sleep', { args: ['30'] })
  const secondEntry = readRegistry(home).find((j) => j.id === second.jobId)
  process.kill(secondEntry.supervisor.pid, 'SIGKILL')
  process.kill(second.pid, 'SIGKILL')
  await waitFor(() => !isAlive(second.pid) && !isAlive(secondEntry.supervisor.pid), { what: 'both gone' })
  const result = pm.reconcile()
  assert.deepEqual(result.lost.map((j) => j.jobId), [second.jobId])
  assert.equal(pm.checkJob(second.jobId).status, 'lost')
})

test('pruneJobs forgets finished jobs and deletes their logs, keeping running ones', async (t) => {
  useHome(t)
  const running = pm.runBackground('sleep 30')
  const done = pm.runBackground('true')
  await pm.waitJob(done.jobId)
  await waitFor(() => pm.pruneJobs().length === 1 || !fs.existsSync(path.dirname(done.logPath)), { what: 'prune' })
  assert.ok(!fs.existsSync(path.dirname(done.logPath)))
  assert.deepEqual(pm.listJobs({ all: true }).map((j) => j.jobId), [running.jobId])
})

test('cleanupOrphans lists, then kills, what an ended job left behind; checkJob shows it lingering', async (t) => {
  useHome(t)
  const job = pm.runBackground('setsid sleep 600 & echo done', { owner: 'tidy' })
  await pm.waitJob(job.jobId)
  const lingering = await waitFor(() => {
    const found = pm.checkJob(job.jobId).lingering
    return found.length === 1 ? found : null
  }, { what: 'the lingering daemon' })
  assert.equal(lingering[0].command, 'sleep 600')
  await assert.rejects(pm.cleanupOrphans({ mode: 'everything' }), /bad mode `everything`: expected 'list' or 'kill'/)
  const listed = await pm.cleanupOrphans({ mode: 'list', owner: 'tidy' })
  assert.deepEqual(listed.processes.map((p) => [p.jobId, p.pid, p.jobStatus]), [[job.jobId, lingering[0].pid, 'success']])
  assert.deepEqual((await pm.cleanupOrphans({ owner: 'someone-else' })).processes, [])
  assert.ok(isAlive(lingering[0].pid))
  const killed = await pm.cleanupOrphans({ mode: 'kill', owner: 'tidy', force: true })
  assert.deepEqual(killed.killed.map((p) => p.pid), [lingering[0].pid])
  assert.deepEqual(killed.failed, [])
  assert.ok(!isAlive(lingering[0].pid))
})

test('runBackground leaves no zombie in its long-lived caller: its supervisor is never the caller\'s child', async (t) => {
  const { home } = useHome(t)
  const job = pm.runBackground('exit 0')
  await waitFor(() => pm.checkJob(job.jobId).status === 'success', { what: 'the job to end' })
  const supervisor = readRegistry(home).find((j) => j.id === job.jobId).supervisor.pid
  /** [state, parent] from /proc/<pid>/stat; null once the pid is gone (reaped). */
  const stat = (pid) => {
    try {
      const raw = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = raw.slice(raw.lastIndexOf(')') + 2).split(' ')
      return [fields[0], Number(fields[1])]
    } catch {
      return null
    }
  }
  // Gone, or a zombie: a supervisor that stayed our child (as a CLI start's
  // does, which exits at once) would stay a zombie, as Node reaps no child it did not spawn.
  const end = await waitFor(() => {
    const s = stat(supervisor)
    return s === null || s[0] === 'Z' ? { s } : null
  }, { what: `supervisor ${supervisor} to exit` })
  // A zombie of another parent (init, about to reap it) is not ours to reap.
  assert.ok(end.s === null || end.s[1] !== process.pid, `supervisor ${supervisor} left as our zombie (we are ${process.pid})`)
})

/** [parent, process group, session] of a process, from its /proc/<pid>/stat text. */
function ids(stat) {
  const [, ppid, pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number)
  return { ppid, pgrp, session }
}

// The supervisor makes its own session after launching the job (setsid then
// no longer delays the job's start), but before its answer: whatever the
// caller or its terminal does to the caller's group or session once the
// start has returned never reaches the supervisor.
test('when a start returns, its supervisor and its job each lead a session of their own (CLI and Node host)', (t) => {
  const { home } = makeHome(t)
  // Read at once, in the process that started the job: the CLI's caller, and the Node host itself.
  const probe = `
    const fs = require('node:fs')
    const { spawnSync } = require('node:child_process')
    const pm = require(${JSON.stringify(root)})
    const stat = (pid) => fs.readFileSync('/proc/' + pid + '/stat', 'utf8')
    const parent = (raw) => Number(raw.slice(raw.lastIndexOf(')') + 2).split(' ')[1])
    const out = []
    const look = (via, pid) => { const job = stat(pid); const supervisor = parent(job); out.push({ via, pid, job, supervisor, supervisorStat: stat(supervisor) }) }
    for (let i = 0; i < 5; i++) {
      const r = spawnSync(${JSON.stringify(RUN_BG)}, ['--json', '--', 'sleep', '30'], { encoding: 'utf8' })
      look('cli', JSON.parse(r.stdout).pid)
      look('host', pm.runBackground('sleep 30').pid)
    }
    console.log(JSON.stringify({ session: Number(stat(process.pid).slice(stat(process.pid).lastIndexOf(')') + 2).split(' ')[3]), out }))`
  const r = spawnSync(process.execPath, ['-e', probe], { env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8', timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  const { session: callers, out } = JSON.parse(r.stdout)
  assert.equal(out.length, 10)
  for (const o of out) {
    const job = ids(o.job)
    const supervisor = ids(o.supervisorStat)
    const said = JSON.stringify({ via: o.via, job: o.pid, ...job, supervisor: o.supervisor, supervisorGroup: supervisor.pgrp, supervisorSession: supervisor.session })
    assert.equal(job.pgrp, o.pid, `the job leads its group: ${said}`)
    assert.equal(job.session, o.pid, `the job leads its session: ${said}`)
    assert.equal(supervisor.pgrp, o.supervisor, `the supervisor leads its group: ${said}`)
    assert.equal(supervisor.session, o.supervisor, `the supervisor leads its session: ${said}`)
    assert.notEqual(supervisor.session, callers, said)
  }
})
