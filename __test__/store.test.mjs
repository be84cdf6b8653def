// The home and its registry under attack and under faults: a home others
// control, a registry lock held by a stopped process, a supervisor killed
// while recording an end, a full disk, a registry that cannot be written.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  makeHome, runBg, startJob, readRegistry, checkJson, waitFor, waitForQuiet, processStart, killPid, root, RUN_BG,
} from './helpers.mjs'

const isRoot = process.getuid() === 0
const hasFlock = spawnSync('flock', ['--version']).status === 0
const NO_FLOCK = 'flock(1) from util-linux is needed to hold the registry lock from outside'

function readJobFile(home, id) {
  try {
    return JSON.parse(fs.readFileSync(path.join(home, 'jobs', id, 'job.json'), 'utf8'))
  } catch {
    return null
  }
}

/** Pids holding a flock on `file`, from /proc/locks (matched by inode). */
function flockHolders(file) {
  const { ino } = fs.statSync(file)
  return fs.readFileSync('/proc/locks', 'utf8').split('\n')
    .filter((line) => line.includes('FLOCK') && !line.includes('->'))
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[5]?.endsWith(`:${ino}`))
    .map((f) => Number(f[4]))
}

function childrenOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** Every lock holder started is released before its home is cleaned up (see `homeWithHolders`). */
let holders = []

/** A home whose cleanup first releases every lock holder, so that the cleanup's kills are not held up. */
function homeWithHolders(t, config) {
  const fixture = makeHome(null, config)
  t.after(async () => {
    for (const release of holders.splice(0)) release()
    await fixture.cleanup()
  })
  return fixture
}

/**
 * A real process holding `<home>/jobs.lock` the way proc-manager takes it
 * (flock(2), exclusive): flock(1) running `sleep 600`. With `stop`, both are
 * SIGSTOPped, as a debugger or a frozen container would leave them.
 * `release()` (also run after the test) sends SIGCONT and SIGKILL, by pid.
 */
async function holdRegistryLock(home, { stop = false } = {}) {
  const lock = path.join(home, 'jobs.lock')
  fs.closeSync(fs.openSync(lock, 'a', 0o600))
  const holder = spawn('flock', ['--exclusive', lock, 'sleep', '600'], { stdio: 'ignore' })
  const pids = [holder.pid]
  let released = false
  const release = () => {
    if (released) return
    released = true
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGCONT')
      } catch {}
      killPid(pid)
    }
  }
  holders.push(release)
  await waitFor(() => flockHolders(lock).includes(holder.pid), { what: 'flock(1) to hold jobs.lock' })
  pids.push(...(await waitFor(() => childrenOf(holder.pid).length && childrenOf(holder.pid), { what: "the holder's sleep" })))
  if (stop) {
    for (const pid of pids) process.kill(pid, 'SIGSTOP')
  }
  return { pid: holder.pid, release }
}

/** Runs a node script in a child; kills it (by pid) if it has not exited within `ms`. */
function runNodeWithin(script, env, ms) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      killPid(child.pid)
    }, ms)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr, timedOut })
    })
  })
}

// ---------------------------------------------------------------- the home

function plantedHome(base, name, marker) {
  const dir = path.join(base, name)
  fs.mkdirSync(dir, { mode: 0o700 })
  // What another user would plant: a hook that runs as whoever uses the home.
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ notify: { url: null, command: `touch ${marker}` } }))
  return dir
}

