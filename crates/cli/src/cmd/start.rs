//! `run-bg [options] -- <program> [args...]`: starts a job; with `--yield`,
//! stays up to a while and prints what `check` prints if it ended by then.

use crate::{load_context, parse_dur, print_json, StartCli};
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format;
use proc_manager_core::present::view::{shell_exit_code, StartFailedView, StartView};
use proc_manager_core::model::job::Readiness;
use proc_manager_core::supervise::ready;
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::yielding::Yielded;
use proc_manager_core::model::job::RestartPolicy;
use proc_manager_core::verbs::spawn::{parse_env_assignment, start_job, RestartRequest, StartRequest};
use proc_manager_core::{Error, Result};

pub fn run(cli: StartCli) -> Result<i32> {
    let mut request = StartRequest::program(cli.command);
    request.label = cli.label;
    request.cwd = cli.cwd;
    for assignment in &cli.env {
        let (key, value) = parse_env_assignment(assignment)?;
        request.env.insert(key, value);
    }
    request.timeout_ms = parse_dur("--timeout", &cli.timeout)?.map(|d| d.as_millis() as u64);
    request.owner = cli.owner;
    request.context = cli
        .context
        .map(|text| {
            serde_json::from_str(&text).map_err(|e| Error::Usage(format!("bad --context: not valid JSON ({e})")))
        })
        .transpose()?;
    request.notify = !cli.no_notify;
    request.on_exit = cli.on_exit;
    if let Some(policy) = &cli.restart {
        request.restart = Some(RestartRequest {
            policy: RestartPolicy::parse(policy)?,
            max_restarts: cli.max_restarts,
            delay_ms: parse_dur("--restart-delay", &cli.restart_delay)?.map(|d| d.as_millis() as u64),
        });
    }
    request.stdin_pipe = cli.stdin.as_deref() == Some("pipe");
    if let Some(message) = cli.wake {
        let action = cli.wake_action.as_deref().map(proc_manager_core::supervise::wake::parse_action).transpose()?;
        request.wake = Some(proc_manager_core::model::job::Wake {
            message: Some(message),
            instruction: cli.wake_instruction,
            action: action.unwrap_or_default(),
            ..Default::default()
        });
    }
    request.after = cli.after;
    request.after_any = cli.after_any;
    request.queue = cli.queue;
    request.priority = cli.priority.unwrap_or(0);
    request.tie_pid = match (cli.tie, cli.tie_pid) {
        (true, _) => Some(proc_manager_core::supervise::tie::caller_pid()),
        (false, pid) => pid,
    };
    request.tie_to_caller = cli.tie;
    let yield_for = parse_dur("--yield", &cli.yield_for)?;
    // Readiness and wake-ups (issue 15): patterns are checked here to name the flag.
    if let Some(pattern) = &cli.ready_log {
        ready::check_pattern("--ready-log", pattern)?;
    }
    for pattern in &cli.notify_on {
        ready::check_pattern("--notify-on", pattern)?;
    }
    let ready_timeout = parse_dur("--ready-timeout", &cli.ready_timeout)?.map(|d| d.as_millis() as u64);
    if cli.ready_log.is_some() || cli.ready_port.is_some() || cli.ready_url.is_some() || ready_timeout.is_some() {
        request.ready = Some(Readiness { log: cli.ready_log, port: cli.ready_port, url: cli.ready_url, timeout_ms: ready_timeout });
    }
    request.notify_on = cli.notify_on;

    let context = load_context()?;
    let exe = context.runner.clone().expect("load_context sets the runner");
    let started = match start_job(&context, request, &exe) {
        Ok(started) => started,
        Err(Error::StartFailed { job_id, message }) => {
            if cli.json {
                print_json(&StartFailedView::new(&job_id, &message));
            }
            eprintln!("run-bg: {} (recorded as failed job {job_id})", visible(&message));
            return Ok(1);
        }
        Err(e) => return Err(e),
    };
    for warning in &started.warnings {
        eprintln!("run-bg: warning: {}", visible(warning));
    }

    if let Some(yield_for) = yield_for {
        match context.yield_to(&started.job_id, yield_for, &Cancel::never())? {
            Yielded::Ended(check) => {
                super::check::print(&check, cli.json);
                return Ok(shell_exit_code(&check.job));
            }
            // Ready (or its readiness timeout passed): the check, the job runs on.
            Yielded::Ready(check) => {
                super::check::print(&check, cli.json);
                return Ok(if check.job.ready_at.is_some() { 0 } else { 124 });
            }
            Yielded::Running | Yielded::Cancelled => {}
        }
    }
    if cli.json {
        print_json(&StartView::from(&started));
    } else {
        outln!("{}", format::start_ack(&started));
    }
    Ok(0)
}
