//! What the view asks of a job beyond a kill: pause, resume and rerun, each
//! the core verb `run-bg pause`/`resume`/`rerun` runs, answered with the
//! line to show.

use proc_manager_core::model::text::visible;
use proc_manager_core::present::view::PauseView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::start_options::Face;

/// Pause (SIGSTOP to the tree), resume (SIGCONT) and rerun (the same
/// command as a new job); each answers with what to show.
pub trait JobActions: Send + Sync {
    fn pause(&self, context: &Context, job_id: &str) -> Result<String, String>;
    fn resume(&self, context: &Context, job_id: &str) -> Result<String, String>;
    fn rerun(&self, context: &Context, job_id: &str) -> Result<String, String>;
}

/// The core's verbs, as the CLI runs them.
pub struct CoreVerbs;

/// How a rerun names options in an error, and whom a `--tie` rerun is tied
/// to: the person's view, so the view's own process.
struct TheView;

impl Face for TheView {
    fn name(&self, option: &str) -> String {
        format!("the job's `{option}`")
    }

    fn caller_pid(&self) -> u32 {
        std::process::id()
    }
}

impl JobActions for CoreVerbs {
    fn pause(&self, context: &Context, job_id: &str) -> Result<String, String> {
        context.pause(job_id).map(|outcome| PauseView::from(&outcome).message).map_err(|e| visible(&e.to_string()).into_owned())
    }

    fn resume(&self, context: &Context, job_id: &str) -> Result<String, String> {
        context.resume(job_id).map(|outcome| PauseView::from(&outcome).message).map_err(|e| visible(&e.to_string()).into_owned())
    }

    fn rerun(&self, context: &Context, job_id: &str) -> Result<String, String> {
        let runner = context.runner.clone().ok_or("no run-bg to start the rerun's supervisor with")?;
        context
            .rerun(job_id, &TheView, &runner)
            .map(|started| format!("{} started, a rerun of {}", started.job_id, visible(job_id)))
            .map_err(|e| visible(&e.to_string()).into_owned())
    }
}
