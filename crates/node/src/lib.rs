//! The napi face: converts JS options and results to and from the core.
//! Nothing here decides behaviour; `core` does.

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]

mod abort;
mod binary;
mod call_options;
mod core_calls;
mod in_call_order;
mod js_args;
mod js_serde;
mod js_shown;
mod logging;
mod promise;

pub mod follow;
pub mod stack;
mod stream;
pub mod tracking;
pub mod watch;

use abort::{cancel_for, refuse_aborted};
use binary::supervisor_exe;
use call_options::{list_filter, read_tail_query, tail_query, JsApi, RunOptions};
use core_calls::{api, context, context_for_kill, napi_to_core, shape, Failure, Outcome};
use js_args::{no_more, o_value, string_arg, Options};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use promise::{rejecting, spawn_promise, Settle, Settled};
use proc_manager_core::present::view::{
    CheckView, JobResultView, JobView, KillView, LogReadView, OrphanReportView, PauseView, ReconcileView, StartView, WaitView, YieldView,
};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::request::StartRequest;
use proc_manager_core::verbs::start::start_job;
use proc_manager_core::verbs::verb_options::{
    CheckTextOptions, KillOptions, LogsOptions, OrphansOptions, PruneOptions, RerunOptions, SendOptions, SummaryOptions, WaitOptions, YieldOptions,
};
use proc_manager_core::verbs::yielding::Yielded;

/// Starts `command` in the background under its own supervisor. Returns once
/// the main process has started; throws if it cannot (then recorded as a
/// `failed` job). Without `options.args`, `command` runs with `/bin/sh -c` (on Windows `cmd.exe /d /s /c`).
#[napi(ts_args_type = "command: string, options?: RunOptions | undefined | null", ts_return_type = "RunResult")]
pub fn run_background(env: &Env, command: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("runBackground", "command and options", extra)?;
        let command = string_arg("command", command)?;
        let mut o = Options::new("runBackground", options)?;
        let options = RunOptions::read(&mut o)?;
        o.finish()?;
        Ok(shape(&StartView::from(&start(command, options)?))?)
    })
}

/// Starts an ended job again as a new job: the command, cwd, `env` additions
/// and options it was started with; the new job's `rerunOf` names the old one.
/// Throws for a job still running (kill it first), an unknown one, and a
/// record that keeps no command. `overrides`: only an empty object for now.
#[napi(ts_args_type = "jobId: string, overrides?: Record<string, never> | undefined | null", ts_return_type = "RunResult")]
pub fn rerun_job(env: &Env, job_id: Unknown, overrides: Option<Unknown>, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("rerunJob", "jobId and overrides", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("rerunJob", overrides)?;
        let RerunOptions {} = o.serde()?;
        o.finish()?;
        proc_manager_core::model::ids::validate_job_id(&job_id)?;
        let started = context()?.rerun(&job_id, &JsApi, &supervisor_exe()?)?;
        Ok(shape(&StartView::from(&started))?)
    })
}

fn start(command: String, options: RunOptions) -> Outcome<proc_manager_core::verbs::request::Started> {
    let request = StartRequest::command_line(command, options.args)?;
    let request = options.start.into_request(request, &JsApi)?;
    let context = context()?;
    Ok(start_job(&context, request, &supervisor_exe()?)?)
}

/// The JSON Schema of `runBackground`'s options beyond `args`, from their one
/// definition in the core: each property with its doc (`description`), its
/// MCP line (`x-mcp`) or why the MCP tool leaves it out (`x-mcp-omit`);
/// `x-order` lists them in the order they are read. The MCP server builds
/// `run_background`'s input from it.
#[napi(ts_return_type = "Record<string, any>")]
pub fn start_options_schema() -> serde_json::Value {
    proc_manager_core::verbs::start_options::schema()
}

/// The JSON Schemas of the verbs' options, by verb (`check`, `list`,
/// `wait`, `kill`, `orphans`, `logs`, `send`, `prune`, `summary`, `up`,
/// `down`, and the JS API's own `watch` and `tracker`), from their one definition in the core, as `startOptionsSchema`
/// gives the start's: `x-all` marks the kill options only `killAll` takes,
/// `x-calls` the calls that take each of `logs` (`readLog`, `followLog`,
/// `followLogs`), `x-cli-omit` why `run-bg` leaves one out. The MCP server
/// builds its tools' inputs from them, scripts/options-dts.mjs the option
/// interfaces of index.d.ts.
#[napi(ts_return_type = "Record<string, any>")]
pub fn verb_options_schema() -> serde_json::Value {
    proc_manager_core::verbs::verb_options::schema()
}

