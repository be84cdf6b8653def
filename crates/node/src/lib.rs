//! The napi face: converts JS options and results to and from the core.
//! Nothing here decides behaviour; `core` does.

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]


mod in_call_order;
mod js_args;
mod js_serde;
mod js_shown;
mod logging;

pub mod follow;
mod stream;
pub mod watch;

use js_args::{millis_arg, string_arg, Options};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use proc_manager_core::model::job::JobStatus;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::view::{
    CheckView, JobResultView, JobView, KillView, LogReadView, OrphanReportView, PhaseView, ProcessInfoView, ReconcileView,
    SnapshotView, StartView, WaitView, YieldView,
};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::ops::{Context, ListFilter, LogRange, OrphanOptions, TailQuery};
use proc_manager_core::verbs::{left_behind, resource_tracker};
use proc_manager_core::verbs::spawn::{start_job, StartRequest};
use proc_manager_core::verbs::start_options::{Face, StartOptions};
use proc_manager_core::verbs::yielding::Yielded;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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

/// Every result reaches JS as the core's `present` shape, serialized once
/// (napi's serde-json support turns the value into JS objects): the same
/// fields, names and values `run-bg --json` prints. A field without a value
/// is left out, so it reads `undefined`.
fn shape<T: Serialize>(view: &T) -> Result<serde_json::Value> {
    serde_json::to_value(view).map_err(|e| napi::Error::from_reason(format!("cannot convert a result to JS: {e}")))
}

/// Options of `runBackground`, and of `runYield` beside its own: the
/// program's `args` (this face's), then the core's `StartOptions`.
struct RunOptions {
    args: Option<Vec<String>>,
    start: StartOptions,
}

impl RunOptions {
    fn read(o: &mut Options) -> Result<RunOptions> {
        Ok(RunOptions { args: o.strings("args")?, start: o.serde()? })
    }
}

/// The JS API's spelling of the start options: their JSON names.
struct JsApi;

impl Face for JsApi {
    fn name(&self, option: &str) -> String {
        option.to_string()
    }

    /// `tie: true` ties the job to this Node process.
    fn caller_pid(&self) -> u32 {
        std::process::id()
    }
}

/// Starts `command` in the background under its own supervisor. Returns once
/// the main process has started; throws if it cannot (then recorded as a
/// `failed` job). Without `options.args`, `command` runs with `/bin/sh -c`.
#[napi(ts_args_type = "command: string, options?: RunOptions | undefined | null", ts_return_type = "RunResult")]
pub fn run_background(command: Unknown, options: Option<Unknown>) -> Result<serde_json::Value> {
    let command = string_arg("command", command)?;
    let mut o = Options::new("runBackground", options)?;
    let options = RunOptions::read(&mut o)?;
    o.finish()?;
    shape(&StartView::from(&start(command, options)?))
}

fn start(command: String, options: RunOptions) -> Result<proc_manager_core::verbs::spawn::Started> {
    let request = match options.args {
        Some(args) => {
            // JS strings are text; the core takes any bytes.
            let argv = std::iter::once(command).chain(args).map(std::ffi::OsString::from).collect();
            StartRequest::program(argv)
        }
        None => {
            if command.trim().is_empty() {
                return Err(napi::Error::from_reason("empty command: give the command line to run"));
            }
            StartRequest::shell(&command)
        }
    };
    let request = options.start.into_request(request, &JsApi).map_err(to_js_error)?;
    let context = context()?;
    start_job(&context, request, &supervisor_exe()?).map_err(to_js_error)
}

/// The JSON Schema of `runBackground`'s options beyond `args` (the core's
/// `StartOptions`): what the MCP server builds `run_background`'s input
/// from, and index.d.ts's `RunOptions` is generated from
/// (scripts/options-dts.mjs). Each property has its doc (`description`),
/// its MCP line (`x-mcp`) or why MCP leaves it out (`x-mcp-omit`);
/// `x-order` lists them in the order they are read.
#[napi(ts_return_type = "Record<string, any>")]
pub fn start_options_schema() -> serde_json::Value {
    proc_manager_core::verbs::start_options::schema()
}

