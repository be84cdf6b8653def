// Runs the real Claude Code against the stub (anthropic-stub.mjs): finds the
// installed binary, makes a private HOME, keeps everything on loopback in a
// private network namespace, and drives a session in stream-json mode with
// stdin held open (a plain `-p` run ends before an async hook can wake it).
//
// The namespace: a holder process (`unshare -n`, `-rn` when not root) brings
// `lo` up and sleeps; the forwarder (TCP on the namespace's 127.0.0.1 → the
// stub's Unix socket) and each claude are started in it with `nsenter`, which
// execs them in place, so the PIDs this module holds are theirs. Everything
// Claude Code starts (hooks, Bash commands, MCP servers, run-bg jobs) inherits
// the namespace and cannot reach anything but that loopback.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { FORWARDER } from './anthropic-stub.mjs'

import { HARNESS_DIR, packageDir, packageVersion, netnsSkipReason as netnsUnusable, UNSHARE_NET } from './installed.mjs'

export { HARNESS_DIR }
export const CLAUDE_PKG = packageDir('@anthropic-ai/claude-code')

/** The claude binary, or null. */
export function claudeBinary() {
  for (const p of [
    path.join(HARNESS_DIR, 'node_modules', '.bin', 'claude'),
    path.join(CLAUDE_PKG, 'bin', 'claude.exe'),
  ]) {
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return fs.realpathSync(p)
    } catch {}
  }
  return null
}

/** The installed version (from its package.json), or null. */
export const claudeVersion = () => packageVersion('@anthropic-ai/claude-code')

/** Why the namespace this driver enters with nsenter cannot be made here, or null. */
export function netnsSkipReason() {
  const unusable = netnsUnusable()
  if (unusable) return unusable
  const n = spawnSync('nsenter', ['--version'], { encoding: 'utf8' })
  return n.error ? `nsenter not usable: ${n.error.message}` : null
}

/** Why the Claude Code tests cannot run here, or null. */
export function claudeSkipReason() {
  if (!claudeBinary()) return `Claude Code not installed under ${HARNESS_DIR} (set PM_HARNESS_DIR, or npm install @anthropic-ai/claude-code there)`
  return netnsSkipReason()
}

function killPid(pid) {
  if (!pid || pid <= 1 || pid === process.pid) return
  try { process.kill(pid, 'SIGKILL') } catch {}
}

const alive = (pid) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2)[0]
    return state !== 'Z' && state !== 'X'
  } catch {
    return false
  }
}

/**
 * A private network namespace with `lo` up and a forwarder from its
 * 127.0.0.1:<port> to the stub's socket. `run(cmd, args, opts)` spawns a
 * process inside it (the returned child's pid is that process's).
 * `close()` kills the forwarder and the holder by PID.
 */
