// Sessions and the harness hooks, without a harness: a job records the
// session that started it; `run-bg hook <harness> <event>` tells a session
// of its jobs' ends once (a burst in one text), never of another session's,
// not of a job already looked at; the session's end kills its jobs' trees
// but those started to outlive it; a hook never fails its harness; `hooks
// install` merges into the harness's settings and takes only ours out.
// The same hooks inside the real harnesses: harness-*.e2e.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { makeHome, runBg, RUN_BG, waitFor, checkJson, isAlive, readRegistry, killPid, processStart } from './helpers.mjs'

// Whatever harness runs these tests must not lend its session to the jobs.
const SESSION_VARIABLES = ['RUN_BG_SESSION', 'CLAUDE_CODE_SESSION_ID', 'CODEX_THREAD_ID', 'CLAUDE_PID', 'GEMINI_SESSION_ID']
const cleanEnv = (home, extra = {}) => {
  const env = { ...process.env, PROC_MANAGER_HOME: home, ...extra }
  for (const name of SESSION_VARIABLES) if (!(name in extra)) delete env[name]
  return env
}

function bg(home, args, env = {}) {
  const r = spawnSync(RUN_BG, args, { env: cleanEnv(home, env), encoding: 'utf8', timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

function start(home, session, argv, flags = []) {
  const r = bg(home, [...flags, '--json', '--', ...argv], session ? { RUN_BG_SESSION: session } : {})
  assert.equal(r.code, 0, r.stderr)
  return JSON.parse(r.stdout).jobId
}

/** Runs a hook as a harness would: its JSON on stdin; resolves with what it said. */
function hook(home, harness, event, input, { env = {}, args = [] } = {}) {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const child = spawn(RUN_BG, ['hook', harness, event, ...args], { env: cleanEnv(home, env), stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started, pid: child.pid }))
    // A hook refusing its arguments exits before it reads: no EPIPE for that.
    child.stdin.on('error', () => {})
    child.stdin.end(typeof input === 'string' ? input : JSON.stringify(input))
    hook.children?.push(child)
  })
}

/** Whether some process holds the flock on `file` (flock(1) from util-linux). */
const locked = (file) => spawnSync('flock', ['--nonblock', file, 'true']).status === 1
const hasFlock = spawnSync('flock', ['--version']).status === 0
/** A job's status as `list` sees it (`check` would mark it looked at). */
const listed = (home, id) => JSON.parse(spawnSync(RUN_BG, ['list', '--all', '--json'], { env: cleanEnv(home), encoding: 'utf8' }).stdout).find((j) => j.jobId === id)?.status

/**
 * A stand-in harness process, recorded as the session's (its argv as
 * `argv`, stdin not a terminal): what tells `codex exec` from Codex's TUI
 * and `gemini -p` from Gemini CLI's view. Our own process, ended by PID.
 */
