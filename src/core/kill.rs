//! Signalling a job's tree: its process group, every process that carries
//! the job's cookie (descendants that left the group with setsid or a double
//! fork), and, while its supervisor lives, everything below the supervisor.
//! Each process is signalled by identity, never by a bare pid.

use super::job::{Job, ProcessIdentity};
use super::procinfo::{self, ProcessEntry, Row, SignalOutcome};
use std::collections::{HashMap, HashSet};

/// What tells a job's processes apart from the rest.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    pub job_id: &'a str,
    pub main: Option<ProcessIdentity>,
    pub supervisor: Option<ProcessIdentity>,
}

impl<'a> Tree<'a> {
    pub fn of(job: &'a Job) -> Tree<'a> {
        Tree { job_id: &job.id, main: job.main, supervisor: job.supervisor }
    }
}

/// A job's live processes, and whether its process group (whose id is the
/// main process's pid) is provably the job's: its leader is still the
/// recorded main process, or a member carries the job's cookie.
pub fn job_tree(tree: Tree) -> (Vec<ProcessEntry>, bool) {
    let rows = procinfo::table();
    let pgid = tree.main.map(|m| m.pid);
    let ours = |r: &Row| r.cookie.as_deref() == Some(tree.job_id);
    let group_is_ours = tree.main.is_some_and(|m| procinfo::is_same_process_alive(&m))
        || rows.iter().any(|r| Some(r.pgid) == pgid && ours(r));
    let mut members: HashSet<u32> =
        rows.iter().filter(|r| ours(r) || (group_is_ours && Some(r.pgid) == pgid)).map(|r| r.identity.pid).collect();
    members.extend(supervised(&rows, tree.supervisor));
    let entries = rows.iter().filter(|r| members.contains(&r.identity.pid)).map(Row::entry).collect();
    (entries, group_is_ours)
}

/// Everything below a live supervisor: as a child subreaper it adopts every
/// orphan among the job's descendants, so this finds those that dropped the
/// cookie from their environment too. Its helpers (the notifier) and other
/// jobs' supervisors carry the supervisor mark; they and what runs under
/// them are not this job's.
fn supervised(rows: &[Row], supervisor: Option<ProcessIdentity>) -> Vec<u32> {
    let Some(supervisor) = supervisor else { return Vec::new() };
    // The table leaves out the caller, which may be the supervisor itself.
    let alive = supervisor.pid == std::process::id() || rows.iter().any(|r| r.identity == supervisor);
    if !alive {
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<&Row>> = HashMap::new();
    for row in rows {
        children.entry(row.ppid).or_default().push(row);
    }
    let mut found = Vec::new();
    let mut queue = vec![supervisor.pid];
    while let Some(parent) = queue.pop() {
        for child in children.get(&parent).into_iter().flatten().filter(|c| !c.helper) {
            found.push(child.identity.pid);
            queue.push(child.identity.pid);
        }
    }
    found
}

#[derive(Debug, Default, Clone)]
pub struct TreeSignalReport {
    /// Processes the signal was sent to.
    pub sent: Vec<ProcessEntry>,
    /// Processes it could not be sent to, and why.
    pub failed: Vec<(ProcessEntry, String)>,
}

/// Sends `signal` to every live process of the job. Returns who got it.
pub fn signal_tree(tree: Tree, signal: i32) -> TreeSignalReport {
    // The group first, before the slower pass over /proc: while the main
    // process is the recorded one, its group is the job's.
    let group_signalled = match tree.main {
        Some(m) if procinfo::is_same_process_alive(&m) => {
            (unsafe { libc::killpg(m.pid as libc::pid_t, signal) }) == 0
        }
        _ => false,
    };
    let (processes, group_is_ours) = job_tree(tree);
    let mut report = TreeSignalReport::default();
    let mut group_sent = group_signalled;
    if let (true, false, Some(main)) = (group_is_ours, group_signalled, tree.main) {
        // One atomic signal to the group also reaches members forked since the scan.
        group_sent = unsafe { libc::killpg(main.pid as libc::pid_t, signal) } == 0;
    }
    let group = tree.main.map(|m| m.pid);
    for entry in processes {
        match procinfo::signal_process(&entry.identity, signal) {
            SignalOutcome::Sent => report.sent.push(entry),
            // Gone already: the group signal reached it first.
            SignalOutcome::Gone if group_sent && Some(entry.pgid) == group => report.sent.push(entry),
            SignalOutcome::Gone => {}
            SignalOutcome::Replaced => report.failed.push((entry, "pid was reused by another process".into())),
            SignalOutcome::Failed(why) => report.failed.push((entry, why)),
        }
    }
    report
}

/// True while any process of the job is alive (zombies do not count).
pub fn tree_alive(tree: Tree) -> bool {
    !job_tree(tree).0.is_empty()
}

/// Whether an ended job still has processes running: by its cookie (looked
/// up in `cookie_holders`, from one pass for many jobs), or below its live
/// supervisor, which finds those that dropped the cookie too.
pub fn has_live_processes(job: &Job, cookie_holders: &HashSet<String>) -> bool {
    cookie_holders.contains(&job.id)
        || (job.supervisor.is_some_and(|s| procinfo::is_same_process_alive(&s)) && tree_alive(Tree::of(job)))
}
