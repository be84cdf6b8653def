// What the Windows suite's files share (run by scripts/test-windows.sh with
// the official node.exe under wine; each test file skips elsewhere). Every
// wait polls with a deadline; each test gets its own PROC_MANAGER_HOME and
// ends what it started, by pid.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

export const skip = process.platform !== 'win32' && 'Windows only (scripts/test-windows.sh runs it under wine)'
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const require = createRequire(import.meta.url)
export const pm = skip ? null : require(root)
export const runBg = path.join(root, 'native', 'run-bg.exe')

/** A fresh home for one test (config.json from `config`), set for the addon and for run-bg.exe. */
export function freshHome(config) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-win-'))
  if (config) fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify(config))
  process.env.PROC_MANAGER_HOME = home
  return home
}

/**
 * A fresh directory for a test's files, removed afterwards when it can be
 * (a job killed in a later cleanup may still hold a file in it then).
 */
export function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-win-scratch-'))
  t.after(() => {
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
    } catch {}
  })
  return dir
}

/** Polls `check` every 100 ms until it gives something truthy, for at most `ms`. */
export async function until(what, check, ms = 20000) {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** run-bg.exe with `args` in `home`: {status, stdout, stderr}. */
export function cli(args, home, options = {}) {
  return spawnSync(runBg, args, { encoding: 'utf8', env: { ...process.env, PROC_MANAGER_HOME: home }, ...options })
}

/** `run-bg … --json -- argv` started; its JSON answer (the test fails if it did not start). */
export function startJob(home, argv, flags = []) {
  const r = cli([...flags, '--json', '--', ...argv], home)
  if (r.status !== 0) throw new Error(`run-bg did not start the job: ${r.stdout}${r.stderr}`)
  return JSON.parse(r.stdout)
}

export function checkJson(home, id) {
  return JSON.parse(cli(['check', id, '--json'], home).stdout)
}

export function jobRecord(home, id) {
  return JSON.parse(fs.readFileSync(path.join(home, 'jobs', id, 'job.json'), 'utf8'))
}

/**
 * Every live process below `pid` (not `pid` itself), from a snapshot. A
 * child starts no earlier than its parent: Windows keeps a dead parent's pid
 * in its children's records and reuses it.
 */
export function descendants(pid) {
  const procs = pm.snapshot().processes
  const started = new Map(procs.filter((p) => p.pid === pid).map((p) => [p.pid, p.startTime]))
  let grew = true
  while (grew) {
    grew = false
    for (const p of procs) {
      if (!started.has(p.pid) && started.has(p.ppid) && p.startTime >= started.get(p.ppid)) {
        started.set(p.pid, p.startTime)
        grew = true
      }
    }
  }
  started.delete(pid)
  return procs.filter((p) => started.has(p.pid))
}

export function alive(pids) {
  const live = new Set(pm.snapshot().processes.map((p) => p.pid))
  return pids.filter((pid) => live.has(pid))
}

/** Ends what a failed test left, by pid. */
export function endAll(pids) {
  for (const pid of pids) {
    try {
      process.kill(pid)
    } catch {}
  }
}

/** A job (by its answer) killed after the test, with every process it had then. */
export function killAfter(t, home, job) {
  t.after(() => {
    const tree = job.pid ? [job.pid, ...descendants(job.pid).map((p) => p.pid)] : []
    cli(['kill', job.jobId, '--force'], home)
    endAll(tree)
  })
}

/** A file's lines (none when it does not exist). */
export const fileLines = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split(/\r?\n/).filter(Boolean) : [])

/** A node.exe script written into `dir`; the argv that runs it with `args`. */
export function nodeScript(dir, name, source, args = []) {
  const file = path.join(dir, name)
  fs.writeFileSync(file, source)
  return [process.execPath, file, ...args]
}
