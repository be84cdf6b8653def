// One public shape: for the same real jobs, the CLI's `--json` and the JS API
// return the same fields with the same values (both are the core's
// `present` shapes, serialized once).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { pm, root, makeHome, runBg, startJob } from './helpers.mjs'

/** Values that move between two calls made a moment apart: kept as their type. */
function settle(value) {
  if (Array.isArray(value)) return value.map(settle)
  if (value === null || typeof value !== 'object') return value
  const out = {}
  for (const [key, v] of Object.entries(value)) {
    const moving = (key === 'durationMs' && value.status === 'running') || key === 'rssMb'
    out[key] = moving ? `<${typeof v}>` : settle(v)
  }
  return out
}

/** The same shape for two different jobs: their own ids, pids, paths and times written out. */
function anonymous(value, job) {
  let text = JSON.stringify(value)
  for (const [word, mark] of [[job.jobId, '<id>'], [path.dirname(job.logPath), '<dir>']]) text = text.split(word).join(mark)
  return settle(JSON.parse(text, (key, v) => (['pid', 'startedAt', 'endedAt', 'durationMs', 'peakRssMb'].includes(key) ? typeof v : v)))
}

function cliJson(home, args, codes = [0]) {
  const program = args.indexOf('--')
  const r = runBg(home, program < 0 ? [...args, '--json'] : [...args.slice(0, program), '--json', ...args.slice(program)])
  assert.ok(codes.includes(r.code), `run-bg ${args.join(' ')} exited ${r.code}: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** A running, a successful, a failed and a killed job, with an owner and a context. */
function fourJobs(t) {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const flags = ['--owner', 'shapes', '--context', '{"ticket":[1,"two"],"none":null}']
  const running = startJob(home, ['sleep', '300'], ['--label', 'runner', ...flags])
  const success = startJob(home, ['sh', '-c', 'echo ok'], flags)
  const failed = startJob(home, ['sh', '-c', 'echo bad >&2; exit 3'], flags)
  const killed = startJob(home, ['sleep', '301'], flags)
  runBg(home, ['wait', success.jobId, failed.jobId])
  assert.equal(runBg(home, ['kill', killed.jobId, '--force']).code, 0)
  return { home, ids: { running: running.jobId, success: success.jobId, failed: failed.jobId, killed: killed.jobId } }
}

test('list --json is listJobs(), check --json is checkJob(), for running, success, failed and killed jobs', async (t) => {
  const { home, ids } = fourJobs(t)
  const cli = cliJson(home, ['list', '--all'])
  const js = pm.listJobs({ all: true })
  assert.equal(js.length, 4)
  assert.deepEqual(settle(js), settle(cli))
  assert.deepEqual(js.map((j) => j.status).sort(), ['failed', 'killed', 'running', 'success'])
  assert.ok(js.every((j) => 'peakRssMb' in j || j.status === 'running'), 'an ended job says its peak memory')

  for (const [what, id] of Object.entries(ids)) {
    const fromCli = cliJson(home, ['check', id])
    const fromJs = pm.checkJob(id)
    assert.deepEqual(settle(fromJs), settle(fromCli), what)
    assert.equal(fromJs.cwd, process.cwd(), what)
    assert.deepEqual(fromJs.context, { ticket: [1, 'two'], none: null }, `${what}: JSON data as given, nulls kept`)
  }
  const running = pm.checkJob(ids.running)
  assert.equal(running.processes, 1)
  assert.equal(typeof running.rssMb, 'number')
  const grepped = cliJson(home, ['check', ids.failed, '-n', '5', '--grep', 'bad'])
  assert.deepEqual(pm.checkJob(ids.failed, { lines: 5, grep: 'bad' }), grepped)
})

test('wait --json is waitJob(), for ended jobs and for a wait that times out', async (t) => {
  const { home, ids } = fourJobs(t)
  for (const what of ['success', 'failed', 'killed']) {
    const fromCli = cliJson(home, ['wait', ids[what]], [0, 3, 137])
    const fromJs = await pm.waitJob(ids[what])
    assert.equal(fromCli.jobs.length, 1)
    assert.deepEqual(fromJs, fromCli.jobs[0], what)
    assert.deepEqual([fromCli.timedOut, fromCli.shellExitCode], [fromJs.timedOut, fromJs.shellExitCode], what)
  }
  const fromCli = cliJson(home, ['wait', ids.running, '--timeout', '50ms'], [124])
  const fromJs = await pm.waitJob(ids.running, { timeoutMs: 50 })
  assert.deepEqual(settle(fromJs), settle(fromCli.jobs[0]))
  assert.deepEqual([fromJs.timedOut, fromJs.shellExitCode, fromCli.shellExitCode], [true, 124, 124])
})

test('kill --json is killJob(), for a running job and for one that already ended', async (t) => {
  const { home, ids } = fourJobs(t)
  const fromCli = cliJson(home, ['kill', ids.success])
  const fromJs = await pm.killJob(ids.success)
  assert.deepEqual(fromCli, [fromJs])
  assert.equal(fromJs.signalled, false)

  const a = startJob(home, ['sleep', '302'])
  const b = pm.runBackground('sleep', { args: ['302'] })
  const [killedByCli] = cliJson(home, ['kill', a.jobId, '--grace', '5s'])
  const killedByJs = await pm.killJob(b.jobId, { graceMs: 5000 })
  assert.deepEqual(anonymous(killedByJs, b), anonymous(killedByCli, a))
  assert.equal(killedByJs.signalled, true)

  const unknown = runBg(home, ['kill', 'nosuch-123456', '--json'])
  assert.equal(unknown.code, 1)
  const [refused] = JSON.parse(unknown.stdout)
  assert.equal(refused.jobId, 'nosuch-123456')
  assert.match(refused.error, /nosuch-123456/)
})

test('the start ack, --yield, reconcile, orphans and ps have the JS API\'s shapes', async (t) => {
  const { home } = fourJobs(t)
  const ackCli = startJob(home, ['sleep', '303'])
  const ackJs = pm.runBackground('sleep', { args: ['303'] })
  assert.deepEqual(anonymous(ackJs, ackJs), anonymous(ackCli, ackCli))

  const yieldCli = cliJson(home, ['--yield', '20s', '--', 'sh', '-c', 'echo y; exit 2'], [2])
  const yieldJs = await pm.runYield('sh', { args: ['-c', 'echo y; exit 2'], yieldMs: 20_000 })
  assert.equal(yieldJs.done, true)
  assert.deepEqual(anonymous(yieldJs.check, yieldJs.check), anonymous(yieldCli, yieldCli))

  assert.deepEqual(pm.reconcile(), cliJson(home, ['reconcile']))
  assert.deepEqual(await pm.cleanupOrphans(), cliJson(home, ['orphans']))
  const ps = cliJson(home, ['ps'])
  const snap = pm.snapshot()
  assert.deepEqual(Object.keys(snap).sort(), Object.keys(ps).sort())
  assert.deepEqual(Object.keys(snap.processes[0]).sort(), Object.keys(ps.processes[0]).sort())
  // What snapshot() and ps --json give reads back in (times past 2^32 ms arrive as doubles).
  assert.deepEqual(pm.detectOrphans(snap, snap.processes), [])
  assert.deepEqual(pm.detectOrphans(ps, ps), [])
  assert.throws(() => pm.detectOrphans({ processes: 5 }, []), /bad before: give a snapshot\(\) result or an array of its processes/)
})

/** The fields index.d.ts declares for `name` (an interface), with their optionality. */
function declaredFields(dts, name) {
  const body = dts.match(new RegExp(`export interface ${name}(?: extends ([\\w, ]+))? \\{([\\s\\S]*?)\\n\\}`))
  assert.ok(body, `index.d.ts declares ${name}`)
  const fields = {}
  for (const parent of (body[1] || '').split(',').map((s) => s.trim()).filter(Boolean)) {
    Object.assign(fields, declaredFields(dts, parent))
  }
  for (const m of body[2].matchAll(/^ {2}(\w+)(\?)?: /gm)) fields[m[1]] = m[2] ? 'optional' : 'required'
  return fields
}

/** Every field returned is declared; every required one is there. */
function assertDeclared(dts, name, value) {
  const fields = declaredFields(dts, name)
  for (const key of Object.keys(value)) assert.ok(key in fields, `${name} returns ${key}, which index.d.ts does not declare`)
  for (const [key, kind] of Object.entries(fields)) {
    if (kind === 'required') assert.ok(key in value, `index.d.ts says ${name}.${key} is always there; it is not`)
  }
}

test('index.d.ts declares exactly the fields the functions return for real jobs', async (t) => {
  const { ids } = fourJobs(t)
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  for (const job of pm.listJobs({ all: true })) {
    assertDeclared(dts, 'JobSummary', job)
    for (const hook of job.hooks) assertDeclared(dts, 'HookInfo', hook)
  }
  for (const id of Object.values(ids)) {
    const check = pm.checkJob(id)
    assertDeclared(dts, 'CheckResult', check)
    for (const p of check.lingering) assertDeclared(dts, 'JobProcess', p)
    assertDeclared(dts, 'JobResult', await pm.waitJob(id, { timeoutMs: 1 }))
  }
  assertDeclared(dts, 'KillResult', await pm.killJob(ids.success))
  const started = pm.runBackground('exit 0')
  assertDeclared(dts, 'RunResult', started)
  const yielded = await pm.runYield('exit 0', { yieldMs: 20_000 })
  assertDeclared(dts, 'YieldResult', yielded)
  assertDeclared(dts, 'CheckResult', yielded.check)
  assertDeclared(dts, 'ReconcileResult', pm.reconcile())
  assertDeclared(dts, 'CleanupReport', await pm.cleanupOrphans())
  const snap = pm.snapshot()
  assertDeclared(dts, 'ProcessSnapshot', snap)
  assertDeclared(dts, 'ProcessInfo', snap.processes[0])
})
