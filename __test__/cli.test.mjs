// Drives the real run-bg binary against a private home per test.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import {
  makeHome, runBg, startJob, readRegistry, checkJson, waitFor, isAlive, killPid, logBytes, waitForQuiet, processStart, RUN_BG,
} from './helpers.mjs'

test('a job that succeeds: ack, wait exit 0, check shows status and its lines', (t) => {
  const { home } = makeHome(t)
  const ack = runBg(home, ['--label', 'demo', '--', 'sh', '-c', 'echo hi; echo there'])
  assert.equal(ack.code, 0, ack.stderr)
  assert.ok(ack.stdout.length < 200 && ack.stdout.trim().split('\n').length === 1, `one short line: ${ack.stdout}`)
  const id = ack.stdout.match(/started (\S+) \(pid (\d+)\)/)[1]
  assert.match(id, /^demo-[0-9a-f]{6}$/)
  const wait = runBg(home, ['wait', id])
  assert.equal(wait.code, 0, wait.stdout + wait.stderr)
  const check = runBg(home, ['check', id])
  assert.equal(check.code, 0)
  const lines = check.stdout.trim().split('\n')
  assert.match(lines[0], new RegExp(`^${id}: success \\(exit 0\\)`))
  assert.deepEqual(lines.slice(1), ['hi', 'there'])
  const json = checkJson(home, id)
  assert.equal(json.status, 'success')
  assert.equal(json.exitCode, 0)
  assert.equal(json.label, 'demo')
  assert.ok(json.durationMs >= 0 && json.endedAt >= json.startedAt)
  assert.deepEqual(json.tail, ['hi', 'there'])
})

test('a job that fails with exit 3: wait exits 3, status failed', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'echo boom >&2; exit 3'])
  const wait = runBg(home, ['wait', jobId])
  assert.equal(wait.code, 3)
  const json = checkJson(home, jobId)
  assert.equal(json.status, 'failed')
  assert.equal(json.exitCode, 3)
  assert.deepEqual(json.tail, ['boom'])
})

test('a job that dies of a signal nobody here sent is failed with the signal', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'kill -SEGV $$'])
  const wait = runBg(home, ['wait', jobId])
  assert.equal(wait.code, 128 + 11)
  const json = checkJson(home, jobId)
  assert.equal(json.status, 'failed')
  assert.equal(json.signal, 'SIGSEGV')
  assert.equal('exitCode' in json, false, 'no exit code: left out, as in checkJob()')
})

test('stdout and stderr share one log in the order written; bytes survive', (t) => {
  const { home } = makeHome(t)
  const { jobId, logPath } = startJob(home, ['sh', '-c', "echo 1; echo 2 >&2; echo 3; printf '\\377\\376 raw\\n'"])
  assert.equal(runBg(home, ['wait', jobId]).code, 0)
  const bytes = fs.readFileSync(logPath)
  assert.deepEqual(bytes, Buffer.concat([Buffer.from('1\n2\n3\n'), Buffer.from([0xff, 0xfe]), Buffer.from(' raw\n')]))
  assert.equal((fs.statSync(logPath).mode & 0o777).toString(8), '600')
  assert.equal((fs.statSync(home).mode & 0o777).toString(8), '700')
})

test('the CLI returns while its job runs, and the end is recorded later', (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sh', '-c', 'sleep 3; echo late'])
  assert.ok(isAlive(pid), 'run-bg returned while the job runs')
  assert.equal(checkJson(home, jobId).status, 'running')
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '20s']).code, 0)
  const json = checkJson(home, jobId)
  assert.equal(json.status, 'success')
  assert.deepEqual(json.tail, ['late'])
})

test('label, cwd, env, owner and context reach the job and the record', (t) => {
  const { home } = makeHome(t)
  const dir = fs.mkdtempSync(path.join(home, 'cwd-'))
  const { jobId } = startJob(home, ['sh', '-c', 'pwd; echo "$GREETING"; echo "$PROC_MANAGER_JOB"'], [
    '--label', 'env test', '--cwd', dir, '--env', 'GREETING=hello world', '--owner', 'agent-7',
    '--context', '{"task": 12}',
  ])
  assert.match(jobId, /^env-test-/)
  runBg(home, ['wait', jobId])
  const json = checkJson(home, jobId)
  assert.deepEqual(json.tail, [fs.realpathSync(dir), 'hello world', jobId])
  assert.equal(json.owner, 'agent-7')
  assert.deepEqual(json.context, { task: 12 })
  const mine = JSON.parse(runBg(home, ['list', '--owner', 'agent-7', '--json']).stdout)
  assert.deepEqual(mine.map((j) => j.jobId), [jobId])
  assert.deepEqual(JSON.parse(runBg(home, ['list', '--owner', 'nobody', '--json']).stdout), [])
})

