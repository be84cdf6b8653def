// Runs the real OpenAI Codex CLI against the stub (openai-stub.mjs): finds
// the installed binary (PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses),
// writes a private CODEX_HOME (config.toml pointing at the stub, hooks on),
// and runs `codex exec` (also `exec resume`) in a private network namespace.
// What Codex does with hooks, measured: notes/harness-codex.md.
//
// Each run is `unshare -n sh -c 'ip link set lo up; exec node codex.mjs
// --ns-run <socket> <port> <codex> exec …'` (`-rn` when not root): this file,
// run as a script, listens on the namespace's 127.0.0.1:<port>, pipes each
// connection to the stub's unix socket outside (a filesystem socket crosses
// network namespaces), runs codex and exits with its status. `unshare` and
// `sh` exec in place, so the PID the test holds is that forwarder's; codex
// (its node wrapper, then the native binary), the hooks, the shell tool's
// commands and the run-bg jobs they start are its descendants (the jobs until
// their supervisor leaves for its own session) and share the namespace:
// nothing can reach anything but that loopback.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const SELF = fileURLToPath(import.meta.url)
import { HARNESS_DIR, packageDir, packageVersion, netnsSkipReason, UNSHARE_NET } from './installed.mjs'

export { HARNESS_DIR, netnsSkipReason }
export const CODEX_PKG = packageDir('@openai/codex')
/** The npm launcher users run (a node script that spawns the native binary). */
export const CODEX_BIN = path.join(HARNESS_DIR, 'node_modules', '.bin', 'codex')
/** The port the stub appears on inside each namespace (each run has its own namespace). */
export const NS_PORT = 18080


/**
 * argv prefix that runs a command in a fresh private network namespace with
 * `lo` up (for anything that may start codex, e.g. `run-bg hooks install
 * codex`, which asks `codex app-server` to trust the hooks).
 */
