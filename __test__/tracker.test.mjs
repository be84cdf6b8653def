// The resource tracker finds what a task left behind when the task's
// launcher strips the environment (so the tracker's cookie is lost): the
// tracking process is a child subreaper between snapshotBefore and
// snapshotAfter, and what is orphaned below it is found by ancestry. Nothing
// else is reported: not processes started meanwhile by another parent, not a
// run-bg job's supervisor or its processes, not the killed agent itself.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import readline from 'node:readline'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { root, makeHome, RUN_BG, runBg, startJob, waitFor, isAlive, killPid, readRegistry, cookieProcesses, anySurvivor } from './helpers.mjs'

const MB = 96

/**
 * Runs the tracking process: a Node process that takes `before`, tells us,
 * waits for our go (we start unrelated processes meanwhile), launches an
 * "agent" with only HOME and PATH in its environment (as the MCP SDK's
 * StdioClientTransport does), which leaves a setsid'd grandchild that
 * allocates MB MiB and starts a run-bg job, then kills the agent and takes
 * `after` at once (the agent is not reaped yet).
 */
function trackingProcess(home, { cookie }) {
  const script = `
    import { createRequire } from 'node:module'
    import { spawn } from 'node:child_process'
    import readline from 'node:readline'
    const pm = createRequire(${JSON.stringify(root + '/')})('./')
    const tracker = new pm.ResourceTracker({ memoryThresholdMb: 100 })
    const launcherEnv = ${cookie} ? { ...process.env, ...tracker.env() } : { ...process.env }
    tracker.snapshotBefore('agent')
    console.log(JSON.stringify({ before: true }))
    const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
    await lines.next()
    // What the SDK's default transport keeps of the launcher's environment.
    const stripped = { HOME: launcherEnv.HOME, PATH: launcherEnv.PATH }
    const agent = spawn('sh', ['-c',
      'setsid perl -e \\'$| = 1; vec($x, ${MB} * 1048576 - 1, 8) = 1; print "grandchild $$\\\\n"; sleep 600\\' & ' +
      'PROC_MANAGER_HOME=' + ${JSON.stringify(home)} + ' ' + ${JSON.stringify(RUN_BG)} + ' --json -- sleep 602; ' +
      'exec sleep 601'], { env: stripped, stdio: ['ignore', 'pipe', 'inherit'] })
    let grandchild = null, job = null
    readline.createInterface({ input: agent.stdout }).on('line', (line) => {
      const m = /^grandchild (\\d+)$/.exec(line)
      if (m) grandchild = Number(m[1])
      else if (line.startsWith('{')) job = JSON.parse(line).jobId
    })
    while (grandchild === null || job === null) await new Promise((r) => setTimeout(r, 20))
    // Until the agent has exec'd its sleep: the job is started and the agent idles.
    for (;;) {
      let cmd = ''
      try { cmd = (await import('node:fs')).readFileSync('/proc/' + agent.pid + '/cmdline', 'utf8') } catch {}
      if (cmd.startsWith('sleep')) break
      await new Promise((r) => setTimeout(r, 20))
    }
    agent.kill('SIGKILL')
    // Synchronously, right after the kill: the agent is not reaped yet.
    const report = tracker.snapshotAfter('agent')
    console.log(JSON.stringify({ report, agent: agent.pid, grandchild, job }))
    await lines.next()
  `
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: 'off' },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const out = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  return {
    pid: child.pid,
    async next() {
      const { value, done } = await out.next()
      if (done) throw new Error('the tracking process ended early')
      return JSON.parse(value)
    },
    send(line) { child.stdin.write(line + '\n') },
    stop() { child.stdin.end(); killPid(child.pid) },
  }
}

