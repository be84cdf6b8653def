//! The napi face: converts JS options and results to and from the core.
//! Nothing here decides behaviour; `core` does.

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]


mod js_args;

use proc_manager_core::verbs::ops::{Context, KillOutcome, ListFilter, OrphanOptions, OrphanProcess, TailQuery};
use proc_manager_core::os::procinfo::ProcessEntry;
use proc_manager_core::verbs::procs;
use proc_manager_core::verbs::spawn::{start_job, StartRequest};
use proc_manager_core::present::view::{JobView, shell_exit_code};
use proc_manager_core::model::job::JobStatus;
use proc_manager_core::model::text::visible;
use js_args::{millis_arg, string_arg, Options};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Error messages quote user input (a path, an id, a label): written out so
/// that whoever prints them prints no control characters.
fn to_js_error(error: proc_manager_core::Error) -> napi::Error {
    let message = match error {
        proc_manager_core::Error::StartFailed { job_id, message } => format!("{message} (recorded as failed job {job_id})"),
        other => other.to_string(),
    };
    napi::Error::from_reason(visible(&message).into_owned())
}

fn context() -> Result<Context> {
    with_runner(Context::load().map_err(to_js_error)?)
}

/// See `Context::load_for_kill`: a broken config.json never blocks a kill.
fn context_for_kill() -> Result<Context> {
    with_runner(Context::load_for_kill().map_err(to_js_error)?)
}

fn with_runner(context: Context) -> Result<Context> {
    // Without the binary the API still reads jobs; starting one reports the problem.
    Ok(match supervisor_exe() {
        Ok(exe) => context.with_runner(exe),
        Err(_) => context,
    })
}

/// The supervisor is the `run-bg` binary: `$PROC_MANAGER_BINARY_PATH`, else
/// next to this addon (native/run-bg in a checkout and in a platform package).
fn supervisor_exe() -> Result<PathBuf> {
    if let Some(explicit) = std::env::var_os("PROC_MANAGER_BINARY_PATH").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(explicit));
    }
    // The older override. Every supervisor and helper carries this name as its
    // mark (a job id or "helper"), which on-exit hooks inherit: only an
    // absolute path names a binary.
    if let Some(explicit) = std::env::var_os("PROC_MANAGER_SUPERVISOR").filter(|v| Path::new(v).is_absolute()) {
        return Ok(PathBuf::from(explicit));
    }
    let addon = addon_path().ok_or_else(|| napi::Error::from_reason("cannot locate the proc-manager addon file"))?;
    let dir = addon.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join("native/run-bg"),
        dir.join("target/release/run-bg"),
        dir.join(format!("target/{}/release/run-bg", env!("PROC_MANAGER_TARGET"))),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        napi::Error::from_reason(format!(
            "cannot find the run-bg executable (looked for {}); in a checkout run `npm run build`, else reinstall this platform's package (`npm install proc-manager-<platform>`), or set PROC_MANAGER_BINARY_PATH",
            candidates[0].display()
        ))
    })
}

