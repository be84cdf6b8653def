//! Kernel handles that pin one process (Linux pidfds) and the facts that
//! tell a process apart from a later one at the same pid: the pidfs inode
//! and the boot. Elsewhere every function answers "not available", and
//! callers fall back to pid + start time.

use std::os::fd::OwnedFd;

/// A pidfd for `pid`, or why not (ESRCH: no such process; ENOSYS: old kernel).
#[cfg(target_os = "linux")]
pub fn open_checked(pid: u32) -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1;
    // it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
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
    use std::os::fd::AsRawFd;
    const PIDFS_MAGIC: i64 = 0x5049_4446;
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs writes one statfs into the buffer we pass, sized for it;
    // it is read only when the call succeeded.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), fs.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: initialised by the successful fstatfs above.
    let fs = unsafe { fs.assume_init() };
    // f_type is i64 on glibc x86_64 but another width or sign elsewhere (musl).
    #[allow(clippy::unnecessary_cast)]
    if fs.f_type as i64 != PIDFS_MAGIC {
        return None;
    }
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: as above, for fstat and one stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: initialised by the successful fstat above.
    Some(unsafe { st.assume_init() }.st_ino)
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
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, valid for the call; a timeout or EINTR just ends the wait early.
    unsafe { libc::poll(&mut pfd, 1, limit.as_millis().min(i32::MAX as u128) as i32) };
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