test('a missing program or a bad --cwd fails at once and is recorded as failed', (t) => {
  const { home } = makeHome(t)
  const missing = runBg(home, ['--', 'no-such-program-xyz', 'arg'])
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /cannot start `no-such-program-xyz`: command not found in PATH/)
  const badCwd = runBg(home, ['--cwd', '/no/such/dir', '--', 'ls'])
  assert.equal(badCwd.code, 1)
  assert.match(badCwd.stderr, /working directory `\/no\/such\/dir` does not exist/)
  const jobs = readRegistry(home)
  assert.deepEqual(jobs.map((j) => j.status), ['failed', 'failed'])
  assert.match(jobs[0].error, /command not found/)
  const check = runBg(home, ['check', jobs[1].id])
  assert.match(check.stdout, /failed/)
  assert.match(check.stdout, /does not exist/)
})

test('kill: SIGTERM to the group, and it returns as soon as the job is gone', (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sh', '-c', 'sleep 60 & sleep 60; wait'])
  const before = Date.now()
  const kill = runBg(home, ['kill', jobId, '--grace', '10s'])
  const took = Date.now() - before
  assert.equal(kill.code, 0, kill.stderr)
  assert.ok(took < 5000, `kill took ${took} ms; the job exits on SIGTERM, so no grace wait`)
  const json = checkJson(home, jobId)
  assert.equal(json.status, 'killed')
  assert.equal(json.signal, 'SIGTERM')
  assert.ok(!isAlive(pid))
  const again = runBg(home, ['kill', jobId])
  assert.equal(again.code, 0)
  assert.match(again.stdout, /not running \(killed\)/)
})

test('kill: a process that ignores SIGTERM gets SIGKILL after the grace period; --force skips it', (t) => {
  const { home } = makeHome(t)
  const stubborn = startJob(home, ['sh', '-c', 'trap "" TERM; echo ready; while :; do sleep 1; done'])
  await_ready(home, stubborn.jobId)
  const before = Date.now()
  assert.equal(runBg(home, ['kill', stubborn.jobId, '--grace', '700ms']).code, 0)
  const took = Date.now() - before
  assert.ok(took >= 650, `waited the grace period (${took} ms)`)
  const json = checkJson(home, stubborn.jobId)
  assert.equal(json.status, 'killed')
  assert.equal(json.signal, 'SIGKILL')
  assert.ok(!isAlive(stubborn.pid))

  const forced = startJob(home, ['sh', '-c', 'trap "" TERM; echo ready; while :; do sleep 1; done'])
  await_ready(home, forced.jobId)
  const start2 = Date.now()
  assert.equal(runBg(home, ['kill', forced.jobId, '--force', '--grace', '30s']).code, 0)
  assert.ok(Date.now() - start2 < 5000)
  assert.equal(checkJson(home, forced.jobId).signal, 'SIGKILL')
})

function await_ready(home, id) {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (checkJson(home, id).tail.includes('ready')) return
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
  }
  throw new Error(`${id} never printed ready`)
}

test('--timeout kills the job and records timeout', (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '30'], ['--timeout', '300ms'])
  const wait = runBg(home, ['wait', jobId, '--timeout', '20s'])
  assert.notEqual(wait.code, 124)
  const json = checkJson(home, jobId)
  assert.equal(json.status, 'timeout')
  assert.ok(json.durationMs >= 300 && json.durationMs < 10_000, `${json.durationMs}`)
  assert.ok(!isAlive(pid))
})

test('wait --timeout gives up with 124 and leaves the job running', (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '30'])
  const wait = runBg(home, ['wait', jobId, '--timeout', '200ms'])
  assert.equal(wait.code, 124)
  assert.ok(isAlive(pid))
  assert.equal(checkJson(home, jobId).status, 'running')
})

