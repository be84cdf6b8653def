// Servers (issue 15): readiness (--ready-log/-port/-url, --ready-timeout,
// --yield and runYield returning once ready, wait --ready, a server that
// ends before it is ready) and wake-ups on a pattern (--notify-on).
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import os from 'node:os'
import { spawnSync } from 'node:child_process'
import { RUN_BG, makeHome, runBg, checkJson, connectMcp, freePort, killPid, pm, readRegistry, waitFor, waitForQuiet } from './helpers.mjs'
import { startInterruptService } from './fixtures/interrupt-service.mjs'

// A dev server in a few lines: says it starts, waits DELAY ms, then listens
// on PORT and prints when (its own clock). Modes: `serve` answers 200,
// `500` answers 500, `exit` ends with exit 0 instead of listening.
const SERVER = `
const http = require('node:http')
const [port, delay, mode = 'serve'] = process.argv.slice(2)
console.log('starting the dev server')
setTimeout(() => {
  if (mode === 'exit') {
    console.log('Error: listen EADDRINUSE: address already in use')
    process.exit(0)
  }
  const server = http.createServer((req, res) => {
    res.writeHead(mode === '500' ? 500 : 200)
    res.end('ok')
  })
  server.listen(Number(port), '127.0.0.1', () => console.log('listening on ' + port + ' at ' + Date.now()))
}, Number(delay))
`

function serverScript(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-ready-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'server.cjs')
  fs.writeFileSync(file, SERVER)
  return file
}

/**
 * When the server says it listened (its clock), from the job's log. The
 * line may trail the readiness a little: the port is open once listen(2)
 * returns, before the server's callback prints and the supervisor copies
 * the line, so it is waited for (null if it never comes).
 */
async function listenedAt(logPath) {
  const said = () => fs.readFileSync(logPath, 'utf8').match(/listening on \d+ at (\d+)/)
  const match = await waitFor(said, { timeout: 5_000, what: 'the server\'s "listening" line' }).catch(() => null)
  return match ? Number(match[1]) : null
}

function killJob(home, id) {
  const job = readRegistry(home).find((j) => j.id === id)
  if (job?.main) killPid(job.main.pid)
}

/** Starts the server with `--yield 30s` and `flags`; returns the answer and when it came. */
function yieldStart(t, home, port, flags, { delay = 1500, mode = 'serve' } = {}) {
  const script = serverScript(t)
  const before = Date.now()
  const r = runBg(home, ['--yield', '30s', ...flags, '--json', '--', process.execPath, script, String(port), String(delay), mode])
  const returned = Date.now()
  const out = JSON.parse(r.stdout)
  t.after(() => killJob(home, out.jobId))
  return { r, out, before, returned }
}

for (const [name, flags] of [
  ['--ready-port', (port) => ['--ready-port', String(port)]],
  ['--ready-log', () => ['--ready-log', 'listening on \\d+']],
  ['--ready-url', (port) => ['--ready-url', `http://127.0.0.1:${port}/health`]],
]) {
  test(`--yield 30s ${name} returns within 200 ms of the server listening, the job running and ready`, async (t) => {
    const { home } = makeHome(t)
    const port = await freePort()
    const { r, out, before, returned } = yieldStart(t, home, port, flags(port))
    assert.equal(r.code, 0, r.stderr)
    assert.equal(out.status, 'running', r.stdout)
    const listened = await listenedAt(out.logPath)
    assert.ok(listened, `the server never said it listened; run-bg answered after ${returned - before} ms: ${r.stdout}`)
    assert.ok(returned - listened < 200, `run-bg returned ${returned - listened} ms after the port opened (readyAt ${out.readyAt - listened} ms after)`)
    assert.ok(out.readyAt >= listened - 5 && out.readyAt <= returned, `readyAt ${out.readyAt}, listened ${listened}`)
    const text = runBg(home, ['check', out.jobId]).stdout
    assert.match(text, /running for [\d.ms]+ \(ready after [\d.]+s\)/, text)
  })
}

test('a readiness timeout leaves the job running and says `not ready after`', async (t) => {
  const { home } = makeHome(t)
  const port = await freePort()
  // Answers 500: never ready by URL.
  const { r, out, returned, before } = yieldStart(t, home, port, ['--ready-url', `http://127.0.0.1:${port}/`, '--ready-timeout', '2s'], { delay: 100, mode: '500' })
  assert.equal(r.code, 124, `${r.stdout}${r.stderr}`)
  assert.equal(out.status, 'running')
  assert.equal(out.readyAt, undefined)
  assert.ok(returned - before < 10_000, `returned after ${returned - before} ms, not at the readiness timeout`)
  assert.match(runBg(home, ['check', out.jobId]).stdout, /running for .* \(not ready after 2\.0s\)/)
})

