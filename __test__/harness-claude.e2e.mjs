// The real Claude Code (PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses)
// against a stub model (harness/anthropic-stub.mjs), inside a private network
// namespace, with the hooks `run-bg hooks install claude-code` writes: a job the
// model starts wakes it once when it ends, only in its own session; closing the
// session takes its jobs; the next session hears of jobs left running; the MCP
// server's jobs wake it the same way. What Claude Code does with hooks, measured:
// notes/harness-claude.md.
//
// The stub's "model" (below) follows the prompt: a line `RUN: <command>` makes
// it run <command> with Bash, `MCP: <json>` call run_background with <json>;
// after a tool result, or any other turn (a wake), it ends its turn with text.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import {
  root, RUN_BG, makeHome, runBg, readRegistry, checkJson, waitFor, cookieProcesses, anySurvivor, killPid, jobFiles, processStart,
} from './helpers.mjs'
import { startStub, newText, newToolResults, turnTexts, sessionOf } from './harness/anthropic-stub.mjs'
import { claudeSkipReason, claudeVersion, startNetns, makeClaudeHome, startClaude } from './harness/claude.mjs'

const skip = claudeSkipReason() ?? false
const NATIVE_DIR = path.dirname(RUN_BG)
const MCP_SERVER = path.join(root, 'packages', 'mcp', 'proc-manager-mcp.mjs')
const TEST_TIMEOUT = 180_000
/** A job's end reaches the model within this long (the bound). */
const WAKE_WITHIN_MS = 2_000

if (!skip) console.error(`# Claude Code ${claudeVersion()}`)

/** The stub's model: see the top of this file. */
function model(record) {
  if (record.kind !== 'main') return undefined
  if (newToolResults(record.body).length) return { text: 'Started it in the background; I will be told when it ends.' }
  const said = newText(record.body)
  const run = said.match(/^RUN: (.+)$/m)
  if (run) return { bash: run[1], description: 'Start it in the background' }
  const mcp = said.match(/^MCP: (.+)$/m)
  if (mcp) return { tool: 'mcp__proc-manager__run_background', input: JSON.parse(mcp[1]) }
  return { text: 'Noted.' }
}

/** A proc-manager home, the stub and the network namespace Claude Code runs in. */
async function setup(t) {
  // after-hooks run in the order registered: claude and everything under it go first
  const sessions = []
  t.after(() => { for (const s of sessions) s.kill() })
  const { home } = makeHome(t)
  const stub = await startStub({ reply: model })
  t.after(() => stub.close())
  const ns = await startNetns(stub, t)
  return { pmHome: home, stub, ns, sessions }
}

/**
 * A private HOME for Claude Code with our hooks installed by
 * `run-bg hooks install claude-code --user`, and `mcp` as <project>/.mcp.json.
 */
function claudeHomeWithHooks(t, { pmHome }, { mcp } = {}) {
  const claude = makeClaudeHome(t, { mcp })
  const r = runBg(pmHome, ['hooks', 'install', 'claude-code', '--user'], { env: { HOME: claude.home }, cwd: claude.project })
  assert.equal(r.code, 0, `run-bg hooks install claude-code --user: exit ${r.code}\n${r.stdout}${r.stderr}`)
  const settings = JSON.parse(fs.readFileSync(path.join(claude.home, '.claude', 'settings.json'), 'utf8'))
  for (const event of ['SessionStart', 'PostToolUse', 'Stop', 'SessionEnd']) {
    assert.ok(ourHooks(settings, event).length > 0, `settings.json has our ${event} hook: ${JSON.stringify(settings.hooks)}`)
  }
  return claude
}

/** Our command hooks (those running `run-bg hook claude-code`) for one event of a settings.json. */
function ourHooks(settings, event) {
  return (settings.hooks?.[event] ?? []).flatMap((m) => m.hooks ?? [])
    .filter((h) => h.type === 'command' && /run-bg\S* hook claude-code /.test(h.command))
}

/**
 * Starts a Claude Code session with `prompt` as its first message; resolves
 * once Claude Code has named the session (its `init` event), with the session.
 */
async function session(t, { pmHome, ns, sessions }, claude, prompt, { allowedTools = ['Bash'], env = {} } = {}) {
  const s = startClaude(t, {
    ns,
    home: claude.home,
    cwd: claude.project,
    allowedTools,
    env: { PROC_MANAGER_HOME: pmHome, PATH: `${NATIVE_DIR}:${process.env.PATH}`, ...env },
  })
  sessions.push(s)
  s.send(prompt)
  const init = await s.waitForEvent((e) => e.type === 'system' && e.subtype === 'init', { what: 'claude to start the session', timeout: 60_000 })
  s.sessionId = init.session_id
  s.startMs = init._at - s.startedAt
  return s
}