/// The JSON Schemas of the results (`RunResult`, `CheckResult`, `LogRead`,
/// `JobSummary`, `CorruptJob`, `JobResult`, `KillResult`, `PauseResult`,
/// `SendResult`, `CleanupReport`, and `Summary`: the lines `summary()`
/// joins), keyed by these names, derived from the core's one definition of
/// each: as serialized, a field that is left out when it has no value is not
/// `required`. The MCP server builds its tools' output schemas from them.
#[napi(ts_return_type = "Record<string, any>")]
pub fn result_schemas() -> serde_json::Value {
    proc_manager_core::present::schema::schema()
}

/// The JSON Schemas of every result the functions return, keyed by its
/// index.d.ts name, from the core's one definition of each (its view): the
/// results nested in another referenced (`$ref`), properties in their
/// declaration order, `x-ts` naming a string union's type. What
/// scripts/options-dts.mjs writes index.d.ts's result interfaces from.
#[napi(ts_return_type = "Record<string, any>")]
pub fn result_types() -> serde_json::Value {
    proc_manager_core::present::schema::typescript()
}

/// Status, exit code, runtime and the last lines of a job's output; with
/// `text: true` also `checkJobText`'s text of this same check.
#[napi(ts_args_type = "jobId: string, options?: CheckJobOptions | undefined | null", ts_return_type = "CheckResult")]
pub fn check_job(env: &Env, job_id: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("checkJob", "jobId and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("checkJob", options)?;
        let query = read_tail_query(&mut o)?;
        let with_text = o.serde::<CheckTextOptions>()?.text;
        o.finish()?;
        let check = context()?.check(&job_id, &query)?;
        let mut view = CheckView::from(&check);
        if with_text {
            view.text = Some(proc_manager_core::present::format::check_text(&check));
        }
        Ok(shape(&view)?)
    })
}

/// Jobs in the registry: running ones and those that ended within the hour,
/// or every job with `all: true`; then any job whose record cannot be read
/// (`CorruptJob`, without a `status` or `owner` filter).
#[napi(ts_args_type = "options?: ListOptions | undefined | null", ts_return_type = "Array<JobSummary | CorruptJob>")]
pub fn list_jobs(env: &Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("listJobs", "options", extra)?;
        let filter = list_filter("listJobs", options)?;
        let context = context()?;
        let jobs = context.list(&filter)?;
        let places = context.queue_places(&jobs)?;
        let mut shown = Vec::new();
        for job in &jobs {
            shown.push(shape(&JobView::from(job).placed(places.get(&job.id)))?);
        }
        // Unreadable records belong to no status and no owner that can be told.
        if filter.status.is_none() && filter.owner.is_none() {
            for record in context.corrupt_records()? {
                shown.push(shape(&proc_manager_core::present::view::CorruptJobView::from(&record))?);
            }
        }
        Ok(serde_json::Value::Array(shown))
    })
}

/// SIGTERM to the job's whole tree, SIGKILL after the grace period (at once
/// with `force`). Resolves once the tree is gone.
#[napi(ts_args_type = "jobId: string, options?: KillOptions | undefined | null", ts_return_type = "Promise<KillResult>")]
pub fn kill_job<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("killJob", "jobId and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("killJob", options)?;
        // A kill of one job chooses among none: no owner, no olderThanMs.
        let kill: KillOptions = o.serde_without(&KillOptions::ALL_ONLY)?;
        o.finish()?;
        let (grace, force) = (kill.grace(&JsApi)?, kill.force);
        let context = context_for_kill()?;
        proc_manager_core::model::ids::validate_job_id(&job_id)?;
        spawn_promise(env, (Cancel::never(), None), move || {
            let outcome = context.kill(&job_id, grace, force)?;
            Ok(Settled::Done(shape(&KillView::from(&outcome)).map_err(napi_to_core)?))
        })
    })
}

