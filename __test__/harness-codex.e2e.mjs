// The real OpenAI Codex CLI (PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses)
// against a stub model (harness/openai-stub.mjs), each run in a private
// network namespace, with the hooks `run-bg hooks install codex --user`
// writes: a job the model starts wakes it once when it ends, only in its own
// session; ending the session takes its jobs; the next session hears of jobs
// left running. What Codex does with hooks, measured: notes/harness-codex.md.
//
// The stub's "model" (below) follows the prompt: a line `RUN: <command>`
// makes it run <command> with Codex's shell tool (exec_command); after a
// tool result, or any other input (a wake), it ends its turn with text.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  RUN_BG, makeHome, runBg, checkJson, waitFor, cookieProcesses, isAlive,
} from './helpers.mjs'
import {
  startStub, isSideRequest, sessionOf, newItems, itemText, inputTexts,
} from './harness/openai-stub.mjs'
import {
  codexSkipReason, codexVersion, makeCodexHome, runCodex, finish, descendants, NETNS_PREFIX, CODEX_BIN,
} from './harness/codex.mjs'

const skip = codexSkipReason() ?? false
const TEST_TIMEOUT = 180_000
/** A job's end reaches the model within this long (the bound). */
const WAKE_WITHIN_MS = 2_000
const FAILING_JOB = `${RUN_BG} -- sh -c 'sleep 3; echo "error: 2 tests failed"; exit 1'`

if (!skip) console.error(`# Codex CLI ${codexVersion()}`)

/** The stub's model: see the top of this file. */
function model(body, { requests, entry }) {
  if (isSideRequest(body)) return { say: 'Background job' }
  const fresh = newItems(requests, entry)
  if (fresh.some((i) => i.type === 'function_call_output')) return { say: 'Started it in the background; I will be told when it ends.' }
  const run = fresh.map(itemText).join('\n').match(/^RUN: (.+)$/m)
  if (run) return { shell: run[1] }
  return { say: 'Noted.' }
}

/** A proc-manager home, the stub on a unix socket, and a CODEX_HOME with our hooks installed. */
async function setup(t, { codexHomeOptions } = {}) {
  const { home } = makeHome(t)
  const sockDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pm-codex-stub-'))
  const stub = await startStub(model, { socketPath: path.join(sockDir, 'stub.sock') })
  t.after(async () => {
    await stub.close()
    fs.rmSync(sockDir, { recursive: true, force: true })
  })
  // No `[features] hooks` line: the installer is to make sure hooks are on.
  const codex = makeCodexHome(t, { hooks: false, ...codexHomeOptions })
  installHooks(home, codex)
  return { home, stub, codex }
}

/**
 * `run-bg hooks install codex --user` into codex.codexHome, asserting what it
 * wrote. It runs `codex app-server` (found by CODEX_BIN) to trust the hooks,
 * so in a private network namespace; `trust: false` passes --no-trust instead.
 */