export const NETNS_PREFIX = ['unshare', ...UNSHARE_NET, 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh']

/** The installed version (its package.json), or null. */
export const codexVersion = () => packageVersion('@openai/codex')

let codexChecked
/** Why the Codex tests cannot run here, or null. */
export function codexSkipReason() {
  if (codexChecked === undefined) {
    if (!fs.existsSync(CODEX_BIN)) {
      codexChecked = `Codex CLI not installed under ${HARNESS_DIR} (set PM_HARNESS_DIR, or npm install @openai/codex there)`
    } else {
      const r = spawnSync(CODEX_BIN, ['--version'], { encoding: 'utf8', timeout: 30_000 })
      codexChecked = r.status === 0 && /codex/i.test(r.stdout)
        ? null
        : `${CODEX_BIN} --version failed (exit ${r.status}): ${(r.error?.message ?? r.stderr ?? '').trim().slice(0, 300)}`
    }
  }
  return codexChecked ?? netnsSkipReason()
}

/**
 * A private CODEX_HOME: config.toml with the stub as the model provider
 * (Responses API at http://127.0.0.1:<NS_PORT>/v1 inside the namespace) and
 * `[features] hooks = true` unless `hooks: false`, analytics off (else each
 * exec lingers ~5 s at its end); `notify` (argv array) and
 * `extraToml` appended; `hooksJson` written to hooks.json when given. Also a
 * project dir (the cwd codex runs in; not a git repo) and an empty HOME
 * (runCodex's default). Removed after the test.
 * Placed outside /tmp's top level would avoid Codex's "could not create PATH
 * aliases under temporary dir" warning; it is harmless, so os.tmpdir() it is.
 */
export function makeCodexHome(t, { hooks = true, notify, extraToml = '', hooksJson } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-codex-'))
  const codexHome = path.join(dir, 'codex-home')
  const project = path.join(dir, 'project')
  // HOME for codex and all it runs: its shell tool runs `bash -lc`, which
  // would source the user's profile (a pyenv init there took up to 60 s on a
  // rehash lock another killed shell had left).
  const home = path.join(dir, 'home')
  fs.mkdirSync(codexHome)
  fs.mkdirSync(project)
  fs.mkdirSync(home)
  const lines = [
    'model = "stub-model"',
    'model_provider = "stub"',
    'check_for_update_on_startup = false',
  ]
  if (notify) lines.push(`notify = ${JSON.stringify(notify)}`)
  lines.push(
    '',
    '[model_providers.stub]',
    'name = "stub"',
    `base_url = "http://127.0.0.1:${NS_PORT}/v1"`,
    'wire_api = "responses"',
    'stream_max_retries = 0',
    'request_max_retries = 0',
  )
  // Without this, every exec waits ~5 s at its end for an analytics flush
  // that cannot leave the namespace.
  lines.push('', '[analytics]', 'enabled = false')
  if (hooks) lines.push('', '[features]', 'hooks = true')
  if (extraToml) lines.push('', extraToml)
  const configPath = path.join(codexHome, 'config.toml')
  fs.writeFileSync(configPath, lines.join('\n') + '\n')
  const hooksPath = path.join(codexHome, 'hooks.json')
  if (hooksJson) fs.writeFileSync(hooksPath, JSON.stringify(hooksJson, null, 2))
  t?.after(() => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  return { dir, codexHome, project, home, configPath, hooksPath }
}

/** The flags every test run uses: no approvals or sandbox, untrusted hooks run, no git needed. */
export const EXEC_FLAGS = ['--dangerously-bypass-approvals-and-sandbox', '--dangerously-bypass-hook-trust', '--skip-git-repo-check']

/**
 * Starts `codex exec [flags] <prompt>` (or `codex exec resume <resume>
 * <prompt>` with `resume`) in a private network namespace wired to the stub
 * (which must listen on a unix socket: startStub(…, {socketPath})). Returns
 * a run:
 *   pid        the forwarder's (the root of everything this run starts)
 *   startedAt  ms
 *   done       Promise of {code, signal, stdout, stderr, endedAt}
 *   output()   {stdout, stderr} so far
 *   sessionId() the `session id:` exec printed (null until it did)
 *   waitForSessionId()
 *   nativePid() the native codex's pid (found among the descendants), or null
 *   signal(sig) send sig to the native codex only
 *   kill()     SIGKILL every process of the run, by PID, deepest first
 * `trustHooks: false` leaves out --dangerously-bypass-hook-trust. HOME is
 * `home`, default the empty one makeCodexHome made beside codexHome.
 * Killed after the test if still running.
 */
export function runCodex(t, { codexHome, stub, cwd, env = {}, prompt, resume, args = [], trustHooks = true, home } = {}) {
  if (!stub?.socketPath) throw new Error('runCodex: the stub must listen on a unix socket (startStub(script, {socketPath}))')
  const flags = trustHooks ? EXEC_FLAGS : EXEC_FLAGS.filter((f) => f !== '--dangerously-bypass-hook-trust')
  const codexArgs = resume ? ['exec', ...flags, ...args, 'resume', resume, prompt] : ['exec', ...flags, ...args, prompt]
  const startedAt = Date.now()
  const child = spawn('unshare', [
    ...UNSHARE_NET, 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh',
    process.execPath, SELF, '--ns-run', stub.socketPath, String(NS_PORT), CODEX_BIN, ...codexArgs,
  ], {
    cwd,
    env: { ...process.env, HOME: home ?? path.join(path.dirname(codexHome), 'home'), CODEX_HOME: codexHome, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  const done = new Promise((resolve) => {
    child.on('error', (err) => resolve({ code: null, signal: null, error: err, stdout, stderr, endedAt: Date.now() }))
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, endedAt: Date.now() }))
  })
  let exited = false
  done.then(() => (exited = true))
  const sessionId = () => stderr.match(/^session id: ([0-9a-f-]{36})$/m)?.[1] ?? null
  const run = {
    pid: child.pid,
    startedAt,
    done,
    output: () => ({ stdout, stderr }),
    sessionId,
    async waitForSessionId(timeout = 30_000) {
      const deadline = Date.now() + timeout
      while (!sessionId()) {
        if (exited || Date.now() > deadline) throw new Error(`codex printed no session id (${exited ? 'exited' : 'timed out'}); stderr:\n${stderr.slice(-2000)}`)
        await new Promise((r) => setTimeout(r, 20))
      }
      return sessionId()
    },
    nativePid() {
      return descendants(child.pid).find((pid) => comm(pid) === 'codex') ?? null
    },
    signal(sig) {
      const pid = run.nativePid()
      if (pid && pid > 1 && pid !== process.pid) process.kill(pid, sig)
      return pid
    },
    kill() {
      killTree(child.pid)
    },
    /** Everything exec printed, for assertion messages. */
    describe() {
      return `codex exec (pid ${child.pid}) stdout:\n${stdout.slice(-3000)}\nstderr:\n${stderr.slice(-4000)}`
    },
  }
  t?.after(() => {
    if (!exited) run.kill()
  })
  return run
}

/** Waits for a run to end within `timeout` ms; kills it and throws when it does not. */
export async function finish(run, timeout = 90_000) {
  let timer
  const result = await Promise.race([
    run.done,
    new Promise((resolve) => (timer = setTimeout(() => resolve(null), timeout))),
  ])
  clearTimeout(timer)
  if (result) return result
  const text = run.describe()
  run.kill()
  await run.done
  throw new Error(`codex exec did not end within ${timeout} ms; killed.\n${text}`)
}

// ------------------------------------------------------------ processes

function comm(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}

function ppidOf(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return null
  }
}

/** Live descendants of pid (children before grandchildren), from /proc. */
export function descendants(pid) {
  const children = new Map()
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const ppid = ppidOf(Number(name))
    if (ppid === null) continue
    if (!children.has(ppid)) children.set(ppid, [])
    children.get(ppid).push(Number(name))
  }
  const out = []
  const queue = [pid]
  while (queue.length) {
    for (const c of children.get(queue.shift()) ?? []) {
      out.push(c)
      queue.push(c)
    }
  }
  return out
}