const turnEnded = (s, n = 1) => s.waitForEvent(() => s.events.filter((e) => e.type === 'result').length >= n, { what: `the end of turn ${n}`, timeout: 60_000 })

/** The one job of `home` whose label is `label`, once it is there. */
const jobLabelled = (home, label) => waitFor(() => readRegistry(home).find((j) => j.label === label), { what: `the job labelled ${label}`, timeout: 30_000 })
const idOf = (job) => job.id ?? job.jobId

/**
 * Resolves with the job's record once it has ended, read from its job.json:
 * `run-bg check` would mark the end as looked at, and a session is not woken
 * for an end someone already looked at.
 */
const ended = (home, id, timeout = 30_000) => waitFor(() => {
  const job = jobFiles(home).find((j) => j.id === id)
  return job?.ended_at && { status: job.status, endedAt: job.ended_at, exitCode: job.exit_code, session: job.session }
}, { what: `${id} to end`, timeout })

/**
 * True when a line of `text` tells the model job `id` ended (Claude Code's own
 * "… hook success:" prefix of a hook's plain output left out).
 */
const tellsEnd = (id) => (text) => text.split('\n').some((line) => {
  const said = line.replace(/^\S+ hook (?:success|additional context): /, '')
  return said.includes(id) && /\b(failed|success|succeeded|killed|timed out|timeout|exit \d+)\b/.test(said)
})

/** Requests of `sessionId` whose new turn (not a tool result) tells of `id`'s end. */
const wakeRequests = (stub, sessionId, id) =>
  stub.main().filter((r) => sessionOf(r) === sessionId && tellsEnd(id)(newText(r.body)))

/** How many user/system text blocks (no tool results) of the session's last request tell of `id`'s end. */
function wakeTurnsInHistory(stub, sessionId, id) {
  const last = stub.main().filter((r) => sessionOf(r) === sessionId).at(-1)
  return turnTexts(last.body.messages).filter((x) => tellsEnd(id)(x.text)).length
}

/** Asserts the wake of `id` in `wake` carries the outcome and the first error line. */
function assertWakeText(wake, id, firstError) {
  const text = newText(wake.body)
  const line = text.split('\n').find((l) => l.includes(id) && l.includes('failed')) ?? text
  assert.ok(line.includes(id), `the wake names the job: ${text}`)
  assert.match(line, /\bfailed\b/, `the wake says it failed: ${text}`)
  assert.match(line, /\bexit 1\b/, `the wake gives the exit status: ${text}`)
  assert.ok(text.includes(firstError), `the wake quotes the first error line (${firstError}): ${text}`)
}

