// A job's process set: a daemon that double-forks, leaves its session and
// scrubs its environment (what `redis-server --daemonize yes` does) is still
// the job's, for every verb, before and after its supervisor dies; and
// `kill` returns only once every process of the set is gone.
import test, { after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { root, makeHome, startJob, readRegistry, waitFor, processStart, isAlive, runBg, checkJson, killPid } from './helpers.mjs'

/** Compiles the daemon fixture once; null (with why) where no C compiler runs. */
let built
let builtDir
// At the top level, so that it runs once all of this file's tests are done.
after(() => builtDir && fs.rmSync(builtDir, { recursive: true, force: true }))
function daemonizer() {
  if (built) return built
  builtDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-daemonize-'))
  const out = path.join(builtDir, 'daemonize')
  const r = spawnSync('cc', ['-O', '-o', out, path.join(root, '__test__', 'fixtures', 'daemonize.c')], { encoding: 'utf8' })
  built = r.error ? { why: `no C compiler (cc: ${r.error.message})` }
    : r.status !== 0 ? { why: `cc failed: ${r.stderr}` } : { bin: out }
  return built
}

/** The daemon's pid once its pid file is there, checked to have dropped the cookie. */
async function daemonOf(pidfile) {
  const pid = await waitFor(() => {
    try { return Number(fs.readFileSync(pidfile, 'utf8').trim()) || null } catch { return null }
  }, { what: 'the daemon to write its pid' })
  assert.ok(isAlive(pid), 'the daemon runs')
  const environ = fs.readFileSync(`/proc/${pid}/environ`, 'latin1')
  assert.ok(!environ.includes('PROC_MANAGER_JOB='), 'the daemon scrubbed its environment: no cookie can be read')
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  const [, , pgid, sid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // Its session is the one its first fork made: not the job's group or session.
  assert.equal(Number(pgid), Number(sid), 'the daemon runs in a session of its own')
  assert.notEqual(Number(sid), process.pid)
  return { pid, start: processStart(pid) }
}

const alive = (p) => processStart(p.pid) === p.start

function setup(t, extra = []) {
  const d = daemonizer()
  if (!d.bin) return { skip: d.why }
  const { home, extraPids } = makeHome(t)
  const pidfile = path.join(home, 'daemon.pid')
  const { jobId } = startJob(home, [d.bin, pidfile, ...extra])
  t.after(() => {
    try { killPid(Number(fs.readFileSync(pidfile, 'utf8'))) } catch {}
  })
  return { home, extraPids, pidfile, jobId }
}

async function ended(home, jobId) {
  return waitFor(() => readRegistry(home).find((j) => j.id === jobId && j.status === 'success'),
    { what: 'the main process to exit 0' })
}

function listLine(home, jobId) {
  const r = runBg(home, ['list'])
  assert.equal(r.code, 0, r.stderr)
  return r.stdout.split('\n').find((l) => l.startsWith(jobId)) ?? ''
}

function summaryLine(home, jobId) {
  const r = runBg(home, ['summary', '--json'])
  assert.equal(r.code, 0, r.stderr)
  return JSON.parse(r.stdout).lines.find((l) => l.includes(jobId)) ?? ''
}

const counted = (line) => Number((line.match(/(\d+) process(?:\(es\)|es)? still running/) ?? [])[1] ?? 0)

test('a daemon that double-forks and scrubs its environment is counted alike by check, list, summary and orphans', async (t) => {
  const s = setup(t)
  if (s.skip) return t.skip(s.skip)
  const { home, pidfile, jobId } = s
  const daemon = await daemonOf(pidfile)
  await ended(home, jobId)

  const check = checkJson(home, jobId)
  assert.deepEqual(check.lingering.map((p) => p.pid), [daemon.pid], 'check names the daemon')
  assert.equal(check.processes, 1)
  const list = listLine(home, jobId)
  assert.equal(counted(list), 1, `list says the daemon still runs: ${list}`)
  const summary = summaryLine(home, jobId)
  assert.match(summary, /success \(exit 0\), 1 process still running/, `summary says the job left a process: ${summary}`)
  assert.doesNotMatch(runBg(home, ['check', jobId]).stdout.split('\n')[0], /^\S+: success \(exit 0\) after/,
    'check does not call it plain success')
  const orphans = JSON.parse(runBg(home, ['orphans', '--json']).stdout)
  assert.deepEqual(orphans.processes.map((p) => p.pid), [daemon.pid], 'orphans finds the daemon')

  const kill = runBg(home, ['orphans', '--kill', '--json'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.deepEqual(JSON.parse(kill.stdout).killed.map((p) => p.pid), [daemon.pid])
  assert.ok(!alive(daemon), 'orphans --kill removed the daemon before it returned')
  assert.equal(counted(listLine(home, jobId)), 0)
  assert.match(runBg(home, ['orphans']).stdout, /no orphans/)
})

test('after its supervisor is SIGKILLed, the daemon is still the job\'s: found, counted alike and killed', async (t) => {
  const s = setup(t)
  if (s.skip) return t.skip(s.skip)
  const { home, pidfile, jobId } = s
  const daemon = await daemonOf(pidfile)
  const job = await ended(home, jobId)
  const supervisor = { pid: job.supervisor.pid, start: processStart(job.supervisor.pid) }
  assert.ok(alive(supervisor), 'the supervisor stays while the daemon runs')
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !alive(supervisor), { what: 'the supervisor to die' })
  assert.ok(alive(daemon))

  const check = checkJson(home, jobId)
  assert.deepEqual(check.lingering.map((p) => p.pid), [daemon.pid], 'check still names the daemon')
  assert.equal(counted(listLine(home, jobId)), 1, 'list still counts it')
  assert.match(summaryLine(home, jobId), /1 process still running/)
  const orphans = JSON.parse(runBg(home, ['orphans', '--json']).stdout)
  assert.deepEqual(orphans.processes.map((p) => p.pid), [daemon.pid])

  const kill = runBg(home, ['kill', jobId])
  assert.equal(kill.code, 0, kill.stderr)
  assert.doesNotMatch(kill.stdout, /nothing to kill/)
  assert.match(kill.stdout, /\b1 process(\(es\))? signalled/, kill.stdout)
  assert.ok(!alive(daemon), 'kill removed the daemon before it returned')
  assert.equal(checkJson(home, jobId).lingering.length, 0)
})

test('kill returns only once every process of the tree is gone, the scrubbed daemon included', async (t) => {
  const s = setup(t, ['stay'])
  if (s.skip) return t.skip(s.skip)
  const { home, pidfile, jobId } = s
  const daemon = await daemonOf(pidfile)
  const job = await waitFor(() => readRegistry(home).find((j) => j.id === jobId && j.main), { what: 'the job record' })
  const main = { pid: job.main.pid, start: processStart(job.main.pid) }
  assert.ok(alive(main), 'the main process stays')
  assert.equal(checkJson(home, jobId).processes, 2, 'check counts the main process and the daemon')

  const kill = runBg(home, ['kill', jobId])
  assert.equal(kill.code, 0, kill.stderr)
  const left = [main, daemon].filter(alive)
  assert.deepEqual(left, [], `right after kill returned: ${kill.stdout}`)
  assert.match(kill.stdout, /\b2 process(\(es\))? signalled/, kill.stdout)
})

test('redis-server --daemonize yes under a job is found and killed (where redis-server is installed)', async (t) => {
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' })
  if (which.status !== 0) return t.skip('redis-server is not installed')
  const { home } = makeHome(t)
  const pidfile = path.join(home, 'redis.pid')
  // --port 0 alone makes redis exit ("Configured to not listen anywhere"):
  // a unix socket in the home gives it somewhere to listen without a port.
  const { jobId } = startJob(home, ['redis-server', '--daemonize', 'yes', '--port', '0', '--save', '',
    '--unixsocket', path.join(home, 'redis.sock'), '--pidfile', pidfile, '--dir', home])
  const pid = await waitFor(() => {
    try { return Number(fs.readFileSync(pidfile, 'utf8').trim()) || null } catch { return null }
  }, { what: 'redis to write its pid' })
  t.after(() => killPid(pid))
  const redis = { pid, start: processStart(pid) }
  await ended(home, jobId)
  assert.deepEqual(JSON.parse(runBg(home, ['orphans', '--json']).stdout).processes.map((p) => p.pid), [pid])
  const kill = runBg(home, ['kill', jobId])
  assert.equal(kill.code, 0, kill.stderr)
  assert.ok(!alive(redis), `redis is gone when kill returns: ${kill.stdout}`)
})

test('a recorded process set never makes a verb signal pid 1, the caller\'s session, or a pid under another start time', async (t) => {
  const probe = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'setsid', 'true'], { encoding: 'utf8' })
  if (probe.error) return t.skip(`unshare is not available (${probe.error.message})`)
  if (probe.status !== 0) return t.skip(`unshare --pid --fork --mount-proc is not permitted here: ${probe.stderr.trim()}`)
  const { home } = makeHome(t)
  // setsid: pid 1 of the namespace leads its group and session, as init does.
  const r = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'setsid', process.execPath,
    path.join(root, '__test__', 'fixtures', 'forged-procset.mjs')], {
    env: { ...process.env, RUN_BG: path.join(root, 'native', 'run-bg'), HOME_DIR: home },
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.equal(r.status, 0, r.stderr)
  const results = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.equal(results.length, 4)
  for (const x of results) {
    assert.deepEqual({ how: x.how, survived: x.survived, pid1Got: x.pid1Got }, { how: x.how, survived: 2, pid1Got: [] }, x.said)
  }
  const check = JSON.parse(results.find((x) => x.how === 'check').said)
  assert.deepEqual(check.lingering, [], 'none of the forged identities counts as the job\'s')
})
