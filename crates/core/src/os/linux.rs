//! Linux's ways to what `os` needs: the process table from `/proc` (read by
//! hand: 1.6x faster than the `procfs` crate), pidfds that pin one process,
//! `pipe2`, `sigtimedwait`. `macos.rs` has the same functions.

use crate::model::job::ProcessIdentity;
use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use crate::os::sys::errno_outcome;
use crate::os::procinfo::{is_dead_state, parse_stat, CpuTime, Row, SignalOutcome, Stat};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// Reads a small /proc file into `buf` with one open and as few reads as it
/// takes (`std::fs::read` adds a stat and extra reads per file, which shows
/// when every process is visited). At most `limit` bytes.
pub fn read_proc_file(path: &str, buf: &mut Vec<u8>, limit: usize) -> bool {
    buf.clear();
    let Ok(c_path) = std::ffi::CString::new(path) else { return false };
    // SAFETY: `c_path` is a NUL-terminated string alive for the call; the fd
    // returned is ours and closed once below.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut ok = true;
    loop {
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(4096);
        }
        let spare = buf.capacity() - buf.len();
        // SAFETY: the destination is the vector's spare capacity, `spare`
        // bytes starting right after its length, all inside its allocation.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().add(buf.len()) as *mut libc::c_void, spare) };
        if n < 0 {
            ok = false;
            break;
        }
        if n == 0 {
            break;
        }
        // SAFETY: read(2) initialised exactly `n` (<= spare) bytes past the
        // old length, so the new length covers initialised bytes only.
        unsafe { buf.set_len(buf.len() + n as usize) };
        if buf.len() >= limit {
            buf.truncate(limit);
            break;
        }
    }
    // SAFETY: `fd` is the descriptor opened above, not closed before and
    // owned by nothing else. A close error after reads loses nothing.
    unsafe { libc::close(fd) };
    ok
}

/// Parsed from /proc/<pid>/stat.
fn read_stat(pid: u32) -> Option<Stat> {
    let mut raw = Vec::with_capacity(512);
    if !read_proc_file(&format!("/proc/{pid}/stat"), &mut raw, 4096) {
        return None;
    }
    parse_stat(&raw)
}

pub fn identify(pid: u32) -> Option<ProcessIdentity> {
    let stat = read_stat(pid)?;
    (!is_dead_state(stat.state)).then_some(ProcessIdentity::from_stat(pid, stat.start_ticks))
}

/// `pid`'s identity and its parent's pid, from one read of its stat.
pub fn identify_with_parent(pid: u32) -> Option<(ProcessIdentity, u32)> {
    let stat = read_stat(pid)?;
    (!is_dead_state(stat.state)).then_some((ProcessIdentity::from_stat(pid, stat.start_ticks), stat.ppid))
}

/// The parent pid the kernel records for `pid` (0 when gone).
pub fn parent_of(pid: u32) -> u32 {
    read_stat(pid).map_or(0, |stat| stat.ppid)
}

pub fn is_stopped(pid: u32) -> bool {
    read_stat(pid).is_some_and(|stat| matches!(stat.state, b'T' | b't'))
}

pub fn live_children(pid: u32) -> Vec<u32> {
    let mut buf = Vec::with_capacity(256);
    if !read_proc_file(&format!("/proc/{pid}/task/{pid}/children"), &mut buf, 1 << 20) {
        return Vec::new();
    }
    String::from_utf8_lossy(&buf)
        .split_ascii_whitespace()
        .filter_map(|c| c.parse().ok())
        .filter(|&c| identify(c).is_some())
        .collect()
}

/// The value of `key` in a NUL-separated environment block.
fn env_entry(environ: &[u8], key: &str) -> Option<String> {
    environ.split(|&b| b == 0).find_map(|entry| {
        let value = entry.strip_prefix(key.as_bytes())?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(value).into_owned())
    })
}

fn cookie_in(environ: &[u8]) -> Option<String> {
    env_entry(environ, JOB_COOKIE)
}

pub fn environ_value(pid: u32, key: &str) -> Option<String> {
    let mut environ = Vec::with_capacity(8192);
    read_proc_file(&format!("/proc/{pid}/environ"), &mut environ, 1 << 20).then(|| env_entry(&environ, key))?
}

