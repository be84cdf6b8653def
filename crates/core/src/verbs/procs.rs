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
    /// The job that owns the process (`ps` fills it in; a plain snapshot does not).
    pub job_id: Option<String>,
}

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

#[cfg(target_os = "linux")]
mod os {
    use super::ProcessInfo;
    use crate::os::platform::read_proc_file;
    use crate::os::procinfo::{parse_stat, stat_comm, stat_comm_bytes};
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

    /// Every live process, marked `is_mcp` by `mcp_patterns` (none: nothing
    /// is marked). With many processes the reads are split over a few
    /// threads: they are independent syscalls, and the cores are there.
    pub fn processes(mcp_patterns: &[String]) -> Vec<ProcessInfo> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let pids: Vec<u32> =
            entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect();
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
        if workers < 2 || pids.len() < 256 {
            return read_processes(&pids, mcp_patterns);
        }
        let chunk = pids.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = pids.chunks(chunk).map(|part| scope.spawn(move || read_processes(part, mcp_patterns))).collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
        })
    }

    fn read_processes(pids: &[u32], mcp_patterns: &[String]) -> Vec<ProcessInfo> {
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
            // An exiting process (PF_EXITING: killed, not yet a zombie) is as
            // good as gone: its children are being re-parented already.
            let Some(fields) = parse_stat(&stat).filter(|f| !f.is_dead() && f.flags & PF_EXITING == 0) else { continue };
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
            // The executable's name is read only where it can name the
            // program differently from argv[0]: a readlink for every process
            // made snapshot() 1.4x slower (565 processes: 5.8 -> 8.3 ms). A
            // kernel thread has no executable at all.
            let is_mcp = !mcp_patterns.is_empty() && {
                let exe = if fields.is_kernel_thread() || !exe_may_differ(&command, stat_comm_bytes(&stat)) {
                    None
                } else {
                    path.truncate(path.len() - "cmdline".len());
                    path.push_str("exe");
                    exe_name(&path)
                };
                super::matches_mcp(&command, exe.as_deref(), mcp_patterns)
            };
            result.push(ProcessInfo {
                pid,
                ppid: fields.ppid,
                command,
                memory_mb: (fields.rss_pages * page_kb) as f64 / 1024.0,
                start_time: ticks_to_epoch_ms(fields.start_ticks),
                is_mcp,
                job_id: None,
            });
        }
        result
    }

    const PF_EXITING: u64 = 0x4;

    /// Whether a process's executable can have another name than argv[0]'s
    /// base name. The kernel names a process (`comm`, at most 15 bytes)
    /// after the file it executed, so where argv[0]'s base name is that name
    /// the executable is the same program, except when it was started
    /// through a link whose name says nothing (`/proc/self/exe`, how
    /// Chromium and Electron start their zygotes; `/proc/self/fd/N`;
    /// `/dev/fd/N`) or it rewrote its title: Node's `process.title` and
    /// Python's setproctitle set comm and argv[0] alike, but leave the rest
    /// of the old command line as NULs, which `command` ends in as spaces. A
    /// script (comm is the script's name, argv[0] its interpreter) gets its
    /// executable read too. Missed: a program run through a symlink of
    /// another name (`python3` -> `python3.12`, a busybox applet) whose
    /// target's name alone matches a pattern.
    pub(super) fn exe_may_differ(command: &str, comm: &[u8]) -> bool {
        if command.ends_with(' ') {
            return true;
        }
        let argv0 = command.split(' ').next().unwrap_or("");
        if argv0.starts_with("/proc/") || argv0.starts_with("/dev/fd/") {
            return true;
        }
        let base = argv0.rsplit('/').next().unwrap_or(argv0).as_bytes();
        const COMM_MAX: usize = 15;
        let named_alike = base == comm || (comm.len() == COMM_MAX && base.starts_with(comm));
        !named_alike
    }

    /// The base name of the executable behind `exe_link` (/proc/<pid>/exe),
    /// where this user may read it.
    fn exe_name(exe_link: &str) -> Option<String> {
        let target = std::fs::read_link(exe_link).ok()?;
        // A replaced binary reads `/usr/bin/x (deleted)`.
        let name = target.file_name()?.to_string_lossy().trim_end_matches(" (deleted)").to_string();
        Some(name)
    }

    /// Proportional set size in KiB (shared pages split among their users),
    /// from /proc/<pid>/smaps_rollup; None where it cannot be read.
    pub fn pss_kb(pid: u32) -> Option<u64> {
        let mut buf = Vec::with_capacity(1024);
        if !read_proc_file(&format!("/proc/{pid}/smaps_rollup"), &mut buf, 8192) {
            return None;
        }
        let text = std::str::from_utf8(&buf).ok()?;
        text.lines().find_map(|l| l.strip_prefix("Pss:")?.trim().strip_suffix("kB")?.trim().parse().ok())
    }

    /// Field 6 of /proc/<pid>/stat, counted after the command name's `)`.
    pub fn session_of(stat: &[u8]) -> Option<u32> {
        let close = stat.iter().rposition(|&b| b == b')')?;
        std::str::from_utf8(&stat[close + 1..]).ok()?.split_ascii_whitespace().nth(3)?.parse().ok()
    }

    /// Whether `pid` is on its way out but has not yet handed its children
    /// on: SIGKILL is pending, or its exit has begun (PF_EXITING) and it is
    /// not a zombie yet. Read in the order those come, so that one moving on
    /// between the two reads is seen in the second.
    pub fn is_ending(pid: u32) -> bool {
        const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
        let mut buf = Vec::with_capacity(2048);
        if !read_proc_file(&format!("/proc/{pid}/status"), &mut buf, 16384) {
            return false;
        }
        let pending = String::from_utf8_lossy(&buf).lines().any(|line| {
            let mask = line.strip_prefix("SigPnd:").or_else(|| line.strip_prefix("ShdPnd:"));
            mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).is_some_and(|m| m & SIGKILL_BIT != 0)
        });
        if pending {
            return true;
        }
        if !read_proc_file(&format!("/proc/{pid}/stat"), &mut buf, 4096) {
            return false;
        }
        parse_stat(&buf).is_some_and(|stat| !stat.is_dead() && stat.flags & PF_EXITING != 0)
    }

    /// Every direct child of the calling process, zombies included, with
    /// their states (Z: exited, not yet reaped).
    pub fn own_children() -> Vec<super::Child> {
        let me = std::process::id();
        let mut found = Vec::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) else { return found };
        let mut buf = Vec::with_capacity(256);
        for task in tasks.flatten() {
            let path = format!("{}/children", task.path().display());
            if !read_proc_file(&path, &mut buf, 1 << 20) {
                continue;
            }
            for pid in String::from_utf8_lossy(&buf).split_ascii_whitespace().filter_map(|c| c.parse::<u32>().ok()) {
                let mut stat = Vec::with_capacity(512);
                if !read_proc_file(&format!("/proc/{pid}/stat"), &mut stat, 4096) {
                    continue;
                }
                if let Some(fields) = parse_stat(&stat).filter(|f| f.ppid == me) {
                    found.push(super::Child {
                        pid,
                        start_time: ticks_to_epoch_ms(fields.start_ticks),
                        zombie: fields.state == b'Z',
                        session: session_of(&stat),
                    });
                }
            }
        }
        found
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use super::ProcessInfo;
    use crate::os::platform as portable;
    use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

    /// Every process, marked `is_mcp` by `mcp_patterns` on its command line:
    /// the executable's name is argv[0]'s here (sysinfo's exe needs a second
    /// pass).
    pub fn processes(mcp_patterns: &[String]) -> Vec<ProcessInfo> {
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
                let command = portable::command(p);
                let is_mcp = !mcp_patterns.is_empty() && super::matches_mcp(&command, None, mcp_patterns);
                ProcessInfo {
                    pid: p.pid().as_u32(),
                    ppid: p.parent().map(|pp| pp.as_u32()).unwrap_or(0),
                    command,
                    memory_mb: p.memory() as f64 / (1024.0 * 1024.0),
                    start_time: p.start_time() * 1000,
                    is_mcp,
                    job_id: None,
                }
            })
            .collect()
    }

    /// No smaps_rollup: resident memory is all there is.
    pub fn pss_kb(_pid: u32) -> Option<u64> {
        None
    }

    /// Never asked: `own_children` lists nothing here.
    pub fn is_ending(_pid: u32) -> bool {
        false
    }

    /// No child subreapers on this system, so nothing is ever adopted and
    /// there is nothing of anyone else's to reap.
    pub fn own_children() -> Vec<super::Child> {
        Vec::new()
    }
}

