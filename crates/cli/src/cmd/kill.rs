//! `run-bg kill <id>... | --all`: SIGTERM each job's process tree, SIGKILL
//! what is left after the grace period.

use crate::{parse_dur, print_json};
use proc_manager_core::model::text::visible;
use proc_manager_core::verbs::ops::Context;
use proc_manager_core::Result;

pub fn run(
    context: &Context,
    ids: &[String],
    all: bool,
    owner: Option<&str>,
    grace: Option<String>,
    force: bool,
    json: bool,
) -> Result<i32> {
    let grace = parse_dur("--grace", &grace)?;
    let results: Vec<Result<_>> = if all {
        context.kill_all(owner, grace, force)?.into_iter().map(|r| r.map_err(|(_, e)| e)).collect()
    } else {
        for id in ids {
            proc_manager_core::model::ids::validate_job_id(id)?;
        }
        ids.iter().map(|id| context.kill(id, grace, force)).collect()
    };
    let mut failed = false;
    let mut views = Vec::new();
    for result in results {
        match result {
            Ok(outcome) => {
                if !json {
                    outln!("{}", visible(&outcome.message));
                }
                views.push(serde_json::json!({
                    "jobId": outcome.job.id, "status": outcome.job.status().as_str(),
                    "signalled": outcome.signalled, "message": outcome.message,
                }));
            }
            Err(e) => {
                failed = true;
                eprintln!("run-bg: {}", visible(&e.to_string()));
                views.push(serde_json::json!({ "error": e.to_string() }));
            }
        }
    }
    if json {
        print_json(&views);
    } else if views.is_empty() {
        outln!("no running jobs to kill");
    }
    Ok(if failed { 1 } else { 0 })
}