pub fn command_line(pid: u32) -> String {
    if let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) {
        let trimmed = raw.strip_suffix(b"\0").unwrap_or(&raw);
        if !trimmed.is_empty() {
            return String::from_utf8_lossy(trimmed).replace('\0', " ");
        }
    }
    if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        return format!("[{}]", comm.trim_end());
    }
    String::new()
}

/// The CPU time and start of each of `pids` still alive, from its
/// /proc/<pid>/stat (10 ms resolution).
pub fn cpu_times(pids: &[u32]) -> std::collections::HashMap<u32, CpuTime> {
    // SAFETY: sysconf takes an integer name and touches no memory of ours;
    // an error (-1) is clamped to 1 below.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut raw = Vec::with_capacity(512);
    pids.iter()
        .filter_map(|&pid| {
            if !read_proc_file(&format!("/proc/{pid}/stat"), &mut raw, 4096) {
                return None;
            }
            let stat = parse_stat(&raw).filter(|stat| !stat.is_dead())?;
            let cpu_ms = stat.cpu_ticks.saturating_mul(1000) / ticks_per_second;
            Some((pid, CpuTime { cpu_ms, started_at_ms: crate::os::snapshot_platform::ticks_to_epoch_ms(stat.start_ticks) }))
        })
        .collect()
}

/// The memory page in KiB, at least 1 (a failed sysconf counts as 1 KiB pages).
pub(crate) fn page_kb() -> u64 {
    // SAFETY: sysconf takes an integer name and touches no memory of ours.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1024) as u64) / 1024
}

pub fn table() -> Vec<Row> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let pids: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|&pid| pid != me)
        .collect();
    // Two stat and environ reads a process: 0.1 s for the 4,000 processes of
    // a host running 2,000 jobs. Split over two threads when there are that
    // many and a second core to run them (`kill --all` reads the table
    // before it can ask any supervisor to stop, while the other cores idle).
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if pids.len() < TABLE_SPLIT_FROM || cores < 2 {
        return rows(&pids);
    }
    let (first, second) = pids.split_at(pids.len() / 2);
    std::thread::scope(|scope| {
        let later = scope.spawn(|| rows(second));
        let mut found = rows(first);
        found.extend(later.join().unwrap_or_else(|_| rows(second)));
        found
    })
}

/// From how many processes `table` reads on two threads.
const TABLE_SPLIT_FROM: usize = 512;

/// `table`'s rows for these pids only (those alive; the caller's own too).
pub fn rows(pids: &[u32]) -> Vec<Row> {
    let mut environ = Vec::with_capacity(8192);
    pids.iter().filter_map(|&pid| row(pid, &mut environ)).collect()
}

fn row(pid: u32, environ: &mut Vec<u8>) -> Option<Row> {
    let stat = read_stat(pid)?;
    if is_dead_state(stat.state) {
        return None;
    }
    // Only this user's processes have a readable environment.
    let readable = read_proc_file(&format!("/proc/{pid}/environ"), environ, 1 << 20);
    let mark = readable.then(|| env_entry(environ, SUPERVISOR_MARK)).flatten();
    Some(Row {
        identity: ProcessIdentity::from_stat(pid, stat.start_ticks),
        ppid: stat.ppid,
        pgid: stat.pgrp,
        cookie: readable.then(|| cookie_in(environ)).flatten(),
        mark,
        rss_kb: stat.rss_pages * page_kb(),
    })
}

/// Blocks of 128 KiB or more get mappings of their own, unmapped when freed.
/// glibc otherwise raises that threshold to the size of each such block
/// freed, and later ones come from the heap: a supervisor that had read a
/// 500 KB registry to register its job then took its 256 KiB copy buffer
/// from the freed heap and zeroed it, resident for the job's whole life
/// (the 700th to 1,000th supervisors of a home held 550 KiB PSS, not 300).
pub fn keep_large_blocks_mapped() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes the allocator's policy for later
    // allocations; it is called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Gives the heap's free memory back to the system (glibc keeps what a
/// large parse freed, for the next one): a long-lived supervisor's memory
/// then does not depend on how big a registry it once read.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free pages of the allocator's own
    // arenas to the kernel; no allocation in use is moved or touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Drops the resident pages of our executable code (the binary's and the