fn addon_path() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: Dl_info is a plain C struct (pointers and ints) for which
    // all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address is a function of this library, mapped for as long
    // as the addon is loaded; `info` is a live out-parameter.
    let found = unsafe { libc::dladdr(addon_path as *const () as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded and dli_fname is non-null: a NUL-terminated
    // path owned by the loader, valid while the library stays loaded, and
    // copied out below before we return.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
}

/// Options of `runBackground`; they mirror the CLI's flags.
#[napi(object)]
#[derive(Default)]
pub struct RunOptions {
    /// When given, `command` is a program and `args` its argv (no shell).
    pub args: Option<Vec<String>>,
    /// Human name (default: the program's name).
    pub label: Option<String>,
    /// Working directory (default: the current one).
    pub cwd: Option<String>,
    /// Extra environment variables.
    pub env: Option<HashMap<String, String>>,
    /// Kill the job's tree after this many milliseconds.
    pub timeout_ms: Option<f64>,
    /// The agent or thread that owns the job.
    pub owner: Option<String>,
    /// Arbitrary JSON kept with the job.
    pub context: Option<serde_json::Value>,
    /// `false`: no exit notification for this job.
    pub notify: Option<bool>,
    /// Run this (with /bin/sh -c) when the job ends.
    pub on_exit: Option<String>,
}

impl RunOptions {
    fn read(o: &mut Options) -> Result<RunOptions> {
        Ok(RunOptions {
            args: o.strings("args")?,
            label: o.string("label")?,
            cwd: o.string("cwd")?,
            env: o.string_map("env")?,
            timeout_ms: o.millis("timeoutMs", 1)?.map(|ms| ms as f64),
            owner: o.string("owner")?,
            context: o.json("context")?,
            notify: o.boolean("notify")?,
            on_exit: o.string("onExit")?,
        })
    }
}

#[napi(object)]
pub struct RunResult {
    pub job_id: String,
    pub pid: u32,
    pub log_path: String,
    pub label: String,
}

/// A job as recorded, with its status verified against the OS.
#[napi(object)]
pub struct JobSummary {
    pub job_id: String,
    pub label: String,
    pub command: String,
    /// running | success | failed | killed | timeout | orphaned | lost
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub pid: Option<u32>,
    /// Milliseconds since the epoch.
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub duration_ms: f64,
    pub log_path: String,
    pub cwd: String,
    pub owner: Option<String>,
    pub context: Option<serde_json::Value>,
    /// Why the job could not start, or what went wrong around it.
    pub error: Option<String>,
    /// The announcement of the job's end to the interrupt service.
    pub notification: Option<NotificationInfo>,
    /// Command hooks run when the job ended.
    pub hooks: Vec<HookInfo>,
}

#[napi(object)]
pub struct NotificationInfo {
    /// `<jobId>:<status>`, stable across retries.
    pub event_id: String,
    /// pending | delivered | failed
    pub state: String,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub delivered_at: Option<f64>,
}

#[napi(object)]
pub struct HookInfo {
    pub command: String,
    pub exit_code: Option<i32>,
    /// Why it failed (exited non-zero, timed out, could not start).
    pub error: Option<String>,
    pub duration_ms: f64,
}

fn notification_info(v: Option<proc_manager_core::present::view::NotificationView>) -> Option<NotificationInfo> {
    v.map(|n| NotificationInfo {
        event_id: n.event_id,
        state: n.state,
        attempts: n.attempts,
        last_error: n.last_error,
        delivered_at: n.delivered_at.map(|t| t as f64),
    })
}

fn hook_infos(hooks: Vec<proc_manager_core::present::view::HookView>) -> Vec<HookInfo> {
    hooks
        .into_iter()
        .map(|h| HookInfo { command: h.command, exit_code: h.exit_code, error: h.error, duration_ms: h.duration_ms as f64 })
        .collect()
}

impl From<JobView> for JobSummary {
    fn from(v: JobView) -> JobSummary {
        JobSummary {
            job_id: v.job_id,
            label: v.label,
            command: v.command,
            status: v.status,
            exit_code: v.exit_code,
            signal: v.signal,
            pid: v.pid,
            started_at: v.started_at as f64,
            ended_at: v.ended_at.map(|t| t as f64),
            duration_ms: v.duration_ms as f64,
            log_path: v.log_path,
            cwd: v.cwd,
            owner: v.owner,
            context: v.context,
            error: v.error,
            notification: notification_info(v.notification),
            hooks: hook_infos(v.hooks),
        }
    }
}

fn summary_of(job: &proc_manager_core::model::job::Job) -> JobSummary {
    JobSummary::from(JobView::from(job))
}

/// `checkJob`'s answer: the job plus the last lines of its output.
#[napi(object)]
pub struct CheckResult {
    pub job_id: String,
    pub label: String,
    pub command: String,
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub pid: Option<u32>,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub duration_ms: f64,
    pub log_path: String,
    pub error: Option<String>,
    pub notification: Option<NotificationInfo>,
    pub hooks: Vec<HookInfo>,
    /// Last lines of output, oldest first.
    pub tail: Vec<String>,
    /// Processes still running although the main process ended (or its supervisor died).
    pub lingering: Vec<JobProcess>,
    /// How many of the job's processes run now (running or lingering).
    pub processes: Option<u32>,
    /// Their resident memory now.
    pub rss_mb: Option<f64>,
    /// Peak RSS of the job's largest process, once it has ended.
    pub peak_rss_mb: Option<f64>,
}

/// One of a job's processes.
#[napi(object)]
pub struct JobProcess {
    pub pid: u32,
    /// argv joined with spaces.
    pub command: String,
}

impl From<&ProcessEntry> for JobProcess {
    fn from(entry: &ProcessEntry) -> JobProcess {
        JobProcess { pid: entry.identity.pid, command: entry.command.clone() }
    }
}

#[napi(object)]
pub struct CheckOptions {
    /// How many lines (default 20).
    pub lines: Option<i64>,
    /// Only lines matching this regular expression.
    pub grep: Option<String>,
    /// Only lines that look like errors, each with a line of context.
    pub errors: Option<bool>,
}

#[napi(object)]
pub struct ListOptions {
    pub status: Option<String>,
    pub owner: Option<String>,
    /// Include jobs that ended over an hour ago.
    pub all: Option<bool>,
}

#[napi(object)]
pub struct KillOptions {
    /// Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms).
    pub grace_ms: Option<f64>,
    /// SIGKILL at once.
    pub force: Option<bool>,
}

#[napi(object)]
pub struct KillAllOptions {
    pub owner: Option<String>,
    pub grace_ms: Option<f64>,
    pub force: Option<bool>,
}

#[napi(object)]
pub struct KillResult {
    pub job_id: String,
    pub status: String,
    /// Whether a signal was sent (false when the job had already ended).
    pub signalled: bool,
    pub message: String,
    /// In `killAll` results: why this job could not be killed.
    pub error: Option<String>,
}

impl From<KillOutcome> for KillResult {
    fn from(o: KillOutcome) -> KillResult {
        KillResult {
            status: o.job.status().as_str().into(),
            job_id: o.job.id,
            signalled: o.signalled,
            // A message to show (the MCP server relays it): written out like the CLI's.
            message: visible(&o.message).into_owned(),
            error: None,
        }
    }
}

#[napi(object)]
pub struct WaitOptions {
    /// Give up after this many milliseconds; the result then has `timedOut: true`.
    pub timeout_ms: Option<f64>,
}

#[napi(object)]
pub struct JobResult {
    pub job_id: String,
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub duration_ms: f64,
    pub timed_out: bool,
    /// The exit status a shell would report (128+signal for a signal), or
    /// 124 when `timeoutMs` passed first, as `run-bg wait` exits.
    pub shell_exit_code: i32,
}

#[napi(object)]
pub struct ReconcileResult {
    pub orphaned: Vec<JobSummary>,
    pub lost: Vec<JobSummary>,
}

/// Starts `command` in the background under its own supervisor. Returns once
/// the main process has started; throws if it cannot (then recorded as a
/// `failed` job). Without `options.args`, `command` runs with `/bin/sh -c`.
#[napi(ts_args_type = "command: string, options?: RunOptions | undefined | null")]
pub fn run_background(command: Unknown, options: Option<Unknown>) -> Result<RunResult> {
    let command = string_arg("command", command)?;
    let mut o = Options::new("runBackground", options)?;
    let options = RunOptions::read(&mut o)?;
    o.finish()?;
    start(command, options)
}

fn start(command: String, options: RunOptions) -> Result<RunResult> {
    let mut request = match options.args {
        Some(args) => {
            let mut argv = vec![command];
            argv.extend(args);
            StartRequest::program(argv)
        }
        None => {
            if command.trim().is_empty() {
                return Err(napi::Error::from_reason("empty command: give the command line to run"));
            }
            StartRequest::shell(&command)
        }
    };
    request.label = options.label;
    request.cwd = options.cwd.map(PathBuf::from);
    request.env = options.env.unwrap_or_default().into_iter().collect();
    request.timeout_ms = options.timeout_ms.map(|ms| ms as u64);
    request.owner = options.owner;
    request.context = options.context;
    request.notify = options.notify.unwrap_or(true);
    request.on_exit = options.on_exit;
    let context = context()?;
    let started = start_job(&context, request, &supervisor_exe()?).map_err(to_js_error)?;
    Ok(RunResult { job_id: started.job_id, pid: started.pid, log_path: started.log_path, label: started.label })
}

/// Status, exit code, runtime and the last lines of a job's output.
#[napi(ts_args_type = "jobId: string, options?: CheckOptions | undefined | null")]
pub fn check_job(job_id: Unknown, options: Option<Unknown>) -> Result<CheckResult> {
    let job_id = string_arg("jobId", job_id)?;
    let query = tail_query("checkJob", options)?;
    Ok(check_to_js(context()?.check(&job_id, &query).map_err(to_js_error)?))
}

fn tail_query(function: &'static str, options: Option<Unknown>) -> Result<TailQuery> {
    let mut o = Options::new(function, options)?;
    let options = CheckOptions {
        lines: o.count("lines", "lines")?.map(|n| n as i64),
        grep: o.string("grep")?,
        errors: o.boolean("errors")?,
    };
    o.finish()?;
    TailQuery::new(options.lines.map(|n| n as usize), options.grep.as_deref())
        .and_then(|q| q.errors(options.errors.unwrap_or(false)))
        .map_err(to_js_error)
}

fn check_to_js(check: proc_manager_core::verbs::ops::CheckResult) -> CheckResult {
    let v = JobView::from(&check.job);
    CheckResult {
        job_id: v.job_id,
        label: v.label,
        command: v.command,
        status: v.status,
        exit_code: v.exit_code,
        signal: v.signal,
        pid: v.pid,
        started_at: v.started_at as f64,
        ended_at: v.ended_at.map(|t| t as f64),
        duration_ms: v.duration_ms as f64,
        log_path: v.log_path,
        error: v.error,
        notification: notification_info(v.notification),
        hooks: hook_infos(v.hooks),
        tail: check.tail,
        lingering: check.lingering.iter().map(JobProcess::from).collect(),
        processes: check.usage.map(|u| u.processes as u32),
        rss_mb: check.usage.map(|u| proc_manager_core::present::view::kb_to_mb(u.rss_kb)),
        peak_rss_mb: v.peak_rss_mb,
    }
}

/// Jobs in the registry: running ones and those that ended within the hour,
/// or every job with `all: true`.
#[napi(ts_args_type = "options?: ListOptions | undefined | null")]
pub fn list_jobs(options: Option<Unknown>) -> Result<Vec<JobSummary>> {
    let filter = list_filter("listJobs", options)?;
    Ok(context()?.list(&filter).map_err(to_js_error)?.iter().map(summary_of).collect())
}

fn list_filter(function: &'static str, options: Option<Unknown>) -> Result<ListFilter> {
    let mut o = Options::new(function, options)?;
    let options = ListOptions { status: o.string("status")?, owner: o.string("owner")?, all: o.boolean("all")? };
    o.finish()?;
    let status = options.status.map(|s| JobStatus::parse_or_explain(&s).map_err(|e| napi::Error::from_reason(e.to_string()))).transpose()?;
    Ok(ListFilter { status, owner: options.owner, all: options.all.unwrap_or(false) || status.is_some() })
}

/// Runs blocking `work` on its own thread and settles a promise with it, so
/// a long wait never occupies one of libuv's few pool threads.
fn spawn_promise<T, F>(env: &Env, work: F) -> Result<Object<'_>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> std::result::Result<T, proc_manager_core::Error> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    std::thread::Builder::new()
        .name("proc-manager-wait".into())
        .spawn(move || match work() {
            Ok(value) => deferred.resolve(move |_| Ok(value)),
            Err(e) => deferred.reject(to_js_error(e)),
        })
        .map_err(|e| napi::Error::from_reason(format!("cannot start a thread: {e}")))?;
    Ok(promise)
}

