//! `run-bg __announce <id> [<status>]`: announces a job found orphaned or lost,
//! in the background, as the status the finder claimed for it.

use proc_manager_core::model::job::JobStatus;
use proc_manager_core::supervise::notify;

pub fn run(args: &[String]) -> i32 {
    let Some(context) = super::background_context() else { return 1 };
    let Some(id) = args.get(2) else { return 2 };
    match context.registry().get(id) {
        Ok(mut job) => {
            if let Some(claimed) = args.get(3).and_then(|s| JobStatus::parse(s)) {
                job.status = claimed;
            }
            notify::announce(&context.home, &context.config, &job);
            0
        }
        Err(_) => 1,
    }
}
