//! `run-bg rerun <id>`: an ended job started again as a new job, with the
//! command, cwd, environment additions and options it was started with.

use crate::cmd::start::CommandLine;
use crate::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format;
use proc_manager_core::present::view::{StartFailedView, StartView};
use proc_manager_core::verbs::context::Context;
use proc_manager_core::{Error, Result};

pub fn run(context: &Context, id: &str, json: bool) -> Result<i32> {
    let exe = context.runner.clone().expect("load_context sets the runner");
    let started = match context.rerun(id, &CommandLine, &exe) {
        Ok(started) => started,
        // As the start it repeats: recorded as a failed job of its own.
        Err(Error::StartFailed { job_id, message }) => {
            if json {
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
    if json {
        print_json(&StartView::from(&started));
    } else {
        outln!("{} (a rerun of {})", format::start_ack(&started), visible(id));
    }
    Ok(0)
}
