//! What the OS says about processes: is a pid still the process we recorded,
//! which processes belong to a job (its group, or its environment cookie), and
//! signalling one process without ever hitting a stranger.

use crate::model::job::ProcessIdentity;
use crate::os::{pidfd, platform};
use std::time::Duration;

// The platform's own reading of the process table (`os/linux.rs`, `os/macos.rs`).
pub use platform::{command_line, cpu_times, environ_value, identify, is_stopped, keep_large_blocks_mapped, live_children, parent_of, identify_with_parent, release_free_heap, rows, table};

/// The CPU a process has used since it started, and when it started: what
/// `ps` divides for its %CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTime {
    /// User and system time, in milliseconds.
    pub cpu_ms: u64,
    /// When it started, in milliseconds since the epoch.
    pub started_at_ms: u64,
}

/// The fields of /proc/<pid>/stat that proc-manager uses.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub state: u8,
    pub ppid: u32,
    pub pgrp: u32,
    /// Field 22: clock ticks since boot.
    pub start_ticks: u64,
    /// Field 24: resident pages.
    pub rss_pages: u64,
    /// Field 9: the kernel's PF_* flags.
    pub flags: u64,
    /// Fields 14 and 15: clock ticks spent in user and kernel mode.
    pub cpu_ticks: u64,
}

/// PF_KTHREAD: a kernel thread, whose cmdline is always empty.
const PF_KTHREAD: u64 = 0x0020_0000;

