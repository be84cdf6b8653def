// Stacks: `run-bg up` / `down` (JS `up` / `down`) start every process of a
// Procfile or run-bg.json as jobs labelled by name and owned by the stack,
// in the order `after` and readiness give, and kill them again. Against real
// jobs: a listener on an ephemeral 127.0.0.1 port, processes checked by pid.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pm, makeHome, runBg, waitFor, freePort, cookieProcesses, anySurvivor, processStart, readRegistry, jobFiles } from './helpers.mjs'

const NODE = process.execPath

/** A directory named `name-XXXX` holding `files` ({name: text}); removed after the test. */
function stackDir(t, name, files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  for (const [file, text] of Object.entries(files)) {
    fs.writeFileSync(path.join(dir, file), typeof text === 'string' ? text : JSON.stringify(text, null, 2))
  }
  return dir
}

/** The stack's jobs as `list --json` shows them, by label. */
function stackJobs(home, owner) {
  const r = runBg(home, ['list', '--all', '--owner', owner, '--json'])
  assert.equal(r.code, 0, r.stderr)
  return JSON.parse(r.stdout)
}

const byLabel = (jobs) => Object.fromEntries(jobs.map((j) => [j.label, j]))

/** Every live process of these jobs: their main processes and whatever carries their cookie. */
function treeOf(jobs) {
  const found = []
  for (const job of jobs) {
    if (job.pid) {
      const start = processStart(job.pid)
      if (start !== null) found.push({ pid: job.pid, start })
    }
    found.push(...cookieProcesses(job.jobId))
  }
  return found
}

/**
 * db opens `port` only after 700 ms; web checks, as it starts, that db's port
 * accepts (and says so), so a web started before db was ready says
 * `db was down` and exits 3; worker runs after web.
 */
function threeProcessStack(port) {
  const db = `setTimeout(() => require('net').createServer().listen(${port}, '127.0.0.1', () => console.log('db listening')), 700); setInterval(() => {}, 1e9)`
  const web = `require('net').connect(${port}, '127.0.0.1').on('connect', () => { console.log('db was up'); setInterval(() => {}, 1e9) }).on('error', () => { console.log('db was down'); process.exit(3) })`
  return {
    processes: {
      db: { command: [NODE, '-e', db], 'ready-port': port },
      web: { command: [NODE, '-e', web], after: ['db'], 'ready-log': 'db was up' },
      worker: { command: 'echo worker up; exec sleep 600', after: ['web'] },
    },
  }
}

test('up starts a three-process stack in order: web once db listens, worker after web; up again starts nothing; down leaves no survivor', async (t) => {
  const { home } = makeHome(t)
  const port = await freePort()
  const dir = stackDir(t, 'shop', { 'run-bg.json': threeProcessStack(port) })
  const owner = path.basename(dir)

  const up = runBg(home, ['up'], { cwd: dir })
  assert.equal(up.code, 0, up.stderr)
  const lines = up.stdout.trim().split('\n')
  assert.equal(lines.length, 3, `one line per process:\n${up.stdout}`)
  assert.match(lines[0], /^db\s+db-\w+\s+started$/)
  assert.match(lines[1], /^web\s+web-\w+\s+queued \(after db\)$/)
  assert.match(lines[2], /^worker\s+worker-\w+\s+queued \(after web\)$/)

  // No run-bg runs meanwhile (any invocation fills the queues): the jobs'
  // own supervisors hand on, db's when it is ready, web's when it is.
  await waitFor(() => {
    const files = byLabel(jobFiles(home))
    return files.worker?.status === 'running' && files.web?.ready_at
  }, { what: 'the supervisors to start web and worker', timeout: 20_000 })
  // The owner defaults to the file's directory name; `list --owner` shows the stack.
  const running = await waitFor(() => {
    const jobs = byLabel(stackJobs(home, owner))
    return jobs.worker?.status === 'running' && jobs.web?.readyAt && jobs ? jobs : null
  }, { what: 'the whole stack to run', timeout: 20_000 })
  assert.deepEqual(Object.keys(running).sort(), ['db', 'web', 'worker'])
  for (const job of Object.values(running)) assert.equal(job.owner, owner)
  const webLog = runBg(home, ['logs', running.web.jobId])
  assert.match(webLog.stdout, /db was up/, 'web started only once db listened')
  assert.ok(running.web.startedAt >= running.db.readyAt, `web started ${running.web.startedAt}, db ready ${running.db.readyAt}`)
  assert.ok(running.worker.startedAt >= running.web.readyAt, 'worker started once web was ready')

  const again = runBg(home, ['up'], { cwd: dir })
  assert.equal(again.code, 0, again.stderr)
  for (const [i, name] of ['db', 'web', 'worker'].entries()) {
    assert.match(again.stdout.trim().split('\n')[i], new RegExp(`^${name}\\s+${running[name].jobId}\\s+already running$`))
  }
  assert.equal(stackJobs(home, owner).length, 3, 'up again started nothing new')

  const tree = treeOf(Object.values(running))
  assert.ok(tree.length >= 3, `the stack's processes found: ${JSON.stringify(tree)}`)
  const down = runBg(home, ['down', '-f', path.join(dir, 'run-bg.json')])
  assert.equal(down.code, 0, down.stderr)
  const downLines = down.stdout.trim().split('\n')
  // Reverse dependency order: what runs after others goes first.
  assert.deepEqual(downLines.map((l) => l.split(/\s+/)[0]), ['worker', 'web', 'db'], down.stdout)
  for (const line of downLines) assert.match(line, /killed \S+ \(killed\)/)
  assert.deepEqual(anySurvivor(tree), [], 'down leaves no process of the stack')
  for (const job of stackJobs(home, owner)) assert.equal(job.status, 'killed')

  const nothing = runBg(home, ['down'], { cwd: dir })
  assert.equal(nothing.code, 0, nothing.stderr)
  assert.match(nothing.stdout, /nothing of stack \S+ is running/)
})