function installHooks(home, codex, { trust = true } = {}) {
  const argv = [RUN_BG, 'hooks', 'install', 'codex', '--user', ...(trust ? [] : ['--no-trust'])]
  const [cmd, ...args] = trust ? [...NETNS_PREFIX, ...argv] : argv
  const r = spawnSync(cmd, args, {
    env: { ...process.env, PROC_MANAGER_HOME: home, CODEX_HOME: codex.codexHome, CODEX_BIN, HOME: codex.home },
    cwd: codex.project,
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(r.status, 0, `run-bg hooks install codex --user: exit ${r.status}\n${r.stdout}${r.stderr}`)
  const hooks = readHooks(codex)
  for (const [event, arg] of [['SessionStart', 'session-start'], ['Stop', 'stop'], ['SessionEnd', 'session-end']]) {
    const commands = commandsOf(hooks, event)
    assert.ok(
      commands.some((c) => c.startsWith(`${RUN_BG} hook codex ${arg}`)),
      `hooks.json has a ${event} hook running ${RUN_BG} hook codex ${arg}: ${JSON.stringify(hooks[event])}`,
    )
  }
  assert.doesNotMatch(fs.readFileSync(codex.configPath, 'utf8'), /^\s*hooks\s*=\s*false/m, 'hooks are not left off in config.toml')
  return { hooks, output: r.stdout + r.stderr }
}

const readHooks = (codex) => JSON.parse(fs.readFileSync(codex.hooksPath, 'utf8')).hooks ?? {}
const commandsOf = (hooks, event) => (hooks[event] ?? []).flatMap((g) => g.hooks ?? []).map((h) => h.command ?? '')

/** The jobs (`run-bg list --all --json`) whose command contains `needle`. */
function jobsMatching(home, needle) {
  const r = runBg(home, ['list', '--all', '--json'])
  if (r.code !== 0) throw new Error(`run-bg list failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout).filter((j) => (j.command ?? '').includes(needle))
}

/** A message from the harness (user or developer role: where hook output lands), not a tool's output. */
const isMessage = (i) => i.type === 'message' && (i.role === 'user' || i.role === 'developer')

/**
 * The model requests of session `sid` that newly show it a message containing
 * every one of `needles` (what was delivered by that request), in order.
 */
function deliveries(stub, sid, needles) {
  return stub.responses.filter((r) => sessionOf(r) === sid
    && newItems(stub.requests, r).some((i) => isMessage(i) && needles.every((n) => itemText(i).includes(n))))
}

/** Every text any request of session `sid` showed the model. */
const sessionText = (stub, sid) => stub.responses.filter((r) => sessionOf(r) === sid).flatMap((r) => inputTexts(r.body).map((x) => x.text)).join('\n')

/** The one new item of `request` carrying `needle`, as text. */
const deliveredText = (stub, request, needle) => newItems(stub.requests, request).filter(isMessage).map(itemText).find((x) => x.includes(needle))

test('a job the model starts wakes it once, within 2 s of its end, with the outcome and first error', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const { home, stub, codex } = await setup(t)
  const run = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env: { PROC_MANAGER_HOME: home }, prompt: `Run the tests in the background.\nRUN: ${FAILING_JOB}` })
  const sid = await run.waitForSessionId()
  const first = await stub.waitForRequest((r) => r.index !== undefined && sessionOf(r) === sid, { timeout: 60_000, what: 'the first model request' })
  t.diagnostic(`codex exec: first model request ${first.receivedAt - run.startedAt} ms after spawn`)

  const result = await finish(run, 120_000)
  assert.equal(result.code, 0, `codex exec failed\n${run.describe()}`)
  const [job] = jobsMatching(home, '2 tests failed')
  assert.ok(job, `the model's run-bg started a job in ${home}\n${run.describe()}`)
  const checked = checkJson(home, job.jobId)
  assert.equal(checked.status, 'failed')
  assert.equal(checked.exitCode, 1)
  assert.equal(checked.session, sid, 'the job records the Codex session (CODEX_THREAD_ID) that started it')

  const wakes = deliveries(stub, sid, [job.jobId, 'failed'])
  assert.equal(wakes.length, 1, `the end reaches the model in exactly one request (got ${wakes.length})\n${run.describe()}`)
  const text = deliveredText(stub, wakes[0], job.jobId)
  for (const part of [job.jobId, 'failed', 'exit 1', 'error: 2 tests failed']) {
    assert.ok(text.includes(part), `the wake says ${JSON.stringify(part)}: ${JSON.stringify(text)}`)
  }
  const latency = wakes[0].receivedAt - checked.endedAt
  t.diagnostic(`job end → wake request: ${latency} ms`)
  assert.ok(latency >= 0, `the wake came after the job's end (${latency} ms)`)
  assert.ok(latency <= WAKE_WITHIN_MS, `the wake came ${latency} ms after the job's end (at most ${WAKE_WITHIN_MS})`)

  const last = stub.responses.filter((r) => sessionOf(r) === sid).at(-1)
  const copies = (last.body.input ?? []).filter((i) => isMessage(i) && itemText(i).includes(job.jobId) && itemText(i).includes('failed'))
  assert.equal(copies.length, 1, 'the conversation holds the wake once')
})

test('a second concurrent session\'s job does not wake the first; list --session filters', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const { home, stub, codex } = await setup(t)
  const env = { PROC_MANAGER_HOME: home }
  // A's job ends after B's: B's end must neither wake A nor end A's wait early.
  const a = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, prompt: `Session A.\nRUN: ${RUN_BG} -- sh -c 'sleep 6; echo "error: A broke"; exit 1'` })
  const b = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, prompt: `Session B.\nRUN: ${RUN_BG} -- sh -c 'sleep 2; echo "error: B broke"; exit 2'` })
  const [sidA, sidB] = [await a.waitForSessionId(), await b.waitForSessionId()]
  assert.notEqual(sidA, sidB)
  const [ra, rb] = await Promise.all([finish(a, 120_000), finish(b, 120_000)])
  assert.equal(ra.code, 0, `session A failed\n${a.describe()}`)
  assert.equal(rb.code, 0, `session B failed\n${b.describe()}`)

  const [jobA] = jobsMatching(home, 'A broke')
  const [jobB] = jobsMatching(home, 'B broke')
  assert.ok(jobA && jobB, `both sessions started their job: ${JSON.stringify(jobsMatching(home, '').map((j) => j.command))}`)
  const [checkA, checkB] = [checkJson(home, jobA.jobId), checkJson(home, jobB.jobId)]
  assert.equal(checkA.session, sidA)
  assert.equal(checkB.session, sidB)

  const listed = runBg(home, ['list', '--session', sidA, '--json'])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout).map((j) => j.jobId), [jobA.jobId], 'list --session shows only that session\'s job')

  assert.ok(!sessionText(stub, sidA).includes(jobB.jobId), 'session A never hears of B\'s job')
  assert.ok(!sessionText(stub, sidB).includes(jobA.jobId), 'session B never hears of A\'s job')
  for (const [sid, job, checked, out] of [[sidA, jobA, checkA, 'exit 1'], [sidB, jobB, checkB, 'exit 2']]) {
    const wakes = deliveries(stub, sid, [job.jobId, 'failed'])
    assert.equal(wakes.length, 1, `${job.jobId} reaches its own session once (got ${wakes.length})`)
    assert.ok(deliveredText(stub, wakes[0], job.jobId).includes(out))
    const latency = wakes[0].receivedAt - checked.endedAt
    t.diagnostic(`${job.jobId}: job end → wake request ${latency} ms`)
    assert.ok(latency >= 0 && latency <= WAKE_WITHIN_MS, `${job.jobId}'s wake came ${latency} ms after its end`)
  }
})

