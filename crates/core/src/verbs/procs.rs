//! Process snapshots, orphan diffing and resource tracking: what a task left
//! behind and what it cost. Linux reads /proc directly (one `stat` and one
//! `cmdline` read per process); other systems use sysinfo.

use crate::store::config::ResourceTrackingConfig;
use crate::now_ms;
use std::collections::{HashMap, HashSet};

/// Environment variable a tracked task inherits; its value is the tracker's token.
pub const TRACKER_COOKIE: &str = "PROC_MANAGER_TRACKER";

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// Full argv joined with spaces; `[name]` for kernel threads.
    pub command: String,
    /// Resident set size.
    pub memory_mb: f64,
    /// Milliseconds since the epoch (10 ms resolution on Linux): with the pid,
    /// it tells a process from a later one that reused the pid.
    pub start_time: u64,
    pub is_mcp: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub timestamp: u64,
    pub processes: Vec<ProcessInfo>,
    /// Sum of the resident memory of every process in the snapshot.
    pub total_memory_mb: f64,
}

pub fn matches_mcp(command: &str, patterns: &[String]) -> bool {
    let lower = command.to_ascii_lowercase();
    patterns.iter().any(|p| !p.is_empty() && lower.contains(&p.to_ascii_lowercase()))
}

#[cfg(target_os = "linux")]
mod os {
    use super::ProcessInfo;
    use crate::os::platform::read_proc_file;
    use crate::os::procinfo::{parse_stat, stat_comm};
    use std::fmt::Write;
    use std::sync::OnceLock;

    struct Clock {
        boot_ms: u64,
        ms_per_tick: u64,
        page_kb: u64,
    }

    fn clock() -> &'static Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            let boot_secs = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok()))
                .unwrap_or(0);
            // SAFETY: sysconf takes an integer name and touches no memory of
            // ours; an error (-1) is clamped to 1 below.
            let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
            // SAFETY: as above.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
            Clock { boot_ms: boot_secs * 1000, ms_per_tick: 1000 / ticks, page_kb: page / 1024 }
        })
    }

    /// Start time in epoch ms from the start ticks of /proc/<pid>/stat.
    pub fn ticks_to_epoch_ms(ticks: u64) -> u64 {
        let c = clock();
        c.boot_ms + ticks * c.ms_per_tick
    }

    /// Every live process. With many processes the reads are split over a
    /// few threads: they are independent syscalls, and the cores are there.
    pub fn processes() -> Vec<ProcessInfo> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let pids: Vec<u32> =
            entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect();
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
        if workers < 2 || pids.len() < 256 {
            return read_processes(&pids);
        }
        let chunk = pids.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = pids.chunks(chunk).map(|part| scope.spawn(move || read_processes(part))).collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        })
    }

    fn read_processes(pids: &[u32]) -> Vec<ProcessInfo> {
        let page_kb = clock().page_kb;
        let mut result = Vec::with_capacity(pids.len());
        let mut path = String::with_capacity(32);
        let mut stat = Vec::with_capacity(1024);
        let mut cmdline = Vec::with_capacity(4096);
        for &pid in pids {
            path.clear();
            let _ = write!(path, "/proc/{pid}/stat");
            if !read_proc_file(&path, &mut stat, 4096) {
                continue; // exited meanwhile
            }
            let Some(fields) = parse_stat(&stat).filter(|f| !f.is_dead()) else { continue };
            path.truncate(path.len() - "stat".len());
            path.push_str("cmdline");
            // A kernel thread's cmdline is empty: not worth an open per thread.
            let command = if !fields.is_kernel_thread()
                && read_proc_file(&path, &mut cmdline, 64 * 1024)
                && !cmdline.is_empty()
            {
                if cmdline.last() == Some(&0) {
                    cmdline.pop();
                }
                for byte in cmdline.iter_mut().filter(|b| **b == 0) {
                    *byte = b' ';
                }
                String::from_utf8_lossy(&cmdline).into_owned()
            } else {
                format!("[{}]", stat_comm(&stat))
            };
            result.push(ProcessInfo {
                pid,
                ppid: fields.ppid,
                command,
                memory_mb: (fields.rss_pages * page_kb) as f64 / 1024.0,
                start_time: ticks_to_epoch_ms(fields.start_ticks),
                is_mcp: false,
            });
        }
        result
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use super::ProcessInfo;
    use crate::os::platform as portable;
    use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

    pub fn processes() -> Vec<ProcessInfo> {
        let Ok(mut system) = System::new() else { return Vec::new() };
        system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing().with_memory().with_cmd(UpdateKind::Always),
        );
        system
            .processes()
            .values()
            .map(|p| {
                ProcessInfo {
                    pid: p.pid().as_u32(),
                    ppid: p.parent().map(|pp| pp.as_u32()).unwrap_or(0),
                    command: portable::command(p),
                    memory_mb: p.memory() as f64 / (1024.0 * 1024.0),
                    start_time: p.start_time() * 1000,
                    is_mcp: false,
                }
            })
            .collect()
    }
}

