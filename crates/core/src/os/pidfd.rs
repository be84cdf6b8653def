//! Kernel handles that pin one process (Linux pidfds) and the facts that
//! tell a process apart from a later one at the same pid: the pidfs inode
//! and the boot. Elsewhere every function answers "not available", and
//! callers fall back to pid + start time.

use std::os::fd::OwnedFd;

/// A pidfd for `pid`, or why not (ESRCH: no such process; ENOSYS: old kernel).
#[cfg(target_os = "linux")]
pub fn open_checked(pid: u32) -> std::io::Result<OwnedFd> {
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    // Pid 0 (and anything past i32) names no single process.
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(pidfd_open(pid, PidfdFlags::empty())?)
}

#[cfg(not(target_os = "linux"))]
pub fn open_checked(_pid: u32) -> std::io::Result<OwnedFd> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

pub fn open(pid: u32) -> Option<OwnedFd> {
    open_checked(pid).ok()
}

/// The pidfd's inode number when pidfds live on pidfs (Linux 6.9+), where
/// each process gets its own for the whole boot. Older kernels hand out
/// anonymous inodes that all share one number, which says nothing: None.
#[cfg(target_os = "linux")]
pub fn inode(fd: &OwnedFd) -> Option<u64> {
    const PIDFS_MAGIC: i64 = 0x5049_4446;
    let fs = rustix::fs::fstatfs(fd).ok()?;
    // f_type's width and sign differ between targets.
    #[allow(clippy::unnecessary_cast)]
    if fs.f_type as i64 != PIDFS_MAGIC {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstat(fd).ok().map(|st| st.st_ino as u64)
}

#[cfg(not(target_os = "linux"))]
pub fn inode(_fd: &OwnedFd) -> Option<u64> {
    None
}

/// Sends `signal` to exactly the process the pidfd pins. Returns the raw
/// result (0, or -1 with errno set) for the caller's errno mapping.
#[cfg(target_os = "linux")]
pub fn send_signal(fd: &OwnedFd, signal: i32) -> libc::c_long {
    use std::os::fd::AsRawFd;
    // SAFETY: a null siginfo is allowed (the kernel fills in a SI_USER one);
    // the fd is valid for the duration of the call.
    unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), signal, std::ptr::null::<libc::siginfo_t>(), 0) }
}

/// Blocks until the pinned process ends or `limit` passes (a pidfd becomes
/// readable when its process exits).
#[cfg(target_os = "linux")]
pub fn wait_readable(fd: &OwnedFd, limit: std::time::Duration) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let limit = Timespec { tv_sec: limit.as_secs().min(i64::MAX as u64) as i64, tv_nsec: limit.subsec_nanos().into() };
    // A timeout or EINTR just ends the wait early; the caller looks again.
    let _ = poll(&mut fds, Some(&limit));
}

/// The first 64 bits of this boot's random id, read once.
pub fn boot_tag() -> Option<u64> {
    static TAG: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let hex: String = text.chars().filter(char::is_ascii_hexdigit).take(16).collect();
        u64::from_str_radix(&hex, 16).ok()
    })
}
