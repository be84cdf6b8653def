// Runs the real Gemini CLI (npm @google/gemini-cli, installed under
// $PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses) against the
// loopback stub in gemini-stub.mjs, inside a private network namespace
// (`unshare -n`, `lo` brought up) so nothing leaves the machine.
//
//   const why = geminiSkipReason()            // null, or why the tests cannot run
//   const g = makeGeminiHome(t, { settings }) // private HOME, trusted project dir
//   const run = startGemini(t, { g, prompt, reply, data, env })
//   await run.waitForRequest((r) => ..., { timeout })
//   const end = await run.exited              // { code, stdout, result, sessionId, ... }
//
// The stub and gemini run in one driver process (this file, `--drive`) under
// unshare; the stub logs every request to a JSONL file the test reads. The
// reply function is serialized (`fn.toString()`): it must be self-contained
// and gets (req, data), see gemini-stub.mjs for req and the reply shapes.
//
// Processes: the driver (child of the test, via unshare's exec), the gemini
// wrapper node (ignores SIGINT/SIGTERM/SIGHUP), the gemini child node (the real
// CLI; hooks and shell tool commands are its descendants). Everything is
// cleaned up by PID: the descendants of the driver are snapshotted from /proc
// and SIGKILLed, and hook processes orphaned by a gemini exit are found by the
// session's environment (GEMINI_HARNESS_RUN=<run dir>) and killed too.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { startGeminiStub, readStubLog } from './gemini-stub.mjs'
import { HARNESS_DIR, packageVersion } from './installed.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
export const repoRoot = path.resolve(here, '..', '..')
export const harnessDir = HARNESS_DIR
export const geminiBin = path.join(harnessDir, 'node_modules', '.bin', 'gemini')
export const GEMINI_MODEL = 'gemini-2.5-flash'

/** The installed Gemini CLI's version, or null. */
export const geminiVersion = () => packageVersion('@google/gemini-cli')

let netnsCache
/** How to enter a private network namespace here (argv prefix), or a reason it cannot. */
export function netns() {
  if (netnsCache) return netnsCache
  const prefixes = process.getuid?.() === 0 ? [['unshare', '-n']] : [['unshare', '-rn'], ['unshare', '-n']]
  const errors = []
  for (const prefix of prefixes) {
    const r = spawnSync(prefix[0], [...prefix.slice(1), 'sh', '-c', 'ip link set lo up && ip -o addr show dev lo | grep -q 127.0.0.1'], {
      encoding: 'utf8',
      timeout: 10_000,
    })
    if (r.status === 0) return (netnsCache = { prefix })
    errors.push(`${prefix.join(' ')}: ${r.error?.message || (r.stderr || '').trim() || `exit ${r.status}`}`)
  }
  return (netnsCache = { reason: `no private network namespace (${errors.join('; ')})` })
}

/** Null when the Gemini CLI and a network namespace are available, else why not. */
export function geminiSkipReason() {
  if (!fs.existsSync(geminiBin)) return `Gemini CLI not installed: no ${geminiBin} (npm i --prefix ${harnessDir} @google/gemini-cli, or set PM_HARNESS_DIR)`
  const ns = netns()
  if (ns.reason) return ns.reason
  return null
}

/** Settings every run gets: API-key auth (the stub), no updates, no telemetry, a fixed model. */
export function baseSettings() {
  return {
    security: { auth: { selectedType: 'gemini-api-key' } },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    model: { name: GEMINI_MODEL },
  }
}

/**
 * A private HOME (with ~/.gemini/settings.json) and a project directory that
 * ~/.gemini/trustedFolders.json trusts (headless gemini refuses untrusted
 * folders with exit 55). Removed after the test.
 */
