// The `harness` group of bench/run.mjs (`--only=harness`).

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { startStub, newText, newToolResults, sessionOf } from '../__test__/harness/anthropic-stub.mjs'
import { claudeSkipReason, claudeVersion, startNetns, makeClaudeHome, startClaude, descendants } from '../__test__/harness/claude.mjs'
import { PLAN, RUN_BG, check, cmdline, killers, log, mustRunBg, q, readJobs, removeDir, rotate, sleep, startTicks, tempDir, tempDirs, writeConfig } from './kit.mjs'
import { readMark } from './notify.mjs'
import { waitUntil } from './scale.mjs'

// ------------------------------------------------- 11. agent harness: the wake

// The real Claude Code (PM_HARNESS_DIR, default ~/.cache/proc-manager-harnesses)
// against the stub model of __test__/harness/, inside the private network
// namespace the harness tests use: how long after a background job ends the
// model hears of it. Two variants, interleaved, a fresh Claude Code session
// (and HOME, and PROC_MANAGER_HOME) per round, each kept open (stream-json,
// stdin held) until the wake's request reaches the stub and its turn ends:
//   ours: hooks from `run-bg hooks install claude-code`; the model runs
//     `run-bg --label b -- <job>` through Bash and ends its turn; from the
//     job's ended_at (its job.json: `run-bg check` would mark the end seen,
//     and a seen end wakes nobody) to the request carrying the hook's line;
//   builtin: no hooks; the model runs the job with Bash `run_in_background:
//     true` and ends its turn; from the job's own clock (`date +%s%3N` as its
//     last command before `exit 1`) to the request carrying Claude Code's
//     `<task-notification>` for that task.
// Skipped, saying why, without the harness or a network namespace.
export const HARNESS_JOB = `sleep 2; echo "error: 2 tests failed"; exit 1`
export const HARNESS_FIRST_ERROR = 'error: 2 tests failed'
export const HARNESS_WAKE_MS = 30_000

/** The stub's model: `RUN: <cmd>` runs it with Bash, `BG: <cmd>` with Bash in the background; a tool result or anything else ends the turn. */
export function harnessModel(record) {
  if (record.kind !== 'main') return undefined
  if (newToolResults(record.body).length) return { text: 'Started it in the background; I will be told when it ends.' }
  const said = newText(record.body)
  const run = /^RUN: (.+)$/m.exec(said)
  if (run) return { bash: run[1], description: 'Run the tests in the background' }
  const bg = /^BG: (.+)$/m.exec(said)
  if (bg) return { bash: bg[1], description: 'Run the tests in the background', runInBackground: true }
  return { text: 'Noted.' }
}

