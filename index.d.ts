/* eslint-disable */
// Generated whole by scripts/options-dts.mjs (`npm run build && node scripts/options-dts.mjs`):
// the functions and classes from the #[napi] items of crates/node/src, the
// options from the core's option types, the results from the core's views
// (crates/core/src/present/view), each with its doc. Edit those, not this;
// __test__/dts.test.mjs fails when this file differs from what it writes.
import { EventEmitter } from 'node:events'

/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** JSON data, as kept in a job's `context`. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }

/**
 * The `Error` a function throws, or its promise rejects with (an aborted
 * `signal` gives an `AbortError` instead): the message says what was wrong
 * and what is accepted, `code` the kind of failure, to branch on:
 * `ERR_USAGE` a bad argument or option, a malformed id; `ERR_UNKNOWN_JOB` no
 * job has that id (pruned, or never started here); `ERR_START_FAILED` the
 * program could not start (recorded as a failed job, `jobId`);
 * `ERR_SKIPPED` submitted after a job that failed (recorded as skipped);
 * `ERR_CONFIG` config.json is broken; `ERR_IO` a file of the home could
 * not be read or written; `ERR_DISK_FULL` the disk holding the home is
 * full; `ERR_BUSY` the registry stayed locked; `ERR_FAILED` anything else.
 */
export interface ProcManagerError extends Error {
  code: ProcManagerErrorCode
  /** The job the failure is about: the unknown id, or the job recorded as failed or skipped. */
  jobId?: string
}

export type ProcManagerErrorCode = 'ERR_USAGE' | 'ERR_UNKNOWN_JOB' | 'ERR_START_FAILED' | 'ERR_SKIPPED' | 'ERR_CONFIG' | 'ERR_IO' | 'ERR_DISK_FULL' | 'ERR_BUSY' | 'ERR_FAILED'

/**
 * A job's output lines as they are written, across log rotations, as an
 * async iterator: the whole log kept (or its last `lines` lines), then each
 * new line; it ends after the last line once the job has ended. `break`
 * (the iterator's `return()`) or an aborted `signal` stops the native thread
 * that follows the log at once; with the signal, the pending `next()`
 * rejects with an `AbortError`.
 *
 * ```js
 * for await (const line of pm.followLog(jobId, { signal })) console.log(line)
 * ```
 */
export declare function followLog(jobId: string, options?: FollowOptions | undefined | null): LogLines

export interface FollowOptions {
  /**
   * How many lines (default 100). Following, the last lines to start
   * with: `followLog` starts with the whole log kept when not given,
   * `followLogs` with 10 of each job (0: only what is written from now on).
   */
  lines?: number
  /** Stops following at once when aborted; the pending `next()` rejects with an `AbortError`. */
  signal?: AbortSignal
}

/** What `followLog` returns: an async iterator (and iterable) of lines. */
export declare class LogLines implements AsyncIterableIterator<string> {
  private constructor()
  /** The next line; `{ done: true }` once the job has ended and every line was given; rejects with an `AbortError` once the signal aborted. */
  next(): Promise<IteratorResult<string, undefined>>
  /**
   * Stops (what `break` in `for await` calls): the native thread
   * ends at once; later `next()` calls give `{ done: true }`.
   */
  return(): Promise<IteratorResult<string, undefined>>
  [Symbol.asyncIterator](): LogLines
}

/**
 * Every job's output lines (of `owner`), one stream, as `run-bg logs --all
 * --follow` gives them: the last `lines` lines of each job `listJobs` shows,
 * then each new line as it is written, jobs started meanwhile joining from
 * their first line. Each job's lines come once and in order, across log
 * rotations; lines of different jobs in the order the follower reads them.
 * It never ends by itself: `break` or an aborted `signal` stops the one
 * native thread that follows every log; with the signal, the pending
 * `next()` rejects with an `AbortError`.
 *
 * ```js
 * for await (const { label, line } of pm.followLogs({ owner: 'stack', signal })) console.log(`${label} | ${line}`)
 * ```
 */
export declare function followLogs(options?: FollowLogsOptions | undefined | null): JobLogLines

export interface FollowLogsOptions {
  /** Only the jobs started with this `owner` (every job's lines: `followLogs`). */
  owner?: string
  /**
   * How many lines (default 100). Following, the last lines to start
   * with: `followLog` starts with the whole log kept when not given,
   * `followLogs` with 10 of each job (0: only what is written from now on).
   */
  lines?: number
  /** Stops following at once when aborted; the pending `next()` rejects with an `AbortError`. */
  signal?: AbortSignal
}

/** What `followLogs` returns: an async iterator (and iterable) of every job's lines. */
export declare class JobLogLines implements AsyncIterableIterator<JobLogLine> {
  private constructor()
  /** The next line of any job; rejects with an `AbortError` once the signal aborted. */
  next(): Promise<IteratorResult<JobLogLine, undefined>>
  /**
   * Stops (what `break` in `for await` calls): the native thread
   * ends at once; later `next()` calls give `{ done: true }`.
   */
  return(): Promise<IteratorResult<JobLogLine, undefined>>
  [Symbol.asyncIterator](): JobLogLines
}

/** One line of `followLogs` (lossy UTF-8, without its newline). */
export interface JobLogLine {
  /** The job's id. */
  id: string
  label: string
  line: string
}

/**
 * Starts `command` in the background under its own supervisor. Returns once
 * the main process has started; throws if it cannot (then recorded as a
 * `failed` job). Without `options.args`, `command` runs with `/bin/sh -c` (on Windows `cmd.exe /d /s /c`).
 */