/// Status, exit code, runtime and the last lines of a job's output; with
/// `text: true` also `checkJobText`'s text of this same check, so that the
/// two never describe different moments (the MCP server shows both).
#[napi(ts_args_type = "jobId: string, options?: CheckJobOptions | undefined | null", ts_return_type = "CheckResult")]
pub fn check_job(job_id: Unknown, options: Option<Unknown>) -> Result<serde_json::Value> {
    let job_id = string_arg("jobId", job_id)?;
    let mut o = Options::new("checkJob", options)?;
    let query = read_tail_query(&mut o)?;
    let with_text = o.boolean("text")?.unwrap_or(false);
    o.finish()?;
    let check = context()?.check(&job_id, &query).map_err(to_js_error)?;
    let mut value = shape(&CheckView::from(&check))?;
    if let (true, Some(fields)) = (with_text, value.as_object_mut()) {
        fields.insert("text".into(), proc_manager_core::present::format::check_text(&check).into());
    }
    Ok(value)
}

fn tail_query(function: &'static str, options: Option<Unknown>) -> Result<TailQuery> {
    let mut o = Options::new(function, options)?;
    let query = read_tail_query(&mut o)?;
    o.finish()?;
    Ok(query)
}

fn read_tail_query(o: &mut Options) -> Result<TailQuery> {
    let lines = o.count("lines", "lines")?;
    let grep = o.string("grep")?;
    let errors = o.boolean("errors")?;
    TailQuery::new(lines.map(|n| n as usize), grep.as_deref())
        .and_then(|q| q.errors(errors.unwrap_or(false)))
        .map_err(to_js_error)
}

/// Jobs in the registry: running ones and those that ended within the hour,
/// or every job with `all: true`.
#[napi(ts_args_type = "options?: ListOptions | undefined | null", ts_return_type = "Array<JobSummary | CorruptJob>")]
pub fn list_jobs(options: Option<Unknown>) -> Result<serde_json::Value> {
    let filter = list_filter("listJobs", options)?;
    let context = context()?;
    let jobs = context.list(&filter).map_err(to_js_error)?;
    let places = context.queue_places(&jobs).map_err(to_js_error)?;
    let mut shown = Vec::new();
    for job in &jobs {
        shown.push(shape(&JobView::from(job).placed(places.get(&job.id)))?);
    }
    // Unreadable records belong to no status and no owner that can be told.
    if filter.status.is_none() && filter.owner.is_none() {
        for record in context.corrupt_records().map_err(to_js_error)? {
            shown.push(shape(&proc_manager_core::present::view::CorruptJobView::from(&record))?);
        }
    }
    Ok(serde_json::Value::Array(shown))
}

fn list_filter(function: &'static str, options: Option<Unknown>) -> Result<ListFilter> {
    let mut o = Options::new(function, options)?;
    let (status, owner, all) = (o.string("status")?, o.string("owner")?, o.boolean("all")?);
    o.finish()?;
    let status = status.map(|s| JobStatus::parse_or_explain(&s).map_err(|e| napi::Error::from_reason(e.to_string()))).transpose()?;
    Ok(ListFilter { status, owner, all: all.unwrap_or(false) || status.is_some() })
}

/// How a promise's work ended: with its value, or stopped by its `AbortSignal`.
enum Settled<T> {
    Done(T),
    /// With the id of the job the call started, if it started one.
    Aborted(Option<String>),
}

type Settle = Box<dyn FnOnce(Env) -> Result<serde_json::Value> + Send>;