/** One round of `variant` in a fresh session: { lag, startMs, exitMs, idle, text } (lag null: no wake within HARNESS_WAKE_MS). */
export async function harnessRound(variant, stub, ns) {
  const pmHome = tempDir('harness')
  writeConfig(pmHome)
  const claude = makeClaudeHome(undefined, {})
  tempDirs.add(claude.home)
  const mark = path.join(pmHome, 'END')
  if (variant === 'ours') {
    mustRunBg(pmHome, ['hooks', 'install', 'claude-code', '--user'], { env: { ...envFor(pmHome), HOME: claude.home }, cwd: claude.project })
  }
  const prompt = variant === 'ours'
    ? `Run the tests in the background.\nRUN: ${RUN_BG} --label b -- sh -c ${q(HARNESS_JOB)}`
    : `Run the tests in the background.\nBG: sh -c ${q(HARNESS_JOB.replace('exit 1', `date +%s%3N > ${q(mark)}; exit 1`))}`
  const s = startClaude(undefined, {
    ns,
    home: claude.home,
    cwd: claude.project,
    env: { PROC_MANAGER_HOME: pmHome, PATH: `${path.dirname(RUN_BG)}:${process.env.PATH}` },
  })
  const kill = () => s.kill()
  killers.add(kill)
  // Claude Code's per-project task files and its messaging socket, both named after us.
  const claudeTmp = path.join(os.tmpdir(), `claude-${process.getuid()}`, claude.project.replace(/[^A-Za-z0-9]/g, '-'))
  const socket = path.join(os.tmpdir(), 'cc-socks', `${s.pid}.sock`)
  try {
    s.send(prompt)
    const init = await s.waitForEvent((e) => e.type === 'system' && e.subtype === 'init', { what: 'claude to name its session', timeout: 60_000 })
    const sid = init.session_id
    const ofSession = (r) => r.kind === 'main' && sessionOf(r) === sid
    let wake
    let endedAt
    let toldAt = null
    try {
      if (variant === 'ours') {
        let id = null
        await waitUntil(() => (id = readJobs(pmHome).find((j) => j.label === 'b')?.id ?? null), 30_000)
        const said = (r) => newText(r.body).split('\n').some((line) => line.includes(id) && /\bfailed\b/.test(line))
        wake = await stub.waitForRequest((r) => ofSession(r) && said(r), { what: `the wake for ${id}`, timeout: HARNESS_WAKE_MS })
        endedAt = JSON.parse(fs.readFileSync(path.join(pmHome, 'jobs', id, 'job.json'), 'utf8')).ended_at
        // The waiting hook appends the job to <session>.told as it tells, then exits 2: where the time goes.
        toldAt = fs.statSync(path.join(pmHome, 'sessions', `${sid}.told`)).mtimeMs
      } else {
        // Its answer names the task: "Command running in background with ID: <task>. …"
        const started = await stub.waitForRequest((r) => ofSession(r) && newToolResults(r.body).some((t) => /in background with ID: \w+/.test(t.text)),
          { what: 'the background task to start', timeout: 30_000 })
        const task = newToolResults(started.body).map((t) => /in background with ID: (\w+)/.exec(t.text)?.[1]).find(Boolean)
        wake = await stub.waitForRequest((r) => ofSession(r) && newText(r.body).includes(`<task-id>${task}</task-id>`),
          { what: `the notification of task ${task}`, timeout: HARNESS_WAKE_MS })
        endedAt = readMark(mark)
      }
    } catch (e) {
      log(`  harness ${variant}: ${e.message}`)
      return { lag: null }
    }
    check(`harness ${variant}: the job's end recorded before the wake`, endedAt > 0 && endedAt <= wake.at, `end ${endedAt}, request ${wake.at}`)
    // Was the session idle (its first turn over) when the job ended?
    const firstResult = s.events.find((e) => e.type === 'result')
    await s.waitForEvent(() => s.events.filter((e) => e.type === 'result').length >= 2, { what: "the wake's turn to end", timeout: 60_000 })
    const under = descendants(s.pid).map((pid) => ({ pid, ticks: startTicks(pid) }))
    const exit = await s.end({ timeout: 60_000 })
    // What it left behind (nothing expected): each by pid, if still the process we saw.
    for (const p of under) {
      if (p.ticks != null && startTicks(p.pid) === p.ticks) {
        check(`harness ${variant}: claude's processes end with it`, false, `pid ${p.pid} ${cmdline(p.pid)?.join(' ')}`)
        try {
          process.kill(p.pid, 'SIGKILL')
        } catch {}
      }
    }
    return {
      lag: wake.at - endedAt,
      told: toldAt == null ? null : { afterEnd: toldAt - endedAt, beforeWake: wake.at - toldAt },
      startMs: init._at - s.startedAt,
      exitMs: exit.ms,
      exitCode: exit.code,
      idle: firstResult != null && firstResult._at <= endedAt,
      text: newText(wake.body),
    }
  } finally {
    s.kill()
    killers.delete(kill)
    removeDir(pmHome)
    removeDir(claude.home)
    fs.rmSync(claudeTmp, { recursive: true, force: true })
    fs.rmSync(socket, { force: true })
  }
}

/**
 * What a hook costs the harness when it has nothing to say (no job of the
 * session runs, nothing ended untold): `run-bg hook claude-code
 * post-tool-use`, run after every Bash call, against spawning `true`.
 */