export declare function runBackground(command: string, options?: RunOptions | undefined | null): RunResult

/** Options of `runBackground`; they mirror the CLI's flags. */
export interface RunOptions {
  /** When given, `command` is a program and `args` its argv (no shell). */
  args?: Array<string>
  /** Human name (default: the program's name). */
  label?: string
  /** Working directory (default: the current one). */
  cwd?: string
  /** Extra environment variables. */
  env?: Record<string, string>
  /** Kill the job's tree after this many milliseconds. */
  timeoutMs?: number
  /** The agent or thread that owns the job. */
  owner?: string
  /** Arbitrary JSON kept with the job. */
  context?: JsonValue
  /** `false`: no exit notification for this job. */
  notify?: boolean
  /** Run this (with /bin/sh -c) when the job ends. */
  onExit?: string
  /** Ready once a line of output matches this regular expression (`runYield` returns then). */
  readyLog?: string
  /**
   * Ready once one of the job's own processes listens on this port (at
   * 127.0.0.1, ::1 or a wildcard address); a stranger's listener is not
   * readiness (`readyBlocked` names it). macOS: anything that accepts a connect.
   */
  readyPort?: number
  /** Ready once a GET of this `http://` URL answers 2xx or 3xx. */
  readyUrl?: string
  /** Stop watching for readiness after this many ms; the job runs on, `not ready after …`. */
  readyTimeoutMs?: number
  /** Each output line matching one of these regexes sends a `matched` notification (at most once per `notify.match_window_ms` per pattern). */
  notifyOn?: Array<string>
  /**
   * Start the main process again when it ends: `on-failure` (not after exit
   * 0) or `always`, under the same job id, after killing what is left of the
   * ended run's tree.
   */
  restart?: 'on-failure' | 'always'
  /** With `restart`: restarts in a row (no 10 s run between) before giving up (default 10). */
  maxRestarts?: number
  /** With `restart`: the first restart's delay, doubled for each one in a row up to 30 s (default 1000). */
  restartDelayMs?: number
  /** `pipe`: the job's stdin stays open for `sendInput` (default `null`: /dev/null, NUL on Windows). */
  stdin?: 'pipe' | 'null'
  /**
   * Registers a one-off rule with the interrupt service as the job starts
   * (the CLI's `--wake`): the job's end wakes the agent with `message`, whose
   * `{{key}}`s the service fills from the event's data (`jobId`, `status`,
   * `exitCode`, `outcome`, …; the event's own message without one). Needs
   * the exit notification (`notify` not false, `notify.url` set).
   */
  wake?: WakeOptions
  /** Start once these jobs have ended successfully (else it ends `skipped`). */
  after?: Array<string>
  /** With `after`: start once they have ended, whatever their outcome. */
  afterAny?: boolean
  /** Wait for a slot in this queue of config.json's `queues` (default: the `default` queue if configured). */
  queue?: string
  /** Higher starts first in its queue; first come first served within a priority (default 0). */
  priority?: number
  /**
   * `true`: kill the job's tree when this Node process exits (the
   * supervisor watches it with a pidfd on Linux 5.3 or later, a process
   * handle on Windows; refused on macOS, which has neither).
   */
  tie?: boolean
  /** Kill the job's tree when the process with this pid exits. */
  tiePid?: number
  /**
   * The niceness the job's processes run at (as `renice` sets it), from
   * -20 (the most CPU) to 19 (the least); default: the caller's. A value
   * below the current one (usually 0) needs root, CAP_SYS_NICE or an
   * RLIMIT_NICE that allows it; without, the start fails (a `failed` job
   * that says so). On Windows a priority class, given to every process
   * of the job: 19 idle, 1..18 below normal, 0 normal, -1..-9 above
   * normal, -10..-20 high (never realtime; no privilege needed).
   */
  nice?: number
  /**
   * The agent harness session the job belongs to (default: `RUN_BG_SESSION`,
   * else the harness's own variable, Claude Code's `CLAUDE_CODE_SESSION_ID`
   * or Codex's `CODEX_THREAD_ID`, else the session whose harness process
   * started the caller, as its session-start hook recorded it). With the
   * hooks installed its end wakes that session, and the session's end
   * kills it unless `outliveSession`. `none`: no session.
   */
  session?: string
  /** `true`: the end of its session leaves it running (a server to keep). */
  outliveSession?: boolean
}

export interface WakeOptions {
  /** The text the agent gets; `{{key}}` filled from the event's data. */
  message?: string
  /** For a sub-agent: what it is to do about it. */
  instruction?: string
  /** `message` (into the agent's session, the default) or `subagent`. */
  action?: 'message' | 'subagent'
}

/** `runBackground`, `run-bg --json`: the job just started. */
export interface RunResult {
  jobId: string
  /** Absent while the job is queued. */
  pid?: number
  logPath: string
  label: string
  /** `running` once the main process runs; `queued` while it waits (`queue`, `after`). */
  status: 'running' | 'queued'
  /** Said about the request without refusing it (a wake template's unknown `{{key}}`s). */
  warnings?: Array<string>
  /** Queued: its place, 1 = next to start (in its queue). */
  position?: number
  /** Queued: its queue. */
  queue?: string
  /** Queued: the jobs it waits for. */
  waitingFor?: Array<string>
}

