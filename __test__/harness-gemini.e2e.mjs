// The real Gemini CLI (PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses)
// against a stub Gemini API (harness/gemini-stub.mjs), inside a private network
// namespace, with the hooks `run-bg hooks install gemini` writes: a job the
// model starts wakes it once when it ends (the AfterAgent hook holds the turn
// and answers `decision: block` with the wake line, which Gemini sends to the
// model as a new user message), only in its own session; SessionEnd takes the
// session's jobs; the next session's SessionStart context lists jobs left
// running. What Gemini CLI does with hooks, measured: notes/harness-gemini.md.
//
// Each test scripts the stub's model with a reply function (req, data): it
// runs data.commands[i] with run_shell_command for the i-th request, then ends
// its turn with text; a request whose last user message is a wake gets text.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { makeHome, runBg, readRegistry, checkJson, waitFor, cookieProcesses, RUN_BG } from './helpers.mjs'
import {
  geminiSkipReason, geminiVersion, makeGeminiHome, startGemini, hookCommands, processArgv, tmuxSkipReason,
} from './harness/gemini.mjs'

const skip = geminiSkipReason() ?? false
const skipInteractive = skip || (tmuxSkipReason() ?? false)
const TEST_TIMEOUT = 180_000
/** A job's end reaches the model within this long (the issue's bound). */
const WAKE_WITHIN_MS = 2_000
/** How long a gemini run may take at most before the test gives up on it. */
const RUN_LIMIT_MS = 90_000

if (!skip) console.error(`# Gemini CLI ${geminiVersion()}`)

/**
 * The stub's model. data.commands: one shell command per request, in order,
 * while no wake has arrived; then text. A later request whose newest message
 * is user text (in -p only a hook's continuation, i.e. a wake) gets text, so
 * a wake never starts new jobs.
 */
function model(req, data) {
  const last = req.contents[req.contents.length - 1]
  const said = (last?.parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text).join('\n')
  if (req.n > 1 && last?.role === 'user' && said) return { text: `Noted: ${said.slice(0, 200)}` }
  const commands = data.commands || []
  if (req.n <= commands.length) return { shell: commands[req.n - 1], description: 'start it in the background' }
  return { text: data.endText || 'Started in the background; I will be told when it ends.' }
}

/** The user text parts (not tool calls or tool results) of a request's contents, in order. */
function userTexts(req) {
  const out = []
  for (const c of req.body?.contents || []) {
    if (c.role !== 'user') continue
    for (const p of c.parts || []) if (typeof p.text === 'string') out.push(p.text)
  }
  return out
}

/** The newest user message of a request, if it is text (a wake arrives as one). */
function newestUserText(req) {
  const last = req.body?.contents?.at(-1)
  if (last?.role !== 'user') return null
  const texts = (last.parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text)
  return texts.length ? texts.join('\n') : null
}

const isWakeFor = (text, jobId) => typeof text === 'string' && text.includes(jobId) && /\bfailed\b/.test(text)
const ms = (v) => (typeof v === 'number' ? v : Date.parse(v))

/**
 * A proc-manager home and a Gemini HOME (private, project trusted) with our
 * hooks installed by `run-bg hooks install gemini --user`.
 */
