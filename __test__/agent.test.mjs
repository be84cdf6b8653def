// What agents see: the ack, thrifty check output, grep/errors, yield mode,
// the context summary, and the MCP server driven by the SDK's own client.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import path from 'node:path'
import { pm, root, makeHome, runBg, startJob, checkJson, waitFor, isAlive, readRegistry, connectMcp, toolsBudget } from './helpers.mjs'

test('the start ack is one line of under 200 characters, even for long labels and commands', (t) => {
  const { home } = makeHome(t)
  const longLabel = 'a-very-long-label-that-goes-on-and-on-for-a-while'
  const r = runBg(home, ['--label', longLabel, '--', 'sh', '-c', `echo ${'x'.repeat(500)}`])
  assert.equal(r.code, 0, r.stderr)
  const lines = r.stdout.split('\n').filter(Boolean)
  assert.equal(lines.length, 1)
  assert.ok(lines[0].length < 200, `${lines[0].length}: ${lines[0]}`)
  const id = lines[0].match(/^started (\S+) /)[1]
  assert.ok(lines[0].endsWith(`run-bg check ${id}`))
})

test('check of 100,000 coloured lines with a progress bar stays within its budget and shows the real last lines', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c',
    'seq 100000 | awk \'{printf "\\033[32mline %d\\033[0m\\n", $1}\'; printf "progress 10%%\\r50%%\\r100%%\\n"; ' +
    'yes same | head -1000; printf "%0500d\\n" 0; echo done'])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '60s']).code, 0)
  const text = runBg(home, ['check', jobId]).stdout
  const lines = text.trimEnd().split('\n')
  assert.equal(lines.length, 21, 'a header and 20 lines')
  assert.ok(!text.includes('\x1b'), 'no escape codes')
  assert.ok(!text.includes('\r'), 'no carriage returns')
  assert.deepEqual(lines.slice(-7, -2), ['line 99998', 'line 99999', 'line 100000', '100%', 'same [×1000]'])
  assert.equal(lines.at(-1), 'done')
  assert.equal(lines.at(-2), `${'0'.repeat(400)}… [100 more chars]`)
  assert.equal(lines.at(-3), 'same [×1000]')
  const json = checkJson(home, jobId, ['-n', '5'])
  assert.deepEqual(json.tail, ['line 100000', '100%', 'same [×1000]', `${'0'.repeat(400)}… [100 more chars]`, 'done'])
  assert.ok(text.length < 2000, `${text.length} characters`)
})

test('grep and errors find the failure in the middle of a 100,000-line build log', (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, ['sh', '-c',
    "seq 50000 | sed 's/^/compiling unit /'; echo 'src/parser.c:42: error: expected ; before }'; " +
    "echo '   42 |   return x }'; seq 50000 | sed 's/^/linking step /'; exit 2"])
  assert.equal(runBg(home, ['wait', jobId, '--timeout', '60s']).code, 2)
  const errors = runBg(home, ['check', jobId, '--errors'])
  assert.equal(errors.code, 0)
  assert.deepEqual(errors.stdout.trimEnd().split('\n').slice(1), [
    'compiling unit 50000',
    'src/parser.c:42: error: expected ; before }',
    '   42 |   return x }',
  ])
  const grep = checkJson(home, jobId, ['--grep', 'parser\\.c'])
  assert.deepEqual(grep.tail, ['src/parser.c:42: error: expected ; before }'])
  assert.deepEqual(checkJson(home, jobId, ['--errors', '-n', '1']).tail, ['src/parser.c:42: error: expected ; before }'])
  const both = runBg(home, ['check', jobId, '--errors', '--grep', 'x'])
  assert.equal(both.code, 2)
})

test('yield mode: a quick command prints what check prints and exits with its code', (t) => {
  const { home } = makeHome(t)
  const r = runBg(home, ['--yield', '10s', '--', 'sh', '-c', 'echo quick result; exit 3'])
  assert.equal(r.code, 3)
  const lines = r.stdout.trimEnd().split('\n')
  assert.match(lines[0], /^\S+: failed \(exit 3\) after /)
  assert.deepEqual(lines.slice(1), ['quick result'])
})

test('yield mode: a slow command prints the ack and keeps running', (t) => {
  const { home } = makeHome(t)
  const r = runBg(home, ['--yield', '300ms', '--', 'sleep', '30'])
  assert.equal(r.code, 0)
  const [, id, pid] = r.stdout.match(/^started (\S+) \(pid (\d+)\)/)
  assert.ok(isAlive(Number(pid)))
  assert.equal(checkJson(home, id).status, 'running')
})

test('runYield resolves with the check when the job ends in time, else with the running id', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const quick = await pm.runYield('echo fast; exit 0', { yieldMs: 10_000 })
  assert.equal(quick.done, true)
  assert.equal(quick.check.status, 'success')
  assert.deepEqual(quick.check.tail, ['fast'])
  const slow = await pm.runYield('sleep 30', { yieldMs: 200, label: 'slow' })
  assert.equal(slow.done, false)
  assert.equal(slow.check, undefined)
  assert.equal(pm.checkJob(slow.jobId).status, 'running')
})

