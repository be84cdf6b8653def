//! Signalling a job's tree: its process group, every process that carries
//! the job's cookie (descendants that left the group with setsid or a double
//! fork), and, while its supervisor lives, everything below the supervisor.
//! Each process is signalled by identity, never by a bare pid.

use crate::model::job::{Job, ProcessIdentity};
use crate::os::procinfo::{self, ProcessEntry, Row, SignalOutcome};
use crate::model::protocol::SUPERVISOR_MARK;
use std::collections::{HashMap, HashSet};

/// What tells a job's processes apart from the rest.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    pub job_id: &'a str,
    pub main: Option<ProcessIdentity>,
    pub supervisor: Option<ProcessIdentity>,
}

impl<'a> Tree<'a> {
    /// Identities no job's process can have (pid 0 or 1, from a corrupt or
    /// forged record) are left out, so nothing is ever signalled through them.
    pub fn of(job: &'a Job) -> Tree<'a> {
        let possible = |who: &ProcessIdentity| who.is_possible_job_process();
        Tree { job_id: &job.id, main: job.main.filter(possible), supervisor: job.supervisor.filter(possible) }
    }
}

/// The job's supervisor while it runs: the recorded process, alive, and
/// carrying the mark its starter gave it for this job. A record cannot point
/// the kill doorbell, or the walk over "everything below the supervisor", at
/// a process we did not start.
pub fn live_supervisor(job: &Job) -> Option<ProcessIdentity> {
    let supervisor = job.supervisor.filter(ProcessIdentity::is_possible_job_process)?;
    let ours = procinfo::is_same_process_alive(&supervisor)
        && procinfo::environ_value(supervisor.pid, SUPERVISOR_MARK).as_deref() == Some(job.id.as_str());
    ours.then_some(supervisor)
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
    // The table leaves out the caller, which may be the supervisor itself;
    // anything else must be a live supervisor (it carries the mark).
    let alive = supervisor.pid == std::process::id() || rows.iter().any(|r| r.identity.matches(&supervisor) && r.helper);
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
    // The scan comes first so that the report names every process signalled:
    // after a group signal the fastest members would be gone before it, and
    // a kill of three processes read as one.
    let (processes, group_is_ours) = job_tree(tree);
    let group = tree.main.map(|m| m.pid).filter(|_| group_is_ours);
    // One atomic signal to the group also reaches members forked since the scan.
    let group_sent = group.is_some_and(|pgid| procinfo::signal_group(pgid, signal) == SignalOutcome::Sent);
    let mut report = TreeSignalReport::default();
    for entry in processes {
        if group_sent && Some(entry.pgid) == group {
            report.sent.push(entry);
            continue;
        }
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
pub fn tree_alive(tree: Tree) -> bool {
    !job_tree(tree).0.is_empty()
}

/// Whether an ended job still has processes running: by its cookie (looked
/// up in `cookie_holders`, from one pass for many jobs), or below its live
/// supervisor, which finds those that dropped the cookie too.
pub fn has_live_processes(job: &Job, cookie_holders: &HashSet<String>) -> bool {
    cookie_holders.contains(&job.id)
        || (live_supervisor(job).is_some() && tree_alive(Tree::of(job)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_with_supervisor(supervisor: ProcessIdentity) -> Job {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "id": "forged-1", "label": "forged", "argv": ["true"], "command": "true", "cwd": "/",
            "status": "running", "started_at": 0, "log_path": "/nonexistent/output.log"
        }))
        .expect("a minimal record parses");
        job.supervisor = Some(supervisor);
        job
    }

    #[test]
    fn a_live_process_without_the_supervisor_mark_is_not_taken_for_the_supervisor() {
        let mut stranger = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let identity = procinfo::identify_exactly(stranger.id()).unwrap();
        let job = job_with_supervisor(identity);
        assert_eq!(live_supervisor(&job), None, "alive with the right start time, but not started as this job's supervisor");
        assert!(job_tree(Tree::of(&job)).0.is_empty(), "nothing below it counts as the job's");
        let _ = stranger.kill();
        let _ = stranger.wait();
    }

    #[test]
    fn identities_no_job_process_can_have_are_left_out_of_the_tree() {
        let init = procinfo::identify(1).unwrap_or(ProcessIdentity::from_stat(1, 0));
        let mut job = job_with_supervisor(init);
        job.main = Some(init);
        let tree = Tree::of(&job);
        assert!(tree.main.is_none() && tree.supervisor.is_none());
        assert!(job.impossible_identity().is_some_and(|why| why.contains("pid 1")));
    }
}
