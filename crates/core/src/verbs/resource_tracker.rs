//! Resource tracking: snapshots around each phase of a task, what the phase
//! left behind and what memory it cost (`ResourceTracker`), with this
//! process a child subreaper while a phase is open. The diff itself is
//! left_behind.rs's.

use crate::os::snapshot as table;
use crate::store::config::ResourceTrackingConfig;
use crate::verbs::left_behind::{scope, snapshot, short_name, Observer, ProcessInfo, Snapshot, TRACKER_COOKIE};
use std::collections::{HashMap, HashSet};

/// Which rule decided that a process was left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphanRule {
    /// `tracker.env()` was handed out: new processes that carry its cookie,
    /// and what was orphaned below the tracking process (a launcher may
    /// have stripped the cookie).
    Cookie,
    /// What was orphaned below the tracking process, a child subreaper
    /// for the phase: new processes re-parented to it, with their descendants.
    Ancestry,
}

impl OrphanRule {
    pub fn as_str(self) -> &'static str {
        match self {
            OrphanRule::Cookie => "cookie",
            OrphanRule::Ancestry => "ancestry",
        }
    }
}

/// How a report's memory was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemorySource {
    /// Proportional set size (/proc/<pid>/smaps_rollup): a page shared by n
    /// processes counts 1/n for each, so shared libraries are not counted
    /// once per process.
    Pss,
    /// Resident set size: where PSS could not be read for every process.
    Rss,
}

impl MemorySource {
    pub fn as_str(self) -> &'static str {
        match self {
            MemorySource::Pss => "pss",
            MemorySource::Rss => "rss",
        }
    }
}

/// Memory of one process, and whether it is PSS.
fn measure(p: &ProcessInfo) -> (f64, bool) {
    match table::pss_kb(p.pid) {
        Some(kb) => (kb as f64 / 1024.0, true),
        None => (p.memory_mb, false),
    }
}

/// How long `snapshot_after` waits, in all, for children of ours that are
/// being killed to finish exiting.
const KILLED_CHILDREN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Waits for each child of ours that is on its way out (killed, say, by the
/// caller just before it asks) to finish exiting: the kernel hands what it
/// started to us, the subreaper, only when its last thread has exited, after
/// its memory is freed (tens to hundreds of milliseconds for a browser or a
/// Node process). Until then the snapshot would find its processes below a
/// parent that is no longer listed, and report nothing left behind. A
/// multi-threaded child's main thread shows as a zombie within milliseconds
/// while another thread still frees the memory, so zombies are waited for
/// too: the pidfd becomes readable only once every thread has exited, and
/// by then the children are ours (checked on Linux 6.18: a SIGKILLed
/// process whose worker thread held 800 MiB was a zombie at once, handed
/// its child over 160-324 ms later, and its pidfd turned readable at that
/// moment, never before, in 8 of 8 runs). A zombie that has ended for good
/// (a child Node has not reaped yet) is readable at once.
fn let_killed_children_go() {
    let deadline = std::time::Instant::now() + KILLED_CHILDREN_PATIENCE;
    for child in table::own_children().into_iter().filter(|c| c.zombie || table::is_ending(c.pid)) {
        let Ok(fd) = crate::os::pidfd::open_checked(child.pid) else { continue };
        // Ours and unreaped, so the pid is still that child, unless another
        // thread reaped it (and the pid was taken) just before the open.
        if table::own_children().iter().any(|c| c.pid == child.pid && c.start_time == child.start_time) {
            crate::os::pidfd::wait_readable_until(&fd, deadline);
        }
    }
}

/// What one tracked phase left behind and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    pub label: String,
    pub orphans: Vec<ProcessInfo>,
    pub rule: OrphanRule,
    /// Memory of the tracked processes (see `scope`) when the phase began.
    pub memory_before_mb: f64,
    /// The same when it ended.
    pub memory_after_mb: f64,
    pub memory_delta_mb: f64,
    /// Memory of the processes left behind.
    pub orphan_memory_mb: f64,
    pub memory_source: MemorySource,
    /// The same warnings that were logged.
    pub warnings: Vec<String>,
}

struct OpenPhase {
    snapshot: Snapshot,
    memory_mb: f64,
    pss: bool,
}

