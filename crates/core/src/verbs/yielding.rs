//! Start-and-yield: a caller that starts a job may stay a while and get the
//! job's outcome at once when it ends in that time, as `run-bg --yield` and
//! the JS `runYield` do. One flow, so the faces cannot answer differently.

use crate::verbs::ops::{CheckResult, Context, TailQuery};
use crate::Result;
use std::time::Duration;

impl Context {
    /// Waits up to `yield_for` for the started job `job_id` to end: what
    /// `check` gives for it if it ended by then (the default tail), `None`
    /// if it still runs (it is left running).
    pub fn yield_to(&self, job_id: &str, yield_for: Duration) -> Result<Option<CheckResult>> {
        let ids = [job_id.to_string()];
        let outcome = self.wait(&ids, Some(yield_for))?;
        if outcome.timed_out {
            return Ok(None);
        }
        self.check(job_id, &TailQuery::new(None, None)?).map(Some)
    }
}