/// Runs blocking `work` on its own thread and settles a promise with it, so
/// a long wait never occupies one of libuv's few pool threads. `cancel` is
/// released once the work is done (its pipe closed), and the signal's
/// listener removed as the promise settles (on the JS thread).
fn spawn_promise<'env, F>(env: &'env Env, (cancel, listening): (Cancel, Option<Listening>), work: F) -> Result<Object<'env>>
where
    F: FnOnce() -> std::result::Result<Settled<serde_json::Value>, proc_manager_core::Error> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
    // Shared with the thread so that, if it cannot start, both are undone here.
    let (undo_cancel, slot) = (cancel.clone(), Arc::new(Mutex::new(listening)));
    let listening = slot.clone();
    let spawned = std::thread::Builder::new().name("proc-manager-wait".into()).spawn(move || {
        let settled = work();
        cancel.release();
        let listening = lock(&listening).take();
        deferred.resolve(Box::new(move |env| {
            let removed = listening.map_or(Ok(()), |listening| listening.remove(&env));
            let value = match settled {
                Ok(Settled::Done(value)) => value,
                Ok(Settled::Aborted(job_id)) => return Err(abort_error(&env, job_id.as_deref())),
                Err(e) => return Err(to_js_error(e)),
            };
            removed.map(|()| value)
        }))
    });
    spawned.map_err(|e| {
        undo_cancel.release();
        if let Some(listening) = lock(&slot).take() {
            let _ = listening.remove(env);
        }
        napi::Error::from_reason(format!("cannot start a thread: {e}"))
    })?;
    Ok(promise)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The error an aborted call rejects with, as Node's own APIs do
/// (`name: 'AbortError'`, `code: 'ABORT_ERR'`), with the `jobId` of the job
/// the call started, if it started one: it runs on.
pub(crate) fn abort_error(env: &Env, job_id: Option<&str>) -> napi::Error {
    let made = env.create_error(napi::Error::from_reason("The operation was aborted")).and_then(|mut error| {
        error.set_named_property("name", "AbortError")?;
        error.set_named_property("code", "ABORT_ERR")?;
        if let Some(job_id) = job_id {
            error.set_named_property("jobId", job_id)?;
        }
        Ok(napi::Error::from(error.to_unknown()))
    });
    made.unwrap_or_else(|e| e)
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

/// An already aborted signal is an error (`AbortError`) before any work starts.
pub(crate) fn refuse_aborted(env: &Env, signal: Option<&Object>) -> Result<()> {
    match signal {
        Some(signal) if signal.get_named_property::<bool>("aborted")? => Err(abort_error(env, None)),
        _ => Ok(()),
    }
}

/// The `signal` option wired to a `Cancel`: its abort throws the switch from
/// the JS thread, and the waiting native thread wakes at once. An already
/// aborted signal is an error (`AbortError`) before any work starts. The
/// listener stays until the returned `Listening` is removed: the caller
/// removes it once its call has settled, so that a signal shared by many
/// calls does not gather their listeners.
pub(crate) fn cancel_on(env: &Env, signal: Option<Object>, on_abort: impl Fn() + 'static) -> Result<Option<Listening>> {
    let Some(signal) = signal else { return Ok(None) };
    refuse_aborted(env, Some(&signal))?;
    let listener = env.create_function_from_closure("onAbort", move |_| {
        on_abort();
        Ok(())
    })?;
    let listening = Listening { signal: signal.create_ref()?, listener: listener.create_ref()? };
    let add: AddEventListener = signal.get_named_property("addEventListener")?;
    let mut once = Object::new(env)?;
    once.set("once", true)?;
    add.apply(signal, ("abort", listener, once).into())?;
    Ok(Some(listening))
}

/// `signal.addEventListener(type, listener, options)`.
type AddEventListener<'env> = Function<'env, FnArgs<(&'env str, Function<'env, (), ()>, Object<'env>)>, ()>;
/// `signal.removeEventListener(type, listener)`.
type RemoveEventListener<'env> = Function<'env, FnArgs<(&'env str, Function<'env, (), ()>)>, ()>;

/// A listener `cancel_on` added to a signal. Removed (and the signal let go)
/// by `remove`, on the JS thread; the references are sendable so that a
/// worker thread can carry them to the promise's settling.
pub(crate) struct Listening {
    // No leak check: a reference dropped unremoved (a teardown) only keeps
    // the signal alive, which is all `remove` would have ended.
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl Listening {
    pub(crate) fn remove(self, env: &Env) -> Result<()> {
        let signal = self.signal.get_value(env)?;
        let listener = self.listener.borrow_back(env)?;
        let remove: RemoveEventListener = signal.get_named_property("removeEventListener")?;
        let removed = remove.apply(signal, ("abort", listener).into());
        self.signal.unref(env)?;
        removed
    }
}

/// A `Cancel` for `signal` (none needed without one), and its listener.
fn cancel_for(env: &Env, signal: Option<Object>) -> Result<(Cancel, Option<Listening>)> {
    if signal.is_none() {
        return Ok((Cancel::never(), None));
    }
    let cancel = Cancel::new().map_err(to_js_error)?;
    let thrower = cancel.clone();
    match cancel_on(env, signal, move || thrower.cancel()) {
        Ok(listening) => Ok((cancel, listening)),
        Err(e) => {
            cancel.release();
            Err(e)
        }
    }
}

/// SIGTERM to the job's whole tree, SIGKILL after the grace period (at once
/// with `force`). Resolves once the tree is gone.
#[napi(ts_args_type = "jobId: string, options?: KillOptions | undefined | null", ts_return_type = "Promise<KillResult>")]
pub fn kill_job<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("killJob", options)?;
        let (grace, force) = (o.millis("graceMs", 0)?.map(Duration::from_millis), o.boolean("force")?.unwrap_or(false));
        o.finish()?;
        let context = context_for_kill()?;
        proc_manager_core::model::ids::validate_job_id(&job_id).map_err(to_js_error)?;
        spawn_promise(env, (Cancel::never(), None), move || {
            let outcome = context.kill(&job_id, grace, force)?;
            Ok(Settled::Done(shape(&KillView::from(&outcome)).map_err(napi_to_core)?))
        })
    })
}

