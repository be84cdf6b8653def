// Hostile and mistaken input: JS options of the wrong name or type, labels
// with escape codes, absurd durations are refused with a message that names
// the bad value and says what is accepted; user text (commands, labels,
// errors, process command lines) reaches a terminal with its control
// characters written out; tail lines lose every escape sequence; a lost job
// reads as what is known of it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { pm, root, makeHome, runBg, waitFor, waitForQuiet, isAlive, readRegistry, connectMcp } from './helpers.mjs'

// A window-title change, a bell and a screen clear.
const PWNED = '\x1b]0;pwned\x07\x1b[2J'
const PWNED_SHOWN = '\\x1b]0;pwned\\x07\\x1b[2J'
const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/

function assertPrintable(text, what) {
  assert.equal(typeof text, 'string', what)
  assert.ok(!RAW_CONTROL.test(text), `${what}: raw control character in ${JSON.stringify(text)}`)
}

function useHome(t, config) {
  const fixture = makeHome(t, config)
  process.env.PROC_MANAGER_HOME = fixture.home
  return fixture
}

/** `fn` throws an Error matching `re`, whose message is safe to print. */
function throwsWith(fn, re) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, String(e))
    assert.match(e.message, re)
    assertPrintable(e.message, 'error message')
    return true
  })
}

/** `fn` returns a promise (never throws) that rejects with an Error matching `re`. */
async function rejectsWith(fn, re) {
  let promise
  assert.doesNotThrow(() => { promise = fn() }, 'a promise-returning function rejects instead of throwing')
  assert.ok(promise instanceof Promise, 'returns a promise')
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, String(e))
    assert.match(e.message, re)
    assertPrintable(e.message, 'rejection message')
    return true
  })
}