test('50 MB of output with max_bytes 1 MiB and keep 2 stays under 3 MiB; check shows the last lines', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 1048576, keep: 2 } })
  // seq 1 7000000 prints about 52 MB
  const { jobId, logPath } = startJob(home, ['seq', '1', '7000000'])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '120s']).code, 0)
  await waitForQuiet(home) // the supervisor has finished dropping rotated-out files
  const used = logBytes(logPath)
  assert.ok(used <= 3 * 1048576, `disk use ${used}`)
  assert.ok(used > 2 * 1048576, `rotated files are kept (${used})`)
  assert.ok(fs.existsSync(`${logPath}.2`) && !fs.existsSync(`${logPath}.3`))
  const json = checkJson(home, jobId, ['-n', '3'])
  assert.deepEqual(json.tail, ['6999998', '6999999', '7000000'])
  // The last 200,000 lines span the rotated files, in order.
  const many = checkJson(home, jobId, ['-n', '200000']).tail
  assert.equal(many.length, 200_000)
  assert.equal(many[0], '6800001')
  assert.ok(many.every((line, i) => line === String(6800001 + i)))
  assert.equal(runBg(home, ['check', jobId, '--grep', '^699999[0-9]$', '-n', '2', '--json']).code, 0)
  const grep = checkJson(home, jobId, ['--grep', '^699999[0-9]$', '-n', '2'])
  assert.deepEqual(grep.tail, ['6999998', '6999999'])
})

test('logs prints the tail, --all the whole log across rotated files', (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 4096, keep: 5 } })
  const { jobId } = startJob(home, ['seq', '1', '3000'])
  runBg(home, ['wait', jobId])
  const tail = runBg(home, ['logs', jobId, '-n', '2'])
  assert.equal(tail.stdout, '2999\n3000\n')
  const all = runBg(home, ['logs', jobId, '--all'])
  const lines = all.stdout.trim().split('\n')
  // 5 rotated files + current, 4 KiB each, hold the newest ~24 KiB of 13.9 KB: all of it.
  assert.equal(lines.length, 3000)
  assert.equal(lines[0], '1')
  assert.equal(lines.at(-1), '3000')
})

test('the registry keeps at most max_jobs ended jobs, evicting the oldest with their logs', (t) => {
  const { home } = makeHome(t, { registry: { max_jobs: 4 } })
  const running = startJob(home, ['sleep', '30'])
  const finished = []
  for (let i = 0; i < 6; i++) {
    const job = startJob(home, ['true'])
    runBg(home, ['wait', job.jobId])
    finished.push(job)
  }
  const ids = readRegistry(home).map((j) => j.id)
  assert.equal(ids.length, 5, 'the running job and the 4 newest ended ones')
  assert.ok(ids.includes(running.jobId), 'the running job is never evicted')
  assert.deepEqual(ids.slice(1), finished.slice(2).map((j) => j.jobId))
  assert.ok(!fs.existsSync(path.dirname(finished[0].logPath)), 'evicted job directory deleted')
  assert.equal(runBg(home, ['check', finished[0].jobId]).code, 1)
})

test('running jobs beyond max_jobs do not push out the outcome of a job that just ended', async (t) => {
  // The cap counts ended jobs: with more jobs running than it, each end was
  // forgotten as it was recorded, and `check`, `summary` and `--yield` of it
  // said "no job with id".
  const { home } = makeHome(t, { registry: { max_jobs: 2 } })
  for (let i = 0; i < 3; i++) startJob(home, ['sleep', '30'])
  const failing = startJob(home, ['sh', '-c', 'echo compile error; exit 3'])
  assert.equal(runBg(home, ['wait', failing.jobId]).code, 3)
  const check = runBg(home, ['check', failing.jobId, '--json'])
  assert.equal(check.code, 0, check.stderr)
  assert.deepEqual([JSON.parse(check.stdout).status, JSON.parse(check.stdout).exitCode], ['failed', 3])
  // `wait` and `check` count as looking at an end; `list` does not.
  const unseen = startJob(home, ['sh', '-c', 'exit 5'])
  const listed = () => JSON.parse(runBg(home, ['list', '--all', '--json']).stdout).find((j) => j.jobId === unseen.jobId)
  await waitFor(() => listed()?.status === 'failed', { what: 'the unseen job to end' })
  assert.match(runBg(home, ['summary']).stdout, new RegExp(`${unseen.jobId}.*exit 5`))
  const yielded = runBg(home, ['--yield', '20s', '--', 'sh', '-c', 'exit 4'])
  assert.equal(yielded.code, 4, yielded.stderr)
  assert.match(yielded.stdout, /failed \(exit 4\)/)
  // A long job that ends after the cap's worth of short ones keeps its outcome too.
  const long = startJob(home, ['sh', '-c', 'sleep 1; exit 7'])
  for (let i = 0; i < 3; i++) runBg(home, ['wait', startJob(home, ['true']).jobId])
  assert.equal(runBg(home, ['wait', long.jobId]).code, 7)
  assert.equal(checkJson(home, long.jobId).exitCode, 7, 'the end just recorded is not the one forgotten')
  const kept = JSON.parse(runBg(home, ['list', '--all', '--json']).stdout)
  assert.deepEqual(kept.map((j) => j.status).sort(), ['failed', 'running', 'running', 'running', 'success'], 'the 3 running and the 2 newest ended')
})

