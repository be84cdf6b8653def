//! Which live processes a job owns, and signalling them: its process group,
//! every process that carries the job's cookie (descendants that left the
//! group with setsid or a double fork), every process its supervisor
//! recorded by identity (those that also scrubbed the cookie from their
//! environment, and outlive the supervisor), and, while its supervisor
//! lives, everything below the supervisor. Each process is signalled by
//! identity, never by a bare pid.

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
    /// What the supervisor recorded (`store::procset`): a claim each, counted
    /// only for a live process with the same pid and start time.
    pub recorded: &'a [ProcessIdentity],
}

impl<'a> Tree<'a> {
    /// Identities no job's process can have (pid 0 or 1, from a corrupt or
    /// forged record) are left out, so nothing is ever signalled through them.
    pub fn of(job: &'a Job) -> Tree<'a> {
        let possible = |who: &ProcessIdentity| who.is_possible_job_process();
        Tree { job_id: &job.id, main: job.main.filter(possible), supervisor: job.supervisor.filter(possible), recorded: &[] }
    }

    /// With the identities the job's supervisor recorded.
    pub fn with_recorded(self, recorded: &'a [ProcessIdentity]) -> Tree<'a> {
        Tree { recorded, ..self }
    }

    /// Whether a live process (from a scan, so known by pid and start time)
    /// is one the supervisor recorded. Never an identity no job's process can
    /// have, one from an earlier boot, or one that started before the job's
    /// supervisor (nothing below it can be older): a forged or stale record
    /// cannot point at init, the caller or anything that ran before the job.
    pub fn recorded_matches(&self, live: &ProcessIdentity) -> bool {
        let boot = crate::os::pidfd::boot_tag();
        let floor = self.supervisor.filter(|s| s.boot.is_none() || s.boot == boot).map_or(0, |s| s.start_ticks);
        live.is_possible_job_process()
            && live.start_ticks >= floor
            && self.recorded.iter().any(|r| {
                r.pid == live.pid && r.start_ticks == live.start_ticks && (r.boot.is_none() || boot.is_none() || r.boot == boot)
            })
            && !self.in_callers_session(live.pid)
    }

    /// A process in the caller's own session is never the job's by record
    /// alone: every job runs in a session of its own, away from its caller's
    /// and its supervisor's. A record cannot turn a kill against the shell or
    /// agent that runs it.
    fn in_callers_session(&self, pid: u32) -> bool {
        if self.supervisor.is_some_and(|s| s.pid == procinfo::OwnIds::get().pid) {
            return false;
        }
        crate::os::sys::in_own_session(pid)
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
    let (members, group_is_ours) = members_in(&rows, tree);
    (members.into_iter().map(Row::entry).collect(), group_is_ours)
}

/// The one answer to "which live processes does this job own", from one
/// pass over the process table (`rows`, shared by many jobs): every verb
/// that counts, lists or signals a job's processes goes through here, so
/// they cannot disagree. Proc-manager's own helpers (supervisors, notifiers)
/// are never a job's, whatever a record says.
pub fn members_in<'r>(rows: &'r [Row], tree: Tree) -> (Vec<&'r Row>, bool) {
    let pgid = tree.main.map(|m| m.pid);
    let ours = |r: &Row| r.cookie.as_deref() == Some(tree.job_id);
    let group_is_ours = tree.main.is_some_and(|m| procinfo::is_same_process_alive(&m))
        || rows.iter().any(|r| Some(r.pgid) == pgid && ours(r));
    let mut members: HashSet<u32> = rows
        .iter()
        .filter(|r| ours(r) || (group_is_ours && Some(r.pgid) == pgid) || (!r.is_helper() && tree.recorded_matches(&r.identity)))
        .map(|r| r.identity.pid)
        .collect();
    members.extend(supervised(rows, tree.supervisor));
    (rows.iter().filter(|r| members.contains(&r.identity.pid)).collect(), group_is_ours)
}

/// One pass over the process table indexed by pid, cookie, group and parent,
/// so that the members of many jobs are found at a cost of each job's size:
/// `members_in` reads every row for every job, which for a kill of 1,000
/// jobs (2,000 processes) is two million looks per pass. The same rules as
/// `members_in`, which stays the one answer for a single job.
pub struct TableIndex<'r> {
    rows: &'r [Row],
    by_pid: HashMap<u32, usize>,
    by_cookie: HashMap<&'r str, Vec<usize>>,
    by_group: HashMap<u32, Vec<usize>>,
    children: HashMap<u32, Vec<usize>>,
}

/// A job's live processes as `TableIndex::members` finds them.
pub struct Members<'r> {
    pub rows: Vec<&'r Row>,
    pub group_is_ours: bool,
    /// Those found below its live supervisor (which signals them itself).
    pub below_supervisor: HashSet<u32>,
}

