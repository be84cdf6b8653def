// Whole-tree kills, lingering descendants, pid identity, timeouts, restart
// recovery and orphan cleanup, on real process trees.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { spawn } from 'node:child_process'
import {
  makeHome, runBg, startJob, readRegistry, checkJson, waitFor, isAlive, processStart, killPid,
  cookieProcesses, anySurvivor, ESCAPING_TREE, RUN_BG,
} from './helpers.mjs'

async function startTree(home, flags = []) {
  const job = startJob(home, ESCAPING_TREE, flags)
  // sh, setsid sleep 600, setsid sleep 601, sleep 602, the TERM-ignoring sh, its sleep, sleep 603
  const processes = await waitFor(() => {
    const found = cookieProcesses(job.jobId)
    return found.length >= 7 ? found : null
  }, { what: 'the whole tree to start' })
  return { ...job, processes }
}

test('kill leaves not one process of the tree: setsid, orphaned setsid, double fork, TERM-ignorer', async (t) => {
  const { home } = makeHome(t)
  const tree = await startTree(home)
  const kill = runBg(home, ['kill', tree.jobId, '--grace', '500ms'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.deepEqual(anySurvivor(tree.processes), [], 'no process of the job survives kill')
  assert.deepEqual(cookieProcesses(tree.jobId), [])
  assert.equal(checkJson(home, tree.jobId).status, 'killed')
})

test('a timeout kills the whole tree too and records timeout', async (t) => {
  const { home } = makeHome(t, { kill: { grace_ms: 300 } })
  const tree = await startTree(home, ['--timeout', '3s'])
  assert.equal(runBg(home, ['wait', tree.jobId, '--timeout', '30s']).code, 143, 'SIGTERM ended it')
  await waitFor(() => anySurvivor(tree.processes).length === 0, { what: 'the tree to die', timeout: 10_000 })
  assert.equal(checkJson(home, tree.jobId).status, 'timeout')
})

test('descendants that outlive the main process are shown, and kill removes them', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'sleep 600 & setsid sleep 601 & echo main done'])
  const wait = runBg(home, ['wait', jobId])
  assert.equal(wait.code, 0)
  assert.match(wait.stdout, /still running: 2 process\(es\)/, 'wait does not present it as cleanly done')
  // Until setsid has exec'd, its process reads `setsid sleep 601`.
  const check = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.lingering.length === 2 && c.lingering.every((p) => p.command.startsWith('sleep ')) ? c : null
  }, { what: 'two lingering sleeps' })
  assert.equal(check.status, 'success')
  assert.deepEqual(check.lingering.map((p) => p.command).sort(), ['sleep 600', 'sleep 601'])
  assert.match(runBg(home, ['list']).stdout, new RegExp(`^${jobId}  success \\(exit 0\\) after \\S+ · 2 process\\(es\\) still running`, 'm'))
  const text = runBg(home, ['check', jobId]).stdout
  assert.match(text, /still running: 2 process\(es\): \d+ sleep 60[01], \d+ sleep 60[01] — `run-bg kill /)
  const survivors = check.lingering.map((p) => ({ pid: p.pid, start: processStart(p.pid) }))
  const kill = runBg(home, ['kill', jobId, '--grace', '2s'])
  assert.match(kill.stdout, /had already ended \(success\); removed the processes it left running/)
  assert.deepEqual(anySurvivor(survivors), [])
  const after = checkJson(home, jobId)
  assert.equal(after.status, 'success', 'the recorded outcome stays')
  assert.deepEqual(after.lingering, [])
})

test('a recorded pid now used by an unrelated process is never signalled: the job is marked lost', async (t) => {
  const { home, extraPids } = makeHome(t)
  const stranger = spawn('sleep', ['600'], { stdio: 'ignore' })
  extraPids.push(stranger.pid)
  await waitFor(() => isAlive(stranger.pid), { what: 'stranger start' })
  const realStart = Number(processStart(stranger.pid))
  const impostor = { pid: stranger.pid, start_ticks: realStart - 5 }
  const record = {
    id: 'reused-1', label: 'reused', argv: ['sleep', '600'], command: 'sleep 600', cwd: '/',
    status: 'running', exit_code: null, signal: null, main: impostor, supervisor: impostor,
    started_at: Date.now() - 60_000, ended_at: null, notify: true, log_path: path.join(home, 'jobs/reused-1/output.log'),
  }
  fs.writeFileSync(path.join(home, 'jobs.json'), JSON.stringify({ version: 1, jobs: [record] }))
  const kill = runBg(home, ['kill', 'reused-1', '--force'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.match(kill.stdout, new RegExp(`not running \\(lost: .*pid ${stranger.pid} now belongs to another process, which was not touched`))
  assert.ok(isAlive(stranger.pid), 'the unrelated process lives')
  const orphans = runBg(home, ['orphans', '--kill', '--force'])
  assert.equal(orphans.code, 0)
  assert.ok(isAlive(stranger.pid), 'orphan cleanup does not touch it either')
  assert.equal(readRegistry(home)[0].status, 'lost')
  killPid(stranger.pid)
})

test('a SIGKILLed supervisor: the job is orphaned while its tree runs, and kill still removes the whole tree', async (t) => {
  const { home } = makeHome(t)
  const tree = await startTree(home)
  const supervisor = readRegistry(home).find((j) => j.id === tree.jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  const listed = JSON.parse(runBg(home, ['list', '--json']).stdout)
  assert.equal(listed.find((j) => j.jobId === tree.jobId).status, 'orphaned')
  const check = checkJson(home, tree.jobId)
  assert.ok(check.lingering.length >= 6, `the orphaned job shows its processes (${check.lingering.length})`)
  const kill = runBg(home, ['kill', tree.jobId, '--grace', '500ms'])
  assert.match(kill.stdout, /killed orphaned job/)
  const signalled = Number(kill.stdout.match(/\((\d+) process\(es\) signalled\)/)?.[1])
  assert.ok(signalled >= 6, `counts what the group signal reached too: ${kill.stdout}`)
  assert.deepEqual(anySurvivor(tree.processes), [])
  assert.equal(checkJson(home, tree.jobId).status, 'killed')
})

test('a job whose supervisor and processes are all gone is lost', async (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '600'])
  const supervisor = readRegistry(home).find((j) => j.id === jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  process.kill(pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid) && !isAlive(pid), { what: 'both gone' })
  const reconcile = JSON.parse(runBg(home, ['reconcile', '--json']).stdout)
  assert.deepEqual(reconcile.lost.map((j) => j.jobId), [jobId])
  const check = checkJson(home, jobId)
  assert.equal(check.status, 'lost')
  assert.match(check.error, /no exit status was recorded/)
})

test('leftovers that dropped the cookie are still the job\'s while its supervisor lives: shown, and killed', async (t) => {
  const { home } = makeHome(t)
  // One stays in the group, one leaves it with setsid; neither carries PROC_MANAGER_JOB.
  const { jobId } = startJob(home, ['sh', '-c',
    '(env -u PROC_MANAGER_JOB sleep 604 &); (env -u PROC_MANAGER_JOB setsid sleep 605 &); echo bye'])
  assert.equal(runBg(home, ['wait', jobId]).code, 0)
  const check = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.lingering.length === 2 ? c : null
  }, { what: 'the two cookie-less leftovers' })
  assert.deepEqual(check.lingering.map((p) => p.command).sort(), ['sleep 604', 'sleep 605'])
  assert.equal(cookieProcesses(jobId).length, 0, 'they really carry no cookie')
  assert.deepEqual(JSON.parse(runBg(home, ['prune', '--json']).stdout).removed, [], 'prune keeps a job whose processes run on')
  const survivors = check.lingering.map((p) => ({ pid: p.pid, start: processStart(p.pid) }))
  t.after(() => survivors.forEach((p) => killPid(p.pid)))
  const kill = runBg(home, ['kill', jobId, '--grace', '2s'])
  assert.match(kill.stdout, /had already ended \(success\); removed the processes it left running/)
  assert.deepEqual(anySurvivor(survivors), [])
})

test('kill --all also removes what ended jobs left running', async (t) => {
  const { home } = makeHome(t)
  const ended = startJob(home, ['sh', '-c', 'sleep 606 & echo bye'], ['--owner', 'c'])
  const other = startJob(home, ['sh', '-c', 'sleep 607 & echo bye'], ['--owner', 'd'])
  runBg(home, ['wait', ended.jobId, other.jobId])
  const leftovers = await waitFor(() => {
    const found = [...cookieProcesses(ended.jobId), ...cookieProcesses(other.jobId)]
    return found.length === 2 ? found : null
  }, { what: 'both leftovers' })
  const kill = runBg(home, ['kill', '--all', '--owner', 'c', '--json'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.deepEqual(JSON.parse(kill.stdout).map((r) => r.jobId), [ended.jobId])
  assert.deepEqual(cookieProcesses(ended.jobId), [], "c's leftover is gone")
  assert.equal(anySurvivor(leftovers).length, 1, "d's leftover runs on")
  assert.equal(checkJson(home, ended.jobId).status, 'success', 'the recorded outcome stays')
})

test('kill --all --owner kills that owner\'s jobs and leaves the others alone', async (t) => {
  const { home } = makeHome(t)
  const a1 = startJob(home, ['sleep', '600'], ['--owner', 'a'])
  const a2 = startJob(home, ['sh', '-c', 'setsid sleep 600 & sleep 600'], ['--owner', 'a'])
  const b = startJob(home, ['sleep', '600'], ['--owner', 'b'])
  const a2tree = await waitFor(() => {
    const found = cookieProcesses(a2.jobId)
    return found.length >= 3 ? found : null
  }, { what: 'a2 tree' })
  const kill = runBg(home, ['kill', '--all', '--owner', 'a', '--json'])
  assert.equal(kill.code, 0, kill.stderr)
  const results = JSON.parse(kill.stdout)
  assert.deepEqual(results.map((r) => r.jobId).sort(), [a1.jobId, a2.jobId].sort())
  assert.ok(results.every((r) => r.status === 'killed'))
  assert.ok(!isAlive(a1.pid))
  assert.deepEqual(anySurvivor(a2tree), [])
  assert.ok(isAlive(b.pid), "b's job still runs")
  assert.equal(checkJson(home, b.jobId).status, 'running')
})

test('orphans lists orphaned jobs and processes of ended jobs; --kill removes them and says so', async (t) => {
  const { home } = makeHome(t)
  // An ended job that left a daemon behind.
  const ended = startJob(home, ['sh', '-c', 'setsid sleep 600 & echo bye'])
  runBg(home, ['wait', ended.jobId])
  const daemon = await waitFor(() => cookieProcesses(ended.jobId)[0], { what: 'daemon' })
  // A job whose supervisor died.
  const orphaned = startJob(home, ['sleep', '600'])
  const supervisor = readRegistry(home).find((j) => j.id === orphaned.jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  // A job still running normally is none of orphans' business.
  const healthy = startJob(home, ['sleep', '600'])

  const list = JSON.parse(runBg(home, ['orphans', '--json']).stdout)
  assert.deepEqual(list.orphanedJobs.map((j) => j.jobId), [orphaned.jobId])
  assert.deepEqual(list.processes.map((p) => [p.jobId, p.pid]).sort(),
    [[ended.jobId, daemon.pid], [orphaned.jobId, orphaned.pid]].sort())
  assert.ok(isAlive(daemon.pid), 'listing kills nothing')
  const text = runBg(home, ['orphans'])
  assert.match(text.stdout, new RegExp(`pid ${daemon.pid} sleep 600 \\(job ${ended.jobId}, success\\)`))
  assert.match(text.stdout, /run `run-bg orphans --kill` to remove them/)

  const killed = runBg(home, ['orphans', '--kill', '--grace', '1s'])
  assert.equal(killed.code, 0, killed.stderr)
  assert.match(killed.stdout, new RegExp(`killed: pid ${daemon.pid} sleep 600`))
  assert.match(killed.stdout, new RegExp(`killed: pid ${orphaned.pid} sleep 600`))
  assert.deepEqual(anySurvivor([daemon]), [])
  assert.ok(!isAlive(orphaned.pid))
  assert.ok(isAlive(healthy.pid), 'a healthy running job is untouched')
  assert.equal(checkJson(home, orphaned.jobId).status, 'killed')
  assert.match(runBg(home, ['orphans']).stdout, /no orphans/)
})

test('an orphaned job is watched: when its processes end it becomes lost with its end time, nobody asking', async (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '4'])
  const supervisor = readRegistry(home).find((j) => j.id === jobId).supervisor
  process.kill(supervisor.pid, 'SIGKILL')
  await waitFor(() => !isAlive(supervisor.pid), { what: 'supervisor death' })
  assert.equal(checkJson(home, jobId).status, 'orphaned')
  // From here on only the registry file is read: no run-bg invocation reconciles.
  const lost = await waitFor(() => {
    const entry = readRegistry(home).find((j) => j.id === jobId)
    return entry.status === 'lost' ? entry : null
  }, { what: 'the watcher to record the end', timeout: 15_000 })
  assert.ok(!isAlive(pid))
  assert.ok(lost.ended_at - lost.started_at >= 3900, `ended ${lost.ended_at - lost.started_at} ms after start`)
  assert.match(lost.error, /^its supervisor \(pid \d+\) died; the job ran on without it and ended; its exit status is unknown/)
})

test('a job started from inside another job is its own: killing the outer one leaves it alone', async (t) => {
  const { home } = makeHome(t)
  const outer = startJob(home, ['sh', '-c', `${RUN_BG} --label inner -- sleep 600; sleep 600`], ['--label', 'outer'])
  const inner = await waitFor(() => readRegistry(home).find((j) => j.label === 'inner' && j.status === 'running'), { what: 'inner job' })
  assert.equal(runBg(home, ['kill', outer.jobId, '--grace', '1s']).code, 0)
  assert.equal(checkJson(home, outer.jobId).status, 'killed')
  assert.equal(checkJson(home, inner.id).status, 'running', 'the inner job was not part of the outer tree')
  assert.ok(isAlive(inner.main.pid))
  const orphans = JSON.parse(runBg(home, ['orphans', '--json']).stdout)
  assert.deepEqual(orphans.processes, [], 'the inner supervisor is nobody\'s leftover')
  assert.equal(runBg(home, ['kill', inner.id, '--force']).code, 0)
})

test('a job that sends SIGUSR1 to its supervisor is not killed by it', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'kill -USR1 $PPID; sleep 0.3; echo survived'])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '20s']).code, 0)
  assert.deepEqual(checkJson(home, jobId).tail, ['survived'])
})

test('a kill that arrives with the exit does not turn a success into killed', async (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sh', '-c', 'sleep 0.3; exit 0'])
  const supervisor = readRegistry(home).find((j) => j.id === jobId).supervisor
  process.kill(supervisor.pid, 'SIGSTOP')
  t.after(() => { try { process.kill(supervisor.pid, 'SIGCONT') } catch {} })
  // The main process exits while its supervisor is stopped: it waits as a zombie.
  await waitFor(() => !isAlive(pid), { what: 'main exit' })
  const killer = spawn(RUN_BG, ['kill', jobId], { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: 'ignore' })
  // kill does not wait for a stopped supervisor, so it may be done before the test looks.
  const killerDone = new Promise((resolve) => killer.on('exit', resolve))
  await waitFor(() => fs.existsSync(path.join(home, 'jobs', jobId, 'kill-request.json')), { what: 'kill request' })
  // The kill's SIGUSR1 waits, pending, beside the SIGCHLD of the exit.
  const pendingUsr1 = () => {
    const line = fs.readFileSync(`/proc/${supervisor.pid}/status`, 'utf8').match(/^ShdPnd:\s*([0-9a-f]+)$/m)
    return line && (BigInt(`0x${line[1]}`) & (1n << 9n)) !== 0n
  }
  await waitFor(pendingUsr1, { what: 'the kill request signal to be pending' })
  process.kill(supervisor.pid, 'SIGCONT')
  await killerDone
  const job = await waitFor(() => {
    const seen = checkJson(home, jobId)
    return seen.status !== 'running' && seen
  }, { what: 'the resumed supervisor to record the end' })
  assert.equal(job.status, 'success')
  assert.equal(job.exitCode, 0)
})

test('--timeout also ends what outlives the main process', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'sleep 600 & echo bye'], ['--timeout', '1s'])
  assert.equal(runBg(home, ['wait', jobId]).code, 0)
  const lingering = await waitFor(() => checkJson(home, jobId).lingering[0], { what: 'the lingering sleep' })
  const started = { pid: lingering.pid, start: processStart(lingering.pid) }
  await waitFor(() => anySurvivor([started]).length === 0, { what: 'the deadline kill', timeout: 15_000 })
  assert.equal(checkJson(home, jobId).status, 'success', 'the main process had ended well before the deadline')
})

test('logs --follow misses nothing across rotations', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 3 } })
  const { jobId } = startJob(home, ['sh', '-c',
    'sleep 0.5; for i in $(seq 1 20); do seq $((i*1000-999)) $((i*1000)); sleep 0.05; done'])
  const follower = spawn(RUN_BG, ['logs', jobId, '-n', '0', '--follow'], {
    env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  follower.stdout.on('data', (d) => (out += d))
  await new Promise((resolve) => follower.on('close', resolve))
  const lines = out.trim().split('\n').map(Number)
  assert.equal(lines.at(-1), 20000)
  const first = lines[0]
  assert.ok(first <= 1000, `started following before most output (${first})`)
  assert.deepEqual(lines, Array.from({ length: 20001 - first }, (_, i) => first + i), 'no line skipped or repeated')
})
