//! `wait`: until jobs end (or are ready), a timeout passes, or the caller cancels.

use crate::model::ids::validate_job_id;
use crate::model::job::{Job, JobStatus};
use crate::{Error, Result};
use std::time::{Duration, Instant};
use crate::verbs::context::Context;

#[derive(Debug, Clone)]
pub struct WaitOutcome {
    pub jobs: Vec<Job>,
    pub timed_out: bool,
}

impl Context {
    /// Blocks until every job in `ids` has ended, or `timeout` passes.
    /// Returns the jobs as last seen; `timed_out` says whether any still runs.
    pub fn wait(&self, ids: &[String], timeout: Option<Duration>) -> Result<WaitOutcome> {
        let outcome = self.wait_or_cancel(ids, timeout, &crate::verbs::cancel::Cancel::never())?;
        Ok(outcome.expect("a wait that cannot be cancelled ends with an outcome"))
    }

    /// `wait`, stopped at once when `cancel` is thrown: then `None`.
    pub fn wait_or_cancel(
        &self,
        ids: &[String],
        timeout: Option<Duration>,
        cancel: &crate::verbs::cancel::Cancel,
    ) -> Result<Option<WaitOutcome>> {
        self.wait_until_or_cancel(ids, timeout, cancel, &|job: &Job| job.status().is_final())
    }

    /// As `wait_or_cancel`, until every job is ready (`--ready-*`), has
    /// passed its readiness timeout, or ended; refuses a job without a
    /// readiness check, whose wait would only be a wait for its end.
    pub fn wait_ready_or_cancel(
        &self,
        ids: &[String],
        timeout: Option<Duration>,
        cancel: &crate::verbs::cancel::Cancel,
    ) -> Result<Option<WaitOutcome>> {
        for id in ids {
            if self.job(id)?.ready.is_none() {
                return Err(Error::Usage(format!(
                    "job {id} has no readiness check (start it with --ready-log, --ready-port or --ready-url); wait without --ready waits for its end"
                )));
            }
        }
        self.wait_until_or_cancel(ids, timeout, cancel, &|job: &Job| job.readiness_settled(crate::now_ms()))
    }

    /// As `wait_or_cancel`, until `done` holds for every job (an ended job
    /// counts as done whatever `done` says, see `wait --ready`); jobs are
    /// marked seen only once all have ended.
    pub fn wait_until_or_cancel(
        &self,
        ids: &[String],
        timeout: Option<Duration>,
        cancel: &crate::verbs::cancel::Cancel,
        done: &dyn Fn(&Job) -> bool,
    ) -> Result<Option<WaitOutcome>> {
        for id in ids {
            validate_job_id(id)?;
        }
        let started = Instant::now();
        let deadline = timeout.map(|t| started + t);
        let mut pause = Duration::from_millis(2);
        let mut last_reconcile = Instant::now();
        // Woken when a record is written (the registry, each job's job.json:
        // an end, or readiness) rather than only at the next look; the looks
        // stay, for what no write announces (a supervisor that died).
        let watcher = crate::os::platform::DirWatcher::new().ok();
        if let Some(watcher) = &watcher {
            watcher.watch(&self.home.root);
            for id in ids {
                watcher.watch(&self.home.job_dir(id));
            }
        }
        loop {
            let all = self.registry().load()?;
            let mut jobs = Vec::with_capacity(ids.len());
            for id in ids {
                let job = all.iter().find(|j| &j.id == id).cloned().ok_or_else(|| Error::UnknownJob(id.clone()))?;
                jobs.push(job);
            }
            // Cheap checks each round; the OS check (is the supervisor still there?) once a second.
            if last_reconcile.elapsed() >= Duration::from_secs(1) {
                last_reconcile = Instant::now();
                jobs = self.reconcile_jobs(jobs)?;
                if jobs.iter().any(|j| j.status() == JobStatus::Queued) {
                    // A slot whose supervisor died without handing it on.
                    self.fill_queues();
                }
            }
            if jobs.iter().all(|j| j.status().is_final()) {
                let jobs = jobs.into_iter().map(|j| self.mark_seen(j)).collect::<Result<_>>()?;
                return Ok(Some(WaitOutcome { jobs, timed_out: false }));
            }
            if jobs.iter().all(|j| j.status().is_final() || done(j)) {
                return Ok(Some(WaitOutcome { jobs, timed_out: false }));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(Some(WaitOutcome { jobs, timed_out: true }));
            }
            let mut sleep = pause;
            if let Some(d) = deadline {
                sleep = sleep.min(d.saturating_duration_since(Instant::now()));
            }
            if cancel.pause_or_wake(sleep, watcher.as_ref().and_then(|w| w.fd())) {
                return Ok(None);
            }
            if let Some(watcher) = &watcher {
                watcher.drain();
            }
            // The end of a short job is noticed within tens of ms; a long wait
            // looks less often, so hours of waiting do not cost a core.
            let cap = match started.elapsed().as_secs() {
                0..=4 => Duration::from_millis(20),
                5..=59 => Duration::from_millis(100),
                _ => Duration::from_millis(250),
            };
            pause = (pause * 2).min(cap);
        }
    }
}
