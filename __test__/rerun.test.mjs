// rerun (issue 28): an ended job started again as a new job with the same
// command, cwd, environment additions and start options; `rerunOf` recorded.
import test from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { makeHome, runBg, startJob, checkJson, readRegistry, connectMcp, pm, waitFor } from './helpers.mjs'

function tmpDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-rerun-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

const record = (home, id) => readRegistry(home).find((j) => j.id === id)

test('rerun starts the same command, cwd, env and options as a new job, rerunOf recorded, its output in its own log', async (t) => {
  const { home } = makeHome(t)
  const dir = tmpDir(t)
  // Prints what it was given, then outlives its 1 s timeout: the rerun must time out too.
  const first = startJob(home, ['sh', '-c', 'echo "mode=$MODE dir=$(pwd) run=$$"; sleep 30'], [
    '--label', 'rerun me', '--cwd', dir, '--env', 'MODE=ci', '--owner', 'tester', '--timeout', '1s', '--nice', '3',
  ])
  assert.equal(runBg(home, ['wait', first.jobId]).code, 143)
  const before = checkJson(home, first.jobId)
  assert.equal(before.status, 'timeout')

  const r = runBg(home, ['rerun', first.jobId, '--json'])
  assert.equal(r.code, 0, r.stderr)
  const second = JSON.parse(r.stdout)
  assert.notEqual(second.jobId, first.jobId, 'a new id')
  assert.match(second.jobId, /^rerun-me-[0-9a-f]{6}$/)
  assert.equal(second.label, 'rerun me')
  assert.equal(runBg(home, ['wait', second.jobId]).code, 143)

  const after = checkJson(home, second.jobId)
  assert.equal(after.status, 'timeout', 'the same --timeout')
  assert.equal(after.rerunOf, first.jobId)
  for (const field of ['label', 'command', 'cwd', 'owner']) assert.equal(after[field], before[field], field)
  const old = record(home, first.jobId)
  const now = record(home, second.jobId)
  assert.deepEqual(
    { argv: now.argv, env: now.env, timeout: now.timeout_ms, nice: now.nice, notify: now.notify },
    { argv: old.argv, env: old.env, timeout: old.timeout_ms, nice: old.nice, notify: old.notify },
  )
  assert.equal(now.rerun_of, first.jobId)
  assert.equal(old.rerun_of, undefined)
  // Each run's output in its own log: the old one unchanged.
  assert.match(after.tail.join('\n'), new RegExp(`^mode=ci dir=${dir} run=\\d+$`))
  assert.notEqual(after.logPath, before.logPath)
  assert.deepEqual(checkJson(home, first.jobId).tail, before.tail)
  assert.match(runBg(home, ['check', second.jobId]).stdout, new RegExp(`rerun of ${first.jobId}`))

  // Text: the start's ack.
  const text = runBg(home, ['rerun', second.jobId])
  assert.equal(text.code, 0, text.stderr)
  assert.match(text.stdout, /^started rerun-me-[0-9a-f]{6} \(pid \d+\)/)
})

test('rerun refuses a job still running, an unknown one, and a record that lacks its command', async (t) => {
  const { home } = makeHome(t)
  const running = startJob(home, ['sleep', '30'])
  const busy = runBg(home, ['rerun', running.jobId])
  assert.equal(busy.code, 1)
  assert.match(busy.stderr, new RegExp(`${running.jobId} is running: .*kill`))
  assert.equal(readRegistry(home).length, 1, 'nothing started')

  const unknown = runBg(home, ['rerun', 'nosuch-123456'])
  assert.equal(unknown.code, 1)
  assert.match(unknown.stderr, /no job with id `nosuch-123456`/)

  // A record an older version wrote without the argv it ran.
  const id = 'old-000001'
  fs.mkdirSync(path.join(home, 'jobs', id), { recursive: true })
  fs.writeFileSync(path.join(home, 'jobs', id, 'job.json'), JSON.stringify({
    id, label: 'old', argv: [], command: 'make', cwd: '/tmp', status: 'success', exit_code: 0,
    started_at: Date.now() - 1000, ended_at: Date.now(), log_path: path.join(home, 'jobs', id, 'output.log'),
  }))
  const lacking = runBg(home, ['rerun', id])
  assert.equal(lacking.code, 1)
  assert.match(lacking.stderr, /cannot rerun old-000001: its record keeps no command/)
})

test('JS rerunJob and the MCP tool control_job rerun', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const dir = tmpDir(t)
  const first = pm.runBackground('echo "hello $WHO"', { cwd: dir, env: { WHO: 'there' }, label: 'greet' })
  await pm.waitJob(first.jobId)
  const again = pm.rerunJob(first.jobId)
  assert.notEqual(again.jobId, first.jobId)
  assert.equal(again.label, 'greet')
  const done = await pm.waitJob(again.jobId)
  assert.equal(done.status, 'success')
  assert.equal(done.rerunOf, first.jobId)
  assert.equal(done.cwd, dir)
  assert.deepEqual(pm.checkJob(again.jobId).tail, ['hello there'])
  assert.equal(pm.rerunJob(first.jobId, {}).label, 'greet', 'an empty overrides object is accepted')
  assert.throws(() => pm.rerunJob(first.jobId, { label: 'other' }), /rerunJob takes no overrides yet/)
  assert.throws(() => pm.rerunJob('nosuch-123456'), /nosuch-123456/)
  const busy = pm.runBackground('sleep 30')
  assert.throws(() => pm.rerunJob(busy.jobId), new RegExp(`end it first \\(\`killJob\\('${busy.jobId}'\\)\`\\), then rerun it$`), 'the JS call, not the CLI command')
  await pm.killJob(busy.jobId, { force: true })

  const client = await connectMcp(t, home)
  const { tools } = await client.listTools()
  const tool = tools.find((x) => x.name === 'control_job')
  assert.ok(tool.inputSchema.properties.action.enum.includes('rerun'), 'control_job reruns')
  assert.ok(tool.outputSchema?.properties?.jobId && tool.outputSchema?.properties?.status)
  assert.notEqual(tool.annotations?.readOnlyHint, true)
  const result = await client.callTool({ name: 'control_job', arguments: { jobId: first.jobId, action: 'rerun' } })
  assert.equal(result.isError, undefined, result.content[0].text)
  assert.match(result.content[0].text, new RegExp(`started jobId: greet-[0-9a-f]{6} .*rerun of ${first.jobId}`))
  const id = result.structuredContent.jobId
  await waitFor(() => pm.checkJob(id).status === 'success', { what: 'the MCP rerun to end' })
  assert.equal(pm.checkJob(id).rerunOf, first.jobId)
  const running = pm.runBackground('sleep 30')
  const refused = await client.callTool({ name: 'control_job', arguments: { jobId: running.jobId, action: 'rerun' } })
  assert.equal(refused.isError, true)
  assert.match(refused.content[0].text, /call kill_job with jobId/)
  assert.doesNotMatch(refused.content[0].text, /run-bg /)
})
