#!/usr/bin/env node
// proc-manager's Model Context Protocol server over stdio. Each tool calls the
// same Rust core as the CLI and the JS API, and answers with the short text
// the CLI prints, said in tool calls instead of CLI commands, at most about
// CAP characters, with the job's id, status and exit code as structured
// content beside it; a failure comes back as a tool error, never a crash.
import { createRequire } from 'node:module'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { z } from 'zod'

const pm = createRequire(import.meta.url)('proc-manager')

/** Longest answer text, in characters: a 100,000-line check is 1.8 MB otherwise. */
const CAP = 16_000
/** With a progressToken, a client that resets its timeout on progress can wait this long. */
const WAIT_WITH_PROGRESS_MS = 3_600_000
/**
 * The longest a call waits without progress notifications. The TypeScript
 * SDK's client gives up on a request after 60 s by default (and then cancels
 * it); 45 s leaves room for the answer to be built and sent on a busy host.
 * A client whose own timeout is shorter (or longer) sets
 * PROC_MANAGER_MCP_WAIT_MS to fit it.
 */
const WAIT_MS = waitBound(process.env.PROC_MANAGER_MCP_WAIT_MS)

function waitBound(value) {
  if (value === undefined || value === '') return 45_000
  if (/^\d+$/.test(value) && Number(value) >= 1 && Number(value) <= WAIT_WITH_PROGRESS_MS) return Number(value)
  process.stderr.write(`proc-manager-mcp: PROC_MANAGER_MCP_WAIT_MS=${JSON.stringify(value)} is not a wait: give whole milliseconds from 1 to ${WAIT_WITH_PROGRESS_MS} (unset: 45000)\n`)
  process.exit(2)
}
/** Well under any client timeout a progress notification is meant to reset. */
const PROGRESS_EVERY_MS = 2_000

const seconds = (ms) => `${Math.round(ms / 100) / 10}s`
const count = (n) => n.toLocaleString('en-US')

/**
 * User text (a process's command line, a failure reason) that this server puts
 * into an answer itself, written out as the core writes it in its own text
 * (`\x1b`): a control character must never reach the client's terminal.
 */
