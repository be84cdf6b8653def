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

/** The live processes the job's supervisor recorded (`procs` in the job's directory): pid and start ticks each. */
function recordedAlive(home, jobId) {
  let text = ''
  try { text = fs.readFileSync(path.join(home, 'jobs', jobId, 'procs'), 'utf8') } catch {}
  return text.split('\n').map((l) => l.split(' ')).filter((f) => f.length === 3)
    .map(([pid, start]) => ({ pid: Number(pid), start })).filter(alive)
}

/** `ps --json`'s rows for `pids`, each with the job it names (null: none). */
function psJobs(home, pids) {
  const r = runBg(home, ['ps', '--json'])
  assert.equal(r.code, 0, r.stderr)
  const rows = JSON.parse(r.stdout).processes
  return Object.fromEntries(pids.map((pid) => [pid, rows.find((p) => p.pid === pid)?.jobId ?? null]))
}

test('after its supervisor is SIGKILLed, ps still attributes every recorded process to the job', async (t) => {
  const s = setup(t)
  if (s.skip) return t.skip(s.skip)
  const { home, pidfile, jobId } = s
  const daemon = await daemonOf(pidfile)
  const job = await ended(home, jobId)
  await waitFor(() => recordedAlive(home, jobId).some((p) => p.pid === daemon.pid), { what: 'the supervisor to record the daemon' })
  assert.deepEqual(psJobs(home, [daemon.pid]), { [daemon.pid]: jobId }, 'ps names the job while the supervisor lives')
  const supervisor = { pid: job.supervisor.pid, start: processStart(job.supervisor.pid) }
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !alive(supervisor), { what: 'the supervisor to die' })

  const recorded = recordedAlive(home, jobId).map((p) => p.pid)
  assert.deepEqual(recorded, [daemon.pid], 'the daemon is the one recorded process still alive')
  assert.equal(counted(listLine(home, jobId)), 1, 'list counts it')
  assert.deepEqual(JSON.parse(runBg(home, ['orphans', '--json']).stdout).processes.map((p) => p.pid), [daemon.pid])
  assert.deepEqual(psJobs(home, recorded), { [daemon.pid]: jobId }, 'ps --json names the job of every recorded process')
  const text = runBg(home, ['ps']).stdout
  assert.match(text, new RegExp(`^ *${daemon.pid} +\\d+ +[\\d.]+  ${jobId} `, 'm'), text)
  assert.match(text, new RegExp(`^job ${jobId}: 1 process\\(es\\)`, 'm'), text)
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

/** Every live process: pid, parent, start ticks, and its command line. */
function processTable() {
  const rows = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (f[0] === 'Z' || f[0] === 'X') continue
      const command = fs.readFileSync(`/proc/${name}/cmdline`, 'latin1').replace(/\0+$/, '').replaceAll('\0', ' ')
      rows.push({ pid: Number(name), ppid: Number(f[1]), start: f[19], command })
    } catch {}
  }
  return rows
}

/** `top` (a pid) and every live process below it. */
function treeBelow(top) {
  const rows = processTable()
  const found = rows.filter((r) => r.pid === top)
  for (let i = 0; i < found.length; i++) found.push(...rows.filter((r) => r.ppid === found[i].pid))
  return found
}

/**
 * A real program's processes (`processes()`, each with pid and start), run
 * by job `jobId`: once they are all there (`complete`) and recorded by the
 * supervisor, the supervisor is SIGKILLed, and `ps --json` must still name
 * the job for every one of them; then `kill` must leave none.
 */
async function attributedAfterTheSupervisorDies(home, jobId, processes, complete) {
  let program = []
  await waitFor(() => {
    program = processes()
    const recorded = new Set(recordedAlive(home, jobId).map((p) => p.pid))
    return complete(program) && program.every((p) => recorded.has(p.pid))
  }, { timeout: 15_000, what: 'every process of the program to start and be recorded by the supervisor' })
  const described = (pids) => JSON.stringify(Object.fromEntries(Object.entries(pids).map(([pid, job]) =>
    [`${pid} ${program.find((p) => p.pid === Number(pid))?.command}`, job])), null, 1)
  const all = (pids) => Object.fromEntries(pids.map((pid) => [pid, jobId]))
  const pids = program.map((p) => p.pid)
  const supervisor = readRegistry(home).find((j) => j.id === jobId).supervisor
  const supervisorAlive = { pid: supervisor.pid, start: processStart(supervisor.pid) }
  let seen = psJobs(home, pids)
  assert.deepEqual(seen, all(pids), `while the supervisor lives: ${described(seen)}`)
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !alive(supervisorAlive), { what: 'the supervisor to die' })
  assert.deepEqual(processes().map((p) => p.pid).sort(), [...pids].sort(), 'the program runs on unchanged')
  seen = psJobs(home, pids)
  assert.deepEqual(seen, all(pids), `after the supervisor's SIGKILL: ${described(seen)}`)
  const kill = runBg(home, ['kill', jobId])
  assert.equal(kill.code, 0, kill.stderr)
  assert.deepEqual(program.filter(alive).map((p) => p.pid), [], `every process is gone when kill returns: ${kill.stdout}`)
  return program
}