/// A promise-returning function rejects, never throws, on bad input, as an
/// async function would: `body` checks its arguments before any work starts.
fn rejecting<'env>(env: &'env Env, body: impl FnOnce() -> Result<Object<'env>>) -> Result<Object<'env>> {
    body().or_else(|e| {
        let (deferred, promise) = env.create_deferred::<(), fn(Env) -> Result<()>>()?;
        deferred.reject(e);
        Ok(promise)
    })
}

/// SIGTERM to the job's whole tree, SIGKILL after the grace period (at once
/// with `force`). Resolves once the tree is gone.
#[napi(
    ts_args_type = "jobId: string, options?: KillOptions | undefined | null",
    ts_return_type = "Promise<KillResult>"
)]
pub fn kill_job<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("killJob", options)?;
        let (grace, force) = (o.millis("graceMs", 0)?.map(Duration::from_millis), o.boolean("force")?.unwrap_or(false));
        o.finish()?;
        let context = context_for_kill()?;
        proc_manager_core::model::ids::validate_job_id(&job_id).map_err(to_js_error)?;
        spawn_promise(env, move || context.kill(&job_id, grace, force).map(KillResult::from))
    })
}

/// Kills every running job (of `owner`, when given), all at once.
#[napi(ts_args_type = "options?: KillAllOptions | undefined | null", ts_return_type = "Promise<KillResult[]>")]
pub fn kill_all<'env>(env: &'env Env, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let mut o = Options::new("killAll", options)?;
        let owner = o.string("owner")?;
        let grace = o.millis("graceMs", 0)?.map(Duration::from_millis);
        let force = o.boolean("force")?.unwrap_or(false);
        o.finish()?;
        let context = context_for_kill()?;
        spawn_promise(env, move || {
            // One job that cannot be killed does not hide what happened to the others.
            let results = context.kill_all(owner.as_deref(), grace, force)?;
            Ok(results
                .into_iter()
                .map(|r| match r {
                    Ok(outcome) => KillResult::from(outcome),
                    Err((job_id, e)) => KillResult {
                        job_id,
                        status: "unknown".into(),
                        signalled: false,
                        message: visible(&e.to_string()).into_owned(),
                        error: Some(visible(&e.to_string()).into_owned()),
                    },
                })
                .collect::<Vec<_>>())
        })
    })
}