test('up --yield returns once every process is ready; a one-shot task runs before what comes after it', async (t) => {
  const { home } = makeHome(t)
  const port = await freePort()
  const stack = threeProcessStack(port)
  stack.processes.migrate = { command: 'echo migrated > migrated.txt', cwd: 'data', env: { STAGE: 'test' } }
  stack.processes.web.after.push('migrate')
  const dir = stackDir(t, 'yielding', { 'run-bg.json': stack })
  fs.mkdirSync(path.join(dir, 'data'))

  const up = runBg(home, ['up', '--yield', '--owner', 'yielded', '--json'], { cwd: dir })
  assert.equal(up.code, 0, up.stderr)
  const result = JSON.parse(up.stdout)
  assert.equal(result.owner, 'yielded')
  assert.equal(result.ready, true)
  // Read at once after it returned: db and web are ready, worker runs, migrate ended well.
  const jobs = byLabel(stackJobs(home, 'yielded'))
  assert.ok(jobs.db.readyAt && jobs.web.readyAt, JSON.stringify(jobs))
  assert.equal(jobs.worker.status, 'running')
  assert.equal(jobs.migrate.status, 'success')
  assert.equal(fs.readFileSync(path.join(dir, 'data', 'migrated.txt'), 'utf8'), 'migrated\n', 'cwd is relative to the file')
  assert.ok(jobs.web.startedAt >= jobs.migrate.endedAt, 'web started after the one-shot task ended')
  assert.deepEqual(result.processes.map((p) => [p.name, p.action]).sort(),
    [['db', 'started'], ['migrate', 'started'], ['web', 'queued'], ['worker', 'queued']])
  const down = runBg(home, ['down', '--owner', 'yielded', '--json'], { cwd: dir })
  assert.equal(down.code, 0, down.stderr)
  assert.deepEqual(JSON.parse(down.stdout).killed.map((k) => k.name), ['worker', 'web', 'db'])
})

test('up --yield fails naming the process that failed or was not ready in time', async (t) => {
  const { home } = makeHome(t)
  const dir = stackDir(t, 'failing', {
    'run-bg.json': {
      processes: {
        broken: { command: 'echo starting; exit 3', 'ready-log': 'never' },
        slow: { command: 'exec sleep 600', 'ready-log': 'never', 'ready-timeout': '300ms' },
        after_broken: { command: 'exec sleep 601', after: ['broken'] },
      },
    },
  })
  const up = runBg(home, ['up', '--yield'], { cwd: dir })
  assert.equal(up.code, 1, up.stdout + up.stderr)
  assert.match(up.stderr, /broken: failed \(exit 3 before it was ready\)/)
  assert.match(up.stderr, /slow: not ready after 300ms/)
  assert.match(up.stderr, /after_broken: skipped/)
  runBg(home, ['down'], { cwd: dir })
})

test('a Procfile: comments and blank lines skipped, each process a job labelled by its name; the default file when there is no run-bg.json', async (t) => {
  const { home } = makeHome(t)
  const dir = stackDir(t, 'procs', {
    Procfile: '# the dev stack\n\nweb: echo "web on $PORT_HINT"; exec sleep 600\n  # indented comment\nworker_2:exec sleep 601\n',
  })
  const owner = path.basename(dir)
  const up = runBg(home, ['up'], { cwd: dir })
  assert.equal(up.code, 0, up.stderr)
  assert.match(up.stdout, /^web\s+web-\w+\s+started\nworker_2\s+worker_2-\w+\s+started\n$/)
  const jobs = byLabel(stackJobs(home, owner))
  assert.deepEqual(Object.keys(jobs).sort(), ['web', 'worker_2'])
  assert.equal(jobs.web.command, 'echo "web on $PORT_HINT"; exec sleep 600')
  const tree = treeOf(Object.values(jobs))
  const down = runBg(home, ['down'], { cwd: dir })
  assert.equal(down.code, 0, down.stderr)
  assert.deepEqual(anySurvivor(tree), [])
})