test('JS options of the wrong type are refused, naming the value and what is accepted', async (t) => {
  const { home } = useHome(t)
  const id = 'no-such-job-1'
  throwsWith(() => pm.runBackground('true', { env: 5 }), /bad env: 5; give an object of strings/)
  throwsWith(() => pm.runBackground('true', { env: ['A=1'] }), /bad env: an array; give an object of strings/)
  throwsWith(() => pm.runBackground('true', { env: { A: 5 } }), /bad env\.A: 5; give a string/)
  throwsWith(() => pm.runBackground('true', { args: 'x' }), /bad args: "x"; give an array of strings/)
  throwsWith(() => pm.runBackground('true', { args: ['a', 1] }), /bad args\[1\]: 1; give a string/)
  throwsWith(() => pm.runBackground('true', { notify: 'no' }), /bad notify: "no"; give true or false/)
  throwsWith(() => pm.runBackground('true', { timeoutMs: '5s' }), /bad timeoutMs: "5s"; give a number of milliseconds/)
  throwsWith(() => pm.runBackground('true', { timeoutMs: NaN }), /bad timeoutMs: NaN; give a number of milliseconds/)
  throwsWith(() => pm.runBackground('true', { timeoutMs: 1e300 }), /bad timeoutMs: 1e\+?300; give a number of milliseconds >= 1, at most 31536000000 \(365 days\)/)
  throwsWith(() => pm.runBackground('true', { label: 7 }), /bad label: 7; give a string/)
  throwsWith(() => pm.runBackground('true', { context: () => 1 }), /bad context: a function; give JSON data/)
  throwsWith(() => pm.runBackground('true', { restart: Symbol('x') }), /bad restart: a symbol; give one of 'on-failure', 'always'/)
  throwsWith(() => pm.runBackground('true', 'fast'), /bad options for runBackground: "fast"; give an object with any of: args, label/)
  throwsWith(() => pm.runBackground(5), /bad command: 5; give a string/)
  throwsWith(() => pm.checkJob(id, { lines: 1.5 }), /bad lines: 1\.5; give a whole number of lines >= 0/)
  throwsWith(() => pm.checkJob(id, { lines: '20' }), /bad lines: "20"; give a whole number of lines >= 0/)
  throwsWith(() => pm.checkJob(id, { errors: 1 }), /bad errors: 1; give true or false/)
  throwsWith(() => pm.checkJob(id, { text: "yes" }), /bad text: "yes"; give true or false/)
  throwsWith(() => pm.checkJob(5), /bad jobId: 5; give a string/)
  throwsWith(() => pm.checkJobText(id, { lines: -2 }), /bad lines: -2; give a whole number of lines >= 0/)
  throwsWith(() => pm.listJobs('x'), /bad options for listJobs: "x"; give an object with any of: status, owner, session, all/)
  throwsWith(() => pm.listJobs({ status: 5 }), /bad status: 5; give a string/)
  throwsWith(() => pm.listJobs({ all: 'yes' }), /bad all: "yes"; give true or false/)
  throwsWith(() => pm.listJobsText(['running']), /bad options for listJobsText: an array; give an object with any of: status, owner, session, all/)
  throwsWith(() => pm.summary('agent-1'), /bad options for summary: "agent-1"; give an object with any of: owner/)
  throwsWith(() => pm.pruneJobs('1h'), /bad olderThanMs: "1h"; give a number of milliseconds/)
  throwsWith(() => new pm.ResourceTracker({ memoryThresholdMb: 'x' }), /bad memoryThresholdMb: "x"; give a number of MiB >= 0/)
  throwsWith(() => new pm.ResourceTracker({ mcpPatterns: 'chrome' }), /bad mcpPatterns: "chrome"; give an array of strings/)
  // Promise-returning functions reject, as async functions do.
  await rejectsWith(() => pm.waitJob(id, 5), /bad options for waitJob: 5; give an object with any of: timeoutMs/)
  await rejectsWith(() => pm.waitJob(5), /bad jobId: 5; give a string/)
  await rejectsWith(() => pm.killJob(id, { force: 'yes' }), /bad force: "yes"; give true or false/)
  await rejectsWith(() => pm.killJob(null), /bad jobId: null; give a string/)
  await rejectsWith(() => pm.killAll('agent-1'), /bad options for killAll: "agent-1"; give an object with any of: owner, session, graceMs, force/)
  await rejectsWith(() => pm.cleanupOrphans({ graceMs: -1 }), /bad graceMs: -1; give a number of milliseconds/)
  await rejectsWith(() => pm.runYield('true'), /yieldMs is required: how long to wait for the job to end/)
  await rejectsWith(() => pm.runYield('true', { yieldMs: '10s' }), /bad yieldMs: "10s"; give a number of milliseconds/)
  await rejectsWith(() => pm.runYield('true', { yieldMs: 10, env: 5 }), /bad env: 5; give an object of strings/)
  // Labels and owners are names shown on one line: no control characters.
  throwsWith(() => pm.runBackground('true', { label: `x${PWNED}` }),
    /bad label "x\\x1b\]0;pwned\\x07\\x1b\[2J": it contains control characters; give 1 to 200 printable characters on one line/)
  throwsWith(() => pm.runBackground('true', { owner: 'a\tb' }), /bad owner "a\\x09b": it contains control characters; give 1 to 200 printable characters/)
  // Not given is not wrong: undefined and null mean the default.
  const job = pm.runBackground('true', { label: undefined, timeoutMs: null, env: undefined })
  const result = await pm.waitJob(job.jobId, { timeoutMs: undefined })
  assert.equal(result.status, 'success')
  assert.deepEqual(readRegistry(home).map((j) => j.id), [job.jobId], 'nothing else was started')
})