/**
 * Ends a `codex exec` session whose model has ended its turn: if the Stop
 * hook is waiting for a job (it waits for the session's jobs), Ctrl-C
 * (SIGINT to the native codex: Codex then runs Interrupt and SessionEnd);
 * if exec is ending by itself, lets it. Answers the exec's result and which.
 */
async function endSession(t, run) {
  const how = await Promise.race([
    waitFor(() => descendants(run.pid).some((p) => cmdline(p).includes('hook codex stop')) && 'waiting', { timeout: 30_000, what: 'the Stop hook' })
      .catch(() => 'no Stop hook seen'),
    run.done.then(() => 'exited'),
  ])
  if (how !== 'exited') run.signal('SIGINT')
  const result = await finish(run, 30_000)
  t.diagnostic(`at the turn's end: ${how}; codex exec exit ${result.code ?? result.signal}`)
  return result
}

/** Resolves once the model was shown its tool call's result in session `sid` (its turn then ends). */
const toolResultShown = (stub, sid) => stub.waitForRequest(
  (r) => sessionOf(r) === sid && newItems(stub.requests, r).some((i) => i.type === 'function_call_output'),
  { timeout: 60_000, what: 'the tool result' },
)

/** The developer messages (start context) the first request of a process showed the model. */
const openingContext = (stub, request) => newItems(stub.requests, request).filter((i) => i.role === 'developer').map(itemText).join('\n')

/** For a failure message: the start context's run-bg part, or that there is none. */
const runBgPart = (context) => context.split('\n').filter((l) => l.includes('run-bg')).join('\n') || '(no developer message mentions run-bg)'

