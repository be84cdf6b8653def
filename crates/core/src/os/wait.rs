//! What woke a supervisor's loop, the same on every platform; the wait
//! itself is each platform's (wait_unix.rs: `poll(2)` on pipes and a pidfd;
//! wait_windows.rs: `WaitForMultipleObjects` on handles).

/// What woke the wait; several at once on Unix, one on Windows. Nothing
/// set: the time limit passed (a timer is due).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Woken {
    /// The doorbell: a request left beside the job (`kill`, `pause`,
    /// `send --eof`), and on Unix any signal of ours (a child's end, a stop),
    /// which the supervisor's signal flags tell apart.
    pub doorbell: bool,
    /// The job's output has something to copy or hand over, or has ended.
    pub output: bool,
    /// The main process ended (Windows; on Unix a SIGCHLD rings the doorbell).
    pub main_ended: bool,
    /// The process the job is tied to may have ended (`--tie`).
    pub tie: bool,
    /// The wait itself failed (a handle no longer valid): the caller stops
    /// watching what may have caused it, and never spins.
    pub failed: bool,
}