export function makeGeminiHome(t, { settings = {}, trust = true } = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-gemini-'))
  const home = path.join(root, 'home')
  const project = path.join(root, 'project')
  const geminiDir = path.join(home, '.gemini')
  fs.mkdirSync(geminiDir, { recursive: true })
  fs.mkdirSync(project, { recursive: true })
  const settingsPath = path.join(geminiDir, 'settings.json')
  fs.writeFileSync(settingsPath, JSON.stringify({ ...baseSettings(), ...settings }, null, 2))
  if (trust) fs.writeFileSync(path.join(geminiDir, 'trustedFolders.json'), JSON.stringify({ [project]: 'TRUST_FOLDER' }, null, 2))
  const g = {
    root,
    home,
    project,
    settingsPath,
    readSettings: () => JSON.parse(fs.readFileSync(settingsPath, 'utf8')),
    writeSettings: (s) => fs.writeFileSync(settingsPath, JSON.stringify(s, null, 2)),
    /** The project's .gemini/settings.json (created on write). */
    projectSettingsPath: path.join(project, '.gemini', 'settings.json'),
    /** Runs started on this home (startGemini adds them); cleanup kills them first. */
    runs: [],
    cleanup: () => {
      for (const run of g.runs) run.kill()
      fs.rmSync(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
    },
  }
  t?.after(g.cleanup)
  return g
}

/** Every hook command configured in a settings object, as [{ event, command, timeout, name }]. */
export function hookCommands(settings) {
  const out = []
  for (const [event, defs] of Object.entries(settings?.hooks || {})) {
    for (const def of Array.isArray(defs) ? defs : []) {
      for (const h of def?.hooks || []) out.push({ event, matcher: def.matcher, ...h })
    }
  }
  return out
}

// ---------------------------------------------------------------- processes

function stat(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
    return { pid, state: f[0], ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]), start: f[19], comm: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')) }
  } catch {
    return null
  }
}

/** argv of a process, or []. */
export function processArgv(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
  } catch {
    return []
  }
}

function allProcesses() {
  const out = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const s = stat(Number(name))
    if (s && s.state !== 'Z' && s.state !== 'X') out.push(s)
  }
  return out
}

/** Live descendants of pid (not pid itself), as stat records. */
export function descendants(pid) {
  const procs = allProcesses()
  const byParent = new Map()
  for (const p of procs) {
    if (!byParent.has(p.ppid)) byParent.set(p.ppid, [])
    byParent.get(p.ppid).push(p)
  }
  const out = []
  const queue = [pid]
  while (queue.length) {
    for (const c of byParent.get(queue.shift()) || []) {
      out.push(c)
      queue.push(c.pid)
    }
  }
  return out
}

/** Live processes whose environment carries KEY=value exactly. */
export function processesWithEnv(key, value) {
  const needle = `\0${key}=${value}\0`
  const out = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      if (!`\0${fs.readFileSync(`/proc/${name}/environ`, 'latin1')}`.includes(needle)) continue
    } catch {
      continue
    }
    const s = stat(Number(name))
    if (s && s.state !== 'Z' && s.state !== 'X') out.push(s)
  }
  return out
}

/** A run-bg job's process or supervisor (their environment says so), left to the proc-manager home's cleanup. */
function isRunBgJob(pid) {
  try {
    const environ = `\0${fs.readFileSync(`/proc/${pid}/environ`, 'latin1')}`
    return environ.includes('\0PROC_MANAGER_JOB=') || environ.includes('\0PROC_MANAGER_SUPERVISOR=')
  } catch {
    return false
  }
}

/** SIGKILL pid if it is still the process that started at `start` (never pid <= 1 or ourselves). */
function killExact(pid, start, signal = 'SIGKILL') {
  if (!(pid > 1) || pid === process.pid) return
  const s = stat(pid)
  if (!s || (start && s.start !== start)) return
  try {
    process.kill(pid, signal)
  } catch {}
}

// ------------------------------------------------------------------- a run

/**
 * Starts `gemini -p <prompt> --yolo -m gemini-2.5-flash -o json` in g.project
 * with HOME=g.home, against a fresh stub answering with `reply(req, data)`.
 * env: extra environment for gemini (e.g. PROC_MANAGER_HOME); PATH starts
 * with the repo's native/ so `run-bg` resolves for the model's commands.
 * interactive: true runs `gemini --yolo -m …` (no -p) in a private tmux
 * server instead (run.type(text), run.screen(); needs tmux).
 * Returns a handle; its processes are killed after the test.
 */