test('a server that exits 0 before it is ready is failed, with its last lines', async (t) => {
  const { home } = makeHome(t)
  const port = await freePort()
  const { r, out, before, returned } = yieldStart(t, home, port, ['--ready-port', String(port)], { delay: 300, mode: 'exit' })
  assert.ok(returned - before < 10_000, `returned after ${returned - before} ms`)
  assert.equal(r.code, 1, r.stdout)
  assert.equal(out.status, 'failed')
  assert.equal(out.exitCode, 0)
  assert.ok(out.tail.some((l) => l.includes('EADDRINUSE')), out.tail.join('\n'))
  const text = runBg(home, ['check', out.jobId]).stdout
  assert.match(text, /failed \(exit 0 before it was ready\)/, text)
  assert.match(text, /EADDRINUSE/)
  const r2 = runBg(home, ['wait', out.jobId, '--ready', '--timeout', '5s'])
  assert.equal(r2.code, 1, 'wait --ready on a job that ended before ready: non-zero')
})

test('--ready-port: a port a stranger holds is not ready; the server that cannot bind it fails, naming the holder', async (t) => {
  const { home } = makeHome(t)
  const net = await import('node:net')
  const stranger = net.createServer()
  await new Promise((resolve) => stranger.listen(0, '127.0.0.1', resolve))
  t.after(() => stranger.close())
  const { port } = stranger.address()
  // The job's server tries to listen on the stranger's port 300 ms after it
  // starts, meets EADDRINUSE and dies with exit 1: probes see the port open all along.
  const { r, out, before, returned } = yieldStart(t, home, port, ['--ready-port', String(port)], { delay: 300 })
  assert.ok(returned - before < 10_000, `returned after ${returned - before} ms`)
  assert.notEqual(r.code, 0, `--yield exited 0 on a stranger's port: ${r.stdout}`)
  assert.equal(out.status, 'failed', r.stdout)
  assert.equal(out.exitCode, 1)
  assert.equal(out.readyAt, undefined, 'never ready')
  const holder = new RegExp(`port ${port} is held by pid ${process.pid} \\(node[^)]*\\), not by this job`)
  assert.match(out.readyBlocked ?? '', holder, r.stdout)
  const text = runBg(home, ['check', out.jobId]).stdout
  assert.match(text, /failed \(exit 1 before it was ready\)/, text)
  assert.match(text, holder, text)
})

test('--ready-port: a server of the job that listens is ready while a stranger listens on another port', async (t) => {
  const { home } = makeHome(t)
  const net = await import('node:net')
  const stranger = net.createServer()
  await new Promise((resolve) => stranger.listen(0, '127.0.0.1', resolve))
  t.after(() => stranger.close())
  const port = await freePort()
  const { r, out } = yieldStart(t, home, port, ['--ready-port', String(port)], { delay: 300 })
  assert.equal(r.code, 0, r.stderr)
  assert.equal(out.status, 'running', r.stdout)
  assert.ok(out.readyAt, r.stdout)
  assert.equal(out.readyBlocked, undefined)
})

// A listener that makes itself non-dumpable (PR_SET_DUMPABLE 0, as setuid
// binaries, `setcap` servers and hardened daemons are): a supervisor that
// is not root cannot read its /proc/<pid>/fd (as root it can), so the
// test runs run-bg as uid 65534. Modes: `listen` on 127.0.0.1:PORT, `idle`
// (never listens).
const NODUMP_SERVER = `
import ctypes, socket, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(4, 0, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), 'prctl(PR_SET_DUMPABLE, 0)')
if mode == 'listen':
    server = socket.socket()
    server.bind(('127.0.0.1', port))
    server.listen()
    print('listening on', port, flush=True)
    while True:
        server.accept()[0].close()
print('idle', flush=True)
time.sleep(120)
`
const NOBODY = 65534
const PYTHON = '/usr/bin/python3'
const asNobody = process.getuid() !== 0
  ? 'running the supervisor as another user (uid 65534) needs root'
  : !fs.existsSync(PYTHON) ? `${PYTHON} is not installed` : false

