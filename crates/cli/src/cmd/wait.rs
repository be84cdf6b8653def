//! `run-bg wait <id>...`: blocks until the jobs end; exits with the job's own
//! exit code, 124 when `--timeout` passes first.

use crate::print::print_json;
use proc_manager_core::present::format;
use proc_manager_core::present::view::WaitView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::Result;
use std::time::Duration;

pub fn run(context: &Context, ids: &[String], timeout: Option<Duration>, json: bool) -> Result<i32> {
    let outcome = context.wait(ids, timeout)?;
    let view = WaitView::from(&outcome);
    if json {
        print_json(&view);
    } else {
        for job in &outcome.jobs {
            outln!("{}", format::header(job, ""));
            if let Some(line) = format::lingering_line(job, &context.lingering(job)) {
                outln!("{line}");
            }
        }
    }
    if outcome.timed_out && !json {
        eprintln!("run-bg: wait timed out; the job is still running");
    }
    Ok(view.shell_exit_code)
}

/// `run-bg wait <id>... --ready`: until every job is ready (see `--ready-*`).
/// Exits 0 once all are; with the first job's status that ended before it
/// was ready (1 where that was exit 0); 124 when `--timeout` or a job's
/// readiness timeout passed first. A job without a readiness check is
/// refused: it would never be ready.
pub fn until_ready(context: &Context, ids: &[String], timeout: Option<Duration>, json: bool) -> Result<i32> {
    let cancel = proc_manager_core::verbs::cancel::Cancel::never();
    let outcome = context.wait_ready_or_cancel(ids, timeout, &cancel)?.expect("never cancelled");
    let view = WaitView::until_ready(&outcome);
    let code = view.shell_exit_code;
    if json {
        print_json(&view);
    } else {
        for job in &outcome.jobs {
            outln!("{}", format::header(job, ""));
        }
    }
    if outcome.timed_out && !json {
        eprintln!("run-bg: wait timed out before the job was ready; it is still running");
    }
    Ok(code)
}