test('misspelt JS option names are refused with the list of accepted ones, by every function', async (t) => {
  const { home } = useHome(t)
  const id = 'no-such-job-1'
  // These, in this order; an option added since comes after them (each is
  // checked to be accepted by options-parity.test.mjs).
  const runNames = 'args, label, cwd, env, timeoutMs, owner, context, notify, onExit, readyLog, readyPort, readyUrl, readyTimeoutMs, notifyOn, restart, maxRestarts, restartDelayMs, stdin, wake, after, afterAny, queue, priority, tie, tiePid(?:, \\w+)*'
  throwsWith(() => pm.runBackground('true', { lable: 'x' }), new RegExp(`unknown option \`lable\` for runBackground; accepted: ${runNames}$`))
  throwsWith(() => pm.runBackground('true', { timeout: 5000 }), /unknown option `timeout` for runBackground; accepted: args, label/)
  throwsWith(() => pm.checkJob(id, { line: 5 }), /unknown option `line` for checkJob; accepted: lines, grep, errors, text$/)
  throwsWith(() => pm.checkJobText(id, { error: true }), /unknown option `error` for checkJobText; accepted: lines, grep, errors$/)
  throwsWith(() => pm.listJobs({ stat: 'running' }), /unknown option `stat` for listJobs; accepted: status, owner, session, all$/)
  throwsWith(() => pm.listJobsText({ owners: 'a' }), /unknown option `owners` for listJobsText; accepted: status, owner, session, all$/)
  throwsWith(() => pm.summary({ ownr: 'a' }), /unknown option `ownr` for summary; accepted: owner, session$/)
  throwsWith(() => new pm.ResourceTracker({ threshold: 5 }), /unknown option `threshold` for ResourceTracker; accepted: enabled, memoryThresholdMb, mcpPatterns$/)
  await rejectsWith(() => pm.runYield('true', { yieldMs: 10, lable: 'x' }), new RegExp(`unknown option \`lable\` for runYield; accepted: yieldMs, ${runNames}, signal$`))
  await rejectsWith(() => pm.killJob(id, { grace: 5 }), /unknown option `grace` for killJob; accepted: graceMs, force$/)
  await rejectsWith(() => pm.killAll({ graceMS: 5 }), /unknown option `graceMS` for killAll; accepted: owner, session, graceMs, force, olderThanMs$/)
  await rejectsWith(() => pm.waitJob(id, { timeout: 5 }), /unknown option `timeout` for waitJob; accepted: timeoutMs, signal, ready$/)
  throwsWith(() => pm.followLog(id, { line: 5 }), /unknown option `line` for followLog; accepted: lines, signal$/)
  await rejectsWith(() => pm.cleanupOrphans({ mod: 'kill' }), /unknown option `mod` for cleanupOrphans; accepted: mode, owner, force, graceMs$/)
  // A name with control characters is shown written out.
  throwsWith(() => pm.listJobs({ [PWNED]: 1 }), /unknown option `\\x1b\]0;pwned\\x07\\x1b\[2J` for listJobs/)
  assert.deepEqual(readRegistry(home), [], 'nothing was started')
})

test('CLI: a label or owner with control characters and a duration beyond a year are refused', (t) => {
  const { home } = makeHome(t)
  const cases = [
    [['--label', `x${PWNED}`, '--', 'true'], /bad label "x\\x1b\]0;pwned\\x07\\x1b\[2J": it contains control characters; give 1 to 200 printable characters on one line/],
    [['--owner', 'a\x07', '--', 'true'], /bad owner "a\\x07": it contains control characters/],
    [['--timeout', '99999999999h', '--', 'true'], /--timeout: bad duration `99999999999h`: longer than a year; give at most 365d/],
    [['--yield', '400d', '--', 'true'], /--yield: bad duration `400d`: longer than a year/],
  ]
  for (const [args, message] of cases) {
    const r = runBg(home, args)
    assert.equal(r.code, 2, `${JSON.stringify(args)}: ${r.stderr}`)
    assert.match(r.stderr, message, JSON.stringify(args))
    assertPrintable(r.stderr, 'stderr')
  }
  assert.deepEqual(readRegistry(home), [], 'nothing was started')
})