/// Kills every running job (of `owner`, when given; started over
/// `olderThanMs` ago, when given), all at once.
#[napi(ts_args_type = "options?: KillAllOptions | undefined | null", ts_return_type = "Promise<KillResult[]>")]
pub fn kill_all<'env>(env: &'env Env, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let mut o = Options::new("killAll", options)?;
        let owner = o.string("owner")?;
        let grace = o.millis("graceMs", 0)?.map(Duration::from_millis);
        let force = o.boolean("force")?.unwrap_or(false);
        let older_than = o.millis("olderThanMs", 0)?.map(Duration::from_millis);
        o.finish()?;
        let context = context_for_kill()?;
        spawn_promise(env, (Cancel::never(), None), move || {
            // One job that cannot be killed does not hide what happened to the others.
            let results = context.kill_all(owner.as_deref(), older_than, grace, force)?;
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

/// A conversion that failed on the worker thread, said as the core's errors are.
fn napi_to_core(e: napi::Error) -> proc_manager_core::Error {
    proc_manager_core::Error::Usage(e.reason.clone())
}

/// Resolves when the job ends (with `ready: true`, once it is ready), or
/// `timeoutMs` passes (`timedOut: true`); rejects with an `AbortError` at
/// once when `signal` aborts.
#[napi(ts_args_type = "jobId: string, options?: WaitOptions | undefined | null", ts_return_type = "Promise<JobResult>")]
pub fn wait_job<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("waitJob", options)?;
        let timeout = o.millis("timeoutMs", 0)?.map(Duration::from_millis);
        let signal = o.signal("signal")?;
        let ready = o.boolean("ready")?.unwrap_or(false);
        o.finish()?;
        let context = context()?;
        proc_manager_core::model::ids::validate_job_id(&job_id).map_err(to_js_error)?;
        let cancel = cancel_for(env, signal)?;
        let waiting = cancel.0.clone();
        spawn_promise(env, cancel, move || {
            let ids = std::slice::from_ref(&job_id);
            let waited = if ready { context.wait_ready_or_cancel(ids, timeout, &waiting) } else { context.wait_or_cancel(ids, timeout, &waiting) };
            let Some(outcome) = waited? else {
                return Ok(Settled::Aborted(None));
            };
            let mut view = WaitView::from(&outcome);
            let one: JobResultView = view.jobs.remove(0);
            Ok(Settled::Done(shape(&one).map_err(napi_to_core)?))
        })
    })
}

