// Jobs tied to their caller (`run-bg --tie`, `--tie-pid`, `runBackground(cmd,
// {tie: true})`): when that process exits, the supervisor (woken by a pidfd)
// kills the job's tree and records why. And `kill --all --older-than`,
// `killAll({ olderThanMs })` and MCP kill_job's olderThanMs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { pm, root, makeHome, RUN_BG, runBg, startJob, checkJson, waitFor, isAlive, killPid, cookieProcesses, anySurvivor, ESCAPING_TREE, sleep, connectMcp } from './helpers.mjs'

test('--tie: the job is killed with its tree when the shell that started it exits', async (t) => {
  const { home, extraPids } = makeHome(t)
  const ack = path.join(home, 'ack.json')
  // The starter: a shell that runs run-bg --tie, then idles (exec keeps its pid) until we end it.
  const starter = spawn('sh', ['-c', `"$0" --tie --json -- "$@" > ${JSON.stringify(ack)} && exec sleep 300`, RUN_BG, ...ESCAPING_TREE], {
    env: { ...process.env, PROC_MANAGER_HOME: home },
    stdio: 'ignore',
  })
  extraPids.push(starter.pid)
  const { jobId } = await waitFor(() => {
    try { return JSON.parse(fs.readFileSync(ack, 'utf8')) } catch { return null }
  }, { what: 'the ack' })
  const running = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.tail.includes('tree-ready') ? c : null
  }, { what: 'the tree' })
  assert.equal(running.status, 'running')
  assert.deepEqual(running.tie, { pid: starter.pid }, 'tied to the shell that ran run-bg')
  assert.match(runBg(home, ['check', jobId]).stdout, new RegExp(`tied to pid ${starter.pid}: its exit kills the job`))
  const tree = cookieProcesses(jobId)
  assert.ok(tree.length >= 6, JSON.stringify(tree))
  // The job lives as long as its starter does.
  await sleep(300)
  assert.equal(checkJson(home, jobId).status, 'running')

  killPid(starter.pid)
  const ended = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the tied job to end' })
  assert.equal(ended.status, 'killed')
  assert.equal(ended.tie.pid, starter.pid)
  assert.equal(ended.tie.reason, `its caller (pid ${starter.pid}) exited`)
  assert.ok(ended.tie.firedAt > 0)
  assert.match(runBg(home, ['check', jobId]).stdout, new RegExp(`\\n  killed: its caller \\(pid ${starter.pid}\\) exited`))
  await waitFor(() => anySurvivor(tree).length === 0, { what: 'the whole tree to be gone' })
})

test('--tie-pid ties to a given process; a gone or impossible pid is refused', async (t) => {
  const { home, extraPids } = makeHome(t)
  const anchor = spawn('sleep', ['300'], { stdio: 'ignore' })
  extraPids.push(anchor.pid)
  const { jobId } = startJob(home, ['sleep', '301'], ['--tie-pid', String(anchor.pid)])
  assert.equal(checkJson(home, jobId).tie.pid, anchor.pid)
  killPid(anchor.pid)
  const ended = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the tied job to end' })
  assert.equal(ended.status, 'killed')
  // The tied process is not run-bg's caller here: the reason names it as what it is.
  assert.equal(ended.tie.reason, `the process it was tied to (pid ${anchor.pid}) exited`)

  const one = runBg(home, ['--tie-pid', '1', '--', 'sleep', '1'])
  assert.equal(one.code, 2)
  assert.match(one.stderr, /bad tie pid 1: give the pid of a live process other than init/)
  const both = runBg(home, ['--tie', '--tie-pid', '5', '--', 'sleep', '1'])
  assert.equal(both.code, 2)
})

test('runBackground({tie: true}) ties the job to the Node process', async (t) => {
  const { home, extraPids } = makeHome(t)
  const script = `
    const pm = require(${JSON.stringify(root)})
    const r = pm.runBackground('sleep 302', { tie: true })
    console.log(JSON.stringify(r))
    setInterval(() => {}, 1000)
  `
  const node = spawn(process.execPath, ['-e', script], { env: { ...process.env, PROC_MANAGER_HOME: home }, stdio: ['ignore', 'pipe', 'inherit'] })
  extraPids.push(node.pid)
  let out = ''
  node.stdout.on('data', (d) => (out += d))
  const { jobId, pid } = await waitFor(() => { try { return JSON.parse(out) } catch { return null } }, { what: 'the start' })
  extraPids.push(pid)
  assert.equal(checkJson(home, jobId).tie.pid, node.pid)
  killPid(node.pid)
  const ended = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the tied job to end' })
  assert.equal(ended.status, 'killed')
  assert.ok(!isAlive(pid))
})

