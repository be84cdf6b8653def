//! What a sweeping kill (`Context::kill_supervised`) does beside the
//! supervisors it asks: one request file shared by every job, and the
//! processes of jobs outside their supervisor's subtree, signalled here.

use crate::verbs::context::wait_until;
use crate::model::job::ProcessIdentity;
use crate::model::protocol::{KillRequest, KILL_REQUEST_FILE};
use crate::os::procinfo::{self, SignalOutcome};
use crate::os::tree;
use std::time::{Duration, Instant};

/// One kill request for many jobs, written once and hard-linked into each
/// job's directory as its `kill-request.json`: a link is a name, where a
/// file of its own per job is an inode to allocate (a third of a 1,000-job
/// `kill --all`'s time, on a disk where many files were just deleted) and a
/// rename. The shared file goes once every link is made.
pub(super) struct SharedRequest(std::path::PathBuf);

impl SharedRequest {
    pub(super) fn write(home: &crate::store::paths::Home, request: &KillRequest) -> Option<SharedRequest> {
        let bytes = serde_json::to_vec(request).ok()?;
        crate::store::registry::write_temp_beside(&home.registry_path(), &bytes).ok().map(SharedRequest)
    }

    /// False when the name is taken (a request left before) or no link can
    /// be made there: the caller then writes a file of the job's own.
    pub(super) fn link_into(&self, job_dir: &std::path::Path) -> bool {
        std::fs::hard_link(&self.0, job_dir.join(KILL_REQUEST_FILE)).is_ok()
    }
}

impl Drop for SharedRequest {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Processes of jobs that lie outside their live supervisor's subtree
/// (a cookie carrier started through another process's hands, a recorded
/// one adopted elsewhere): the supervisor of a sweeping kill does not look
/// for them, so they are signalled here, each by identity, each newcomer
/// at the next look, SIGKILL once the grace period is over.
#[derive(Default)]
pub(super) struct Strays {
    termed: std::collections::HashSet<(u32, u64)>,
    killed: std::collections::HashSet<(u32, u64)>,
    pub(super) all: Vec<ProcessIdentity>,
}

impl Strays {
    /// `paused`: a stray first sent SIGTERM gets SIGCONT after it, to act on it.
    pub(super) fn signal(&mut self, members: &tree::Members, signal: i32, paused: bool) {
        for row in members.rows.iter().filter(|r| !members.below_supervisor.contains(&r.identity.pid)) {
            let who = row.identity;
            let key = (who.pid, who.start_ticks);
            if !self.termed.contains(&key) && !self.killed.contains(&key) {
                self.all.push(who);
            }
            let first = if signal == crate::model::signals::SIGKILL { self.killed.insert(key) } else { self.termed.insert(key) };
            if first {
                procinfo::signal_process(&who, signal);
                if paused && signal != crate::model::signals::SIGKILL {
                    procinfo::signal_process(&who, crate::model::signals::SIGCONT);
                }
            }
        }
    }

    /// SIGTERM to every process of a job, which its supervisor would
    /// otherwise send below itself (`KillRequest::caller_signalled_since`):
    /// one to its process group while that is provably the job's (a member
    /// forked since the pass gets it too), each other process by identity;
    /// SIGCONT after it to a paused job's. Those outside the supervisor's
    /// subtree are followed as strays (`signal`).
    pub(super) fn signal_whole_job(&mut self, members: &tree::Members, main: Option<ProcessIdentity>, paused: bool) {
        use crate::model::signals::{SIGCONT, SIGTERM};
        let group = main.filter(ProcessIdentity::is_possible_job_process).map(|m| m.pid).filter(|_| members.group_is_ours);
        let signals: &[i32] = if paused { &[SIGTERM, SIGCONT] } else { &[SIGTERM] };
        for &signal in signals {
            let group_sent = group.is_some_and(|pgid| procinfo::signal_group(pgid, signal) == SignalOutcome::Sent);
            for row in &members.rows {
                let who = row.identity;
                if !members.below_supervisor.contains(&who.pid) && signal == SIGTERM {
                    let key = (who.pid, who.start_ticks);
                    if self.termed.insert(key) && !self.killed.contains(&key) {
                        self.all.push(who);
                    }
                }
                if !(group_sent && Some(row.pgid) == group) {
                    procinfo::signal_process(&who, signal);
                }
            }
        }
    }

    /// Those still alive get SIGKILL once the grace period is over.
    pub(super) fn finish(&mut self, grace_ends: Instant) {
        let alive = |all: &[ProcessIdentity]| all.iter().copied().filter(procinfo::is_same_process_alive).collect::<Vec<_>>();
        if alive(&self.all).is_empty() {
            return;
        }
        wait_until(grace_ends.saturating_duration_since(Instant::now()), Duration::from_millis(20), || alive(&self.all).is_empty());
        for who in alive(&self.all) {
            procinfo::signal_process(&who, crate::model::signals::SIGKILL);
        }
        wait_until(STILL_EXITING_PATIENCE, Duration::from_millis(20), || alive(&self.all).is_empty());
    }
}

/// After the tree was signalled and SIGKILL had its chance, how long `kill`
/// still waits for the last of it to be gone before it says how many are
/// still exiting (a process in uninterruptible sleep cannot be hurried).
pub(super) const STILL_EXITING_PATIENCE: Duration = Duration::from_secs(2);