/// Stops a running job's whole process tree (SIGSTOP; on Windows every
/// process of its Job Object suspended) and its `timeoutMs` clock until
/// `resumeJob`. Resolves once its supervisor has stopped the tree and
/// recorded `paused`; `changed` is false for a job already paused. Rejects
/// for a job that does not run (queued, ended, orphaned).
#[napi(ts_args_type = "jobId: string", ts_return_type = "Promise<PauseResult>")]
pub fn pause_job<'env>(env: &'env Env, job_id: Unknown, extra: Option<Unknown>) -> Result<Object<'env>> {
    pause_or_resume(env, job_id, extra, true)
}

/// Continues a paused job's tree (SIGCONT; on Windows, its processes
/// resumed) and its `timeoutMs` clock from where the pause stopped it;
/// `changed` is false for a job not paused.
#[napi(ts_args_type = "jobId: string", ts_return_type = "Promise<PauseResult>")]
pub fn resume_job<'env>(env: &'env Env, job_id: Unknown, extra: Option<Unknown>) -> Result<Object<'env>> {
    pause_or_resume(env, job_id, extra, false)
}

fn pause_or_resume<'env>(env: &'env Env, job_id: Unknown, extra: Option<Unknown>, pause: bool) -> Result<Object<'env>> {
    rejecting(env, || {
        let job_id = string_arg("jobId", job_id)?;
        no_more(if pause { "pauseJob" } else { "resumeJob" }, "only jobId", extra)?;
        let context = context()?;
        proc_manager_core::model::ids::validate_job_id(&job_id)?;
        spawn_promise(env, (Cancel::never(), None), move || {
            let outcome = if pause { context.pause(&job_id)? } else { context.resume(&job_id)? };
            Ok(Settled::Done(shape(&PauseView::from(&outcome)).map_err(napi_to_core)?))
        })
    })
}

/// Kills every running job, and every ended one whose processes live on (of
/// `owner`, when given; started over `olderThanMs` ago, when given), all at once.
#[napi(ts_args_type = "options?: KillAllOptions | undefined | null", ts_return_type = "Promise<KillResult[]>")]
pub fn kill_all<'env>(env: &'env Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("killAll", "options", extra)?;
        let mut o = Options::new("killAll", options)?;
        let kill: KillOptions = o.serde()?;
        o.finish()?;
        let grace = kill.grace(&JsApi)?;
        let older_than = kill.older_than(&JsApi)?;
        let selection = kill.selection(&JsApi)?;
        let force = kill.force;
        let context = context_for_kill()?;
        spawn_promise(env, (Cancel::never(), None), move || {
            // One job that cannot be killed does not hide what happened to the others.
            let results = context.kill_all(&selection, older_than, grace, force)?;
            let views: Vec<KillView> = results
                .iter()
                .map(|r| match r {
                    Ok(outcome) => KillView::from(outcome),
                    Err((job_id, e)) => KillView::refused(job_id, e),
                })
                .collect();
            Ok(Settled::Done(shape(&views).map_err(napi_to_core)?))
        })
    })
}

/// Resolves when the job ends (with `ready: true`, once it is ready), or
/// `timeoutMs` passes (`timedOut: true`); rejects with an `AbortError` at
/// once when `signal` aborts (the job runs on).
#[napi(ts_args_type = "jobId: string, options?: WaitOptions | undefined | null", ts_return_type = "Promise<JobResult>")]
pub fn wait_job<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("waitJob", "jobId and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("waitJob", options)?;
        // `signal` is this face's own, listed after timeoutMs as index.d.ts has it.
        let (wait, signal) = o.serde_with::<WaitOptions, _>("timeoutMs", |o| o.signal("signal"))?;
        o.finish()?;
        let (timeout, ready) = (wait.timeout(&JsApi)?, wait.ready);
        let context = context()?;
        proc_manager_core::model::ids::validate_job_id(&job_id)?;
        let cancel = cancel_for(env, signal)?;
        let waiting = cancel.0.clone();
        spawn_promise(env, cancel, move || {
            let ids = std::slice::from_ref(&job_id);
            let waited = if ready { context.wait_ready_or_cancel(ids, timeout, &waiting) } else { context.wait_or_cancel(ids, timeout, &waiting) };
            let Some(outcome) = waited? else {
                return Ok(Settled::Aborted(None));
            };
            let mut view = if ready { WaitView::until_ready(&outcome) } else { WaitView::from(&outcome) };
            let one: JobResultView = view.jobs.remove(0);
            Ok(Settled::Done(shape(&one).map_err(napi_to_core)?))
        })
    })
}