/// shared libraries' `r-xp` mappings): once start-up is over, and again after
/// looks for new processes (`CODE_RELEASE_GAP` apart at least). Parsing the
/// spec, spawning and writing the registry touched code the idle loop never
/// runs again; a look runs code spread over the whole binary (std's files and
/// formatting, the /proc parser, the record), and the kernel's fault-around
/// maps 64 KiB around each page touched: a look left 15 such windows
/// (920 KiB) resident for the 5 s until the next one, which made an idle
/// supervisor's VmRSS 2.1 MiB (1.4 MiB with this). Between looks only the
/// poll's few pages come back. The price is about 17 minor faults and
/// 0.4 ms of CPU per release (perf stat over 20 s of an idle supervisor:
/// 2.44 ms against 0.81 ms); looks slow to one every 5 s within 7 s of the
/// start, and the gap caps a job whose children keep ending (each end brings
/// a look) at 10 releases a second.
///
/// The read-only data mapped from the same files (`r--p`: constants, string
/// tables) goes the same way: 256 KiB of the binary's stayed resident.
///
/// Only mappings whose every resident page is still the file's are dropped
/// (`Anonymous: 0 kB` in smaps): a page of code written in this process (a
/// breakpoint, a uprobe, a preloaded library's hook, text relocations) is a
/// private copy that MADV_DONTNEED would throw away.
///
/// The main thread's stack below the frames in use now goes too: start-up
/// (the CLI's parsing, the spawn) reached about 36 KiB deep, the idle loop a
/// few KiB, and those pages stayed resident: an idle supervisor's RssAnon
/// was 248 KiB, its PSS 0.32 MiB with 10 jobs (the target is 0.3). So call
/// it on the main thread: the stack released is the one smaps calls `[stack]`.
pub fn release_code_pages() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return };
    let mut stack: Option<usize> = None;
    // The code mapping whose fields are being read: (start, end).
    let mut candidate: Option<(usize, usize)> = None;
    // Dropped only once the whole list is read: the parsing would fault
    // its code back in otherwise.
    let mut unmodified_code = Vec::with_capacity(8);
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Anonymous:") {
            if let (Some(range), "0 kB") = (candidate.take(), kb.trim()) {
                unmodified_code.push(range);
            }
            continue;
        }
        // A mapping's first line: `start-end perms offset dev inode path`.
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        let Some((start, end)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16)) else {
            continue; // a field line (`Rss:   12 kB`), not a mapping's
        };
        let path = fields.nth(3).unwrap_or("");
        if path == "[stack]" {
            stack = Some(start);
        }
        // File-backed code and read-only data ([vdso] and anonymous mappings stay).
        candidate = (matches!(perms, "r-xp" | "r--p") && path.starts_with('/')).then_some((start, end));
    }
    // The list itself (tens of KiB) was the largest thing on the heap.
    drop(smaps);
    release_free_heap();
    if let Some(lowest) = stack {
        release_stack_below_frames(lowest);
    }
    for (start, end) in unmodified_code {
        // SAFETY: the range is a whole mapping the kernel listed for this
        // process, file-backed, mapped private and not writable (r-xp, r--p),
        // with no page of it a private copy (Anonymous: 0 kB): after
        // MADV_DONTNEED every page reads back the same bytes from the
        // file, so no code or data anyone relies on changes. A failure
        // (e.g. the mapping went away) only leaves pages resident; ignored.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    }
}

/// Gives back the pages of the calling thread's stack from `lowest` (the
/// stack mapping's start) up to a margin below the frames in use now:
/// pages that deeper calls touched once stay resident otherwise.
/// Call it only on the thread whose stack starts at `lowest`.
#[inline(never)]
fn release_stack_below_frames(lowest: usize) {
    // A page under this frame: the red zone (128 bytes) and the madvise call.
    const MARGIN: usize = 4096;
    let here = 0u8;
    let in_use_from = std::hint::black_box(std::ptr::addr_of!(here)) as usize;
    // SAFETY: sysconf only reads a constant of the system.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(4096);
    let below = in_use_from.saturating_sub(MARGIN) & !(page - 1);
    if below > lowest {
        // SAFETY: [lowest, below) is the part of this thread's stack mapping
        // more than a page below the deepest frame in use (the stack grows
        // down): nothing lives there now. A signal handler runs on this
        // thread, so never during this call, and a later call or handler that
        // reaches there finds zeroed pages, as on a fresh stack. A failure
        // only leaves the pages resident.
        unsafe { libc::madvise(lowest as *mut libc::c_void, below - lowest, libc::MADV_DONTNEED) };
    }
}

