// Safety under hostile records: a signal never reaches beyond the job.
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import fs from 'node:fs'
import { RUN_BG, root, makeHome, startJob, readRegistry, waitFor, processStart, runBg, checkJson, cookieProcesses } from './helpers.mjs'

/** Why a private pid namespace cannot be had here, or null when it can. */
function noPidNamespace() {
  const r = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'setsid', 'true'], { encoding: 'utf8' })
  if (r.error) return `unshare is not available (${r.error.message})`
  return r.status === 0 ? null : `unshare --pid --fork --mount-proc is not permitted here: ${r.stderr.trim()}`
}

test('a record naming pid 1 as main process or supervisor never makes kill signal beyond the job', async (t) => {
  const why = noPidNamespace()
  if (why) return t.skip(why)
  const { home } = makeHome(t)
  const addon = root
  // pid 1 of the namespace is the forging script itself: every process the
  // forged kill could reach is one of the test's.
  // setsid makes it the leader of group and session 1, as init is.
  const r = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'setsid', process.execPath,
    path.join(root, '__test__', 'fixtures', 'forged-pid1.mjs')], {
    env: { ...process.env, RUN_BG, HOME_DIR: home, ADDON: addon },
    encoding: 'utf8',
    timeout: 240_000,
  })
  assert.equal(r.status, 0, r.stderr)
  const results = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.ok(results.length >= 16, `every forged record was tried: ${results.length}`)
  const harmed = results.filter((x) => x.survived !== x.of || x.pid1Got.length > 0)
  assert.deepEqual(harmed, [], 'no process outside the job was signalled')
  for (const x of results.filter((x) => ['forged-main', 'forged-orphan', 'forged-supervisor'].includes(x.id))) {
    assert.equal(x.status, 'lost', `${x.id} after ${x.how} is recorded lost: ${JSON.stringify(x)}`)
    assert.match(x.error ?? '', /pid 1\b/, `${x.id}: the record says what was wrong`)
  }
})

test('a record naming pid 1 is shown lost for one reason, the corrupt record, not a supervisor gone early', async (t) => {
  const why = noPidNamespace()
  if (why) return t.skip(why)
  const { home } = makeHome(t)
  const r = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'setsid', process.execPath,
    path.join(root, '__test__', 'fixtures', 'forged-pid1-shown.mjs')], {
    env: { ...process.env, RUN_BG, HOME_DIR: home },
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.equal(r.status, 0, r.stderr)
  const results = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.equal(results.length, 9, JSON.stringify(results))
  for (const x of results) {
    assert.equal(x.status, 'lost', JSON.stringify(x))
    assert.match(x.error ?? '', /record is corrupt.*pid 1\b/, `the record says what was wrong: ${JSON.stringify(x)}`)
    const headline = x.said.split('\n').find((line) => line.includes(x.id)) ?? ''
    assert.match(headline, /lost: the record is corrupt/, `${x.how} gives the record's reason: ${JSON.stringify(x)}`)
    assert.doesNotMatch(x.said, /before its main process was recorded|supervisor .*is gone/, `${x.how} gives no other reason: ${JSON.stringify(x)}`)
  }
})

test('a pid reused within one clock tick is not taken for the job: kill leaves the newcomer alone', async (t) => {
  const why = noPidNamespace()
  if (why) return t.skip(why)
  if (process.getuid() !== 0) return t.skip('choosing the next pid (ns_last_pid) needs root in the namespace')
  const { home } = makeHome(t)
  // A shell as pid 1 reaps what is re-parented to it (node would leave the
  // killed main process a zombie, holding the pid the test wants reused).
  const fixture = path.join(root, '__test__', 'fixtures', 'reused-pid.mjs')
  const r = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'sh', '-c', '"$0" "$1"; exit $?', process.execPath, fixture], {
    env: { ...process.env, RUN_BG, HOME_DIR: home },
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.equal(r.status, 0, r.stderr)
  const result = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.ok(result.samePid, `the newcomer got the job's pid: ${JSON.stringify(result)}`)
  const [major, minor] = os.release().split('.').map(Number)
  if (major < 6 || (major === 6 && minor < 9)) {
    return t.skip(`no pidfs on Linux ${os.release()} (< 6.9): a reuse within one tick cannot be told apart`)
  }
  assert.notEqual(result.recordedInode, null, 'the pidfs inode of the main process is recorded')
  assert.ok(result.survived, `the newcomer at the reused pid was not signalled: ${JSON.stringify(result)}`)
  assert.notEqual(result.status, 'killed')
})

test('a stopped supervisor does not keep kill from killing its job, and the kill is recorded', async (t) => {
  const { home, extraPids } = makeHome(t)
  const { jobId } = startJob(home, ['sleep', '300'])
  const job = await waitFor(() => readRegistry(home).find((j) => j.id === jobId && j.status === 'running' && j.main),
    { what: 'the job to run' })
  const supervisor = job.supervisor.pid
  extraPids.push(supervisor)
  t.after(() => { try { process.kill(supervisor, 'SIGCONT') } catch {} })
  process.kill(supervisor, 'SIGSTOP')
  await waitFor(() => /^[Tt]$/.test(statState(supervisor)), { what: 'the supervisor to stop' })

  const started = Date.now()
  const kill = runBg(home, ['kill', jobId, '--force'])
  const took = Date.now() - started
  assert.equal(kill.code, 0, `kill succeeds: ${kill.stderr}`)
  assert.match(kill.stdout, /without its supervisor, which is stopped \(pid \d+\): 1 process\(es\) signalled/)
  assert.ok(took < 5_000, `kill did not wait for the stopped supervisor (${took} ms)`)
  assert.equal(processStart(job.main.pid), null, 'the job is dead')
  assert.equal(checkJson(home, jobId).status, 'killed')

  // Resumed, the supervisor finds the tree gone and the kill recorded; it keeps that outcome.
  process.kill(supervisor, 'SIGCONT')
  await waitFor(() => processStart(supervisor) === null, { what: 'the resumed supervisor to finish' })
  assert.equal(checkJson(home, jobId).status, 'killed')
})

test('killing an orphaned job counts each process it signalled once', async (t) => {
  const { home, extraPids } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'sleep 301 & sleep 302 & wait'])
  const job = await waitFor(() => {
    const j = readRegistry(home).find((j) => j.id === jobId && j.main)
    return j && cookieProcesses(jobId).length === 3 && j
  }, { what: 'the shell and its two sleeps' })
  extraPids.push(...cookieProcesses(jobId).map((p) => p.pid))
  process.kill(job.supervisor.pid, 'SIGKILL')
  await waitFor(() => checkJson(home, jobId).status === 'orphaned', { what: 'the job to read orphaned' })
  const kill = runBg(home, ['kill', jobId, '--grace', '2s'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.match(kill.stdout, /killed orphaned job \S+ \(3 process\(es\) signalled\)/)
  assert.deepEqual(cookieProcesses(jobId), [])
})

function statState(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]
  } catch {
    return null
  }
}
