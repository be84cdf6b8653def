//! The caller's side of starting a job: validate, allocate an id, then queue
//! it or hand it to a fresh supervisor and wait for its ready line.

use crate::model::ids::{id_prefix_from_label, random_suffix};
use crate::model::job::{Job, JobState};
use crate::verbs::context::Context;
use crate::store::registry::Patience;
use crate::supervise::start::SupervisorSpec;
use crate::{now_ms, Error, Result};
use crate::os::sys::DirBuilderExt;
use std::path::Path;

use crate::verbs::request::{default_label, display_argv, validate, StartRequest, Started, DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_DELAY_MS};
use crate::verbs::spawn::run_supervisor;

/// Starts a job under its own supervisor and returns once its main process
/// runs, or with the reason it could not start (then recorded as `failed`).
pub fn start_job(context: &Context, request: StartRequest, supervisor_exe: &Path) -> Result<Started> {
    context.home.require_safe_parents()?;
    validate(&request)?;
    let warnings = validate_wake(context, &request)?;
    let cwd = match &request.cwd {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?.join(dir),
        None => std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?,
    };
    let tie = request.tie_pid.map(|pid| crate::supervise::tie::tie_to(pid, request.tie_to_caller)).transpose()?;
    let label = request.label.clone().unwrap_or_else(|| default_label(&request));
    let stay_child = request.caller_exits;
    let waits = crate::verbs::queue::waits_for_request(context, &request)?;
    let job_id = allocate_job_dir(context, &label)?;
    let log_path = context.home.log_path(&job_id);
    let command = request.display.clone().unwrap_or_else(|| display_argv(&request.argv));
    let job = Job {
        id: job_id.clone(),
        label: label.clone(),
        argv: request.argv,
        command: command.clone(),
        cwd,
        env: request.env,
        owner: request.owner,
        context: request.context,
        state: JobState::Running,
        note: None,
        main: None,
        supervisor: None,
        started_at: now_ms(),
        timeout_ms: request.timeout_ms,
        notify: request.notify,
        on_exit: request.on_exit,
        log_path,
        notification: None,
        hooks: Vec::new(),
        peak_rss_kb: None,
        seen_at: None,
        ready: request.ready,
        ready_at: None,
        ready_blocked: None,
        notify_on: request.notify_on,
        restart: request.restart.map(|r| crate::model::job::Restart {
            policy: r.policy,
            max_restarts: r.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS),
            delay_ms: r.delay_ms.unwrap_or(DEFAULT_RESTART_DELAY_MS),
            count: 0,
            last_reason: None,
            last_at: None,
            next_run_at: None,
        }),
        stdin_pipe: request.stdin_pipe,
        wake: request.wake,
        waits: None,
        tie,
        nice: request.nice,
        paused_at: None,
        paused_ms: 0,
        rerun_of: request.rerun_of,
        session: crate::store::sessions::session_for_start(&context.home, request.session.as_ref()),
        outlive_session: request.outlive_session,
    };
    if let Some(waits) = waits {
        return crate::verbs::queue::enqueue(context, job, waits, supervisor_exe).map(|started| Started { warnings, ..started });
    }
    let spec = SupervisorSpec {
        home: context.home.root.clone(),
        job: job.clone(),
        config: context.config.clone(),
        stay_child,
    };
    match run_supervisor(&context.home, &spec, supervisor_exe, None) {
        Ok(pid) => Ok(Started { job_id, pid: Some(pid), log_path: job.log_path, label, command, warnings, queued: None }),
        Err(error) => {
            let message = error.to_string();
            // The supervisor records its own start failures (in the job's
            // job.json at least); cover the case where it could not, or died
            // before it could.
            let registry = context.registry();
            if registry.get(&job_id).is_ok() {
                return Err(Error::StartFailed { job_id, message });
            }
            let mut failed = job;
            failed.state = JobState::FailedToStart { error: message.clone(), ended_at: now_ms() };
            match registry.write_job_file(&failed, false) {
                Ok(()) => {
                    let _ = registry.register(&failed, Patience::Brief);
                    Err(Error::StartFailed { job_id, message })
                }
                Err(e) => {
                    // Nothing could be kept (a full disk): leave nothing behind
                    // either, its pipes (beside jobs/, not in its folder) too.
                    #[cfg(unix)]
                    crate::store::pipes::remove_shared(&context.home.job_dir(&job_id));
                    let _ = std::fs::remove_dir_all(context.home.job_dir(&job_id));
                    // The supervisor's message says so already when recording was what failed.
                    let message = if message.contains("record the job") {
                        message
                    } else {
                        format!("{message}; the job was not recorded: {e}")
                    };
                    Err(Error::Other(message))
                }
            }
        }
    }
}

/// A wake rule is only of use with an exit notification to match it: without
/// one (`--no-notify`, or no interrupt service configured) it is refused, not
/// registered to wait for an event that never comes. Its template's unknown
/// keys are only warned about: the service leaves them as written.
fn validate_wake(context: &Context, request: &StartRequest) -> Result<Vec<String>> {
    let Some(wake) = &request.wake else { return Ok(Vec::new()) };
    if !request.notify {
        return Err(Error::Usage(
            "a wake rule (--wake, JS `wake`) is matched by the job's exit notification, which --no-notify (`notify: false`) turns off: drop one of them".into(),
        ));
    }
    if context.config.notify.url.is_none() {
        return Err(Error::Usage(
            "a wake rule (--wake, JS `wake`) is registered with the interrupt service, and none is configured: notify.url is null in config.json; set it to the service's /trigger address".into(),
        ));
    }
    if wake.message.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(Error::Usage("empty wake message: give the text to wake the agent with ({{jobId}}, {{status}}, … are filled in), or leave it out for the event's own message".into()));
    }
    Ok(wake.message.as_deref().and_then(crate::supervise::wake::template_warning).into_iter().collect())
}

fn allocate_job_dir(context: &Context, label: &str) -> Result<String> {
    let prefix = id_prefix_from_label(label);
    let mut last_error = None;
    for _ in 0..16 {
        let id = format!("{prefix}-{}", random_suffix());
        let dir = context.home.job_dir(&id);
        // Exclusive creation makes the id unique even among concurrent callers.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(id),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => last_error = Some(context.home.explain(Error::io("create job directory", dir, e))),
        }
    }
    Err(last_error.unwrap_or_else(|| Error::Other("could not find a free job id after 16 tries".into())))
}