export function hookCost() {
  const home = tempDir('hook-cost')
  fs.writeFileSync(path.join(home, 'config.json'), JSON.stringify({ notify: { url: null } }))
  const env = { ...process.env, PROC_MANAGER_HOME: home }
  for (const name of ['RUN_BG_SESSION', 'CLAUDE_CODE_SESSION_ID', 'CODEX_THREAD_ID']) delete env[name]
  const input = JSON.stringify({ session_id: 'bench-quiet', cwd: home, hook_event_name: 'PostToolUse', tool_name: 'Bash', tool_input: { command: 'ls' }, tool_response: { stdout: '' } })
  const time = (file, args) => {
    const t0 = process.hrtime.bigint()
    const r = spawnSync(file, args, { env, input })
    const ms = Number(process.hrtime.bigint() - t0) / 1e6
    return r.status === 0 && r.stdout.length === 0 ? ms : null
  }
  const ours = []
  const base = []
  for (let i = 0; i < 30; i++) {
    ours.push(time(RUN_BG, ['hook', 'claude-code', 'post-tool-use']))
    base.push(time('true', []))
  }
  check('harness: a hook with nothing to say exits 0, silent, every time', ours.every((ms) => ms != null), `${ours.filter((ms) => ms == null).length} of 30 said something or failed`)
  return { ours: ours.filter((ms) => ms != null), base }
}

export async function benchHarness() {
  const cost = hookCost()
  const skip = claudeSkipReason()
  if (skip) {
    log(`harness: ${skip}; the wake rows skipped (the hook's own cost measured)`)
    return { hookCost: cost, skipped: true, texts: {} }
  }
  const variants = ['ours', 'builtin']
  log(`harness: Claude Code ${claudeVersion()}, job end → wake, ${PLAN.harnessReps} rounds (+${PLAN.harnessWarmup} warm-up) × ${variants.length} variants, a fresh session each`)
  const stub = await startStub({ reply: harnessModel })
  let ns = null
  const closeNs = () => ns?.close()
  killers.add(closeNs)
  const out = { version: claudeVersion(), hookCost: cost, texts: {}, misses: {}, idle: {}, toldAfterEnd: [], wakeAfterTold: [] }
  for (const v of variants) {
    out[v] = []
    out[`${v}Start`] = []
    out[`${v}Exit`] = []
    out.misses[v] = 0
    out.idle[v] = 0
  }
  try {
    ns = await startNetns(stub)
    for (let rep = -PLAN.harnessWarmup; rep < PLAN.harnessReps; rep++) {
      for (const v of rotate(variants, rep)) {
        const r = await harnessRound(v, stub, ns)
        if (r.text && !out.texts[v]) out.texts[v] = r.text
        if (rep < 0) continue
        if (r.lag == null) {
          out.misses[v]++
          continue
        }
        log(`  ${v}: woken ${r.lag} ms after the end${r.idle ? '' : ' (its first turn still running at the end)'}; claude exited ${r.exitMs} ms after stdin closed`)
        out[v].push(r.lag)
        out[`${v}Start`].push(r.startMs)
        out[`${v}Exit`].push(r.exitMs)
        if (r.idle) out.idle[v]++
        if (r.told) {
          out.toldAfterEnd.push(r.told.afterEnd)
          out.wakeAfterTold.push(r.told.beforeWake)
        }
      }
    }
  } finally {
    closeNs()
    killers.delete(closeNs)
    await stub.close()
  }
  for (const v of variants) check(`harness ${v}: every round woken within ${HARNESS_WAKE_MS / 1000} s`, out.misses[v] === 0, `${out.misses[v]} of ${PLAN.harnessReps} not`)
  const ours = out.texts.ours ?? ''
  check('harness: our wake names the outcome, the exit status and the first error', /\bfailed\b/.test(ours) && /\bexit 1\b/.test(ours) && ours.includes(HARNESS_FIRST_ERROR), ours.slice(-300))
  out.builtinHasFirstError = (out.texts.builtin ?? '').includes(HARNESS_FIRST_ERROR)
  return out
}

/** The wake each variant's request brought (its new turn, verbatim), once. */
export function printHarnessTexts(harness) {
  for (const [v, name] of [['ours', 'ours (run-bg hooks)'], ['builtin', "built-in (Bash run_in_background)"]]) {
    const text = harness.texts[v]
    console.log(`\nharness: the wake ${name} brought:`)
    console.log(text == null ? '  (none arrived)' : text.split('\n').map((l) => `  | ${l}`).join('\n'))
  }
  const carries = (t) => [/\bfailed\b/.test(t ?? '') && 'failed', /exit (code )?1\b/.test(t ?? '') && 'exit 1', (t ?? '').includes(HARNESS_FIRST_ERROR) && 'the first error'].filter(Boolean).join(', ') || 'none of them'
  console.log(`harness: outcome, exit status, "${HARNESS_FIRST_ERROR}": ours carries ${carries(harness.texts.ours)}; the built-in ${carries(harness.texts.builtin)}`)
}