/// Verifies running jobs against the OS: supervisor gone but processes alive
/// → `orphaned`; both gone with no exit status → `lost`.
#[napi(ts_return_type = "ReconcileResult")]
pub fn reconcile() -> Result<serde_json::Value> {
    let (orphaned, lost) = context()?.reconcile().map_err(to_js_error)?;
    shape(&ReconcileView::new(&orphaned, &lost))
}

/// Forgets finished jobs (that ended over `olderThanMs` ago, when given) and
/// deletes their logs. Returns the ids removed.
#[napi(ts_args_type = "olderThanMs?: number | undefined | null")]
pub fn prune_jobs(older_than_ms: Option<Unknown>) -> Result<Vec<String>> {
    let older_than = millis_arg("olderThanMs", older_than_ms)?.map(Duration::from_millis);
    context()?.prune(older_than).map_err(to_js_error)
}

/// Finds orphaned jobs and processes left behind by ended jobs; with
/// `mode: 'kill'` removes them. Resolves with what was found, killed and failed.
#[napi(ts_args_type = "options?: CleanupOptions | undefined | null", ts_return_type = "Promise<CleanupReport>")]
pub fn cleanup_orphans<'env>(env: &'env Env, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let mut o = Options::new("cleanupOrphans", options)?;
        let mode = o.string("mode")?;
        let owner = o.string("owner")?;
        let force = o.boolean("force")?;
        let grace_ms = o.millis("graceMs", 0)?;
        o.finish()?;
        let kill = match mode.as_deref() {
            None | Some("list") => false,
            Some("kill") => true,
            Some(other) => {
                return Err(napi::Error::from_reason(format!("bad mode `{}`: expected 'list' or 'kill'", visible(other))));
            }
        };
        let orphan_options =
            OrphanOptions { kill, force: force.unwrap_or(false), owner, grace: grace_ms.map(Duration::from_millis) };
        let context = if kill { context_for_kill()? } else { context()? };
        spawn_promise(env, (Cancel::never(), None), move || {
            let report = context.orphans(&orphan_options)?;
            Ok(Settled::Done(shape(&OrphanReportView::from(&report)).map_err(napi_to_core)?))
        })
    })
}

/// Every process visible to this user: pid, ppid, command, memoryMb,
/// startTime, isMcp; with the time taken and the total resident memory.
#[napi(ts_return_type = "ProcessSnapshot")]
pub fn snapshot() -> Result<serde_json::Value> {
    let patterns = Context::load().map_err(to_js_error)?.config.diagnostics.resource_tracking.mcp_patterns;
    shape(&SnapshotView::new(&left_behind::snapshot(&patterns), |_| true))
}

/// A snapshot or a process list as `snapshot()` gives them.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Processes {
    Snapshot(SnapshotView),
    List(Vec<ProcessInfoView>),
}

fn processes_arg(name: &str, value: serde_json::Value) -> Result<Vec<left_behind::ProcessInfo>> {
    let processes = match serde_json::from_value::<Processes>(value) {
        Ok(Processes::Snapshot(s)) => s.processes,
        Ok(Processes::List(list)) => list,
        Err(_) => {
            return Err(napi::Error::from_reason(format!(
                "bad {name}: give a snapshot() result or an array of its processes \
                 ({{ pid, ppid, command, memoryMb, startTime, isMcp }})"
            )))
        }
    };
    Ok(processes.iter().map(left_behind::ProcessInfo::from).collect())
}

/// Processes in `after` that were not in `before` (by pid and start time) and
/// lost their parent: it is gone, is init, or is a subreaper above this
/// process that adopted them. MCP processes first.
#[napi(
    ts_args_type = "before: ProcessSnapshot | Array<ProcessInfo>, after: ProcessSnapshot | Array<ProcessInfo>",
    ts_return_type = "Array<ProcessInfo>"
)]
pub fn detect_orphans(before: serde_json::Value, after: serde_json::Value) -> Result<serde_json::Value> {
    let (before, after) = (processes_arg("before", before)?, processes_arg("after", after)?);
    let orphans = left_behind::detect_orphans(&before, &after, std::process::id());
    shape(&orphans.iter().map(ProcessInfoView::from).collect::<Vec<_>>())
}