for (const cookie of [true, false]) {
  test(`tracker: a stripped-environment agent's setsid'd grandchild is found, nothing else (${cookie ? 'cookie handed out' : 'no cookie'})`, async (t) => {
    const { home, extraPids } = makeHome(t)
    const tracking = trackingProcess(home, { cookie })
    t.after(() => tracking.stop())
    assert.deepEqual(await tracking.next(), { before: true })
    // Started meanwhile by another parent (this test process): not the task's.
    // `sleep` itself, not under `sh -c`: the pid killed at the end is then
    // the whole of it (a shell killed left its sleep to init for 30 s).
    const bystander = spawn('sleep', ['30'], { stdio: 'ignore' })
    extraPids.push(bystander.pid)
    const bystanderJob = startJob(home, ['sleep', '603'])
    await waitFor(() => isAlive(bystander.pid), { what: 'the bystander' })
    tracking.send('go')
    const { report, agent, grandchild, job } = await tracking.next()
    extraPids.push(grandchild, agent)
    const left = report.orphans.map((o) => o.pid)
    assert.deepEqual(left, [grandchild], JSON.stringify(report.orphans, null, 1))
    assert.equal(report.rule, cookie ? 'cookie' : 'ancestry')
    const jobs = readRegistry(home)
    const supervisors = jobs.map((j) => j.supervisor?.pid)
    assert.ok(jobs.some((j) => j.id === job) && jobs.some((j) => j.id === bystanderJob.jobId))
    for (const pid of [bystander.pid, agent, ...supervisors, bystanderJob.pid, ...jobs.map((j) => j.main?.pid)]) {
      assert.ok(!left.includes(pid), `${pid} is not the task's leftover`)
    }
    // Its memory: PSS where readable, and only what the task left.
    assert.equal(report.memorySource, 'pss')
    assert.ok(report.orphanMemoryMb >= MB && report.orphanMemoryMb < MB + 30, `orphanMemoryMb ${report.orphanMemoryMb}`)
    assert.ok(Math.abs(report.orphans[0].memoryMb - report.orphanMemoryMb) < 0.01)
    assert.ok(report.warnings.some((w) => w.startsWith('orphaned processes detected count=1 ')), report.warnings.join('\n'))
    killPid(grandchild)
  })
}

test('tracker: the subreaper is on only between snapshotBefore and snapshotAfter, and adopted zombies are reaped', async (t) => {
  const { home } = makeHome(t)
  const script = `
    import { createRequire } from 'node:module'
    import { spawnSync } from 'node:child_process'
    import fs from 'node:fs'
    const pm = createRequire(${JSON.stringify(root + '/')})('./')
    const tracker = new pm.ResourceTracker()
    const children = () => fs.readFileSync('/proc/' + process.pid + '/task/' + process.pid + '/children', 'utf8').trim().split(/\\s+/).filter(Boolean).map(Number)
    const state = (pid) => { try { const s = fs.readFileSync('/proc/' + pid + '/stat', 'utf8'); return s.slice(s.lastIndexOf(')') + 2)[0] } catch { return null } }
    tracker.snapshotBefore('a')
    // A grandchild that outlives its parent (an agent in a session of its
    // own), then exits: adopted by us, a zombie until reaped. Its session
    // proves it is not a process we forked (see reap_adopted).
    const out = spawnSync('setsid', ['sh', '-c', '(sleep 0.3; exit 3) & echo $!'], { encoding: 'utf8' })
    const adopted = Number(out.stdout.trim())
    while (state(adopted) !== 'Z') await new Promise((r) => setTimeout(r, 20))
    const adoptedBeforeAfter = children().includes(adopted)
    // A direct child of ours that has exited: Node owns its exit status.
    const { spawn } = await import('node:child_process')
    const own = spawn('true')
    let ownExit = null
    own.on('exit', (code) => { ownExit = code })
    while (state(own.pid) !== 'Z' && ownExit === null) { const t0 = Date.now(); while (Date.now() - t0 < 5); }
    const report = tracker.snapshotAfter('a')
    const zombieLeft = state(adopted)
    while (ownExit === null) await new Promise((r) => setTimeout(r, 20))
    // After snapshotAfter an orphan goes to init (or a subreaper above us), not to us.
    // Its output elsewhere, or spawnSync waits for it (30 s) to close the pipe.
    const later = spawnSync('sh', ['-c', 'sleep 30 >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' })
    const laterPid = Number(later.stdout.trim())
    const laterParent = Number(fs.readFileSync('/proc/' + laterPid + '/stat', 'utf8').split(') ')[1].split(' ')[1])
    process.kill(laterPid, 'SIGKILL')
    console.log(JSON.stringify({ adoptedBeforeAfter, zombieLeft, ownExit, laterParent, me: process.pid, orphans: report.orphans }))
  `
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: 'off' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let stdout = ''
  child.stdout.on('data', (d) => (stdout += d))
  const code = await new Promise((resolve) => child.on('close', resolve))
  assert.equal(code, 0)
  const r = JSON.parse(stdout)
  assert.equal(r.adoptedBeforeAfter, true, 'the orphaned grandchild was re-parented to the tracking process')
  assert.equal(r.zombieLeft, null, 'snapshotAfter reaped the zombie it adopted')
  assert.equal(r.ownExit, 0, "Node's own child's exit status was left to Node")
  assert.notEqual(r.laterParent, r.me, 'the subreaper is off again')
  assert.deepEqual(r.orphans, [], 'an exited grandchild is not left behind')
})

