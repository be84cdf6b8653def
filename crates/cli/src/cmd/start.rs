//! `run-bg [options] -- <program> [args...]`: starts a job; with `--yield`,
//! stays up to a while and prints what `check` prints if it ended by then.

use crate::{load_context, parse_dur, print_json, StartCli};
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format;
use proc_manager_core::present::view::{shell_exit_code, StartFailedView, StartView};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::yielding::Yielded;
use proc_manager_core::verbs::spawn::{parse_env_assignment, start_job, StartRequest};
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
    request.tie_pid = match (cli.tie, cli.tie_pid) {
        (true, _) => Some(proc_manager_core::supervise::tie::caller_pid()),
        (false, pid) => pid,
    };
    let yield_for = parse_dur("--yield", &cli.yield_for)?;

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

    if let Some(yield_for) = yield_for {
        if let Yielded::Ended(check) = context.yield_to(&started.job_id, yield_for, &Cancel::never())? {
            super::check::print(&check, cli.json);
            return Ok(shell_exit_code(&check.job));
        }
    }
    if cli.json {
        print_json(&StartView::from(&started));
    } else {
        outln!("{}", format::ack_line(&started.job_id, started.pid, &started.command));
    }
    Ok(0)
}
