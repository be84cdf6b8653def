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

/// Which of a supervisor's bells rang, told apart after a wake (Unix: its
/// signal flags; Windows: its two named events and the main process).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Bells {
    /// A child of ours may be reapable (the main process, an adopted one).
    pub children: bool,
    /// A request may have been left beside the job (`kill`, `pause`,
    /// `resume`, `send --eof`): only a request found counts.
    pub requests: bool,
    /// Someone wants the job gone (Unix: SIGTERM, SIGINT, SIGHUP; Windows:
    /// the stop bell).
    pub stop: bool,
}

/// How the main process ended, as `waitpid` (or Windows's exit code) reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainEnd {
    Code(i32),
    Signal(i32),
    /// Ended, but how could not be read (Windows: its exit code; `waitpid`
    /// always says).
    Unread,
}

impl MainEnd {
    /// From a wait status's exit status and terminating signal; `None` for
    /// a report that is no end (a stop or a continue, never asked for).
    pub fn from_wait(exit_status: Option<i32>, terminating_signal: Option<i32>) -> Option<MainEnd> {
        exit_status.map(MainEnd::Code).or(terminating_signal.map(MainEnd::Signal))
    }

    /// How the job records it: a signal by its name; `None` when unread.
    pub fn recorded(self) -> Option<crate::model::job::Exit> {
        use crate::model::job::{signal_name, Exit};
        match self {
            MainEnd::Code(code) => Some(Exit::Code(code)),
            MainEnd::Signal(signal) => Some(Exit::Signal(signal_name(signal))),
            MainEnd::Unread => None,
        }
    }
}

/// What a reap found: the main process's end, if it was among the reaped,
/// and whether no child of ours is left.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    pub main: Option<MainEnd>,
    pub none_left: bool,
}
