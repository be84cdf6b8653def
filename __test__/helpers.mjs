// Shared fixtures: a private PROC_MANAGER_HOME per test, the real run-bg
// binary, polling with deadlines, and cleanup of every job by PID.
import { spawnSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
export const RUN_BG = path.join(root, 'native', 'run-bg')
export const pm = createRequire(import.meta.url)(root)

/** A fresh home; `cleanup()` kills every job recorded there and deletes it. */
export function makeHome(t, config) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-test-'))
  // No interrupt service runs during tests unless a test starts one and says so.
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null }, ...config }))
  const extraPids = []
  const cleanup = async () => {
    runBg(home, ['kill', '--all', '--force'])
    for (const job of readRegistry(home)) {
      if (job.main) killPid(job.main.pid)
    }
    for (const pid of extraPids) killPid(pid)
    // Every run-bg call (this kill too) may leave a deliverer, notifier or
    // watcher writing into the home; deleting it under them fails with ENOTEMPTY.
    await waitForQuiet(home)
    fs.rmSync(home, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
  }
  t?.after(cleanup)
  return { home, extraPids, cleanup }
}

export function runBg(home, args, options = {}) {
  const result = spawnSync(RUN_BG, args, {
    env: { ...process.env, PROC_MANAGER_HOME: home, ...(options.env || {}) },
    encoding: 'utf8',
    cwd: options.cwd,
    timeout: options.timeout ?? 60_000,
    maxBuffer: 256 * 1024 * 1024,
  })
  if (result.error) throw result.error
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** Starts a job with the CLI and returns its id (asserting the ack). */
export function startJob(home, argv, flags = []) {
  const r = runBg(home, [...flags, '--json', '--', ...argv])
  if (r.code !== 0) throw new Error(`run-bg failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/**
 * The jobs as readers see them: jobs.json, plus each job's own job.json for
 * a job the registry has not taken in yet (a start writes job.json first and
 * adds the registry entry when the lock is free, possibly after it returns).
 */
export function readRegistry(home) {
  let jobs = []
  try {
    jobs = JSON.parse(fs.readFileSync(path.join(home, 'jobs.json'), 'utf8')).jobs
  } catch {}
  const known = new Set(jobs.map((j) => j.id))
  let dirs = []
  try {
    dirs = fs.readdirSync(path.join(home, 'jobs'))
  } catch {}
  for (const id of dirs.filter((d) => !known.has(d))) {
    try {
      jobs.push(JSON.parse(fs.readFileSync(path.join(home, 'jobs', id, 'job.json'), 'utf8')))
    } catch {}
  }
  return jobs
}

export function checkJson(home, id, extra = []) {
  const r = runBg(home, ['check', id, '--json', ...extra])
  if (r.code !== 0) throw new Error(`check failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout)
}

export async function waitFor(predicate, { timeout = 15_000, interval = 20, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, interval))
  }
}

/** Start time (clock ticks since boot) of a live, non-zombie process, or null. */
export function processStart(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (fields[0] === 'Z' || fields[0] === 'X') return null
    return fields[19]
  } catch {
    return null
  }
}

export const isAlive = (pid) => processStart(pid) !== null

export function killPid(pid) {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {}
}

export function logBytes(logPath) {
  let total = 0
  for (const name of fs.readdirSync(path.dirname(logPath))) {
    // Files being dropped after a rotation (`.output.log.dropped-N`) count too.
    if (name.includes('output.log')) total += fs.statSync(path.join(path.dirname(logPath), name)).size
  }
  return total
}

/** Runs a node script in a child process and resolves with its stdout once it exits. */
export function runNode(script, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout: out, pid: child.pid }))
  })
}

/**
 * Every process but this one with its environment, each entry framed by NULs
 * (`\0KEY=value\0`) so that a search for `\0KEY=` matches whole names only.
 * Processes whose environment cannot be read (another user's) are left out.
 */
export function processEnvironments() {
  const found = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      found.push({ pid: Number(name), environ: `\0${fs.readFileSync(`/proc/${name}/environ`, 'latin1')}` })
    } catch {}
  }
  return found
}

/** Every live process whose environment carries the job's cookie, as {pid, start}. */
export function cookieProcesses(jobId) {
  const needle = `\0PROC_MANAGER_JOB=${jobId}\0`
  const found = []
  for (const { pid, environ } of processEnvironments()) {
    if (!environ.includes(needle)) continue
    const start = processStart(pid)
    if (start !== null) found.push({ pid, start })
  }
  return found
}