/// Resolves when the job ends (or `timeoutMs` passes: `timedOut: true`).
#[napi(
    ts_args_type = "jobId: string, options?: WaitOptions | undefined | null",
    ts_return_type = "Promise<JobResult>"
)]
pub fn wait_job<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("waitJob", options)?;
        let timeout = o.millis("timeoutMs", 0)?.map(Duration::from_millis);
        o.finish()?;
        let context = context()?;
        proc_manager_core::model::ids::validate_job_id(&job_id).map_err(to_js_error)?;
        spawn_promise(env, move || {
            let outcome = context.wait(std::slice::from_ref(&job_id), timeout)?;
            let job = &outcome.jobs[0];
            Ok(JobResult {
                job_id: job.id.clone(),
                status: job.status().as_str().into(),
                exit_code: job.exit_code(),
                signal: job.signal(),
                duration_ms: job.duration_ms(proc_manager_core::now_ms()) as f64,
                timed_out: outcome.timed_out,
                shell_exit_code: if outcome.timed_out { 124 } else { shell_exit_code(job) },
            })
        })
    })
}

/// Verifies running jobs against the OS: supervisor gone but processes alive
/// → `orphaned`; both gone with no exit status → `lost`.
#[napi]
pub fn reconcile() -> Result<ReconcileResult> {
    let (orphaned, lost) = context()?.reconcile().map_err(to_js_error)?;
    Ok(ReconcileResult {
        orphaned: orphaned.iter().map(summary_of).collect(),
        lost: lost.iter().map(summary_of).collect(),
    })
}

