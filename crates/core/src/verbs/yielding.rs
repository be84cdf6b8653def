//! Start-and-yield: a caller that starts a job may stay a while and get the
//! job's outcome at once when it ends in that time, as `run-bg --yield` and
//! the JS `runYield` do. One flow, so the faces cannot answer differently.

use crate::verbs::cancel::Cancel;
use crate::verbs::ops::{CheckResult, Context, TailQuery};
use crate::Result;
use std::time::Duration;

/// How a yield ended.
#[derive(Debug)]
pub enum Yielded {
    /// The job ended in time: what `check` gives for it (the default tail).
    Ended(Box<CheckResult>),
    /// It still runs; it is left running.
    Running,
    /// The caller stopped waiting (`cancel`); the job is left running.
    Cancelled,
}

impl Context {
    /// Waits up to `yield_for` for the started job `job_id` to end, or until
    /// `cancel` is thrown.
    pub fn yield_to(&self, job_id: &str, yield_for: Duration, cancel: &Cancel) -> Result<Yielded> {
        let ids = [job_id.to_string()];
        match self.wait_or_cancel(&ids, Some(yield_for), cancel)? {
            None => Ok(Yielded::Cancelled),
            Some(outcome) if outcome.timed_out => Ok(Yielded::Running),
            Some(_) => Ok(Yielded::Ended(Box::new(self.check(job_id, &TailQuery::new(None, None)?)?))),
        }
    }
}