test('the session\'s end (Ctrl-C in codex exec: Interrupt, then SessionEnd) leaves no process of its jobs', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const { home, stub, codex } = await setup(t)
  const run = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env: { PROC_MANAGER_HOME: home }, prompt: `Start the server.\nRUN: ${RUN_BG} -- sh -c 'sleep 300 & sleep 301; wait'` })
  const sid = await run.waitForSessionId()
  const job = await waitFor(() => jobsMatching(home, 'sleep 301')[0], { timeout: 60_000, what: 'the job the model started' })
  await waitFor(() => cookieProcesses(job.jobId).length >= 3, { what: 'the job\'s three processes' })
  await toolResultShown(stub, sid)
  const { endedAt } = await endSession(t, run)
  await waitFor(() => cookieProcesses(job.jobId).length === 0, { timeout: 10_000, what: `no process of ${job.jobId} left after the session ended` })
  t.diagnostic(`the job's last process gone ${Date.now() - endedAt} ms after codex's exit (at most)`)
  const checked = checkJson(home, job.jobId)
  assert.equal(checked.session, sid)
  assert.equal(checked.status, 'killed')
})

test('a job left running (--outlive-session) is listed in the next session\'s start context, new or resumed', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const { home, stub, codex } = await setup(t)
  const env = { PROC_MANAGER_HOME: home }
  const first = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, prompt: `Start the watcher.\nRUN: ${RUN_BG} --outlive-session --label watcher -- sleep 300` })
  const sid1 = await first.waitForSessionId()
  const job = await waitFor(() => jobsMatching(home, 'sleep 300')[0], { timeout: 60_000, what: 'the job the model started' })
  await toolResultShown(stub, sid1)
  await endSession(t, first)
  const checked = checkJson(home, job.jobId)
  assert.equal(checked.status, 'running', 'the session\'s end left the --outlive-session job running')
  assert.ok(isAlive(checked.pid))

  const second = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, prompt: 'What is running?' })
  const sid2 = await second.waitForSessionId()
  assert.equal((await finish(second, 120_000)).code, 0, second.describe())
  const context = openingContext(stub, stub.responses.find((r) => sessionOf(r) === sid2))
  assert.ok(context.includes(job.jobId), `a new session in the project hears of ${job.jobId} as it starts: ${runBgPart(context)}`)

  // The resumed session's own job runs on, so its Stop hook waits for it: Ctrl-C ends it.
  const resumed = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, resume: sid1, prompt: 'And now?' })
  assert.equal(await resumed.waitForSessionId(), sid1, 'exec resume continues the same session')
  await stub.waitForRequest((r) => sessionOf(r) === sid1 && newItems(stub.requests, r).some((i) => itemText(i) === 'And now?'), { timeout: 60_000, what: 'the resumed session\'s prompt' })
  await endSession(t, resumed)
  const resumedContext = openingContext(stub, stub.responses.filter((r) => sessionOf(r) === sid1).at(-1))
  assert.ok(resumedContext.includes(job.jobId), `the resumed session hears of ${job.jobId} as it starts: ${runBgPart(resumedContext)}`)
})

test('a session that died without SessionEnd (SIGKILL) does not hide its running job from the next session', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  const { home, stub, codex } = await setup(t)
  const env = { PROC_MANAGER_HOME: home }
  const first = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, prompt: `RUN: ${RUN_BG} --label watcher -- sleep 300` })
  const sid1 = await first.waitForSessionId()
  const job = await waitFor(() => jobsMatching(home, 'sleep 300')[0], { timeout: 60_000, what: 'the job the model started' })
  await toolResultShown(stub, sid1)
  // A crash, or a terminal closed hard: Codex runs no hook at all.
  first.kill()
  await first.done
  assert.ok(isAlive(checkJson(home, job.jobId).pid), 'the job outlived the session that crashed')

  const second = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env, prompt: 'What is running?' })
  const sid2 = await second.waitForSessionId()
  assert.equal((await finish(second, 120_000)).code, 0, second.describe())
  const context = openingContext(stub, stub.responses.find((r) => sessionOf(r) === sid2))
  assert.ok(context.includes(job.jobId), `a new session in the project hears of ${job.jobId}, whose session's codex is gone: ${runBgPart(context)}`)
})

