// Process snapshots, orphan diffing, resource tracking and per-job cost, on
// real processes (and crafted snapshots where the rule itself is under test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn } from 'node:child_process'
import readline from 'node:readline'
import { pm, root, makeHome, runBg, runNode, startJob, checkJson, waitFor, isAlive, killPid, processStart } from './helpers.mjs'

/** A path to `sleep` whose name is `name`, so its command line looks like that program. */
function sleeperNamed(t, name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-sleeper-'))
  const link = path.join(dir, name)
  fs.symlinkSync(fs.realpathSync('/bin/sleep'), link)
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return link
}

test('process snapshot', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const before = Date.now()
  const plain = spawn('sleep', ['611'], { stdio: 'ignore' })
  const browser = spawn(sleeperNamed(t, 'chromium'), ['612'], { stdio: 'ignore' })
  t.after(() => { killPid(plain.pid); killPid(browser.pid) })
  await waitFor(() => isAlive(plain.pid) && isAlive(browser.pid), { what: 'children' })
  const snap = pm.snapshot()
  assert.ok(Math.abs(snap.timestamp - Date.now()) < 5000)
  const mine = snap.processes.find((p) => p.pid === plain.pid)
  assert.ok(mine, 'the process started by the test is in the snapshot')
  assert.equal(mine.ppid, process.pid)
  assert.equal(mine.command, 'sleep 611')
  assert.ok(mine.memoryMb > 0 && mine.memoryMb < 50, `${mine.memoryMb}`)
  assert.ok(mine.startTime >= before - 1000 && mine.startTime <= Date.now(), `${mine.startTime} vs ${before}`)
  assert.equal(mine.isMcp, false)
  assert.equal(snap.processes.find((p) => p.pid === browser.pid).isMcp, true)
  const sum = snap.processes.reduce((s, p) => s + p.memoryMb, 0)
  assert.ok(Math.abs(snap.totalMemoryMb - sum) < 0.01)
  assert.ok(snap.processes.some((p) => p.pid === process.pid))

  const ps = JSON.parse(runBg(home, ['ps', '--json']).stdout)
  assert.equal(ps.processes.find((p) => p.pid === plain.pid).command, 'sleep 611')
  const mcp = JSON.parse(runBg(home, ['ps', '--mcp', '--json']).stdout)
  assert.ok(mcp.processes.every((p) => p.isMcp))
  assert.ok(mcp.processes.some((p) => p.pid === browser.pid))
  assert.match(runBg(home, ['ps', '--mcp']).stdout, new RegExp(`${browser.pid} +${process.pid} +[\\d.]+  - +\\[mcp\\] .*chromium 612`))
})

test('orphan detection', () => {
  const p = (pid, ppid, command, startTime, isMcp = false) => ({ pid, ppid, command, memoryMb: 1, startTime, isMcp })
  const before = [p(1, 0, 'init', 1), p(10, 1, 'sshd', 2), p(300, 1, 'old daemon', 5), p(410, 10, 'busy parent', 6)]
  const after = [
    p(1, 0, 'init', 1), p(10, 1, 'sshd', 2),
    p(300, 1, 'playwright run-server', 99, true), // reused pid: same pid, later start time → new, parent init
    p(400, 4242, 'parent gone', 20),                 // its parent is not in the after snapshot
    p(401, 1, 'init parent', 21),
    p(410, 10, 'busy parent', 6),
    p(402, 410, 'child of a live process', 22),     // unrelated: parent alive, not a subreaper
    p(403, 10, "someone else's new shell", 23),     // unrelated: started meanwhile elsewhere
  ]
  const orphans = pm.detectOrphans({ timestamp: 0, processes: before, totalMemoryMb: 0 }, after)
  assert.deepEqual(orphans.map((o) => o.pid), [300, 400, 401], 'MCP first, then by pid')
  assert.deepEqual(pm.detectOrphans(after, after), [], 'nothing new, nothing orphaned')
})

/** Runs a tracker scenario in a child Node process; returns its JSON result and stderr. */
async function trackerScenario(home, body) {
  const script = `
    import { createRequire } from 'node:module'
    import { spawn, spawnSync } from 'node:child_process'
    const pm = createRequire(${JSON.stringify(root + '/')})('./')
    const wait = (ms) => new Promise((r) => setTimeout(r, ms))
    ${body}
  `
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  const code = await new Promise((resolve) => child.on('close', resolve))
  assert.equal(code, 0, stderr)
  return { result: JSON.parse(stdout), stderr }
}

