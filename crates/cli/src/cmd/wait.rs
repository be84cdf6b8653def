//! `run-bg wait <id>...`: blocks until the jobs end; exits with the job's own
//! exit code, 124 when `--timeout` passes first.

use crate::{parse_dur, print_json};
use proc_manager_core::present::format;
use proc_manager_core::present::view::WaitView;
use proc_manager_core::verbs::ops::Context;
use proc_manager_core::Result;

pub fn run(context: &Context, ids: &[String], timeout: Option<String>, json: bool) -> Result<i32> {
    let timeout = parse_dur("--timeout", &timeout)?;
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
