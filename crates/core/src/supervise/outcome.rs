//! The supervisor's end of a job: recording its outcome (in its job.json,
//! then the registry), announcing it, and keeping an end that cannot be
//! written yet until it can.

use crate::model::job::{EndedBy, Job};
use crate::model::protocol::KILL_REQUEST_FILE;
use crate::now_ms;
use crate::store::config::Config;
use crate::store::paths::Home;
use crate::store::registry::{Patience, Registry};
use crate::supervise::supervisor::{Supervisor, Unrecorded};
use crate::supervise::{ending, notify};
use std::time::{Duration, Instant};

/// The first retry of an unrecorded end comes this soon, then ever less
/// often, up to `RETRY_LONGEST_PAUSE`: a disk remounted writable is noticed
/// within seconds, at the cost of two failed opens per try meanwhile.
const RETRY_FIRST_PAUSE: Duration = Duration::from_millis(100);
const RETRY_LONGEST_PAUSE: Duration = Duration::from_secs(2);

impl Supervisor {
    pub(super) fn record_end(&mut self) {
        let Some(exit) = self.phase.main_exit() else { return };
        self.join_wake_registration();
        // What the job leaves behind is in the record before its end is. A
        // sweeping caller's kill left nothing (we record once the tree is
        // gone) and passes over the table itself: a pass here for each of
        // N jobs killed at once would read N jobs' processes each.
        self.record_processes(!self.kill_looks_below_only());
        // Before the end's event, as they came before the end.
        self.flush_deferred_matches();
        self.phase = self.phase.recorded();
        self.held.refresh();
        let by = self.kill.as_ref().map_or(EndedBy::Itself, |kill| kill.reason.ended_by());
        // A sweeping caller records the end in the registry for us, and
        // the registry is then not read (all of it) for an earlier end.
        let caller_records = self.kill_looks_below_only();
        let ended_at = self.main_ended_at.unwrap_or_else(now_ms);
        let end = ending::End { by, exit: Some(exit.into()), ended_at, caller_records };
        if let ending::Recorded::Nowhere(error) = ending::record_end(self, end) {
            self.keep_unrecorded(error);
        }
        self.report_record_failure();
    }


    /// Keeps the end that could be written nowhere (a read-only home, a full
    /// disk without the room job.json reserved), shows it to readers, and
    /// tries again now and then (`retry_unrecorded`): the same path as the
    /// first write, whatever the error was.
    fn keep_unrecorded(&mut self, error: String) {
        self.note_error(&format!("cannot record the job's end ({error}); keeping it here and trying again until it can be written"));
        let shown = crate::model::protocol::UnrecordedEnd { job: self.job.clone(), error: error.clone() };
        let shown = serde_json::to_vec(&shown).ok().and_then(|bytes| match crate::os::platform::publish_unrecorded(&bytes) {
            Ok(fd) => fd,
            Err(e) => {
                self.note_error(&format!("cannot show the unrecorded end to readers: {e}"));
                None
            }
        });
        let now = Instant::now();
        self.unrecorded = Some(Unrecorded { error, since: now, next_try: now + RETRY_FIRST_PAUSE, pause: RETRY_FIRST_PAUSE, _shown: shown });
    }

    /// Why an end kept unwritten can never be written, if it cannot: the home
    /// we hold was removed (no name leads to it any more), or the job's
    /// directory was and the registry no longer knows the job. Retrying for
    /// ever would keep us alive for nothing.
    fn end_has_nowhere_to_go(&self) -> Option<String> {
        if self.held.removed() {
            return Some(format!("the home {} was removed", self.home.root.display()));
        }
        let job_dir = self.home.job_dir(&self.job.id);
        let dir_gone = std::fs::symlink_metadata(&job_dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        if dir_gone && matches!(self.registry.get(&self.job.id), Err(crate::Error::UnknownJob(_))) {
            return Some(format!("its directory {} was removed and the registry no longer knows it", self.home.shown(&job_dir).display()));
        }
        None
    }

    /// Lets go of an end that could not be written, saying what it was: we
    /// then exit as soon as nothing else of the job keeps us.
    pub(super) fn give_up_unrecorded(&mut self, why: &str) {
        if let Some(unrecorded) = self.unrecorded.take() {
            self.note_error(&format!(
                "giving up recording the job's end ({}, {}), unwritten for {:.1} s ({}): {why}",
                self.job.status(),
                crate::model::job::how_it_ended(&self.job),
                unrecorded.since.elapsed().as_secs_f64(),
                unrecorded.error
            ));
        }
    }

    /// Writes the kept end when its time to try has come: job.json (which
    /// readers prefer), else the registry. Once written, the queue's slot is
    /// handed on, as after any end.
    pub(super) fn retry_unrecorded(&mut self) {
        let Some(unrecorded) = &mut self.unrecorded else { return };
        let now = Instant::now();
        if now < unrecorded.next_try {
            return;
        }
        unrecorded.pause = (unrecorded.pause * 2).min(RETRY_LONGEST_PAUSE);
        unrecorded.next_try = now + unrecorded.pause;
        if let Some(why) = self.end_has_nowhere_to_go() {
            self.give_up_unrecorded(&why);
            return;
        }
        self.held.refresh();
        let job = self.job.clone();
        let in_job_file = self.registry.write_job_file(&job, true);
        let in_registry = self.registry.modify_with(Patience::Brief, &job.id, |stored| {
            // An end recorded by someone else meanwhile stands.
            if !stored.status().is_final() {
                *stored = Job { seen_at: stored.seen_at, ..job.clone() };
            }
        });
        if in_job_file.is_err() && in_registry.is_err() {
            return;
        }
        if let Some(unrecorded) = self.unrecorded.take() {
            tracing::info!(
                "run-bg supervisor {}: recorded the job's end {:.1} s late (it could not be written: {})",
                self.job.id,
                unrecorded.since.elapsed().as_secs_f64(),
                unrecorded.error
            );
        }
        let _ = std::fs::remove_file(self.home.job_dir(&self.job.id).join(KILL_REQUEST_FILE));
        ending::hand_on_slot(&self.home, &self.config);
    }

}

/// What Unix does its own way when an end is recorded (ending::record_end).
impl ending::Ending for Supervisor {
    fn record(&mut self) -> (&Home, &Config, &Registry, &mut Job) {
        (&self.home, &self.config, &self.registry, &mut self.job)
    }

    /// From a forked child, so retries and hooks never hold up the loop
    /// that drains lingering output. The supervisor stays until it is
    /// done, as it stays for any child.
    fn announce(&mut self) {
        if let Some(pid) = self.fork_errand("notifier", |supervisor| {
            notify::announce(&supervisor.home, &supervisor.config, &supervisor.job);
        }) {
            self.notifier = Some(pid);
            self.phase = self.phase.child_started();
        }
    }

    fn note_error(&self, message: &str) {
        Supervisor::note_error(self, message);
    }

    /// job.json with the end, through the lock file we let go of as the job
    /// ended (`Registry::write_job_file_through`: no inode allocated or
    /// freed), else the usual way. The lock's name then holds the old
    /// record, and becomes our done mark (`leave_done_mark`).
    fn write_end_record(&mut self, durable: bool) -> crate::Result<()> {
        let spare = self.home.job_dir(&self.job.id).join(crate::model::protocol::SUPERVISOR_LOCK_FILE);
        if self.alive_lock.is_none() && self.registry.write_job_file_through(&self.job, durable, &spare).is_ok() {
            return Ok(());
        }
        self.registry.write_job_file(&self.job, durable)
    }
}