/// Verifies running jobs against the OS: supervisor gone but processes alive
/// → `orphaned`; both gone with no exit status → `lost`.
#[napi(ts_args_type = "", ts_return_type = "ReconcileResult")]
pub fn reconcile(env: &Env, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("reconcile", "no arguments", extra)?;
        let (orphaned, lost) = context()?.reconcile()?;
        Ok(shape(&ReconcileView::new(&orphaned, &lost))?)
    })
}

/// Forgets finished jobs (that ended over `olderThanMs` ago, when given) and
/// deletes their logs. Returns the ids removed. `olderThanMs` may be given
/// as the number itself.
#[napi(ts_args_type = "options?: PruneOptions | number | undefined | null")]
pub fn prune_jobs(env: &Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Vec<String>> {
    api(env, || {
        no_more("pruneJobs", "options (or olderThanMs)", extra)?;
        let prune: PruneOptions = match options {
            // Anything but an options object is `olderThanMs` itself, read and checked as that option.
            Some(value) if !matches!(value.get_type()?, napi::ValueType::Object | napi::ValueType::Undefined | napi::ValueType::Null) => {
                o_value("olderThanMs", value)?
            }
            options => {
                let mut o = Options::new("pruneJobs", options)?;
                let prune = o.serde()?;
                o.finish()?;
                prune
            }
        };
        Ok(context()?.prune(prune.older_than(&JsApi)?)?)
    })
}

/// Finds orphaned jobs and processes left behind by ended jobs; with
/// `mode: 'kill'` removes them. Resolves with what was found, killed and failed.
#[napi(ts_args_type = "options?: CleanupOptions | undefined | null", ts_return_type = "Promise<CleanupReport>")]
pub fn cleanup_orphans<'env>(env: &'env Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("cleanupOrphans", "options", extra)?;
        let mut o = Options::new("cleanupOrphans", options)?;
        let orphans: OrphansOptions = o.serde()?;
        o.finish()?;
        let orphan_options = orphans.options(&JsApi)?;
        let kill = orphan_options.kill;
        let context = if kill { context_for_kill()? } else { context()? };
        spawn_promise(env, (Cancel::never(), None), move || {
            let report = context.orphans(&orphan_options)?;
            Ok(Settled::Done(shape(&OrphanReportView::from(&report)).map_err(napi_to_core)?))
        })
    })
}

/// The lines an agent harness puts in front of each model call: running jobs
/// (pid, command, runtime, last line) and ended jobs not looked at yet. An
/// empty string when there is nothing to say.
#[napi(ts_args_type = "options?: SummaryOptions | undefined | null")]
pub fn summary(env: &Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<String> {
    api(env, || {
        no_more("summary", "options", extra)?;
        let mut o = Options::new("summary", options)?;
        let summary: SummaryOptions = o.serde()?;
        o.finish()?;
        let session = summary.session(&JsApi)?;
        Ok(context()?.summary(summary.owner.as_deref(), session.as_ref())?.join("\n"))
    })
}

/// Starts `command` like `runBackground` (the same options), then waits up
/// to `yieldMs`: resolves with the check result if the job ended by then,
/// else with the running job's id (`done: false`), leaving it running. An
/// aborted `signal` stops the wait at once (the job runs on) and rejects
/// with an `AbortError` whose `jobId` names that job.
#[napi(ts_args_type = "command: string, options: YieldOptions", ts_return_type = "Promise<YieldResult>")]
pub fn run_yield<'env>(env: &'env Env, command: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("runYield", "command and options", extra)?;
        let command = string_arg("command", command)?;
        let mut o = Options::new("runYield", options)?;
        let wait: YieldOptions = o.serde()?;
        let run = RunOptions::read(&mut o)?;
        let signal = o.signal("signal")?;
        o.finish()?;
        let yield_for = wait.required(&JsApi)?;
        // Refused before the job starts; the listener is added after, so a
        // start that fails leaves neither a listener nor a cancel pipe.
        refuse_aborted(env, signal.as_ref())?;
        let context = context()?;
        let started = start(command, run)?;
        let cancel = cancel_for(env, signal).map_err(|e| {
            proc_manager_core::Error::Other(format!("{} (job {} was started and runs on)", e.message(), started.job_id))
        })?;
        let waiting = cancel.0.clone();
        spawn_promise(env, cancel, move || {
            let job_id = started.job_id;
            let view = match context.yield_to(&job_id, yield_for, &waiting)? {
                Yielded::Cancelled => return Ok(Settled::Aborted(Some(job_id))),
                Yielded::Running => YieldView { job_id, done: false, ready: false, check: None },
                Yielded::Ended(check) => {
                    YieldView { job_id, done: true, ready: false, check: Some(CheckView::from(check.as_ref())) }
                }
                Yielded::Ready(check) => YieldView {
                    job_id,
                    done: false,
                    ready: check.job.ready_at.is_some(),
                    check: Some(CheckView::from(check.as_ref())),
                },
            };
            Ok(Settled::Done(shape(&view).map_err(napi_to_core)?))
        })
    })
}