export function startGemini(t, {
  g, prompt, reply, data = {}, env = {}, args = [], outputFormat = 'json', netns: useNetns = true, label = 'gemini', interactive = false,
}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pm-gemini-run-${label}-`))
  const scriptPath = path.join(dir, 'reply.mjs')
  fs.writeFileSync(
    scriptPath,
    `const data = ${JSON.stringify(data)}\nconst reply = (${reply.toString()})\nexport default (req) => reply(req, data)\n`,
  )
  const geminiArgs = interactive
    ? ['--yolo', '-m', GEMINI_MODEL, ...args]
    : ['-p', prompt, '--yolo', '-m', GEMINI_MODEL, ...(outputFormat ? ['-o', outputFormat] : []), ...args]
  const config = {
    dir,
    interactive,
    script: scriptPath,
    log: path.join(dir, 'requests.jsonl'),
    cwd: g.project,
    argv: [geminiBin, ...geminiArgs],
    env: {
      PATH: [path.join(repoRoot, 'native'), path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
      HOME: g.home,
      LANG: process.env.LANG || 'C.UTF-8',
      TMPDIR: process.env.TMPDIR || '/tmp',
      USER: process.env.USER || os.userInfo().username,
      ...(interactive ? { TERM: 'xterm-256color', COLORTERM: 'truecolor' } : { TERM: 'dumb', NO_COLOR: '1' }),
      GEMINI_API_KEY: 'stub-key',
      GEMINI_HARNESS_RUN: dir,
      ...env,
    },
  }
  const configPath = path.join(dir, 'config.json')
  fs.writeFileSync(configPath, JSON.stringify(config, null, 2))
  const ns = netns()
  const prefix = useNetns ? ns.prefix : []
  if (useNetns && !prefix) throw new Error(ns.reason)
  const spawnedAt = Date.now()
  const cmd = [...prefix, process.execPath, fileURLToPath(import.meta.url), '--drive', configPath]
  const tmuxSocket = interactive ? `pm-gemini-${path.basename(dir)}` : null
  const tmux = (...a) => spawnSync('tmux', ['-L', tmuxSocket, ...a], { encoding: 'utf8', timeout: 10_000 })
  let driver = null
  let driverErr = ''
  if (interactive) {
    const r = tmux('new-session', '-d', '-s', 'main', '-x', '200', '-y', '50', ...cmd)
    if (r.status !== 0) throw new Error(`tmux new-session: ${r.error?.message || r.stderr}`)
  } else {
    driver = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] })
    driver.stderr.on('data', (d) => (driverErr += d))
  }
  const readJson = (name) => {
    try {
      return JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'))
    } catch {
      return null
    }
  }
  const read = (name) => {
    try {
      return fs.readFileSync(path.join(dir, name), 'utf8')
    } catch {
      return ''
    }
  }
  const driverPid = () => driver?.pid ?? readJson('pids.json')?.driver
  const driverGone = () => {
    if (driver) return driver.exitCode !== null || driver.signalCode !== null
    if (fs.existsSync(path.join(dir, 'exit.json'))) return true
    const pid = driverPid()
    return pid ? !stat(pid) || /^[ZX]/.test(stat(pid).state) : false
  }
  const finish = (code, signal) => {
    const exit = readJson('exit.json') || {}
    const stdout = read('gemini.stdout')
    let result = null
    try {
      result = JSON.parse(stdout.slice(stdout.indexOf('{')))
    } catch {}
    return {
      code: exit.code ?? code,
      signal: exit.signal ?? signal,
      driverCode: code,
      spawnedAt,
      exitedAt: exit.exitedAt ?? Date.now(),
      stdout,
      stderr: read('gemini.stderr'),
      driverStderr: driverErr,
      result,
      sessionId: result?.session_id ?? null,
    }
  }
  const exited = driver
    ? new Promise((resolve) => driver.on('close', (code, signal) => resolve(finish(code, signal))))
    : (async () => {
        while (!driverGone()) await new Promise((r) => setTimeout(r, 50))
        return finish(null, null)
      })()
  const run = {
    dir,
    get driverPid() {
      return driverPid()
    },
    spawnedAt,
    exited,
    /** Every request the stub logged (kind: chat | side | countTokens | …). */
    allRequests: () => readStubLog(config.log),
    /** The main conversation's requests, in order. */
    requests: () => readStubLog(config.log).filter((r) => r.kind === 'chat'),
    /** { driver, wrapper, child } pids once gemini runs (child: the real CLI). */
    pids: () => readJson('pids.json'),
    stderr: () => read('gemini.stderr') || (interactive ? run.screen() : ''),
    /** Resolves with the first chat request matching pred (polling the log). */
    async waitForRequest(pred, { timeout = 60_000, what = 'a matching request' } = {}) {
      const deadline = Date.now() + timeout
      for (;;) {
        const hit = run.requests().find(pred)
        if (hit) return hit
        if (driverGone()) {
          const hit2 = run.requests().find(pred)
          if (hit2) return hit2
          throw new Error(`${label}: gemini ended before ${what}; stderr:\n${run.stderr().slice(-3000)}\n${driverErr}`)
        }
        if (Date.now() > deadline) throw new Error(`${label}: timed out after ${timeout} ms waiting for ${what}; stderr:\n${run.stderr().slice(-3000)}`)
        await new Promise((r) => setTimeout(r, 20))
      }
    },
    /** Waits for gemini to exit, at most `timeout` ms (then kills it and throws). */
    async wait({ timeout = 90_000 } = {}) {
      let timer
      const limit = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${label}: gemini still running after ${timeout} ms; stderr:\n${run.stderr().slice(-3000)}`)), timeout)
      })
      try {
        return await Promise.race([exited, limit])
      } catch (err) {
        run.kill()
        throw err
      } finally {
        clearTimeout(timer)
      }
    },
    /** Processes under the gemini child (hooks, shell tool commands), as stat records with argv. */
    children() {
      const p = run.pids()
      if (!p?.child) return []
      return descendants(p.child).map((s) => ({ ...s, argv: processArgv(s.pid) }))
    },
    /** Sends a signal to the real CLI process (the wrapper ignores SIGINT/SIGTERM/SIGHUP). */
    signal(sig = 'SIGTERM') {
      const p = run.pids()
      if (p?.child) killExact(p.child, p.childStart, sig)
    },
    /** Interactive: the visible screen (tmux capture-pane). */
    screen() {
      return interactive ? tmux('capture-pane', '-p', '-t', 'main').stdout || '' : ''
    },
    /**
     * Interactive: types text, waits until the screen shows it, then presses
     * Enter until it is submitted (the input box empties: an Enter right
     * after fast typing can be taken as part of a paste).
     */
    async type(text, { enter = true, timeout = 10_000 } = {}) {
      tmux('send-keys', '-t', 'main', '-l', text)
      const tail = text.slice(-20)
      const inBox = () => run.screen().split('\n').some((l) => /^\s*\*\s/.test(l) && l.includes(tail))
      await waitForScreen(inBox, timeout, `the input box to show ${JSON.stringify(tail)}`)
      if (!enter) return
      const deadline = Date.now() + timeout
      for (;;) {
        tmux('send-keys', '-t', 'main', 'Enter')
        try {
          await waitForScreen(() => !inBox(), 1_000, 'the input to be submitted')
          return
        } catch (err) {
          if (Date.now() > deadline) throw err
        }
      }
    },
    /**
     * Interactive: types /quit and resolves with the exit. Enter while the
     * command menu is open can complete the command instead of running it,
     * and a redraw can hide the box for a frame (type() then sees it
     * submitted): so Enter is pressed again while /quit still sits in the
     * box, until the CLI exits or the deadline.
     */
    async quit({ timeout = 60_000 } = {}) {
      await run.type('/quit')
      const deadline = Date.now() + timeout
      let gone = false
      exited.then(() => { gone = true })
      while (!gone && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 1_000))
        if (!gone && run.screen().split('\n').some((l) => /^\s*\*\s*\/quit\s*$/.test(l))) tmux('send-keys', '-t', 'main', 'Enter')
      }
      return run.wait({ timeout: Math.max(1_000, deadline - Date.now()) })
    },
    /** Interactive: presses keys (tmux key names: Escape, Enter, C-c, …). */
    keys(...names) {
      tmux('send-keys', '-t', 'main', ...names)
    },
    /** Interactive: resolves once pred(screen) holds. */
    waitForScreen: (pred, { timeout = 30_000, what = 'the screen' } = {}) => waitForScreen(() => pred(run.screen()), timeout, what),
    /**
     * SIGKILL everything of this run, by PID: the driver's tree, then orphans
     * carrying this run's env marker. run-bg's jobs and supervisors are left
     * to the proc-manager home's cleanup (a test may kill a session and look
     * at the jobs it left).
     */
    kill() {
      const p = run.pids() || {}
      const dpid = driverPid()
      const tree = dpid ? descendants(dpid).filter((s) => !isRunBgJob(s.pid)) : []
      if (dpid) killExact(dpid, null)
      for (const s of tree) killExact(s.pid, s.start)
      if (p.child) killExact(p.child, p.childStart)
      if (p.wrapper) killExact(p.wrapper, p.wrapperStart)
      run.killOrphans()
      if (interactive) tmux('kill-server')
    },
    /** SIGKILL what run.leftovers() finds. */
    killOrphans() {
      for (const s of run.leftovers()) killExact(s.pid, s.start)
    },
    /** Live processes of this run (by its env marker) that are no run-bg job or supervisor: hooks left behind, … */
    leftovers() {
      return processesWithEnv('GEMINI_HARNESS_RUN', dir)
        .filter((s) => !isRunBgJob(s.pid))
        .map((s) => ({ ...s, argv: processArgv(s.pid) }))
    },
  }
  g.runs?.push(run)
  t?.after(async () => {
    run.kill()
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))])
    run.killOrphans()
    if (!process.env.PM_KEEP_GEMINI_RUNS) fs.rmSync(dir, { recursive: true, force: true })
  })
  return run
}