/// Every process visible to this user (the caller included), MCP-flagged.
pub fn snapshot(mcp_patterns: &[String]) -> Snapshot {
    let mut processes = os::processes(mcp_patterns);
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

/// A direct child of the calling process, as the kernel lists it.
#[derive(Debug, Clone, Copy)]
pub struct Child {
    pub pid: u32,
    pub start_time: u64,
    pub zombie: bool,
    pub session: Option<u32>,
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
struct Scope {
    tracked: Vec<u32>,
    left: Vec<u32>,
    /// (pid, start) of processes below the observer with another parent:
    /// never forked by the observer (see `ResourceTracker::reap_adopted`).
    not_forked_by_observer: Vec<(u32, u64)>,
}

fn scope(processes: &[ProcessInfo], before: Option<&HashSet<(u32, u64)>>, observer: &Observer) -> Scope {
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

/// Memory of one process, and whether it is PSS.
fn measure(p: &ProcessInfo) -> (f64, bool) {
    match os::pss_kb(p.pid) {
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
    for child in os::own_children().into_iter().filter(|c| c.zombie || os::is_ending(c.pid)) {
        let Ok(fd) = crate::os::pidfd::open_checked(child.pid) else { continue };
        // Ours and unreaped, so the pid is still that child, unless another
        // thread reaped it (and the pid was taken) just before the open.
        if os::own_children().iter().any(|c| c.pid == child.pid && c.start_time == child.start_time) {
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
    /// child subreapers: elsewhere it is never read.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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
        snap.processes.iter().filter(|p| wanted.contains(&p.pid)).fold((0.0, cfg!(target_os = "linux")), |(sum, pss), p| {
            let (mb, is_pss) = measure(p);
            (sum + mb, pss && is_pss)
        })
    }

    /// Makes this process a child subreaper for the first open phase,
    /// remembering whether it was one already.
    fn subreaper_on(&mut self) {
        #[cfg(target_os = "linux")]
        if self.subreaper_before.is_none() {
            let was = rustix::process::child_subreaper().map(|p| p.is_some()).unwrap_or(false);
            if !was {
                if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
                    tracing::warn!("resource tracker: cannot become a child subreaper ({e}); orphans go to init and only the cookie finds them");
                }
            }
            self.subreaper_before = Some(was);
        }
    }

    /// Once the last open phase is closed: back to what it was.
    fn subreaper_off(&mut self) {
        #[cfg(target_os = "linux")]
        if self.subreaper_before.take() == Some(false) {
            if let Err(e) = rustix::process::set_child_subreaper(None) {
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
        let own_session = rustix::process::getsid(None).map_or(-1, |p| p.as_raw_nonzero().get());
        for child in os::own_children() {
            if !child.zombie {
                continue;
            }
            let seen_elsewhere = self.not_forked_by_us.contains(&(child.pid, child.start_time));
            let other_session = child.session.is_some_and(|s| s as i32 != own_session && s != child.pid);
            if seen_elsewhere || other_session {
                reap_exactly(child);
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

/// Reaps the zombie `child` and nothing else: a pidfd pins the process, its
/// start time is checked after, and waitid on the pidfd takes only it.
fn reap_exactly(child: Child) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{waitid, WaitId, WaitIdOptions};
        let Ok(fd) = crate::os::pidfd::open_checked(child.pid) else { return };
        let same = os::own_children().iter().any(|c| c.pid == child.pid && c.start_time == child.start_time && c.zombie);
        if same {
            let _ = waitid(WaitId::PidFd(std::os::fd::AsFd::as_fd(&fd)), WaitIdOptions::EXITED | WaitIdOptions::NOHANG);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = child;
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

    /// One tracker test at a time is a subreaper: one ending its phase turns
    /// the subreaper off under the other, whose orphans then go to init.
    #[cfg(target_os = "linux")]
    static SUBREAPER: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    #[cfg(target_os = "linux")]
    #[test]
    fn the_subreaper_finds_what_was_orphaned_below_it_and_nothing_of_other_jobs() {
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
            // SAFETY: kill takes integers only; these are our own orphans' pids, just read.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        let pids: Vec<u32> = report.orphans.iter().map(|p| p.pid).collect();
        assert!(pids.contains(&left), "{pids:?} has {left}");
        assert!(!pids.contains(&helper) && !pids.contains(&other_job), "{pids:?}");
        assert_eq!(report.rule, OrphanRule::Ancestry);
        assert_eq!(report.memory_source, MemorySource::Pss);
        // The subreaper is off again: a new orphan goes elsewhere.
        let later = orphan(&[]);
        let parent = crate::os::procinfo::identify(later).map(|_| std::fs::read_to_string(format!("/proc/{later}/stat")).unwrap());
        // SAFETY: as above.
        unsafe { libc::kill(later as i32, libc::SIGKILL) };
        let ppid: u32 = parent.unwrap().rsplit(") ").next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        assert_ne!(ppid, std::process::id());
    }

    /// A child of ours killed just before `snapshot_after`: what it started
    /// is left behind whether or not its exit has yet handed its children to
    /// us. Its 512 MiB make that exit take tens of milliseconds, so the
    /// snapshot is read while it runs (before the fix: missed every time).
    #[cfg(target_os = "linux")]
    #[test]
    fn what_a_child_of_ours_started_is_left_behind_as_soon_as_the_child_is_killed() {
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
        // SAFETY: kill takes integers only; the grandchild is ours, its pid just read.
        unsafe { libc::kill(grandchild as i32, libc::SIGKILL) };
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
    #[cfg(target_os = "linux")]
    #[test]
    fn a_killed_multithreaded_childs_pidfd_turns_readable_only_once_its_children_are_handed_over() {
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
                .args(["--ignored", "--exact", "verbs::procs::tests::fills_memory_in_a_thread_and_starts_sleep", "--nocapture", "--test-threads=1"])
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
            // SAFETY: kill takes integers only; the sleep is our child's child, its pid just read.
            unsafe { libc::kill(sleep as i32, libc::SIGKILL) };
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

    #[cfg(target_os = "linux")]
    #[test]
    fn the_executable_is_read_only_where_it_can_name_another_program() {
        let differs = |command: &str, comm: &str| os::exe_may_differ(command, comm.as_bytes());
        assert!(!differs("/usr/bin/sleep 600", "sleep"), "started by its own name");
        assert!(!differs("sleep 600", "sleep"), "found in PATH");
        assert!(!differs("/opt/x/mcp-server-filesystem-extra --stdio", "mcp-server-file"), "a long name, cut to 15 bytes");
        assert!(differs("/proc/self/exe --type=zygote", "exe"), "re-executed through /proc/self/exe");
        assert!(differs("/proc/self/fd/3 --type=zygote", "3"), "through a descriptor");
        assert!(differs("/dev/fd/4", "4"), "through /dev/fd");
        assert!(differs("my-title    ", "my-title"), "a title set by process.title: comm alike, NUL padding after it");
        assert!(differs("my-title", "node"), "argv[0] rewritten alone");
        assert!(differs("node /x/.bin/mcp-server-git", "mcp-server-git"), "a script: comm names the script");
        assert!(differs("/usr/bin/sleepy 1", "sleep"), "a name that only starts alike");
    }

    /// What the kernel reports for a real process started through
    /// /proc/self/exe (as Chromium starts its zygote): its executable is read.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_program_reexecuted_through_proc_self_exe_is_marked_by_its_executable() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        // A copy of this test binary named like a browser, started as
        // `/proc/self/exe`: argv[0] says nothing, the executable does. (Not
        // a copy of sleep: where that is a multi-call binary, busybox or
        // uutils, it would pick its tool by the name `exe`.)
        let browser = dir.path().join("chromium");
        std::fs::copy(std::env::current_exe().unwrap(), &browser).unwrap();
        let mut child = std::process::Command::new(&browser)
            .arg0("/proc/self/exe")
            .args(["--ignored", "--exact", "verbs::procs::tests::waits_until_its_stdin_closes", "--test-threads=1"])
            .env("PM_TEST_WAIT_ON_STDIN", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let patterns = vec!["chromium".to_string()];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let found = snapshot(&patterns).processes.into_iter().find(|p| p.pid == pid);
            if found.as_ref().is_some_and(|p| p.command.starts_with("/proc/self/exe")) || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let _ = child.kill();
        let _ = child.wait();
        let found = found.expect("the child is in the snapshot");
        assert!(found.is_mcp, "marked through its executable: {found:?}");
    }

    /// Not a check: the process the test above starts, which must stay
    /// alive until it is killed (it waits on a pipe nobody writes).
    #[test]
    #[ignore]
    fn waits_until_its_stdin_closes() {
        if std::env::var_os("PM_TEST_WAIT_ON_STDIN").is_some() {
            let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
        }
    }
}