test('kill --all --older-than kills only the jobs started before the cut', async (t) => {
  const { home } = makeHome(t)
  const old = startJob(home, ['sleep', '303'])
  const oldOther = startJob(home, ['sleep', '304'], ['--owner', 'other'])
  await sleep(1500)
  const young = startJob(home, ['sleep', '305'])
  const bad = runBg(home, ['kill', '--all', '--older-than', 'soon'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /--older-than/)
  assert.equal(runBg(home, ['kill', '--older-than', '1s', old.jobId]).code, 2, '--older-than goes with --all')
  const r = runBg(home, ['kill', '--all', '--older-than', '1s', '--owner', 'other', '--force', '--json'])
  assert.equal(r.code, 0, r.stderr)
  assert.deepEqual(JSON.parse(r.stdout).map((k) => k.jobId), [oldOther.jobId])
  const r2 = runBg(home, ['kill', '--all', '--older-than', '1s', '--force', '--json'])
  assert.deepEqual(JSON.parse(r2.stdout).map((k) => k.jobId), [old.jobId])
  assert.equal(checkJson(home, young.jobId).status, 'running')
  assert.equal(checkJson(home, old.jobId).status, 'killed')
})

/** Resolves once the job started at least `ms` ago (its own recorded start). */
const agedBy = (home, job, ms) =>
  waitFor(() => Date.now() - checkJson(home, job.jobId).startedAt >= ms, { what: `${job.jobId} to be ${ms} ms old`, timeout: 30_000 })

test('killAll({ olderThanMs }) kills only the jobs started before the cut, of owner when given', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const old = startJob(home, ['sleep', '311'], ['--owner', 'a'])
  const oldOther = startJob(home, ['sleep', '312'], ['--owner', 'b'])
  // Ended, but with a process left behind: killAll's targets, old or not.
  const oldLeaver = startJob(home, ['sh', '-c', 'sleep 313 & exit 0'], ['--owner', 'a'])
  await agedBy(home, oldLeaver, 2000)
  const young = startJob(home, ['sleep', '314'], ['--owner', 'a'])
  await assert.rejects(pm.killAll({ olderThanMs: '1h' }), /bad olderThanMs: "1h"; give a number of milliseconds >= 0/)
  await assert.rejects(pm.killAll({ olderThanMs: -1 }), /bad olderThanMs: -1/)

  const mine = await pm.killAll({ olderThanMs: 1000, owner: 'a', force: true })
  assert.deepEqual(mine.map((k) => k.jobId).sort(), [old.jobId, oldLeaver.jobId].sort())
  assert.ok(mine.every((k) => k.signalled), JSON.stringify(mine))
  const rest = await pm.killAll({ olderThanMs: 1000, force: true })
  assert.deepEqual(rest.map((k) => [k.jobId, k.status]), [[oldOther.jobId, 'killed']])
  assert.equal(checkJson(home, young.jobId).status, 'running')
  assert.equal(checkJson(home, old.jobId).status, 'killed')
  assert.deepEqual(checkJson(home, oldLeaver.jobId).lingering, [])
  assert.deepEqual(await pm.killAll({ olderThanMs: 1000 }), [], 'nothing old is left')
})

test('MCP kill_job with olderThanMs (and owner) kills only the jobs started before the cut', async (t) => {
  const { home } = makeHome(t)
  const old = startJob(home, ['sleep', '315'], ['--owner', 'a'])
  const oldOther = startJob(home, ['sleep', '316'], ['--owner', 'b'])
  await agedBy(home, oldOther, 2000)
  const client = await connectMcp(t, home)
  await client.listTools()
  const text = (r) => r.content.map((c) => c.text).join('\n')

  for (const args of [{}, { jobId: old.jobId, olderThanMs: 1000 }, { jobId: old.jobId, owner: 'a' }]) {
    const refused = await client.callTool({ name: 'kill_job', arguments: args })
    assert.equal(refused.isError, true, JSON.stringify(args))
    assert.match(text(refused), /give jobId, or olderThanMs/)
  }
  // Started just before the kill: on a busy host, starting the server took over the second that makes a job old.
  const young = startJob(home, ['sleep', '317'], ['--owner', 'a'])
  const mine = await client.callTool({ name: 'kill_job', arguments: { olderThanMs: 1000, owner: 'a', force: true } })
  assert.equal(mine.isError, undefined, text(mine))
  assert.deepEqual(mine.structuredContent, { killed: [old.jobId] })
  assert.match(text(mine), new RegExp(`killed ${old.jobId}`))
  const rest = await client.callTool({ name: 'kill_job', arguments: { olderThanMs: 1000, force: true } })
  assert.deepEqual(rest.structuredContent, { killed: [oldOther.jobId] })
  const none = await client.callTool({ name: 'kill_job', arguments: { olderThanMs: 1000 } })
  assert.deepEqual([text(none), none.structuredContent], ['no running jobs started over 1s ago to kill', { killed: [] }])
  assert.equal(checkJson(home, young.jobId).status, 'running')
  assert.equal(checkJson(home, old.jobId).status, 'killed')
  assert.equal(checkJson(home, oldOther.jobId).status, 'killed')
})

test('MCP run_background with tie: true: the job ends with the server (the session)', async (t) => {
  const { home, extraPids } = makeHome(t)
  const client = await connectMcp(t, home)
  const r = await client.callTool({ name: 'run_background', arguments: { command: 'sleep 306', tie: true } })
  const { jobId, pid } = r.structuredContent
  extraPids.push(pid)
  const tied = checkJson(home, jobId).tie.pid
  assert.ok(isAlive(tied) && tied !== process.pid, 'tied to the MCP server process')
  await client.close()
  const ended = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.status !== 'running' ? c : null
  }, { what: 'the tied job to end with the server' })
  assert.equal(ended.status, 'killed')
  assert.equal(ended.tie.reason, `its caller (pid ${tied}) exited`)
  assert.ok(!isAlive(pid))
})