const visible = (value) => String(value).replace(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/g, (c) => {
  const code = c.charCodeAt(0)
  return code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`
})

/**
 * The core's texts tell a shell user what to type next (`run-bg kill <id>`,
 * `--grep`); here the model has tools instead. Every text of every answer
 * passes through this one table (crates/core: model/error.rs, present/format.rs,
 * verbs/ops.rs summary, verbs/spawn.rs and ops.rs usage errors, supervise/notify.rs).
 */
const CLI_TO_MCP = [
  // The JS API's errors name its calls (`killJob('<id>')`) where the core's name the CLI.
  [/call `listJobs\(\{ all: true \}\)` to see known jobs/g, 'call list_jobs with all: true to see known jobs'],
  [/`listJobs\(\{ all: true \}\)` shows them/g, 'list_jobs with all: true shows them'],
  [/`listJobs\(\{ all: true \}\)`/g, 'list_jobs with all: true'],
  [/`killJob\('(\S+?)'\)`/g, 'call kill_job with jobId $1'],
  [/`checkJob\('(\S+?)'\)`/g, 'call check_job with jobId $1'],
  [/`waitJob\('(\S+?)'\)`/g, 'call wait_job with jobId $1'],
  [/`(pause|resume|rerun)Job\('(\S+?)'\)`/g, 'call control_job with jobId $2 and action $1'],
  [/run `run-bg list --all` to see known jobs/g, 'call list_jobs with all: true to see known jobs'],
  [/`run-bg kill (\S+)` removes them/g, 'call kill_job with jobId $1 to remove them'],
  [/`?run-bg kill (\S+?)`?(?=[\s;,)]|$)/g, 'call kill_job with jobId $1'],
  [/`?run-bg check (\S+?)`?(?=[\s;,)]|$)/g, 'call check_job with jobId $1'],
  [/\(run-bg list\)/g, '(call list_jobs)'],
  [/`run-bg list --all` shows them/g, 'list_jobs with all: true shows them'],
  [/probe the plain port with readyPort instead; give an http:\/\/ URL/g, 'give ready the plain port number instead, or an http:// URL'],
  [/probe the plain port with readyPort instead/g, 'give ready the plain port number instead'],
  [/\bbad ready(?:Url|Port|Log)\b/g, 'bad ready'],
  [/put the program and its arguments after `--`, e\.g\. run-bg -- npm install/g, 'give command (a shell line, or a program with args)'],
  [/e\.g\. --env NODE_ENV=test/g, 'e.g. env: {"NODE_ENV": "test"}'],
  [/--(grep|errors|env)\b/g, '$1'],
]
const speakMcp = (text) => CLI_TO_MCP.reduce((t, [pattern, said]) => t.replace(pattern, said), text)

/**
 * Keeps `head` and as many of `lines` as fit in CAP, the newest (last) ones
 * when `keep` is 'last', and says what was left out with `more(n)`.
 */
function capLines(head, lines, keep, more, reserve = 0) {
  let room = CAP - head.reduce((n, l) => n + l.length + 1, 0) - 200 - reserve
  const shown = []
  const order = keep === 'last' ? [...lines].reverse() : lines
  for (const line of order) {
    if (line.length + 1 > room) break
    room -= line.length + 1
    shown.push(line)
  }
  if (keep === 'last') shown.reverse()
  const left = lines.length - shown.length
  if (left === 0) return [...head, ...lines].join('\n')
  const note = more(left)
  return (keep === 'last' ? [...head, note, ...shown] : [...head, ...shown, note]).join('\n')
}

/** Any text over CAP, cut at a line with a note (a list of every job, a long summary). */
const capText = (text, what) => {
  if (text.length <= CAP) return text
  const lines = text.split('\n')
  return capLines([], lines, 'first', (n) => `[${count(n)} more ${what} not shown: answers stop at ${count(CAP)} characters]`)
}

/**
 * Runs a tool body: a string or `{ text, structured }` becomes the answer; any
 * thrown error becomes an `isError` result with its message.
 */
const tool = (body) => async (args, extra) => {
  try {
    const out = await body(args, extra)
    const { text, structured } = typeof out === 'string' ? { text: out } : out
    const result = { content: [{ type: 'text', text: speakMcp(text) }] }
    if (structured) result.structuredContent = structured
    return result
  } catch (error) {
    return { isError: true, content: [{ type: 'text', text: speakMcp(visible(error?.message ?? error)) }] }
  }
}

/** Resolves when the request is cancelled (`notifications/cancelled`, or the connection ends). */
const aborted = (signal) => new Promise((resolve) => {
  if (signal.aborted) resolve()
  else signal.addEventListener('abort', () => resolve(), { once: true })
})

class Cancelled extends Error {}

/**
 * Awaits `work`, or stops at once when the request is cancelled: the answer
 * never waits for a native thread that cannot be interrupted.
 */
async function unlessCancelled(work, signal) {
  const result = await Promise.race([work, aborted(signal).then(() => Cancelled)])
  if (result === Cancelled) throw new Cancelled('cancelled')
  return result
}

/** `notifications/progress` every PROGRESS_EVERY_MS with the time waited and the job's last line. */
function progressTicker(id, extra, started) {
  const progressToken = extra._meta?.progressToken
  if (progressToken === undefined) return () => {}
  const timer = setInterval(() => {
    const elapsed = Date.now() - started
    let message = `waited ${seconds(elapsed)}`
    try {
      const last = pm.checkJob(id, { lines: 1 }).tail.at(-1)
      if (last !== undefined) message += `; last line: ${last.length > 200 ? `${last.slice(0, 200)}…` : last}`
    } catch {}
    extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: elapsed, message } })
      .catch(() => {})
  }, PROGRESS_EVERY_MS)
  return () => clearInterval(timer)
}

/** What every answer that shows a check ends with: where to read on from. */
const cursorNote = (cursor) => `[cursor ${cursor}: read_log with since ${cursor} gives only what comes next]`

/** The job runs, or processes it left may still write (and its log rotate). */
const stillWriting = (check) => check.status === 'running' || check.lingering.length > 0

/**
 * How to page through a whole log. Line numbers count from the oldest line
 * kept, so while the job runs each rotation that drops a file renumbers them:
 * only cursors page it without skipping or repeating lines.
 */
const pageHint = (check) => stillWriting(check)
  ? 'while the job runs read_log with since 0, then since each answer\'s cursor, pages through the whole log'
  : 'read_log with fromLine pages through the whole log'

/**
 * `check_job`'s text, its log lines cut to fit CAP (the newest kept), and its
 * structured part: all from one check, so the text, the status and the
 * cursor (where the lines shown end) describe the same moment.
 */
function checkAnswer(id, options = {}) {
  const check = pm.checkJob(id, { ...options, text: true })
  const { text, cursor } = check
  const structured = { ...jobFields(check), cursor }
  // The text says why (its `[no cursor: …]` line): no cursor is offered.
  const note = check.logProblem ? '[read_log with fromLine reads this log by line number]' : cursorNote(cursor)
  if (text.length + note.length < CAP) return { text: `${text}\n${note}`, structured }
  // The text ends with the tail lines, after the header and what needs attention.
  const tail = check.tail
  const all = text.split('\n')
  const head = text.endsWith(tail.join('\n')) ? all.slice(0, all.length - tail.length) : all.slice(0, 1)
  return {
    text: capLines(head, tail, 'last', (n) =>
      `[${count(n)} earlier lines not shown: answers stop at ${count(CAP)} characters; ${pageHint(check)}; grep narrows]`,
    note.length + 1) + `\n${note}`,
    structured,
  }
}

const jobFields = (job) => ({
  jobId: job.jobId,
  status: job.status,
  ...(job.exitCode == null ? {} : { exitCode: job.exitCode }),
})

/** run_background's `ready`: one string for runBackground's readyPort, readyUrl or readyLog. */
function readiness(ready) {
  if (/^\d+$/.test(ready)) return { readyPort: Number(ready) }
  // `localhost:3000`, `127.0.0.1:3000`, `:3000`, as a server's banner says it: the port.
  const hostPort = /^(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\])?:(\d+)$/.exec(ready)
  if (hostPort) return { readyPort: Number(hostPort[1]) }
  if (/^https?:\/\//.test(ready)) return { readyUrl: ready }
  return { readyLog: ready }
}

/** What a start with `ready` waits for, in words. */
function awaited(ready) {
  const { readyPort, readyUrl, readyLog } = readiness(ready)
  if (readyPort !== undefined) return `port ${readyPort} to listen`
  if (readyUrl !== undefined) return `${readyUrl} to answer`
  return `a log line matching \`${readyLog}\``
}

const jobId = z.string().describe('e.g. npm-test-3f2a1c')
const whole = (min) => z.number().int().min(min)
const readOnly = { readOnlyHint: true }

/**
 * The results' JSON Schemas, derived from the core's result types
 * (pm.resultSchemas(), crates/core/src/present/schema.rs), by their
 * index.d.ts names: every output schema below is built from them.
 */
const RESULTS = pm.resultSchemas()

/**
 * The JSON Schema of a result's field: `path` is `cursor`, or
 * `killed[].pid` for a field of an array's items.
 */
function resultField(result, path) {
  let schema = RESULTS[result]
  for (const step of path.split('.')) {
    const [name, ...items] = step.split('[]')
    schema = schema?.properties?.[name]
    for (let i = 0; i < items.length && schema; i++) schema = schema.items
    if (!schema) throw new Error(`proc-manager-mcp: the core's ${result} has no ${path}`)
  }
  return schema
}

/**
 * zod for a result's JSON Schema, trimmed to what a client checks: types,
 * items, properties and which are required; the docs, formats and bounds
 * stay in the core's schema (every character here is in tools/list).
 */
function outZod(schema) {
  switch (schema.type) {
    case 'string': return z.string()
    case 'boolean': return z.boolean()
    case 'integer': return z.number().int()
    case 'number': return z.number()
    case 'array': return z.array(outZod(schema.items))
    case 'object':
      return z.object(Object.fromEntries(Object.entries(schema.properties).map(([name, field]) =>
        [name, schema.required?.includes(name) ? outZod(field) : outZod(field).optional()])))
  }
  throw new Error(`proc-manager-mcp: no zod form for the result schema ${JSON.stringify(schema)}`)
}

/**
 * The fields `names` of a result, as its schema says them: required where
 * the core always writes them, unless `{ optional: true }` (a tool whose
 * answer is sometimes another result).
 */
function fieldsOf(result, names, { optional = false } = {}) {
  return Object.fromEntries(names.map((name) => {
    const zod = outZod(resultField(result, name))
    return [name, optional || !RESULTS[result].required?.includes(name) ? zod.optional() : zod]
  }))
}

/** An array of one field, of the result (`jobId`: of each KillResult) or of its items (`orphanedJobs[].jobId`): ids listed. */
const listOf = (result, path) => z.array(outZod(resultField(result, path)))

/** The count of a result's array field (its `lines`), a whole number that the schema's `path` must be. */
function countOf(result, path) {
  if (resultField(result, path).type !== 'array') throw new Error(`proc-manager-mcp: the core's ${result}.${path} is no array`)
  return z.number().int()
}

/**
 * The core's longest duration (MAX_DURATION_MS, crates/core/src/model/duration.rs):
 * a duration option's maximum that tools/list leaves out. It tells a model
 * nothing, and a longer one is refused by the core all the same, in its words.
 */
const LONGEST_MS = 365 * 86_400_000

/**
 * A zod schema for one option of the core's JSON Schema: the types, enums and
 * bounds the start options use. zod, not the JSON Schema itself, because the
 * SDK takes zod (it validates each call with it and lists it as JSON Schema).
 */
function zodOf(schema) {
  if (schema.enum) return z.enum(schema.enum)
  switch (schema.type) {
    case 'string': return z.string()
    case 'boolean': return z.boolean()
    case 'integer': case 'number': {
      let n = schema.type === 'integer' ? z.number().int() : z.number()
      if (schema.minimum !== undefined) n = n.min(schema.minimum)
      if (schema.maximum !== undefined && schema.maximum !== LONGEST_MS) n = n.max(schema.maximum)
      return n
    }
    case 'array': return z.array(zodOf(schema.items))
    case 'object':
      if (schema.additionalProperties && typeof schema.additionalProperties === 'object') return z.record(zodOf(schema.additionalProperties))
  }
  throw new Error(`proc-manager-mcp: no zod form for the option schema ${JSON.stringify(schema)}`)
}

/**
 * What MCP takes in place of options it leaves out in their JSON form: one
 * `ready` string for readyLog, readyPort and readyUrl (see readiness()), the
 * wake message as a string for the wake object. Put where the first of them is.
 */
const INSTEAD = {
  readyLog: ['ready', z.string().describe('Server ready when: port, http:// URL or log regex')],
  wake: ['wake', z.string().describe('Wake the agent with this at its end ({{status}} filled)')],
}

/**
 * run_background's options, from the core's definition of them
 * (pm.startOptionsSchema(), crates/core/src/verbs/start_options.rs), in its
 * order: each with its one-line MCP description (`x-mcp`). The ones MCP
 * deliberately leaves out say why there (`x-mcp-omit`): context, onExit,
 * readyLog/readyPort/readyUrl and wake (taken as strings instead, INSTEAD),
 * tiePid. __test__/options-parity.test.mjs checks that every option is one
 * or the other.
 */
function startShape() {
  const start = pm.startOptionsSchema()
  const shape = {}
  for (const name of start['x-order']) {
    const option = start.properties[name]
    if (option['x-mcp-omit'] === undefined) {
      shape[name] = zodOf(option).optional().describe(option['x-mcp'] ?? option.description)
    } else if (INSTEAD[name]) {
      const [said, schema] = INSTEAD[name]
      shape[said] = schema.optional()
    }
  }
  return shape
}

/**
 * A verb's options as an MCP tool takes them, from the core's definition
 * (pm.verbOptionsSchema(), crates/core/src/verbs/verb_options.rs), in its
 * order, each with its MCP line; those the core says MCP leaves out
 * (`x-mcp-omit`) left out. `narrowed` holds what the tool says otherwise of
 * an option, merged over the core's schema: a tool call may block for less
 * than a program may, and the bounds cost room in tools/list.
 * __test__/options-parity.test.mjs checks each tool against the core.
 */
function verbShape(verb, narrowed = {}) {
  const options = pm.verbOptionsSchema()[verb]
  const shape = {}
  for (const name of options['x-order']) {
    const option = { ...options.properties[name], ...narrowed[name] }
    if (option['x-mcp-omit'] !== undefined) continue
    // A choice's default the core states (orphans' `mode: list`) is the tool's
    // too; serde's `default` of a flag or an absent value says nothing to a model.
    const zod = option.enum && option.default !== undefined ? zodOf(option).default(option.default) : zodOf(option).optional()
    shape[name] = zod.describe(option['x-mcp'])
  }
  return shape
}

/**
 * What holds for every tool, said once: each tool's inputSchema leaves out
 * `additionalProperties: false` (29 characters a tool; see transport.send
 * below), while zod's strict() refuses an argument it does not list.
 */
const INSTRUCTIONS = 'Every tool refuses arguments its schema does not list.'

const server = new McpServer({ name: 'proc-manager', version: '0.1.0' }, { instructions: INSTRUCTIONS })

server.registerTool('run_background', {
  description: 'Start a command in the background (over 10 s or 50 lines); answers with its jobId.',
  inputSchema: z.object({
    command: z.string().describe('Shell line (/bin/sh -c); with args, the program'),
    args: z.array(z.string()).optional().describe('Argv, no shell'),
    ...verbShape('yield', { yieldMs: { minimum: 1, maximum: WAIT_MS } }),
    ...startShape(),
  }).strict(),
  // The start's; with yieldMs, the check's once the job ended or is ready.
  outputSchema: { ...fieldsOf('RunResult', ['jobId', 'status', 'pid']), ...fieldsOf('CheckResult', ['exitCode']) },
}, tool(async ({ command, yieldMs, ready, wake, ...rest }, extra) => {
  // A message rule (the agent's session): the small schema has no room for action and instruction.
  const options = wake === undefined ? rest : { ...rest, wake: { message: wake } }
  if (ready !== undefined) Object.assign(options, readiness(ready))
  // A harness hook that wakes the model for this job names our check_job, not the CLI.
  options.context = { startedBy: 'mcp' }
  if (yieldMs === undefined) {
    const job = pm.runBackground(command, options)
    const warnings = (job.warnings ?? []).map((w) => `\nwarning: ${w}`).join('')
    if (job.status === 'queued') {
      const where = [job.queue && `#${job.position} in queue ${job.queue}`, job.waitingFor && `after ${job.waitingFor.join(', ')}`]
      return {
        text: `queued jobId: ${job.jobId} (${where.filter(Boolean).join(', ')}); check it with check_job or wait_job${warnings}`,
        structured: { jobId: job.jobId, status: 'queued' },
      }
    }
    return {
      text: `started jobId: ${job.jobId} (pid ${job.pid}); check it with check_job or wait_job${warnings}`,
      structured: { jobId: job.jobId, status: 'running', pid: job.pid },
    }
  }
  // The signal ends the native yield thread at once when the request is cancelled.
  const result = await unlessCancelled(pm.runYield(command, { yieldMs, ...options, signal: extra.signal }), extra.signal)
  if (result.done || result.check) {
    // Ended, or ready (or its readiness timeout passed): the check says which.
    // The cursor is in the text; the structured part is the start's.
    const { text, structured: { cursor, ...structured } } = checkAnswer(result.jobId)
    return { text, structured }
  }
  const notReady = ready === undefined ? '' : `, not ready yet (waiting for ${awaited(ready)})`
  return {
    text: `still running after ${seconds(yieldMs)}${notReady}: jobId ${result.jobId}; call wait_job or check_job with it`,
    structured: { jobId: result.jobId, status: 'running' },
  }
}))

server.registerTool('check_job', {
  description: 'Status, exit code, runtime and last lines of a job (cleaned, repeats folded).',
  inputSchema: z.object({
    jobId,
    // lines: 0 would answer with the header alone, which says nothing of the output.
    ...verbShape('check', { lines: { minimum: 1 } }),
  }).strict(),
  outputSchema: fieldsOf('CheckResult', ['jobId', 'status', 'exitCode', 'cursor']),
  annotations: readOnly,
}, tool(({ jobId: id, ...options }) => checkAnswer(id, options)))

server.registerTool('read_log', {
  description: 'A job\'s output lines by number or after a cursor, cleaned, not folded.',
  inputSchema: z.object({
    jobId,
    // Line 0 and 0 lines would answer with no line at all.
    ...verbShape('logs', { fromLine: { minimum: 1 }, lines: { minimum: 1 } }),
  }).strict(),
  // lineCount: how many of the read's lines the text shows.
  outputSchema: {
    ...fieldsOf('LogRead', ['jobId']), lineCount: countOf('LogRead', 'lines'), ...fieldsOf('LogRead', ['cursor', 'fromLine', 'totalLines']),
  },
  annotations: readOnly,
}, tool(({ jobId: id, fromLine, since, lines = 100 }) => {
  // Both given go to the core, which refuses the pair.
  const range = { fromLine, since }
  // Looked at before the read: a job still writing has its lines renumbered
  // by each rotation, so its next page is given as the cursor, which stays put.
  const byLine = since === undefined && !stillWriting(pm.checkJob(id, { lines: 0 }))
  // One read, cut to fit by the core, with the cursor right after the last
  // line kept: a second read to find that cursor could start at another
  // line once the log rotated in between, and skip lines never shown. The
  // room left for the head (two lines: bytes rotated away, then the range)
  // and for the notes at the end (what was left out, the cursor or why
  // there is none).
  const maxChars = CAP - (id.length + 160) - 500
  // Each line takes at least two characters: more than CAP / 2 never fit,
  // and no more are read (the read holds the lines it reads). The last
  // `lines` lines start where the whole count says, found first: cut to
  // CAP / 2, the last 100,000 of 200,002 lines started at line 192,003.
  const window = Math.min(lines, CAP / 2)
  if (range.fromLine === undefined && range.since === undefined && lines > window) {
    const { totalLines } = pm.readLog(id, { lines: 1, maxChars })
    range.fromLine = Math.max(1, totalLines - lines + 1)
  }
  const log = pm.readLog(id, { ...range, lines: window, maxChars })
  const head = []
  if (log.rotatedAwayBytes) head.push(`[${count(log.rotatedAwayBytes)} bytes rotated away since your cursor]`)
  if (since !== undefined) {
    head.push(`${id}: ${count(log.lines.length)} lines after cursor ${since}`)
  } else {
    const last = log.fromLine + log.lines.length - 1
    head.push(log.lines.length
      ? `${id}: lines ${count(log.fromLine)}–${count(last)} of ${count(log.totalLines)}`
      : `${id}: no lines from ${count(log.fromLine)} (the log holds ${count(log.totalLines)})`)
  }
  const shown = log.lines.length
  let text = [...head, ...log.lines].join('\n')
  if (log.notShown) {
    // By line, what the call asked for beyond what fits is said, lines past
    // the CAP / 2 read included; after a cursor, what the read left out.
    const left = since === undefined ? Math.min(lines, log.totalLines - log.fromLine + 1) - shown : log.notShown
    const next = byLine ? `fromLine ${log.fromLine + shown}` : `since ${log.cursor}`
    // After a cursor only the CAP / 2 lines read are counted; more may follow them.
    const beyond = since !== undefined && lines > window && log.more ? ', and more after them' : ''
    text += `\n[${count(left)} more lines not shown${beyond}: answers stop at ${count(CAP)} characters; use read_log with ${next}]`
  } else if (log.more) {
    text += `\n[more lines follow: use read_log with since ${log.cursor}]`
  }
  text += log.logProblem ? `\n[no cursor: ${log.logProblem}]` : `\n${cursorNote(log.cursor)}`
  const structured = { jobId: log.jobId, lineCount: shown, cursor: log.cursor }
  if (log.fromLine !== undefined) Object.assign(structured, { fromLine: log.fromLine, totalLines: log.totalLines })
  return { text, structured }
}))

server.registerTool('list_jobs', {
  description: 'Running jobs and those ended within the hour; with summary, what needs a look.',
  inputSchema: z.object({
    ...verbShape('list'),
    // What was the tool job_summary (see RENAMED): the lines an agent harness puts before each model call.
    summary: z.boolean().optional().describe("Running jobs' last lines, ended ones not checked yet"),
  }).strict(),
  // jobs, or with summary the lines shown.
  outputSchema: {
    jobs: z.array(z.object(fieldsOf('JobSummary', ['jobId', 'status', 'exitCode']))).optional(),
    ...fieldsOf('Summary', ['lines'], { optional: true }),
  },
  // No idempotentHint: the spec gives it a meaning only for a tool that is not read-only.
  annotations: readOnly,
}, tool(({ summary, ...options }) => {
  if (!summary) return { text: capText(pm.listJobsText(options), 'jobs'), structured: { jobs: pm.listJobs(options).map(jobFields) } }
  const other = ['status', 'all'].filter((name) => options[name] !== undefined)
  if (other.length) throw new Error(`${other.join(' and ')}: not with summary (running jobs and ended ones not checked yet)`)
  const said = pm.summary(options)
  if (!said) return { text: 'no jobs running and none ended unseen', structured: { lines: [] } }
  // The lines in the words of the text (`call check_job with jobId …`), not the CLI's.
  const lines = speakMcp(said).split('\n')
  const text = capText(said, 'lines')
  // The lines the text shows: all, or all but the note of those left out.
  return { text, structured: { lines: lines.slice(0, text === said ? lines.length : text.split('\n').length - 1) } }
}))

server.registerTool('wait_job', {
  // How long it may wait is timeoutMs's line.
  description: 'Wait for a job to end, then check it.',
  inputSchema: z.object({
    jobId,
    ...verbShape('wait', {
      timeoutMs: { minimum: 1, maximum: WAIT_WITH_PROGRESS_MS, 'x-mcp': `Default and max ${WAIT_MS}; max ${WAIT_WITH_PROGRESS_MS} with a progressToken` },
    }),
  }).strict(),
  outputSchema: fieldsOf('JobResult', ['jobId', 'status', 'exitCode', 'timedOut']),
  annotations: readOnly,
}, tool(async ({ jobId: id, timeoutMs = WAIT_MS }, extra) => {
  const progress = extra._meta?.progressToken !== undefined
  const limit = Math.min(timeoutMs, progress ? WAIT_WITH_PROGRESS_MS : WAIT_MS)
  const started = Date.now()
  const stopTicker = progressTicker(id, extra, started)
  let result
  try {
    result = await unlessCancelled(pm.waitJob(id, { timeoutMs: limit, signal: extra.signal }), extra.signal)
  } finally {
    stopTicker()
  }
  const answer = checkAnswer(id)
  const why = limit < timeoutMs ? ` (the longest wait without a progressToken)` : ''
  const note = result.timedOut ? `still running after ${seconds(limit)}${why} — call wait_job again\n` : ''
  const { cursor, ...structured } = answer.structured
  return { text: note + answer.text, structured: { ...structured, timedOut: result.timedOut } }
}))

server.registerTool('kill_job', {
  // graceMs's line says SIGTERM, then SIGKILL.
  description: "Kill a job's whole process tree.",
  inputSchema: z.object({
    jobId: jobId.optional(),
    ...verbShape('kill'),
  }).strict(),
  // One job's outcome, or with olderThanMs the jobs signalled.
  outputSchema: { ...fieldsOf('KillResult', ['jobId', 'status', 'signalled'], { optional: true }), killed: listOf('KillResult', 'jobId').optional() },
  annotations: { destructiveHint: true, idempotentHint: true },
}, tool(async ({ jobId: id, olderThanMs, owner, ...options }) => {
  if ((id === undefined) === (olderThanMs === undefined) || (owner !== undefined && olderThanMs === undefined)) {
    throw new Error('give jobId, or olderThanMs to kill every job started over that long ago (with owner: only its jobs)')
  }
  if (olderThanMs !== undefined) {
    // The core's kill-all, as `run-bg kill --all --older-than`: every grace period at once.
    const results = await pm.killAll({ olderThanMs, owner, ...options })
    const lines = results.map((r) => (r.error ? `${r.jobId}: ${visible(r.error)}` : r.message))
    return {
      text: capText(lines.length ? lines.join('\n') : `no running jobs started over ${seconds(olderThanMs)} ago to kill`, 'lines'),
      structured: { killed: results.filter((r) => r.signalled).map((r) => r.jobId) },
    }
  }
  const result = await pm.killJob(id, options)
  return { text: result.message, structured: { jobId: result.jobId, status: result.status, signalled: result.signalled } }
}))

/**
 * What used to be four tools, one each for pause, resume, rerun and send
 * (about 1,100 characters of tools/list more, on every turn of every
 * session). A call to one of the old names is answered with the call that
 * does it now (see RENAMED, transport.send below).
 */
const ACTIONS = {
  // SIGSTOP / SIGCONT to the job's tree; its timeoutMs clock stops while paused.
  pause: async (id) => paused(await pm.pauseJob(id)),
  resume: async (id) => paused(await pm.resumeJob(id)),
  rerun: (id) => {
    const started = pm.rerunJob(id)
    const pid = started.pid === undefined ? '' : ` (pid ${started.pid})`
    return {
      text: `${started.status === 'queued' ? 'queued' : 'started'} jobId: ${started.jobId}${pid}, a rerun of ${id}`,
      structured: { jobId: started.jobId, status: started.status, pid: started.pid },
    }
  },
  send: async (id, { text, ...options }) => {
    const sent = await pm.sendInput(id, text, options)
    return { text: `sent ${sent.bytes} bytes to jobId ${sent.jobId}${sent.closed ? '; its stdin is closed' : ''}`, structured: sent }
  },
}
const paused = (result) => ({ text: result.message, structured: { jobId: result.jobId, status: result.status, changed: result.changed } })

server.registerTool('control_job', {
  description: "Pause/resume a job's tree (SIGSTOP/SIGCONT, and its timeoutMs clock), rerun an ended job as a new one, or send to its stdin.",
  inputSchema: z.object({
    jobId,
    action: z.enum(Object.keys(ACTIONS)).describe('What to do'),
    text: z.string().optional().describe('send: to a job started with stdin: pipe'),
    ...verbShape('send'),
  }).strict(),
  // pause/resume answer {jobId, status, changed}, rerun the new job's {jobId, status, pid}, send {jobId, bytes, closed}.
  outputSchema: {
    ...fieldsOf('PauseResult', ['jobId']),
    ...fieldsOf('PauseResult', ['status', 'changed'], { optional: true }),
    ...fieldsOf('RunResult', ['pid'], { optional: true }),
    ...fieldsOf('SendResult', ['bytes', 'closed'], { optional: true }),
  },
  // No hints: they hold for every call, and what a job does with the text sent is anyone's guess.
}, tool(({ jobId: id, action, ...sending }) => {
  const given = Object.keys(sending).filter((name) => sending[name] !== undefined)
  if (action !== 'send' && given.length) throw new Error(`${given.join(', ')}: only with action send`)
  if (action === 'send' && sending.text === undefined) throw new Error('action send takes text')
  return ACTIONS[action](id, sending)
}))

server.registerTool('cleanup_orphans', {
  description: 'Processes left behind by ended jobs, and orphaned jobs; mode kill removes them.',
  inputSchema: z.object({
    ...verbShape('orphans'),
  }).strict(),
  // By id: the jobs' ids, the processes' pids.
  outputSchema: {
    orphanedJobs: listOf('CleanupReport', 'orphanedJobs[].jobId'),
    pids: listOf('CleanupReport', 'processes[].pid'),
    killed: listOf('CleanupReport', 'killed[].pid'),
  },
  annotations: { destructiveHint: true, idempotentHint: true },
}, tool(async (options) => {
  const report = await pm.cleanupOrphans(options)
  const line = (p) => `pid ${p.pid} ${visible(p.command)} (jobId: ${p.jobId}, ${p.jobStatus})`
  const lines = report.orphanedJobs.map((j) => `orphaned jobId: ${j.jobId} (${visible(j.command)})`)
  if (options.mode === 'kill') {
    lines.push(...report.killed.map((p) => `killed ${line(p)}`))
    lines.push(...report.failed.map((p) => `failed ${line(p)}: ${visible(p.reason)}`))
  } else {
    lines.push(...report.processes.map(line))
    if (lines.length) lines.push('call cleanup_orphans with mode: kill to remove them')
  }
  return {
    text: capText(lines.length ? lines.join('\n') : 'no orphans', 'lines'),
    structured: {
      orphanedJobs: report.orphanedJobs.map((j) => j.jobId),
      pids: report.processes.map((p) => p.pid),
      killed: report.killed.map((p) => p.pid),
    },
  }
}))

// The tool list never changes while the server runs; the SDK announces that
// it might as soon as a tool is registered.
server.server.registerCapabilities({ tools: { listChanged: false } })

// The client closing our stdin ends the session: exit now, whatever waits are
// in flight (a native wait thread would otherwise keep the process until its
// job ends). Jobs run under their own supervisors and are not touched.
const quit = () => process.exit(0)
process.stdin.once('end', quit)
process.stdin.once('close', quit)
// A client gone without closing our stdin first: the next answer meets EPIPE.
process.stdout.once('error', quit)

// tools/list as the SDK writes it repeats `$schema` in every schema,
// `execution: {taskSupport: 'forbidden'}` (the default) in every tool and
// `additionalProperties: false` in every output object (the server writes
// them; nothing is refused): 1,300 of its characters, read into the model's
// context for nothing. `additionalProperties: false` of every inputSchema is
// said once, in INSTRUCTIONS (zod's strict() still refuses what is not listed).
const transport = new StdioServerTransport()
const send = transport.send.bind(transport)
const closedOutput = (schema) => {
  if (schema?.type === 'array') closedOutput(schema.items)
  if (schema?.type !== 'object') return
  delete schema.additionalProperties
  Object.values(schema.properties ?? {}).forEach(closedOutput)
}
/** The tools control_job and list_jobs' summary replaced, and the call that does what each did. */
const RENAMED = {
  pause_job: 'control_job with jobId and action: "pause"',
  resume_job: 'control_job with jobId and action: "resume"',
  rerun_job: 'control_job with jobId and action: "rerun"',
  send_input: 'control_job with jobId, action: "send" and text (newline and eof as before)',
  job_summary: 'list_jobs with summary: true',
}
transport.send = (message, options) => {
  // The SDK's answer to an unknown tool, for a caller that kept an old name: what to call instead.
  const answer = message?.result?.isError ? message.result.content?.[0] : undefined
  const old = answer?.text?.match(/^MCP error -32602: Tool (\w+) not found$/)?.[1]
  if (Object.hasOwn(RENAMED, old ?? '')) answer.text = `${old} is no more: call ${RENAMED[old]}`
  for (const t of Array.isArray(message?.result?.tools) ? message.result.tools : []) {
    delete t.execution
    delete t.inputSchema?.$schema
    if (t.inputSchema?.additionalProperties === false) delete t.inputSchema.additionalProperties
    delete t.outputSchema?.$schema
    closedOutput(t.outputSchema)
  }
  return send(message, options)
}
await server.connect(transport)