/** SIGKILL pid and its descendants, deepest first, by PID (never pid ≤ 1 or ourselves). */
export function killTree(pid) {
  const all = [pid, ...descendants(pid)].reverse()
  for (const p of all) {
    if (!p || p <= 1 || p === process.pid) continue
    try {
      process.kill(p, 'SIGKILL')
    } catch {}
  }
}

/** The parent chain of pid up to 1: [{pid, ppid, comm, args}]. */
export function parentChain(pid) {
  const chain = []
  for (let p = pid; p && p > 0; p = ppidOf(p)) {
    let args = ''
    try {
      args = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ').trim()
    } catch {}
    chain.push({ pid: p, ppid: ppidOf(p), comm: comm(p), args })
    if (p === 1) break
  }
  return chain
}

// ------------------------------------------- script mode: the forwarder

function nsRun([socketPath, portArg, cmd, ...args]) {
  const port = Number(portArg)
  const sockets = new Set()
  const server = net.createServer((client) => {
    const upstream = net.connect(socketPath)
    sockets.add(client).add(upstream)
    const drop = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  server.on('error', (err) => {
    console.error(`codex.mjs --ns-run: listen 127.0.0.1:${port}: ${err.message}`)
    process.exit(70)
  })
  server.listen(port, '127.0.0.1', () => {
    const child = spawn(cmd, args, { stdio: 'inherit' })
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
      process.on(sig, () => {
        try {
          child.kill(sig)
        } catch {}
      })
    }
    child.on('error', (err) => {
      console.error(`codex.mjs --ns-run: ${cmd}: ${err.message}`)
      process.exit(127)
    })
    child.on('exit', (code, signal) => {
      server.close()
      for (const s of sockets) s.destroy()
      process.exitCode = code ?? 128 + (os.constants.signals[signal] ?? 0)
      setImmediate(() => process.exit())
    })
  })
}

if (process.argv[1] === SELF && process.argv[2] === '--ns-run') nsRun(process.argv.slice(3))