test('redis-server --daemonize yes: ps attributes all of it to its job after the supervisor is SIGKILLed (where installed)', async (t) => {
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' })
  if (which.status !== 0) return t.skip('redis-server is not installed (Debian: apt-get install redis-server)')
  const { home } = makeHome(t)
  const pidfile = path.join(home, 'redis.pid')
  let program = []
  t.after(() => program.forEach((p) => alive(p) && killPid(p.pid)))
  const { jobId } = startJob(home, ['redis-server', '--daemonize', 'yes', '--port', '0', '--unixsocket', path.join(home, 'redis.sock'),
    '--save', '', '--pidfile', pidfile, '--dir', home])
  const pid = await waitFor(() => {
    try { return Number(fs.readFileSync(pidfile, 'utf8').trim()) || null } catch { return null }
  }, { what: 'redis to write its pid' })
  const processes = () => (program = [...new Map([...program, ...treeBelow(pid)].map((p) => [p.pid, p])).values()]).filter(alive)
  await ended(home, jobId)
  await attributedAfterTheSupervisorDies(home, jobId, processes, (found) => found.some((p) => p.pid === pid))
})

/** The newest PostgreSQL server's bin directory (Debian: /usr/lib/postgresql/<major>/bin), or null. */
function postgresBin() {
  let majors = []
  try { majors = fs.readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a) } catch {}
  const bin = majors.map((v) => `/usr/lib/postgresql/${v}/bin`).find((b) => fs.existsSync(`${b}/pg_ctl`) && fs.existsSync(`${b}/initdb`))
  return bin ?? null
}

test('postgres started by pg_ctl: ps attributes every server process to its job after the supervisor is SIGKILLed (where installed)', async (t) => {
  const bin = postgresBin()
  if (!bin) return t.skip('PostgreSQL is not installed (Debian: apt-get install postgresql; looked in /usr/lib/postgresql/*/bin)')
  // PostgreSQL refuses to run as root: as root, run it as the postgres user (or nobody).
  let asUser = []
  let owner = null
  if (process.getuid() === 0) {
    const id = (flag, user) => spawnSync('id', [flag, user], { encoding: 'utf8' })
    const user = ['postgres', 'nobody'].find((u) => id('-u', u).status === 0)
    if (!user) return t.skip('running as root and there is neither a postgres nor a nobody user to run PostgreSQL as')
    if (spawnSync('setpriv', ['--version']).error) return t.skip('running as root and setpriv (util-linux) is not installed')
    owner = { uid: Number(id('-u', user).stdout), gid: Number(id('-g', user).stdout) }
    asUser = ['setpriv', `--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--clear-groups', '--']
  }
  const { home } = makeHome(t)
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-postgres-'))
  if (owner) fs.chownSync(base, owner.uid, owner.gid)
  const data = path.join(base, 'data')
  let program = []
  t.after(() => {
    program.forEach((p) => alive(p) && killPid(p.pid))
    fs.rmSync(base, { recursive: true, force: true })
  })
  const init = spawnSync(asUser[0] ?? `${bin}/initdb`, [...asUser.slice(1), ...(asUser.length ? [`${bin}/initdb`] : []),
    '-D', data, '--auth=trust', '--no-sync', '-U', 'postgres', '-E', 'UTF8'], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(init.status, 0, `initdb: ${init.stderr}`)
  // No TCP listener (a socket in its own directory), no autovacuum worker
  // started while the test runs (one started after the supervisor's death
  // was never seen by it), dynamic shared memory in the data directory.
  const options = `-k ${base} -c listen_addresses= -c autovacuum_naptime=3600 -c dynamic_shared_memory_type=mmap -c fsync=off`
  const { jobId } = startJob(home, [...asUser, `${bin}/pg_ctl`, '-D', data, '-l', path.join(base, 'server.log'), '-w', '-t', '20', '-o', options, 'start'])
  const job = await waitFor(() => readRegistry(home).find((j) => j.id === jobId && j.status !== 'running'),
    { timeout: 25_000, what: 'pg_ctl start to return' })
  const serverLog = () => { try { return fs.readFileSync(path.join(base, 'server.log'), 'utf8').slice(-2000) } catch { return '(no server log)' } }
  assert.equal(job.status, 'success', `pg_ctl start: ${runBg(home, ['check', jobId]).stdout}\n${serverLog()}`)
  const postmaster = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  const processes = () => (program = [...new Map([...program, ...treeBelow(postmaster)].map((p) => [p.pid, p])).values()]).filter(alive)
  const roles = ['checkpointer', 'background writer', 'walwriter', 'autovacuum launcher']
  const found = await attributedAfterTheSupervisorDies(home, jobId, processes,
    (found) => roles.every((role) => found.some((p) => p.command.includes(role))))
  assert.ok(found.length >= 5, JSON.stringify(found))
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