test('installed hooks run without --dangerously-bypass-hook-trust: the install records Codex\'s hook trust', { skip, timeout: TEST_TIMEOUT }, async (t) => {
  // Codex 0.171 skips an untrusted hook without a word; trust is
  // [hooks.state."<hooks.json>:<event>:<group>:<handler>"] trusted_hash in config.toml.
  const { home, stub, codex } = await setup(t)
  const config = fs.readFileSync(codex.configPath, 'utf8')
  for (const event of ['session_start', 'stop', 'session_end']) {
    assert.ok(config.includes(`[hooks.state."${codex.hooksPath}:${event}:`), `config.toml trusts the ${event} hook:\n${config}`)
  }
  const run = runCodex(t, { codexHome: codex.codexHome, stub, cwd: codex.project, env: { PROC_MANAGER_HOME: home }, trustHooks: false, prompt: `RUN: ${FAILING_JOB}` })
  const sid = await run.waitForSessionId()
  assert.equal((await finish(run, 120_000)).code, 0, run.describe())
  assert.doesNotMatch(run.output().stderr, /bypass-hook-trust/, 'run without the bypass flag')
  const [job] = jobsMatching(home, '2 tests failed')
  assert.ok(job, run.describe())
  assert.equal(deliveries(stub, sid, [job.jobId, 'failed']).length, 1, `the Stop hook ran and woke the model\n${run.describe()}`)
})

test('hooks install codex: --dry-run writes nothing, install keeps the user\'s own hooks and settings, --remove takes only ours', async (t) => {
  const { home } = makeHome(t)
  const own = { type: 'command', command: '/usr/local/bin/my-stop-hook', timeout: 5 }
  const codex = makeCodexHome(t, { hooks: false, extraToml: '[tui]\nnotifications = true', hooksJson: { hooks: { Stop: [{ hooks: [own] }] } } })
  const before = { config: fs.readFileSync(codex.configPath, 'utf8'), hooks: fs.readFileSync(codex.hooksPath, 'utf8') }
  const env = { CODEX_HOME: codex.codexHome }

  const dry = runBg(home, ['hooks', 'install', 'codex', '--user', '--dry-run'], { env })
  assert.equal(dry.code, 0, dry.stderr)
  assert.match(dry.stdout, /hook codex stop/, 'the dry run prints what it would write')
  assert.equal(fs.readFileSync(codex.configPath, 'utf8'), before.config, 'dry run: config.toml untouched')
  assert.equal(fs.readFileSync(codex.hooksPath, 'utf8'), before.hooks, 'dry run: hooks.json untouched')

  const { hooks } = installHooks(home, codex, { trust: false })
  assert.ok(commandsOf(hooks, 'Stop').includes(own.command), 'the user\'s own Stop hook stays')
  const config = fs.readFileSync(codex.configPath, 'utf8')
  for (const line of ['model_provider = "stub"', 'base_url = "http://127.0.0.1:', 'notifications = true']) {
    assert.ok(config.includes(line), `config.toml keeps ${line}`)
  }
  const again = runBg(home, ['hooks', 'install', 'codex', '--user', '--no-trust'], { env })
  assert.equal(again.code, 0, again.stderr)
  assert.deepEqual(readHooks(codex), hooks, 'installing twice changes nothing')

  const removed = runBg(home, ['hooks', 'install', 'codex', '--user', '--remove'], { env })
  assert.equal(removed.code, 0, removed.stderr)
  const left = readHooks(codex)
  const all = Object.keys(left).flatMap((e) => commandsOf(left, e))
  assert.deepEqual(all, [own.command], `--remove leaves only the user's own hook: ${JSON.stringify(left)}`)
  assert.ok(fs.readFileSync(codex.configPath, 'utf8').includes('model_provider = "stub"'), 'config.toml keeps the user\'s settings')
})

function cmdline(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    return ''
  }
}
