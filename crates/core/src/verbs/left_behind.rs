//! What a task left behind, read from process snapshots: the snapshot of
//! the process table (MCP servers and browsers marked on it), the diff
//! between two (`detect_orphans`), and which processes a tracked phase is
//! about and which of them it left (`scope`, for resource_tracker.rs).
//! Named for what it answers, not "procs": os/procinfo.rs and
//! store/procset.rs are about processes too.

use crate::os::procinfo::environ_value;
use crate::os::snapshot::{self as table, Marker};
use crate::now_ms;
use std::collections::{HashMap, HashSet};

pub use crate::os::snapshot::ProcessInfo;

/// Environment variable a tracked task inherits; its value is the tracker's token.
pub const TRACKER_COOKIE: &str = "PROC_MANAGER_TRACKER";

#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub timestamp: u64,
    pub processes: Vec<ProcessInfo>,
    /// Sum of the resident memory of every process in the snapshot.
    pub total_memory_mb: f64,
}

/// Programs that run a script given as their first non-option argument: for
/// them that script's path names the program (`node /x/mcp-server-git/index.js`).
const INTERPRETERS: &[&str] =
    &["node", "nodejs", "npx", "bun", "bunx", "deno", "tsx", "ts-node", "python", "python3", "uv", "uvx", "pipx", "pnpm", "yarn"];

/// Whether a process is an MCP server or a browser, judged on what names
/// the program only, never on the rest of its command line (so neither
/// `sh -c '… chromium …'` nor `run-bg __supervise chromium-x1` is one):
/// the base name of argv[0], of its executable (`exe`, where readable), and
/// for an interpreter, the path of the script it runs. A pattern with `*`
/// must match a whole name (`mcp-server-*`, `*-mcp`); one without is looked
/// for inside each name (`chrom` in `chromium`); one with `/`
/// (`@modelcontextprotocol/*`) is matched against the script path's tail.
/// Case does not matter.
pub fn matches_mcp(command: &str, exe: Option<&str>, patterns: &[String]) -> bool {
    let lower = command.to_ascii_lowercase();
    let mut words = lower.split_whitespace();
    let argv0 = words.next().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    let base = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    let mut names = vec![base(argv0)];
    if let Some(exe) = exe {
        names.push(base(&exe.to_ascii_lowercase()));
    }
    let script = INTERPRETERS
        .contains(&names[0].as_str())
        .then(|| words.find(|w| !w.starts_with('-')))
        .flatten();
    // The script path's components, and its tails (`@scope/pkg/dist/x.js`).
    let parts: Vec<&str> = script.map(|s| s.split('/').filter(|c| !c.is_empty()).collect()).unwrap_or_default();
    let tails: Vec<String> = (0..parts.len()).map(|i| parts[i..].join("/")).collect();
    names.extend(parts.iter().map(|c| c.to_string()));
    patterns.iter().map(|p| p.to_ascii_lowercase()).filter(|p| !p.is_empty()).any(|pattern| {
        if pattern.contains('/') {
            tails.iter().any(|t| glob(&pattern, t) || (!pattern.contains('*') && t.starts_with(&pattern)))
        } else if pattern.contains('*') {
            names.iter().any(|n| glob(&pattern, n))
        } else {
            names.iter().any(|n| n.contains(&pattern))
        }
    })
}

/// `*` matches any run of characters (`/` too); everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Every process visible to this user (the caller included), MCP-flagged.
pub fn snapshot(mcp_patterns: &[String]) -> Snapshot {
    let mark = |command: &str, exe: Option<&str>| matches_mcp(command, exe, mcp_patterns);
    let mark: Option<Marker> = if mcp_patterns.is_empty() { None } else { Some(&mark) };
    let mut processes = table::processes(mark);
    processes.sort_by_key(|p| p.pid);
    let total_memory_mb = processes.iter().fold(0.0, |sum, p| sum + p.memory_mb);
    Snapshot { timestamp: now_ms(), processes, total_memory_mb }
}

