//! Start-and-yield: a caller that starts a job may stay a while and get the
//! job's outcome at once when it ends in that time, as `run-bg --yield` and
//! the JS `runYield` do. One flow, so the faces cannot answer differently.
//! A job with a readiness check (`--ready-*`) yields as soon as it is ready,
//! or its readiness timeout passed: a server never ends.

use crate::now_ms;
use crate::verbs::cancel::Cancel;
use crate::verbs::check::{CheckResult, TailQuery};
use crate::verbs::context::Context;
use crate::Result;
use std::time::Duration;

/// How a yield ended.
#[derive(Debug)]
pub enum Yielded {
    /// The job ended in time: what `check` gives for it (the default tail).
    Ended(Box<CheckResult>),
    /// The job has a readiness check and it is settled while the job runs:
    /// it is ready (`readyAt`), or its readiness timeout passed (`check`
    /// says `not ready after …`). It is left running.
    Ready(Box<CheckResult>),
    /// It still runs; it is left running.
    Running,
    /// The caller stopped waiting (`cancel`); the job is left running.
    Cancelled,
}

impl Context {
    /// Waits up to `yield_for` for the started job `job_id` to end (or be
    /// ready, when it has a readiness check), or until `cancel` is thrown.
    pub fn yield_to(&self, job_id: &str, yield_for: Duration, cancel: &Cancel) -> Result<Yielded> {
        let ids = [job_id.to_string()];
        let settled = |job: &crate::model::job::Job| job.ready.is_some() && job.readiness_settled(now_ms());
        match self.wait_until_or_cancel(&ids, Some(yield_for), cancel, &settled)? {
            None => Ok(Yielded::Cancelled),
            Some(outcome) if outcome.timed_out => Ok(Yielded::Running),
            Some(outcome) if outcome.jobs.iter().all(|j| j.status().is_final()) => {
                Ok(Yielded::Ended(Box::new(self.check(job_id, &TailQuery::new(None, None)?)?)))
            }
            Some(_) => {
                let check = self.check(job_id, &TailQuery::new(None, None)?)?;
                // Ended between the two looks: an end is an end.
                if check.job.status().is_final() {
                    return Ok(Yielded::Ended(Box::new(check)));
                }
                Ok(Yielded::Ready(Box::new(check)))
            }
        }
    }
}