/// Snapshots around each phase of a task; reports what it left behind and
/// its memory growth, as data and as `tracing` log lines on stderr.
#[napi]
pub struct ResourceTracker {
    inner: resource_tracker::ResourceTracker,
}

#[napi]
impl ResourceTracker {
    #[napi(constructor, ts_args_type = "options?: TrackerOptions | undefined | null")]
    pub fn new(options: Option<Unknown>) -> Result<ResourceTracker> {
        let mut o = Options::new("ResourceTracker", options)?;
        let enabled = o.boolean("enabled")?;
        let threshold = o.amount("memoryThresholdMb", "MiB")?;
        let patterns = o.strings("mcpPatterns")?;
        o.finish()?;
        let mut config = Context::load().map_err(to_js_error)?.config.diagnostics.resource_tracking;
        if let Some(enabled) = enabled {
            config.enabled = enabled;
        }
        if let Some(threshold) = threshold {
            config.memory_threshold_mb = threshold;
        }
        if let Some(patterns) = patterns {
            config.mcp_patterns = patterns;
        }
        if config.enabled {
            logging::init();
        }
        Ok(ResourceTracker { inner: resource_tracker::ResourceTracker::new(config) })
    }

    #[napi(getter)]
    pub fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    /// The environment to start tracked work with (`{ PROC_MANAGER_TRACKER: token }`);
    /// once handed out, processes carrying it count as left behind too.
    #[napi]
    pub fn env(&mut self) -> HashMap<String, String> {
        let (key, value) = self.inner.env();
        HashMap::from([(key, value)])
    }

    /// Takes the snapshot a phase starts from. `null` when disabled.
    #[napi(ts_return_type = "ProcessSnapshot | null")]
    pub fn snapshot_before(&mut self, label: String) -> Result<serde_json::Value> {
        match self.inner.snapshot_before(&label) {
            Some(snapshot) => shape(&SnapshotView::new(&snapshot, |_| true)),
            None => Ok(serde_json::Value::Null),
        }
    }

    /// Compares with the snapshot taken before `label`: orphans, memory delta, warnings.
    #[napi(ts_return_type = "PhaseResult")]
    pub fn snapshot_after(&mut self, env: Env, label: String) -> Result<serde_json::Value> {
        // A live child this thread's loop still tracks was started here
        // (child_process), not adopted: it is not a leftover.
        let own = loop_children(&env);
        let owns = |pid: u32| own.as_ref().is_some_and(|own| own.contains(&pid));
        let owns: Option<&dyn Fn(u32) -> bool> = if own.is_some() { Some(&owns) } else { None };
        shape(&PhaseView::new(&label, self.inner.snapshot_after_with(&label, owns).as_ref()))
    }
}