function setup(t) {
  // Registered first so it runs first (after-hooks run in order): no gemini
  // or hook of this test may still write into the homes as they are removed.
  const runs = []
  t.after(() => {
    for (const run of runs) run.kill()
  })
  const { home: pmHome } = makeHome(t)
  const g = makeGeminiHome(t)
  g.runs = runs
  const r = runBg(pmHome, ['hooks', 'install', 'gemini', '--user'], { env: { HOME: g.home }, cwd: g.project })
  assert.equal(r.code, 0, `run-bg hooks install gemini --user: exit ${r.code}\n${r.stdout}${r.stderr}`)
  const hooks = hookCommands(g.readSettings())
  for (const event of ['SessionStart', 'AfterAgent', 'SessionEnd']) {
    const h = hooks.find((x) => x.event === event && /hook gemini /.test(x.command || ''))
    assert.ok(h, `no ${event} hook running \`run-bg hook gemini …\` in ${g.settingsPath}:\n${JSON.stringify(g.readSettings().hooks, null, 2)}`)
    assert.match(h.command, /^['"]?\//, `${event} hook command is an absolute path: ${h.command}`)
  }
  assert.equal(g.readSettings().security?.auth?.selectedType, 'gemini-api-key', 'the settings already there are kept')
  return { pmHome, g }
}

function gemini(t, { pmHome, g }, options) {
  return startGemini(t, { g, prompt: 'Run the checks in the background.', reply: model, ...options, env: { PROC_MANAGER_HOME: pmHome, ...options.env } })
}

/** The one job whose command contains `marker`, once the registry has it. */
async function jobWith(pmHome, marker, run) {
  const job = await waitFor(() => readRegistry(pmHome).find((j) => (j.command || JSON.stringify(j.argv || '')).includes(marker)), {
    timeout: 60_000,
    what: `a job running ${marker}${run ? `; gemini stderr:\n${run.stderr().slice(-2000)}` : ''}`,
  })
  return job.id ?? job.jobId
}

/** A job's registry entry (read from the files: no `run-bg check`, see ended()). */
const registryJob = (pmHome, id) => readRegistry(pmHome).find((x) => (x.id ?? x.jobId) === id)

/**
 * The job once it has ended, read from the registry files: a `run-bg check`
 * of an ended job counts as the agent having seen its end (no wake then), so
 * the test must not run one before the wake is due.
 */
async function ended(pmHome, id) {
  const job = await waitFor(() => {
    const j = registryJob(pmHome, id)
    return j?.ended_at ?? j?.endedAt ? j : null
  }, { timeout: 60_000, what: `job ${id} to end` })
  return { ...job, endedAt: job.ended_at ?? job.endedAt }
}

/** Waits for the first request whose newest user message is the wake for jobId; checks it came in time. */
async function expectWake(t, run, pmHome, id, { label = 'the wake' } = {}) {
  const job = await ended(pmHome, id)
  const req = await run.waitForRequest((r) => isWakeFor(newestUserText(r), id), { timeout: 60_000, what: `${label} for ${id}` })
  const firstCarrying = run.requests().find((r) => userTexts(r).some((x) => isWakeFor(x, id)))
  assert.equal(firstCarrying.n, req.n, 'the wake first reaches the model as a new user message')
  const latency = req.receivedAt - ms(job.endedAt)
  t.diagnostic(`${label}: job ${id} ended at ${job.endedAt}, the model got it ${latency} ms later (request ${req.n})`)
  assert.ok(latency >= 0, `the wake came after the job ended (${latency} ms)`)
  assert.ok(latency <= WAKE_WITHIN_MS, `the wake reached the model ${latency} ms after the job ended (at most ${WAKE_WITHIN_MS})`)
  return { job, req, text: newestUserText(req), latency }
}

/** True while the process recorded as {pid, start} still lives (same start time, no zombie). */
function isSame({ pid, start }) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
    return f[19] === start && !/^[ZX]/.test(f[0])
  } catch {
    return false
  }
}

/** Hook processes (`run-bg hook gemini …`) under the gemini process, with start times. */
function hookProcesses(run) {
  return run.children().filter((p) => p.argv.join(' ').includes('hook gemini'))
}