/** A home and the non-dumpable server in a directory of uid 65534; run-bg runs as that user. */
function nobodySetup(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-ready-nobody-'))
  const home = path.join(dir, 'home')
  fs.mkdirSync(home, { mode: 0o700 })
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null } }))
  const script = path.join(dir, 'nodump.py')
  fs.writeFileSync(script, NODUMP_SERVER)
  for (const f of [dir, home, path.join(home, 'config.json'), script]) fs.chownSync(f, NOBODY, NOBODY)
  const run = (args) => {
    const r = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', RUN_BG, ...args], {
      env: { ...process.env, PROC_MANAGER_HOME: home, HOME: dir },
      encoding: 'utf8',
      cwd: dir,
      timeout: 60_000,
    })
    if (r.error) throw r.error
    return { code: r.status, stdout: r.stdout, stderr: r.stderr }
  }
  t.after(async () => {
    run(['kill', '--all', '--force'])
    for (const job of readRegistry(home)) if (job.main) killPid(job.main.pid)
    await waitForQuiet(home)
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
  })
  return { home, script, run }
}

test('--ready-port: the job\'s own server is ready although its descriptors cannot be read (non-dumpable, supervisor not root)', { skip: asNobody }, async (t) => {
  const { script, run } = nobodySetup(t)
  const port = await freePort()
  const before = Date.now()
  const r = run(['--ready-port', String(port), '--yield', '15s', '--json', '--', PYTHON, script, String(port), 'listen'])
  const out = JSON.parse(r.stdout)
  t.after(() => out.pid && killPid(out.pid))
  assert.equal(r.code, 0, `--yield did not return ready: ${r.stdout}${r.stderr}`)
  assert.equal(out.status, 'running', r.stdout)
  assert.ok(out.readyAt, `never ready: ${r.stdout}`)
  assert.ok(Date.now() - before < 10_000, `ready only after ${Date.now() - before} ms`)
  assert.equal(out.readyBlocked, undefined, r.stdout)
  const text = run(['check', out.jobId]).stdout
  assert.match(text, /running for [\d.ms]+ \(ready after [\d.]+m?s\)/, text)
  assert.doesNotMatch(text, /another process/, text)
  // Unverified by its descriptors: its supervisor says on what it went.
  const said = fs.readFileSync(path.join(path.dirname(out.logPath), 'supervisor.log'), 'utf8')
  assert.match(said, new RegExp(`port ${port}: counted as the job's by its owner, uid ${NOBODY}, the uid of job process ${out.pid}`), said)
})

test('--ready-port: a job whose descriptors cannot be read is still not ready on a port another user holds', { skip: asNobody }, async (t) => {
  const { script, run } = nobodySetup(t)
  const net = await import('node:net')
  // Root's listener: its socket's uid (0) is not the job's (65534).
  const stranger = net.createServer()
  await new Promise((resolve) => stranger.listen(0, '127.0.0.1', resolve))
  t.after(() => stranger.close())
  const { port } = stranger.address()
  const r = run(['--ready-port', String(port), '--ready-timeout', '2s', '--yield', '15s', '--json', '--', PYTHON, script, String(port), 'idle'])
  const out = JSON.parse(r.stdout)
  t.after(() => out.pid && killPid(out.pid))
  assert.equal(r.code, 124, `a stranger's port made the job ready: ${r.stdout}${r.stderr}`)
  assert.equal(out.readyAt, undefined, r.stdout)
  assert.match(out.readyBlocked ?? '', new RegExp(`port ${port} is held by .*uid 0.*, not by this job`), r.stdout)
})

test('a job that prints its ready line and exits at once was ready: its exit decides', (t) => {
  const { home } = makeHome(t)
  for (const code of [0, 3]) {
    const r = runBg(home, ['--yield', '20s', '--ready-log', '^ready$', '--json', '--', 'sh', '-c', `echo ready; exit ${code}`])
    let out = JSON.parse(r.stdout)
    // --yield returns at readiness or at the end, whichever its look sees
    // first (they are a few ms apart here); what is asserted is the end.
    if (out.status === 'running') {
      assert.ok(out.readyAt >= out.startedAt, `running, so it was ready: ${r.stdout}`)
      assert.equal(r.code, 0)
      const w = runBg(home, ['wait', out.jobId, '--timeout', '20s'])
      assert.equal(w.code, code, w.stdout + w.stderr)
      out = checkJson(home, out.jobId)
    } else {
      assert.equal(r.code, code)
    }
    assert.equal(out.status, code === 0 ? 'success' : 'failed', JSON.stringify(out))
    assert.equal(out.exitCode, code)
    assert.ok(out.readyAt >= out.startedAt, `readyAt ${out.readyAt}`)
  }
})