/// The pids of the child processes this thread's event loop tracks (each
/// `child_process.spawn` is a libuv process handle until its exit is seen).
/// libuv's functions are looked up at run time, not linked: `None` in a
/// runtime that has no libuv (the tracker then counts every new child).
fn loop_children(env: &Env) -> Option<std::collections::HashSet<u32>> {
    use std::ffi::{c_char, c_int, c_void, CStr};
    type WalkCb = unsafe extern "C" fn(*mut c_void, *mut c_void);
    type Walk = unsafe extern "C" fn(*mut c_void, WalkCb, *mut c_void);
    type GetType = unsafe extern "C" fn(*const c_void) -> c_int;
    type TypeName = unsafe extern "C" fn(c_int) -> *const c_char;
    type GetPid = unsafe extern "C" fn(*const c_void) -> c_int;
    struct Walker {
        get_type: GetType,
        type_name: TypeName,
        get_pid: GetPid,
        pids: std::collections::HashSet<u32>,
    }
    fn symbol(name: &CStr) -> Option<*mut c_void> {
        // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the
        // symbols already loaded (node's own libuv), nothing is loaded.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        (!found.is_null()).then_some(found)
    }
    unsafe extern "C" fn visit(handle: *mut c_void, arg: *mut c_void) {
        // SAFETY: `arg` is the Walker below, alive and not otherwise borrowed
        // during uv_walk; `handle` is a live handle of the loop, which the
        // libuv accessors only read.
        unsafe {
            let walker = &mut *(arg as *mut Walker);
            let name = (walker.type_name)((walker.get_type)(handle));
            if !name.is_null() && CStr::from_ptr(name).to_bytes() == b"process" {
                let pid = (walker.get_pid)(handle);
                if pid > 0 {
                    walker.pids.insert(pid as u32);
                }
            }
        }
    }
    let walk = symbol(c"uv_walk")?;
    let get_type = symbol(c"uv_handle_get_type")?;
    let type_name = symbol(c"uv_handle_type_name")?;
    let get_pid = symbol(c"uv_process_get_pid")?;
    let mut uv_loop: *mut napi::sys::uv_loop_s = std::ptr::null_mut();
    // SAFETY: a valid env of the calling thread and an out pointer to a local.
    let status = unsafe { napi::sys::napi_get_uv_event_loop(env.raw(), &mut uv_loop) };
    if status != napi::sys::Status::napi_ok || uv_loop.is_null() {
        return None;
    }
    // SAFETY: the symbols are libuv's functions with these signatures
    // (uv.h, libuv >= 1.19, Node >= 10).
    let (walk, get_type, type_name, get_pid) = unsafe {
        (
            std::mem::transmute::<*mut c_void, Walk>(walk),
            std::mem::transmute::<*mut c_void, GetType>(get_type),
            std::mem::transmute::<*mut c_void, TypeName>(type_name),
            std::mem::transmute::<*mut c_void, GetPid>(get_pid),
        )
    };
    let mut walker = Walker { get_type, type_name, get_pid, pids: std::collections::HashSet::new() };
    // SAFETY: we run on the loop's own thread (a napi call), so the loop
    // is not walked or changed concurrently; `visit` only reads handles.
    unsafe { walk(uv_loop as *mut c_void, visit, &mut walker as *mut Walker as *mut c_void) };
    Some(walker.pids)
}

/// The lines an agent harness puts in front of each model call: running jobs
/// (pid, command, runtime, last line) and ended jobs not looked at yet. An
/// empty string when there is nothing to say.
#[napi(ts_args_type = "options?: SummaryOptions | undefined | null")]
pub fn summary(options: Option<Unknown>) -> Result<String> {
    let mut o = Options::new("summary", options)?;
    let owner = o.string("owner")?;
    o.finish()?;
    Ok(context()?.summary(owner.as_deref()).map_err(to_js_error)?.join("\n"))
}