/** True if any of the recorded processes (same pid and start time) still lives. */
export function anySurvivor(processes) {
  return processes.filter((p) => processStart(p.pid) === p.start)
}

/**
 * A job whose processes escape its process group in every way we know:
 * a setsid child, a setsid grandchild whose parent already exited, a
 * double-forked daemon and a process that ignores SIGTERM. Resolves once all
 * seven processes run (the main shell, the four escapees, the TERM-ignoring
 * shell's sleep and the main sleep are counted by cookie).
 */
export const ESCAPING_TREE = [
  'sh', '-c',
  'setsid sleep 600 & ' +
  '(setsid sleep 601 &) ; ' +
  '(sleep 602 &) & ' +
  'sh -c \'trap "" TERM; while :; do sleep 1; done\' & ' +
  'echo tree-ready; sleep 603',
]

/**
 * A real HTTP listener on 127.0.0.1 in its own process (so a test blocked in
 * spawnSync cannot stall it). Records each request body as a JSON line.
 * mode 'ok' answers 200; 'hang' accepts and never answers.
 */
export async function startListener(t, { port = 0, mode = 'ok' } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-listener-'))
  const record = path.join(dir, 'requests.jsonl')
  const script = `
    const http = require('node:http'), fs = require('node:fs')
    const server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (d) => (body += d))
      req.on('end', () => {
        fs.appendFileSync(${JSON.stringify(record)}, JSON.stringify({ at: Date.now(), url: req.url, body }) + '\\n')
        if (${JSON.stringify(mode)} === 'ok') res.end('ok')
      })
    })
    server.listen(${port}, '127.0.0.1', () => console.log(server.address().port))
  `
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const actualPort = await new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())))
    child.once('exit', (code) => reject(new Error(`listener exited ${code}`)))
  })
  const stop = () => {
    killPid(child.pid)
    fs.rmSync(dir, { recursive: true, force: true })
  }
  t?.after(stop)
  return {
    port: actualPort,
    url: `http://127.0.0.1:${actualPort}/trigger`,
    pid: child.pid,
    stop,
    requests() {
      try {
        return fs.readFileSync(record, 'utf8').trim().split('\n').filter(Boolean).map((l) => {
          const r = JSON.parse(l)
          return { ...r, json: JSON.parse(r.body) }
        })
      } catch {
        return []
      }
    },
  }
}

/** A port nothing listens on (bound, then released). */
export async function freePort() {
  const net = await import('node:net')
  return new Promise((resolve) => {
    const server = net.createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Resolves once nothing of proc-manager works for `home` any more: no
 * supervisor, notifier, announcer, deliverer or watcher (each carries
 * PROC_MANAGER_SUPERVISOR and this home in its environment). After that no
 * further notification can be sent, so a count of requests is final.
 */
export function waitForQuiet(home, timeout = 20_000) {
  const mine = `\0PROC_MANAGER_HOME=${home}\0`
  const busy = () => processEnvironments().some(({ pid, environ }) =>
    environ.includes(mine) && environ.includes('\0PROC_MANAGER_SUPERVISOR=') && processStart(pid) !== null)
  return waitFor(() => !busy(), { timeout, what: 'proc-manager to finish its background work' })
}

/** The official MCP SDK client, connected over stdio to our MCP server for `home`; closed after the test. */
export async function connectMcp(t, home, env = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.join(root, 'packages', 'mcp', 'proc-manager-mcp.mjs')],
    env: { ...process.env, PROC_MANAGER_HOME: home, ...env },
    stderr: 'pipe',
  })
  const client = new Client({ name: 'test', version: '1.0.0' })
  await client.connect(transport)
  t.after(() => client.close())
  return client
}

/**
 * What tools/list costs: whole, as the client receives it, and what a host
 * hands the model on every turn (each tool's name, description and
 * inputSchema, and the server's instructions, said once for all tools).
 */
export function toolsBudget(client, tools) {
  const whole = JSON.stringify({ tools }).length
  const facing = JSON.stringify(tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }))).length
  return { whole, modelFacing: facing + (client.getInstructions() ?? '').length }
}

/** Each job's own job.json (written first by whoever changes the job), read without running run-bg. */
export function jobFiles(home) {
  const dir = path.join(home, 'jobs')
  const jobs = []
  for (const id of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    try {
      jobs.push(JSON.parse(fs.readFileSync(path.join(dir, id, 'job.json'), 'utf8')))
    } catch {}
  }
  return jobs
}

/** The state letter of /proc/<pid>/stat (R, S, T, …), or null once gone. */
export function procState(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]
  } catch {
    return null
  }
}