test('harness: a dummy AfterAgent hook that blocks wakes the model with its reason (no run-bg involved)', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const g = makeGeminiHome(t)
  const release = path.join(g.root, 'release')
  const hook = path.join(g.root, 'after-agent.cjs')
  // Waits for `release` (a job's end, here a file), then asks for another turn once.
  fs.writeFileSync(hook, `
    const fs = require('node:fs')
    const input = JSON.parse(fs.readFileSync(0, 'utf8'))
    if (input.stop_hook_active || fs.existsSync(${JSON.stringify(release + '.done')})) { process.stdout.write('{}'); process.exit(0) }
    const tick = setInterval(() => {
      if (!fs.existsSync(${JSON.stringify(release)})) return
      clearInterval(tick)
      fs.writeFileSync(${JSON.stringify(release + '.done')}, String(Date.now()))
      process.stdout.write(JSON.stringify({ decision: 'block', reason: 'run-bg: dummy-1 failed (exit 1) after 1s · first error: error: 2 tests failed · run-bg check dummy-1' }))
    }, 10)
  `)
  const start = path.join(g.root, 'session-start.cjs')
  fs.writeFileSync(start, `process.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: 'SessionStart', additionalContext: 'run-bg: 1 job running: dummy-0' } }))`)
  const s = g.readSettings()
  s.hooks = {
    SessionStart: [{ hooks: [{ name: 'dummy-start', type: 'command', command: `${process.execPath} ${start}` }] }],
    AfterAgent: [{ hooks: [{ name: 'dummy-wait', type: 'command', command: `${process.execPath} ${hook}`, timeout: 120_000 }] }],
  }
  g.writeSettings(s)
  const run = startGemini(t, { g, prompt: 'hello', reply: model, data: { commands: ['echo started'] } })
  const first = await run.waitForRequest(() => true, { timeout: 60_000, what: 'the first request' })
  t.diagnostic(`gemini start: spawn to first model request ${first.receivedAt - run.spawnedAt} ms`)
  assert.ok(userTexts(first).some((x) => x.includes('<hook_context>run-bg: 1 job running: dummy-0</hook_context>')), 'SessionStart context is in the prompt')
  await run.waitForRequest((r) => r.n === 2, { what: 'the end of the first turn' })
  await waitFor(() => run.children().some((p) => p.argv.includes(hook)), { what: 'the AfterAgent hook to run' })
  fs.writeFileSync(release, '')
  const wake = await run.waitForRequest((r) => isWakeFor(newestUserText(r), 'dummy-1'), { what: 'the wake' })
  const releasedAt = Number(fs.readFileSync(release + '.done', 'utf8'))
  t.diagnostic(`hook answered to model request: ${wake.receivedAt - releasedAt} ms`)
  assert.ok(wake.receivedAt - releasedAt < 1000, 'Gemini sends the hook reason on at once')
  const end = await run.wait({ timeout: RUN_LIMIT_MS })
  assert.equal(end.code, 0, end.stderr)
  assert.equal(run.requests().filter((r) => isWakeFor(newestUserText(r), 'dummy-1')).length, 1, 'the wake reaches the model once')
})

test('a job the model starts wakes it once, within 2 s of its end, with its outcome and first error', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = setup(t)
  const cmd = `run-bg -- sh -c 'sleep 3; echo "error: 2 tests failed"; exit 1'`
  const run = gemini(t, ctx, { data: { commands: [cmd] } })
  const first = await run.waitForRequest(() => true, { timeout: 60_000, what: 'the first request' })
  t.diagnostic(`gemini start: spawn to first model request ${first.receivedAt - run.spawnedAt} ms`)
  const id = await jobWith(ctx.pmHome, 'error: 2 tests failed', run)
  const started = await run.waitForRequest((r) => r.n === 2, { what: 'the tool result' })
  assert.ok(started.body.contents.at(-1).parts.some((p) => JSON.stringify(p.functionResponse || '').includes(id)), 'the model saw the job id in the tool result')

  const { text, job } = await expectWake(t, run, ctx.pmHome, id)
  for (const s of [id, 'failed', 'exit 1', 'error: 2 tests failed']) assert.ok(text.includes(s), `the wake says ${JSON.stringify(s)}: ${text}`)
  assert.ok(!text.includes('\n'), `the wake is one line: ${JSON.stringify(text)}`)
  assert.equal(job.status, 'failed')

  const end = await run.wait({ timeout: RUN_LIMIT_MS })
  assert.equal(end.code, 0, `gemini exit\n${end.stderr.slice(-3000)}`)
  const requests = run.requests()
  assert.equal(requests.filter((r) => isWakeFor(newestUserText(r), id)).length, 1, 'exactly one request brings the wake')
  assert.equal(userTexts(requests.at(-1)).filter((x) => isWakeFor(x, id)).length, 1, 'the conversation holds the wake once')

  const c = checkJson(ctx.pmHome, id)
  assert.ok(typeof c.session === 'string' && c.session.length > 0, `the job records its session: ${JSON.stringify(c.session)}`)
  assert.ok(end.sessionId, `gemini -o json names its session: ${end.stdout.slice(0, 500)}`)
  assert.ok(c.session.includes(end.sessionId), `the job's session ${c.session} is gemini's ${end.sessionId}`)
})