/// Forgets finished jobs (that ended over `olderThanMs` ago, when given) and
/// deletes their logs. Returns the ids removed.
#[napi(ts_args_type = "olderThanMs?: number | undefined | null")]
pub fn prune_jobs(older_than_ms: Option<Unknown>) -> Result<Vec<String>> {
    let older_than = millis_arg("olderThanMs", older_than_ms)?.map(Duration::from_millis);
    context()?.prune(older_than).map_err(to_js_error)
}

#[napi(object)]
pub struct CleanupOptions {
    /// `list` (default) only reports; `kill` removes what it finds.
    pub mode: Option<String>,
    /// Only jobs of this owner.
    pub owner: Option<String>,
    /// With `kill`: SIGKILL at once instead of SIGTERM, grace, SIGKILL.
    pub force: Option<bool>,
    /// Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms).
    pub grace_ms: Option<f64>,
}

/// A process left behind by an ended (or orphaned) job.
#[napi(object)]
pub struct OrphanInfo {
    pub job_id: String,
    pub job_status: String,
    pub pid: u32,
    pub command: String,
    /// Why it could not be killed (in `failed` only).
    pub reason: Option<String>,
}

impl OrphanInfo {
    fn new(orphan: &OrphanProcess, reason: Option<String>) -> OrphanInfo {
        OrphanInfo {
            job_id: orphan.job_id.clone(),
            job_status: orphan.job_status.as_str().into(),
            pid: orphan.process.identity.pid,
            command: orphan.process.command.clone(),
            reason,
        }
    }
}

#[napi(object)]
pub struct CleanupReport {
    /// Jobs whose supervisor is gone while their processes run.
    pub orphaned_jobs: Vec<JobSummary>,
    /// Every process found that belongs to an ended or orphaned job.
    pub processes: Vec<OrphanInfo>,
    /// With `mode: 'kill'`: the processes removed.
    pub killed: Vec<OrphanInfo>,
    /// With `mode: 'kill'`: the processes that could not be removed, with `reason`.
    pub failed: Vec<OrphanInfo>,
}