/// Every process visible to this user (the caller included), MCP-flagged.
pub fn snapshot(mcp_patterns: &[String]) -> Snapshot {
    let mut processes = os::processes();
    for p in &mut processes {
        p.is_mcp = matches_mcp(&p.command, mcp_patterns);
    }
    processes.sort_by_key(|p| p.pid);
    let total_memory_mb = processes.iter().fold(0.0, |sum, p| sum + p.memory_mb);
    Snapshot { timestamp: now_ms(), processes, total_memory_mb }
}

pub fn environ_value(pid: u32, key: &str) -> Option<String> {
    crate::os::procinfo::environ_value(pid, key)
}

/// Which rule decided that a process was left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphanRule {
    /// Only processes that carry the tracker's cookie count.
    Cookie,
    /// New processes whose parent is gone, is init, or is a subreaper above us.
    Parent,
}

impl OrphanRule {
    pub fn as_str(self) -> &'static str {
        match self {
            OrphanRule::Cookie => "cookie",
            OrphanRule::Parent => "parent",
        }
    }
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

/// The cookie rule: new processes carrying the tracker's `token` whose parent
/// is not itself part of the tracked work (gone, init, or anything without the
/// cookie other than `observer`, which started the work).
fn detect_cookie_orphans(
    before: &[ProcessInfo],
    after: &[ProcessInfo],
    observer: u32,
    token: &str,
) -> Vec<ProcessInfo> {
    let known: HashSet<(u32, u64)> = before.iter().map(|p| (p.pid, p.start_time)).collect();
    let carriers: HashSet<u32> = after
        .iter()
        .filter(|p| !known.contains(&(p.pid, p.start_time)) && p.pid != observer)
        .filter(|p| environ_value(p.pid, TRACKER_COOKIE).as_deref() == Some(token))
        .map(|p| p.pid)
        .collect();
    let mut orphans: Vec<ProcessInfo> = after
        .iter()
        .filter(|p| carriers.contains(&p.pid))
        .filter(|p| p.ppid != observer && !carriers.contains(&p.ppid))
        .cloned()
        .collect();
    orphans.sort_by_key(|p| (!p.is_mcp, p.pid));
    orphans
}

/// What one tracked phase left behind and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    pub label: String,
    pub orphans: Vec<ProcessInfo>,
    pub rule: OrphanRule,
    pub memory_before_mb: f64,
    pub memory_after_mb: f64,
    pub memory_delta_mb: f64,
    /// The same warnings that were logged.
    pub warnings: Vec<String>,
}

/// Snapshots around each phase of a task (`snapshot_before(label)` /
/// `snapshot_after(label)`), reporting orphans and memory growth through
/// `tracing` and in the result. Disabled, it does nothing and logs nothing.
pub struct ResourceTracker {
    config: ResourceTrackingConfig,
    token: String,
    cookie_handed_out: bool,
    observer: u32,
    phases: HashMap<String, Snapshot>,
}

