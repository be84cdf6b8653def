//! macOS's ways (and any Unix without `/proc`) to what `os` needs: the
//! process table from sysinfo, the process group from getpgid; no pidfds,
//! `pipe` plus `fcntl`, `sigwait`. `linux.rs` has the same functions.
//!
//! A process's start time here has a resolution of one second, so the
//! identity check tells apart any pid reuse but one within that second.

use crate::model::job::ProcessIdentity;
use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use crate::os::procinfo::{Row, SignalOutcome};
use std::os::fd::{BorrowedFd, OwnedFd};
use sysinfo::{Process, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};

pub enum Reads {
    Basic,
    Command,
    Environment,
}

fn refresh_kind(reads: Reads) -> ProcessRefreshKind {
    match reads {
        Reads::Basic => ProcessRefreshKind::nothing(),
        Reads::Command => ProcessRefreshKind::nothing().with_cmd(UpdateKind::Always),
        Reads::Environment => ProcessRefreshKind::nothing().with_environ(UpdateKind::Always),
    }
}

fn with_process<T>(pid: u32, reads: Reads, f: impl FnOnce(&Process) -> T) -> Option<T> {
    let mut system = System::new().ok()?;
    let target = sysinfo::Pid::from_u32(pid);
    system.refresh_processes_specifics(ProcessesToUpdate::Some(&[target]), true, refresh_kind(reads));
    system.process(target).map(f)
}

fn identity_of(pid: u32, p: &Process) -> Option<ProcessIdentity> {
    (p.status() != ProcessStatus::Zombie).then_some(ProcessIdentity::from_stat(pid, p.start_time()))
}

fn env_value(p: &Process, key: &str) -> Option<String> {
    p.environ().iter().find_map(|entry| {
        let entry = entry.to_string_lossy();
        entry.strip_prefix(key)?.strip_prefix('=').map(str::to_string)
    })
}

/// argv joined with spaces, or the name in brackets when there is none.
pub fn command(p: &Process) -> String {
    if p.cmd().is_empty() {
        format!("[{}]", p.name().to_string_lossy())
    } else {
        p.cmd().iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }
}

fn all_processes() -> Option<System> {
    let mut system = System::new().ok()?;
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_memory().with_cmd(UpdateKind::Always).with_environ(UpdateKind::Always),
    );
    Some(system)
}

pub fn identify(pid: u32) -> Option<ProcessIdentity> {
    with_process(pid, Reads::Basic, |p| identity_of(pid, p)).flatten()
}

/// No cheap way to ask: a stopped process is treated as running.
pub fn is_stopped(_pid: u32) -> bool {
    false
}

pub fn live_children(pid: u32) -> Vec<u32> {
    let Some(system) = all_processes() else { return Vec::new() };
    system
        .processes()
        .values()
        .filter(|p| p.parent().map(|pp| pp.as_u32()) == Some(pid) && p.status() != ProcessStatus::Zombie)
        .map(|p| p.pid().as_u32())
        .collect()
}

pub fn environ_value(pid: u32, key: &str) -> Option<String> {
    with_process(pid, Reads::Environment, |p| env_value(p, key)).flatten()
}

pub fn command_line(pid: u32) -> String {
    with_process(pid, Reads::Command, command).unwrap_or_default()
}

pub fn table() -> Vec<Row> {
    let me = std::process::id();
    let Some(system) = all_processes() else { return Vec::new() };
    let mut rows = Vec::new();
    for p in system.processes().values() {
        let pid = p.pid().as_u32();
        let Some(identity) = identity_of(pid, p).filter(|_| pid != me) else { continue };
        // SAFETY: getpgid takes an integer and touches no memory of ours.
        let pgid = unsafe { libc::getpgid(pid as libc::pid_t) };
        if pgid < 0 {
            continue; // gone meanwhile
        }
        rows.push(Row {
            identity,
            ppid: p.parent().map_or(0, |pp| pp.as_u32()),
            pgid: pgid as u32,
            cookie: env_value(p, JOB_COOKIE),
            helper: env_value(p, SUPERVISOR_MARK).is_some(),
            rss_kb: p.memory() / 1024,
        });
    }
    rows
}

/// `table`'s rows for these pids only: here from the whole table.
pub fn rows(pids: &[u32]) -> Vec<Row> {
    let wanted: std::collections::HashSet<u32> = pids.iter().copied().collect();
    let me = std::process::id();
    let mut found: Vec<Row> = table().into_iter().filter(|r| wanted.contains(&r.identity.pid)).collect();
    // The table leaves the caller out; `rows` does not.
    if wanted.contains(&me) {
        if let Some(identity) = identify(me) {
            // SAFETY: getpgrp reads the caller's own id and cannot fail.
            let pgid = unsafe { libc::getpgrp() } as u32;
            let helper = std::env::var_os(SUPERVISOR_MARK).is_some();
            let cookie = std::env::var(JOB_COOKIE).ok();
            found.push(Row { identity, ppid: std::os::unix::process::parent_id(), pgid, cookie, helper, rss_kb: 0 });
        }
    }
    found
}