impl Stat {
    pub fn is_dead(&self) -> bool {
        is_dead_state(self.state)
    }

    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

/// Parses the content of /proc/<pid>/stat. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat(raw: &[u8]) -> Option<Stat> {
    let close = raw.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&raw[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.as_bytes().first().copied()?; // field 3
    let ppid = fields.next()?.parse().ok()?; // 4
    let pgrp = fields.next()?.parse().ok()?; // 5
    let flags = fields.nth(3)?.parse().ok()?; // 9
    let user_ticks: u64 = fields.nth(4)?.parse().ok()?; // 14
    let system_ticks: u64 = fields.next()?.parse().ok()?; // 15
    let start_ticks = fields.nth(6)?.parse().ok()?; // 22
    let rss_pages = fields.nth(1)?.parse().ok()?; // 24
    Some(Stat { state, ppid, pgrp, start_ticks, rss_pages, flags, cpu_ticks: user_ticks + system_ticks })
}

/// The command name (field 2) of /proc/<pid>/stat content.
pub fn stat_comm(raw: &[u8]) -> String {
    String::from_utf8_lossy(stat_comm_bytes(raw)).into_owned()
}

/// `stat_comm` without the copy.
pub fn stat_comm_bytes(raw: &[u8]) -> &[u8] {
    let close = raw.iter().rposition(|&b| b == b')').unwrap_or(0);
    let open = raw.iter().position(|&b| b == b'(').map_or(0, |i| i + 1).min(close);
    &raw[open..close]
}

pub(crate) fn is_dead_state(state: u8) -> bool {
    state == b'Z' || state == b'X'
}

/// The identity of `pid` with everything that tells it apart from a later
/// process at the same pid: start time, pidfs inode and boot. For the
/// processes we start and record; a scan uses the cheaper `identify`.
pub fn identify_exactly(pid: u32) -> Option<ProcessIdentity> {
    // The pidfd is opened first: if the pid is reused before the stat read,
    // the stat describes the newcomer and the inode the old process, and the
    // pair can never match a live process again (refused, never mistaken).
    let inode = pidfd::open(pid).and_then(|fd| pidfd::inode(&fd));
    let mut identity = identify(pid)?;
    identity.pidfs_ino = inode;
    identity.boot = pidfd::boot_tag();
    Some(identity)
}

/// Whether `pid`'s standard input is a terminal; `None` where that cannot be
/// told (another platform, or its descriptors are not ours to read).
pub fn stdin_is_terminal(pid: u32) -> Option<bool> {
    if cfg!(target_os = "linux") {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/0")).ok()?;
        let target = target.to_string_lossy();
        Some(target.starts_with("/dev/pts/") || target.starts_with("/dev/tty") || target == "/dev/console")
    } else {
        None
    }
}

/// This process's ancestors, nearest first, up to `limit` of them and never
/// pid 1 or 0 (init, or gone): who started us, by pid and start time.
pub fn ancestors(limit: usize) -> Vec<ProcessIdentity> {
    let mut found = Vec::new();
    let mut pid = parent_of(std::process::id());
    while pid > 1 && found.len() < limit {
        // One read a process (a start walks this when no variable names its session).
        let Some((identity, parent)) = identify_with_parent(pid) else { break };
        found.push(identity);
        pid = parent;
    }
    found
}

/// Whether `who` was recorded in an earlier boot, so nothing of it can run now.
fn from_earlier_boot(who: &ProcessIdentity) -> bool {
    who.boot.zip(pidfd::boot_tag()).is_some_and(|(then, now)| then != now)
}

/// True when a live (non-zombie) process at `who.pid` is the very process we
/// recorded: the same pidfs inode and boot where the record has them (which
/// prove it: no start time is read then), else the same start time; neither
/// a pid reused within one clock tick nor one reused after a reboot passes
/// for it.
pub fn is_same_process_alive(who: &ProcessIdentity) -> bool {
    if from_earlier_boot(who) {
        return false;
    }
    match who.pidfs_ino.map(|_| pidfd::open_checked(who.pid)) {
        // No process at all at that pid (a zombie still has a pidfd): gone,
        // without reading its stat. Kills wait on thousands of these.
        Some(Err(e)) if e.raw_os_error() == Some(NO_SUCH_PROCESS) => false,
        Some(Ok(fd)) => is_pinned_process_alive(who, &fd),
        _ => identify(who.pid).is_some_and(|now| now.start_ticks == who.start_ticks),
    }
}

/// ESRCH, which `pidfd::open_checked` gives for a pid no process has.
#[cfg(unix)]
const NO_SUCH_PROCESS: i32 = libc::ESRCH;
#[cfg(not(unix))]
const NO_SUCH_PROCESS: i32 = -1;

/// `is_same_process_alive` for a process pinned by `fd`, a pidfd opened
/// for `who.pid`: its pidfs inode is the recorded one and it has not
/// exited; where the inode cannot tell (`pidfd::identifies`), the stat read
/// after opening it has the recorded start time.
fn is_pinned_process_alive(who: &ProcessIdentity, fd: &crate::os::sys::PinnedProcess) -> bool {
    match pidfd::identifies(who, fd) {
        Some(false) => false,
        // The very process: alive until its pidfd says it exited.
        Some(true) => !pidfd::has_exited(fd),
        None => identify(who.pid).is_some_and(|now| now.start_ticks == who.start_ticks),
    }
}

/// A live process as seen in one pass over /proc.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessEntry {
    pub identity: ProcessIdentity,
    pub ppid: u32,
    pub pgid: u32,
    /// argv joined with spaces (the name in brackets for kernel threads).
    pub command: String,
    /// The job id from `PROC_MANAGER_JOB`, when the environment was read and carries one.
    pub cookie: Option<String>,
    pub rss_kb: u64,
}

/// A live process as one pass over the process table sees it, before its
/// command line is read (that is done only for the processes kept).
#[derive(Debug, Clone)]
pub struct Row {
    pub identity: ProcessIdentity,
    pub ppid: u32,
    pub pgid: u32,
    /// The job id from `PROC_MANAGER_JOB`, when the environment was read and carries one.
    pub cookie: Option<String>,
    /// The value of `PROC_MANAGER_SUPERVISOR`: for a supervisor, the id of
    /// the job it supervises (`tree::TableIndex::live_supervisor`).
    pub mark: Option<String>,
    pub rss_kb: u64,
}

impl Row {
    /// Carries `PROC_MANAGER_SUPERVISOR`: a supervisor or one of proc-manager's
    /// helpers (notifier, announcer), never a job's own process.
    pub fn is_helper(&self) -> bool {
        self.mark.is_some()
    }