test('memory tracking counts what the task left, not the machine', async (t) => {
  const { home, extraPids } = makeHome(t)
  // An unrelated process, started by another parent (this test), allocates
  // and touches 160 MiB while the quiet phase runs.
  const hog = spawn('perl', ['-e', '$| = 1; print "ready\\n"; <STDIN>; vec($x, 160 * 1048576 - 1, 8) = 1; print "grown\\n"; sleep 60'], { stdio: ['pipe', 'pipe', 'ignore'] })
  extraPids.push(hog.pid)
  const hogSays = readline.createInterface({ input: hog.stdout })[Symbol.asyncIterator]()
  assert.equal((await hogSays.next()).value, 'ready')
  const script = `
    import { createRequire } from 'node:module'
    import { spawnSync } from 'node:child_process'
    import readline from 'node:readline'
    const pm = createRequire(${JSON.stringify(root + '/')})('./')
    const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
    const tracker = new pm.ResourceTracker({ memoryThresholdMb: 100 })
    tracker.snapshotBefore('quiet')
    console.log('before')
    await lines.next() // the unrelated process has grown meanwhile
    spawnSync('true')
    const quiet = tracker.snapshotAfter('quiet')
    tracker.snapshotBefore('hungry')
    // The task leaves a process that allocates and touches 120 MiB.
    const left = spawnSync('sh', ['-c', 'setsid perl -e \\'$| = 1; vec($x, 120 * 1048576 - 1, 8) = 1; print "ready\\n"; sleep 60\\' > "$0" 2>/dev/null </dev/null & echo $!', process.env.FIFO], { encoding: 'utf8' })
    const pid = Number(left.stdout.trim())
    const fs = await import('node:fs')
    while (!fs.readFileSync(process.env.FIFO, 'utf8').includes('ready')) await new Promise((r) => setTimeout(r, 20))
    const hungry = tracker.snapshotAfter('hungry')
    process.kill(pid, 'SIGKILL')
    console.log(JSON.stringify({ quiet, hungry, pid }))
  `
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-mem-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const tracking = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: '', FIFO: path.join(dir, 'out') },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  extraPids.push(tracking.pid)
  let stderr = ''
  tracking.stderr.on('data', (d) => (stderr += d))
  const says = readline.createInterface({ input: tracking.stdout })[Symbol.asyncIterator]()
  assert.equal((await says.next()).value, 'before')
  hog.stdin.write('grow\n')
  assert.equal((await hogSays.next()).value, 'grown')
  tracking.stdin.end('go\n')
  const result = JSON.parse((await says.next()).value)
  extraPids.push(result.pid)
  const { quiet, hungry } = result
  assert.equal(quiet.memorySource, 'pss')
  assert.ok(Math.abs(quiet.memoryDeltaMb) < 10, `quiet delta ${quiet.memoryDeltaMb} while another process grew by 160 MiB`)
  assert.equal(quiet.orphanMemoryMb, 0)
  assert.deepEqual(quiet.warnings, [])
  assert.deepEqual(hungry.orphans.map((o) => o.pid), [result.pid])
  assert.ok(hungry.orphanMemoryMb >= 120 && hungry.orphanMemoryMb < 150, `orphanMemoryMb ${hungry.orphanMemoryMb}`)
  assert.ok(hungry.memoryDeltaMb >= 120 && hungry.memoryDeltaMb < 150, `memoryDeltaMb ${hungry.memoryDeltaMb}`)
  assert.ok(Math.abs(hungry.memoryAfterMb - hungry.memoryBeforeMb - hungry.memoryDeltaMb) < 0.01)
  assert.match(hungry.warnings.at(-1), /^memory growth exceeded threshold delta_mb=1[2-4]\d threshold_mb=100$/)
  assert.match(stderr, /^ *INFO resource snapshot taken processes=\d+ memory_mb=\d+$/m)
  assert.match(stderr, /^ *WARN memory growth exceeded threshold delta_mb=1[2-4]\d threshold_mb=100$/m)
})

test('snapshotAfter of a phase that was never begun (or already ended) is refused; a clean report would say nothing was left', async (t) => {
  const { home } = makeHome(t)
  const { result } = await trackerScenario(home, `
    const tracker = new pm.ResourceTracker({})
    const said = (f) => { try { f(); return null } catch (e) { return [e.code, e.message] } }
    const never = said(() => tracker.snapshotAfter('never-started'))
    tracker.snapshotBefore('p')
    const first = said(() => tracker.snapshotAfter('p'))
    const again = said(() => tracker.snapshotAfter('p'))
    console.log(JSON.stringify({ never, first, again }))
  `)
  assert.deepEqual(result.never, ['ERR_USAGE', "no phase `never-started` is open: call snapshotBefore('never-started') when it begins (none is open)"])
  assert.equal(result.first, null)
  assert.deepEqual(result.again, ['ERR_USAGE', "no phase `p` is open: call snapshotBefore('p') when it begins (none is open)"])
})