/// Processes in `after` that were not in `before` (same pid *and* start time:
/// a reused pid is a new process) and were left without their parent: it is
/// gone, it is init, or it is a known subreaper among `observer`'s ancestors
/// (such as `systemd --user`) that adopted them. `observer` is the process that
/// watches (it is no orphan's parent by adoption). MCP processes come first.
pub fn detect_orphans(before: &[ProcessInfo], after: &[ProcessInfo], observer: u32) -> Vec<ProcessInfo> {
    let known: HashSet<(u32, u64)> = before.iter().map(|p| (p.pid, p.start_time)).collect();
    let alive: HashMap<u32, &ProcessInfo> = after.iter().map(|p| (p.pid, p)).collect();
    let mut ancestors = HashSet::new();
    let mut cursor = alive.get(&observer).map(|p| p.ppid);
    while let Some(pid) = cursor {
        if pid <= 1 || !ancestors.insert(pid) {
            break;
        }
        cursor = alive.get(&pid).map(|p| p.ppid);
    }
    // Only an ancestor that is a known subreaper adopts: a plain ancestor such
    // as the login shell also starts unrelated children of its own.
    let adopted_by = |ppid: u32| ancestors.contains(&ppid) && alive.get(&ppid).is_some_and(|p| is_subreaper(&p.command));
    let mut orphans: Vec<ProcessInfo> = after
        .iter()
        .filter(|p| !known.contains(&(p.pid, p.start_time)) && p.pid != observer)
        .filter(|p| p.ppid == 1 || !alive.contains_key(&p.ppid) || adopted_by(p.ppid))
        .cloned()
        .collect();
    orphans.sort_by_key(|p| (!p.is_mcp, p.pid));
    orphans
}

/// Programs that make themselves child subreapers, so that orphans below them
/// are re-parented to them instead of to init.
const KNOWN_SUBREAPERS: &[&str] = &["systemd", "tini", "dumb-init", "docker-init", "catatonit", "run-bg"];

fn is_subreaper(command: &str) -> bool {
    KNOWN_SUBREAPERS.contains(&short_name(command).as_str())
}

/// What the environment of a process says about who it belongs to.
struct Marks {
    /// A run-bg supervisor or one of its helpers (`PROC_MANAGER_SUPERVISOR`).
    helper: bool,
    /// The job whose cookie it carries (`PROC_MANAGER_JOB`).
    job: Option<String>,
}

fn marks(pid: u32) -> Marks {
    Marks {
        helper: environ_value(pid, crate::model::protocol::SUPERVISOR_MARK).is_some(),
        job: environ_value(pid, crate::model::protocol::JOB_COOKIE),
    }
}

/// Who is tracking, and what it knows of its own children.
pub struct Observer<'a> {
    pub pid: u32,
    /// The job the tracking process itself runs in, if any: its cookie is
    /// inherited by everything it starts, so it tells nothing apart.
    pub own_job: Option<String>,
    /// The tracker cookie, when it was handed out (the cookie rule).
    pub token: Option<&'a str>,
    /// Whether a live child of the observer was started by the observer
    /// itself (Node: a `child_process` it still tracks) rather than adopted.
    /// `None`: not known, every new child counts as adopted.
    pub owns: Option<&'a dyn Fn(u32) -> bool>,
}

/// The processes a phase is about, in `processes`: every process below the
/// observer (and, under the cookie rule, every carrier of its cookie, with
/// what runs below it), except run-bg supervisors and helpers and processes
/// of other jobs, with everything below those. `left` is the subset left
/// behind, given what was there `before`: new processes re-parented to the
/// observer (and new carriers of the cookie whose parent is not part of the
/// work), with their new descendants.
pub(crate) struct Scope {
    pub(crate) tracked: Vec<u32>,
    pub(crate) left: Vec<u32>,
    /// (pid, start) of processes below the observer with another parent:
    /// never forked by the observer (see `ResourceTracker::reap_adopted`).
    pub(crate) not_forked_by_observer: Vec<(u32, u64)>,
}