test('a corrupt jobs.json is moved aside, never overwritten, and running jobs survive', async (t) => {
  const { home } = makeHome(t)
  const running = startJob(home, ['sh', '-c', 'sleep 1; echo survived; exit 4'], ['--label', 'survivor'])
  const done = startJob(home, ['true'])
  runBg(home, ['wait', done.jobId])
  // Its supervisor records the end in job.json (what `wait` sees) before the
  // registry: gone, it cannot be the one that finds the garbage below.
  const doneSupervisor = readRegistry(home).find((j) => j.id === done.jobId).supervisor
  await waitFor(() => processStart(doneSupervisor.pid) !== String(doneSupervisor.start_ticks), { what: "the ended job's supervisor to exit" })
  const garbage = '{"version": 1, "jobs": [ {"id": "trunc'
  fs.writeFileSync(path.join(home, 'jobs.json'), garbage)

  const list = runBg(home, ['list', '--json'])
  assert.equal(list.code, 0, list.stderr)
  assert.match(list.stderr, /could not be read.*moved it to .*jobs\.json\.corrupt-\d+/)
  const listed = JSON.parse(list.stdout)
  assert.deepEqual(listed.map((j) => j.jobId).sort(), [running.jobId, done.jobId].sort())
  assert.equal(listed.find((j) => j.jobId === running.jobId).status, 'running')
  const aside = fs.readdirSync(home).filter((n) => n.startsWith('jobs.json.corrupt-'))
  assert.equal(aside.length, 1)
  assert.equal(fs.readFileSync(path.join(home, aside[0]), 'utf8'), garbage)
  // The running job's end still lands in the rebuilt registry.
  assert.equal(runBg(home, ['wait', running.jobId, '--timeout', '20s']).code, 4)
  assert.deepEqual(checkJson(home, running.jobId).tail, ['survived'])
})

test('bad input gets a clear error and changes nothing', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['true'])
  runBg(home, ['wait', jobId])
  const registry = () => fs.readFileSync(path.join(home, 'jobs.json'))
  const before = registry()
  const cases = [
    [['check', '../../etc'], 2, /invalid job id `\.\.\/\.\.\/etc`: a job id is 1 to 64 characters/],
    [['check', ''], 2, /invalid job id ``/],
    [['kill', 'x'.repeat(200)], 2, /invalid job id `x{40}…`/],
    [['wait', 'a/b'], 2, /invalid job id/],
    [['logs', '..'], 2, /invalid job id/],
    [['check', 'no-such-job'], 1, /no job with id `no-such-job`/],
    [['kill', 'no-such-job'], 1, /no job with id/],
    [['wait', jobId, '--timeout', '5'], 2, /bad duration `5`: give a number with a unit/],
    [['kill', jobId, '--grace', 'soon'], 2, /--grace: bad duration `soon`/],
    [['--timeout=-1s', '--', 'true'], 2, /bad duration `-1s`/],
    [['--env', 'NOEQUALS', '--', 'true'], 2, /bad --env `NOEQUALS`: expected KEY=VALUE/],
    [['--env', '=x', '--', 'true'], 2, /bad --env `=x`/],
    [['--'], 2, /no command given: put the program and its arguments after `--`/],
    [['--label', 'x'], 2, /no command given/],
    [['--context', '{bad', '--', 'true'], 2, /bad --context: not valid JSON/],
    [['list', '--status', 'done'], 2, /--status: bad status `done`: expected one of running, paused, success/],
    [['check', jobId, '--grep', '('], 2, /bad --grep pattern/],
    [['npm', 'install'], 2, /unknown command `npm`; to run a program, put it after `--`/],
    // One message, with the command as it should be, not clap's error and then a hint.
    [['--label', 'x', 'sleep', '1'], 2, /^run-bg: `sleep` is not an option: the program and its arguments go after `--`: run-bg --label x -- sleep 1\n$/],
    [['--restart', 'always', '--max-restarts', '99999999999999999999', '--', 'true'], 2, /`99999999999999999999` is not a number of restarts: give a whole number from 0 to 4294967295/],
    [['list', '--owner', ''], 2, /^run-bg: bad owner "": give 1 to 200 printable characters on one line\n$/],
    [['summary', '--owner', ' '], 2, /bad owner " "/],
    [['logs', jobId, '--since', '-1'], 2, /^run-bg: --since takes no negative cursor: give one a read gave/],
    [['--label', 'sleep', 'sleep', '10'], 2, /^run-bg: `sleep` is not an option: the program and its arguments go after `--`: run-bg --label sleep -- sleep 10\n$/],
    // `--yield` took `sleep` for its duration: no placing of `--` holds, so the form is said.
    [['--yield', 'sleep', '1'], 2, /^run-bg: `1` is not an option: the program and its arguments go after `--`: run-bg \[options\] -- <program> \[args\.\.\.\]\n$/],
    [['--yield', '5s', 'sleep', '1'], 2, /^run-bg: `sleep` is not an option: the program and its arguments go after `--`: run-bg --yield 5s -- sleep 1\n$/],
    [['--timeout', '5s', 'make'], 2, /^run-bg: `make` is not an option: the program and its arguments go after `--`: run-bg --timeout 5s -- make\n$/],
  ]
  for (const [args, code, message] of cases) {
    const r = runBg(home, args)
    assert.equal(r.code, code, `${JSON.stringify(args)}: ${r.stderr}`)
    assert.match(r.stderr, message, JSON.stringify(args))
    assert.deepEqual(registry(), before, `${JSON.stringify(args)} left the registry as it was`)
  }
  assert.deepEqual(fs.readdirSync(path.join(home, 'jobs')), [jobId], 'no job directory was made')
})