test('CLI: a negative duration or count, a zero timeout, a port out of range and kill without ids say what is accepted', (t) => {
  const { home } = makeHome(t)
  const cases = [
    // clap's own message was "unexpected argument '-5'", with a tip that made it the program.
    [['--timeout', '-5s', '--', 'true'], /--timeout takes no negative duration: give one such as 500ms, 90s, 10m, 2h \(`-5s` was given\)/],
    [['kill', '--all', '--grace', '-1m'], /--grace takes no negative duration/],
    [['check', 'build-3f2a1c', '-n', '-1'], /`-1` is not a number of lines: give a whole number, 0 or more/],
    // A bare 0 is zero in any unit: refused as zero, not for a missing unit.
    [['--timeout', '0', '--', 'true'], /bad timeout: it must be greater than zero/],
    [['--ready-port', '0', '--', 'true'], /0 is not in 1\.\.=65535/],
    [['--ready-port', '99999', '--', 'true'], /99999 is not in 1\.\.=65535/],
    [['kill'], /<ID\|--all>/],
    // The refused one, not the first value that looks alike: --priority takes -5.
    [['--priority', '-5', '--timeout', '-5s', '--', 'true'], /--timeout takes no negative duration/],
    [['--ready-port', '-1', '--', 'true'], /--ready-port takes no negative port: give one from 1 to 65535/],
    // clap let `requires = "all"` pass beside an id: the job was killed whoever owned it.
    [['kill', 'build-3f2a1c', '--owner', 'bob'], /--owner selects among all jobs: give it with --all/],
    [['kill', 'build-3f2a1c', '--session', 'abc'], /--session selects among all jobs/],
  ]
  for (const [args, message] of cases) {
    const r = runBg(home, args)
    assert.equal(r.code, 2, `${JSON.stringify(args)}: ${r.stderr}`)
    assert.match(r.stderr, message, JSON.stringify(args))
    assert.doesNotMatch(r.stderr, /tip: to pass/, JSON.stringify(args))
  }
  // A value that merely starts with a dash is still clap's to refuse, as before.
  const label = runBg(home, ['--label', '-5', '--', 'true'])
  assert.equal(label.code, 2, label.stderr)
  assert.doesNotMatch(label.stderr, /takes no negative/)
  assert.deepEqual(readRegistry(home), [], 'nothing was started')
})

test('list says which jobs it looked for when none match', async (t) => {
  const { home } = makeHome(t)
  const id = runBg(home, ['--label', 'quick', '--', 'true']).stdout.match(/started (\S+)/)[1]
  await waitFor(() => /success/.test(runBg(home, ['check', id]).stdout), { what: 'the job ended' })
  const said = (args) => runBg(home, ['list', ...args]).stdout.trim()
  // It had said "no jobs running or ended within the hour", with one that had.
  assert.equal(said(['--status', 'running']), 'no running jobs')
  assert.equal(said(['--status', 'failed', '--owner', 'bob']), 'no failed jobs of owner bob')
  assert.equal(said(['--owner', 'bob']), 'no jobs of owner bob running or ended within the hour (--all for every job)')
  assert.match(said([]), new RegExp(id), 'the job itself is listed')
  const js = (options) => {
    process.env.PROC_MANAGER_HOME = home
    return pm.listJobsText(options)
  }
  assert.equal(js({ status: 'running' }), 'no running jobs')
  assert.equal(js({ owner: 'bob' }), 'no jobs of owner bob running or ended within the hour (all: true for every job)')
})

