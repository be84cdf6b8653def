//! Kernel handles that pin one process (Linux pidfds) and the facts that
//! tell a process apart from a later one at the same pid: the pidfs inode
//! and the boot. Elsewhere every function answers "not available", and
//! callers fall back to pid + start time.

use crate::os::sys::PinnedProcess;

/// A pidfd for `pid`, or why not (ESRCH: no such process; ENOSYS: old
/// kernel; Unsupported: no pidfds on this system).
pub use crate::os::platform::{pidfd_inode as inode, pidfd_open as open_checked};

pub fn open(pid: u32) -> Option<PinnedProcess> {
    open_checked(pid).ok()
}

/// Blocks until the pinned process ends or `limit` passes.
pub fn wait_readable(fd: &PinnedProcess, limit: std::time::Duration) {
    wait_readable_until(fd, std::time::Instant::now() + limit);
}

/// `wait_readable` until `deadline`, through interruptions: whether the
/// process ended in time.
pub fn wait_readable_until(fd: &PinnedProcess, deadline: std::time::Instant) -> bool {
    crate::os::sys::wait_pinned_until(fd, deadline)
}

/// Whether the pinned process has exited (its pidfd is readable: a zombie,
/// or reaped), asked without waiting.
pub fn has_exited(fd: &PinnedProcess) -> bool {
    wait_readable_until(fd, std::time::Instant::now())
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