/**
 * Starts an ended job again as a new job: the command, cwd, `env` additions
 * and options it was started with; the new job's `rerunOf` names the old one.
 * Throws for a job still running (kill it first), an unknown one, and a
 * record that keeps no command. `overrides`: only an empty object for now.
 */
export declare function rerunJob(jobId: string, overrides?: Record<string, never> | undefined | null): RunResult

/**
 * The JSON Schema of `runBackground`'s options beyond `args`, from their one
 * definition in the core: each property with its doc (`description`), its
 * MCP line (`x-mcp`) or why the MCP tool leaves it out (`x-mcp-omit`);
 * `x-order` lists them in the order they are read. The MCP server builds
 * `run_background`'s input from it.
 */
export declare function startOptionsSchema(): Record<string, any>

/**
 * The JSON Schemas of the verbs' options, by verb (`check`, `list`,
 * `wait`, `kill`, `orphans`, `logs`, `send`, `prune`, `summary`, `up`,
 * `down`, and the JS API's own `watch` and `tracker`), from their one definition in the core, as `startOptionsSchema`
 * gives the start's: `x-all` marks the kill options only `killAll` takes,
 * `x-calls` the calls that take each of `logs` (`readLog`, `followLog`,
 * `followLogs`), `x-cli-omit` why `run-bg` leaves one out. The MCP server
 * builds its tools' inputs from them, scripts/options-dts.mjs the option
 * interfaces of index.d.ts.
 */
export declare function verbOptionsSchema(): Record<string, any>

/**
 * The JSON Schemas of the results (`RunResult`, `CheckResult`, `LogRead`,
 * `JobSummary`, `CorruptJob`, `JobResult`, `KillResult`, `PauseResult`,
 * `SendResult`, `CleanupReport`, and `Summary`: the lines `summary()`
 * joins), keyed by these names, derived from the core's one definition of
 * each: as serialized, a field that is left out when it has no value is not
 * `required`. The MCP server builds its tools' output schemas from them.
 */
export declare function resultSchemas(): Record<string, any>

/**
 * The JSON Schemas of every result the functions return, keyed by its
 * index.d.ts name, from the core's one definition of each (its view): the
 * results nested in another referenced (`$ref`), properties in their
 * declaration order, `x-ts` naming a string union's type. What
 * scripts/options-dts.mjs writes index.d.ts's result interfaces from.
 */
export declare function resultTypes(): Record<string, any>

/**
 * Status, exit code, runtime and the last lines of a job's output; with
 * `text: true` also `checkJobText`'s text of this same check.
 */
export declare function checkJob(jobId: string, options?: CheckJobOptions | undefined | null): CheckResult

export interface CheckJobOptions extends CheckOptions {
  /** Also `text`: the answer as `checkJobText` gives it, from this same check (default false). */
  text?: boolean
}

export interface CheckOptions {
  /** How many lines (default 20). */
  lines?: number
  /** Only lines matching this regular expression. */
  grep?: string
  /** Only lines that look like errors, each with a line of context. */
  errors?: boolean
}

/** `checkJob`'s answer (`run-bg check --json`): the job plus the last lines of its output. */
export interface CheckResult extends JobSummary {
  /**
   * Last lines of output, oldest first, cleaned and folded as `run-bg check`
   * shows them (`same [×3]`). With `errors`, groups are parted by `--`, and
   * where the look stopped at its bound (200,000 lines or 64 MiB) the first
   * line says so: `[none in the last N lines; earlier lines not searched]` or
   * `[only the last N lines were searched]`.
   */
  tail: Array<string>
  /**
   * Where the log stood after its last complete line when the tail was read:
   * `readLog(jobId, { since: cursor })` gives only what came after.
   */
  cursor: number
  /**
   * Present when `cursor` is not to be used: the log's start record
   * (`.output.log.start`) is corrupt, so where the kept lines lie in
   * everything written is unknown; reads by cursor are refused saying so.
   */
  logProblem?: string
  /** Processes still running although the main process ended (or its supervisor died). */
  lingering: Array<JobProcess>
  /** How many of the job's processes run now (running or lingering). */
  processes?: number
  /** Their resident memory now, in MiB. */
  rssMb?: number
  /** With `text: true`: this check as `checkJobText` writes it. */
  text?: string
}