/// Signals `who` through a pidfd, which pins one process, so the pid cannot
/// be reused between the identity check and the signal. `None` where no
/// pidfd can be had (an old kernel): the caller checks, then signals.
pub fn signal_pinned(who: &ProcessIdentity, signal: i32) -> Option<SignalOutcome> {
    match pidfd_open(who.pid) {
        Ok(fd) => {
            // The fd pins one process. Proven the recorded one by its pidfs
            // inode, no stat is read to tell it apart, only whether it
            // exited: a stat per signal and per look was a tenth of the
            // killer's CPU in a kill of 1,000 jobs.
            let identified = crate::os::pidfd::identifies(who, &fd);
            if identified == Some(true) {
                return Some(if crate::os::pidfd::has_exited(&fd) {
                    SignalOutcome::Gone
                } else {
                    errno_outcome(pidfd_send_signal(&fd, signal))
                });
            }
            // Else the start time read after opening it must be the recorded one.
            let replaced = identified == Some(false);
            Some(match identify(who.pid) {
                None => SignalOutcome::Gone,
                Some(now) if replaced || now.start_ticks != who.start_ticks => SignalOutcome::Replaced,
                Some(_) => errno_outcome(pidfd_send_signal(&fd, signal)),
            })
        }
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Some(SignalOutcome::Gone),
        Err(_) => None,
    }
}

/// A pidfd for `pid`, or why not (ESRCH: no such process; ENOSYS: old kernel).
pub fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    // Pid 0 (and anything past i32) names no single process.
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(pidfd_open(pid, PidfdFlags::empty())?)
}

/// The pidfd's inode number when pidfds live on pidfs (Linux 6.9+), where
/// each process gets its own for the whole boot. Older kernels hand out
/// anonymous inodes that all share one number, which says nothing: None.
pub fn pidfd_inode(fd: &OwnedFd) -> Option<u64> {
    const PIDFS_MAGIC: i64 = 0x5049_4446;
    // Where pidfds live is the running kernel's, the same for every pidfd
    // of this boot: asked once (a kill of 1,000 jobs asked 4,000 times).
    static ON_PIDFS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on_pidfs = match ON_PIDFS.get() {
        Some(&known) => known,
        None => {
            let fs = rustix::fs::fstatfs(fd).ok()?;
            // f_type's width and sign differ between targets.
            #[allow(clippy::unnecessary_cast)]
            *ON_PIDFS.get_or_init(|| fs.f_type as i64 == PIDFS_MAGIC)
        }
    };
    if !on_pidfs {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstat(fd).ok().map(|st| st.st_ino as u64)
}

/// Sends `signal` to exactly the process the pidfd pins. Returns the raw
/// result (0, or -1 with errno set) for the caller's errno mapping.
fn pidfd_send_signal(fd: &OwnedFd, signal: i32) -> libc::c_long {
    // SAFETY: a null siginfo is allowed (the kernel fills in a SI_USER one);
    // the fd is valid for the duration of the call.
    unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), signal, std::ptr::null::<libc::siginfo_t>(), 0) }
}

/// What `publish_unrecorded` holds: the memory file, there while it is open.
pub type UnrecordedShown = OwnedFd;

/// The name of the memory file a supervisor keeps an unrecorded end in.
const UNRECORDED_NAME: &str = "proc-manager-unrecorded-end";