// A killed Node agent's main thread is a zombie within milliseconds while a
// worker thread frees its heap (tens to hundreds of milliseconds for 800
// MiB); the kernel hands what the agent started to us, the subreaper, only
// when that last thread is gone. snapshotAfter, called right after the kill,
// must wait for that (and did not: the zombie was not waited for).
const AGENT_MB = 800
const AGENT_RUNS = 5
test(`tracker: what a killed multi-threaded agent started is found by snapshotAfter right after the kill (${AGENT_RUNS} runs, ${AGENT_MB} MiB in a worker)`, async (t) => {
  const { home, extraPids } = makeHome(t)
  // The agent: a worker thread fills ${AGENT_MB} MiB, then the main thread starts sleep and prints its pid.
  const agent = `
    const { Worker } = require('node:worker_threads')
    const worker = new Worker("const b = Buffer.alloc(${AGENT_MB} << 20); b.fill(1); require('node:worker_threads').parentPort.postMessage(b[12345]); setInterval(() => b[0]++, 1e6)", { eval: true })
    worker.on('message', () => {
      const sleep = require('node:child_process').spawn('sleep', ['600'], { stdio: 'ignore' })
      console.log(sleep.pid)
    })
  `
  const script = `
    import { createRequire } from 'node:module'
    import { spawn } from 'node:child_process'
    import readline from 'node:readline'
    const pm = createRequire(${JSON.stringify(root + '/')})('./')
    const tracker = new pm.ResourceTracker()
    for (let run = 0; run < ${AGENT_RUNS}; run++) {
      tracker.snapshotBefore('agent')
      const child = spawn(process.execPath, ['-e', ${JSON.stringify(agent)}], { stdio: ['ignore', 'pipe', 'inherit'] })
      const exited = new Promise((resolve) => child.on('exit', resolve))
      const { value: line } = await readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]().next()
      const sleep = Number(line)
      console.log(JSON.stringify({ sleep }))
      child.kill('SIGKILL')
      const start = performance.now()
      const report = tracker.snapshotAfter('agent')
      const ms = Math.round(performance.now() - start)
      console.log(JSON.stringify({ run, agent: child.pid, sleep, orphans: report.orphans.map((o) => o.pid), ms }))
      process.kill(sleep, 'SIGKILL')
      await exited
    }
  `
  const tracking = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: 'off' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  extraPids.push(tracking.pid)
  const runs = []
  const lines = readline.createInterface({ input: tracking.stdout })
  lines.on('line', (line) => {
    const message = JSON.parse(line)
    if ('run' in message) runs.push(message)
    else extraPids.push(message.sleep)
  })
  const code = await Promise.race([
    new Promise((resolve) => tracking.on('close', resolve)),
    new Promise((resolve) => setTimeout(resolve, 60_000, 'timed out after 60 s').unref()),
  ])
  assert.equal(code, 0, `the tracking process: ${JSON.stringify(runs)}`)
  assert.equal(runs.length, AGENT_RUNS)
  const missed = runs.filter((r) => !r.orphans.includes(r.sleep))
  assert.deepEqual(missed, [], `the agent's sleep was missed in ${missed.length} of ${runs.length} runs: ${JSON.stringify(runs)}`)
  for (const r of runs) assert.deepEqual(r.orphans, [r.sleep], 'the sleep alone is left behind (not the agent)')
})

// Optional: a real browser's tree (zygotes, renderers, crashpad) under a job.
const chromium = ['/usr/bin/chromium', '/usr/lib/chromium/chromium'].find((p) => { try { fs.accessSync(p, fs.constants.X_OK); return true } catch { return false } })