/** A job as recorded, with its status verified against the OS. */
export interface JobSummary {
  jobId: string
  label: string
  command: string
  /** running | paused | success | failed | killed | timeout | orphaned | lost | queued | skipped */
  status: JobStatus
  exitCode?: number
  signal?: string
  pid?: number
  /** Milliseconds since the epoch. */
  startedAt: number
  endedAt?: number
  durationMs: number
  logPath: string
  cwd: string
  owner?: string
  context?: JsonValue
  /** Why the job could not start, or what went wrong around it. */
  error?: string
  /** The announcement of the job's end to the interrupt service. */
  notification?: NotificationInfo
  /** Command hooks run when the job ended. */
  hooks: Array<HookInfo>
  /** Peak RSS of the job's largest process in MiB, once it has ended. */
  peakRssMb?: number
  /** When the job was seen ready (`readyLog`/`readyPort`/`readyUrl`), ms since the epoch. */
  readyAt?: number
  /** Not ready yet (or never was): what stands in the way, e.g. `port 3000 is held by pid 812 (nginx), not by this job`. */
  readyBlocked?: string
  /** With `restart`: how many times its main process was started again. */
  restarts?: number
  /** How the run before the last restart ended (`exit 1`, `signal SIGSEGV`). */
  lastRestart?: string
  /** When that run ended (ms since the epoch). */
  lastRestartAt?: number
  /** While it waits out the restart delay: when its next run starts (ms since the epoch). */
  nextRunAt?: number
  /** `pipe` when started with `stdin: 'pipe'` (`sendInput` writes to it). */
  stdin?: 'pipe'
  /** The job's wake rule at the interrupt service (`wake` / `--wake`). */
  wake?: WakeInfo
  /** Its queue (`queue`, or `default`), for a job that waited or waits for a slot. */
  queue?: string
  /** Its `priority`, when not 0. */
  priority?: number
  /** The jobs it runs `after`. */
  after?: Array<string>
  /** `listJobs`, queued: its place, 1 = next to start (in its queue). */
  position?: number
  /** `listJobs`, queued: the jobs of `after` that have not ended yet. */
  waitingFor?: Array<string>
  /** `tie`/`tiePid`: the process whose exit kills the job's tree. */
  tie?: TieInfo
  /** While `pauseJob` holds it (status `paused`): since when, ms since the epoch. */
  pausedAt?: number
  /** `rerunJob`: the job this one starts again. */
  rerunOf?: string
  /** The agent harness session it belongs to (`session`, `RUN_BG_SESSION`, or the harness that started it). */
  session?: string
  /** `outliveSession`: its session's end leaves it running. */
  outliveSession?: boolean
}

/** A job's status, verified against the OS. */
export type JobStatus = 'running' | 'paused' | 'success' | 'failed' | 'killed' | 'timeout' | 'orphaned' | 'lost' | 'queued' | 'skipped'

export interface NotificationInfo {
  /** `<jobId>:<status>`, stable across retries. */
  eventId: string
  /**
   * `pending` (being retried), `queued` (the interrupt service queued it
   * for the agent), `ignored` (it took it and passes it to no one),
   * `failed` (refused, or given up on), `no-listener` (no service at the
   * default address), `delivered` (a 2xx from another kind of receiver).
   */
  state: NotificationState
  attempts: number
  lastError?: string
  /** When the receiver took it (queued, ignored, delivered). */
  deliveredAt?: number
  /** `queued`: how many of the service's rules matched (0: its default action for the level). */
  matched?: number
  /** `ignored`: the service's reason; `failed`: what the refusal said. */
  reason?: string
  /** The interrupt service's level it was sent at: `info`, `warn` or `alert`. */
  level?: 'info' | 'warn' | 'alert'
}

/**
 * What became of an exit notification, as the receiver answered it:
 * `pending` (being retried: refused connection, timeout, 5xx), `queued` (the
 * interrupt service queued it for the agent), `ignored` (it took it and
 * passes it to no one, e.g. `info` matching no rule), `failed` (a 4xx, 3
 * server errors, or a day of retries), `no-listener` (nothing listens at the
 * default address: no service installed), `delivered` (a 2xx from a receiver
 * that is not the interrupt service; also older records).
 */
export type NotificationState = 'pending' | 'queued' | 'ignored' | 'failed' | 'no-listener' | 'delivered'

export interface HookInfo {
  command: string
  exitCode?: number
  /** Why it failed (exited non-zero, timed out, could not start). */
  error?: string
  durationMs: number
}

/**
 * `pending` (being registered), `registered`, `failed` (`reason`), `queued`
 * (the end event matched it; the service has not dispatched it yet), `fired`
 * (the service dispatched it and removed the one-off rule), `not-fired` (the
 * service still had it after its batch window and dispatch: its `openclaw`
 * call failed or it restarted and lost its queue; removed by us, `reason`),
 * `removed` (by us, with DELETE: the end event did not go through it; `reason`).
 */
export interface WakeInfo {
  state: 'pending' | 'registered' | 'failed' | 'queued' | 'fired' | 'not-fired' | 'removed'
  action: 'message' | 'subagent'
  /** `run-bg-<jobId>` */
  ruleId?: string
  message?: string
  reason?: string
}

export interface TieInfo {
  /** The process watched. */
  pid: number
  /** When it exited and the job was killed for it (ms since the epoch). */
  firedAt?: number
  /** Once it fired: `its caller (pid N) exited` (`tie: true`), `the process it was tied to (pid N) exited` (`tiePid`). */
  reason?: string
}

/** One of a job's processes. */
export interface JobProcess {
  pid: number
  /** argv joined with spaces. */
  command: string
}

/**
 * Jobs in the registry: running ones and those that ended within the hour,
 * or every job with `all: true`; then any job whose record cannot be read
 * (`CorruptJob`, without a `status` or `owner` filter).
 */
export declare function listJobs(options?: ListOptions | undefined | null): Array<JobSummary | CorruptJob>

export interface ListOptions {
  /** Only jobs with this status (of any age). */
  status?: JobStatus
  /** Only jobs of this owner. */
  owner?: string
  /** Only jobs of this agent session; `current`: the caller's (see `RunOptions.session`). */
  session?: string
  /** Include jobs that ended over an hour ago. */
  all?: boolean
}

/**
 * A job directory whose `job.json` cannot be read: listed (without a
 * `status` or `owner` filter) so that it does not vanish; `killJob` or
 * `prune` removes its directory.
 */
export interface CorruptJob {
  jobId: string
  status: 'corrupt'
  /** The `job.json` that cannot be read. */
  recordFile: string
  /** Why, and what removes it. */
  error: string
}

/**
 * SIGTERM to the job's whole tree, SIGKILL after the grace period (at once
 * with `force`). Resolves once the tree is gone.
 */