test('a second concurrent session: its job wakes it, never the first', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = setup(t)
  const releaseA = path.join(ctx.g.root, 'release-a')
  const a = gemini(t, ctx, {
    label: 'A',
    data: { commands: [`run-bg -- sh -c 'while [ ! -e ${releaseA} ]; do sleep 0.1; done; echo "error: A broke"; exit 1'`] },
  })
  const idA = await jobWith(ctx.pmHome, 'error: A broke', a)
  await a.waitForRequest((r) => r.n === 2, { what: "A's turn to end" })
  const b = gemini(t, ctx, { label: 'B', data: { commands: [`run-bg -- sh -c 'sleep 1; echo "error: B broke"; exit 3'`] } })
  const idB = await jobWith(ctx.pmHome, 'error: B broke', b)

  const wakeB = await expectWake(t, b, ctx.pmHome, idB, { label: "B's wake" })
  assert.ok(wakeB.text.includes('exit 3'), wakeB.text)
  const endB = await b.wait({ timeout: RUN_LIMIT_MS })
  assert.equal(endB.code, 0, endB.stderr.slice(-3000))
  // Give a wrong wake of A the same bound a right one has, then look.
  await waitFor(() => Date.now() >= ms(wakeB.job.endedAt) + WAKE_WITHIN_MS + 500, { timeout: 10_000, what: 'the wake window of B to pass' })
  for (const r of a.requests()) {
    assert.ok(!userTexts(r).some((x) => x.includes(idB)), `session A was told of B's job ${idB} (request ${r.n}): ${userTexts(r).join(' | ')}`)
  }
  assert.equal(registryJob(ctx.pmHome, idA).status, 'running')

  fs.writeFileSync(releaseA, '')
  const wakeA = await expectWake(t, a, ctx.pmHome, idA, { label: "A's wake" })
  assert.ok(!wakeA.text.includes(idB), wakeA.text)
  const endA = await a.wait({ timeout: RUN_LIMIT_MS })
  assert.equal(endA.code, 0, endA.stderr.slice(-3000))
  for (const r of b.requests()) assert.ok(!userTexts(r).some((x) => x.includes(idA)), `session B was told of A's job (request ${r.n})`)

  const sA = checkJson(ctx.pmHome, idA).session
  const sB = checkJson(ctx.pmHome, idB).session
  assert.ok(sA && sB && sA !== sB, `two sessions, two session ids: ${sA} / ${sB}`)
  if (endA.sessionId) assert.ok(sA.includes(endA.sessionId), `${sA} is A's ${endA.sessionId}`)
  if (endB.sessionId) assert.ok(sB.includes(endB.sessionId), `${sB} is B's ${endB.sessionId}`)
  const list = (s) => {
    const r = runBg(ctx.pmHome, ['list', '--session', s, '--json'])
    assert.equal(r.code, 0, r.stderr)
    return JSON.parse(r.stdout).map((j) => j.jobId ?? j.id)
  }
  assert.deepEqual(list(sA), [idA])
  assert.deepEqual(list(sB), [idB])
})

test("SessionEnd leaves no process of the session's jobs", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = setup(t)
  const run = gemini(t, ctx, {
    data: {
      commands: [
        `run-bg -- sh -c 'sleep 300 & sleep 301 & echo tree-c1; wait'`,
        `run-bg -- sh -c 'trap "" TERM; echo tree-c2; sleep 302'`,
      ],
    },
  })
  const ids = [await jobWith(ctx.pmHome, 'tree-c1', run), await jobWith(ctx.pmHome, 'tree-c2', run)]
  await waitFor(() => cookieProcesses(ids[0]).length >= 3 && cookieProcesses(ids[1]).length >= 2, { what: 'both jobs to run their trees' })
  await run.waitForRequest((r) => r.n === 3, { what: 'the turn to end' })
  // The AfterAgent hook now holds the turn (jobs run); end the session the
  // way a terminal does: a signal to the CLI, which runs SessionEnd and exits.
  const hooks = await waitFor(() => {
    const h = hookProcesses(run)
    return h.length ? h : null
  }, { what: 'the AfterAgent hook to wait' })
  t.diagnostic(`waiting hook: ${hooks.map((h) => `${h.pid} ${processArgv(h.pid).join(' ')}`).join('; ')}`)
  const signalled = Date.now()
  run.signal('SIGTERM')
  const end = await run.wait({ timeout: 60_000 })
  t.diagnostic(`gemini exited ${end.exitedAt - signalled} ms after SIGTERM`)
  for (const id of ids) {
    await waitFor(() => cookieProcesses(id).length === 0, { timeout: 5_000, what: `job ${id}'s processes to be gone` })
    assert.notEqual(checkJson(ctx.pmHome, id).status, 'running', id)
  }
  t.diagnostic(`all job processes gone ${Date.now() - end.exitedAt} ms after gemini exited`)
  await waitFor(() => hooks.every((h) => !isSame(h)), { timeout: 5_000, what: 'the orphaned AfterAgent hook to exit (its gemini is gone)' })
})

