//! Kernel handles that pin one process (Linux pidfds) and the facts that
//! tell a process apart from a later one at the same pid: the pidfs inode
//! and the boot. Elsewhere every function answers "not available", and
//! callers fall back to pid + start time.

use crate::model::job::ProcessIdentity;
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

/// What the pidfs inode of `fd`, a pidfd opened for `who.pid`, says of it:
/// `Some(true)`, the very process recorded (pidfs numbers each process of a
/// boot apart, so a pid reused even within one clock tick gets another
/// inode, and no start time need be read); `Some(false)`, another process;
/// `None`, it cannot tell (no inode recorded, or pidfds not on pidfs: before
/// Linux 6.9, other systems), and the start time decides. A match is
/// trusted only with the boot recorded and the same now (pids and pidfs
/// inodes both start again at boot, so the same pair can come back after a
/// reboot) and on a 64-bit kernel (a 32-bit one's inode wraps after 2^32
/// processes).
pub fn identifies(who: &ProcessIdentity, fd: &PinnedProcess) -> Option<bool> {
    let recorded = who.pidfs_ino?;
    if inode(fd)? != recorded {
        return Some(false);
    }
    let trusted = cfg!(target_pointer_width = "64") && who.boot.is_some() && boot_tag() == who.boot;
    trusted.then_some(true)
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