/** The text SessionStart hooks added to a request (Claude Code puts it in a `role: system` message). */
function sessionStartContext(body) {
  const parts = []
  for (const { text } of turnTexts(body.messages)) {
    for (const m of text.matchAll(/SessionStart(?::\w+)? hook (?:additional context|success): ([\s\S]*?)(?=\n\nSessionStart|\n\n# Environment|$)/g)) parts.push(m[1])
  }
  return parts.join('\n')
}

test('hooks install claude-code: --dry-run writes nothing, --user and --project write settings.json once, --remove takes only ours out', (t) => {
  const { home: pmHome } = makeHome(t)
  const claude = makeClaudeHome(t, { settings: { theme: 'dark', hooks: { Stop: [{ hooks: [{ type: 'command', command: 'echo theirs' }] }] } } })
  const userFile = path.join(claude.home, '.claude', 'settings.json')
  const projectFile = path.join(claude.project, '.claude', 'settings.local.json')
  const hooks = (args) => runBg(pmHome, ['hooks', ...args], { env: { HOME: claude.home }, cwd: claude.project })
  const before = fs.readFileSync(userFile, 'utf8')

  const dry = hooks(['install', 'claude-code', '--user', '--dry-run'])
  assert.equal(dry.code, 0, dry.stderr)
  assert.match(dry.stdout, /hook claude-code/, 'the dry run shows the hooks it would write')
  assert.equal(fs.readFileSync(userFile, 'utf8'), before, '--dry-run changes nothing')

  for (let i = 0; i < 2; i++) {
    const r = hooks(['install', 'claude-code', '--user'])
    assert.equal(r.code, 0, r.stderr)
  }
  const settings = JSON.parse(fs.readFileSync(userFile, 'utf8'))
  assert.equal(settings.theme, 'dark', 'other settings are kept')
  assert.ok(settings.hooks.Stop.some((m) => m.hooks.some((h) => h.command === 'echo theirs')), 'other hooks are kept')
  for (const event of ['SessionStart', 'PostToolUse', 'Stop', 'SessionEnd']) {
    const ours = ourHooks(settings, event)
    assert.equal(ours.length, 1, `exactly one ${event} hook of ours after two installs: ${JSON.stringify(settings.hooks[event])}`)
    const exe = ours[0].command.split(' ')[0].replace(/^['"]|['"]$/g, '')
    assert.ok(path.isAbsolute(exe), `the hook runs run-bg by its absolute path: ${ours[0].command}`)
  }
  const [post] = ourHooks(settings, 'PostToolUse')
  assert.equal(post.async, true, 'the PostToolUse hook runs in the background')
  assert.equal(post.asyncRewake, true, 'its exit 2 wakes the model')
  assert.ok(post.timeout === undefined || post.timeout >= 3600, `a timeout that lets it wait for long jobs: ${post.timeout}`)

  const project = hooks(['install', 'claude-code', '--project'])
  assert.equal(project.code, 0, project.stderr)
  assert.ok(ourHooks(JSON.parse(fs.readFileSync(projectFile, 'utf8')), 'PostToolUse').length === 1, '--project writes ./.claude/settings.local.json (not committed: it names the run-bg of this machine)')

  const removed = hooks(['install', 'claude-code', '--user', '--remove'])
  assert.equal(removed.code, 0, removed.stderr)
  const after = JSON.parse(fs.readFileSync(userFile, 'utf8'))
  for (const event of ['SessionStart', 'PostToolUse', 'Stop', 'SessionEnd']) assert.equal(ourHooks(after, event).length, 0, `${event} hook removed`)
  assert.equal(after.theme, 'dark')
  assert.ok(after.hooks.Stop.some((m) => m.hooks.some((h) => h.command === 'echo theirs')), '--remove keeps hooks that are not ours')
})

test('a: the job the model started ends → the model is woken once, within 2 s of the end, with the outcome and the first error', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = await setup(t)
  const claude = claudeHomeWithHooks(t, ctx)
  const s = await session(t, ctx, claude, `Run the tests in the background.\nRUN: run-bg --label tests -- sh -c 'sleep 3; echo "error: 2 tests failed"; exit 1'`)
  await turnEnded(s)
  const id = idOf(await jobLabelled(ctx.pmHome, 'tests'))
  const done = await ended(ctx.pmHome, id)
  assert.equal(done.status, 'failed')
  assert.equal(done.session, s.sessionId, 'the job records the Claude Code session that started it (RUN_BG_SESSION from CLAUDE_ENV_FILE)')

  const wake = await ctx.stub.waitForRequest((r) => r.kind === 'main' && sessionOf(r) === s.sessionId && tellsEnd(id)(newText(r.body)),
    { what: `the wake for ${id}`, timeout: 30_000 })
  const lag = wake.at - done.endedAt
  console.error(`# a: claude named its session ${s.startMs} ms after spawn; wake request ${lag} ms after the job's end`)
  assert.ok(lag >= 0 && lag <= WAKE_WITHIN_MS, `the wake came ${lag} ms after the job ended (endedAt ${done.endedAt}, request ${wake.at})`)
  assertWakeText(wake, id, 'error: 2 tests failed')
  await turnEnded(s, 2)

  const exit = await s.end()
  assert.equal(exit.code, 0, `claude exit: ${JSON.stringify(exit)} ${s.stderr().slice(-2000)}`)
  assert.equal(wakeRequests(ctx.stub, s.sessionId, id).length, 1, 'exactly one request brings the wake')
  assert.equal(wakeTurnsInHistory(ctx.stub, s.sessionId, id), 1, 'the conversation holds the wake once')
})

test('b: two concurrent sessions: each is woken by its own job only', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = await setup(t)
  const claude = claudeHomeWithHooks(t, ctx)
  const a = await session(t, ctx, claude, `RUN: run-bg --label job-a -- sh -c 'sleep 2; echo "error: A broke"; exit 1'`)
  const b = await session(t, ctx, claude, `RUN: run-bg --label job-b -- sh -c 'sleep 4; echo "error: B broke"; exit 1'`)
  assert.notEqual(a.sessionId, b.sessionId)
  const idA = idOf(await jobLabelled(ctx.pmHome, 'job-a'))
  const idB = idOf(await jobLabelled(ctx.pmHome, 'job-b'))
  const [endA, endB] = [await ended(ctx.pmHome, idA), await ended(ctx.pmHome, idB)]
  assert.equal(endA.session, a.sessionId)
  assert.equal(endB.session, b.sessionId)

  const wakeA = await ctx.stub.waitForRequest((r) => sessionOf(r) === a.sessionId && tellsEnd(idA)(newText(r.body)), { what: `A's wake`, timeout: 30_000 })
  const wakeB = await ctx.stub.waitForRequest((r) => sessionOf(r) === b.sessionId && tellsEnd(idB)(newText(r.body)), { what: `B's wake`, timeout: 30_000 })
  console.error(`# b: A woken ${wakeA.at - endA.endedAt} ms, B ${wakeB.at - endB.endedAt} ms after their jobs ended`)
  assert.ok(wakeA.at - endA.endedAt <= WAKE_WITHIN_MS, `A woken ${wakeA.at - endA.endedAt} ms after its job ended`)
  assert.ok(wakeB.at - endB.endedAt <= WAKE_WITHIN_MS, `B woken ${wakeB.at - endB.endedAt} ms after its job ended`)
  await Promise.all([turnEnded(a, 2), turnEnded(b, 2)])
  await Promise.all([a.end(), b.end()])
  // after the wakes: a look at an ended job counts as the session having seen it
  const listed = (sid) => {
    const r = runBg(ctx.pmHome, ['list', '--all', '--session', sid, '--json'])
    assert.equal(r.code, 0, r.stderr)
    const jobs = JSON.parse(r.stdout)
    return (Array.isArray(jobs) ? jobs : jobs.jobs).map(idOf).sort()
  }
  assert.deepEqual(listed(a.sessionId), [idA], 'list --session names only the jobs of that session')
  assert.deepEqual(listed(b.sessionId), [idB])


  const woken = (sid, id) => ctx.stub.main().filter((r) => sessionOf(r) === sid && turnTexts(r.body.messages).some((x) => tellsEnd(id)(x.text)))
  assert.equal(woken(a.sessionId, idB).length, 0, `session A is never told of the end of B's job ${idB}`)
  assert.equal(woken(b.sessionId, idA).length, 0, `session B is never told of the end of A's job ${idA}`)
  assert.equal(wakeRequests(ctx.stub, a.sessionId, idA).length, 1)
  assert.equal(wakeRequests(ctx.stub, b.sessionId, idB).length, 1)
})

test('c: closing the session (SessionEnd) leaves no process of its jobs', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = await setup(t)
  const claude = claudeHomeWithHooks(t, ctx)
  const s = await session(t, ctx, claude, `RUN: run-bg --label tree -- sh -c 'sleep 600 & (sleep 601 &) ; echo up; wait'`)
  await turnEnded(s)
  const id = idOf(await jobLabelled(ctx.pmHome, 'tree'))
  const job = checkJson(ctx.pmHome, id)
  assert.equal(job.session, s.sessionId)
  // the main sh, its sleep and a sleep that left the tree (its parent exited), found by the job's cookie
  const processes = await waitFor(() => { const p = cookieProcesses(id); return p.length >= 3 && p }, { what: `${id}'s three processes` })
  assert.ok(processes.some((p) => p.pid === job.pid), 'the main process is among them')
  // and its supervisor, from the job's record
  const record = jobFiles(ctx.pmHome).find((j) => j.id === id)
  const tracked = [...processes]
  for (const p of [record?.supervisor, record?.main]) {
    const start = p && processStart(p.pid)
    if (start && !tracked.some((x) => x.pid === p.pid)) tracked.push({ pid: p.pid, start })
  }
  t.after(() => { for (const p of anySurvivor(tracked)) killPid(p.pid) })

  const exit = await s.end({ timeout: 90_000 })
  console.error(`# c: claude exited ${exit.ms} ms after its stdin closed`)
  assert.equal(exit.code, 0, `claude exit: ${JSON.stringify(exit)} ${s.stderr().slice(-2000)}`)
  await waitFor(() => anySurvivor(tracked).length === 0, { what: `every process of ${id} (and its supervisor) to be gone`, timeout: 15_000 })
  assert.deepEqual(cookieProcesses(id), [], 'nothing carrying the job cookie is left')
  const after = await ended(ctx.pmHome, id, 15_000)
  assert.notEqual(after.status, 'success', `the job was ended by the session's end: ${after.status}`)
})

test('d: a job left running with --outlive-session is listed in the next session\'s SessionStart context, in ≤ 600 characters', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = await setup(t)
  const claude = claudeHomeWithHooks(t, ctx)
  const first = await session(t, ctx, claude, `RUN: run-bg --outlive-session --label keeper -- sleep 600`)
  await turnEnded(first)
  const id = idOf(await jobLabelled(ctx.pmHome, 'keeper'))
  const exit = await first.end({ timeout: 90_000 })
  console.error(`# d: the first session exited ${exit.ms} ms after its stdin closed`)
  assert.equal(checkJson(ctx.pmHome, id).status, 'running', 'the --outlive-session job outlives its session')

  const second = await session(t, ctx, claude, 'Hello again.')
  await turnEnded(second)
  const [firstRequest] = ctx.stub.main().filter((r) => sessionOf(r) === second.sessionId)
  const context = sessionStartContext(firstRequest.body)
  console.error(`# d: SessionStart context (${context.length} characters): ${JSON.stringify(context)}`)
  assert.ok(context.includes(id), `the SessionStart context names ${id}: ${JSON.stringify(context)}`)
  assert.ok(context.length <= 600, `the SessionStart context is ${context.length} characters: ${context}`)
  await second.end()
})

test('d: a job started outside any session, in the project, is listed in a new session\'s SessionStart context', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = await setup(t)
  const claude = claudeHomeWithHooks(t, ctx)
  // in the session's project directory (a new session hears of the project's jobs that no live
  // session owns), and `--session none` whatever harness runs this test
  const started = runBg(ctx.pmHome, ['--label', 'outside', '--session', 'none', '--json', '--', 'sleep', '600'], { cwd: claude.project })
  assert.equal(started.code, 0, started.stderr)
  const { jobId } = JSON.parse(started.stdout)
  const s = await session(t, ctx, claude, 'Hello.')
  await turnEnded(s)
  const [firstRequest] = ctx.stub.main().filter((r) => sessionOf(r) === s.sessionId)
  const context = sessionStartContext(firstRequest.body)
  assert.ok(context.includes(jobId), `the SessionStart context names ${jobId}: ${JSON.stringify(context)}`)
  assert.ok(context.length <= 600, `the SessionStart context is ${context.length} characters: ${context}`)
  await s.end()
  assert.equal(checkJson(ctx.pmHome, jobId).status, 'running', 'a session\'s end leaves jobs it did not start')
})