export declare function killJob(jobId: string, options?: KillOptions | undefined | null): Promise<KillResult>

export interface KillOptions {
  /** Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms). */
  graceMs?: number
  /** SIGKILL at once. */
  force?: boolean
}

/** `killJob`, each entry of `killAll` and of `run-bg kill --json`. */
export interface KillResult {
  jobId: string
  /** The job's status after the kill; `unknown` when it could not be killed. */
  status: JobStatus | 'unknown'
  /** Whether a signal was sent (false when the job had already ended). */
  signalled: boolean
  /** What happened, to show (control characters of user text written out). */
  message: string
  /** In `killAll` results: why this job could not be killed. */
  error?: string
}

/**
 * Stops a running job's whole process tree (SIGSTOP; on Windows every
 * process of its Job Object suspended) and its `timeoutMs` clock until
 * `resumeJob`. Resolves once its supervisor has stopped the tree and
 * recorded `paused`; `changed` is false for a job already paused. Rejects
 * for a job that does not run (queued, ended, orphaned).
 */
export declare function pauseJob(jobId: string): Promise<PauseResult>

/** `pauseJob` / `resumeJob`, `run-bg pause|resume --json`. */
export interface PauseResult {
  jobId: string
  /** `paused`, or `running` after a resume (`orphaned` for an orphan resumed). */
  status: JobStatus
  /** While paused: since when (ms since the epoch). */
  pausedAt?: number
  /** False when there was nothing to do (already paused; not paused). */
  changed: boolean
  /** What happened, to show. */
  message: string
}

/**
 * Continues a paused job's tree (SIGCONT; on Windows, its processes
 * resumed) and its `timeoutMs` clock from where the pause stopped it;
 * `changed` is false for a job not paused.
 */
export declare function resumeJob(jobId: string): Promise<PauseResult>

/**
 * Kills every running job, and every ended one whose processes live on (of
 * `owner`, when given; started over `olderThanMs` ago, when given), all at once.
 */
export declare function killAll(options?: KillAllOptions | undefined | null): Promise<KillResult[]>

export interface KillAllOptions {
  /** Only this owner's jobs. */
  owner?: string
  /** Only this agent session's jobs; `current`: the caller's. */
  session?: string
  /** Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms). */
  graceMs?: number
  /** SIGKILL at once. */
  force?: boolean
  /** Only the jobs started more than this many milliseconds ago (`run-bg kill --all --older-than`). */
  olderThanMs?: number
}

/**
 * Resolves when the job ends (with `ready: true`, once it is ready), or
 * `timeoutMs` passes (`timedOut: true`); rejects with an `AbortError` at
 * once when `signal` aborts (the job runs on).
 */
export declare function waitJob(jobId: string, options?: WaitOptions | undefined | null): Promise<JobResult>

export interface WaitOptions {
  /** Give up after this many milliseconds; the result then has `timedOut: true`. */
  timeoutMs?: number
  /** Stops the wait at once when aborted: the promise rejects with an `AbortError`. */
  signal?: AbortSignal
  /**
   * Resolve once the job is ready (`readyLog`/`readyPort`/`readyUrl`), has
   * passed its `readyTimeoutMs`, or ended, as `run-bg wait --ready`; rejects
   * for a job without a readiness check.
   */
  ready?: boolean
}

/** `waitJob`'s answer (each of `run-bg wait --json`'s `jobs`): the job and how the wait ended. */
export interface JobResult extends JobSummary {
  /** `timeoutMs` passed while the job still ran. */
  timedOut: boolean
  /**
   * The exit status a shell would report (128+signal for a signal), or
   * 124 when `timeoutMs` passed first, as `run-bg wait` exits; with
   * `ready`, 0 once the job is ready (1 for one that ended with exit 0 first).
   */
  shellExitCode: number
}

/**
 * Verifies running jobs against the OS: supervisor gone but processes alive
 * → `orphaned`; both gone with no exit status → `lost`.
 */
export declare function reconcile(): ReconcileResult

/** `reconcile`, `run-bg reconcile --json`. */
export interface ReconcileResult {
  orphaned: Array<JobSummary>
  lost: Array<JobSummary>
}

/**
 * Forgets finished jobs (that ended over `olderThanMs` ago, when given) and
 * deletes their logs. Returns the ids removed. `olderThanMs` may be given
 * as the number itself.
 */
export declare function pruneJobs(options?: PruneOptions | number | undefined | null): Array<string>

export interface PruneOptions {
  /** Only the jobs that ended more than this many milliseconds ago. */
  olderThanMs?: number
}

/**
 * Finds orphaned jobs and processes left behind by ended jobs; with
 * `mode: 'kill'` removes them. Resolves with what was found, killed and failed.
 */
export declare function cleanupOrphans(options?: CleanupOptions | undefined | null): Promise<CleanupReport>

export interface CleanupOptions {
  /** `list` (default) only reports; `kill` removes what it finds. */
  mode?: 'list' | 'kill'
  /** Only jobs of this owner. */
  owner?: string
  /** With `kill`: SIGKILL at once instead of SIGTERM, grace, SIGKILL. */
  force?: boolean
  /** Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms). */
  graceMs?: number
}

/** `cleanupOrphans`, `run-bg orphans --json`. */
export interface CleanupReport {
  /** Jobs whose supervisor is gone while their processes run. */
  orphanedJobs: Array<JobSummary>
  /** Every process found that belongs to an ended or orphaned job. */
  processes: Array<OrphanInfo>
  /** With `mode: 'kill'`: the processes removed. */
  killed: Array<OrphanInfo>
  /** With `mode: 'kill'`: the processes that could not be removed, with `reason`. */
  failed: Array<OrphanInfo>
}