test('summary: running jobs with their last line, ended jobs until looked at, nothing when nothing to say', async (t) => {
  const { home } = makeHome(t)
  assert.equal(runBg(home, ['summary']).stdout, '', 'nothing at all when there is nothing to say')
  const migrate = startJob(home, ['sh', '-c', 'echo "Migrating app_users 0042..."; echo; sleep 30'], ['--owner', 'agent-1'])
  const failed = startJob(home, ['sh', '-c', 'exit 2'], ['--label', 'build', '--owner', 'agent-1'])
  const other = startJob(home, ['sleep', '30'], ['--owner', 'agent-2'])
  assert.equal(runBg(home, ['wait', failed.jobId]).code, 2, 'waiting on it counts as looking at it')
  // Another failure that nobody looks at.
  const unseen = startJob(home, ['sh', '-c', 'exit 2'], ['--label', 'build', '--owner', 'agent-1'])
  await waitFor(() => runBg(home, ['list', '--status', 'failed', '--json']).stdout.includes(unseen.jobId), { what: 'unseen failure' })
  await waitFor(() => runBg(home, ['summary', '--owner', 'agent-1']).stdout.includes('last line'), { what: 'output' })
  const lines = runBg(home, ['summary', '--owner', 'agent-1']).stdout.trimEnd().split('\n')
  assert.equal(lines.length, 2, lines.join('\n'))
  assert.match(lines[0], new RegExp(`^PID ${migrate.pid} \\(${migrate.jobId}\\): \`sh -c 'echo "Migrating app_users 0042\\.\\.\\."; echo; sleep 30'\` — running (\\d+ms|\\d+\\.\\ds), last line: "Migrating app_users 0042\\.\\.\\."$`))
  assert.equal(lines[1].replace(/after \S+/, 'after T'), `finished: ${unseen.jobId} \`sh -c 'exit 2'\` failed (exit 2) after T — run-bg check ${unseen.jobId}`)
  process.env.PROC_MANAGER_HOME = home
  const runtimeFree = (text) => text.replace(/running \S+,/, 'running T,')
  assert.equal(runtimeFree(pm.summary({ owner: 'agent-1' })), runtimeFree(lines.join('\n')), 'the JS API gives the same lines')
  runBg(home, ['check', unseen.jobId])
  assert.equal(runBg(home, ['summary', '--owner', 'agent-1']).stdout.trimEnd().split('\n').length, 1, 'seen jobs drop out')
  assert.ok(runBg(home, ['summary']).stdout.includes(other.jobId))
})

test('the MCP server, driven by the SDK client over stdio: list tools, run, check, kill, errors', async (t) => {
  const { home } = makeHome(t)
  const client = await connectMcp(t, home)

  const { tools } = await client.listTools()
  assert.deepEqual(tools.map((x) => x.name).sort(),
    ['check_job', 'cleanup_orphans', 'control_job', 'kill_job', 'list_jobs', 'read_log', 'run_background', 'wait_job'])
  // The bounds mcp.test.mjs keeps (what every tool costs an agent's context).
  const { whole, modelFacing } = toolsBudget(client, tools)
  assert.ok(whole <= 8000, `tools/list is ${whole} characters`)
  assert.ok(modelFacing <= 6000, `the model is handed ${modelFacing} characters of tools/list`)

  const started = await client.callTool({ name: 'run_background', arguments: { command: 'echo from mcp; sleep 30', label: 'mcp' } })
  assert.ok(!started.isError)
  const id = started.content[0].text.match(/jobId: (\S+)/)[1]
  await waitFor(async () => (await client.callTool({ name: 'check_job', arguments: { jobId: id } })).content[0].text.includes('from mcp'), { what: 'output' })
  const check = await client.callTool({ name: 'check_job', arguments: { jobId: id } })
  assert.match(check.content[0].text, new RegExp(`^${id}: running for `))
  const list = await client.callTool({ name: 'list_jobs', arguments: {} })
  assert.match(list.content[0].text, new RegExp(`^${id}  running`))
  const killed = await client.callTool({ name: 'kill_job', arguments: { jobId: id, graceMs: 1000 } })
  assert.match(killed.content[0].text, new RegExp(`killed ${id} \\(killed\\)`))
  const waited = await client.callTool({ name: 'wait_job', arguments: { jobId: id, timeoutMs: 5000 } })
  assert.match(waited.content[0].text, /killed \(signal SIGTERM\)/)
  const orphans = await client.callTool({ name: 'cleanup_orphans', arguments: { mode: 'list' } })
  assert.equal(orphans.content[0].text, 'no orphans')

  const bad = await client.callTool({ name: 'check_job', arguments: { jobId: '../../etc' } })
  assert.equal(bad.isError, true)
  assert.match(bad.content[0].text, /invalid job id `\.\.\/\.\.\/etc`: a job id is/)
  const missing = await client.callTool({ name: 'run_background', arguments: { command: 'true', cwd: '/no/such/dir' } })
  assert.equal(missing.isError, true)
  assert.match(missing.content[0].text, /working directory `\/no\/such\/dir` does not exist/)
  const invalid = await client.callTool({ name: 'cleanup_orphans', arguments: { mode: 'everything' } })
  assert.equal(invalid.isError, true)
  const unknown = await client.callTool({ name: 'kill_job', arguments: { jobId: 'unknown-123456' } })
  assert.equal(unknown.isError, true)
  assert.equal(unknown.content[0].text, 'no job with id `unknown-123456` (call list_jobs with all: true to see known jobs)')
  // Still serving after errors.
  assert.ok((await client.listTools()).tools.length === 8)
})