function standIn(t, home, session, harness, argv) {
  const child = spawn('/bin/bash', ['-c', `exec -a ${argv[0]} tail ${argv.slice(1).join(' ')} -f /dev/null`], { stdio: 'ignore' })
  t.after(() => killPid(child.pid))
  return waitFor(() => {
    const start = processStart(child.pid)
    if (!start || !fs.readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').startsWith(argv[0])) return false
    fs.mkdirSync(path.join(home, 'sessions'), { recursive: true, mode: 0o700 })
    fs.writeFileSync(path.join(home, 'sessions', `${session}.json`), JSON.stringify({ id: session, harness, process: { pid: child.pid, start_ticks: Number(start) }, startedAt: Date.now() }))
    return true
  }, { what: 'the stand-in harness to run' })
}

const input = (session, extra = {}) => ({ session_id: session, cwd: os.tmpdir(), hook_event_name: 'X', ...extra })

test('a job records its session: RUN_BG_SESSION, the harness variables, --session; none; a bad id refused saying what is accepted', (t) => {
  const { home } = makeHome(t)
  const ours = start(home, 's-ours', ['true'])
  assert.equal(checkJson(home, ours).session, 's-ours')
  const claude = JSON.parse(bg(home, ['--json', '--', 'true'], { CLAUDE_CODE_SESSION_ID: 'cc-1' }).stdout).jobId
  assert.equal(checkJson(home, claude).session, 'cc-1')
  const codex = JSON.parse(bg(home, ['--json', '--', 'true'], { CODEX_THREAD_ID: 'cx-1' }).stdout).jobId
  assert.equal(checkJson(home, codex).session, 'cx-1')
  const given = JSON.parse(bg(home, ['--session', 'mine', '--json', '--', 'true'], { RUN_BG_SESSION: 'other' }).stdout).jobId
  assert.equal(checkJson(home, given).session, 'mine')
  const none = JSON.parse(bg(home, ['--session', 'none', '--json', '--', 'true'], { RUN_BG_SESSION: 'other' }).stdout).jobId
  assert.equal(checkJson(home, none).session, undefined)
  const outside = start(home, null, ['true'])
  assert.equal(checkJson(home, outside).session, undefined)
  const bad = bg(home, ['--session', '../x', '--', 'true'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /--session: bad session id `\.\.\/x`: give 1 to 128 of A-Z a-z 0-9 \. _ : -/)
  assert.equal(readRegistry(home).length, 6, 'the refused start recorded nothing')
  // Each face's filter: list, summary, kill --all.
  const listed = JSON.parse(bg(home, ['list', '--session', 'cc-1', '--json']).stdout).map((j) => j.jobId)
  assert.deepEqual(listed, [claude])
  const current = JSON.parse(bg(home, ['list', '--session', '--json'], { CODEX_THREAD_ID: 'cx-1' }).stdout).map((j) => j.jobId)
  assert.deepEqual(current, [codex])
  const nowhere = bg(home, ['list', '--session'])
  assert.equal(nowhere.code, 2)
  assert.match(nowhere.stderr, /not inside an agent session/)
})

test('a harness found above the starter: the session-start hook records its process, jobs started below it belong to it', async (t) => {
  const { home } = makeHome(t)
  // A node process standing in for Gemini CLI (which sets no session
  // variable): it runs the hook, then starts a job through a shell, as its
  // shell tool does.
  const script = `
    const { spawnSync } = require('node:child_process')
    const hook = spawnSync(${JSON.stringify(RUN_BG)}, ['hook', 'gemini', 'session-start'], { input: JSON.stringify({ session_id: 'g-1', cwd: '/nowhere' }) })
    const job = spawnSync('/bin/bash', ['-c', ${JSON.stringify(`${RUN_BG} --json -- true`)}], { encoding: 'utf8' })
    process.stdout.write(job.stdout)
  `
  const r = spawnSync(process.execPath, ['-e', script], { env: cleanEnv(home), encoding: 'utf8' })
  const id = JSON.parse(r.stdout).jobId
  assert.equal(checkJson(home, id).session, 'g-1')
  const session = JSON.parse(fs.readFileSync(path.join(home, 'sessions', 'g-1.json'), 'utf8'))
  assert.equal(session.harness, 'gemini')
  assert.equal(session.process.pid, r.pid, 'the harness: the nearest ancestor of the hook that is no shell')
  // A job started outside that process is no part of it.
  assert.equal(checkJson(home, start(home, null, ['true'])).session, undefined)
})

test('claude-code post-tool-use: waits, then one wake naming the burst of ends (exit 2, stderr); told once; none for another session or a job already checked', async (t) => {
  const { home } = makeHome(t)
  hook.children = []
  t.after(() => hook.children.forEach((c) => killPid(c.pid)))
  const quiet = await hook(home, 'claude-code', 'post-tool-use', input('s-a'))
  assert.deepEqual([quiet.code, quiet.stdout, quiet.stderr], [0, '', ''], 'nothing runs: nothing to wait for')
  const failing = start(home, 's-a', ['sh', '-c', 'sleep 1; echo "error: 2 tests failed"; exit 1'], ['--label', 'tests'])
  const passing = start(home, 's-a', ['sh', '-c', 'sleep 1.1'], ['--label', 'lint'])
  const stranger = start(home, 's-b', ['sh', '-c', 'sleep 0.3; exit 3'])
  const waiter = hook(home, 'claude-code', 'post-tool-use', input('s-a'))
  if (hasFlock) {
    await waitFor(() => locked(path.join(home, 'sessions', 's-a.waiter')), { what: 'the first hook to wait' })
    // A second hook of the same session leaves the waiting to the first.
    const second = await hook(home, 'claude-code', 'stop', input('s-a'))
    assert.deepEqual([second.code, second.stderr], [0, ''])
  }
  const woke = await waiter
  assert.equal(woke.code, 2, woke.stderr)
  assert.equal(woke.stdout, '')
  const lines = woke.stderr.trim().split('\n')
  assert.equal(lines.length, 2, woke.stderr)
  assert.match(woke.stderr, new RegExp(`run-bg: ${failing} .*failed, exit 1, after .*; run-bg check ${failing}; first error: error: 2 tests failed`))
  assert.match(woke.stderr, new RegExp(`run-bg: ${passing} .*success, exit 0`))
  assert.doesNotMatch(woke.stderr, new RegExp(stranger))
  // Told once: nothing left to say.
  const again = await hook(home, 'claude-code', 'post-tool-use', input('s-a'))
  assert.deepEqual([again.code, again.stderr], [0, ''])
  // Another session is told of its own job, once.
  const other = await hook(home, 'claude-code', 'stop', input('s-b'))
  assert.equal(other.code, 2)
  assert.match(other.stderr, new RegExp(`${stranger} .*failed, exit 3`))
  // A job the model checked after its end (from inside its session) wakes nobody…
  const checked = start(home, 's-a', ['sh', '-c', 'exit 4'])
  await waitFor(() => listed(home, checked) === 'failed', { what: 'the job to end' })
  assert.match(bg(home, ['check', checked], { RUN_BG_SESSION: 's-a' }).stdout, new RegExp(checked))
  const none = await hook(home, 'claude-code', 'post-tool-use', input('s-a'))
  assert.deepEqual([none.code, none.stderr], [0, ''])
  // …while a look from a person's terminal (no session) does not keep it from the model.
  const looked = start(home, 's-a', ['sh', '-c', 'exit 5'])
  await waitFor(() => listed(home, looked) === 'failed', { what: 'the job to end' })
  assert.match(bg(home, ['check', looked]).stdout, new RegExp(looked))
  const told = await hook(home, 'claude-code', 'post-tool-use', input('s-a'))
  assert.equal(told.code, 2)
  assert.match(told.stderr, new RegExp(`${looked} .*failed, exit 5`))
})

test('session-end kills the session\'s job trees, 0 survivors; --outlive-session and other sessions\' jobs run on; a waiting hook leaves', async (t) => {
  const { home } = makeHome(t)
  hook.children = []
  t.after(() => hook.children.forEach((c) => killPid(c.pid)))
  // A tree: the main shell, a child that ignores SIGTERM, a grandchild.
  const tree = start(home, 's-end', ['sh', '-c', 'trap "" TERM; (trap "" TERM; sleep 600 & sleep 600; wait) & sleep 600; wait'])
  const kept = start(home, 's-end', ['sleep', '600'], ['--outlive-session'])
  const other = start(home, 's-other', ['sleep', '600'])
  const pidsOf = (id) => fs.readFileSync(path.join(home, 'jobs', id, 'procs'), 'utf8').split('\n').filter(Boolean).map((l) => Number(l.split(/\s+/)[0]))
  let treePids = []
  await waitFor(() => { try { treePids = pidsOf(tree); return treePids.length >= 3 } catch { return false } }, { what: 'the tree to be recorded' })
  const waiter = hook(home, 'claude-code', 'stop', input('s-end'))
  await waitFor(() => fs.existsSync(path.join(home, 'sessions', 's-end.waiter')), { what: 'the waiter' })
  const ended = await hook(home, 'claude-code', 'session-end', input('s-end'))
  assert.equal(ended.code, 0)
  const left = await waiter
  assert.deepEqual([left.code, left.stderr], [0, ''], 'the waiting hook left, telling nothing')
  assert.deepEqual(treePids.filter(isAlive), [], 'no process of the tree survives')
  assert.equal(checkJson(home, tree).status, 'killed')
  assert.equal(checkJson(home, kept).status, 'running')
  assert.equal(checkJson(home, other).status, 'running')
  assert.equal(checkJson(home, kept).outliveSession, true)
})

test('session-start: records the session; context names running and ended-unseen jobs of the session and project in at most 600 characters, each ended job told once', async (t) => {
  const { home } = makeHome(t)
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-project-'))
  t.after(() => fs.rmSync(project, { recursive: true, force: true }))
  const server = JSON.parse(bg(home, ['--cwd', project, '--label', 'dev', '--json', '--', 'sleep', '600'], { RUN_BG_SESSION: 'crashed' }).stdout).jobId
  const failed = JSON.parse(bg(home, ['--cwd', project, '--json', '--', 'sh', '-c', 'echo "error: boom"; exit 1']).stdout).jobId
  await waitFor(() => listed(home, failed) === 'failed', { what: 'the job to fail' })
  const elsewhere = start(home, null, ['sleep', '600'])
  const r = await hook(home, 'claude-code', 'session-start', input('fresh', { cwd: project, source: 'startup' }))
  assert.equal(r.code, 0)
  const context = JSON.parse(r.stdout).hookSpecificOutput
  assert.equal(context.hookEventName, 'SessionStart')
  assert.ok(context.additionalContext.length <= 600, context.additionalContext)
  assert.match(context.additionalContext, new RegExp(`${server} running`))
  assert.match(context.additionalContext, new RegExp(`${failed} .*failed, exit 1.*first error: error: boom`))
  assert.doesNotMatch(context.additionalContext, new RegExp(elsewhere))
  // Told once: the next session start names the server still running, not the failure.
  const next = await hook(home, 'claude-code', 'session-start', input('fresh', { cwd: project, source: 'resume' }))
  assert.doesNotMatch(next.stdout, new RegExp(failed))
  assert.match(next.stdout, new RegExp(server))
  // This test process ran the hook, so it stands for the harness of
  // `fresh` now: what it starts is that session's unless it says otherwise.
  assert.equal(checkJson(home, start(home, null, ['true'])).session, 'fresh')
  // Many jobs of no session in the project: cut to 600 characters, saying how many more.
  for (let i = 0; i < 30; i++) bg(home, ['--cwd', project, '--label', `job${i}`, '--session', 'none', '--', 'sleep', '600'])
  const many = await hook(home, 'codex', 'session-start', input('third', { cwd: project }))
  const text = JSON.parse(many.stdout).hookSpecificOutput.additionalContext
  assert.ok(text.length <= 600, `${text.length} characters`)
  assert.match(text, /…and \d+ more \(run-bg list\)$/)
})

test('codex stop / gemini after-agent: headless, wait for the session\'s jobs that end by themselves, not for servers, bounded by --wait; with a person at the harness, no wait', async (t) => {
  const { home } = makeHome(t)
  await standIn(t, home, 's-srv', 'codex', ['codex', 'exec'])
  await standIn(t, home, 's-gem', 'gemini', ['gemini'])
  await standIn(t, home, 's-long', 'codex', ['codex', 'exec'])
  await standIn(t, home, 's-tui', 'codex', ['codex', 'resume'])
  start(home, 's-srv', ['sleep', '600'], ['--ready-log', 'never'])
  const server = await hook(home, 'codex', 'stop', input('s-srv'), { args: ['--wait', '30s'] })
  assert.deepEqual([server.code, server.stderr], [0, ''], 'a server does not hold the turn')
  assert.ok(server.ms < 10_000, `${server.ms} ms`)
  const job = start(home, 's-gem', ['sh', '-c', 'sleep 1; echo "error: 2 tests failed"; exit 1'])
  const gemini = await hook(home, 'gemini', 'after-agent', input('s-gem'), { args: ['--wait', '30s'] })
  assert.equal(gemini.code, 0)
  const answer = JSON.parse(gemini.stdout)
  assert.equal(answer.decision, 'block')
  assert.match(answer.reason, new RegExp(`${job} .*failed, exit 1.*first error: error: 2 tests failed`))
  const long = start(home, 's-long', ['sleep', '600'])
  const bounded = await hook(home, 'codex', 'stop', input('s-long'), { args: ['--wait', '500ms'] })
  assert.deepEqual([bounded.code, bounded.stderr], [0, ''], 'past --wait the turn ends, telling nothing')
  assert.ok(bounded.ms >= 450, `it waited: ${bounded.ms} ms`)
  assert.equal(checkJson(home, long).status, 'running')
  // Codex's TUI: the turn's end does not wait (what the person types would be held).
  start(home, 's-tui', ['sh', '-c', 'sleep 2; exit 1'])
  const tui = await hook(home, 'codex', 'stop', input('s-tui'), { args: ['--wait', '30s'] })
  assert.deepEqual([tui.code, tui.stderr], [0, ''])
  assert.ok(tui.ms < 1500, `${tui.ms} ms`)
})

test('a hook never fails its harness: bad input, unknown events and an unusable home are a silent exit 0 and a logged line', async (t) => {
  const { home } = makeHome(t)
  for (const [harness, event, stdin] of [
    ['claude-code', 'post-tool-use', '{not json'],
    ['claude-code', 'post-tool-use', JSON.stringify({ cwd: '/' })],
    ['claude-code', 'post-tool-use', JSON.stringify({ session_id: '../../etc' })],
    ['claude-code', 'no-such-event', JSON.stringify({ session_id: 'x' })],
    ['cursor', 'stop', JSON.stringify({ session_id: 'x' })],
  ]) {
    const r = await hook(home, harness, event, stdin)
    assert.deepEqual([r.code, r.stdout, r.stderr], [0, '', ''], `${harness} ${event} ${stdin}`)
  }
  const log = fs.readFileSync(path.join(home, 'harness-hooks.log'), 'utf8')
  assert.match(log, /claude-code post-tool-use: the hook's input is not JSON/)
  assert.match(log, /has no session_id/)
  assert.match(log, /bad session id/)
  assert.match(log, /no hook event `no-such-event`/)
  assert.match(log, /unknown harness `cursor`/)
  const unusable = await hook(path.join(home, 'config.json', 'x'), 'claude-code', 'stop', input('s'))
  assert.deepEqual([unusable.code, unusable.stdout, unusable.stderr], [0, '', ''])
})

test('hooks install: merged into each harness\'s settings beside the user\'s own hooks, idempotent, --dry-run writes nothing, --remove takes only ours; bad JSON refused untouched', (t) => {
  const user = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-user-'))
  t.after(() => fs.rmSync(user, { recursive: true, force: true }))
  const { home } = makeHome(t)
  const as = (args) => bg(home, args, { HOME: user, CODEX_HOME: path.join(user, '.codex'), CLAUDE_CONFIG_DIR: '' })
  const settings = path.join(user, '.claude', 'settings.json')
  fs.mkdirSync(path.dirname(settings), { recursive: true })
  const mine = { model: 'opus', hooks: { Stop: [{ hooks: [{ type: 'command', command: 'notify-send done' }] }] } }
  fs.writeFileSync(settings, JSON.stringify(mine))
  const dry = as(['hooks', 'install', 'claude-code', '--dry-run'])
  assert.equal(dry.code, 0, dry.stderr)
  assert.match(dry.stdout, /would write .*settings\.json/)
  assert.deepEqual(JSON.parse(fs.readFileSync(settings, 'utf8')), mine, '--dry-run wrote nothing')
  assert.equal(as(['hooks', 'install', 'claude-code']).code, 0)
  const installed = JSON.parse(fs.readFileSync(settings, 'utf8'))
  assert.equal(installed.model, 'opus')
  assert.deepEqual(Object.keys(installed.hooks).sort(), ['PostToolUse', 'SessionEnd', 'SessionStart', 'Stop'])
  assert.equal(installed.hooks.Stop.length, 2, 'the user\'s Stop hook kept beside ours')
  const post = installed.hooks.PostToolUse[0].hooks[0]
  assert.deepEqual([post.async, post.asyncRewake, post.command], [true, true, `${RUN_BG} hook claude-code post-tool-use`])
  const again = as(['hooks', 'install', 'claude-code'])
  assert.match(again.stdout, /unchanged/)
  assert.deepEqual(JSON.parse(fs.readFileSync(settings, 'utf8')), installed, 'idempotent')
  assert.equal(as(['hooks', 'remove', 'claude-code']).code, 0)
  assert.deepEqual(JSON.parse(fs.readFileSync(settings, 'utf8')), mine, 'only ours taken out')
  // Codex: hooks.json; its config.toml's `hooks = false` turned on, the rest kept.
  fs.mkdirSync(path.join(user, '.codex'))
  fs.writeFileSync(path.join(user, '.codex', 'config.toml'), 'model = "o5"\n\n[features]\nhooks = false # off\nother = true\n')
  const codex = as(['hooks', 'install', 'codex', '--no-trust'])
  assert.equal(codex.code, 0, codex.stderr)
  assert.match(codex.stdout, /not trusted \(--no-trust\)/)
  assert.equal(fs.readFileSync(path.join(user, '.codex', 'config.toml'), 'utf8'), 'model = "o5"\n\n[features]\nhooks = true\nother = true\n')
  const codexHooks = JSON.parse(fs.readFileSync(path.join(user, '.codex', 'hooks.json'), 'utf8')).hooks
  assert.match(codexHooks.Stop[0].hooks[0].command, /hook codex stop --wait 10m$/)
  assert.equal(codexHooks.SessionEnd[0].hooks[0].timeout, 3)
  // Gemini, in a project; a settings file that is not JSON is refused and left as it was.
  const project = path.join(user, 'proj')
  assert.equal(as(['hooks', 'install', 'gemini', '--project', project]).code, 0)
  assert.ok(JSON.parse(fs.readFileSync(path.join(project, '.gemini', 'settings.json'), 'utf8')).hooks.AfterAgent)
  fs.mkdirSync(path.join(user, '.gemini'))
  fs.writeFileSync(path.join(user, '.gemini', 'settings.json'), '{ // a comment\n}')
  const refused = as(['hooks', 'install', 'gemini'])
  assert.equal(refused.code, 2)
  assert.match(refused.stderr, /settings\.json is not valid JSON .*fix it by hand first, nothing was changed/)
  assert.equal(fs.readFileSync(path.join(user, '.gemini', 'settings.json'), 'utf8'), '{ // a comment\n}')
  const unknown = as(['hooks', 'install', 'cursor'])
  assert.equal(unknown.code, 2)
  assert.match(unknown.stderr, /unknown harness `cursor`: give claude-code, codex or gemini/)
})

test('the plugin: its manifest, hooks and MCP server read, and its skill the same as skills/run-bg', () => {
  const root = path.resolve(import.meta.dirname, '..')
  const plugin = path.join(root, 'plugins', 'run-bg')
  const manifest = JSON.parse(fs.readFileSync(path.join(plugin, '.claude-plugin', 'plugin.json'), 'utf8'))
  assert.equal(manifest.name, 'run-bg')
  const hooks = JSON.parse(fs.readFileSync(path.join(plugin, 'hooks', 'hooks.json'), 'utf8')).hooks
  assert.deepEqual(Object.keys(hooks).sort(), ['PostToolUse', 'SessionEnd', 'SessionStart', 'Stop'])
  assert.ok(JSON.parse(fs.readFileSync(path.join(plugin, '.mcp.json'), 'utf8')).mcpServers['proc-manager'])
  const market = JSON.parse(fs.readFileSync(path.join(root, '.claude-plugin', 'marketplace.json'), 'utf8'))
  assert.equal(market.plugins[0].source, './plugins/run-bg')
  for (const file of fs.readdirSync(path.join(root, 'skills', 'run-bg'))) {
    assert.equal(fs.readFileSync(path.join(plugin, 'skills', 'run-bg', file), 'utf8'), fs.readFileSync(path.join(root, 'skills', 'run-bg', file), 'utf8'), `${file}: copy skills/run-bg into the plugin`)
  }
})

test('stacks: up --outlive-session and a process\'s "outlive-session": true outlive the session that started them; a bad value is refused naming the field', async (t) => {
  const { home } = makeHome(t)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-stack-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const up = (args, session) => spawnSync(RUN_BG, ['up', ...args, '--json'], { env: cleanEnv(home, { RUN_BG_SESSION: session }), encoding: 'utf8', cwd: dir })
  fs.writeFileSync(path.join(dir, 'run-bg.json'), JSON.stringify({ processes: { db: { command: 'sleep 600', 'outlive-session': true }, web: { command: 'sleep 600' } } }))
  const first = up([], 's-stack')
  assert.equal(first.status, 0, first.stderr)
  const jobs = () => JSON.parse(bg(home, ['list', '--json']).stdout)
  const byLabel = (label) => jobs().find((j) => j.label === label)
  assert.equal(byLabel('db').outliveSession, true)
  assert.equal(byLabel('web').outliveSession, undefined)
  assert.equal(byLabel('web').session, 's-stack')
  await hook(home, 'claude-code', 'session-end', input('s-stack'))
  assert.equal(byLabel('db').status, 'running', 'the process marked outlive-session runs on')
  assert.equal(byLabel('web').status, 'killed', 'the others went with the session')
  // up --outlive-session: the whole stack outlives the next session.
  const again = up(['--outlive-session'], 's-stack-2')
  assert.equal(again.status, 0, again.stderr)
  const web = jobs().filter((j) => j.label === 'web' && j.status === 'running')
  assert.equal(web.length, 1)
  assert.equal(web[0].outliveSession, true)
  await hook(home, 'claude-code', 'session-end', input('s-stack-2'))
  assert.equal(jobs().filter((j) => j.label === 'web' && j.status === 'running').length, 1)
  fs.writeFileSync(path.join(dir, 'run-bg.json'), JSON.stringify({ processes: { x: { command: 'true', 'outlive-session': 'yes' } } }))
  const bad = up([], 's')
  assert.equal(bad.status, 2)
  assert.match(bad.stderr, /process `x`: outlive-session: .*true or false/)
})

test('a hook given bad arguments still answers exit 0, silent (Claude Code would take exit 2 for a wake); /clear ends the session but not its jobs', async (t) => {
  const { home } = makeHome(t)
  for (const args of [[], ['claude-code'], ['claude-code', 'stop', '--bogus'], ['claude-code', 'stop', '--wait', 'soon']]) {
    const r = spawnSync(RUN_BG, ['hook', ...args], { env: cleanEnv(home), input: JSON.stringify(input('s')), encoding: 'utf8' })
    assert.deepEqual([r.status, r.stdout, r.stderr], [0, '', ''], `run-bg hook ${args.join(' ')}`)
  }
  assert.match(fs.readFileSync(path.join(home, 'harness-hooks.log'), 'utf8'), /bad arguments/)
  const job = start(home, 's-clear', ['sleep', '600'])
  await hook(home, 'claude-code', 'session-end', input('s-clear', { reason: 'clear' }))
  assert.equal(checkJson(home, job).status, 'running', '/clear keeps the work')
  const ended = JSON.parse(fs.readFileSync(path.join(home, 'sessions', 's-clear.json'), 'utf8'))
  assert.ok(ended.endedAt, 'the session itself ended')
  assert.deepEqual(JSON.parse(bg(home, ['list', '--session', 'none', '--json']).stdout), [], '--session none: jobs of no session')
})

test('hooks install keeps a linked settings file linked and its mode; a 0600 file stays 0600', (t) => {
  const user = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-user-'))
  t.after(() => fs.rmSync(user, { recursive: true, force: true }))
  const { home } = makeHome(t)
  const dotfiles = path.join(user, 'dotfiles')
  fs.mkdirSync(dotfiles)
  fs.mkdirSync(path.join(user, '.claude'))
  const real = path.join(dotfiles, 'claude-settings.json')
  fs.writeFileSync(real, JSON.stringify({ env: { TOKEN: 'secret' } }), { mode: 0o600 })
  fs.symlinkSync(real, path.join(user, '.claude', 'settings.json'))
  const r = bg(home, ['hooks', 'install', 'claude-code'], { HOME: user, CLAUDE_CONFIG_DIR: '' })
  assert.equal(r.code, 0, r.stderr)
  assert.ok(fs.lstatSync(path.join(user, '.claude', 'settings.json')).isSymbolicLink(), 'still a link')
  const written = JSON.parse(fs.readFileSync(real, 'utf8'))
  assert.equal(written.env.TOKEN, 'secret')
  assert.ok(written.hooks.Stop)
  assert.equal(fs.statSync(real).mode & 0o777, 0o600)
  // --project with a relative directory: taken from where run-bg runs, into
  // the project's local (not committed) settings.
  const project = spawnSync(RUN_BG, ['hooks', 'install', 'claude-code', '--project', 'proj'], { env: cleanEnv(home, { HOME: user }), cwd: user, encoding: 'utf8' })
  assert.equal(project.status, 0, project.stderr)
  assert.ok(JSON.parse(fs.readFileSync(path.join(user, 'proj', '.claude', 'settings.local.json'), 'utf8')).hooks.SessionEnd)
  const waited = bg(home, ['hooks', 'install', 'claude-code', '--wait', '1m'], { HOME: user })
  assert.equal(waited.code, 2)
  assert.match(waited.stderr, /--wait is for codex and gemini/)
})
