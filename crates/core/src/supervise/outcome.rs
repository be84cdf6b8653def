//! The supervisor's end of a job: recording its outcome (in its job.json,
//! then the registry), announcing it, and keeping an end that cannot be
//! written yet until it can.

use crate::model::job::{EndedBy, Job, JobState};
use crate::model::protocol::KILL_REQUEST_FILE;
use crate::now_ms;
use crate::os::procinfo;
use crate::store::registry::Patience;
use crate::supervise::supervisor::{KillInProgress, KillReason, Supervisor, Unrecorded};
use crate::supervise::{notify, ready};
use crate::Error;
use std::time::{Duration, Instant};

use crate::supervise::spec::AFTER_END;

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
        // An end recorded by someone else first (`kill` acting without this
        // supervisor while it was stopped) stands, and was announced by them.
        // They write it into job.json too; the registry is read (all of it)
        // only when no sweeping caller records the end for us.
        let caller_records = self.kill_looks_below_only();
        let recorded_first = self.registry.own_record(&self.job.id).filter(|j| j.status().is_final()).or_else(|| {
            (!caller_records).then(|| self.registry.get(&self.job.id).ok()).flatten().filter(|j| j.status().is_final())
        });
        if let Some(stored) = recorded_first {
            self.job = stored;
            let _ = std::fs::remove_file(self.home.job_dir(&self.job.id).join(KILL_REQUEST_FILE));
            self.report_record_failure();
            return;
        }
        let by = match &self.kill {
            Some(KillInProgress { reason: KillReason::Timeout, .. }) => EndedBy::Timeout,
            Some(KillInProgress { reason: KillReason::Requested | KillReason::Tie, .. }) => EndedBy::Kill,
            _ => EndedBy::Itself,
        };
        let ended_at = self.main_ended_at.unwrap_or_else(now_ms);
        let state = ready::judge_end(&self.job, JobState::ended(by, Some(exit.into()), ended_at));
        let notify_config = self.config.notify.clone();
        // The announcement is claimed with the status change: whoever records
        // an outcome announces it, so it is announced once.
        let peak_rss_kb = procinfo::children_peak_rss_kb();
        let wake = self.job.wake.clone();
        let tie = self.job.tie.clone();
        let apply = |job: &mut Job| {
            job.tie = tie.clone();
            job.state = state.clone();
            job.peak_rss_kb = peak_rss_kb;
            job.notification = notify::claim(&notify_config, job);
            job.wake = wake.clone();
            // Ended, it is no longer paused (a kill continued its tree).
            job.paused_at = None;
        };
        apply(&mut self.job);
        // The job's own job.json first: it needs no lock, and its room was
        // reserved at the start, so it is written even on a full disk. Readers
        // prefer it to a registry that could not be written, or that we are
        // killed before writing.
        // Durable unless a sweeping caller records the end: its one registry
        // write for every job it killed is (an fsync each cost a kill of
        // 1,000 jobs a tenth of its supervisors' time).
        let kept = self.write_end_record(!caller_records);
        if let Err(e) = &kept {
            self.note_error(&format!("cannot record the job's end in its job.json: {e}"));
        }
        let _ = std::fs::remove_file(self.home.job_dir(&self.job.id).join(KILL_REQUEST_FILE));
        // Announced before the registry wait: the announcement is claimed in
        // job.json, which only we write while we live, and goes out even if
        // the registry is held up or we are killed waiting for it.
        if notify::has_work(&self.config.notify, &self.job) {
            self.spawn_notifier();
        }
        // The slot is free once the end is in job.json, which the registry's
        // locked reads take in: the next job need not wait for our registry write.
        if let Some(hook) = AFTER_END.get() {
            hook(&self.home, &self.config);
        }
        // The notifier may have recorded its delivery (taking our end from
        // job.json) before we get the lock: an end already there stays as it is.
        let registry_apply = |job: &mut Job| {
            if job.state != state {
                apply(job);
            }
        };
        if caller_records && kept.is_ok() {
            // The killer takes every end it waited for into the registry at
            // once; should it die first, any later write does.
            self.report_record_failure();
            return;
        }
        let result = match self.registry.modify(&self.job.id, registry_apply) {
            Err(Error::UnknownJob(_)) => self.registry.upsert(&self.job),
            other => other.map(|_| ()),
        };
        match (kept, result) {
            // The first error says it: the registry's is the same refusal again.
            (Err(in_job_file), Err(_)) => self.keep_unrecorded(in_job_file.to_string()),
            (Ok(()), Err(e)) => {
                self.note_error(&format!("cannot record the job's end in the registry: {e}; it is kept in its job.json, which readers prefer"))
            }
            _ => {}
        }
        // The registry was read whole: what that took goes back.
        procinfo::release_free_heap();
        self.report_record_failure();
    }

    /// job.json with the end, through the lock file we let go of as the job
    /// ended (`Registry::write_job_file_through`: no inode allocated or
    /// freed), else the usual way. The lock's name then holds the old
    /// record, and becomes our done mark (`leave_done_mark`).
    fn write_end_record(&self, durable: bool) -> crate::Result<()> {
        let spare = self.home.job_dir(&self.job.id).join(crate::model::protocol::SUPERVISOR_LOCK_FILE);
        if self.alive_lock.is_none() && self.registry.write_job_file_through(&self.job, durable, &spare).is_ok() {
            return Ok(());
        }
        self.registry.write_job_file(&self.job, durable)
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
        if let Some(hook) = AFTER_END.get() {
            hook(&self.home, &self.config);
        }
    }

    /// Announces the end from a forked child, so retries and hooks never hold
    /// up the loop that drains lingering output. The supervisor stays until it
    /// is done, as it stays for any child.
    fn spawn_notifier(&mut self) {
        if let Some(pid) = self.fork_errand("notifier", |supervisor| {
            notify::announce(&supervisor.home, &supervisor.config, &supervisor.job);
        }) {
            self.notifier = Some(pid);
            self.phase = self.phase.child_started();
        }
    }
}