impl<'r> TableIndex<'r> {
    pub fn new(rows: &'r [Row]) -> TableIndex<'r> {
        let mut index = TableIndex {
            rows,
            by_pid: HashMap::with_capacity(rows.len()),
            by_cookie: HashMap::new(),
            by_group: HashMap::new(),
            children: HashMap::new(),
        };
        for (i, row) in rows.iter().enumerate() {
            index.by_pid.insert(row.identity.pid, i);
            if let Some(cookie) = row.cookie.as_deref() {
                index.by_cookie.entry(cookie).or_default().push(i);
            }
            index.by_group.entry(row.pgid).or_default().push(i);
            index.children.entry(row.ppid).or_default().push(i);
        }
        index
    }

    /// Whether the table holds this very process (same pid and start time).
    pub fn is_alive(&self, who: &ProcessIdentity) -> bool {
        self.by_pid.get(&who.pid).is_some_and(|&i| self.rows[i].identity.start_ticks == who.start_ticks)
    }

    /// `live_supervisor(job)` as the table saw it: the recorded supervisor
    /// is there (same pid and start time, in this boot) and carries the mark
    /// naming this job. The table read every process's environment already:
    /// a kill of 1,000 jobs then reads no supervisor's stat and environment
    /// a second time (a sixth of its time). A pid reused since the pass is
    /// still refused where it matters, when the supervisor is signalled
    /// (`procinfo::signal_process` pins it and checks its pidfs inode).
    pub fn live_supervisor(&self, job: &Job) -> Option<ProcessIdentity> {
        let supervisor = job.supervisor.filter(ProcessIdentity::is_possible_job_process)?;
        let boot = crate::os::pidfd::boot_tag();
        let this_boot = supervisor.boot.is_none() || boot.is_none() || supervisor.boot == boot;
        let row = &self.rows[*self.by_pid.get(&supervisor.pid)?];
        let ours = this_boot && row.identity.start_ticks == supervisor.start_ticks && row.mark.as_deref() == Some(job.id.as_str());
        ours.then_some(supervisor)
    }

    /// `members_in(rows, tree)`, in table order.
    /// Some live process carries `job_id`'s cookie.
    pub fn carries_cookie(&self, job_id: &str) -> bool {
        self.by_cookie.contains_key(job_id)
    }

    pub fn members(&self, tree: Tree) -> Members<'r> {
        let rows = self.rows;
        let ours = |i: &usize| rows[*i].cookie.as_deref() == Some(tree.job_id);
        let carriers = self.by_cookie.get(tree.job_id).map(Vec::as_slice).unwrap_or_default();
        let group = tree.main.and_then(|m| self.by_group.get(&m.pid)).map(Vec::as_slice).unwrap_or_default();
        let group_is_ours = tree.main.is_some_and(|m| procinfo::is_same_process_alive(&m)) || group.iter().any(ours);
        let mut found: HashSet<usize> = carriers.iter().copied().collect();
        if group_is_ours {
            found.extend(group.iter().copied());
        }
        for recorded in tree.recorded {
            if let Some(&i) = self.by_pid.get(&recorded.pid) {
                if !rows[i].is_helper() && tree.recorded_matches(&rows[i].identity) {
                    found.insert(i);
                }
            }
        }
        let mut below_supervisor = HashSet::new();
        if let Some(supervisor) = tree.supervisor {
            let alive = supervisor.pid == std::process::id()
                || self.by_pid.get(&supervisor.pid).is_some_and(|&i| rows[i].identity.matches(&supervisor) && rows[i].is_helper());
            let mut queue = if alive { vec![(supervisor.pid, supervisor.start_ticks)] } else { Vec::new() };
            while let Some((parent, parent_start)) = queue.pop() {
                for &child in self.children.get(&parent).into_iter().flatten().filter(|&&c| !rows[c].is_helper()) {
                    if is_child_of(&rows[child], parent_start) && below_supervisor.insert(rows[child].identity.pid) {
                        found.insert(child);
                        queue.push((rows[child].identity.pid, rows[child].identity.start_ticks));
                    }
                }
            }
        }
        let mut order: Vec<usize> = found.into_iter().collect();
        order.sort_unstable();
        Members { rows: order.into_iter().map(|i| &rows[i]).collect(), group_is_ours, below_supervisor }
    }
}