/// Finds orphaned jobs and processes left behind by ended jobs; with
/// `mode: 'kill'` removes them. Resolves with what was found, killed and failed.
#[napi(ts_args_type = "options?: CleanupOptions | undefined | null", ts_return_type = "Promise<CleanupReport>")]
pub fn cleanup_orphans<'env>(env: &'env Env, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let mut o = Options::new("cleanupOrphans", options)?;
        let options = CleanupOptions {
            mode: o.string("mode")?,
            owner: o.string("owner")?,
            force: o.boolean("force")?,
            grace_ms: o.millis("graceMs", 0)?.map(|ms| ms as f64),
        };
        o.finish()?;
        let kill = match options.mode.as_deref() {
            None | Some("list") => false,
            Some("kill") => true,
            Some(other) => {
                return Err(napi::Error::from_reason(format!("bad mode `{}`: expected 'list' or 'kill'", visible(other))));
            }
        };
        let orphan_options = OrphanOptions {
            kill,
            force: options.force.unwrap_or(false),
            owner: options.owner,
            grace: options.grace_ms.map(|ms| Duration::from_millis(ms as u64)),
        };
        let context = if kill { context_for_kill()? } else { context()? };
        spawn_promise(env, move || {
            let report = context.orphans(&orphan_options)?;
            Ok(CleanupReport {
                orphaned_jobs: report.orphaned_jobs.iter().map(summary_of).collect(),
                processes: report.found.iter().map(|o| OrphanInfo::new(o, None)).collect(),
                killed: report.killed.iter().map(|o| OrphanInfo::new(o, None)).collect(),
                failed: report.failed.iter().map(|(o, why)| OrphanInfo::new(o, Some(why.clone()))).collect(),
            })
        })
    })
}

/// A process in a snapshot.
#[napi(object)]
#[derive(Clone)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// Full argv joined with spaces (`[name]` for kernel threads).
    pub command: String,
    /// Resident set size in MiB.
    pub memory_mb: f64,
    /// Start time, milliseconds since the epoch: with the pid it identifies the process.
    pub start_time: f64,
    /// The command matches one of `diagnostics.resource_tracking.mcp_patterns`.
    pub is_mcp: bool,
}

#[napi(object)]
pub struct ProcessSnapshot {
    /// Milliseconds since the epoch.
    pub timestamp: f64,
    pub processes: Vec<ProcessInfo>,
    /// Sum of the resident memory of the processes, in MiB.
    pub total_memory_mb: f64,
}

fn process_to_js(p: &procs::ProcessInfo) -> ProcessInfo {
    ProcessInfo {
        pid: p.pid,
        ppid: p.ppid,
        command: p.command.clone(),
        memory_mb: p.memory_mb,
        start_time: p.start_time as f64,
        is_mcp: p.is_mcp,
    }
}

fn process_from_js(p: &ProcessInfo) -> procs::ProcessInfo {
    procs::ProcessInfo {
        pid: p.pid,
        ppid: p.ppid,
        command: p.command.clone(),
        memory_mb: p.memory_mb,
        start_time: p.start_time as u64,
        is_mcp: p.is_mcp,
    }
}

fn snapshot_to_js(s: &procs::Snapshot) -> ProcessSnapshot {
    ProcessSnapshot {
        timestamp: s.timestamp as f64,
        processes: s.processes.iter().map(process_to_js).collect(),
        total_memory_mb: s.total_memory_mb,
    }
}

/// Every process visible to this user: pid, ppid, command, memoryMb,
/// startTime, isMcp; with the time taken and the total resident memory.
#[napi]
pub fn snapshot() -> Result<ProcessSnapshot> {
    let patterns = Context::load().map_err(to_js_error)?.config.diagnostics.resource_tracking.mcp_patterns;
    Ok(snapshot_to_js(&procs::snapshot(&patterns)))
}

/// Processes in `after` that were not in `before` (by pid and start time) and
/// lost their parent: it is gone, is init, or is a subreaper above this
/// process that adopted them. MCP processes first.
#[napi]
pub fn detect_orphans(
    before: Either<ProcessSnapshot, Vec<ProcessInfo>>,
    after: Either<ProcessSnapshot, Vec<ProcessInfo>>,
) -> Vec<ProcessInfo> {
    let list = |side: Either<ProcessSnapshot, Vec<ProcessInfo>>| -> Vec<procs::ProcessInfo> {
        let processes = match side {
            Either::A(snapshot) => snapshot.processes,
            Either::B(processes) => processes,
        };
        processes.iter().map(process_from_js).collect()
    };
    procs::detect_orphans(&list(before), &list(after), std::process::id()).iter().map(process_to_js).collect()
}

/// Overrides of `diagnostics.resource_tracking` from config.json.
#[napi(object)]
pub struct TrackerOptions {
    /// `false`: the tracker does nothing and logs nothing.
    pub enabled: Option<bool>,
    /// Memory growth over a phase that gives a warning (default 100).
    pub memory_threshold_mb: Option<f64>,
    /// Substrings (case-insensitive) that flag a command as an MCP/browser process.
    pub mcp_patterns: Option<Vec<String>>,
}