// Optional: what a Playwright agent leaves, a headless Chromium whose tree
// (zygotes, renderers, GPU and network processes) the agent's SIGKILL hands
// to the tracking process once the agent's last thread is gone.
const CHROMIUM_RUNS = 2
test(`tracker: a killed agent's Chromium is found whole by snapshotAfter right after the kill (${CHROMIUM_RUNS} runs)`,
  { skip: chromium ? false : 'Debian chromium is not installed (/usr/bin/chromium)' }, async (t) => {
    const { home, extraPids } = makeHome(t)
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-chromium-'))
    t.after(() => fs.rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }))
    // The agent: a worker thread holds 200 MiB (a Playwright agent's heap), the main thread starts the browser.
    const browser = [chromium, '--headless', '--no-sandbox', '--disable-dev-shm-usage', '--remote-debugging-port=0', 'about:blank']
    const agent = `
      const { Worker } = require('node:worker_threads')
      const worker = new Worker("const b = Buffer.alloc(200 << 20); b.fill(1); require('node:worker_threads').parentPort.postMessage(b[7]); setInterval(() => b[0]++, 1e6)", { eval: true })
      worker.on('message', () => {
        const [program, ...args] = ${JSON.stringify(browser)}
        const child = require('node:child_process').spawn(program, [...args, '--user-data-dir=' + process.argv[1]], { stdio: 'ignore' })
        console.log(child.pid)
      })
    `
    const script = `
      import { createRequire } from 'node:module'
      import { spawn } from 'node:child_process'
      import fs from 'node:fs'
      import readline from 'node:readline'
      const pm = createRequire(${JSON.stringify(root + '/')})('./')
      const tracker = new pm.ResourceTracker()
      const table = () => fs.readdirSync('/proc').filter((n) => /^\\d+$/.test(n)).flatMap((n) => {
        try {
          const stat = fs.readFileSync('/proc/' + n + '/stat', 'utf8')
          const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
          return f[0] === 'Z' ? [] : [{ pid: Number(n), ppid: Number(f[1]), start: f[19] }]
        } catch { return [] }
      })
      const treeBelow = (top) => {
        const rows = table()
        const found = rows.filter((r) => r.pid === top)
        for (let i = 0; i < found.length; i++) found.push(...rows.filter((r) => r.ppid === found[i].pid))
        return found
      }
      for (let run = 0; run < ${CHROMIUM_RUNS}; run++) {
        tracker.snapshotBefore('agent')
        const child = spawn(process.execPath, ['-e', ${JSON.stringify(agent)}, ${JSON.stringify(profile)} + '/' + run], { stdio: ['ignore', 'pipe', 'inherit'] })
        const exited = new Promise((resolve) => child.on('exit', resolve))
        const { value: line } = await readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]().next()
        const top = Number(line)
        // Until the browser's tree has stopped growing (zygotes, GPU, network, renderer).
        let tree = [], stableSince = Date.now()
        for (const deadline = Date.now() + 15000; Date.now() < deadline;) {
          const now = treeBelow(top)
          console.log(JSON.stringify({ pids: now.map((p) => p.pid) }))
          if (now.length !== tree.length) stableSince = Date.now()
          tree = now
          if (tree.length >= 4 && Date.now() - stableSince > 1000) break
          await new Promise((r) => setTimeout(r, 100))
        }
        child.kill('SIGKILL')
        const report = tracker.snapshotAfter('agent')
        const alive = tree.filter((p) => table().some((r) => r.pid === p.pid && r.start === p.start)).map((p) => p.pid)
        console.log(JSON.stringify({ run, tree: alive, orphans: report.orphans.map((o) => o.pid), orphanMemoryMb: report.orphanMemoryMb }))
        // The browser's tree, and what left it (crashpad handlers double-fork).
        for (const pid of [...treeBelow(top), ...tree].map((p) => p.pid).concat(report.orphans.map((o) => o.pid))) {
          try { process.kill(pid, 'SIGKILL') } catch {}
        }
        await exited
      }
    `
    const tracking = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, PROC_MANAGER_HOME: home, PROC_MANAGER_LOG: 'off' },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    extraPids.push(tracking.pid)
    const runs = []
    readline.createInterface({ input: tracking.stdout }).on('line', (line) => {
      const message = JSON.parse(line)
      if ('run' in message) {
        runs.push(message)
        extraPids.push(...message.orphans)
      } else extraPids.push(...message.pids)
    })
    const code = await Promise.race([
      new Promise((resolve) => tracking.on('close', resolve)),
      new Promise((resolve) => setTimeout(resolve, 60_000, 'timed out after 60 s').unref()),
    ])
    assert.equal(code, 0, `the tracking process: ${JSON.stringify(runs)}`)
    assert.equal(runs.length, CHROMIUM_RUNS)
    for (const r of runs) {
      assert.ok(r.tree.length >= 4, `the browser ran several processes: ${JSON.stringify(r)}`)
      const missed = r.tree.filter((pid) => !r.orphans.includes(pid))
      assert.deepEqual(missed, [], `run ${r.run}: ${missed.length} of ${r.tree.length} Chromium processes missed: ${JSON.stringify(r)}`)
    }
  })
test('chromium headless under a job: ps marks it with its job, and kill leaves 0 survivors',
  { skip: chromium ? false : 'Debian chromium is not installed (/usr/bin/chromium)' }, async (t) => {
    const { home } = makeHome(t)
    const { jobId } = startJob(home, [chromium, '--headless', '--no-sandbox', '--remote-debugging-port=0', 'about:blank'])
    const tree = await waitFor(() => {
      const found = cookieProcesses(jobId)
      return found.length >= 3 ? found : null
    }, { timeout: 30_000, what: 'chromium to start its helpers' })
    const ps = JSON.parse(runBg(home, ['ps', '--json']).stdout).processes
    for (const { pid } of tree) {
      const row = ps.find((p) => p.pid === pid)
      if (row) assert.equal(row.jobId, jobId, `${row.command} belongs to the job`)
    }
    assert.ok(ps.some((p) => p.jobId === jobId && p.isMcp), 'the browser is marked')
    assert.equal(runBg(home, ['kill', jobId]).code, 0)
    await waitFor(() => anySurvivor(tree).length === 0, { what: 'every chromium process to be gone' })
  })