/// `checkJob` as the CLI prints it: a header line, what needs attention, then
/// the lines. For agents and tools that relay text (the MCP server).
#[napi(ts_args_type = "jobId: string, options?: CheckOptions | undefined | null")]
pub fn check_job_text(env: &Env, job_id: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<String> {
    api(env, || {
        no_more("checkJobText", "jobId and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let query = tail_query("checkJobText", options)?;
        let check = context()?.check(&job_id, &query)?;
        Ok(proc_manager_core::present::format::check_text(&check))
    })
}

/// `listJobs` as the CLI prints it, one line per job.
#[napi(ts_args_type = "options?: ListOptions | undefined | null")]
pub fn list_jobs_text(env: &Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<String> {
    api(env, || {
        no_more("listJobsText", "options", extra)?;
        let filter = list_filter("listJobsText", options)?;
        let context = context()?;
        let jobs = context.list(&filter)?;
        let places = context.queue_places(&jobs)?;
        let corrupt = if filter.status.is_none() && filter.owner.is_none() {
            context.corrupt_records()?
        } else {
            Vec::new()
        };
        let mut lines = proc_manager_core::present::format::list_text(&jobs, &places, &context.leftover_counts(&jobs));
        lines.extend(corrupt.iter().map(proc_manager_core::present::format::corrupt_line));
        Ok(if lines.is_empty() {
            proc_manager_core::present::format::nothing_listed(&filter, "all: true")
        } else {
            lines.join("\n")
        })
    })
}

/// A range of a job's log lines (`fromLine`, `lines`), or the lines written
/// after a cursor (`since`, from `checkJob` or an earlier `readLog`), across
/// rotations; a line of any length is one line, shown cut.
#[napi(ts_args_type = "jobId: string, options?: ReadLogOptions | undefined | null", ts_return_type = "LogRead")]
pub fn read_log(env: &Env, job_id: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("readLog", "jobId and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("readLog", options)?;
        let read: LogsOptions = o.serde_without(&LogsOptions::left_out("readLog"))?;
        o.finish()?;
        let range = read.range(&JsApi)?;
        let (job, read) = context()?.read_log_within(&job_id, range, read.max_chars)?;
        Ok(shape(&LogReadView::new(&job.id, &read))?)
    })
}

/// Writes `text` and a newline (unless `newline: false`) to the stdin of a
/// job started with `stdin: 'pipe'`; `eof: true` then closes it. Rejects for
/// a job without a stdin pipe, one that has ended, or one that does not read
/// its stdin for 5 s (more than the pipe's 64 KiB waiting); that wait runs on
/// a worker thread, not on the event loop. Calls to one job are written one at
/// a time, in the order they were made.
#[napi(ts_args_type = "jobId: string, text: string, options?: SendInputOptions | undefined | null", ts_return_type = "Promise<SendResult>")]
pub fn send_input<'env>(env: &'env Env, job_id: Unknown, text: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("sendInput", "jobId, text and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let text = string_arg("text", text)?;
        let mut o = Options::new("sendInput", options)?;
        let send: SendOptions = o.serde()?;
        o.finish()?;
        let (data, eof) = (send.data(Some(text.into_bytes())), send.eof);
        let context = context()?;
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        let job = job_id.clone();
        in_call_order::queue(&job, Box::new(move |may_run| {
            let sent = may_run.map_err(proc_manager_core::Error::Other).and_then(|()| {
                let sent = context.send_input(&job_id, &data, eof)?;
                shape(&proc_manager_core::present::view::SendView::from(&sent)).map_err(napi_to_core)
            });
            deferred.resolve(Box::new(move |env| sent.map_err(|e| Failure::Core(e).into_js(&env))));
        }));
        Ok(promise)
    })
}