test('e: through our MCP server inside Claude Code: its tools are offered and a job started with run_background wakes the model the same way', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = await setup(t)
  const claude = claudeHomeWithHooks(t, ctx, {
    mcp: { mcpServers: { 'proc-manager': { command: process.execPath, args: [MCP_SERVER], env: { PROC_MANAGER_HOME: ctx.pmHome } } } },
  })
  const command = 'sleep 3; echo "error: 2 tests failed"; exit 1'
  const s = await session(t, ctx, claude, `MCP: ${JSON.stringify({ command, label: 'mcp-tests' })}`, {
    allowedTools: ['Bash', 'mcp__proc-manager'],
    env: { ENABLE_TOOL_SEARCH: 'false' },
  })
  const [firstRequest] = await waitFor(() => ctx.stub.main().length > 0 && ctx.stub.main(), { what: 'the first request' })
  const tools = firstRequest.body.tools.map((x) => x.name)
  for (const name of ['run_background', 'check_job', 'wait_job']) assert.ok(tools.includes(`mcp__proc-manager__${name}`), `mcp__proc-manager__${name} offered: ${tools.join(' ')}`)
  await turnEnded(s)
  const result = ctx.stub.main().flatMap((r) => newToolResults(r.body))[0]
  assert.ok(result && !result.isError, `run_background answered: ${JSON.stringify(result)}`)

  const id = idOf(await jobLabelled(ctx.pmHome, 'mcp-tests'))
  const done = await ended(ctx.pmHome, id)
  assert.equal(done.status, 'failed')
  assert.equal(done.session, s.sessionId, 'the MCP server\'s job records the session too')
  const wake = await ctx.stub.waitForRequest((r) => sessionOf(r) === s.sessionId && tellsEnd(id)(newText(r.body)), { what: `the wake for ${id}`, timeout: 30_000 })
  const lag = wake.at - done.endedAt
  console.error(`# e: wake request ${lag} ms after the job's end`)
  assert.ok(lag >= 0 && lag <= WAKE_WITHIN_MS, `the wake came ${lag} ms after the job ended`)
  assertWakeText(wake, id, 'error: 2 tests failed')
  await turnEnded(s, 2)
  await s.end()
  assert.equal(wakeRequests(ctx.stub, s.sessionId, id).length, 1, 'exactly one request brings the wake')
  assert.equal(wakeTurnsInHistory(ctx.stub, s.sessionId, id), 1)
})