test('a bad Procfile is refused with its line number before anything starts', async (t) => {
  const { home } = makeHome(t)
  const cases = [
    ['web: sleep 600\nthis line has no name\n', /Procfile line 2: `this line has no name` is not `name: command`/],
    ['web: sleep 600\nweb: sleep 601\n', /Procfile line 2: process `web` is named twice \(first on line 1\)/],
    ['we b: sleep 600\n', /Procfile line 1: bad process name `we b`: names are letters, digits, `_` and `-`/],
    ['web:   \n', /Procfile line 1: process `web` has no command/],
    ['# only comments\n\n', /Procfile names no process/],
  ]
  for (const [text, error] of cases) {
    const dir = stackDir(t, 'badproc', { Procfile: text })
    const up = runBg(home, ['up'], { cwd: dir })
    assert.equal(up.code, 2, `${text}: ${up.stdout}${up.stderr}`)
    assert.match(up.stderr, error)
    assert.match(up.stderr, new RegExp(path.join(dir, 'Procfile').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the message names the file')
  }
  assert.equal(readRegistry(home).length, 0, 'nothing started')
})

test('a bad run-bg.json is refused naming the process and field, before anything starts', async (t) => {
  const { home } = makeHome(t)
  const cases = [
    [{ processes: { web: { comand: 'x' } } }, /process `web`: unknown field `comand`/],
    [{ processes: { web: { command: 'sleep 1', 'ready-port': 'eighty' } } }, /process `web`: ready-port/],
    [{ processes: { web: { command: 'sleep 1', 'ready-port': 70000 } } }, /process `web`: ready-port/],
    [{ processes: { web: { command: 'sleep 1', timeout: 'soon' } } }, /process `web`: timeout: /],
    [{ processes: { web: { command: 'sleep 1', restart: 'sometimes' } } }, /process `web`: restart/],
    [{ processes: { web: { command: [] } } }, /process `web`: command: an empty list/],
    [{ processes: { web: {} } }, /process `web`: missing field `command`/],
    [{ processes: { 'w b': { command: 'x' } } }, /bad process name `w b`/],
    [{ processes: { a: { command: 'x', after: ['b'] }, b: { command: 'x', after: ['c'] }, c: { command: 'x', after: ['a'] } } },
      /`after` makes a cycle: a → b → c → a/],
    [{ processes: { web: { command: 'x', after: ['db'] } } }, /process `web`: after: no process `db` in this file/],
    [{ processes: { web: { command: 'x', after: ['web'] } } }, /process `web`: after: a process cannot run after itself/],
    [{ process: { web: { command: 'x' } } }, /unknown field `process`, expected `processes`/],
    [{ processes: {} }, /names no process/],
    ['{ "processes": ', /not valid JSON/],
  ]
  for (const [json, error] of cases) {
    const dir = stackDir(t, 'badjson', { 'run-bg.json': json })
    const up = runBg(home, ['up'], { cwd: dir })
    assert.equal(up.code, 2, `${JSON.stringify(json)}: ${up.stdout}${up.stderr}`)
    assert.match(up.stderr, error, JSON.stringify(json))
    assert.match(up.stderr, /run-bg\.json/, 'the message names the file')
  }
  const empty = stackDir(t, 'nofile', {})
  const none = runBg(home, ['up'], { cwd: empty })
  assert.equal(none.code, 2)
  assert.match(none.stderr, /no run-bg\.json or Procfile in .*; give the file with -f/)
  assert.equal(readRegistry(home).length, 0, 'nothing started')
})

test('JS up() and down() return what started, what was already running and what was killed', async (t) => {
  const { home } = makeHome(t)
  process.env.PROC_MANAGER_HOME = home
  const dir = stackDir(t, 'jsstack', { Procfile: 'a: exec sleep 600\nb: exec sleep 601\n' })
  const file = path.join(dir, 'Procfile')
  const first = await pm.up(file)
  assert.equal(first.owner, path.basename(dir))
  assert.deepEqual(first.processes.map((p) => [p.name, p.action]), [['a', 'started'], ['b', 'started']])
  const second = await pm.up(file, {})
  assert.deepEqual(second.processes.map((p) => [p.name, p.action, p.jobId]),
    first.processes.map((p) => [p.name, 'already running', p.jobId]))
  const tree = treeOf(first.processes.map((p) => ({ jobId: p.jobId, pid: p.pid })))
  const down = await pm.down(file)
  assert.deepEqual(down.killed.map((k) => [k.name, k.jobId, k.status]).sort(),
    first.processes.map((p) => [p.name, p.jobId, 'killed']))
  assert.deepEqual(anySurvivor(tree), [])
  await assert.rejects(pm.up(path.join(dir, 'nosuch.json')), /cannot read .*nosuch\.json/)
  await assert.rejects(pm.up(file, { owner: 'x', lable: 1 }), /unknown option `lable` for up/)
})