/// Starts `command` like `runBackground` (the same options), then waits up
/// to `yieldMs`: resolves with the check result if the job ended by then,
/// else with the running job's id (`done: false`), leaving it running. An
/// aborted `signal` stops the wait at once (the job runs on) and rejects
/// with an `AbortError` whose `jobId` names that job.
#[napi(ts_args_type = "command: string, options: YieldOptions", ts_return_type = "Promise<YieldResult>")]
pub fn run_yield<'env>(env: &'env Env, command: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let command = string_arg("command", command)?;
        let mut o = Options::new("runYield", options)?;
        let yield_ms = o.millis("yieldMs", 0)?;
        let run = RunOptions::read(&mut o)?;
        let signal = o.signal("signal")?;
        o.finish()?;
        let Some(yield_ms) = yield_ms else {
            return Err(napi::Error::from_reason(
                "runYield needs options with yieldMs: how long to wait for the job to end, in milliseconds",
            ));
        };
        // Refused before the job starts; the listener is added after, so a
        // start that fails leaves neither a listener nor a cancel pipe.
        refuse_aborted(env, signal.as_ref())?;
        let context = context()?;
        let started = start(command, run)?;
        let cancel = cancel_for(env, signal).map_err(|e| {
            napi::Error::from_reason(format!("{} (job {} was started and runs on)", e.reason, started.job_id))
        })?;
        let waiting = cancel.0.clone();
        spawn_promise(env, cancel, move || {
            let job_id = started.job_id;
            let view = match context.yield_to(&job_id, Duration::from_millis(yield_ms), &waiting)? {
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
    let context = context()?;
    let jobs = context.list(&filter).map_err(to_js_error)?;
    let places = context.queue_places(&jobs).map_err(to_js_error)?;
    let corrupt = if filter.status.is_none() && filter.owner.is_none() {
        context.corrupt_records().map_err(to_js_error)?
    } else {
        Vec::new()
    };
    let mut lines = proc_manager_core::present::format::list_text(&jobs, &places, &context.leftover_counts(&jobs));
    lines.extend(corrupt.iter().map(proc_manager_core::present::format::corrupt_line));
    Ok(if lines.is_empty() {
        format!("no jobs{}", if filter.all { "" } else { " running or ended within the hour (all: true for every job)" })
    } else {
        lines.join("\n")
    })
}

/// A range of a job's log lines (`fromLine`, `lines`), or the lines written
/// after a cursor (`since`, from `checkJob` or an earlier `readLog`), across
/// rotations; a line of any length is one line, shown cut.
#[napi(ts_args_type = "jobId: string, options?: ReadLogOptions | undefined | null", ts_return_type = "LogRead")]
pub fn read_log(job_id: Unknown, options: Option<Unknown>) -> Result<serde_json::Value> {
    let job_id = string_arg("jobId", job_id)?;
    let mut o = Options::new("readLog", options)?;
    let from = o.count("fromLine", "line number")?.map(|n| n as usize);
    let since = o.count("since", "bytes (a cursor)")?;
    let count = o.count("lines", "lines")?.map_or(100, |n| n as usize);
    let budget = o.count("maxChars", "characters")?.map(|n| n as usize);
    o.finish()?;
    let range = match (from, since) {
        (Some(_), Some(_)) => {
            return Err(napi::Error::from_reason("give either fromLine or since, not both"));
        }
        (_, Some(since)) => LogRange::Since { since, count },
        (from, None) => LogRange::Lines { from, count },
    };
    let (job, read) = context()?.read_log_within(&job_id, range, budget).map_err(to_js_error)?;
    shape(&LogReadView::new(&job.id, &read))
}

/// Writes `text` (and a newline, unless `newline: false`) to the stdin of a
/// job started with `stdin: 'pipe'`; `eof: true` then closes it. Resolves
/// once written; against a job that does not read its stdin that takes up to
/// 5 s, spent on a worker thread so that the event loop runs on meanwhile.
/// Calls to one job are written one at a time, in the order they were made.
#[napi(ts_args_type = "jobId: string, text: string, options?: SendInputOptions | undefined | null", ts_return_type = "Promise<SendResult>")]
pub fn send_input<'env>(env: &'env Env, job_id: Unknown, text: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let job_id = string_arg("jobId", job_id)?;
        let text = string_arg("text", text)?;
        let mut o = Options::new("sendInput", options)?;
        let newline = o.boolean("newline")?.unwrap_or(true);
        let eof = o.boolean("eof")?.unwrap_or(false);
        o.finish()?;
        let mut data = text.into_bytes();
        if newline {
            data.push(b'\n');
        }
        let context = context()?;
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        let job = job_id.clone();
        in_call_order::queue(&job, Box::new(move |may_run| {
            let sent = may_run.map_err(proc_manager_core::Error::Other).and_then(|()| {
                let sent = context.send_input(&job_id, &data, eof)?;
                shape(&proc_manager_core::present::view::SendView::from(&sent)).map_err(napi_to_core)
            });
            deferred.resolve(Box::new(move |_| sent.map_err(to_js_error)));
        }));
        Ok(promise)
    })
}
