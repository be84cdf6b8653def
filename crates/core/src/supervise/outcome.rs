//! The supervisor's end of a job: recording its outcome (in its job.json,
//! then the registry) and announcing it; an end that cannot be written yet
//! is kept until it can (supervise/unrecorded.rs).

use crate::model::job::{EndedBy, Job};
use crate::now_ms;
use crate::store::config::Config;
use crate::store::paths::{HeldHome, Home};
use crate::store::registry::Registry;
use crate::supervise::supervisor::Supervisor;
use crate::supervise::unrecorded::{self, Unrecorded};
use crate::supervise::{ending, notify};

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
        let end = ending::End { by, exit: exit.recorded(), ended_at, caller_records };
        if let ending::Recorded::Nowhere(error) = ending::record_end(self, end) {
            unrecorded::keep(self, error);
        }
        self.report_record_failure();
    }
}

impl Supervisor {
    /// Ends the process once `run` is over (the end recorded, every child
    /// and errand it waits for gone, the log's deleter joined: `finish`),
    /// without unwinding the supervisor and the runtime. Nothing is left to
    /// write: the log and the warnings go to their files unbuffered, and
    /// every record is written. What the drops would free the kernel frees;
    /// the drops' code, given back while the job ran (supervise/memory.rs),
    /// would be faulted in again only to do so, on every one of 1,000
    /// supervisors ending together in a `kill --all`.
    pub(super) fn exit(self) -> ! {
        crate::os::supervision::exit_now()
    }
}

/// What the supervisor does when an end is recorded (ending::record_end).
impl ending::Ending for Supervisor {
    fn record(&mut self) -> (&Home, &Config, &Registry, &mut Job) {
        (&self.home, &self.config, &self.registry, &mut self.job)
    }

    /// Beside the loop (a forked child, a thread), so retries and hooks
    /// never hold up the loop that drains lingering output. The supervisor
    /// stays until it is done, as it stays for any child and errand.
    fn announce(&mut self) {
        let (home, config, job) = (self.home.clone(), self.config.clone(), self.job.clone());
        if let Some(pid) = self.errand("notifier", move || notify::announce(&home, &config, &job)) {
            self.host.notifier_started(pid);
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
        if crate::os::supervision::KEEPS_TREE_RECORD && self.alive_lock.is_none() && self.registry.write_job_file_through(&self.job, durable, &spare).is_ok() {
            return Ok(());
        }
        self.registry.write_job_file(&self.job, durable)
    }
}

/// An end that could be written nowhere is kept here (supervise/unrecorded.rs).
impl unrecorded::Keeping for Supervisor {
    fn kept(&mut self) -> &mut Option<Unrecorded> {
        &mut self.unrecorded
    }

    fn held(&self) -> &HeldHome {
        &self.held
    }
}