/// Everything below a live supervisor: as a child subreaper it adopts every
/// orphan among the job's descendants, so this finds those that dropped the
/// cookie from their environment too. Its helpers (the notifier) and other
/// jobs' supervisors carry the supervisor mark; they and what runs under
/// them are not this job's.
fn supervised(rows: &[Row], supervisor: Option<ProcessIdentity>) -> Vec<u32> {
    let Some(supervisor) = supervisor else { return Vec::new() };
    // The table leaves out the caller, which may be the supervisor itself;
    // anything else must be a live supervisor (it carries the mark).
    let alive = supervisor.pid == std::process::id() || rows.iter().any(|r| r.identity.matches(&supervisor) && r.is_helper());
    if !alive {
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<&Row>> = HashMap::new();
    for row in rows {
        children.entry(row.ppid).or_default().push(row);
    }
    let mut found = Vec::new();
    let mut queue = vec![(supervisor.pid, supervisor.start_ticks)];
    while let Some((parent, parent_start)) = queue.pop() {
        for child in children.get(&parent).into_iter().flatten().filter(|c| !c.is_helper() && is_child_of(c, parent_start)) {
            found.push(child.identity.pid);
            queue.push((child.identity.pid, child.identity.start_ticks));
        }
    }
    found
}

/// Whether `row`, whose parent pid names the process that started at
/// `parent_start`, is that process's child. On Unix an orphan is given a new
/// parent, so its parent pid is always a live parent's; on Windows the pid
/// of a dead parent stays in its children's records and is reused, and only
/// a start after the parent's tells a real child.
fn is_child_of(row: &Row, parent_start: u64) -> bool {
    !crate::os::sys::PARENT_PIDS_GO_STALE || row.identity.start_ticks >= parent_start
}

#[derive(Debug, Default, Clone)]
pub struct TreeSignalReport {
    /// Processes the signal was sent to.
    pub sent: Vec<ProcessEntry>,
    /// Processes it could not be sent to, and why.
    pub failed: Vec<(ProcessEntry, String)>,
}

/// `job_tree` without a pass over the whole table: the processes below
/// `root` (a live supervisor: a child subreaper, so every descendant of the
/// job that did not leave through some other process's hands) and those
/// recorded. Its cost is the job's size, not the machine's: at 1,000 jobs a
/// pass over the table reads 2,000 processes. What carries the cookie
/// elsewhere is missed, so this is only for a caller that sweeps the table
/// itself (see `KillRequest::caller_sweeps`).
pub fn job_subtree(tree: Tree, root: u32) -> (Vec<ProcessEntry>, bool) {
    // `root` itself is read too: `members_in` walks below it only while its
    // row shows our live supervisor (a supervisor is never its own job's
    // process, so it is not counted).
    let mut pids = vec![root];
    let mut next = 0;
    while next < pids.len() {
        let parent = pids[next];
        next += 1;
        pids.extend(procinfo::live_children(parent).into_iter().filter(|c| *c != root));
    }
    pids.extend(tree.recorded.iter().map(|r| r.pid));
    pids.extend(tree.main.map(|m| m.pid));
    pids.sort_unstable();
    pids.dedup();
    let rows = procinfo::rows(&pids);
    let (members, group_is_ours) = members_in(&rows, tree);
    (members.into_iter().map(Row::entry).collect(), group_is_ours)
}

/// `job_tree` for a job whose supervisor is gone after it saw everything
/// below it end (`model::protocol::SUPERVISOR_DONE_FILE`): what it recorded
/// (and the main process, for its group) is all that can be left, so only
/// those are read. Its cost is the job's size, not the machine's.
pub fn job_recorded(tree: Tree) -> (Vec<ProcessEntry>, bool) {
    let mut pids: Vec<u32> = tree.recorded.iter().map(|r| r.pid).chain(tree.main.map(|m| m.pid)).collect();
    pids.sort_unstable();
    pids.dedup();
    let rows = procinfo::rows(&pids);
    let (members, group_is_ours) = members_in(&rows, tree);
    (members.into_iter().map(Row::entry).collect(), group_is_ours)
}

/// Sends `signal` to every live process of the job. Returns who got it.
pub fn signal_tree(tree: Tree, signal: i32) -> TreeSignalReport {
    // The scan comes first so that the report names every process signalled:
    // after a group signal the fastest members would be gone before it, and
    // a kill of three processes read as one.
    signal_found(tree, job_tree(tree), signal)
}

/// `signal_tree` to what a look (`job_tree`, `job_subtree`) found.
pub fn signal_found(tree: Tree, (processes, group_is_ours): (Vec<ProcessEntry>, bool), signal: i32) -> TreeSignalReport {
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

/// Whether an ended job still has processes running: by its cookie, by an
/// identity its supervisor recorded, or below its live supervisor, which
/// finds those that dropped the cookie too; all looked up in `table`, one
/// pass over the process table for many jobs. (A pass per job whose
/// supervisor lives, as each waits for its notifier after a `kill --all`,
/// made the kill's one registry write take 10 s for 600 jobs.)
pub fn has_live_processes(job: &Job, recorded: &[ProcessIdentity], table: &TableIndex) -> bool {
    let tree = Tree::of(job).with_recorded(recorded);
    table.carries_cookie(&job.id)
        || recorded.iter().any(|r| tree.recorded_matches(r) && procinfo::is_same_process_alive(r))
        || (live_supervisor(job).is_some() && !table.members(tree).rows.is_empty())
}

/// Every live process below `root`, by identity, as the supervisor records
/// them: children by parent, not by a pass over the whole table, so that it
/// can look often at no cost. Proc-manager's helpers and what runs under
/// them (a nested job's supervisor, our notifier) are left out.
pub fn descendants(root: u32) -> Vec<ProcessIdentity> {
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for child in procinfo::live_children(parent) {
            if !seen.insert(child) || procinfo::environ_value(child, SUPERVISOR_MARK).is_some() {
                continue;
            }
            if let Some(mut identity) = procinfo::identify(child) {
                // With the boot: a record read after a reboot never matches.
                identity.boot = crate::os::pidfd::boot_tag();
                found.push(identity);
                queue.push(child);
            }
        }
    }
    found
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

    #[cfg(unix)]
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

    /// A sleep in a session of its own, as a job's processes are (a record
    /// never claims a process in the caller's session).
    #[cfg(unix)]
    fn detached_sleep() -> std::process::Child {
        let child = std::process::Command::new("setsid").args(["sleep", "30"]).spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let pid = rustix::process::Pid::from_raw(child.id() as i32);
        while rustix::process::getsid(pid).ok() != pid {
            assert!(std::time::Instant::now() < deadline, "setsid never ran");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    }

    /// Two such sleeps started at least a clock tick apart: (older, newer).
    #[cfg(unix)]
    fn two_strangers() -> (std::process::Child, std::process::Child) {
        let older = detached_sleep();
        let first = procinfo::identify(older.id()).unwrap().start_ticks;
        let newer = loop {
            std::thread::sleep(std::time::Duration::from_millis(15));
            let newer = detached_sleep();
            if procinfo::identify(newer.id()).unwrap().start_ticks > first {
                break newer;
            }
            let mut newer = newer;
            let _ = newer.kill();
            let _ = newer.wait();
        };
        (older, newer)
    }

    /// The index used for many jobs at once finds what `members_in` finds,
    /// in the same order, on a table holding every kind of member and
    /// non-member: the group (claimed by a cookie carrier in it), cookie
    /// carriers outside it, what lies below the supervisor (a helper's
    /// subtree left out), another job's processes and strangers.
    #[cfg(unix)]
    #[test]
    fn the_table_index_finds_what_members_in_finds() {
        let row = |pid: u32, ppid: u32, pgid: u32, cookie: Option<&str>, helper: bool| Row {
            identity: ProcessIdentity::from_stat(pid, 1000 + u64::from(pid)),
            ppid,
            pgid,
            cookie: cookie.map(str::to_string),
            mark: helper.then(|| "a job".to_string()),
            rss_kb: 0,
        };
        let rows = vec![
            row(4_000_001, 1, 4_000_001, None, true), // our supervisor
            row(4_000_002, 4_000_001, 4_000_002, Some("forged-1"), false), // main, leads the group
            row(4_000_003, 4_000_002, 4_000_002, None, false), // group member without the cookie
            row(4_000_004, 4_000_001, 4_000_004, None, false), // adopted by the supervisor, cookie dropped
            row(4_000_005, 4_000_004, 4_000_005, None, false), // below it
            row(4_000_006, 4_000_001, 4_000_006, Some("nested-1"), true), // a nested job's supervisor
            row(4_000_007, 4_000_006, 4_000_007, Some("nested-1"), false), // its job
            row(4_000_008, 7, 4_000_008, Some("forged-1"), false), // a cookie carrier elsewhere
            row(4_000_009, 7, 4_000_009, Some("other-1"), false), // another job's
            row(4_000_010, 7, 4_000_002, None, false), // in the group, elsewhere
            row(4_000_011, 7, 4_000_011, None, false), // a stranger
        ];
        let mut job = job_with_supervisor(rows[0].identity);
        // Gone from the real table: the group is ours by the cookie carrier in it.
        job.main = Some(rows[1].identity);
        let tree = Tree::of(&job);
        let (expected, expected_group) = members_in(&rows, tree);
        let found = TableIndex::new(&rows).members(tree);
        let pids = |list: &[&Row]| list.iter().map(|r| r.identity.pid).collect::<Vec<_>>();
        assert_eq!(pids(&found.rows), pids(&expected));
        assert_eq!(found.group_is_ours, expected_group);
        assert_eq!(pids(&expected), [4_000_002, 4_000_003, 4_000_004, 4_000_005, 4_000_008, 4_000_010]);
        let mut below: Vec<u32> = found.below_supervisor.into_iter().collect();
        below.sort_unstable();
        assert_eq!(below, [4_000_002, 4_000_003, 4_000_004, 4_000_005]);
    }

    #[cfg(unix)]
    fn members(job: &Job, recorded: &[ProcessIdentity]) -> Vec<u32> {
        let rows = procinfo::table();
        members_in(&rows, Tree::of(job).with_recorded(recorded)).0.iter().map(|r| r.identity.pid).collect()
    }

    #[cfg(unix)]
    #[test]
    fn a_recorded_process_counts_only_while_its_pid_and_start_time_agree() {
        let (mut supervisor, mut daemon) = two_strangers();
        // A supervisor without the mark: nothing is found below it, only by the record.
        let job = job_with_supervisor(procinfo::identify(supervisor.id()).unwrap());
        let real = procinfo::identify_exactly(daemon.id()).unwrap();
        assert_eq!(members(&job, &[real]), vec![daemon.id()], "the recorded identity is the job's");
        let reused = ProcessIdentity::from_stat(real.pid, real.start_ticks - 1);
        assert!(members(&job, &[reused]).is_empty(), "same pid, another start time: a reused pid never counts");
        let mut same_session = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let caller_session = procinfo::identify(same_session.id()).unwrap();
        assert!(members(&job, &[caller_session]).is_empty(), "in the caller's own session: never the job's by record");
        let _ = same_session.kill();
        let _ = same_session.wait();
        if let Some(boot) = real.boot {
            let earlier_boot = ProcessIdentity { boot: Some(boot ^ 1), ..real };
            assert!(members(&job, &[earlier_boot]).is_empty(), "recorded in another boot");
        }
        let rows = procinfo::table();
        assert!(!has_live_processes(&job, &[reused], &TableIndex::new(&rows)));
        assert!(has_live_processes(&job, &[real], &TableIndex::new(&rows)));
        for child in [&mut supervisor, &mut daemon] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let rows = procinfo::table();
        assert!(!has_live_processes(&job, &[real], &TableIndex::new(&rows)), "gone: no longer the job's");
    }

    #[cfg(unix)]
    #[test]
    fn a_record_never_claims_a_process_older_than_the_supervisor_or_pid_1() {
        let (mut older, mut supervisor) = two_strangers();
        let job = job_with_supervisor(procinfo::identify(supervisor.id()).unwrap());
        let before_the_job = procinfo::identify(older.id()).unwrap();
        assert!(members(&job, &[before_the_job]).is_empty(), "started before the supervisor: cannot be below it");
        if let Some(init) = procinfo::identify(1) {
            let mut no_floor = job.clone();
            no_floor.supervisor = None;
            assert!(members(&no_floor, &[init]).is_empty(), "pid 1 is never a job's");
        }
        for child in [&mut older, &mut supervisor] {
            let _ = child.kill();
            let _ = child.wait();
        }
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
