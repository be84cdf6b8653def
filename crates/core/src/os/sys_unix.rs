//! What Unix systems (Linux, macOS) share below the platform files: signal
//! and errno numbers, file-creation modes, positioned reads and writes, owners. `sys_windows.rs` has the same names.

use std::fs::{File, OpenOptions};

/// The `raw_os_error` numbers the store and the verbs tell apart.
pub mod errno {
    pub use libc::{EACCES, EDQUOT, ELOOP, ENOSPC, ENXIO, EROFS, ESRCH};
}

/// Owner-only modes, positioned reads and writes, owners and inodes: std's
/// own on Unix (`sys_windows.rs` gives the same methods there).
pub use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};

/// Opening without following a planted symlink.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NOFOLLOW)
}

/// `no_follow`, and an open that never waits: a FIFO planted where a home
/// file belongs opens at once (and is then refused as no plain file)
/// instead of waiting for a writer that never comes. A plain file reads and
/// writes the same with it.
pub fn no_follow_no_wait(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
}

/// Opens a directory itself, refusing a symlink in its place.
pub fn open_directory_no_follow(path: &std::path::Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(path)
}

use crate::os::procinfo::SignalOutcome;

/// Peak RSS of the largest descendant reaped so far (by us or by its parent),
/// as the kernel keeps it: free to read, no sampling while the job runs.
pub fn children_peak_rss_kb() -> Option<u64> {
    // SAFETY: rusage is a plain C struct for which all-zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, correctly typed out-parameter.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return None;
    }
    Some(crate::os::platform::max_rss_kb(usage.ru_maxrss as u64)).filter(|&kb| kb > 0)
}

/// Whether a process with this pid exists (ours to signal or not).
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only asks whether the pid exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Our effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// This process's own process group and session.
pub fn own_group_and_session() -> (u32, u32) {
    // SAFETY: getpgrp and getsid(0) only read the caller's own ids; they cannot fail.
    unsafe { (libc::getpgrp() as u32, libc::getsid(0) as u32) }
}

/// killpg, the group checked by the caller (`procinfo::signal_group`).
pub fn signal_group_unchecked(pgid: u32, signal: i32) -> SignalOutcome {
    // SAFETY: killpg has no memory effects; the caller checked pgid is > 1 and not ours.
    errno_outcome(unsafe { libc::killpg(pgid as libc::pid_t, signal) } as libc::c_long)
}

/// kill, the identity checked by the caller just before (`procinfo::signal_process`).
pub fn signal_unchecked(pid: u32, signal: i32) -> SignalOutcome {
    // SAFETY: integer arguments only; errno_outcome reads ESRCH as gone.
    errno_outcome(unsafe { libc::kill(pid as libc::pid_t, signal) } as libc::c_long)
}

pub(crate) fn errno_outcome(rc: libc::c_long) -> SignalOutcome {
    if rc == 0 {
        return SignalOutcome::Sent;
    }
    io_outcome(std::io::Error::last_os_error())
}

fn io_outcome(error: std::io::Error) -> SignalOutcome {
    match error.raw_os_error() {
        Some(libc::ESRCH) => SignalOutcome::Gone,
        Some(libc::EPERM) => SignalOutcome::Failed("permission denied".into()),
        _ => SignalOutcome::Failed(error.to_string()),
    }
}

/// A handle that pins one process (a pidfd).
pub type PinnedProcess = std::os::fd::OwnedFd;