/// Puts `bytes` (a job's end its supervisor could not write) where readers
/// of the same user find it without the disk: an anonymous memory file held
/// open by the supervisor, read through `/proc/<pid>/fd` (`read_unrecorded`).
/// Nobody else can place a file among another process's descriptors, so
/// what is found there is the supervisor's. Gone when the fd is dropped.
pub fn publish_unrecorded(bytes: &[u8]) -> std::io::Result<Option<UnrecordedShown>> {
    let fd = rustix::fs::memfd_create(UNRECORDED_NAME, rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut written = 0;
    while written < bytes.len() {
        written += rustix::io::write(&fd, &bytes[written..])?;
    }
    Ok(Some(fd))
}

/// What `publish_unrecorded` holds in process `pid`, if anything.
pub fn read_unrecorded(pid: u32) -> Option<Vec<u8>> {
    let fds = format!("/proc/{pid}/fd");
    let wanted = format!("/memfd:{UNRECORDED_NAME} (deleted)");
    std::fs::read_dir(&fds).ok()?.flatten().find_map(|entry| {
        let target = std::fs::read_link(entry.path()).ok()?;
        if target.as_os_str() != wanted.as_str() {
            return None;
        }
        std::fs::read(entry.path()).ok()
    })
}

/// A pipe, both ends close-on-exec, with `flags` (`O_NONBLOCK`) on both.
pub fn pipe(flags: libc::c_int) -> std::io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pipe::PipeFlags;
    let nonblocking = if flags & libc::O_NONBLOCK != 0 { PipeFlags::NONBLOCK } else { PipeFlags::empty() };
    Ok(rustix::pipe::pipe_with(PipeFlags::CLOEXEC | nonblocking)?)
}

/// Takes a SIGPIPE pending for this thread, if one is, without waiting.
///
/// # Safety
/// `pipe_only` holds SIGPIPE alone, and SIGPIPE is blocked in this thread.
pub unsafe fn discard_pending_sigpipe(pipe_only: &libc::sigset_t) {
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // EAGAIN (none pending) is the usual answer, and any answer will do.
    libc::sigtimedwait(pipe_only, std::ptr::null_mut(), &zero);
}

/// Makes a FIFO at `path`, readable and writable by its owner only.
pub fn make_fifo(path: &std::path::Path) -> std::io::Result<()> {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from_raw_mode(0o600))?;
    Ok(())
}

/// What `DirWatcher::drain` read.
pub struct Drained {
    pub new_dirs: Vec<std::ffi::OsString>,
    pub records_changed: bool,
}

/// Tells when files are written or renamed into watched directories, or
/// directories made in them (inotify), for `supervise::end_watch`.
pub struct DirWatcher(OwnedFd);

impl DirWatcher {
    /// What to poll for readability: there are events to drain.
    pub fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(&self.0))
    }

    pub fn new() -> std::io::Result<DirWatcher> {
        // SAFETY: no pointers; the result is checked before it is owned.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened by us and is owned by nothing else.
        Ok(DirWatcher(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    /// Watches `dir` for files written or renamed into it, and directories made in it.
    pub fn watch(&self, dir: &std::path::Path) {
        self.add_watch(dir, 0);
    }

    /// `watch`, woken also by every write to a file in `dir` (a job's log
    /// as its supervisor appends to it), while the file is still open.
    pub fn watch_writes(&self, dir: &std::path::Path) {
        self.add_watch(dir, libc::IN_MODIFY);
    }

    fn add_watch(&self, dir: &std::path::Path, extra: u32) {
        let Ok(path) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())) else { return };
        let mask = libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO | libc::IN_CREATE | libc::IN_ONLYDIR | libc::IN_DONT_FOLLOW | extra;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        // A failure (the directory went away) leaves it unwatched; the next
        // scan of the registry still sees what it held.
        unsafe { libc::inotify_add_watch(std::os::fd::AsRawFd::as_raw_fd(&self.0), path.as_ptr(), mask) };
    }

    /// Reads every pending event: the directories made (new jobs), and
    /// whether a job record (`job.json`, `jobs.json`) may have changed; a
    /// log's rotation alone does not count.
    pub fn drain(&self) -> Drained {
        let mut drained = Drained { new_dirs: Vec::new(), records_changed: false };
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is writable for its whole length.
            let n = unsafe { libc::read(std::os::fd::AsRawFd::as_raw_fd(&self.0), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return drained;
            }
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n as usize {
                // SAFETY: the kernel wrote whole events; read_unaligned copes
                // with the byte buffer's alignment.
                let event: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name = &buf[at + header..(at + header + event.len as usize).min(n as usize)];
                let name = name.split(|&b| b == 0).next().unwrap_or_default();
                if event.mask & libc::IN_CREATE != 0 && event.mask & libc::IN_ISDIR != 0 && !name.is_empty() {
                    drained.new_dirs.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name).to_os_string());
                    drained.records_changed = true;
                }
                // Events were dropped: anything may have changed.
                if event.mask & libc::IN_Q_OVERFLOW != 0 || name == b"job.json" || name == b"jobs.json" {
                    drained.records_changed = true;
                }
                at += header + event.len as usize;
            }
        }
    }
}