/// Snapshots around each phase of a task (`snapshot_before(label)` /
/// `snapshot_after(label)`), reporting orphans and memory growth through
/// `tracing` and in the result. Disabled, it does nothing and logs nothing.
///
/// While a phase is open the tracking process is a child subreaper (Linux),
/// so whatever is orphaned below it is re-parented to it instead of to init
/// and is found by ancestry, whatever its environment says.
pub struct ResourceTracker {
    config: ResourceTrackingConfig,
    token: String,
    cookie_handed_out: bool,
    observer: u32,
    phases: HashMap<String, OpenPhase>,
    /// Whether this process was a child subreaper before the first open
    /// phase made it one; `None` while no phase is open. Only Linux has
    /// child subreapers: elsewhere it stays `None`.
    subreaper_before: Option<bool>,
    /// Processes seen below us with a parent other than us (pid, start).
    not_forked_by_us: HashSet<(u32, u64)>,
}

impl ResourceTracker {
    pub fn new(config: ResourceTrackingConfig) -> ResourceTracker {
        ResourceTracker {
            config,
            token: format!("{}-{}", std::process::id(), crate::model::ids::random_suffix()),
            cookie_handed_out: false,
            observer: std::process::id(),
            phases: HashMap::new(),
            subreaper_before: None,
            not_forked_by_us: HashSet::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The environment to start tracked work with; from then on only processes
    /// carrying it, or orphaned below the tracking process, count as left behind.
    pub fn env(&mut self) -> (String, String) {
        self.cookie_handed_out = true;
        (TRACKER_COOKIE.to_string(), self.token.clone())
    }

    fn observer<'a>(&'a self, owns: Option<&'a dyn Fn(u32) -> bool>) -> Observer<'a> {
        Observer {
            pid: self.observer,
            own_job: std::env::var(crate::model::protocol::JOB_COOKIE).ok(),
            token: self.cookie_handed_out.then_some(self.token.as_str()),
            owns,
        }
    }

    pub fn snapshot_before(&mut self, label: &str) -> Option<Snapshot> {
        if !self.config.enabled {
            return None;
        }
        self.subreaper_on();
        let snap = snapshot(&self.config.mcp_patterns);
        let scope = scope(&snap.processes, None, &self.observer(None));
        self.not_forked_by_us.extend(scope.not_forked_by_observer.iter().copied());
        let (memory_mb, pss) = self.measure_all(&snap, &scope.tracked);
        tracing::info!(processes = snap.processes.len(), memory_mb = memory_mb.round() as u64, "resource snapshot taken");
        self.phases.insert(label.to_string(), OpenPhase { snapshot: snap.clone(), memory_mb, pss });
        Some(snap)
    }

    /// The labels of the phases begun (`snapshot_before`) and not ended yet.
    pub fn open_phases(&self) -> Vec<String> {
        let mut labels: Vec<String> = self.phases.keys().cloned().collect();
        labels.sort();
        labels
    }

    /// Compares with the snapshot taken before `label` (an empty one if none
    /// was). Every live child of ours counts as adopted: see
    /// `snapshot_after_with` for a caller that knows its own children.
    pub fn snapshot_after(&mut self, label: &str) -> Option<PhaseReport> {
        self.snapshot_after_with(label, None)
    }

    /// As `snapshot_after`; `owns(pid)` says whether a live child of ours
    /// was started by us (not adopted), so it is not taken for a leftover.
    pub fn snapshot_after_with(&mut self, label: &str, owns: Option<&dyn Fn(u32) -> bool>) -> Option<PhaseReport> {
        if !self.config.enabled {
            return None;
        }
        let_killed_children_go();
        let after = snapshot(&self.config.mcp_patterns);
        let phase = self.phases.remove(label).unwrap_or(OpenPhase {
            snapshot: Snapshot { timestamp: after.timestamp, processes: Vec::new(), total_memory_mb: 0.0 },
            memory_mb: 0.0,
            pss: true,
        });
        let known: HashSet<(u32, u64)> = phase.snapshot.processes.iter().map(|p| (p.pid, p.start_time)).collect();
        let observer = self.observer(owns);
        let scope = scope(&after.processes, Some(&known), &observer);
        let (memory_after, pss_after) = self.measure_all(&after, &scope.tracked);
        tracing::info!(processes = after.processes.len(), memory_mb = memory_after.round() as u64, "resource snapshot taken");
        let left: HashSet<u32> = scope.left.iter().copied().collect();
        let mut orphans: Vec<ProcessInfo> = after.processes.iter().filter(|p| left.contains(&p.pid)).cloned().collect();
        let mut pss = pss_after && phase.pss;
        for p in &mut orphans {
            let (mb, is_pss) = measure(p);
            p.memory_mb = mb;
            pss &= is_pss;
        }
        orphans.sort_by_key(|p| (!p.is_mcp, p.pid));
        let rule = if self.cookie_handed_out { OrphanRule::Cookie } else { OrphanRule::Ancestry };
        self.not_forked_by_us.extend(scope.not_forked_by_observer.iter().copied());
        self.reap_adopted();
        if self.phases.is_empty() {
            self.subreaper_off();
        }
        let source = if pss { MemorySource::Pss } else { MemorySource::Rss };
        Some(self.report(label, phase.memory_mb, memory_after, orphans, rule, source))
    }

    /// Sums the memory of `pids` in `snap`: PSS where readable; whether it was for all.
    fn measure_all(&self, snap: &Snapshot, pids: &[u32]) -> (f64, bool) {
        let wanted: HashSet<u32> = pids.iter().copied().collect();
        snap.processes.iter().filter(|p| wanted.contains(&p.pid)).fold((0.0, table::READS_PSS), |(sum, pss), p| {
            let (mb, is_pss) = measure(p);
            (sum + mb, pss && is_pss)
        })
    }

    /// Makes this process a child subreaper for the first open phase,
    /// remembering whether it was one already.
    fn subreaper_on(&mut self) {
        if table::CHILD_SUBREAPERS && self.subreaper_before.is_none() {
            let was = table::is_child_subreaper();
            if !was {
                if let Err(e) = table::set_child_subreaper(true) {
                    tracing::warn!("resource tracker: cannot become a child subreaper ({e}); orphans go to init and only the cookie finds them");
                }
            }
            self.subreaper_before = Some(was);
        }
    }

    /// Once the last open phase is closed: back to what it was.
    fn subreaper_off(&mut self) {
        if self.subreaper_before.take() == Some(false) {
            if let Err(e) = table::set_child_subreaper(false) {
                tracing::warn!("resource tracker: cannot stop being a child subreaper: {e}");
            }
        }
    }

    /// Reaps the zombies among our children that we can prove we did not
    /// fork, so that no exit status anyone in this process waits for (Node's
    /// `child_process`, another addon's waitpid) is taken. A process forked
    /// by us has us as its parent from birth, and its session is ours or,
    /// after setsid(), its own pid. So a child of ours is provably adopted if
    /// (1) we saw it earlier with another parent (a parent changes only when
    /// it dies, and we are alive), or (2) its session is neither ours nor its
    /// own pid (only setsid changes a session, and it makes it the caller's
    /// pid). Each is reaped through a pidfd, with its start time checked, so
    /// the wait takes exactly that process. An adopted zombie with no such
    /// proof (a setsid'd grandchild that died) is left: a zombie costs a pid
    /// slot until this process exits, a stolen exit status breaks a caller.
    fn reap_adopted(&mut self) {
        let own_session = crate::os::sys::own_group_and_session().1 as i32;
        for child in table::own_children() {
            if !child.zombie {
                continue;
            }
            let seen_elsewhere = self.not_forked_by_us.contains(&(child.pid, child.start_time));
            let other_session = child.session.is_some_and(|s| s as i32 != own_session && s != child.pid);
            if seen_elsewhere || other_session {
                table::reap_exactly(child);
                self.not_forked_by_us.remove(&(child.pid, child.start_time));
            }
        }
    }

    fn report(
        &self,
        label: &str,
        memory_before_mb: f64,
        memory_after_mb: f64,
        orphans: Vec<ProcessInfo>,
        rule: OrphanRule,
        memory_source: MemorySource,
    ) -> PhaseReport {
        let mut warnings = Vec::new();
        if !orphans.is_empty() {
            let listed = format!(
                "[{}]",
                orphans.iter().map(|p| format!("{} {}", crate::model::text::visible(&short_name(&p.command)), p.pid)).collect::<Vec<_>>().join(", ")
            );
            tracing::warn!(count = orphans.len(), processes = ?listed, "orphaned processes detected");
            warnings.push(format!("orphaned processes detected count={} processes=\"{listed}\"", orphans.len()));
        }
        let delta = memory_after_mb - memory_before_mb;
        let orphan_memory_mb = orphans.iter().fold(0.0, |sum, p| sum + p.memory_mb);
        let threshold = self.config.memory_threshold_mb;
        let threshold_mb = threshold.round() as i64;
        // About what the task grew or left, never about the machine.
        if delta > threshold {
            let delta_mb = delta.round() as i64;
            tracing::warn!(delta_mb, threshold_mb, "memory growth exceeded threshold");
            warnings.push(format!("memory growth exceeded threshold delta_mb={delta_mb} threshold_mb={threshold_mb}"));
        } else if orphan_memory_mb > threshold {
            let orphan_mb = orphan_memory_mb.round() as i64;
            tracing::warn!(orphan_mb, threshold_mb, "memory left behind exceeded threshold");
            warnings.push(format!("memory left behind exceeded threshold orphan_mb={orphan_mb} threshold_mb={threshold_mb}"));
        }
        PhaseReport {
            label: label.to_string(),
            orphans,
            rule,
            memory_before_mb,
            memory_after_mb,
            memory_delta_mb: delta,
            orphan_memory_mb,
            memory_source,
            warnings,
        }
    }
}

impl Drop for ResourceTracker {
    /// A tracker dropped with phases open does not leave its process a subreaper.
    fn drop(&mut self) {
        self.subreaper_off();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One tracker test at a time is a subreaper: one ending its phase turns
    /// the subreaper off under the other, whose orphans then go to init.
    static SUBREAPER: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn proc(pid: u32, ppid: u32, command: &str, start_time: u64) -> ProcessInfo {
        ProcessInfo { pid, ppid, command: command.into(), memory_mb: 1.0, start_time, is_mcp: false, job_id: None }
    }

    /// SIGKILL to a process a test started (its pid just read).
    fn kill(pid: u32) {
        if let Some(who) = crate::os::procinfo::identify(pid) {
            let _ = crate::os::procinfo::signal_process(&who, crate::model::signals::SIGKILL);
        }
    }

    #[test]
    fn memory_warning_is_about_growth_or_what_was_left() {
        let config = ResourceTrackingConfig { memory_threshold_mb: 100.0, ..Default::default() };
        let tracker = ResourceTracker::new(config);
        let ok = tracker.report("build", 1000.0, 1050.0, vec![], OrphanRule::Ancestry, MemorySource::Pss);
        assert_eq!(ok.memory_delta_mb, 50.0);
        assert!(ok.warnings.is_empty());
        let grown = tracker.report("build", 1000.0, 1222.0, vec![], OrphanRule::Ancestry, MemorySource::Pss);
        assert_eq!(grown.memory_delta_mb, 222.0);
        assert_eq!(grown.warnings, vec!["memory growth exceeded threshold delta_mb=222 threshold_mb=100"]);
        let mut big = proc(7, 1, "daemon", 1);
        big.memory_mb = 150.0;
        let left = tracker.report("build", 200.0, 210.0, vec![big], OrphanRule::Ancestry, MemorySource::Pss);
        assert_eq!(left.orphan_memory_mb, 150.0);
        assert_eq!(left.warnings[1], "memory left behind exceeded threshold orphan_mb=150 threshold_mb=100");
    }

    /// Real processes: a grandchild orphaned below a tracking process is
    /// found by ancestry; a run-bg helper (the supervisor mark) and another
    /// job's process orphaned the same way are not.
    #[test]
    fn the_subreaper_finds_what_was_orphaned_below_it_and_nothing_of_other_jobs() {
        if !table::CHILD_SUBREAPERS {
            return; // Linux only: no child subreapers elsewhere.
        }
        use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
        let _alone = SUBREAPER.lock().unwrap_or_else(|e| e.into_inner());
        let mut tracker = ResourceTracker::new(ResourceTrackingConfig::default());
        tracker.snapshot_before("t").unwrap();
        let orphan = |env: &[(&str, &str)]| {
            let out = std::process::Command::new("sh")
                .args(["-c", "sleep 30 >/dev/null 2>&1 & echo $!"])
                .envs(env.iter().copied())
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap().trim().parse::<u32>().unwrap()
        };
        let left = orphan(&[]);
        let helper = orphan(&[(SUPERVISOR_MARK, "x-1")]);
        let other_job = orphan(&[(JOB_COOKIE, "other-1")]);
        let report = tracker.snapshot_after("t").unwrap();
        for pid in [left, helper, other_job] {
            kill(pid);
        }
        let pids: Vec<u32> = report.orphans.iter().map(|p| p.pid).collect();
        assert!(pids.contains(&left), "{pids:?} has {left}");
        assert!(!pids.contains(&helper) && !pids.contains(&other_job), "{pids:?}");
        assert_eq!(report.rule, OrphanRule::Ancestry);
        assert_eq!(report.memory_source, MemorySource::Pss);
        // The subreaper is off again: a new orphan goes elsewhere.
        let later = orphan(&[]);
        let parent = crate::os::procinfo::identify(later).map(|_| std::fs::read_to_string(format!("/proc/{later}/stat")).unwrap());
        kill(later);
        let ppid: u32 = parent.unwrap().rsplit(") ").next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        assert_ne!(ppid, std::process::id());
    }

    /// A child of ours killed just before `snapshot_after`: what it started
    /// is left behind whether or not its exit has yet handed its children to
    /// us. Its 512 MiB make that exit take tens of milliseconds, so the
    /// snapshot is read while it runs (before the fix: missed every time).
    #[test]
    fn what_a_child_of_ours_started_is_left_behind_as_soon_as_the_child_is_killed() {
        if !table::CHILD_SUBREAPERS {
            return; // Linux only: no child subreapers elsewhere.
        }
        use std::io::BufRead;
        let _alone = SUBREAPER.lock().unwrap_or_else(|e| e.into_inner());
        let mut tracker = ResourceTracker::new(ResourceTrackingConfig::default());
        tracker.snapshot_before("k").unwrap();
        let script = r#"$| = 1; my $pid = fork // die; if (!$pid) { exec "sleep", "600" } my $x = "\0" x (512 << 20); print "$pid\n"; sleep 600"#;
        let mut agent = std::process::Command::new("perl")
            .args(["-e", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("perl runs");
        let mut line = String::new();
        std::io::BufReader::new(agent.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let grandchild: u32 = line.trim().parse().expect("the agent printed its child's pid");
        agent.kill().unwrap();
        let agent_pid = agent.id();
        let owns = |pid: u32| pid == agent_pid;
        let report = tracker.snapshot_after_with("k", Some(&owns)).unwrap();
        kill(grandchild);
        agent.wait().unwrap();
        let pids: Vec<u32> = report.orphans.iter().map(|p| p.pid).collect();
        assert!(pids.contains(&grandchild), "{pids:?} has {grandchild}");
        assert!(!pids.contains(&agent_pid), "the killed child is ours, not a leftover: {pids:?}");
    }

    /// The kernel fact `let_killed_children_go` rests on: a killed
    /// process's pidfd turns readable only once its last thread has exited,
    /// and by then what it started has been handed to us, the subreaper
    /// (its main thread shows as a zombie long before, while a thread frees
    /// the memory). A copy of this test binary is the child: one thread
    /// fills 512 MiB, another starts sleep.
    #[test]
    fn a_killed_multithreaded_childs_pidfd_turns_readable_only_once_its_children_are_handed_over() {
        if !table::CHILD_SUBREAPERS {
            return; // Linux only: no child subreapers elsewhere.
        }
        use std::io::BufRead;
        let _alone = SUBREAPER.lock().unwrap_or_else(|e| e.into_inner());
        let mut tracker = ResourceTracker::new(ResourceTrackingConfig::default());
        tracker.snapshot_before("pidfd").unwrap();
        let parent_of = |pid: u32| -> Option<u32> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat.rsplit(") ").next()?.split(' ').nth(1)?.parse().ok()
        };
        for _ in 0..3 {
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "verbs::resource_tracker::tests::fills_memory_in_a_thread_and_starts_sleep", "--nocapture", "--test-threads=1"])
                .env("PM_TEST_FILL_MB", "512")
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
            // libtest prints `test <name> ... ` first, on the same line.
            let sleep: u32 = lines.find_map(|l| l.ok()?.rsplit_once("sleep ")?.1.trim().parse().ok()).expect("the child printed its sleep's pid");
            let fd = crate::os::pidfd::open(child.id()).expect("a pidfd for our child");
            child.kill().unwrap();
            let ended = crate::os::pidfd::wait_readable_until(&fd, std::time::Instant::now() + std::time::Duration::from_secs(10));
            let parent = parent_of(sleep);
            kill(sleep);
            child.wait().unwrap();
            assert!(ended, "the pidfd turned readable");
            assert_eq!(parent, Some(std::process::id()), "the sleep was ours when the pidfd turned readable");
        }
        tracker.snapshot_after("pidfd").unwrap();
    }

    /// Not a check: the child of the test above, which SIGKILLs it and
    /// then kills the sleep it handed over (never waited for here).
    #[test]
    #[ignore]
    #[allow(clippy::zombie_processes)]
    fn fills_memory_in_a_thread_and_starts_sleep() {
        let Some(mb) = std::env::var("PM_TEST_FILL_MB").ok().and_then(|v| v.parse::<usize>().ok()) else { return };
        let (filled, wait_filled) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let memory = vec![1u8; mb << 20];
            filled.send(()).unwrap();
            loop {
                std::thread::park();
                std::hint::black_box(&memory);
            }
        });
        wait_filled.recv().unwrap();
        let sleep = std::process::Command::new("sleep").arg("600").stdout(std::process::Stdio::null()).spawn().unwrap();
        println!("sleep {}", sleep.id());
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn disabled_tracker_does_nothing() {
        let mut tracker = ResourceTracker::new(ResourceTrackingConfig { enabled: false, ..Default::default() });
        assert!(tracker.snapshot_before("x").is_none());
        assert!(tracker.snapshot_after("x").is_none());
    }

}