test('an unreadable config.json names the wrong key and starts nothing', (t) => {
  const { home } = makeHome(t)
  const cases = [
    [{ logs: { max_bytes: 'big' } }, /config\.json: key `logs\.max_bytes`: invalid type/],
    [{ logs: { max_byte: 5 } }, /key `logs\.max_byte`: unknown field `max_byte`, expected `max_bytes` or `keep`/],
    [{ registry: { max_jobs: 0 } }, /key `registry\.max_jobs`: must be at least 1/],
    [{ kill: { grace_ms: -1 } }, /key `kill\.grace_ms`/],
  ]
  for (const [config, message] of cases) {
    fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify(config))
    const r = runBg(home, ['--', 'true'])
    assert.equal(r.code, 2, r.stderr)
    assert.match(r.stderr, message)
  }
  fs.writeFileSync(path.join(home, 'config.json'), '{ "logs": ')
  const r = runBg(home, ['list'])
  assert.equal(r.code, 2)
  assert.match(r.stderr, /config\.json: not valid JSON: /)
  assert.deepEqual(readRegistry(home), [])
})

test('a config.json broken while jobs run never blocks killing them: defaults, with a warning', (t) => {
  const { home } = makeHome(t)
  const { jobId, pid } = startJob(home, ['sleep', '600'])
  fs.writeFileSync(path.join(home, 'config.json'), '{ "kill": { "grace_ms": "soon" } }')
  assert.equal(runBg(home, ['list']).code, 2, 'other commands still refuse it')
  const kill = runBg(home, ['kill', jobId])
  assert.equal(kill.code, 0, kill.stderr)
  assert.match(kill.stderr, /^run-bg: warning: config file .*config\.json.*grace_ms.*; killing with the default settings$/m)
  assert.ok(!isAlive(pid))
  fs.writeFileSync(path.join(home, 'config.json'), '{}')
  assert.equal(checkJson(home, jobId).status, 'killed')
})

test('50 jobs started at once and ending together all land with the right status', async (t) => {
  const { home } = makeHome(t, { registry: { max_jobs: 200 } })
  const go = path.join(home, 'go')
  const { spawn } = await import('node:child_process')
  const starts = Array.from({ length: 50 }, (_, i) => new Promise((resolve, reject) => {
    const child = spawn(
      process.env.RUN_BG_BIN || path.join(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), '..', 'native', 'run-bg'),
      ['--json', '--label', `n${i}`, '--', 'sh', '-c', `while [ ! -e ${go} ]; do sleep 0.02; done; exit ${i % 4}`],
      { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`start ${i} exited ${code}`))))
  }))
  const jobs = await Promise.all(starts)
  assert.equal(new Set(jobs.map((j) => j.jobId)).size, 50)
  assert.equal(readRegistry(home).length, 50)
  fs.writeFileSync(go, '')
  const wait = runBg(home, ['wait', ...jobs.map((j) => j.jobId), '--timeout', '60s'])
  assert.notEqual(wait.code, 124, wait.stderr)
  const recorded = new Map(readRegistry(home).map((j) => [j.id, j]))
  assert.equal(recorded.size, 50)
  jobs.forEach((job, i) => {
    const entry = recorded.get(job.jobId)
    assert.equal(entry.exit_code, i % 4, job.jobId)
    assert.equal(entry.status, i % 4 === 0 ? 'success' : 'failed')
  })
})

