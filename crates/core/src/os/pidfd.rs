//! Kernel handles that pin one process (Linux pidfds) and the facts that
//! tell a process apart from a later one at the same pid: the pidfs inode
//! and the boot. Elsewhere every function answers "not available", and
//! callers fall back to pid + start time.

use std::os::fd::OwnedFd;

/// A pidfd for `pid`, or why not (ESRCH: no such process; ENOSYS: old
/// kernel; Unsupported: no pidfds on this system).
pub use crate::os::platform::{pidfd_inode as inode, pidfd_open as open_checked};

pub fn open(pid: u32) -> Option<OwnedFd> {
    open_checked(pid).ok()
}

/// Blocks until the pinned process ends or `limit` passes (a pidfd becomes
/// readable when its process exits).
pub fn wait_readable(fd: &OwnedFd, limit: std::time::Duration) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let limit = Timespec { tv_sec: limit.as_secs().min(i64::MAX as u64) as i64, tv_nsec: limit.subsec_nanos().into() };
    // A timeout or EINTR just ends the wait early; the caller looks again.
    let _ = poll(&mut fds, Some(&limit));
}

/// `wait_readable` until `deadline`, through interruptions: whether the
/// process ended in time.
pub fn wait_readable_until(fd: &OwnedFd, deadline: std::time::Instant) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let limit = Timespec { tv_sec: left.as_secs().min(i64::MAX as u64) as i64, tv_nsec: left.subsec_nanos().into() };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, Some(&limit)) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
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