/// Waits until the pinned process ends or `deadline` passes, through
/// interruptions: whether it ended in time (a pidfd becomes readable when
/// its process exits).
pub fn wait_pinned_until(fd: &PinnedProcess, deadline: std::time::Instant) -> bool {
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

/// Whether `pid` is in this process's session (a process that is gone has
/// none, ESRCH, never equal to ours).
pub fn in_own_session(pid: u32) -> bool {
    let theirs = rustix::process::Pid::from_raw(pid as i32).and_then(|p| rustix::process::getsid(Some(p)).ok());
    theirs.is_some_and(|theirs| theirs.as_raw_nonzero().get() as u32 == crate::os::procinfo::OwnIds::get().session)
}

/// Makes `dir` (opened from `_path`) our working directory by its inode, so
/// a rename of its name cannot redirect a relative path.
pub fn enter_directory(dir: &File, _path: &std::path::Path) -> std::io::Result<()> {
    rustix::process::fchdir(dir).map_err(std::io::Error::from)
}

pub fn set_mode(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// What a pause can also be woken by: an inotify watch's descriptor.
pub type WakeFd<'a> = std::os::fd::BorrowedFd<'a>;

/// Sleeps up to `pause`, ending early when `wake` or `pipe` becomes
/// readable (`_cancelled` is what writes the pipe; poll needs no look at it).
/// EINTR counts as a pause that ended early; the caller looks again.
pub fn pause_until_readable(pause: std::time::Duration, wake: Option<WakeFd<'_>>, pipe: Option<&std::io::PipeReader>, _cancelled: &dyn Fn() -> bool) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use std::os::fd::AsFd;
    let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
    if let Some(wake) = wake {
        fds.push(PollFd::from_borrowed_fd(wake, PollFlags::IN));
    }
    if let Some(pipe) = pipe {
        fds.push(PollFd::from_borrowed_fd(pipe.as_fd(), PollFlags::IN));
    }
    let timeout = Timespec::try_from(pause).unwrap_or(Timespec { tv_sec: i64::MAX, tv_nsec: 0 });
    let _ = poll(&mut fds, Some(&timeout));
}

/// Whether a read of `pipe` would not block (a stop byte was written).
pub fn has_input(pipe: &std::io::PipeReader) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(pipe, PollFlags::IN)];
    poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })).is_ok_and(|n| n > 0)
}

/// The width in columns of the terminal stdout writes to; `None` off a terminal.
pub fn terminal_columns() -> Option<u16> {
    // SAFETY: a plain C struct of integers, for which all zeroes is a valid value.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points at a live, writable one for the duration of the call.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col)
}

/// The pid of our parent.
pub fn parent_pid() -> u32 {
    std::os::unix::process::parent_id()
}

/// The shell an on-exit hook runs in.
pub const HOOK_SHELL: &str = "/bin/sh";

/// An on-exit hook's command: `sh -c <script>`, in a process group of its
/// own so a hook that times out is killed with everything it started.
pub fn hook_command(script: &str) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(HOOK_SHELL);
    command.arg("-c").arg(script).process_group(0);
    command
}

/// Kills a timed-out hook's group. The hook is our unreaped child leading
/// its own group, so the group id cannot have been reused; ESRCH (the group
/// is gone already) needs nothing, anything else leaves its group running.
pub fn kill_hook(child: &mut std::process::Child) {
    let group = rustix::process::Pid::from_raw(child.id() as i32);
    let killed = group.map_or(Ok(()), |group| rustix::process::kill_process_group(group, rustix::process::Signal::KILL));
    if let Err(e) = killed.or_else(|e| if e == rustix::io::Errno::SRCH { Ok(()) } else { Err(e) }) {
        tracing::warn!("cannot kill the timed-out hook's process group {}: {e}", child.id());
        // At least the hook itself, so the wait that follows returns.
        let _ = child.kill();
    }
}

/// The signal that ended a process, if one did.
pub fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

/// The group id of a file.
pub fn group_of(meta: &std::fs::Metadata) -> u32 {
    meta.gid()
}
pub type OwnedPipe = std::os::fd::OwnedFd;

pub use crate::os::launch::without_sigpipe;

/// The started supervisor's first process exits once it has forked the
/// real one: waited for, so that no zombie is left.
pub fn after_hand_off(mut child: std::process::Child) -> std::io::Result<()> {
    child.wait().map(drop)
}

/// Starts a supervisor or helper: `run-bg` detaches itself (it forks,
/// `os::fork::detach`), so a plain spawn.
pub fn spawn_detached(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    command.spawn()
}

/// A background errand leaves whoever started it (`os::fork::detach`).
pub fn detach_self() -> std::io::Result<()> {
    crate::os::fork::detach()
}

/// Points our stderr at `file`. When that fails stderr stays where it was
/// (the null device an errand is started with).
pub fn redirect_stderr(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 onto our own stderr, which nothing else in this process
    // holds a pointer into.
    unsafe { libc::dup2(file.as_raw_fd(), 2) };
}