export async function startNetns(stub, t) {
  const holder = spawn('unshare', [...UNSHARE_NET, 'sh', '-c', 'ip link set lo up && echo up && exec sleep 86400'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise((resolve, reject) => {
    holder.stdout.once('data', resolve)
    holder.once('exit', (code) => reject(new Error(`netns holder exited ${code}`)))
  })
  const enter = process.getuid?.() === 0 ? ['-t', String(holder.pid), '-n'] : ['-t', String(holder.pid), '-U', '-n', '--preserve-credentials']
  const run = (cmd, args, opts) => spawn('nsenter', [...enter, '--', cmd, ...args], opts)
  const forwarder = run(process.execPath, ['-e', FORWARDER, '0', stub.socketPath], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    forwarder.stdout.once('data', (d) => resolve(Number(String(d).trim())))
    forwarder.once('exit', (code) => reject(new Error(`forwarder exited ${code}`)))
  })
  const ns = {
    holderPid: holder.pid,
    forwarderPid: forwarder.pid,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    run,
    close() {
      killPid(forwarder.pid)
      killPid(holder.pid)
    },
  }
  t?.after(() => ns.close())
  return ns
}

/**
 * A private HOME for Claude Code with ~/.claude.json seeded (onboarding
 * done, no tips or update checks), and a project dir. `settings` goes to
 * ~/.claude/settings.json, `projectSettings` to <project>/.claude/settings.json,
 * `mcp` to <project>/.mcp.json. Removed after the test.
 */
export function makeClaudeHome(t, { settings, projectSettings, mcp } = {}) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-claude-home-'))
  const project = path.join(home, 'project')
  fs.mkdirSync(path.join(home, '.claude'), { recursive: true })
  fs.mkdirSync(project)
  const projectState = {
    allowedTools: [],
    hasTrustDialogAccepted: true,
    hasCompletedProjectOnboarding: true,
    enabledMcpjsonServers: mcp ? Object.keys(mcp.mcpServers ?? {}) : [],
  }
  fs.writeFileSync(path.join(home, '.claude.json'), JSON.stringify({
    numStartups: 1,
    hasCompletedOnboarding: true,
    lastOnboardingVersion: claudeVersion() ?? '2.1.332',
    autoUpdates: false,
    bypassPermissionsModeAccepted: true,
    projects: { [project]: projectState },
  }, null, 2))
  if (settings) fs.writeFileSync(path.join(home, '.claude', 'settings.json'), JSON.stringify(settings, null, 2))
  if (projectSettings) {
    fs.mkdirSync(path.join(project, '.claude'), { recursive: true })
    fs.writeFileSync(path.join(project, '.claude', 'settings.json'), JSON.stringify(projectSettings, null, 2))
  }
  if (mcp) fs.writeFileSync(path.join(project, '.mcp.json'), JSON.stringify(mcp, null, 2))
  t?.after(() => fs.rmSync(home, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  return { home, project }
}

/** The environment Claude Code runs with: only what it needs, plus `extra`. */
export function claudeEnv(home, baseUrl, extra = {}) {
  return {
    PATH: process.env.PATH,
    HOME: home,
    USER: process.env.USER ?? 'root',
    SHELL: '/bin/bash',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    TMPDIR: process.env.TMPDIR ?? '/tmp',
    ANTHROPIC_BASE_URL: baseUrl,
    ANTHROPIC_API_KEY: 'sk-ant-stub-key',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    ...extra,
  }
}

/**
 * Starts `claude -p --input-format stream-json --output-format stream-json`
 * inside the namespace, stdin held open. Returns a session:
 *   send(text): writes one user message
 *   events: the stream-json lines parsed so far; waitForEvent(pred)
 *   end(): closes stdin (the session ends: SessionEnd hooks run) and resolves
 *          with {code, signal, ms} once claude exits
 *   kill(): SIGKILL by PID
 *   pid, stderr()
 */
export function startClaude(t, { ns, home, cwd, env = {}, args = [], allowedTools = ['Bash'] }) {
  const bin = claudeBinary()
  const argv = [
    '-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose',
    ...(allowedTools.length ? ['--allowedTools', allowedTools.join(',')] : []),
    ...args,
  ]
  const startedAt = Date.now()
  const child = ns.run(bin, argv, { cwd, env: claudeEnv(home, ns.baseUrl, env), stdio: ['pipe', 'pipe', 'pipe'] })
  const events = []
  const waiters = new Set()
  let stderr = ''
  let buf = ''
  child.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      if (!line.trim()) continue
      let ev
      try { ev = JSON.parse(line) } catch { ev = { type: 'unparsed', line } }
      ev._at = Date.now()
      events.push(ev)
      for (const w of [...waiters]) if (w.pred(ev)) { clearTimeout(w.timer); waiters.delete(w); w.resolve(ev) }
    }
  })
  child.stderr.on('data', (d) => (stderr += d))
  child.stdin.on('error', () => {})
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })))
  const session = {
    pid: child.pid,
    startedAt,
    events,
    exited,
    stderr: () => stderr,
    send(text) {
      child.stdin.write(JSON.stringify({ type: 'user', message: { role: 'user', content: text } }) + '\n')
    },
    waitForEvent(pred, { timeout = 60_000, what = 'a stream-json event' } = {}) {
      const found = events.find(pred)
      if (found) return Promise.resolve(found)
      return new Promise((resolve, reject) => {
        const w = { pred, resolve }
        w.timer = setTimeout(() => { waiters.delete(w); reject(new Error(`claude: timed out after ${timeout} ms waiting for ${what}; stderr: ${stderr.slice(-2000)}`)) }, timeout)
        waiters.add(w)
      })
    },
    /** Closes stdin and waits for claude to exit (killing it after `timeout`). */
    async end({ timeout = 60_000 } = {}) {
      const from = Date.now()
      try { child.stdin.end() } catch {}
      const timer = setTimeout(() => killPid(child.pid), timeout)
      const r = await exited
      clearTimeout(timer)
      return { ...r, ms: r.at - from }
    },
    /** SIGKILL to claude and every process under it (hooks, Bash commands, MCP servers), by PID. */
    kill() {
      if (!alive(child.pid)) return
      const under = descendants(child.pid)
      killPid(child.pid)
      for (const pid of under) killPid(pid)
    },
  }
  t?.after(() => session.kill())
  return session
}

/** Every descendant of `pid` (by /proc ppid), as pids. */
export function descendants(pid) {
  const children = new Map()
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (!children.has(ppid)) children.set(ppid, [])
      children.get(ppid).push(Number(name))
    } catch {}
  }
  const out = []
  const walk = (p) => { for (const c of children.get(p) ?? []) { out.push(c); walk(c) } }
  walk(pid)
  return out
}
