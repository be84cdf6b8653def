//! What the view asks of a job beyond a kill: pause, resume and rerun. They
//! are core verbs of their own (another change adds them); until this build
//! has them, each says so instead of doing less.

use proc_manager_core::verbs::context::Context;

/// Pause (SIGSTOP to the tree), resume (SIGCONT) and rerun (the same
/// command as a new job); each answers with what to show.
pub trait JobActions: Send + Sync {
    fn pause(&self, context: &Context, job_id: &str) -> Result<String, String>;
    fn resume(&self, context: &Context, job_id: &str) -> Result<String, String>;
    fn rerun(&self, context: &Context, job_id: &str) -> Result<String, String>;
}

/// This build's: none of the three is a verb of the core yet.
pub struct NotAvailableYet;

fn not_yet(what: &str) -> Result<String, String> {
    Err(format!("{what} is not available yet in this build of run-bg"))
}

impl JobActions for NotAvailableYet {
    fn pause(&self, _context: &Context, _job_id: &str) -> Result<String, String> {
        not_yet("pause")
    }

    fn resume(&self, _context: &Context, _job_id: &str) -> Result<String, String> {
        not_yet("resume")
    }

    fn rerun(&self, _context: &Context, _job_id: &str) -> Result<String, String> {
        not_yet("rerun")
    }
}