/// What std's runtime start-up does that run-bg relies on, for a `main` of
/// its own that skips the rest (Linux: see crates/cli/src/main.rs): fds 0-2
/// open (on /dev/null when closed, so that no file opened later becomes our
/// stdout or stderr) and SIGPIPE ignored (a write to a closed pipe fails
/// instead of killing us). Call first, while single-threaded.
pub fn start_as_std_does() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: poll reads and writes only the three pollfd structs we own;
    // a zero timeout never blocks.
    let polled = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    for pollfd in fds {
        // A failed poll (it cannot fail on three fds) leaves them as they are.
        if polled >= 0 && pollfd.revents & libc::POLLNVAL != 0 {
            // Takes the lowest free descriptor: this one, as those below it are open.
            // SAFETY: a NUL-terminated constant path; the descriptor is left open on purpose.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
    // SAFETY: ignoring a signal installs no code of ours; called before any
    // thread is started. It fails only for an invalid signal, and SIGPIPE is valid.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// The CLI dies of SIGPIPE on a closed stdout, as Unix tools do (`run-bg
/// list | head` ends quietly): the default disposition.
pub fn default_sigpipe() {
    // SAFETY: the default disposition installs no handler, so no code of ours
    // can run at an async-signal-unsafe point; called before any thread is
    // started. It fails only for an invalid signal, and SIGPIPE is valid.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Dies of SIGPIPE, as on a write to a closed pipe.
pub fn die_of_sigpipe() {
    // SAFETY: raise(3) only sends a signal to this thread and touches no
    // memory of ours. Should it return, the caller exits instead.
    unsafe { libc::raise(libc::SIGPIPE) };
}

/// The file of the loaded library that holds `address` (the addon's own).
pub fn library_path_of(address: usize) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: Dl_info is a plain C struct (pointers and ints) for which
    // all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the caller passes an address inside a loaded library, mapped
    // for as long as it stays loaded; `info` is a live out-parameter.
    let found = unsafe { libc::dladdr(address as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded and dli_fname is non-null: a NUL-terminated
    // path owned by the loader, valid while the library stays loaded, and
    // copied out below before we return.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
}

/// A symbol already loaded into this process (node's own libuv), or None;
/// nothing is loaded.
pub fn loaded_symbol(name: &std::ffi::CStr) -> Option<*mut std::ffi::c_void> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the symbols
    // already loaded.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}

/// No platform default on Unix: XDG_STATE_HOME or HOME decide (`Home::resolve_root`).
pub fn platform_state_dir() -> Option<std::path::PathBuf> {
    None
}

/// What a file is, whatever its name is now: (device, inode).
pub fn file_identity(file: &File) -> Option<(u64, u64)> {
    file.metadata().ok().map(|meta| (meta.dev(), meta.ino()))
}

pub fn path_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|meta| (meta.dev(), meta.ino()))
}

/// The identity a metadata read (`symlink_metadata`) gave.
pub fn metadata_identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    Some((meta.dev(), meta.ino()))
}

/// A command line run by the shell: `/bin/sh -c <command>`.
pub fn shell_argv(command: &str) -> Vec<std::ffi::OsString> {
    vec!["/bin/sh".into(), "-c".into(), command.into()]
}

/// For tests: a command that exits at once, and one that waits about 30 s.
#[cfg(test)]
pub fn quick_command() -> std::process::Command {
    let mut command = std::process::Command::new("true");
    command.args([] as [&str; 0]);
    command
}

#[cfg(test)]
pub fn waiting_command() -> std::process::Command {
    let mut command = std::process::Command::new("sleep");
    command.args(["30"]);
    command
}

/// The signal for a job's process outside its supervisor's subtree during a
/// kill's grace period: SIGTERM, as the supervisor sends its own tree.
pub fn polite_stray_signal() -> Option<i32> {
    Some(crate::model::signals::SIGTERM)
}

/// How `kill` rings a supervisor whose kill request could not be written:
/// SIGTERM, which it takes as a kill with the configured grace.
pub const DOORBELL_FALLBACK: i32 = crate::model::signals::SIGTERM;

/// Whether a process's parent pid can name a dead parent (whose pid may be
/// reused): not here, orphans are re-parented.
pub const PARENT_PIDS_GO_STALE: bool = false;

/// Swaps what two names in the same filesystem name, in one step (Linux's
/// `renameat2(RENAME_EXCHANGE)`, macOS's `renamex_np(RENAME_SWAP)`): a
/// reader of either name sees the old file or the new, never neither.
pub fn exchange_names(a: &std::path::Path, b: &std::path::Path) -> std::io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    Ok(renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE)?)
}