#[napi(object)]
pub struct PhaseResult {
    pub label: String,
    /// Processes the phase left behind, MCP ones first.
    pub orphans: Vec<ProcessInfo>,
    /// `cookie` (only processes started with `tracker.env()` count), `parent`
    /// (new processes whose parent is gone, init or an adopting subreaper), or
    /// `disabled`.
    pub rule: String,
    pub memory_before_mb: f64,
    pub memory_after_mb: f64,
    pub memory_delta_mb: f64,
    /// The warnings also logged (orphans found, memory growth over the threshold).
    pub warnings: Vec<String>,
}

/// Snapshots around each phase of a task; reports what it left behind and
/// its memory growth, as data and as `tracing` log lines on stderr.
#[napi]
pub struct ResourceTracker {
    inner: procs::ResourceTracker,
}

#[napi]
impl ResourceTracker {
    #[napi(constructor, ts_args_type = "options?: TrackerOptions | undefined | null")]
    pub fn new(options: Option<Unknown>) -> Result<ResourceTracker> {
        let mut o = Options::new("ResourceTracker", options)?;
        let options = TrackerOptions {
            enabled: o.boolean("enabled")?,
            memory_threshold_mb: o.amount("memoryThresholdMb", "MiB")?,
            mcp_patterns: o.strings("mcpPatterns")?,
        };
        o.finish()?;
        let mut config = Context::load().map_err(to_js_error)?.config.diagnostics.resource_tracking;
        if let Some(enabled) = options.enabled {
            config.enabled = enabled;
        }
        if let Some(threshold) = options.memory_threshold_mb {
            config.memory_threshold_mb = threshold;
        }
        if let Some(patterns) = options.mcp_patterns {
            config.mcp_patterns = patterns;
        }
        if config.enabled {
            procs::init_logging();
        }
        Ok(ResourceTracker { inner: procs::ResourceTracker::new(config) })
    }

    #[napi(getter)]
    pub fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    /// The environment to start tracked work with (`{ PROC_MANAGER_TRACKER: token }`);
    /// once handed out, only processes carrying it count as orphans.
    #[napi]
    pub fn env(&mut self) -> HashMap<String, String> {
        let (key, value) = self.inner.env();
        HashMap::from([(key, value)])
    }

    /// Takes the snapshot a phase starts from. `null` when disabled.
    #[napi]
    pub fn snapshot_before(&mut self, label: String) -> Option<ProcessSnapshot> {
        self.inner.snapshot_before(&label).as_ref().map(snapshot_to_js)
    }

    /// Compares with the snapshot taken before `label`: orphans, memory delta, warnings.
    #[napi]
    pub fn snapshot_after(&mut self, label: String) -> PhaseResult {
        match self.inner.snapshot_after(&label) {
            Some(report) => PhaseResult {
                label: report.label,
                orphans: report.orphans.iter().map(process_to_js).collect(),
                rule: report.rule.as_str().to_string(),
                memory_before_mb: report.memory_before_mb,
                memory_after_mb: report.memory_after_mb,
                memory_delta_mb: report.memory_delta_mb,
                warnings: report.warnings,
            },
            None => PhaseResult {
                label,
                orphans: Vec::new(),
                rule: "disabled".into(),
                memory_before_mb: 0.0,
                memory_after_mb: 0.0,
                memory_delta_mb: 0.0,
                warnings: Vec::new(),
            },
        }
    }
}

#[napi(object)]
pub struct SummaryOptions {
    pub owner: Option<String>,
}

/// The lines an agent harness puts in front of each model call: running jobs
/// (pid, command, runtime, last line) and ended jobs not looked at yet. An
/// empty string when there is nothing to say.
#[napi(ts_args_type = "options?: SummaryOptions | undefined | null")]
pub fn summary(options: Option<Unknown>) -> Result<String> {
    let mut o = Options::new("summary", options)?;
    let owner = SummaryOptions { owner: o.string("owner")? }.owner;
    o.finish()?;
    Ok(context()?.summary(owner.as_deref()).map_err(to_js_error)?.join("\n"))
}

#[napi(object)]
pub struct YieldOptions {
    /// How long to wait for the job to end before leaving it running.
    pub yield_ms: f64,
    pub args: Option<Vec<String>>,
    pub label: Option<String>,
    pub cwd: Option<String>,
    pub env: Option<HashMap<String, String>>,
    pub timeout_ms: Option<f64>,
    pub owner: Option<String>,
    pub context: Option<serde_json::Value>,
    pub notify: Option<bool>,
    pub on_exit: Option<String>,
}