test('resource tracker config', async (t) => {
  const { home } = makeHome(t)
  const leaveOrphan = `
    const orphan = spawnSync('sh', ['-c', 'setsid sleep 613 > /dev/null 2>&1 < /dev/null & echo $!'], { encoding: 'utf8', env: { ...process.env, ...tracker.env() } })
    const pid = Number(orphan.stdout.trim())
    await wait(100)
  `
  const off = await trackerScenario(home, `
    const tracker = new pm.ResourceTracker({ enabled: false })
    const before = tracker.snapshotBefore('phase')
    ${leaveOrphan}
    const after = tracker.snapshotAfter('phase')
    process.kill(pid, 'SIGKILL')
    console.log(JSON.stringify({ enabled: tracker.enabled, before, after }))
  `)
  assert.equal(off.result.enabled, false)
  assert.equal(off.result.before, null)
  assert.deepEqual(off.result.after.orphans, [])
  assert.equal(off.result.after.rule, 'disabled')
  assert.equal(off.stderr, '', 'a disabled tracker logs nothing')

  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({
    notify: { url: null }, diagnostics: { resource_tracking: { enabled: false } },
  }))
  const fromFile = await trackerScenario(home, `
    const tracker = new pm.ResourceTracker()
    tracker.snapshotBefore('phase')
    ${leaveOrphan}
    const after = tracker.snapshotAfter('phase')
    process.kill(pid, 'SIGKILL')
    console.log(JSON.stringify({ enabled: tracker.enabled, after }))
  `)
  assert.equal(fromFile.result.enabled, false)
  assert.deepEqual(fromFile.result.after.warnings, [])
  assert.equal(fromFile.stderr, '')
  const r = runBg(home, ['list'])
  assert.equal(r.code, 0, 'the config with diagnostics keys is valid for the CLI too')
})

test('resource tracking during task', async (t) => {
  const { home } = makeHome(t)
  const chromium = sleeperNamed(t, 'chromium')
  const { result, stderr } = await trackerScenario(home, `
    const tracker = new pm.ResourceTracker()
    tracker.snapshotBefore('e2e')
    // Something unrelated starts meanwhile, without the tracker's environment.
    const bystander = spawn('sh', ['-c', 'setsid sleep 614 & sleep 614'], { stdio: 'ignore', detached: true })
    // The task: a shell that launches a browser-like process with setsid, then exits.
    const task = spawnSync('sh', ['-c', ${JSON.stringify(chromium)} + ' 615 > /dev/null 2>&1 < /dev/null & exec setsid ' + ${JSON.stringify(chromium)} + ' 616 > /dev/null 2>&1 < /dev/null &'],
      { env: { ...process.env, ...tracker.env() } })
    for (let i = 0; i < 250; i++) {
      // Until both have exec'd: before its exec, the setsid wrapper's argv also ends in "chromium 616".
      if (pm.snapshot().processes.filter((p) => /^\\S*chromium 61[56]$/.test(p.command)).length === 2) break
      await wait(20)
    }
    const report = tracker.snapshotAfter('e2e')
    const bystanders = pm.snapshot().processes.filter((p) => p.command === 'sleep 614').map((p) => p.pid)
    for (const p of [...report.orphans.map((o) => o.pid), ...bystanders]) { try { process.kill(p, 'SIGKILL') } catch {} }
    console.log(JSON.stringify({ report, task: task.status, bystanders }))
  `)
  const { report } = result
  assert.equal(result.task, 0)
  assert.equal(report.rule, 'cookie')
  assert.equal(report.orphans.length, 2, JSON.stringify(report.orphans))
  assert.ok(report.orphans.every((o) => o.isMcp && /^\S*chromium 61[56]$/.test(o.command)), JSON.stringify(report.orphans))
  assert.ok(result.bystanders.length >= 1 && report.orphans.every((o) => !result.bystanders.includes(o.pid)),
    'the unrelated processes are not reported')
  const names = report.orphans.map((o) => `chromium ${o.pid}`).join(', ')
  assert.deepEqual(report.warnings.filter((w) => w.startsWith('orphaned')), [`orphaned processes detected count=2 processes="[${names}]"`])
  assert.ok(stderr.includes(` WARN orphaned processes detected count=2 processes="[${names}]"`), stderr)
  for (const o of report.orphans) assert.ok(!isAlive(o.pid))
})

test('check shows a running job\'s process count and memory, and the peak once it ended', async (t) => {
  const { home } = makeHome(t)
  const { jobId } = startJob(home, [process.execPath, '-e',
    'globalThis.b = Buffer.alloc(96 * 1024 * 1024, 1); console.log("allocated"); setTimeout(() => {}, 3000)'])
  const running = await waitFor(() => {
    const c = checkJson(home, jobId)
    return c.tail.includes('allocated') ? c : null
  }, { what: 'allocation' })
  assert.equal(running.status, 'running')
  assert.equal(running.processes, 1)
  assert.ok(running.rssMb > 90, `${running.rssMb}`)
  assert.match(runBg(home, ['check', jobId]).stdout, /running for .* · 1 process\(es\), \d+(\.\d)? MiB/)
  runBg(home, ['wait', jobId])
  const ended = checkJson(home, jobId)
  assert.ok(ended.peakRssMb > 90, `${ended.peakRssMb}`)
  assert.equal('processes' in ended, false)
  assert.match(runBg(home, ['check', jobId]).stdout, /success \(exit 0\) after .* · peak \d+(\.\d)? MiB/)
})