test('wait --ready waits for readiness and exits 0; a job without a readiness check is refused', async (t) => {
  const { home } = makeHome(t)
  const port = await freePort()
  const script = serverScript(t)
  const started = JSON.parse(runBg(home, ['--ready-port', String(port), '--json', '--', process.execPath, script, String(port), '1000']).stdout)
  t.after(() => killJob(home, started.jobId))
  const r = runBg(home, ['wait', started.jobId, '--ready', '--timeout', '30s', '--json'])
  const returned = Date.now()
  assert.equal(r.code, 0, `${r.stdout}${r.stderr}`)
  const listened = await listenedAt(started.logPath)
  assert.ok(listened && returned - listened < 1000, `wait returned ${returned - listened} ms after the port opened`)
  const view = JSON.parse(r.stdout)
  assert.equal(view.jobs[0].status, 'running')
  assert.deepEqual([view.shellExitCode, view.jobs[0].shellExitCode], [0, 0], 'ready: 0, for the wait and for its job')
  assert.ok(view.jobs[0].readyAt >= listened - 5)
  assert.equal(checkJson(home, started.jobId).readyAt, view.jobs[0].readyAt)

  // Waited for beside a job that never gets ready: each says its own.
  const never = JSON.parse(runBg(home, ['--ready-log', 'never printed', '--json', '--', 'sleep', '30']).stdout)
  t.after(() => killJob(home, never.jobId))
  const both = runBg(home, ['wait', started.jobId, never.jobId, '--ready', '--timeout', '500ms', '--json'])
  assert.equal(both.code, 124)
  const [ready, notReady] = JSON.parse(both.stdout).jobs
  assert.deepEqual([ready.timedOut, ready.shellExitCode], [false, 0], 'the ready job')
  assert.deepEqual([notReady.timedOut, notReady.shellExitCode], [true, 124], 'the one still not ready')

  const plain = JSON.parse(runBg(home, ['--json', '--', 'sleep', '30']).stdout)
  t.after(() => killJob(home, plain.jobId))
  const refused = runBg(home, ['wait', plain.jobId, '--ready'])
  assert.equal(refused.code, 2)
  assert.match(refused.stderr, /no readiness check/)
})

test('runYield with readyPort resolves once the server is ready, the job running', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  t.after(() => delete process.env.PROC_MANAGER_HOME)
  const port = await freePort()
  const script = serverScript(t)
  const result = await pm.runYield(process.execPath, { args: [script, String(port), '1000'], yieldMs: 30_000, readyPort: port })
  const returned = Date.now()
  t.after(() => killJob(home, result.jobId))
  assert.equal(result.done, false)
  assert.equal(result.ready, true)
  assert.equal(result.check.status, 'running')
  const listened = await listenedAt(result.check.logPath)
  assert.ok(listened && returned - listened < 200, `runYield resolved ${returned - listened} ms after the port opened`)
  assert.ok(result.check.readyAt >= listened - 5)
  assert.throws(() => pm.runBackground('true', { readyLog: '(' }), /bad readyLog `\(`: not a valid regular expression/)
  assert.throws(() => pm.runBackground('true', { notifyOn: ['ok', '[z-a]'] }), /bad notifyOn\[1\]/)
  assert.throws(() => pm.runBackground('true', { readyUrl: 'https://x/' }), /bad readyUrl .*https is not probed/)
})

test('waitJob with ready: true resolves once the server is ready, the job running; a job without a check is refused', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  t.after(() => delete process.env.PROC_MANAGER_HOME)
  const port = await freePort()
  const script = serverScript(t)
  const job = pm.runBackground(process.execPath, { args: [script, String(port), '1000'], readyPort: port })
  t.after(() => killJob(home, job.jobId))
  const result = await pm.waitJob(job.jobId, { ready: true, timeoutMs: 30_000 })
  const returned = Date.now()
  assert.equal(result.timedOut, false)
  assert.equal(result.status, 'running')
  assert.equal(result.shellExitCode, 0, 'ready: what `run-bg wait --ready` exits with')
  const listened = await listenedAt(result.logPath)
  assert.ok(listened && returned - listened < 500, `waitJob resolved ${returned - listened} ms after the port opened`)
  assert.ok(result.readyAt >= listened - 5, `readyAt ${result.readyAt}, listened ${listened}`)
  const plain = pm.runBackground('sleep 30')
  t.after(() => killJob(home, plain.jobId))
  await assert.rejects(pm.waitJob(plain.jobId, { ready: true, timeoutMs: 1000 }), /has no readiness check/)
})