async function waitForScreen(pred, timeout, what) {
  const deadline = Date.now() + timeout
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** Null when tmux is there (for interactive runs), else why not. */
export function tmuxSkipReason() {
  const r = spawnSync('tmux', ['-V'], { encoding: 'utf8' })
  return r.status === 0 ? null : 'no tmux (interactive Gemini CLI runs in a tmux pane)'
}

// ------------------------------------------------------------- the driver

async function drive(configPath) {
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'))
  const out = (name, data) => {
    fs.writeFileSync(path.join(config.dir, name + '.tmp'), data)
    fs.renameSync(path.join(config.dir, name + '.tmp'), path.join(config.dir, name))
  }
  // In a fresh namespace lo is down; outside one this fails harmlessly (not root) or is a no-op.
  spawnSync('ip', ['link', 'set', 'lo', 'up'], { stdio: 'ignore' })
  const reply = (await import(config.script)).default
  const stub = await startGeminiStub({ reply, logFile: config.log })
  const stdio = config.interactive
    ? 'inherit'
    : ['ignore', fs.openSync(path.join(config.dir, 'gemini.stdout'), 'w'), fs.openSync(path.join(config.dir, 'gemini.stderr'), 'w')]
  const startedAt = Date.now()
  const child = spawn(process.execPath, config.argv, {
    cwd: config.cwd,
    env: { ...config.env, GOOGLE_GEMINI_BASE_URL: stub.url },
    stdio,
  })
  const pids = { driver: process.pid, wrapper: child.pid, wrapperStart: stat(child.pid)?.start, startedAt, stubUrl: stub.url }
  out('pids.json', JSON.stringify(pids))
  // The wrapper relaunches gemini as a child node process: record it too.
  const findChild = setInterval(() => {
    const c = descendants(child.pid).find((p) => p.ppid === child.pid && p.comm === 'node')
    if (c) {
      clearInterval(findChild)
      out('pids.json', JSON.stringify({ ...pids, child: c.pid, childStart: c.start }))
    }
  }, 10)
  const stop = () => {
    const p = JSON.parse(fs.readFileSync(path.join(config.dir, 'pids.json'), 'utf8'))
    for (const s of descendants(process.pid)) if (!isRunBgJob(s.pid)) killExact(s.pid, s.start)
    if (p.child) killExact(p.child, p.childStart)
    process.exit(137)
  }
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, stop)
  child.on('exit', async (code, signal) => {
    clearInterval(findChild)
    out('exit.json', JSON.stringify({ code, signal, exitedAt: Date.now(), startedAt }))
    await stub.close()
    process.exit(0)
  })
}

if (process.argv[2] === '--drive' && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await drive(process.argv[3])
}