impl ResourceTracker {
    pub fn new(config: ResourceTrackingConfig) -> ResourceTracker {
        ResourceTracker {
            config,
            token: format!("{}-{}", std::process::id(), crate::model::ids::random_suffix()),
            cookie_handed_out: false,
            observer: std::process::id(),
            phases: HashMap::new(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The environment to start tracked work with; from then on only processes
    /// carrying it count as orphans.
    pub fn env(&mut self) -> (String, String) {
        self.cookie_handed_out = true;
        (TRACKER_COOKIE.to_string(), self.token.clone())
    }

    pub fn snapshot_before(&mut self, label: &str) -> Option<Snapshot> {
        if !self.config.enabled {
            return None;
        }
        let snap = snapshot(&self.config.mcp_patterns);
        tracing::info!(processes = snap.processes.len(), memory_mb = snap.total_memory_mb.round() as u64, "resource snapshot taken");
        self.phases.insert(label.to_string(), snap.clone());
        Some(snap)
    }

    /// Compares with the snapshot taken before `label` (an empty one if none was).
    pub fn snapshot_after(&mut self, label: &str) -> Option<PhaseReport> {
        if !self.config.enabled {
            return None;
        }
        let after = snapshot(&self.config.mcp_patterns);
        tracing::info!(processes = after.processes.len(), memory_mb = after.total_memory_mb.round() as u64, "resource snapshot taken");
        let before = self.phases.remove(label).unwrap_or(Snapshot {
            timestamp: after.timestamp,
            processes: Vec::new(),
            total_memory_mb: after.total_memory_mb,
        });
        let (orphans, rule) = if self.cookie_handed_out {
            (detect_cookie_orphans(&before.processes, &after.processes, self.observer, &self.token), OrphanRule::Cookie)
        } else {
            (detect_orphans(&before.processes, &after.processes, self.observer), OrphanRule::Parent)
        };
        Some(self.report(label, &before, &after, orphans, rule))
    }

    fn report(
        &self,
        label: &str,
        before: &Snapshot,
        after: &Snapshot,
        orphans: Vec<ProcessInfo>,
        rule: OrphanRule,
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
        let delta = after.total_memory_mb - before.total_memory_mb;
        let threshold = self.config.memory_threshold_mb;
        if delta > threshold {
            let (delta_mb, threshold_mb) = (delta.round() as i64, threshold.round() as i64);
            tracing::warn!(delta_mb, threshold_mb, "memory growth exceeded threshold");
            warnings.push(format!("memory growth exceeded threshold delta_mb={delta_mb} threshold_mb={threshold_mb}"));
        }
        PhaseReport {
            label: label.to_string(),
            orphans,
            rule,
            memory_before_mb: before.total_memory_mb,
            memory_after_mb: after.total_memory_mb,
            memory_delta_mb: delta,
            warnings,
        }
    }
}

/// `chromium` for `/usr/lib/chromium/chromium --headless …`.
pub fn short_name(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or(command);
    first.trim_start_matches('[').trim_end_matches(']').rsplit('/').next().unwrap_or(first).to_string()
}

/// Sends `tracing` events to stderr as `LEVEL message key=value`, once per
/// process. `PROC_MANAGER_LOG` sets the level (error, warn, info, debug, off).
pub fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let level = match std::env::var("PROC_MANAGER_LOG").unwrap_or_default().to_ascii_lowercase().as_str() {
            "off" => return,
            "error" => tracing::Level::ERROR,
            "warn" => tracing::Level::WARN,
            "debug" => tracing::Level::DEBUG,
            "trace" => tracing::Level::TRACE,
            _ => tracing::Level::INFO,
        };
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(level)
            .without_time()
            .with_target(false)
            .with_ansi(false)
            .try_init();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, ppid: u32, command: &str, start_time: u64) -> ProcessInfo {
        ProcessInfo { pid, ppid, command: command.into(), memory_mb: 1.0, start_time, is_mcp: false }
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
    fn memory_delta_and_threshold_warning() {
        let config = ResourceTrackingConfig { memory_threshold_mb: 100.0, ..Default::default() };
        let tracker = ResourceTracker::new(config);
        let before = Snapshot { timestamp: 0, processes: vec![], total_memory_mb: 1000.0 };
        let small = Snapshot { timestamp: 1, processes: vec![], total_memory_mb: 1050.0 };
        let big = Snapshot { timestamp: 1, processes: vec![], total_memory_mb: 1222.0 };
        let ok = tracker.report("build", &before, &small, vec![], OrphanRule::Parent);
        assert_eq!(ok.memory_delta_mb, 50.0);
        assert!(ok.warnings.is_empty());
        let grown = tracker.report("build", &before, &big, vec![], OrphanRule::Parent);
        assert_eq!(grown.memory_delta_mb, 222.0);
        assert_eq!(grown.warnings, vec!["memory growth exceeded threshold delta_mb=222 threshold_mb=100"]);
    }

    #[test]
    fn disabled_tracker_does_nothing() {
        let mut tracker = ResourceTracker::new(ResourceTrackingConfig { enabled: false, ..Default::default() });
        assert!(tracker.snapshot_before("x").is_none());
        assert!(tracker.snapshot_after("x").is_none());
    }

    #[test]
    fn mcp_patterns_match_case_insensitively() {
        let patterns: Vec<String> = ["playwright", "chromium"].iter().map(|s| s.to_string()).collect();
        assert!(matches_mcp("/usr/lib/Chromium/chromium --headless", &patterns));
        assert!(matches_mcp("node node_modules/.bin/playwright test", &patterns));
        assert!(!matches_mcp("sleep 600", &patterns));
        assert_eq!(short_name("/usr/lib/chromium/chromium --headless"), "chromium");
    }
}