test('a bad pattern or URL is a usage error naming the flag', (t) => {
  const { home } = makeHome(t)
  for (const [flags, said] of [
    [['--notify-on', 'ok', '--notify-on', '(unclosed'], /bad --notify-on `\(unclosed`: not a valid regular expression/],
    [['--ready-log', '*x'], /bad --ready-log `\*x`/],
    [['--ready-url', 'localhost:3000'], /bad --ready-url `localhost:3000`: not an http:\/\/ URL/],
    [['--ready-timeout', '5s'], /--ready-timeout needs something to wait for/],
  ]) {
    const r = runBg(home, [...flags, '--', 'true'])
    assert.equal(r.code, 2, r.stderr)
    assert.match(r.stderr, said)
  }
  assert.equal(readRegistry(home).length, 0, 'nothing started')
})

test('--notify-on sends one matched event per match window, with the line and its neighbours', async (t) => {
  const service = await startInterruptService(t)
  const { home } = makeHome(t, { notify: { url: service.url, match_window_ms: 3000, level: 'warn' } })
  // boom 1-3 within 0.3 s (one window), boom 4 six seconds later (a new one).
  const script = 'echo before-1; echo before-2; echo "boom 1"; echo after-1; sleep 0.1; echo "boom 2"; sleep 0.2; echo "boom 3"; ' +
    'sleep 6; echo "boom 4"; echo after-4; exec sleep 60'
  // --no-notify: no end event, which the service (stopped first after the
  // test) would leave a deliverer retrying; matched events are sent anyway.
  const job = JSON.parse(runBg(home, ['--no-notify', '--notify-on', 'boom \\d', '--notify-on', 'never-printed', '--json', '--', 'sh', '-c', script]).stdout)
  t.after(() => killJob(home, job.jobId))
  const matched = async () => (await service.inspect()).triggers.map((t) => t.body).filter((e) => e.data?.status === 'matched')
  const events = await waitFor(async () => {
    const seen = await matched()
    return seen.length >= 2 && seen
  }, { timeout: 20_000, what: 'two matched events' })
  const [first, second] = events
  assert.equal(first.source, 'run-bg')
  assert.equal(first.data.jobId, job.jobId)
  assert.equal(first.data.pattern, 'boom \\d')
  assert.equal(first.data.line, 'boom 1')
  assert.deepEqual(first.data.lastLines.slice(0, 4), ['before-1', 'before-2', 'boom 1', 'after-1'])
  assert.match(first.data.message, /printed a line matching \/boom \\d\/: boom 1/)
  assert.equal(second.data.line, 'boom 4')
  assert.ok(!JSON.stringify(events).includes('null'), 'no null in a payload')
  // Nothing more comes: boom 2 and 3 fell in the first window.
  runBg(home, ['kill', job.jobId])
  const all = (await service.inspect()).triggers.map((t) => t.body)
  assert.equal(all.filter((e) => e.data?.status === 'matched').length, 2, JSON.stringify(all.map((e) => e.data?.line)))
  assert.equal(all.length, 2, 'with --no-notify, no end event')
})

test('MCP run_background with yieldMs and readyPort answers with the check once ready', async (t) => {
  const { home } = makeHome(t)
  const port = await freePort()
  const script = serverScript(t)
  const client = await connectMcp(t, home)
  const answer = await client.callTool({
    name: 'run_background',
    arguments: { command: `${process.execPath} ${script} ${port} 1000`, yieldMs: 30_000, ready: String(port), notifyOn: ['EADDRINUSE'] },
  })
  const returned = Date.now()
  const { jobId } = answer.structuredContent
  t.after(() => killJob(home, jobId))
  const text = answer.content[0].text
  assert.match(text, /running for [\d.ms]+ \(ready after [\d.]+s\)/, text)
  const listened = await listenedAt(checkJson(home, jobId).logPath)
  assert.ok(listened && returned - listened < 1000, `answered ${returned - listened} ms after the port opened`)

  // `localhost:PORT`, as an agent copies it from a server's banner, is a port, not a log pattern.
  const other = await freePort()
  const hosted = await client.callTool({
    name: 'run_background',
    arguments: { command: `${process.execPath} ${script} ${other} 300`, yieldMs: 30_000, ready: `localhost:${other}` },
  })
  t.after(() => killJob(home, hosted.structuredContent.jobId))
  assert.match(hosted.content[0].text, /running for [\d.ms]+ \(ready after [\d.]+m?s\)/, hosted.content[0].text)
  // Still not ready at the end of the yield: the answer says what it waits for.
  const never = await client.callTool({ name: 'run_background', arguments: { command: 'sleep 30', yieldMs: 200, ready: 'never printed' } })
  t.after(() => killJob(home, never.structuredContent.jobId))
  assert.match(never.content[0].text, /^still running after 0\.2s, not ready yet \(waiting for a log line matching `never printed`\): jobId /)
})