/** A process left behind by an ended (or orphaned) job. */
export interface OrphanInfo {
  jobId: string
  jobStatus: JobStatus
  pid: number
  command: string
  /** Why it could not be killed (in `failed` only). */
  reason?: string
}

/**
 * The lines an agent harness puts in front of each model call: running jobs
 * (pid, command, runtime, last line) and ended jobs not looked at yet. An
 * empty string when there is nothing to say.
 */
export declare function summary(options?: SummaryOptions | undefined | null): string

export interface SummaryOptions {
  /** Only jobs of this owner. */
  owner?: string
  /** Only this agent session's jobs; `current`: the session the caller runs in. */
  session?: string
}

/**
 * Starts `command` like `runBackground` (the same options), then waits up
 * to `yieldMs`: resolves with the check result if the job ended by then,
 * else with the running job's id (`done: false`), leaving it running. An
 * aborted `signal` stops the wait at once (the job runs on) and rejects
 * with an `AbortError` whose `jobId` names that job.
 */
export declare function runYield(command: string, options: YieldOptions): Promise<YieldResult>

export interface YieldOptions extends RunOptions {
  /** How long to wait for the job to end before leaving it running. */
  yieldMs: number
  /** Stops the wait at once when aborted (the job runs on): the promise rejects with an `AbortError`. */
  signal?: AbortSignal
}

/** `runYield`: whether the job ended within the time given, and if so its check. */
export interface YieldResult {
  jobId: string
  /** True when the job ended within `yieldMs`; then `check` holds its outcome. */
  done: boolean
  /**
   * True when the job has a readiness check and was ready within `yieldMs`
   * (then `check` holds it, still running). Its readiness timeout passing
   * first also gives `check`, with `ready` false.
   */
  ready: boolean
  check?: CheckResult
}

/**
 * `checkJob` as the CLI prints it: a header line, what needs attention, then
 * the lines. For agents and tools that relay text (the MCP server).
 */
export declare function checkJobText(jobId: string, options?: CheckOptions | undefined | null): string

/** `listJobs` as the CLI prints it, one line per job. */
export declare function listJobsText(options?: ListOptions | undefined | null): string

/**
 * A range of a job's log lines (`fromLine`, `lines`), or the lines written
 * after a cursor (`since`, from `checkJob` or an earlier `readLog`), across
 * rotations; a line of any length is one line, shown cut.
 */
export declare function readLog(jobId: string, options?: ReadLogOptions | undefined | null): LogRead

export interface ReadLogOptions {
  /**
   * The first line to show, counted from 1 (the oldest line the log still
   * holds); without it (and without `since`), the last `lines` lines.
   */
  fromLine?: number
  /**
   * A cursor (`checkJob().cursor`, `readLog().cursor`): only the lines
   * written after it, the oldest first. Not with `fromLine`.
   */
  since?: number
  /**
   * How many lines (default 100). Following, the last lines to start
   * with: `followLog` starts with the whole log kept when not given,
   * `followLogs` with 10 of each job (0: only what is written from now on).
   */
  lines?: number
  /**
   * At most this many characters of lines (as JavaScript counts a string's
   * length, one more per line for its newline): only the first lines that
   * fit are given, `cursor` right after the last of them, and `notShown`
   * counts the lines asked for that were left out.
   */
  maxChars?: number
}

/** `readLog`'s answer: lines as `check` cleans them, never folded. */
export interface LogRead {
  jobId: string
  /** The number of the first line in `lines` (not with `since`). */
  fromLine?: number
  lines: Array<string>
  /** How many lines the log holds now, rotated files included (not with `since`). */
  totalLines?: number
  /**
   * Where the last line in `lines` ends in everything ever written to the
   * log: give it as `since` for only what comes next. An unfinished last
   * line counts as read only once the job has ended.
   */
  cursor: number
  /** As `CheckResult.logProblem`: `cursor` is not to be used. */
  logProblem?: string
  /**
   * With `since`: bytes after it that were rotated away and deleted before
   * this read; `lines` then start at the oldest line kept.
   */
  rotatedAwayBytes?: number
  /** With `since`: more lines follow `cursor` than `lines` asked for. */
  more?: boolean
  /** With `maxChars`: lines asked for that were left out to keep within it; they start at `cursor`. */
  notShown?: number
}

/**
 * Writes `text` and a newline (unless `newline: false`) to the stdin of a
 * job started with `stdin: 'pipe'`; `eof: true` then closes it. Rejects for
 * a job without a stdin pipe, one that has ended, or one that does not read
 * its stdin for 5 s (more than the pipe's 64 KiB waiting); that wait runs on
 * a worker thread, not on the event loop. Calls to one job are written one at
 * a time, in the order they were made.
 */
export declare function sendInput(jobId: string, text: string, options?: SendInputOptions | undefined | null): Promise<SendResult>

export interface SendInputOptions {
  /** `false`: send the text as it is (default true: a newline follows). */
  newline?: boolean
  /** Close the job's stdin after the text: it reads end-of-file. */
  eof?: boolean
}

/** `sendInput`, `run-bg send --json`: what went to the job's stdin. */
export interface SendResult {
  jobId: string
  /** Bytes written, the newline included. */
  bytes: number
  /** Whether its stdin was closed (`eof`). */
  closed: boolean
}