pub(crate) fn scope(processes: &[ProcessInfo], before: Option<&HashSet<(u32, u64)>>, observer: &Observer) -> Scope {
    let mut children: HashMap<u32, Vec<&ProcessInfo>> = HashMap::new();
    for p in processes {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut cache: HashMap<u32, Marks> = HashMap::new();
    let mut foreign = |pid: u32| {
        let m = cache.entry(pid).or_insert_with(|| marks(pid));
        m.helper || m.job.as_ref().is_some_and(|job| Some(job) != observer.own_job.as_ref())
    };
    let is_new = |p: &ProcessInfo| before.is_some_and(|known| !known.contains(&(p.pid, p.start_time)));
    let mut tracked = Vec::new();
    let mut left = Vec::new();
    let mut not_forked = Vec::new();
    // (process, whether it is left behind); a process below a left one is left too if new.
    let mut queue: Vec<(&ProcessInfo, bool)> = Vec::new();
    for child in children.get(&observer.pid).into_iter().flatten() {
        let adopted = is_new(child) && !observer.owns.is_some_and(|owns| owns(child.pid));
        queue.push((child, adopted));
    }
    if let Some(token) = observer.token {
        // Carriers are looked for among new processes only: each costs an environ read.
        let new: Vec<&ProcessInfo> = processes.iter().filter(|p| is_new(p) && p.pid != observer.pid).collect();
        let carriers: HashSet<u32> = new
            .iter()
            .filter(|p| environ_value(p.pid, TRACKER_COOKIE).as_deref() == Some(token))
            .map(|p| p.pid)
            .collect();
        for p in new {
            // A carrier whose parent is a carrier, or the observer, is reached from there.
            if carriers.contains(&p.pid) && p.ppid != observer.pid && !carriers.contains(&p.ppid) {
                queue.push((p, true));
            }
        }
    }
    let mut seen = HashSet::new();
    while let Some((p, left_behind)) = queue.pop() {
        if p.pid == observer.pid || !seen.insert(p.pid) || foreign(p.pid) {
            continue;
        }
        tracked.push(p.pid);
        let left_behind = left_behind && is_new(p);
        if left_behind {
            left.push(p.pid);
        }
        if p.ppid != observer.pid {
            not_forked.push((p.pid, p.start_time));
        }
        for child in children.get(&p.pid).into_iter().flatten() {
            queue.push((child, left_behind));
        }
    }
    Scope { tracked, left, not_forked_by_observer: not_forked }
}

/// Fills in which job owns each process of `snap` (`run-bg ps`): `owned`
/// holds each job's processes as kill, check and orphans count them
/// (`Context::processes_of_jobs`: what its supervisor recorded, its cookie,
/// its group, what runs below its live supervisor), so a daemon that
/// scrubbed its environment stays its job's after the supervisor is gone.
/// A job's live supervisor is marked with it too.
pub fn assign_jobs(snap: &mut Snapshot, jobs: &[crate::model::job::Job], owned: &HashMap<String, Vec<crate::os::procinfo::ProcessEntry>>) {
    // By pid: the two scans are moments apart.
    let mut owner: HashMap<u32, String> = HashMap::new();
    for job in jobs {
        let members = owned.get(&job.id).into_iter().flatten().map(|e| e.identity);
        for entry in members.chain(crate::os::tree::live_supervisor(job)) {
            owner.entry(entry.pid).or_insert_with(|| job.id.clone());
        }
    }
    for p in &mut snap.processes {
        p.job_id = owner.get(&p.pid).cloned();
    }
}

/// `chromium` for `/usr/lib/chromium/chromium --headless …`.
pub fn short_name(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or(command);
    first.trim_start_matches('[').trim_end_matches(']').rsplit('/').next().unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::config::ResourceTrackingConfig;

    fn proc(pid: u32, ppid: u32, command: &str, start_time: u64) -> ProcessInfo {
        ProcessInfo { pid, ppid, command: command.into(), memory_mb: 1.0, start_time, is_mcp: false, job_id: None }
    }

    #[test]
    fn snapshot_sees_this_process_with_its_fields() {
        let snap = snapshot(&["cargo".to_string()]);
        let me = snap.processes.iter().find(|p| p.pid == std::process::id()).expect("self in snapshot");
        assert!(me.memory_mb > 0.0);
        assert!(me.start_time > 1_600_000_000_000 && me.start_time <= now_ms());
        assert!(snap.total_memory_mb >= me.memory_mb);
    }

    #[test]
    fn orphan_detection_on_crafted_snapshots() {
        // observer 100 (child of 50, a subreaper such as systemd --user, child of 1)
        let base = vec![proc(1, 0, "init", 1), proc(50, 1, "systemd --user", 2), proc(100, 50, "orchestrator", 3)];
        let mut before = base.clone();
        before.push(proc(200, 100, "old worker", 4));
        before.push(proc(300, 1, "reused pid", 5));
        let mut after = base.clone();
        after.extend([
            proc(200, 100, "old worker", 4),                      // known: not new
            proc(300, 1, "new process with a reused pid", 99),    // same pid, new start time → new, init parent
            proc(400, 4242, "parent gone", 10),                   // parent missing from after
            proc(401, 50, "chromium --type=renderer", 11),        // adopted by the subreaper above us
            proc(402, 100, "live child of the observer", 12),     // its parent is alive: not orphaned
            proc(403, 402, "grandchild with a live parent", 13),  // not orphaned
        ]);
        after[6].is_mcp = true; // chromium
        let orphans = detect_orphans(&before, &after, 100);
        let pids: Vec<u32> = orphans.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![401, 300, 400], "MCP first, then by pid");
    }

    #[test]
    fn unrelated_new_process_is_not_reported() {
        let before = vec![proc(1, 0, "init", 1), proc(10, 1, "sshd", 2), proc(100, 10, "orchestrator", 3)];
        let mut after = before.clone();
        after.push(proc(500, 10, "someone else's shell", 20)); // parent alive, not our ancestor
        assert!(detect_orphans(&before, &after, 100).is_empty());
    }

    #[test]
    fn mcp_patterns_match_case_insensitively() {
        let patterns: Vec<String> = ["playwright", "chromium"].iter().map(|s| s.to_string()).collect();
        assert!(matches_mcp("/usr/lib/Chromium/chromium --headless", None, &patterns));
        assert!(matches_mcp("node node_modules/.bin/playwright test", None, &patterns));
        assert!(!matches_mcp("sleep 600", None, &patterns));
        assert_eq!(short_name("/usr/lib/chromium/chromium --headless"), "chromium");
    }

    #[test]
    fn marking_looks_at_the_program_name_only() {
        let defaults = ResourceTrackingConfig::default().mcp_patterns;
        let marked = |command: &str, exe: Option<&str>| matches_mcp(command, exe, &defaults);
        assert!(marked("/usr/lib/chromium/chromium --type=renderer --lang=en", None), "a browser");
        assert!(!marked("sh -c exec /usr/lib/chromium/chromium --headless", Some("dash")), "a shell that runs one is not");
        assert!(!marked("/usr/bin/run-bg __supervise chromium-x1y2", Some("run-bg")), "nor a supervisor named after one");
        assert!(marked("/proc/self/fd/3 --type=zygote", Some("chrome")), "the executable names it");
        assert!(marked("node /x/mcp-server-filesystem/dist/index.js /tmp", Some("node")), "an MCP server run by node");
        assert!(marked("npx -y @modelcontextprotocol/server-everything", Some("node")), "one run by npx");
        assert!(marked("/home/u/.local/bin/github-mcp --stdio", None), "a *-mcp program");
        assert!(marked("mcp-server-git --repository .", None), "an mcp-server-* program");
        assert!(!marked("grep mcp-server-git notes.txt", Some("grep")), "an argument is not a program");
        assert!(!marked("node build.js --target=chromium", Some("node")), "nor an option of a script");
        assert!(glob("*-mcp", "github-mcp") && !glob("*-mcp", "mcp-github") && glob("a*b*c", "axxbyyc"));
    }

}