test('ack, list, check, wait, summary and errors print a command with escape codes written out; --json stays faithful', async (t) => {
  const { home } = useHome(t)
  const command = ['sh', '-c', `echo started; sleep 30 # ${PWNED}`]
  const ack = runBg(home, ['--', ...command])
  assert.equal(ack.code, 0, ack.stderr)
  assertPrintable(ack.stdout, 'ack')
  assert.ok(ack.stdout.includes(PWNED_SHOWN), ack.stdout)
  const jobId = ack.stdout.match(/^started (\S+) /)[1]
  await waitFor(() => pm.checkJob(jobId).tail.includes('started'), { what: 'output' })

  for (const args of [['list'], ['check', jobId], ['summary']]) {
    const r = runBg(home, args)
    assert.equal(r.code, 0, r.stderr)
    assertPrintable(r.stdout, args[0])
    assert.ok(r.stdout.includes(PWNED_SHOWN), `${args[0]}: ${r.stdout}`)
  }
  for (const [name, text] of [['checkJobText', pm.checkJobText(jobId)], ['listJobsText', pm.listJobsText()], ['summary', pm.summary()]]) {
    assertPrintable(text, name)
    assert.ok(text.includes(PWNED_SHOWN), `${name}: ${text}`)
  }
  // Data stays the data: JSON escapes it, JS gets it as it is.
  const json = runBg(home, ['check', jobId, '--json'])
  assertPrintable(json.stdout, 'check --json')
  assert.equal(JSON.parse(json.stdout).command, `sh -c 'echo started; sleep 30 # ${PWNED}'`)
  assert.equal(pm.checkJob(jobId).command, `sh -c 'echo started; sleep 30 # ${PWNED}'`)

  const killed = runBg(home, ['kill', jobId, '--grace', '1s'])
  assert.equal(killed.code, 0, killed.stderr)
  assertPrintable(killed.stdout, 'kill')
  const waited = runBg(home, ['wait', jobId])
  assertPrintable(waited.stdout, 'wait')
  assert.ok(waited.stdout.includes(PWNED_SHOWN), waited.stdout)

  // A record written before labels were checked (or edited by hand) holds
  // escape codes in its label, owner and error: printing it stays safe.
  await waitForQuiet(home)
  const forge = (file, edit) => {
    const data = JSON.parse(fs.readFileSync(file, 'utf8'))
    const jobs = Array.isArray(data.jobs) ? data.jobs : [data]
    for (const job of jobs.filter((j) => j.id === jobId)) edit(job)
    fs.writeFileSync(file, JSON.stringify(data))
  }
  const edit = (job) => Object.assign(job, { label: `l${PWNED}`, owner: `o${PWNED}`, error: `e${PWNED}`, seen_at: undefined })
  forge(path.join(home, 'jobs.json'), edit)
  const own = path.join(home, 'jobs', jobId, 'job.json')
  if (fs.existsSync(own)) forge(own, edit)
  for (const args of [['list', '--all'], ['check', jobId], ['wait', jobId], ['summary'], ['reconcile']]) {
    const r = runBg(home, args)
    assertPrintable(r.stdout + r.stderr, args.join(' '))
  }
  assertPrintable(pm.checkJobText(jobId), 'checkJobText of a forged record')
  assert.match(pm.checkJobText(jobId), /error: e\\x1b\]0;pwned/)

  // Error text quoting user input (a path, an id) is written out too.
  const cwd = `/no/such/${PWNED}`
  const bad = runBg(home, ['--cwd', cwd, '--', 'true'])
  assert.equal(bad.code, 1)
  assertPrintable(bad.stderr, 'start error')
  assert.match(bad.stderr, /working directory `\/no\/such\/\\x1b\]0;pwned\\x07\\x1b\[2J` does not exist/)
  const failedId = bad.stderr.match(/recorded as failed job (\S+)\)/)[1]
  const failedCheck = runBg(home, ['check', failedId])
  assertPrintable(failedCheck.stdout, 'check of the failed start')
  assert.match(failedCheck.stdout, /failed \(could not start\)/)
  throwsWith(() => pm.runBackground('true', { cwd }), /working directory `\/no\/such\/\\x1b\]0;pwned\\x07\\x1b\[2J` does not exist/)
  const badId = runBg(home, ['check', `x${PWNED}`])
  assert.equal(badId.code, 2)
  assertPrintable(badId.stderr, 'invalid id error')
  const badFlag = runBg(home, ['list', `--${PWNED}`])
  assert.equal(badFlag.code, 2)
  assertPrintable(badFlag.stderr, 'unknown flag error')
})

test('check strips DCS, SOS, PM, APC and ESC # 8 with their payloads from tail lines', async (t) => {
  useHome(t)
  const raw = [
    'dcs:a\x1bP1$r0m\x1b\\b',
    'sos:a\x1bXsos payload\x1b\\b',
    'pm:a\x1b^pm payload\x1b\\b',
    'apc:a\x1b_Gf=100;AAAA\x1b\\b',
    'decaln:a\x1b#8b',
    'title:a\x1b]0;pwned\x07b\x1b[2J',
  ]
  const job = pm.runBackground('printf', { args: ['%s\\n', ...raw] })
  await pm.waitJob(job.jobId, { timeoutMs: 20_000 })
  const check = pm.checkJob(job.jobId)
  assert.deepEqual(check.tail, ['dcs:ab', 'sos:ab', 'pm:ab', 'apc:ab', 'decaln:ab', 'title:ab'])
  const text = runBg(process.env.PROC_MANAGER_HOME, ['check', job.jobId]).stdout
  assertPrintable(text, 'check')
  assert.ok(text.endsWith('title:ab\n'), text)
})