test('a reader that goes away (run-bg … | head) ends run-bg quietly, as on SIGPIPE, without a panic', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c', 'seq 1 200000'])
  assert.equal(runBg(home, ['wait', jobId]).code, 0)
  const { spawn, spawnSync } = await import('node:child_process')
  for (const args of [['logs', jobId, '--all'], ['logs', jobId, '-n', '100000'], ['check', jobId, '-n', '100000']]) {
    // A shell pipeline: run-bg writes into a pipe whose reader has exited.
    const shell = spawnSync('sh', ['-c', '{ "$0" "$@" 2>"$PROC_MANAGER_HOME/err"; echo $? > "$PROC_MANAGER_HOME/status"; } | head -1', RUN_BG, ...args],
      { env: { ...process.env, PROC_MANAGER_HOME: home }, encoding: 'utf8' })
    assert.match(shell.stdout, /^(\d+|\S+: success .*)\n$/, args.join(' '))
    assert.equal(fs.readFileSync(path.join(home, 'err'), 'utf8'), '', `${args.join(' ')}: nothing on stderr`)
    assert.equal(fs.readFileSync(path.join(home, 'status'), 'utf8').trim(), '141', `${args.join(' ')}: ended by SIGPIPE`)
    // Node's child stdio is a socketpair: closing it gives ECONNRESET, not EPIPE.
    const reader = spawn(RUN_BG, args, { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    reader.stderr.on('data', (d) => (stderr += d))
    reader.stdout.once('data', () => reader.stdout.destroy())
    const [code, signal] = await new Promise((resolve) => reader.on('close', (c, s) => resolve([c, s])))
    assert.equal(stderr, '', `${args.join(' ')}: nothing on stderr`)
    assert.deepEqual([code, signal], [null, 'SIGPIPE'], args.join(' '))
  }
})

test("wait's exit status: 124 when its own --timeout passes first; for several jobs 0 only when all succeeded", (t) => {
  const { home } = makeHome(t)
  const slow = startJob(home, ['sleep', '300'])
  const timedOut = runBg(home, ['wait', slow.jobId, '--timeout', '200ms'])
  assert.equal(timedOut.code, 124, timedOut.stderr)
  assert.match(timedOut.stderr, /wait timed out; the job is still running/)
  const timedOutJson = runBg(home, ['wait', slow.jobId, '--timeout', '200ms', '--json'])
  assert.equal(timedOutJson.code, 124)
  assert.equal(timedOutJson.stderr, '', '--json says it in the JSON only')
  assert.equal(JSON.parse(timedOutJson.stdout).timedOut, true)

  const ok = startJob(home, ['sh', '-c', 'exit 0'])
  const three = startJob(home, ['sh', '-c', 'exit 3'])
  assert.equal(runBg(home, ['wait', ok.jobId, three.jobId]).code, 1, 'one failed among several: 1, not its 3')
  assert.equal(runBg(home, ['wait', ok.jobId, ok.jobId]).code, 0)
  assert.equal(runBg(home, ['wait', three.jobId]).code, 3)
  assert.equal(runBg(home, ['kill', slow.jobId]).code, 0)
})

test('logs --since prints a 40 MB log as it reads it: its memory stays far below the log size', async (t) => {
  const { home } = makeHome(t, { logs: { max_bytes: 64 * 1024 * 1024, keep: 1 } })
  const line = 'a line of output, forty bytes in all ..'
  const id = startJob(home, ['sh', '-c', `yes '${line}' | head -c 40000000`]).jobId
  await waitFor(() => checkJson(home, id).status === 'success', { what: 'the job to end', timeout: 60_000 })
  const size = fs.statSync(path.join(home, 'jobs', id, 'output.log')).size
  assert.equal(size, 40_000_000)

  const { spawn } = await import('node:child_process')
  const child = spawn(RUN_BG, ['logs', id, '--since', '0'], { env: { ...process.env, PROC_MANAGER_HOME: home } })
  t.after(() => { if (child.exitCode === null && child.pid > 1) child.kill('SIGKILL') })
  let received = 0
  let peakKb = null
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise((resolve) => child.on('close', resolve))
  child.stdout.on('data', (chunk) => {
    received += chunk.length
    // With 512 KB still to come, the child is alive (a pipe holds far less):
    // its peak so far covers reading 99% of the log.
    if (peakKb === null && received >= size - 512 * 1024) {
      const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8')
      peakKb = Number(status.match(/^VmHWM:\s+(\d+) kB/m)[1])
    }
  })
  const code = await exited
  assert.equal(code, 0, stderr)
  assert.equal(received, size, 'every byte: 1,000,000 lines of 40 bytes')
  assert.match(stderr, new RegExp(`^cursor ${size}: run-bg logs ${id} --since ${size} for what comes next\\n$`))
  t.diagnostic(`run-bg logs --since: peak ${peakKb} kB for a ${size}-byte log`)
  assert.ok(peakKb < 20 * 1024, `peak memory ${peakKb} kB while printing a ${size}-byte log`)
})

test('`run-bg help` says how to start a job and lists every command, as `--help` does', (t) => {
  const { home } = makeHome(t)
  const help = runBg(home, ['help'])
  assert.equal(help.code, 0, help.stderr)
  assert.equal(help.stdout, runBg(home, ['--help']).stdout, '`help` and `--help` are one text')
  assert.match(help.stdout, /run-bg \[options\] -- <program> \[args\.\.\.\]/, 'the start form, the first thing a new user needs')
  assert.match(help.stdout, /--label <NAME>/)
  for (const command of ['check', 'logs', 'kill', 'hooks', 'hook']) {
    assert.match(help.stdout, new RegExp(`run-bg ${command}\\b`), command)
  }
  const kill = runBg(home, ['help', 'kill'])
  assert.equal(kill.code, 0, kill.stderr)
  assert.equal(kill.stdout, runBg(home, ['kill', '--help']).stdout, '`help <command>` is that command\'s help')
  const unknown = runBg(home, ['help', 'nosuch'])
  assert.equal(unknown.code, 2)
  assert.match(unknown.stderr, /nosuch/)
})

test('kill of a running job whose job.json is unreadable ends its processes before anything is removed; prune leaves it', async (t) => {
  // A start writes only its own job.json: garbled before any registry write,
  // nothing else names the job. kill removed its directory and signalled
  // nothing, and the job ran on where no verb could find or stop it.
  const { home } = makeHome(t)
  const job = startJob(home, ['sleep', '300'], ['--label', 'garbled'])
  const record = path.join(home, 'jobs', job.jobId, 'job.json')
  const supervisorPid = JSON.parse(fs.readFileSync(record, 'utf8')).supervisor.pid
  t.after(() => { killPid(job.pid); killPid(supervisorPid) })
  assert.ok(!fs.existsSync(path.join(home, 'jobs.json')) || !fs.readFileSync(path.join(home, 'jobs.json'), 'utf8').includes(job.jobId), 'the test needs a job the registry does not hold')
  fs.writeFileSync(record, 'garbage')

  const pruned = runBg(home, ['prune', '--json'])
  assert.equal(pruned.code, 0, pruned.stderr)
  assert.ok(!JSON.parse(pruned.stdout).removed?.includes(job.jobId), `prune leaves a job whose processes run: ${pruned.stdout}`)
  assert.ok(fs.existsSync(path.dirname(record)) && isAlive(job.pid))

  const killed = runBg(home, ['kill', job.jobId, '--json'])
  assert.equal(killed.code, 0, killed.stderr)
  const [outcome] = JSON.parse(killed.stdout)
  assert.equal(outcome.signalled, true, outcome.message)
  await waitFor(() => !isAlive(job.pid) && !isAlive(supervisorPid), { what: 'the job and its supervisor to end' })
  // Its supervisor wrote the end over the garbage: the job reads killed.
  assert.equal(checkJson(home, job.jobId).status, 'killed', outcome.message)
})

test('kill --all ends a running job whose job.json is unreadable, beside the others', async (t) => {
  const { home } = makeHome(t)
  const plain = startJob(home, ['sleep', '300'])
  const job = startJob(home, ['sleep', '300'], ['--label', 'garbled'])
  const record = path.join(home, 'jobs', job.jobId, 'job.json')
  const supervisorPid = JSON.parse(fs.readFileSync(record, 'utf8')).supervisor.pid
  t.after(() => { killPid(job.pid); killPid(supervisorPid); killPid(plain.pid) })
  fs.writeFileSync(record, '{"version": 99}')
  const killed = runBg(home, ['kill', '--all', '--json'])
  assert.equal(killed.code, 0, killed.stderr)
  const outcomes = JSON.parse(killed.stdout)
  assert.deepEqual(outcomes.map((o) => o.jobId).sort(), [plain.jobId, job.jobId].sort(), killed.stdout)
  await waitFor(() => !isAlive(job.pid) && !isAlive(supervisorPid) && !isAlive(plain.pid), { what: 'both jobs to end' })
  assert.equal(checkJson(home, job.jobId).status, 'killed')
  // Selected by owner, an unreadable record is not taken: it names no owner.
  const other = startJob(home, ['sleep', '300'], ['--label', 'garbled2'])
  t.after(() => killPid(other.pid))
  fs.writeFileSync(path.join(home, 'jobs', other.jobId, 'job.json'), 'garbage')
  assert.equal(runBg(home, ['kill', '--all', '--owner', 'someone']).code, 0)
  assert.ok(isAlive(other.pid), 'kill --all --owner leaves a job it cannot tell the owner of')
  assert.equal(runBg(home, ['kill', other.jobId]).code, 0)
  await waitFor(() => !isAlive(other.pid), { what: 'the second garbled job to end' })
})

test('kill --all still ends every job when jobs.json cannot be read (a newer version\'s, a directory in its place)', async (t) => {
  // A session-end hook runs `kill --all`: after a downgrade, or with the
  // registry broken, it killed nothing and left every job running.
  const { home } = makeHome(t)
  const jobs = [startJob(home, ['sleep', '300']), startJob(home, ['sleep', '300'])]
  t.after(() => jobs.forEach((j) => killPid(j.pid)))
  runBg(home, ['list']) // both taken into jobs.json
  const registry = path.join(home, 'jobs.json')
  const held = JSON.parse(fs.readFileSync(registry, 'utf8'))
  fs.writeFileSync(registry, JSON.stringify({ ...held, version: 2 }))
  assert.notEqual(runBg(home, ['list']).code, 0, 'the test needs a registry this version refuses')
  const killed = runBg(home, ['kill', '--all', '--json'])
  assert.equal(killed.code, 0, killed.stderr)
  assert.match(killed.stderr, /warning: .*jobs\.json.*newer/)
  assert.deepEqual(JSON.parse(killed.stdout).map((o) => [o.jobId, o.status]).sort(), jobs.map((j) => [j.jobId, 'killed']).sort())
  await waitFor(() => jobs.every((j) => !isAlive(j.pid)), { what: 'both jobs to end' })
  assert.equal(fs.readFileSync(registry, 'utf8'), JSON.stringify({ ...held, version: 2 }), 'a newer version\'s registry is left as it was')
})

test('kill and kill --all end a running job whose job.json and jobs.json both cannot be read (a downgrade)', async (t) => {
  const { home } = makeHome(t)
  const plain = startJob(home, ['sleep', '300'])
  const job = startJob(home, ['sleep', '300'], ['--label', 'garbled'])
  const other = startJob(home, ['sleep', '300'], ['--label', 'garbled2'])
  const supervisors = [job, other].map((j) => JSON.parse(fs.readFileSync(path.join(home, 'jobs', j.jobId, 'job.json'), 'utf8')).supervisor.pid)
  t.after(() => [plain.pid, job.pid, other.pid, ...supervisors].forEach(killPid))
  runBg(home, ['list']) // all three in jobs.json
  const registry = path.join(home, 'jobs.json')
  fs.writeFileSync(registry, JSON.stringify({ ...JSON.parse(fs.readFileSync(registry, 'utf8')), version: 999 }))
  for (const j of [job, other]) fs.writeFileSync(path.join(home, 'jobs', j.jobId, 'job.json'), '{"version": 999}')
  const one = runBg(home, ['kill', other.jobId, '--json'])
  assert.equal(one.code, 0, one.stderr)
  await waitFor(() => !isAlive(other.pid), { what: 'the job killed by id to end' })
  const all = runBg(home, ['kill', '--all', '--json'])
  assert.equal(all.code, 0, all.stderr)
  await waitFor(() => !isAlive(plain.pid) && !isAlive(job.pid), { what: 'every job to end' })
  assert.ok(JSON.parse(all.stdout).some((o) => o.jobId === job.jobId), all.stdout)
})