/// The uid that files owned by someone outside our user namespace show as
/// (the kernel's overflow uid, 65534 by default), when this process runs in
/// a user namespace other than the initial one (bubblewrap, `unshare -r`,
/// rootless containers): there `/` and `/tmp` belong to the host's root but
/// show as this uid. `None` in the initial namespace, whose uid map is the
/// identity `0 0 4294967295`.
pub fn foreign_owner_uid() -> Option<u32> {
    let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
    let identity = map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    if identity {
        return None;
    }
    let overflow = std::fs::read_to_string("/proc/sys/kernel/overflowuid").ok();
    Some(overflow.and_then(|text| text.trim().parse().ok()).unwrap_or(65534))
}

/// `getrusage`'s `ru_maxrss` in KiB: Linux reports KiB.
pub fn max_rss_kb(max_rss: u64) -> u64 {
    max_rss
}

/// Makes us a child subreaper: orphaned descendants are re-parented to us.
pub fn become_subreaper() -> rustix::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
}

/// Whether the job's output can be spliced into its log (`splice(2)`).
pub fn can_splice() -> bool {
    true
}

/// Moves up to `len` bytes from pipe `from` into pipe `to` without copying
/// them (`splice(2)` hands over page references), never waiting.
pub fn splice_pipes(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> rustix::io::Result<usize> {
    use rustix::pipe::SpliceFlags;
    // Pipes take no offsets, so none is passed.
    rustix::pipe::splice(from, None, to, None, len, SpliceFlags::MOVE | SpliceFlags::NONBLOCK)
}

/// Moves up to `len` bytes from `pipe` into `file` inside the kernel
/// (`splice(2)`), at the file's own position, which it advances as a write
/// does; never waits on the pipe.
pub fn splice_to_file(pipe: BorrowedFd<'_>, file: BorrowedFd<'_>, len: usize) -> std::io::Result<usize> {
    // SAFETY: `pipe` and `file` are borrowed for the call, both open; the
    // offsets are null (a pipe has none; the file's own position is used and
    // advanced, as by write), so no memory of ours is passed.
    let n = unsafe {
        libc::splice(
            pipe.as_raw_fd(),
            std::ptr::null_mut(),
            file.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// How many bytes the pipe holds.
pub fn pipe_size(fd: BorrowedFd<'_>) -> rustix::io::Result<usize> {
    rustix::pipe::fcntl_getpipe_size(fd)
}

/// Makes the pipe hold `bytes` (`F_SETPIPE_SZ`).
pub fn set_pipe_size(fd: BorrowedFd<'_>, bytes: usize) -> rustix::io::Result<()> {
    rustix::pipe::fcntl_setpipe_size(fd, bytes).map(drop)
}

/// `fd` opened anew read-write through /proc: a pipe's write end that also
/// reads it, so its holder never gets SIGPIPE. `None` if it cannot be.
pub fn reopen_read_write(fd: &OwnedFd) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    // Not with O_NOFOLLOW: that refuses /proc's fd links, which must be followed here.
    let name = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::open(name.as_str(), OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).ok()
}

/// Fills `buf` from the kernel's random source (`getrandom(2)`): how many
/// bytes it filled, fewer than asked (none) only on a kernel without it.
pub fn fill_random(buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        // The raw syscall, not glibc's wrapper: that one needs glibc 2.25,
        // and the prebuilt packages promise 2.17.
        // SAFETY: the pointer and length describe the unfilled tail of `buf`,
        // which getrandom writes at most that many bytes into.
        let n = unsafe {
            libc::syscall(libc::SYS_getrandom, buf[filled..].as_mut_ptr(), buf.len() - filled, 0 as libc::c_uint)
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSYS) => break, // very old kernel: the caller reads /dev/urandom
                _ => return Err(e),
            }
        }
        filled += n as usize;
    }
    Ok(filled)
}