test('a lost job that ran says its supervisor is gone with no exit status, never "could not start"', async (t) => {
  const { home } = useHome(t)
  const job = pm.runBackground('sleep', { args: ['30'] })
  const entry = readRegistry(home).find((j) => j.id === job.jobId)
  process.kill(entry.supervisor.pid, 'SIGKILL')
  process.kill(job.pid, 'SIGKILL')
  await waitFor(() => !isAlive(job.pid) && !isAlive(entry.supervisor.pid), { what: 'supervisor and job gone' })
  assert.deepEqual(pm.reconcile().lost.map((j) => j.jobId), [job.jobId])
  const summary = pm.summary() // before a check marks the job seen
  const lost = pm.checkJob(job.jobId)
  assert.equal(lost.status, 'lost')
  assert.ok(lost.error, 'the record says what happened')
  const text = pm.checkJobText(job.jobId)
  assert.match(text, new RegExp(`^${job.jobId}: lost: its supervisor \\(pid ${entry.supervisor.pid}\\) is gone and no exit status was recorded, after \\d`))
  for (const shown of [text, summary, runBg(home, ['list']).stdout, runBg(home, ['reconcile']).stdout]) {
    assert.ok(!shown.includes('could not start'), shown)
  }
  assert.match(summary, new RegExp(`finished: ${job.jobId} \`sleep 30\` lost \\(supervisor pid ${entry.supervisor.pid} gone, no exit status recorded\\)`))

  // A program that never started still says so.
  assert.throws(() => pm.runBackground('no-such-program-xyz', { args: [] }), /command not found/)
  const failed = readRegistry(home).find((j) => j.id.startsWith('no-such-program-xyz'))
  assert.match(pm.checkJobText(failed.id), /: failed \(could not start\) after/)
})

test('the MCP server shows lingering process command lines and errors with escape codes written out', async (t) => {
  const { home } = useHome(t)
  // The main shell exits at once; a shell whose argv carries the escape codes lingers.
  const job = pm.runBackground('sh', { args: ['-c', 'sh -c "sleep 300; :" "$0" & echo ready', PWNED] })
  await waitFor(() => {
    const c = pm.checkJob(job.jobId)
    return c.status !== 'running' && c.lingering.some((p) => p.command.includes(PWNED))
  }, { what: 'the lingering shell' })
  const checkText = pm.checkJobText(job.jobId)
  assertPrintable(checkText, 'checkJobText with lingering')
  assert.match(checkText, /still running: .*\\x1b\]0;pwned/)
  const orphans = runBg(home, ['orphans'])
  assertPrintable(orphans.stdout, 'orphans')
  assert.ok(orphans.stdout.includes(PWNED_SHOWN), orphans.stdout)

  const client = await connectMcp(t, home)
  const texts = []
  for (const [name, args] of [
    ['cleanup_orphans', { mode: 'list' }],
    ['check_job', { jobId: job.jobId }],
    ['list_jobs', {}],
    ['run_background', { command: 'true', cwd: `/no/such/${PWNED}` }],
    ['run_background', { command: 'true', label: `x${PWNED}` }],
  ]) {
    const answer = await client.callTool({ name, arguments: args })
    const text = answer.content.map((c) => c.text).join('\n')
    assertPrintable(text, name)
    texts.push(text)
  }
  assert.ok(texts[0].includes(PWNED_SHOWN), texts[0])
  assert.match(texts[3], /does not exist/)
  assert.match(texts[4], /bad label/)
  const killed = await pm.cleanupOrphans({ mode: 'kill', force: true })
  assert.equal(killed.failed.length, 0, JSON.stringify(killed.failed))
})
