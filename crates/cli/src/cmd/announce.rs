//! `run-bg __announce <id> [<status>]`: announces a job found orphaned or lost,
//! in the background, as the status the finder claimed for it.

use proc_manager_core::model::job::JobStatus;
use proc_manager_core::supervise::notify;
use proc_manager_core::verbs::context::Context;

pub fn run(context: &Context, job_id: &str, claimed: Option<JobStatus>) -> i32 {
    match context.registry().get(job_id) {
        Ok(job) => {
            let job = match claimed {
                Some(claimed) => job.as_claimed(claimed),
                None => job,
            };
            notify::announce(&context.home, &context.config, &job);
            0
        }
        Err(_) => 1,
    }
}