/** The next session's first request: its SessionStart context must name each of `ids`. */
async function expectStartContext(t, ctx, ids) {
  const next = gemini(t, ctx, { label: 'next', data: { commands: [], endText: 'Hello.' } })
  const req = await next.waitForRequest(() => true, { timeout: 60_000, what: "the next session's first request" })
  const texts = userTexts(req)
  for (const id of ids) {
    const ctxText = texts.find((x) => x.includes('<hook_context>') && x.includes(id))
    assert.ok(ctxText, `the SessionStart context names ${id}: ${texts.filter((x) => !x.startsWith('<session_context>')).join(' | ')}`)
    assert.ok(ctxText.indexOf('<hook_context>') < ctxText.indexOf(id), 'inside the hook context')
  }
  const end = await next.wait({ timeout: RUN_LIMIT_MS })
  assert.equal(end.code, 0, end.stderr.slice(-3000))
  return texts
}

test("a job left running by a session that died (no SessionEnd) is listed in the next session's SessionStart context", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = setup(t)
  const first = gemini(t, ctx, { label: 'first', data: { commands: [`run-bg --label left-behind -- sh -c 'echo left; sleep 300'`] } })
  const id = await jobWith(ctx.pmHome, 'echo left', first)
  await first.waitForRequest((r) => r.n === 2, { what: 'the first session to end its turn' })
  // The first session dies without SessionEnd (SIGKILL), leaving its job running.
  first.kill()
  await first.wait({ timeout: 30_000 })
  assert.equal(registryJob(ctx.pmHome, id).status, 'running')
  await expectStartContext(t, ctx, [id])
})

test("SessionEnd keeps an --outlive-session job, and the next session's SessionStart context lists it", { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = setup(t)
  const first = gemini(t, ctx, {
    label: 'first',
    data: { commands: [`run-bg --outlive-session -- sh -c 'echo kept; sleep 300'`, `run-bg -- sh -c 'echo dropped; sleep 301'`] },
  })
  const kept = await jobWith(ctx.pmHome, 'echo kept', first)
  const dropped = await jobWith(ctx.pmHome, 'echo dropped', first)
  await first.waitForRequest((r) => r.n === 3, { what: 'the first session to end its turn' })
  first.signal('SIGTERM')
  const end = await first.wait({ timeout: 60_000 })
  assert.equal(end.code, 0, end.stderr.slice(-3000))
  await waitFor(() => cookieProcesses(dropped).length === 0, { timeout: 5_000, what: `${dropped} to be killed by SessionEnd` })
  assert.ok(cookieProcesses(kept).length > 0, `${kept} (--outlive-session) still runs`)
  assert.equal(registryJob(ctx.pmHome, kept).status, 'running')
  await expectStartContext(t, ctx, [kept])
})

test('interactive: the turn is not held while jobs run; the next prompt is told of the end, once; /quit takes the jobs', { skip: skipInteractive, timeout: TEST_TIMEOUT }, async (t) => {
  const ctx = setup(t)
  const run = gemini(t, ctx, {
    interactive: true,
    data: { commands: [`run-bg -- sh -c 'sleep 3; echo "error: 2 tests failed"; exit 1'`, `run-bg -- sh -c 'echo still-running; sleep 300'`] },
  })
  await run.waitForScreen((s) => s.includes('Type your message'), { timeout: 60_000, what: 'the prompt' })
  t.diagnostic(`gemini start (interactive): spawn to input prompt ${Date.now() - run.spawnedAt} ms`)
  await run.type('Run the checks in the background.')
  const id = await jobWith(ctx.pmHome, 'error: 2 tests failed', run)
  const other = await jobWith(ctx.pmHome, 'still-running', run)
  // With a person at the view, AfterAgent does not hold the turn for the
  // jobs (it would hold what they type, and Esc would drop the wake): the
  // model's answer comes back while a job still runs.
  await run.waitForScreen((s) => s.includes('Started in the background'), { what: "the turn's end" })
  assert.ok(!registryJob(ctx.pmHome, other)?.ended_at, 'the long job still runs after the turn ended')
  const done = await ended(ctx.pmHome, id)
  assert.equal(done.status, 'failed')
  // The next prompt carries the end (BeforeAgent's context).
  try {
    await run.type('Anything new')  // no '?': in an empty input box it toggles the shortcuts help
  } catch (e) {
    throw new Error(`${e.message}; the screen:\n${run.screen()}`)
  }
  const wake = await waitFor(() => run.requests().find((r) => isWakeFor(newestUserText(r), id)), { timeout: 60_000, what: 'the next prompt to carry the end' })
  const text = newestUserText(wake)
  for (const s of [id, 'failed', 'exit 1', 'error: 2 tests failed']) assert.ok(text.includes(s), `the prompt's context says ${JSON.stringify(s)}: ${text}`)
  await run.waitForScreen((s) => s.includes('Noted:'), { what: "the model's answer" })
  const end = await run.quit({ timeout: 60_000 })
  t.diagnostic(`interactive gemini exited with ${end.code}`)
  await waitFor(() => cookieProcesses(other).length === 0, { timeout: 5_000, what: `${other} to be killed by SessionEnd` })
  assert.equal(run.requests().filter((r) => isWakeFor(newestUserText(r), id)).length, 1, 'exactly one request brings the end')
})

