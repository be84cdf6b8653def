//! `kill` of a job whose record (its job.json) cannot be read: what of it
//! still runs is found by its cookie, its supervisor's mark and what the
//! supervisor recorded, and ended before anything is removed.

use super::{terminate_tree, KillOutcome, STILL_EXITING_PATIENCE};
use crate::model::job::{Job, ProcessIdentity};
use crate::model::protocol::KillRequest;
use crate::os::procinfo::{self, SignalOutcome};
use crate::os::tree::{self, Tree};
use crate::verbs::context::{wait_until, Context};
use crate::{now_ms, Error, Result};
use std::time::Duration;

impl Context {
    /// Records that cannot be read of jobs something of which lives.
    /// `known`: the ids the registry names (none when it cannot be read).
    pub(super) fn live_unreadable_jobs(&self, known: &std::collections::HashSet<String>) -> Vec<crate::store::registry::CorruptRecord> {
        let records = self.registry().corrupt_records_besides(known);
        if records.is_empty() {
            return records;
        }
        let rows = procinfo::table();
        records.into_iter().filter(|r| unreadable_job_tree(&rows, &r.id, &self.home).is_some()).collect()
    }

    /// `kill` of a job whose record cannot be read. The record names no
    /// process, but the job's processes carry its cookie, its supervisor its
    /// mark, and what the supervisor recorded lies beside the record: they
    /// are ended first, the supervisor asked as for any kill, so that it
    /// records the end over the unreadable file. Only a record still
    /// unreadable then goes, with its directory (its launch spec with the
    /// submitter's environment): removed first, a running job ran on where no
    /// verb could find or stop it.
    pub(super) fn kill_corrupt(&self, record: crate::store::registry::CorruptRecord, grace: Option<Duration>, force: bool) -> Result<KillOutcome> {
        let grace = grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
        let ended = self.end_unreadable_job(&record.id, grace, force);
        if ended.anything() {
            if let Ok(job) = self.job(&record.id) {
                let message = format!(
                    "killed {}: {}; its record, unreadable before ({}), was written anew by its supervisor",
                    job.id,
                    ended.said(),
                    record.reason
                );
                return Ok(KillOutcome { job, signalled: true, message });
            }
        }
        let placeholder = || {
            // What the outcome names: the id, and that it is gone or ended.
            let placeholder = serde_json::json!({
                "id": record.id, "label": record.id, "argv": [], "command": "", "cwd": "",
                "status": "killed", "started_at": record.modified_ms, "ended_at": now_ms(),
                "log_path": self.home.job_dir(&record.id).join("output.log"),
            });
            serde_json::from_value::<Job>(placeholder).map_err(|e| Error::Other(e.to_string()))
        };
        // Its processes are ended; what is kept of its record is said.
        let kept = |why: String| -> Result<KillOutcome> {
            let message = format!("killed {}: {}; its directory is kept: {why}", record.id, ended.said());
            Ok(KillOutcome { job: placeholder()?, signalled: true, message })
        };
        if !record.removable {
            return match ended.anything() {
                true => kept(format!("its record {} cannot be read ({}), and may be a newer version's", record.file.display(), record.reason)),
                false => Err(Error::Other(format!("{}; nothing of it runs", record.describe()))),
            };
        }
        let removed = match self.registry().remove_corrupt(&record.id) {
            Ok(removed) => removed,
            Err(e) if ended.anything() => return kept(format!("it could not be removed ({e})")),
            Err(e) => return Err(e),
        };
        if !removed {
            // Recorded meanwhile (or removed): it is a job again, or gone.
            return self.kill(&record.id, Some(grace), force);
        }
        let message = format!(
            "removed {}: its record {} could not be read ({}); its directory, launch spec included, is deleted; {}",
            record.id,
            record.file.display(),
            record.reason,
            if ended.anything() { ended.said() } else { "nothing of it ran".to_string() }
        );
        Ok(KillOutcome { job: placeholder()?, signalled: ended.anything(), message })
    }

