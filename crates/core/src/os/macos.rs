//! macOS's ways to what `os` needs: the process table from libproc
//! (`proc_listallpids`, `proc_pidinfo`) and `sysctl(KERN_PROCARGS2)` for
//! argv and the environment, all in libSystem (no framework); no pidfds,
//! `pipe` plus `fcntl`, `sigwait`. `linux.rs` has the same functions.
//!
//! A process's start time is the kernel's `p_start` (`pbi_start_tvsec` and
//! `pbi_start_tvusec`), set once at fork: as microseconds since the epoch
//! it is the identity's `start_ticks`, so the identity check tells apart
//! any pid reuse but one within the same microsecond.
//!
//! The BSD and task facts of a process whose effective user is another
//! (a setuid program's included) are the kernel's to refuse, root
//! excepted: such a process is not in `table` and `identify` finds none
//! (signalling it would fail anyway, and a job's group kill still reaches
//! it); a snapshot lists it by name (`PROC_PIDT_SHORTBSDINFO`, open to all).

use crate::model::job::ProcessIdentity;
use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use crate::os::procargs::ProcArgs;
use crate::os::procinfo::{Row, SignalOutcome};
use std::ffi::{c_int, c_void};
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::OnceLock;

/// One `proc_pidinfo` flavour read into a `T`, or the errno it failed
/// with (ESRCH: gone; EPERM: another user's).
fn pid_info<T: Copy>(pid: u32, flavor: c_int) -> Result<T, i32> {
    let pid = c_int::try_from(pid).map_err(|_| libc::ESRCH)?;
    let size = size_of::<T>() as c_int;
    let mut info = MaybeUninit::<T>::zeroed();
    // SAFETY: the buffer is a `T`, `size` bytes, writable and alive across
    // the call; the kernel writes at most `buffersize` bytes into it.
    let n = unsafe { libc::proc_pidinfo(pid, flavor, 0, info.as_mut_ptr().cast::<c_void>(), size) };
    if n != size {
        return Err(std::io::Error::last_os_error().raw_os_error().filter(|&e| e != 0).unwrap_or(libc::ESRCH));
    }
    // SAFETY: T is one of libproc's info structs, plain integers and
    // arrays of them, for which every bit pattern (zeroes first, then
    // what the kernel wrote) is a value.
    Ok(unsafe { info.assume_init() })
}

/// `PROC_PIDTBSDINFO`, for a live process (a zombie counts as gone).
pub(crate) fn bsd_info(pid: u32) -> Result<libc::proc_bsdinfo, i32> {
    match pid_info::<libc::proc_bsdinfo>(pid, libc::PROC_PIDTBSDINFO)? {
        info if info.pbi_status == libc::SZOMB => Err(libc::ESRCH),
        info => Ok(info),
    }
}

/// `PROC_PIDT_SHORTBSDINFO`: parent, group, state and name; any user's.
pub(crate) fn short_info(pid: u32) -> Option<libc::proc_bsdshortinfo> {
    pid_info::<libc::proc_bsdshortinfo>(pid, libc::PROC_PIDT_SHORTBSDINFO).ok().filter(|info| info.pbsi_status != libc::SZOMB)
}

/// Resident memory in bytes (`PROC_PIDTASKINFO`).
pub(crate) fn resident_bytes(pid: u32) -> Option<u64> {
    pid_info::<libc::proc_taskinfo>(pid, libc::PROC_PIDTASKINFO).ok().map(|task| task.pti_resident_size)
}

/// Microseconds since the epoch: the identity's `start_ticks` here.
pub(crate) fn start_micros(info: &libc::proc_bsdinfo) -> u64 {
    info.pbi_start_tvsec.saturating_mul(1_000_000).saturating_add(info.pbi_start_tvusec)
}