#[napi(object)]
pub struct YieldResult {
    pub job_id: String,
    /// True when the job ended within `yieldMs`; then `check` holds its outcome.
    pub done: bool,
    pub check: Option<CheckResult>,
}

/// Starts `command` like `runBackground`, then waits up to `yieldMs`: resolves
/// with the check result if the job ended by then, else with the running
/// job's id (`done: false`), leaving it running.
#[napi(ts_args_type = "command: string, options: YieldOptions", ts_return_type = "Promise<YieldResult>")]
pub fn run_yield<'env>(env: &'env Env, command: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let command = string_arg("command", command)?;
        let mut o = Options::new("runYield", options)?;
        let yield_ms = o.millis("yieldMs", 0)?;
        let run = RunOptions::read(&mut o)?;
        o.finish()?;
        let Some(yield_ms) = yield_ms else {
            return Err(napi::Error::from_reason(
                "runYield needs options with yieldMs: how long to wait for the job to end, in milliseconds",
            ));
        };
        let yield_for = Duration::from_millis(yield_ms);
        let started = start(command, run)?;
        let context = context()?;
        spawn_promise(env, move || {
            let job_id = started.job_id;
            let outcome = context.wait(std::slice::from_ref(&job_id), Some(yield_for))?;
            if outcome.timed_out {
                return Ok(YieldResult { job_id, done: false, check: None });
            }
            let check = context.check(&job_id, &TailQuery::new(None, None)?)?;
            Ok(YieldResult { job_id, done: true, check: Some(check_to_js(check)) })
        })
    })
}

/// `checkJob` as the CLI prints it: a header line, what needs attention, then
/// the lines. For agents and tools that relay text (the MCP server).
#[napi(ts_args_type = "jobId: string, options?: CheckOptions | undefined | null")]
pub fn check_job_text(job_id: Unknown, options: Option<Unknown>) -> Result<String> {
    let job_id = string_arg("jobId", job_id)?;
    let query = tail_query("checkJobText", options)?;
    let check = context()?.check(&job_id, &query).map_err(to_js_error)?;
    Ok(proc_manager_core::present::format::check_text(&check))
}

/// `listJobs` as the CLI prints it, one line per job.
#[napi(ts_args_type = "options?: ListOptions | undefined | null")]
pub fn list_jobs_text(options: Option<Unknown>) -> Result<String> {
    let filter = list_filter("listJobsText", options)?;
    let jobs = context()?.list(&filter).map_err(to_js_error)?;
    Ok(if jobs.is_empty() {
        format!("no jobs{}", if filter.all { "" } else { " running or ended within the hour (all: true for every job)" })
    } else {
        proc_manager_core::present::format::list_text(&jobs).join("\n")
    })
}

#[napi(object)]
pub struct ReadLogOptions {
    /// The first line to show, counted from 1 (the oldest line the log still
    /// holds); without it, the last `lines` lines.
    pub from_line: Option<u32>,
    /// How many lines (default 100).
    pub lines: Option<u32>,
}

/// Lines of a job's log by number, as `check` cleans them but never folded.
#[napi(object)]
pub struct LogLines {
    pub job_id: String,
    /// The number of the first line in `lines`.
    pub from_line: u32,
    pub lines: Vec<String>,
    /// How many lines the log holds now (rotated files included).
    pub total_lines: u32,
}

/// A range of a job's log lines (`fromLine`, `lines`), across rotations; a
/// line of any length is one line, shown cut.
#[napi(ts_args_type = "jobId: string, options?: ReadLogOptions | undefined | null")]
pub fn read_log(job_id: Unknown, options: Option<Unknown>) -> Result<LogLines> {
    let job_id = string_arg("jobId", job_id)?;
    let mut o = Options::new("readLog", options)?;
    let from = o.count("fromLine", "line number")?.map(|n| n as usize);
    let lines = o.count("lines", "lines")?.map_or(100, |n| n as usize);
    o.finish()?;
    if from == Some(0) {
        return Err(napi::Error::from_reason("bad fromLine: 0; lines are numbered from 1"));
    }
    let job = context()?.job(&job_id).map_err(to_js_error)?;
    let window = proc_manager_core::store::digest::line_window(std::path::Path::new(&job.log_path), from, lines);
    let number = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(LogLines { job_id, from_line: number(window.first), lines: window.lines, total_lines: number(window.total) })
}