    /// Ends the live processes of a job whose record cannot be read (see
    /// `kill_corrupt`): its supervisor asked as for any kill and waited for
    /// until it has recorded the end (or is gone), then what is left
    /// signalled here.
    fn end_unreadable_job(&self, id: &str, grace: Duration, force: bool) -> UnreadableEnded {
        let rows = procinfo::table();
        let Some(unreadable) = unreadable_job_tree(&rows, id, &self.home) else { return UnreadableEnded::default() };
        let tree = Tree { recorded: &unreadable.recorded, ..unreadable.tree(id) };
        // Asked first: it ends its tree and records the end as a kill (our
        // own signals first would have it record a death by signal).
        let rung = tree.supervisor.filter(|&supervisor| {
            let request = KillRequest { grace_ms: grace.as_millis() as u64, force, caller_sweeps: false, caller_signalled_since: None };
            let doorbell = match self.write_kill_request(id, request) {
                Ok(()) => crate::model::signals::SIGUSR1,
                Err(_) => crate::os::sys::DOORBELL_FALLBACK,
            };
            matches!(procinfo::signal_process(&supervisor, doorbell), SignalOutcome::Sent)
        });
        if let Some(supervisor) = rung {
            // Until its end is recorded, not until it exits: one with a
            // notifier stays for its retries.
            let bound = if force { Duration::ZERO } else { grace } + STILL_EXITING_PATIENCE;
            let recorded = || self.registry().own_record(id).is_some_and(|job| job.status().is_final());
            wait_until(bound, Duration::from_millis(20), || recorded() || !procinfo::is_same_process_alive(&supervisor));
        }
        // What is left (all of it, without a supervisor): paused or not,
        // nothing says, so a SIGCONT after the SIGTERM lets a stopped tree act.
        let (signalled, _) = procinfo::OwnIds::fixed_while(|| terminate_tree(tree, grace, force, true));
        UnreadableEnded { asked_supervisor: rung.is_some(), signalled }
    }
}

/// What `end_unreadable_job` did.
#[derive(Default)]
struct UnreadableEnded {
    /// Its supervisor was asked to end it.
    asked_supervisor: bool,
    /// Processes signalled here (outside the supervisor's care, or without one).
    signalled: usize,
}

impl UnreadableEnded {
    fn anything(&self) -> bool {
        self.asked_supervisor || self.signalled > 0
    }

    fn said(&self) -> String {
        match (self.asked_supervisor, self.signalled) {
            (true, 0) => "its supervisor ended it".to_string(),
            (true, n) => format!("its supervisor ended it, and {n} process(es) left were signalled"),
            (false, n) => format!("{n} process(es) of it signalled"),
        }
    }
}

/// What can be known of the processes of a job whose record cannot be read:
/// its supervisor (the live process that carries the job's mark) and what
/// that supervisor recorded (its cookie carriers are found by `Tree` itself).
pub(crate) struct UnreadableJob {
    pub supervisor: Option<ProcessIdentity>,
    pub recorded: Vec<ProcessIdentity>,
}

impl UnreadableJob {
    fn tree<'a>(&self, id: &'a str) -> Tree<'a> {
        Tree { job_id: id, main: None, supervisor: self.supervisor, recorded: &[] }
    }
}

/// The job's `UnreadableJob`, or `None` when nothing of it lives.
pub(crate) fn unreadable_job_tree(rows: &[procinfo::Row], id: &str, home: &crate::store::paths::Home) -> Option<UnreadableJob> {
    let supervisor = rows.iter().find(|r| r.mark.as_deref() == Some(id) && r.identity.is_possible_job_process()).map(|r| r.identity);
    let recorded = crate::store::procset::load(&home.job_dir(id));
    let job = UnreadableJob { supervisor, recorded };
    let tree = Tree { recorded: &job.recorded, ..job.tree(id) };
    let lives = supervisor.is_some() || !tree::members_in(rows, tree).0.is_empty();
    lives.then_some(job)
}