/// Nothing to set here: the system allocator maps large blocks on its own.
pub fn keep_large_blocks_mapped() {}

/// Nothing to give back here: the system allocator returns freed memory itself.
pub fn release_free_heap() {}

/// The code pages stay resident here (no smaps to tell which are the file's).
pub fn release_code_pages() {}

/// No pidfds here: the caller checks the identity, then signals.
pub fn signal_pinned(_who: &ProcessIdentity, _signal: i32) -> Option<SignalOutcome> {
    None
}

pub fn pidfd_open(_pid: u32) -> std::io::Result<OwnedFd> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

pub fn pidfd_inode(_fd: &OwnedFd) -> Option<u64> {
    None
}

/// No memory file to show an unrecorded end through here: readers see the
/// job running until its supervisor can write the end.
pub fn publish_unrecorded(_bytes: &[u8]) -> std::io::Result<Option<OwnedFd>> {
    Ok(None)
}

pub fn read_unrecorded(_pid: u32) -> Option<Vec<u8>> {
    None
}

/// A pipe, both ends close-on-exec, with `flags` (`O_NONBLOCK`) on both
/// (macOS has no pipe2: set one flag after the other).
pub fn pipe(flags: libc::c_int) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let pair = rustix::pipe::pipe()?;
    for fd in [&pair.0, &pair.1] {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC)?;
        if flags & libc::O_NONBLOCK != 0 {
            rustix::fs::fcntl_setfl(fd, rustix::fs::OFlags::NONBLOCK)?;
        }
    }
    Ok(pair)
}

/// Takes a SIGPIPE pending for this thread, if one is, without waiting
/// (there is no sigtimedwait here: sigwait only when sigpending shows one).
///
/// # Safety
/// `pipe_only` holds SIGPIPE alone, and SIGPIPE is blocked in this thread.
pub unsafe fn discard_pending_sigpipe(pipe_only: &libc::sigset_t) {
    let mut pending: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut pending);
    if libc::sigpending(&mut pending) == 0 && libc::sigismember(&pending, libc::SIGPIPE) == 1 {
        let mut taken = 0;
        libc::sigwait(pipe_only, &mut taken);
    }
}

/// Makes a FIFO at `path`, readable and writable by its owner only (rustix
/// has no mkfifo for Apple targets).
pub fn make_fifo(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: `name` is a NUL-terminated path that lives across the call.
    if unsafe { libc::mkfifo(name.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What `DirWatcher::drain` read.
pub struct Drained {
    pub new_dirs: Vec<std::ffi::OsString>,
    pub records_changed: bool,
}

/// No inotify here: `supervise::end_watch` looks again on a timer instead.
pub struct DirWatcher;

impl DirWatcher {
    pub fn new() -> std::io::Result<DirWatcher> {
        Ok(DirWatcher)
    }

    /// None: nothing to poll; the caller looks again on a timer.
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    pub fn watch(&self, _dir: &std::path::Path) {}

    /// Nothing is known, so the records may have changed; new job
    /// directories are found by the caller's scan of the registry.
    pub fn drain(&self) -> Drained {
        Drained { new_dirs: Vec::new(), records_changed: true }
    }
}

/// No user namespaces here: every owner is who it shows as.
pub fn foreign_owner_uid() -> Option<u32> {
    None
}

/// `getrusage`'s `ru_maxrss` in KiB: macOS reports bytes.
pub fn max_rss_kb(max_rss: u64) -> u64 {
    max_rss / 1024
}

/// No child subreapers here: orphans go to launchd, and the job is still
/// killed by its group.
pub fn become_subreaper() -> rustix::io::Result<()> {
    Ok(())
}

/// No `splice(2)` here: the job's output is read and written.
pub fn can_splice() -> bool {
    false
}

/// No `splice(2)` here (see `can_splice`).
pub fn splice_pipes(_from: BorrowedFd<'_>, _to: BorrowedFd<'_>, _len: usize) -> rustix::io::Result<usize> {
    Err(rustix::io::Errno::NOSYS)
}

/// No `splice(2)` here (see `can_splice`).
pub fn splice_to_file(_pipe: BorrowedFd<'_>, _file: BorrowedFd<'_>, _len: usize) -> std::io::Result<usize> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// A pipe's size cannot be read here.
pub fn pipe_size(_fd: BorrowedFd<'_>) -> rustix::io::Result<usize> {
    Err(rustix::io::Errno::NOSYS)
}

/// A pipe keeps its size here; nothing to report.
pub fn set_pipe_size(_fd: BorrowedFd<'_>, _bytes: usize) -> rustix::io::Result<()> {
    Ok(())
}

/// No /proc to reopen a descriptor through.
pub fn reopen_read_write(_fd: &OwnedFd) -> Option<OwnedFd> {
    None
}

/// No `getrandom(2)` here: nothing filled, the caller reads /dev/urandom.
pub fn fill_random(_buf: &mut [u8]) -> std::io::Result<usize> {
    Ok(0)
}

/// The pid holding a flock on `path`: unknown here (no /proc/locks).
pub fn flock_holder(_path: &std::path::Path) -> Option<u32> {
    None
}