/**
 * Starts every process of a stack file that does not run yet: `file`, or
 * `run-bg.json` in the current directory, else its `Procfile`. Each process
 * is a job labelled by its name and owned by the stack (`owner`, else the
 * file's directory name); one with `after` starts once each process it runs
 * after is ready (one with a readiness check) or ended with exit 0 (one
 * without). The file is checked whole before anything starts. With
 * `yieldMs`, resolves once every process is up or one cannot be (`ready`,
 * `problems`); an aborted `signal` rejects with an `AbortError`, what
 * started runs on.
 */
export declare function up(file?: string | undefined | null, options?: UpOptions | undefined | null): Promise<StackUpResult>

export interface UpOptions {
  /** Owner of the stack's jobs (default: the file's directory name). */
  owner?: string
  /** `true`: the stack keeps running when the agent session that starts it ends. */
  outliveSession?: boolean
  /**
   * Wait up to this many milliseconds for every process to be up (ready,
   * running, or a task that ended with exit 0), or one cannot be: `ready`, `problems`.
   */
  yieldMs?: number
  /** Stops the wait of `yieldMs` (an `AbortError`); what started runs on. */
  signal?: AbortSignal
}

/** `up`, `run-bg up --json`: what each process of the stack became. */
export interface StackUpResult {
  /** The stack file read. */
  file: string
  /** The owner of the stack's jobs (`listJobs({ owner })` shows them). */
  owner: string
  /** In the order they were started: each after what it runs after. */
  processes: Array<StackProcess>
  /** With `yieldMs`: whether every process is up (ready, running, or a task that ended with exit 0). */
  ready?: boolean
  /** With `yieldMs`: what was not up, one line a process (`web: failed (exit 1) (run-bg check web-3f2a1c)`). */
  problems?: Array<string>
}

export interface StackProcess {
  /** The process's name in the file: its job's label. */
  name: string
  /** Absent when it could not even be submitted. */
  jobId?: string
  pid?: number
  /** `already running`: a job of the stack with this label runs (or waits in its queue). */
  action: 'started' | 'queued' | 'already running' | 'failed' | 'skipped'
  /** Queued: the processes it waits for. */
  waitingFor?: Array<string>
  /** Failed, skipped (a process it runs after had failed already): why. */
  error?: string
}

/**
 * Kills the jobs of a stack file's processes (of `owner`, else the file's
 * directory name), what runs after others first; resolves once their trees
 * are gone.
 */
export declare function down(file?: string | undefined | null, options?: DownOptions | undefined | null): Promise<StackDownResult>

export interface DownOptions {
  /** Owner of the stack's jobs (default: the file's directory name). */
  owner?: string
}

/** `down`, `run-bg down --json`: what was killed, what runs after others first. */
export interface StackDownResult {
  file: string
  owner: string
  /** In the order killed. */
  killed: Array<StackKillResult>
}

/** A `KillResult` with the process's name. */
export interface StackKillResult extends KillResult {
  /** The process's name in the file. */
  name: string
}

/**
 * Every process visible to this user: pid, ppid, command, memoryMb,
 * startTime, isMcp; with the time taken and the total resident memory.
 */
export declare function snapshot(): ProcessSnapshot

/** `snapshot`, `run-bg ps --json`. */
export interface ProcessSnapshot {
  /** Milliseconds since the epoch. */
  timestamp: number
  processes: Array<ProcessInfo>
  /** Sum of the resident memory of the processes, in MiB. */
  totalMemoryMb: number
}

/** A process in a snapshot. */
export interface ProcessInfo {
  pid: number
  ppid: number
  /** Full argv joined with spaces (`[name]` for kernel threads). */
  command: string
  /** Resident set size in MiB. */
  memoryMb: number
  /** Start time, milliseconds since the epoch: with the pid it identifies the process. */
  startTime: number
  /**
   * The program (argv[0]'s or the executable's base name, or the script an
   * interpreter such as node or npx runs) matches one of
   * `diagnostics.resource_tracking.mcp_patterns`.
   */
  isMcp: boolean
  /** The job that owns the process (`run-bg ps --json` only). */
  jobId?: string
}

/**
 * Processes in `after` that were not in `before` (by pid and start time) and
 * lost their parent: it is gone, is init, or is a subreaper above this
 * process that adopted them. MCP processes first.
 */
export declare function detectOrphans(before: ProcessSnapshot | Array<ProcessInfo>, after: ProcessSnapshot | Array<ProcessInfo>): Array<ProcessInfo>

/**
 * Each job end from now on, from any process of the user (a job started by
 * the CLI, another Node process or this one), as it happens: an async
 * iterator of the same `data` the exit notification POSTs. A native thread
 * waits on inotify for the home's job records, so nothing polls on the JS
 * thread; `break` (the iterator's `return()`) or an aborted `signal` stops it
 * at once. A job that ends while nobody iterates is kept for the next `next()`.
 *
 * ```js
 * for await (const end of pm.watchJobs({ owner: 'agent-a' })) console.log(end.message)
 * ```
 */
export declare function watchJobs(options?: WatchJobsOptions | undefined | null): JobEnds

export interface WatchJobsOptions {
  /** Only the jobs started with this `owner`. */
  owner?: string
  /** Stops watching at once when aborted; the pending `next()` rejects with an `AbortError`. */
  signal?: AbortSignal
}