/// A NUL-padded `char` array (pbi_comm, pbi_name) as text.
pub(crate) fn c_name(name: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = name.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The process's name: the long one where it has one, else `comm`.
pub(crate) fn name_of(info: &libc::proc_bsdinfo) -> String {
    let name = c_name(&info.pbi_name);
    if name.is_empty() {
        c_name(&info.pbi_comm)
    } else {
        name
    }
}

fn identity_of(pid: u32, info: &libc::proc_bsdinfo) -> ProcessIdentity {
    ProcessIdentity::from_stat(pid, start_micros(info))
}

/// The pids a `proc_list*pids` call fills in (`list(buffer, bytes)`
/// returns how many it wrote, or -1), the buffer grown while it comes back
/// full. pid 0 (the kernel) is left out, as /proc has none.
fn list_pids(list: impl Fn(*mut c_void, c_int) -> c_int) -> Vec<u32> {
    // A null buffer asks for the count (the kernel adds 20 for slack).
    let mut capacity = usize::try_from(list(std::ptr::null_mut(), 0)).unwrap_or(0).max(64);
    for _ in 0..4 {
        let mut pids = vec![0 as c_int; capacity];
        let Ok(bytes) = c_int::try_from(capacity * size_of::<c_int>()) else { break };
        let Ok(n) = usize::try_from(list(pids.as_mut_ptr().cast::<c_void>(), bytes)) else { break };
        if n < capacity {
            pids.truncate(n);
            return pids.into_iter().filter_map(|pid| u32::try_from(pid).ok()).filter(|&pid| pid != 0).collect();
        }
        capacity *= 2;
    }
    Vec::new()
}

/// Every pid in the system.
pub(crate) fn all_pids() -> Vec<u32> {
    list_pids(|buffer, bytes| {
        // SAFETY: `buffer` is null with `bytes` 0 (a count only), or
        // `list_pids`'s vector of `bytes` bytes, writable across the call.
        unsafe { libc::proc_listallpids(buffer, bytes) }
    })
}

/// The file name of the executable (`proc_pidpath`, any user's process).
pub(crate) fn executable_name(pid: u32) -> Option<String> {
    let pid = c_int::try_from(pid).ok()?;
    let mut path = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    // SAFETY: `path` is a buffer of the size passed, writable across the
    // call; proc_pidpath writes at most that many bytes.
    let n = unsafe { libc::proc_pidpath(pid, path.as_mut_ptr().cast::<c_void>(), path.len() as u32) };
    path.truncate(usize::try_from(n).ok()?);
    let name = path.rsplit(|&b| b == b'/').next().filter(|n| !n.is_empty())?;
    Some(String::from_utf8_lossy(name).into_owned())
}

/// The longest `KERN_PROCARGS2` block (`kern.argmax`), read once.
fn arg_max() -> usize {
    static ARG_MAX: OnceLock<usize> = OnceLock::new();
    *ARG_MAX.get_or_init(|| {
        let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
        let mut value: c_int = 0;
        let mut size = size_of::<c_int>();
        // SAFETY: `mib` names two levels and lives across the call; the
        // result goes into `value`, whose size `size` gives; nothing is set.
        let ok = unsafe { libc::sysctl(mib.as_mut_ptr(), 2, (&raw mut value).cast::<c_void>(), &mut size, std::ptr::null_mut(), 0) } == 0;
        // 1 MiB is macOS's own value; a larger one is bounded.
        if ok && value > 0 { (value as usize).min(16 << 20) } else { 1 << 20 }
    })
}

/// Reads `pid`'s `KERN_PROCARGS2` block into `buf` (another user's, or a
/// zombie's, cannot be read: false).
pub(crate) fn read_procargs(pid: u32, buf: &mut Vec<u8>) -> bool {
    let Ok(pid) = c_int::try_from(pid) else { return false };
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    buf.clear();
    buf.reserve(arg_max());
    let mut size = buf.capacity();
    // SAFETY: `mib` names three levels and lives across the call; the
    // destination is the vector's capacity, `size` bytes, and sysctl sets
    // `size` to what it wrote, never more than it was given.
    let ok = unsafe { libc::sysctl(mib.as_mut_ptr(), 3, buf.as_mut_ptr().cast::<c_void>(), &mut size, std::ptr::null_mut(), 0) } == 0;
    if !ok {
        return false;
    }
    // SAFETY: sysctl initialised the first `size` (<= capacity) bytes.
    unsafe { buf.set_len(size.min(buf.capacity())) };
    true
}

/// argv joined with spaces, else `[name]` (a process whose arguments
/// cannot be read: another user's), else "" (gone).
fn command_from(pid: u32, buf: &mut Vec<u8>) -> String {
    if read_procargs(pid, buf) {
        if let Some(command) = ProcArgs::parse(buf).and_then(|args| args.command()) {
            return command;
        }
    }
    short_info(pid).map_or_else(String::new, |info| format!("[{}]", c_name(&info.pbsi_comm)))
}

pub fn identify(pid: u32) -> Option<ProcessIdentity> {
    bsd_info(pid).ok().map(|info| identity_of(pid, &info))
}

/// `pid`'s identity and its parent's pid, from one `PROC_PIDTBSDINFO`.
pub fn identify_with_parent(pid: u32) -> Option<(ProcessIdentity, u32)> {
    bsd_info(pid).ok().map(|info| (identity_of(pid, &info), info.pbi_ppid))
}

/// The parent pid the kernel records for `pid` (0 when gone).
pub fn parent_of(pid: u32) -> u32 {
    short_info(pid).map_or(0, |info| info.pbsi_ppid)
}

pub fn is_stopped(pid: u32) -> bool {
    bsd_info(pid).is_ok_and(|info| info.pbi_status == libc::SSTOP)
}

pub fn live_children(pid: u32) -> Vec<u32> {
    let Ok(parent) = c_int::try_from(pid) else { return Vec::new() };
    list_pids(|buffer, bytes| {
        // SAFETY: `buffer` is null with `bytes` 0 (a count only), or
        // `list_pids`'s vector of `bytes` bytes, writable across the call.
        unsafe { libc::proc_listchildpids(parent, buffer, bytes) }
    })
    .into_iter()
    .filter(|&child| bsd_info(child).is_ok_and(|info| info.pbi_ppid == pid))
    .collect()
}

pub fn environ_value(pid: u32, key: &str) -> Option<String> {
    let mut buf = Vec::new();
    read_procargs(pid, &mut buf).then(|| ProcArgs::parse(&buf)?.env_value(key))?
}

pub fn command_line(pid: u32) -> String {
    command_from(pid, &mut Vec::new())
}

pub fn table() -> Vec<Row> {
    let me = std::process::id();
    let mut buf = Vec::new();
    all_pids().into_iter().filter(|&pid| pid != me).filter_map(|pid| row(pid, &mut buf)).collect()
}

/// `table`'s rows for these pids only (those alive; the caller's own too).
pub fn rows(pids: &[u32]) -> Vec<Row> {
    let mut buf = Vec::new();
    pids.iter().filter_map(|&pid| row(pid, &mut buf)).collect()
}

fn row(pid: u32, buf: &mut Vec<u8>) -> Option<Row> {
    let info = bsd_info(pid).ok()?;
    // Only this user's processes have a readable environment.
    let args = if read_procargs(pid, buf) { ProcArgs::parse(buf) } else { None };
    let mark = args.as_ref().and_then(|a| a.env_value(SUPERVISOR_MARK));
    Some(Row {
        identity: identity_of(pid, &info),
        ppid: info.pbi_ppid,
        pgid: info.pbi_pgid,
        cookie: args.as_ref().and_then(|a| a.env_value(JOB_COOKIE)),
        mark,
        rss_kb: resident_bytes(pid).unwrap_or(0) / 1024,
    })
}

/// Not read here: libproc's task times come in Mach time units whose
/// conversion differs by CPU; `list` and `top` show no CPU % on macOS.
pub fn cpu_times(_pids: &[u32]) -> std::collections::HashMap<u32, crate::os::procinfo::CpuTime> {
    std::collections::HashMap::new()
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

/// Never made here (`publish_unrecorded`).
pub type UnrecordedShown = OwnedFd;

/// No memory file to show an unrecorded end through here: readers see the
/// job running until its supervisor can write the end.
pub fn publish_unrecorded(_bytes: &[u8]) -> std::io::Result<Option<UnrecordedShown>> {
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

pub use crate::os::timed_dir_watch::DirWatcher;

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

/// Linux's `boot_ticks_now`: here a kill's caller leaves the signals to
/// each supervisor, so there is no time to give.
pub fn boot_ticks_now() -> Option<u64> {
    None
}
