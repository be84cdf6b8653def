//! Signalling a job's tree: its process group plus every process that carries
//! the job's cookie (descendants that left the group with setsid or a double
//! fork). Each process is signalled by identity, never by a bare pid.

use super::job::ProcessIdentity;
use super::procinfo::{self, ProcessEntry, SignalOutcome};

/// A job's live processes. The group (whose id is the main process's pid)
/// counts only while it is provably the job's: its leader is still the
/// recorded main process, or a member carries the job's cookie.
pub fn job_tree(main: Option<ProcessIdentity>, job_id: &str) -> (Vec<ProcessEntry>, bool) {
    let pgid = main.map(|m| m.pid);
    let entries = procinfo::job_processes(pgid, job_id);
    let group_is_ours = main.is_some_and(|m| procinfo::is_same_process_alive(&m))
        || entries.iter().any(|e| Some(e.pgid) == pgid && e.cookie.as_deref() == Some(job_id));
    if group_is_ours {
        (entries, true)
    } else {
        (entries.into_iter().filter(|e| e.cookie.as_deref() == Some(job_id)).collect(), false)
    }
}

#[derive(Debug, Default, Clone)]
pub struct TreeSignalReport {
    /// Processes the signal was sent to.
    pub sent: Vec<ProcessEntry>,
    /// Processes it could not be sent to, and why.
    pub failed: Vec<(ProcessEntry, String)>,
}

/// Sends `signal` to every live process of the job. Returns who got it.
pub fn signal_tree(main: Option<ProcessIdentity>, job_id: &str, signal: i32) -> TreeSignalReport {
    // The group first, before the slower pass over /proc: while the main
    // process is the recorded one, its group is the job's.
    let group_signalled = match main {
        Some(m) if procinfo::is_same_process_alive(&m) => {
            (unsafe { libc::killpg(m.pid as libc::pid_t, signal) }) == 0
        }
        _ => false,
    };
    let (tree, group_is_ours) = job_tree(main, job_id);
    let mut report = TreeSignalReport::default();
    if let (true, false, Some(main)) = (group_is_ours, group_signalled, main) {
        // One atomic signal to the group also reaches members forked since the scan.
        unsafe { libc::killpg(main.pid as libc::pid_t, signal) };
    }
    for entry in tree {
        match procinfo::signal_process(&entry.identity, signal) {
            SignalOutcome::Sent => report.sent.push(entry),
            SignalOutcome::Gone => {}
            SignalOutcome::Replaced => report.failed.push((entry, "pid was reused by another process".into())),
            SignalOutcome::Failed(why) => report.failed.push((entry, why)),
        }
    }
    report
}

/// True while any process of the job is alive (zombies do not count).
pub fn tree_alive(main: Option<ProcessIdentity>, job_id: &str) -> bool {
    !job_tree(main, job_id).0.is_empty()
}
