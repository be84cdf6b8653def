//! `run-bg [options] -- <program> [args...]`: starts a job; with `--yield`,
//! stays up to a while and prints what `check` prints if it ended by then.

use crate::args::StartCli;
use crate::face::CommandLine;
use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format;
use proc_manager_core::present::view::{shell_exit_code, StartFailedView, StartView};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::yielding::Yielded;
use proc_manager_core::verbs::request::{StartRequest, Started};
use proc_manager_core::verbs::start::start_job;
use proc_manager_core::{Error, Result};

pub fn run(cli: StartCli) -> Result<i32> {
    let mut request = cli.options.into_request(StartRequest::program(cli.command), &CommandLine)?;
    let yield_for = cli.yield_for.bound(&CommandLine)?;
    // Without --yield: one start, then we print its answer and exit.
    request.caller_exits = yield_for.is_none();

    let context = crate::context::load()?;
    let exe = context.runner.clone().expect("load_context sets the runner");
    let Some(started) = answer_start(start_job(&context, request, &exe), cli.json)? else {
        return Ok(1);
    };

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

/// A start as the CLI answers it, for `run-bg -- …` and `rerun`: the job,
/// its warnings said on stderr; or `None` for one that could not start,
/// which is recorded as a failed job of its own and said (with its view
/// under `--json`): exit 1.
pub fn answer_start(result: Result<Started>, json: bool) -> Result<Option<Started>> {
    let started = match result {
        Ok(started) => started,
        Err(Error::StartFailed { job_id, message }) => {
            if json {
                print_json(&StartFailedView::new(&job_id, &message));
            }
            eprintln!("run-bg: {} (recorded as failed job {job_id})", visible(&message));
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    for warning in &started.warnings {
        eprintln!("run-bg: warning: {}", visible(warning));
    }
    Ok(Some(started))
}