/// Now, in the units of a process's start time (`/proc/<pid>/stat` field
/// 22: clock ticks since boot, on the same boot-time clock): a process
/// whose start time is below this started before now.
pub fn boot_ticks_now() -> Option<u64> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a live, correctly typed out-parameter of clock_gettime.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) } != 0 {
        return None;
    }
    // SAFETY: sysconf takes an integer name and touches no memory of ours.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let ns = (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64);
    Some(ns / (1_000_000_000 / ticks_per_second))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::procinfo::{identify_exactly, is_same_process_alive, signal_process};

    /// A code page written in this process (as a debugger's breakpoint, a
    /// uprobe or a preloaded hook writes one) is a private copy: releasing
    /// code pages must keep it (its mapping is left as it is).
    #[test]
    fn releasing_code_pages_keeps_a_page_this_process_wrote() {
        const PAGE: usize = 4096;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("code");
        std::fs::write(&path, vec![b'a'; 2 * PAGE]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a new private mapping of a file we own, two pages long; no
        // other mapping or reference aliases it, and it is unmapped below.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), 2 * PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE, std::os::fd::AsRawFd::as_raw_fd(&file), 0)
        };
        assert_ne!(base, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        let bytes = base as *mut u8;
        // SAFETY: both offsets lie inside the two readable, writable pages mapped above.
        unsafe {
            *bytes = b'z';
            let _ = std::ptr::read_volatile(bytes.add(PAGE));
        }
        // SAFETY: the range is the mapping made above; it turns it into code
        // (r-xp), as a loader does with a library's text after relocating it.
        if unsafe { libc::mprotect(base, 2 * PAGE, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
            eprintln!("skipped: cannot map {} as code here ({})", path.display(), std::io::Error::last_os_error());
            // SAFETY: unmaps only the mapping made above.
            unsafe { libc::munmap(base, 2 * PAGE) };
            return;
        }
        release_code_pages();
        // SAFETY: inside the mapping made above, still readable.
        let first = unsafe { std::ptr::read_volatile(bytes) };
        // SAFETY: unmaps only the mapping made above; nothing refers to it after.
        unsafe { libc::munmap(base, 2 * PAGE) };
        assert_eq!(first, b'z', "the written page was thrown away and read back from the file");
    }

    #[test]
    fn a_pid_reused_within_one_tick_is_told_apart_by_its_pidfs_inode() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let real = identify_exactly(child.id()).unwrap();
        assert!(is_same_process_alive(&real));
        if real.pidfs_ino.is_none() {
            eprintln!("skipped: this kernel has no pidfs (Linux < 6.9); start time is all there is");
        } else {
            // The same pid and start time, another process: what a reuse
            // within one clock tick looks like to the start-time check.
            let newcomer = ProcessIdentity { pidfs_ino: real.pidfs_ino.map(|i| i + 1), ..real };
            assert!(!is_same_process_alive(&newcomer));
            assert_eq!(signal_process(&newcomer, libc::SIGKILL), SignalOutcome::Replaced);
            assert!(is_same_process_alive(&real), "a refused signal is not sent");
        }
        let earlier_boot = ProcessIdentity { boot: real.boot.map(|b| b ^ 1), ..real };
        assert!(real.boot.is_none() || !is_same_process_alive(&earlier_boot));
        assert_eq!(signal_process(&real, libc::SIGKILL), SignalOutcome::Sent);
        child.wait().unwrap();
    }

    #[test]
    fn cookie_parsing_needs_the_exact_key() {
        assert_eq!(cookie_in(b"A=1\0PROC_MANAGER_JOB=x-1\0B=2\0").as_deref(), Some("x-1"));
        assert_eq!(cookie_in(b"PROC_MANAGER_JOBS=x\0").as_deref(), None);
        assert_eq!(cookie_in(b"XPROC_MANAGER_JOB=x\0").as_deref(), None);
    }
}