test('a home owned by another user, writable by others, or a symlink to one is refused; nothing planted there runs', (t) => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-unsafe-'))
  t.after(() => fs.rmSync(base, { recursive: true, force: true }))
  const marker = path.join(base, 'planted-hook-ran')
  const cases = []

  const open = plantedHome(base, 'world-writable', marker)
  fs.chmodSync(open, 0o777)
  cases.push({ home: open, why: /writable by its group or others/, fix: `chmod 700 ${open}` })
  const group = plantedHome(base, 'group-writable', marker)
  fs.chmodSync(group, 0o770)
  cases.push({ home: group, why: /writable by its group or others/, fix: `chmod 700 ${group}` })
  const link = path.join(base, 'link-to-world-writable')
  fs.symlinkSync(open, link)
  cases.push({ home: link, why: new RegExp(`${open}.*writable by its group or others`), fix: `chmod 700 ${open}` })
  if (isRoot) {
    const theirs = plantedHome(base, 'owned-by-65534', marker)
    fs.chownSync(theirs, 65534, 65534)
    fs.chownSync(path.join(theirs, 'config.json'), 65534, 65534)
    cases.push({ home: theirs, why: /owned by uid 65534, not by you \(uid 0\)/, fix: 'chown' })
  } else {
    t.diagnostic('skipped the owned-by-another-user case: giving a directory to uid 65534 needs root')
  }

  for (const { home, why, fix } of cases) {
    for (const args of [['--yield', '5s', '--', 'true'], ['list'], ['kill', '--all']]) {
      const r = runBg(home, args)
      assert.equal(r.code, 2, `${home} ${args.join(' ')}: ${r.stdout}${r.stderr}`)
      assert.match(r.stderr, why)
      assert.ok(r.stderr.includes(fix), `says how to fix it: ${r.stderr}`)
    }
    const js = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(root)}).listJobs()`], {
      env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8',
    })
    assert.notEqual(js.status, 0)
    assert.match(js.stderr, why)
    assert.deepEqual(fs.readdirSync(fs.realpathSync(home)), ['config.json'], 'nothing was created there')
  }
  assert.ok(!fs.existsSync(marker), 'the planted notify.command never ran')
})

test('a symlink of ours to a private directory of ours is a home; planted symlinks inside it are refused', async (t) => {
  const { home } = makeHome(t)
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-link-'))
  t.after(() => fs.rmSync(base, { recursive: true, force: true }))
  const link = path.join(base, 'home')
  fs.symlinkSync(home, link)
  const { jobId } = startJob(link, ['true'])
  assert.equal(runBg(link, ['wait', jobId]).code, 0)
  // The job's supervisor may still be registering its end: the files below
  // are swapped under nobody.
  await waitForQuiet(link)

  // A planted config.json symlink (pointing at a hook of someone else's) is not read.
  const marker = path.join(base, 'hook-ran')
  const planted = path.join(base, 'planted-config.json')
  fs.writeFileSync(planted, JSON.stringify({ notify: { url: null, command: `touch ${marker}` } }))
  fs.renameSync(path.join(home, 'config.json'), path.join(base, 'config.json.orig'))
  fs.symlinkSync(planted, path.join(home, 'config.json'))
  const r = runBg(home, ['--yield', '5s', '--', 'true'])
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.match(r.stderr, /config\.json.*symbolic link/)
  assert.ok(!fs.existsSync(marker))
  fs.rmSync(path.join(home, 'config.json'))
  fs.renameSync(path.join(base, 'config.json.orig'), path.join(home, 'config.json'))

  // jobs.json planted as a symlink to a registry elsewhere: refused, never read or replaced.
  const registry = fs.readFileSync(path.join(home, 'jobs.json'))
  const elsewhere = path.join(base, 'elsewhere.json')
  fs.writeFileSync(elsewhere, registry)
  fs.rmSync(path.join(home, 'jobs.json'))
  fs.symlinkSync(elsewhere, path.join(home, 'jobs.json'))
  const r2 = runBg(home, ['list', '--all'])
  assert.equal(r2.code, 1, r2.stdout + r2.stderr)
  assert.match(r2.stderr, /jobs\.json.*symbolic link/)
  // A start needs only the job's own job.json; its registration finds the symlink and leaves it.
  const started = startJob(home, ['true'])
  await waitFor(() => readJobFile(home, started.jobId)?.status === 'success', { what: 'the job to end' })
  assert.deepEqual(fs.readFileSync(elsewhere), registry)
  assert.ok(fs.lstatSync(path.join(home, 'jobs.json')).isSymbolicLink())
  fs.rmSync(path.join(home, 'jobs.json'))
  fs.writeFileSync(path.join(home, 'jobs.json'), registry)
})

// ---------------------------------------------------------- the registry lock

test('a stopped registry lock holder blocks neither runBackground nor a start; the job is listed and killable', { skip: !hasFlock && NO_FLOCK }, async (t) => {
  // A lock timeout of a minute: if a start waited for the lock at all, it would take that long.
  const { home } = homeWithHolders(t, { registry: { lock_timeout_ms: 60_000 } })
  const holder = await holdRegistryLock(home, { stop: true })

  const js = await runNodeWithin(`
    const { createRequire } = await import('node:module')
    const pm = createRequire(${JSON.stringify(root + '/')})(${JSON.stringify(root)})
    const started = Date.now()
    const job = pm.runBackground('sleep 300', { label: 'js' })
    console.log(JSON.stringify({ ...job, ms: Date.now() - started }))
  `, { PROC_MANAGER_HOME: home }, 30_000)
  assert.ok(!js.timedOut, 'runBackground returned while a stopped process held the registry lock')
  assert.equal(js.code, 0, js.stderr)
  const fromJs = JSON.parse(js.stdout)
  t.diagnostic(`runBackground with a stopped lock holder returned in ${fromJs.ms} ms`)

  const cli = runBg(home, ['--json', '--label', 'cli', '--', 'sleep', '300'], { timeout: 30_000 })
  assert.equal(cli.code, 0, cli.stderr)
  const fromCli = JSON.parse(cli.stdout)

  // Listed (from each job's own job.json) while the registry cannot be written.
  const list = runBg(home, ['list', '--json'], { timeout: 30_000 })
  assert.equal(list.code, 0, list.stderr)
  const listed = JSON.parse(list.stdout)
  for (const id of [fromJs.jobId, fromCli.jobId]) {
    assert.equal(listed.find((j) => j.jobId === id)?.status, 'running', `${id} listed: ${list.stdout}`)
  }

  // Killable: the supervisor records the end in job.json first, and the kill sees it there.
  const kill = runBg(home, ['kill', fromCli.jobId, '--grace', '1s'], { timeout: 30_000 })
  assert.equal(kill.code, 0, kill.stdout + kill.stderr)
  assert.match(kill.stdout, /killed/)
  assert.equal(processStart(fromCli.pid), null, 'the job is gone')
  assert.equal(checkJson(home, fromCli.jobId).status, 'killed')

  // Once the holder lets go, the registry catches up.
  holder.release()
  await waitFor(() => {
    const jobs = readRegistry(home)
    return jobs.find((j) => j.id === fromCli.jobId)?.status === 'killed' && jobs.some((j) => j.id === fromJs.jobId)
  }, { what: 'the registry to record both jobs', timeout: 30_000 })
})

test('a stopped lock holder makes prune fail within registry.lock_timeout_ms, naming its pid and that it is stopped', { skip: !hasFlock && NO_FLOCK }, async (t) => {
  const { home } = homeWithHolders(t, { registry: { lock_timeout_ms: 300 } })
  const { jobId } = startJob(home, ['true'])
  assert.equal(runBg(home, ['wait', jobId]).code, 0)
  const holder = await holdRegistryLock(home, { stop: true })

  const prune = runBg(home, ['prune'], { timeout: 30_000 })
  assert.equal(prune.code, 1, prune.stdout + prune.stderr)
  assert.match(prune.stderr, new RegExp(`pid ${holder.pid}\\b`))
  assert.match(prune.stderr, /stopped/)
  assert.match(prune.stderr, /registry\.lock_timeout_ms/)

  // Reads never wait for the lock: check and list answer, the job's end intact.
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'success')
  holder.release()
  assert.equal(runBg(home, ['prune']).code, 0)
  assert.equal(runBg(home, ['check', jobId]).code, 1, 'pruned once the lock is free')
})

// ------------------------------------------------- a supervisor killed mid-record

test('a supervisor killed while recording the end keeps the exit status (job.json wins over the registry)', { skip: !hasFlock && NO_FLOCK }, async (t) => {
  const { home } = homeWithHolders(t, { registry: { lock_timeout_ms: 60_000 } })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-crash-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { jobId } = startJob(home, ['sh', '-c', 'while [ ! -e go ]; do sleep 0.02; done; echo bye; exit 3'], ['--cwd', dir])
  await waitFor(() => readRegistry(home).find((j) => j.id === jobId)?.status === 'running', { what: 'the job in the registry' })

  // The supervisor then records the end while something holds the registry:
  // it keeps the outcome in the job's own job.json and waits for the lock,
  // and is killed there.
  const holder = await holdRegistryLock(home)
  fs.writeFileSync(path.join(dir, 'go'), '')
  const recorded = await waitFor(() => readJobFile(home, jobId)?.status === 'failed' && readJobFile(home, jobId), {
    what: "the outcome in the job's own job.json",
  })
  assert.equal(recorded.exit_code, 3)
  const supervisor = recorded.supervisor
  assert.equal(Number(processStart(supervisor.pid)), supervisor.start_ticks, 'the supervisor is still there, waiting for the lock')
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => processStart(supervisor.pid) === null, { what: 'the supervisor to die' })
  holder.release()
  // jobs.json never got the end (a start writes only job.json, so it may not name the job at all).
  const registered = fs.existsSync(path.join(home, 'jobs.json'))
    ? JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs.find((j) => j.id === jobId)
    : undefined
  assert.ok(registered === undefined || registered.status === 'running', `the registry lost the end: ${registered?.status}`)

  const check = checkJson(home, jobId)
  assert.equal(check.status, 'failed')
  assert.equal(check.exitCode, 3)
  assert.deepEqual(check.tail, ['bye'])
  const listed = JSON.parse(runBg(home, ['list', '--all', '--json']).stdout).find((j) => j.jobId === jobId)
  assert.deepEqual([listed.status, listed.exitCode], ['failed', 3])
  assert.equal(runBg(home, ['wait', jobId]).code, 3)
  assert.deepEqual(
    (({ status, exit_code }) => ({ status, exit_code }))(readRegistry(home).find((j) => j.id === jobId)),
    { status: 'failed', exit_code: 3 },
    'the next registry write takes the outcome from job.json',
  )
})

test('a hand-edited jobs.json naming a job twice lists it once, with the record that has its outcome', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'exit 5'])
  assert.equal(runBg(home, ['wait', jobId]).code, 5)
  const file = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8'))
  const ended = file.jobs[0]
  file.jobs = [{ ...ended, status: 'running', exit_code: null, ended_at: null }, ended, { ...ended, status: 'lost', exit_code: null }]
  fs.writeFileSync(path.join(home, 'jobs.json'), JSON.stringify(file))
  const listed = JSON.parse(runBg(home, ['list', '--all', '--json']).stdout)
  assert.deepEqual(listed.map((j) => [j.jobId, j.status, j.exitCode]), [[jobId, 'failed', 5]])
})

// ----------------------------------------------- a full disk, a read-only registry

/** How this machine lets a test mount a small tmpfs: `unshare` arguments, or why not. */
function mountNamespace() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-ns-probe-'))
  try {
    const reasons = []
    for (const prefix of [['--mount'], ['--user', '--map-root-user', '--mount']]) {
      const probe = spawnSync('unshare', [...prefix, 'mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { encoding: 'utf8' })
      if (probe.status === 0) return { prefix }
      reasons.push(`unshare ${prefix.join(' ')}: ${(probe.stderr || String(probe.error)).trim()}`)
    }
    return { skip: `cannot mount a tmpfs in a private mount namespace here (${reasons.join('; ')})` }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
const namespace = mountNamespace()

function runFault(scenario) {
  const r = spawnSync('unshare', [...namespace.prefix, process.execPath, path.join(root, '__test__/fixtures/store-fault.mjs'), RUN_BG, scenario], {
    encoding: 'utf8',
    timeout: 240_000,
  })
  if (r.error) throw r.error
  const result = JSON.parse(r.stdout.trim().split('\n').pop())
  assert.equal(result.error, undefined, result.error)
  assert.equal(result.cleanupError, undefined, result.cleanupError)
  return result
}

test('on a full disk outcomes are kept, reads and kills work, a failed start leaves nothing, and it says the disk is full', { skip: namespace.skip }, (t) => {
  const r = runFault('full')
  t.diagnostic(JSON.stringify(r))
  assert.equal(r.freeAfterFill, 0)
  assert.equal(r.listBeforeFill, 0)
  assert.deepEqual(r.cJobFile, { status: 'failed', exit_code: 3 }, "C's end is in its job.json")

  // A job whose status needs re-checking (D's supervisor died on the full disk).
  assert.equal(r.list.code, 0, r.list.stderr)
  assert.match(r.list.stdout, new RegExp(`${r.D}\\s+orphaned`))
  assert.equal(r.checkC.code, 0, r.checkC.stderr)
  const checkC = JSON.parse(r.checkC.stdout)
  assert.deepEqual([checkC.status, checkC.exitCode], ['failed', 3])

  assert.equal(r.killB.code, 0, r.killB.stderr)
  assert.ok(r.killB.mainGone, 'the orphaned job was signalled')
  assert.match(r.killB.stdout, /killed orphaned job/)
  assert.equal(r.killA.code, 0, r.killA.stderr)
  assert.ok(r.killA.mainGone)
  assert.match(r.killA.stdout, /killed/)

  for (const start of r.starts) {
    assert.equal(start.code, 1)
    assert.match(start.stderr, /the disk holding .*\/home is full/)
    assert.doesNotMatch(start.stderr, /recorded as failed job/)
  }
  assert.equal(r.dirsAfterStarts, r.dirsBeforeStarts, 'failed starts leave no job directory behind')

  assert.deepEqual(r.afterFree[r.A], ['killed', null])
  assert.deepEqual(r.afterFree[r.B], ['killed', null])
  assert.deepEqual(r.afterFree[r.C], ['failed', 3])
  assert.equal(r.dirsAfterFree, 4)
  assert.equal(Object.keys(r.afterFree).length, 4, JSON.stringify(r.afterFree))
})

test('with jobs.json not writable, exit statuses are kept and kills report truthfully', { skip: namespace.skip }, (t) => {
  const r = runFault('readonly')
  t.diagnostic(JSON.stringify(r))
  assert.equal(r.homeWritable, false)
  assert.equal(r.list.code, 0, r.list.stderr)
  assert.equal(r.checkE.code, 0, r.checkE.stderr)
  const checkE = JSON.parse(r.checkE.stdout)
  assert.deepEqual([checkE.status, checkE.exitCode], ['failed', 4])
  // The supervisor says so in its own log, in its own words.
  assert.match(r.eSupervisorLog, new RegExp(`^run-bg supervisor ${r.E}: cannot record the job's end in the registry: .*; it is kept in its job.json, which readers prefer$`, 'm'))
  assert.equal(r.killF.code, 0, r.killF.stderr)
  assert.ok(r.killF.mainGone)
  assert.equal(JSON.parse(r.checkF.stdout).status, 'killed')
  assert.deepEqual(r.afterRemount[r.E], ['failed', 4])
  assert.deepEqual(r.afterRemount[r.F], ['killed', null])
})