test('hooks install gemini: --user merges into settings.json, twice is once, --dry-run writes nothing, --remove undoes, --project', { skip: false, timeout: 60_000 }, (t) => {
  const { home: pmHome } = makeHome(t)
  const g = makeGeminiHome(t)
  const mine = { name: 'mine', type: 'command', command: 'echo mine' }
  g.writeSettings({ ...g.readSettings(), ui: { theme: 'ANSI' }, hooks: { AfterAgent: [{ hooks: [mine] }] } })
  const before = fs.readFileSync(g.settingsPath, 'utf8')
  const install = (...args) => runBg(pmHome, ['hooks', 'install', 'gemini', ...args], { env: { HOME: g.home }, cwd: g.project })

  const dry = install('--user', '--dry-run')
  assert.equal(dry.code, 0, `--dry-run: exit ${dry.code}\n${dry.stderr}`)
  assert.match(dry.stdout, /hook gemini/, 'the dry run shows the hooks')
  assert.equal(fs.readFileSync(g.settingsPath, 'utf8'), before, '--dry-run writes nothing')

  for (let i = 0; i < 2; i++) {
    const r = install('--user')
    assert.equal(r.code, 0, `install --user: exit ${r.code}\n${r.stderr}`)
  }
  const s = g.readSettings()
  assert.equal(s.ui?.theme, 'ANSI', 'other settings kept')
  assert.equal(s.security?.auth?.selectedType, 'gemini-api-key', 'other settings kept')
  const cmds = hookCommands(s)
  assert.ok(cmds.some((c) => c.event === 'AfterAgent' && c.command === 'echo mine'), 'our own hooks kept')
  for (const event of ['SessionStart', 'AfterAgent', 'SessionEnd']) {
    const ours = cmds.filter((c) => c.event === event && /hook gemini /.test(c.command))
    assert.equal(ours.length, 1, `one ${event} hook after two installs: ${JSON.stringify(ours)}`)
    assert.ok(ours[0].command.includes(path.resolve(RUN_BG)) || /^['"]?\//.test(ours[0].command), `absolute path: ${ours[0].command}`)
  }
  const wait = cmds.find((c) => c.event === 'AfterAgent' && /hook gemini /.test(c.command))
  assert.ok(!(wait.timeout <= 60_000), `the AfterAgent hook may wait longer than Gemini's default 60 s: timeout ${wait.timeout}`)

  const rm = install('--user', '--remove')
  assert.equal(rm.code, 0, `--remove: exit ${rm.code}\n${rm.stderr}`)
  const after = g.readSettings()
  assert.equal(hookCommands(after).filter((c) => /hook gemini /.test(c.command)).length, 0, 'ours removed')
  assert.ok(hookCommands(after).some((c) => c.command === 'echo mine'), 'our own hook survives --remove')
  assert.equal(after.ui?.theme, 'ANSI')

  const p = install('--project')
  assert.equal(p.code, 0, `--project: exit ${p.code}\n${p.stderr}`)
  const proj = JSON.parse(fs.readFileSync(g.projectSettingsPath, 'utf8'))
  assert.equal(hookCommands(proj).filter((c) => /hook gemini /.test(c.command)).length >= 3, true, JSON.stringify(proj))
  assert.equal(hookCommands(g.readSettings()).filter((c) => /hook gemini /.test(c.command)).length, 0, '--project leaves the user settings alone')
})
