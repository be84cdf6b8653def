//! `run-bg __watch <id>`: the watcher that stays with an orphaned job, logs
//! what it still writes and records its end.

use crate::model::job::{Job, JobStatus};
use crate::os::procinfo;
use crate::model::protocol::KILL_REQUEST_FILE;
use crate::{supervise::outpipe, Result};
use crate::os::sys::OpenOptionsExt;
use std::time::Duration;
use crate::verbs::context::{wait_until, Context};
use crate::verbs::reconcile::WATCH_LOCK;

/// How long an orphan's watcher waits for the kill that asked for its end to
/// record it (the kill's grace period, 5 s by default, and its SIGKILL's
/// 2 s fit), before it records the end itself.
const KILLER_RECORDS_PATIENCE: Duration = Duration::from_secs(10);

impl Context {
    /// `run-bg __watch <id>`: stays with an orphaned job until its last process
    /// is gone, then has `reconcile_job` record its end (`lost`, or `killed` if
    /// we were killing it) with the time it ended. Meanwhile it reopens the
    /// job's output pipe and logs what waited there and what follows, as the
    /// supervisor would have. Its exit status cannot be had: the main process
    /// is not our child. One watcher per job.
    /// `inherited`: the pipe as `start_watcher` handed it over, if it did.
    pub fn watch_orphan(&self, id: &str, inherited: Option<crate::os::sys::OwnedPipe>) -> Result<()> {
        let lock_path = self.home.job_dir(id).join(WATCH_LOCK);
        let Ok(lock) =
            crate::store::paths::options_nofollow().create(true).truncate(false).write(true).mode(0o600).open(&lock_path)
        else {
            return Ok(());
        };
        if lock.try_lock().is_err() {
            return Ok(()); // another watcher has it
        }
        let job = self.watched_record(id)?;
        let mut output = outpipe::Reattached::open(
            &self.home.job_dir(id),
            inherited,
            &self.home.job_log(id, std::path::Path::new(&job.log_path)),
            &self.config.logs,
        );
        let mut waited_for_killer = false;
        loop {
            let job = self.watched_record(id)?;
            let main = job.main.filter(procinfo::is_same_process_alive);
            // Its main process gone under a kill: the killer's record comes
            // first, before this watcher's own look over /proc (400 watchers
            // looking at once held up the kill itself).
            if main.is_none() && job.status() == JobStatus::Orphaned && !waited_for_killer {
                waited_for_killer = true;
                if self.killer_records(id) {
                    continue;
                }
            }
            // Looked for only once the main process is gone; found empty, it
            // also settles the pipe below without a second look.
            let none_left = job.status() == JobStatus::Orphaned && main.is_none() && self.processes_of(&job).is_empty();
            if job.status() != JobStatus::Orphaned || none_left {
                // What they wrote last is in the log before their end is recorded.
                if let Some(output) = &mut output {
                    output.drain();
                }
                // The pipe at its end (no writer left) says so without a
                // look over /proc; after a kill of N orphans, N watchers
                // each looking over a table of N made the kill quadratic.
                let pipe_ended = output.as_ref().is_some_and(|output| !output.is_open());
                if pipe_ended || none_left || self.processes_of(&job).is_empty() {
                    outpipe::remove(&self.home.job_dir(id));
                }
                // Still orphaned: a wait above for the killer was in vain, or
                // one now is.
                if job.status() == JobStatus::Orphaned && (waited_for_killer || !self.killer_records(id)) {
                    self.reconcile_job_as(job, true)?;
                }
                return Ok(());
            }
            let pace = if main.is_some() { Duration::from_secs(5) } else { Duration::from_secs(1) };
            match (&mut output, main) {
                (Some(output), main) if output.is_open() => output.pump(main.as_ref(), pace),
                (_, Some(main)) => procinfo::wait_for_exit(&main, pace),
                (_, None) => std::thread::sleep(pace),
            }
        }
    }

    /// The job as its own job.json says, which every status change
    /// rewrites (the registry only when that is missing): N watchers each
    /// parsing a registry of N jobs, at their start and on every wake, made
    /// a look at N orphans and their kill quadratic.
    fn watched_record(&self, id: &str) -> Result<Job> {
        match self.registry().own_record(id) {
            Some(job) => Ok(job),
            None => self.registry().get(id),
        }
    }

    /// Whether a kill that asked for this orphan's end (its request beside
    /// the job, written in the last minute) recorded it within
    /// `KILLER_RECORDS_PATIENCE`, as seen in the job's own job.json. The
    /// killer (`orphans --kill`, `kill --all`) records all its jobs in one
    /// registry write once every one is gone; a watcher per job writing
    /// too made `orphans --kill` of 400 orphans wait behind 400 rewrites of
    /// the registry (28 ms a job, 15 at 100).
    fn killer_records(&self, id: &str) -> bool {
        let request = self.home.job_dir(id).join(KILL_REQUEST_FILE);
        let fresh = crate::store::paths::age(&request).is_some_and(|age| age < Duration::from_secs(60));
        fresh
            && wait_until(KILLER_RECORDS_PATIENCE, Duration::from_millis(100), || {
                self.registry().own_record(id).is_some_and(|j| j.status().is_final())
            })
    }
}