/** What `watchJobs` returns: an async iterator (and iterable) of job ends. */
export declare class JobEnds implements AsyncIterableIterator<JobEnd> {
  private constructor()
  /** The next job end (the `data` of its notification); waits for one. */
  next(): Promise<IteratorResult<JobEnd, undefined>>
  /**
   * Stops (what `break` in `for await` calls): the native thread
   * ends at once; later `next()` calls give `{ done: true }`.
   */
  return(): Promise<IteratorResult<JobEnd, undefined>>
  [Symbol.asyncIterator](): JobEnds
}

/**
 * A job's end as its exit notification's `data` says it, and as
 * `watchJobs` yields it. No value is null: the service leaves a rule's
 * `{{key}}` literal for a null.
 */
export interface JobEnd {
  /** `<jobId>:<status>` */
  eventId: string
  jobId: string
  label: string
  command: string
  /** success | failed | killed | timeout | orphaned | lost */
  status: string
  /** The exit code; 128 + the signal's number for a death by signal; -1 when none is known. */
  exitCode: number
  /** The signal's name, or `""`. */
  signal: string
  /** `exit 1`, `signal SIGSEGV`, `killed (signal SIGTERM)`, `timeout after 10m`, `orphaned`, `lost`. */
  outcome: string
  durationMs: number
  logPath: string
  /** `""` when none was given. */
  owner: string
  /** One line for an agent; a failed job's ends with its first error line. */
  message: string
  /** The last 5 lines of output, cleaned. */
  lastLines: Array<string>
}

/**
 * `watchJobs` as an EventEmitter: emits `'end'` with each job end (the same
 * `JobEnd`), `'error'` if watching fails (an `AbortError` when `signal`
 * aborts), then `'close'`. It keeps the process alive until `close()` (or the
 * abort). Bad options throw here, as `watchJobs`' do.
 *
 * ```js
 * const events = pm.jobEvents({ owner: 'agent-a' })
 * events.on('end', (end) => console.log(end.message))
 * // later: events.close()
 * ```
 */
export declare function jobEvents(options?: WatchJobsOptions | undefined | null): JobEvents

/** What `jobEvents` returns (not exported: made by `jobEvents` only). */
export interface JobEvents extends EventEmitter {
  /** Stops watching; the native thread ends at once, then `'close'` is emitted. */
  close(): void
  on(event: 'end', listener: (end: JobEnd) => void): this
  on(event: 'error', listener: (error: Error) => void): this
  on(event: 'close', listener: () => void): this
  once(event: 'end', listener: (end: JobEnd) => void): this
  once(event: 'error', listener: (error: Error) => void): this
  once(event: 'close', listener: () => void): this
}

/**
 * Snapshots around each phase of a task; reports what it left behind and
 * its memory growth, as data and as `tracing` log lines on stderr.
 */
export declare class ResourceTracker {
  constructor(options?: TrackerOptions | undefined | null)
  /**
   * Whether it tracks: `false` when `enabled: false` or config.json's
   * `diagnostics.resource_tracking.enabled` turned it off.
   */
  get enabled(): boolean
  /**
   * The environment to start tracked work with (`{ PROC_MANAGER_TRACKER: token }`);
   * once handed out, processes carrying it count as left behind too, and
   * new processes this process started itself that run on do not.
   */
  env(): Record<string, string>
  /**
   * Takes the snapshot a phase starts from, and makes this process a child
   * subreaper (Linux) until the last open phase's `snapshotAfter`, so what
   * the task orphans is re-parented here and found by ancestry even when a
   * launcher stripped the cookie. `null` when disabled.
   */
  snapshotBefore(label: string): ProcessSnapshot | null
  /**
   * Compares with the snapshot taken before `label`: orphans, memory delta,
   * warnings. A child this process killed just before is first waited for
   * (up to 1 s) until its exit has handed its processes here. Reaps the
   * zombies it adopted that provably are not children this process started
   * (never the exit status of a `child_process`), and stops being a
   * subreaper if it was not one before.
   */
  snapshotAfter(label: string): PhaseResult
}

export interface TrackerOptions {
  /** `false`: the tracker does nothing and logs nothing. */
  enabled?: boolean
  /** Memory growth over a phase that gives a warning (default 100). */
  memoryThresholdMb?: number
  /** Substrings (case-insensitive) that flag a command as an MCP/browser process. */
  mcpPatterns?: Array<string>
}

/** `ResourceTracker.snapshotAfter`: what a phase left behind. */
export interface PhaseResult {
  label: string
  /** Processes the phase left behind, MCP ones first. */
  orphans: Array<ProcessInfo>
  /**
   * `ancestry` (the tracking process is a child subreaper during the phase:
   * new processes orphaned below it, with their descendants), `cookie`
   * (`tracker.env()` was handed out: new carriers of it too), or `disabled`.
   * Never run-bg supervisors, processes of other jobs, or this process's
   * own live children.
   */
  rule: string
  /** Memory of the tracked processes (below this process, and cookie carriers) at `snapshotBefore`, in MiB. */
  memoryBeforeMb: number
  /** The same at `snapshotAfter`. */
  memoryAfterMb: number
  memoryDeltaMb: number
  /** The warnings also logged (orphans found, memory growth or memory left over the threshold). */
  warnings: Array<string>
  /** Memory of the processes left behind (`orphans`), in MiB. */
  orphanMemoryMb: number
  /** `pss` (proportional set size from /proc/<pid>/smaps_rollup, for every process) or `rss`. */
  memorySource: 'pss' | 'rss'
}