    pub fn entry(&self) -> ProcessEntry {
        ProcessEntry {
            identity: self.identity,
            ppid: self.ppid,
            pgid: self.pgid,
            command: command_line(self.identity.pid),
            cookie: self.cookie.clone(),
            rss_kb: self.rss_kb,
        }
    }
}

/// The live processes `wanted` keeps, judged from (pid, pgid, cookie), with
/// their command lines.
pub fn scan(mut wanted: impl FnMut(u32, u32, Option<&str>) -> bool) -> Vec<ProcessEntry> {
    table()
        .iter()
        .filter(|r| wanted(r.identity.pid, r.pgid, r.cookie.as_deref()))
        .map(Row::entry)
        .collect()
}

pub use crate::os::sys::{children_peak_rss_kb, euid, pid_alive};

/// How many live processes carry each job's cookie, in one pass.
pub fn live_process_counts() -> std::collections::HashMap<String, usize> {
    let mut counts = std::collections::HashMap::new();
    for id in table().into_iter().filter_map(|r| r.cookie) {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// Blocks until the process ends or `limit` passes. On Linux it sleeps on a
/// pidfd (no polling); elsewhere it checks every 100 ms.
pub fn wait_for_exit(who: &ProcessIdentity, limit: Duration) {
    if from_earlier_boot(who) {
        return;
    }
    if let Some(fd) = pidfd::open(who.pid) {
        // Checked through the pidfd waited on: one pidfd, not two.
        if is_pinned_process_alive(who, &fd) {
            pidfd::wait_readable(&fd, limit);
        }
        return;
    }
    let deadline = std::time::Instant::now() + limit;
    while is_same_process_alive(who) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalOutcome {
    Sent,
    /// Nothing lives at that pid any more (or only a zombie).
    Gone,
    /// Another process now has that pid: refused, nothing was sent.
    Replaced,
    Failed(String),
}

/// Why signalling `pid` must never happen, whatever a record says: pid 0 and
/// negative pids address groups (`kill(-1)` is every process we may signal),
/// pid 1 is init, and the caller's own process, group and session are not a
/// job's (every job runs in a session of its own supervisor's making).
pub fn forbidden_target(pid: u32) -> Option<String> {
    if pid <= 1 || pid > i32::MAX as u32 {
        return Some(format!("pid {pid} is never a job's process (0 and 1 are the kernel's and init's)"));
    }
    let own = OwnIds::get();
    if pid == own.pid {
        return Some(format!("pid {pid} is this process itself"));
    }
    if pid == own.group || pid == own.session {
        return Some(format!("pid {pid} leads this process's own process group or session"));
    }
    None
}

/// This process's pid, process group and session: what no signal of ours
/// may reach (`forbidden_target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnIds {
    pub pid: u32,
    pub group: u32,
    pub session: u32,
}

thread_local! {
    /// Set by `OwnIds::fixed_while` for the calls it makes on this thread.
    static OWN_IDS: std::cell::Cell<Option<OwnIds>> = const { std::cell::Cell::new(None) };
}

impl OwnIds {
    /// Asked of the system now, unless `fixed_while` runs on this thread.
    pub fn get() -> OwnIds {
        OWN_IDS.with(std::cell::Cell::get).unwrap_or_else(OwnIds::now)
    }

    fn now() -> OwnIds {
        let (group, session) = crate::os::sys::own_group_and_session();
        OwnIds { pid: std::process::id(), group, session }
    }

    /// Runs `work` with our ids asked once, not three system calls at every
    /// signal: a kill of 1,000 jobs checked them some 5,000 times. Only for
    /// work that never changes this process's group or session (no setsid,
    /// no setpgid of our own: the forks that do so change their own, in the
    /// child). Threads `work` spawns ask the system as before.
    pub fn fixed_while<T>(work: impl FnOnce() -> T) -> T {
        struct Restore(Option<OwnIds>);
        impl Drop for Restore {
            fn drop(&mut self) {
                OWN_IDS.with(|ids| ids.set(self.0));
            }
        }
        let _restore = Restore(OWN_IDS.with(|ids| ids.replace(Some(OwnIds::now()))));
        work()
    }
}

/// Sends `signal` to the process group `pgid`, refusing the groups a forged or
/// stale record could turn into a disaster: `killpg(1)` is `kill(-1)`, every
/// process the caller may signal, and the caller's own group and session.
pub fn signal_group(pgid: u32, signal: i32) -> SignalOutcome {
    if let Some(why) = forbidden_target(pgid) {
        return SignalOutcome::Failed(format!("refused to signal process group {pgid}: {why}"));
    }
    crate::os::sys::signal_group_unchecked(pgid, signal)
}

/// Signals the recorded process and nothing else. On Linux a pidfd is opened
/// first and the process checked after (its pidfs inode, else its start
/// time), so the pid cannot be reused between the check and the signal.
pub fn signal_process(who: &ProcessIdentity, signal: i32) -> SignalOutcome {
    if let Some(why) = forbidden_target(who.pid) {
        return SignalOutcome::Failed(format!("refused: {why}"));
    }
    if from_earlier_boot(who) {
        return SignalOutcome::Gone;
    }
    if let Some(outcome) = platform::signal_pinned(who, signal) {
        return outcome;
    }
    // No pidfd (macOS, an old kernel): check, then signal; the remaining race is tiny.
    match identify(who.pid) {
        None => SignalOutcome::Gone,
        Some(now) if now.start_ticks != who.start_ticks => SignalOutcome::Replaced,
        Some(_) => crate::os::sys::signal_unchecked(who.pid, signal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::protocol::JOB_COOKIE;

    #[test]
    fn identifies_self_and_refuses_wrong_start_time() {
        let me = identify(std::process::id()).expect("own process is visible");
        assert!(is_same_process_alive(&me));
        let impostor = ProcessIdentity::from_stat(me.pid, me.start_ticks + 1);
        assert!(!is_same_process_alive(&impostor));
    }

    /// With pidfs (Linux 6.9+) a recorded process is told apart by its
    /// inode alone (a start time it does not have changes nothing): alive
    /// while it runs, gone once it is a zombie, and another process's inode
    /// at its pid is refused, never signalled.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_recorded_with_its_pidfs_inode_is_told_apart_by_it() {
        let mut first = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut second = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let recorded = identify_exactly(first.id()).unwrap();
        let other = identify_exactly(second.id()).unwrap();
        if recorded.pidfs_ino.is_none() || recorded.boot.is_none() {
            eprintln!("skipped: pidfds here are not on pidfs (Linux before 6.9), or the boot id cannot be read");
            for child in [&mut first, &mut second] {
                let _ = child.kill();
                let _ = child.wait();
            }
            return;
        }
        assert!(is_same_process_alive(&recorded));
        // The inode proves it: no start time is read (a stat per look was
        // the cost), so a record's start time cannot refuse it.
        let other_start = ProcessIdentity { start_ticks: recorded.start_ticks + 1, ..recorded };
        assert!(is_same_process_alive(&other_start), "told apart by its inode alone");
        // The same inode without the boot it was recorded in proves nothing:
        // the start time decides again.
        let bootless = ProcessIdentity { boot: None, ..other_start };
        assert!(!is_same_process_alive(&bootless), "without its boot, the start time decides");
        // The second's pid with the first's inode: a reused pid, as far as a record can tell.
        let forged = ProcessIdentity { pidfs_ino: recorded.pidfs_ino, ..other };
        assert!(!is_same_process_alive(&forged));
        assert_eq!(signal_process(&forged, libc::SIGKILL), SignalOutcome::Replaced);
        assert!(is_same_process_alive(&other), "a refused signal is not sent");
        assert_eq!(signal_process(&recorded, libc::SIGKILL), SignalOutcome::Sent);
        // Not reaped: a zombie, which is gone for every question asked.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while is_same_process_alive(&recorded) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!is_same_process_alive(&recorded), "a zombie is not alive");
        assert_eq!(signal_process(&recorded, libc::SIGTERM), SignalOutcome::Gone);
        first.wait().unwrap();
        second.kill().unwrap();
        second.wait().unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn signal_refuses_a_reused_pid_and_reaches_the_right_one() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let real = identify(child.id()).unwrap();
        let stale = ProcessIdentity::from_stat(real.pid, real.start_ticks.wrapping_sub(1));
        assert_eq!(signal_process(&stale, libc::SIGKILL), SignalOutcome::Replaced);
        assert!(is_same_process_alive(&real), "a refused signal is not sent");
        assert_eq!(signal_process(&real, libc::SIGKILL), SignalOutcome::Sent);
        child.wait().unwrap();
        assert_eq!(signal_process(&real, libc::SIGKILL), SignalOutcome::Gone);
    }

    #[cfg(unix)]
    #[test]
    fn never_signals_init_the_caller_or_its_group_and_session() {
        // Signal 0 sends nothing even where it would be allowed: this checks
        // the refusal without any risk.
        // SAFETY: getpgrp and getsid take integers only and cannot fail for
        // the calling process.
        let (group, session) = unsafe { (libc::getpgrp(), libc::getsid(0)) };
        for pgid in [0, 1, group as u32, session as u32] {
            assert!(matches!(signal_group(pgid, 0), SignalOutcome::Failed(_)), "group {pgid} refused");
        }
        let me = identify(std::process::id()).unwrap();
        let init = ProcessIdentity::from_stat(1, identify(1).map_or(0, |p| p.start_ticks));
        for who in [me, init, ProcessIdentity::from_stat(0, 0), ProcessIdentity::from_stat(u32::MAX, 0)] {
            assert!(matches!(signal_process(&who, 0), SignalOutcome::Failed(_)), "pid {} refused", who.pid);
        }
    }

    #[test]
    fn finds_a_child_by_cookie_with_its_command() {
        let cookie = format!("test-{}", std::process::id());
        // A program that waits, on each system.
        let (program, args): (&str, &[&str]) = if cfg!(windows) { ("ping", &["-n", "30", "127.0.0.1"]) } else { ("sleep", &["30"]) };
        let mut child = std::process::Command::new(program)
            .args(args)
            .env(JOB_COOKIE, &cookie)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = Vec::new();
        while std::time::Instant::now() < deadline {
            found = scan(|_, _, c| c == Some(cookie.as_str()));
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].identity.pid, child.id());
        // Under wine a process's command line cannot be read: its name stands in.
        assert!(found[0].command.contains(program) && (cfg!(windows) || found[0].command.ends_with(&args.join(" "))), "{}", found[0].command);
        assert_eq!(found[0].cookie.as_deref(), Some(cookie.as_str()));
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let kthreadd = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 18446744073709551615 0";
        let stat = parse_stat(kthreadd).unwrap();
        assert!(stat.is_kernel_thread());
        assert_eq!((stat.ppid, stat.start_ticks, stat.rss_pages), (0, 25, 0));
        let odd_name = b"27242 (a) b (c) R 27239 27240 17252 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 1165548 3133440 383 1";
        let stat = parse_stat(odd_name).unwrap();
        assert!(!stat.is_kernel_thread());
        assert_eq!((stat.state, stat.ppid, stat.pgrp), (b'R', 27239, 27240));
        assert_eq!((stat.start_ticks, stat.rss_pages), (1165548, 383));
        assert_eq!(stat_comm(odd_name), "a) b (c");
        let busy = b"31 (busy) R 1 31 31 0 -1 4194304 10 0 0 0 700 42 0 0 20 0 1 0 5000 3133440 383 1";
        let stat = parse_stat(busy).unwrap();
        assert_eq!((stat.cpu_ticks, stat.start_ticks, stat.rss_pages), (742, 5000, 383), "utime + stime, then the fields after");
    }
}
