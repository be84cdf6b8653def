//! The operating system: the process table (and snapshots of it), process identities and signals (pidfd), fork/exec, and a job's tree of processes.

#[cfg(unix)]
pub mod fork;
#[cfg(unix)]
pub mod launch;
pub mod pidfd;
pub mod procargs;
pub mod procinfo;
pub mod snapshot;
pub mod tree;

/// What Unix systems share, or Windows's answer to the same: signal and
/// errno numbers, file modes, positioned file access, OS strings as bytes.
#[cfg(unix)]
#[path = "sys_unix.rs"]
pub mod sys;
#[cfg(windows)]
#[path = "sys_windows.rs"]
pub mod sys;
/// A directory watcher that knows nothing, where there is no inotify.
#[cfg(not(target_os = "linux"))]
mod timed_dir_watch;
/// The snapshot's answers where there is no child subreaper.
#[cfg(not(target_os = "linux"))]
mod no_subreaper;
/// `pause` on Unix: a job's tree stopped whole with SIGSTOP.
#[cfg(unix)]
pub mod pause_unix;
/// A kill on Unix: SIGTERM, then SIGKILL, to a job's tree and what was re-parented to its supervisor.
#[cfg(unix)]
pub mod kill_unix;
/// What woke a supervisor's loop (wait.rs), and each platform's wait.
pub mod wait;
#[cfg(unix)]
pub mod wait_unix;
#[cfg(windows)]
pub mod wait_windows;
/// A kill on Windows: CTRL_BREAK to the job's console group, then its Job Object ended.
#[cfg(windows)]
pub mod kill_windows;
/// The job's output copied into the log on Windows, by a thread per run.
#[cfg(windows)]
pub mod output_copy_windows;
/// Windows's Job Objects, console control events and process handles: the
/// job's tree and its kill there.
#[cfg(windows)]
pub mod windows_job;
/// `pause` and `resume` on Windows: a Job Object's processes suspended and
/// resumed (no SIGSTOP there).
#[cfg(windows)]
pub mod pause_windows;
/// What a job wants of each process that joins its Job Object (held while
/// paused, its priority class), told by the Job Object's completion port.
#[cfg(windows)]
pub mod job_watch_windows;
/// A run of a job's main process on Windows (CreateProcess into the Job Object).
#[cfg(windows)]
pub mod launch_windows;
/// The job's output pipe on Windows: nothing named, nothing to reopen.
#[cfg(windows)]
pub mod outpipe_windows;
/// `--nice` on Windows: a niceness mapped onto a priority class.
#[cfg(windows)]
pub mod nice_windows;
/// `--stdin pipe` and `send` on Windows: a named pipe in place of the FIFO.
#[cfg(windows)]
pub mod stdin_pipe_windows;
/// An end its supervisor could not write, shown to readers on Windows (a named section).
#[cfg(windows)]
pub mod unrecorded_windows;
/// Windows's process table read with Toolhelp32 and a least-rights handle
/// per process.
#[cfg(windows)]
pub mod toolhelp;

// The platform's own ways to the same facts: one file per platform, each
// with the same functions, and no `cfg` anywhere else in `os`.
/// The supervisor's platform half (supervise/supervisor.rs is the rest).
#[cfg(unix)]
#[path = "supervision_unix.rs"]
pub mod supervision;
#[cfg(windows)]
#[path = "supervision_windows.rs"]
pub mod supervision;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
pub(crate) mod platform;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
pub(crate) mod platform;
#[cfg(windows)]
#[path = "windows.rs"]
pub(crate) mod platform;
/// Who holds the registry's lock, and what it is doing: for the message a
/// waiter that gave up gets.
#[cfg(target_os = "linux")]
#[path = "lock_holder_linux.rs"]
pub mod lock_holder;
#[cfg(target_os = "macos")]
#[path = "lock_holder_macos.rs"]
pub mod lock_holder;
#[cfg(windows)]
#[path = "lock_holder_windows.rs"]
pub mod lock_holder;
/// Who holds a TCP port (`--ready-port`): the same API on each platform.
#[cfg(target_os = "linux")]
#[path = "ports_linux.rs"]
pub mod ports;
#[cfg(target_os = "macos")]
#[path = "ports_macos.rs"]
pub mod ports;
#[cfg(windows)]
#[path = "ports_windows.rs"]
pub mod ports;

/// Who holds a TCP port, as far as a probe can tell (each platform's `ports`
/// answers with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortHolder {
    /// Nothing listens on it where a connect to 127.0.0.1 or ::1 would reach.
    Free,
    /// One of the job's processes listens on it.
    Ours,
    /// Someone else does: `pid N (name)`, or `another process` when its
    /// descriptors are not ours to read (never on macOS, where a stranger
    /// cannot be told from the job).
    Stranger(String),
}
/// The whole process table as a snapshot reads it, and this process's own
/// children (`snapshot.rs` is the way in).
#[cfg(target_os = "linux")]
#[path = "snapshot_linux.rs"]
mod snapshot_platform;
#[cfg(target_os = "macos")]
#[path = "snapshot_macos.rs"]
mod snapshot_platform;
#[cfg(windows)]
#[path = "snapshot_windows.rs"]
mod snapshot_platform;
