//! Where a job is, how its main process ended, and the exit status that hands on.

use super::status::JobStatus;

/// How the main process ended, as `waitpid` told its supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It died of this signal (its name: `SIGTERM`).
    Signal(String),
}

/// Who ended a job whose main process the supervisor reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// The job itself (or a signal nobody here sent).
    Itself,
    /// A `kill`.
    Kill,
    /// Its time limit.
    Timeout,
}

/// Where a job is, with exactly the facts that state has: a running job has
/// no exit code, an ended one always has its end time, only a start failure
/// has a start error. `JobStatus` is its one-word name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Under its supervisor.
    Running,
    /// Its supervisor is gone but processes of the job still run.
    Orphaned,
    /// The main process exited by itself: `success` with code 0, else `failed`.
    Exited { code: i32, ended_at: u64 },
    /// The main process died of a signal nobody here sent (`failed`).
    Signalled { signal: String, ended_at: u64 },
    /// No main process ever ran: why (`failed`).
    FailedToStart { error: String, ended_at: u64 },
    /// Ended by `kill`; how its main process ended, where it was seen.
    Killed { exit: Option<Exit>, ended_at: u64 },
    /// Ended by its time limit; how its main process ended, where it was seen.
    TimedOut { exit: Option<Exit>, ended_at: u64 },
    /// Supervisor and processes gone, no exit status recorded; why, where known.
    Lost { reason: Option<String>, ended_at: u64 },
    /// A job with a readiness check whose main process ended by itself
    /// before it was ready (`failed`, even with exit code 0: a server that
    /// exits before it serves did not do its job).
    EndedBeforeReady { exit: Exit, ended_at: u64 },
    /// Recorded, not started: waits for a queue slot or the jobs it runs after.
    Queued,
    /// Never started, and never will: why (`skipped: build-3f2a1c failed (exit 1)`).
    Skipped { reason: String, ended_at: u64 },
}

impl JobState {
    /// The state a supervisor records when its job's main process was reaped
    /// (`exit`, from `waitpid`) and nothing is left to wait for. The end of a
    /// kill or timeout is theirs whatever the main process did meanwhile; one
    /// whose exit could not be read is lost (waitpid without WUNTRACED reports
    /// only exits and deaths by signal, so this does not happen).
    pub fn ended(by: EndedBy, exit: Option<Exit>, ended_at: u64) -> JobState {
        match (by, exit) {
            (EndedBy::Kill, exit) => JobState::Killed { exit, ended_at },
            (EndedBy::Timeout, exit) => JobState::TimedOut { exit, ended_at },
            (EndedBy::Itself, Some(Exit::Code(code))) => JobState::Exited { code, ended_at },
            (EndedBy::Itself, Some(Exit::Signal(signal))) => JobState::Signalled { signal, ended_at },
            (EndedBy::Itself, None) => JobState::Lost {
                reason: Some("the main process ended without an exit status".to_string()),
                ended_at,
            },
        }
    }

    pub fn status(&self) -> JobStatus {
        match self {
            JobState::Running => JobStatus::Running,
            JobState::Orphaned => JobStatus::Orphaned,
            JobState::Exited { code: 0, .. } => JobStatus::Success,
            JobState::Exited { .. } | JobState::Signalled { .. } | JobState::FailedToStart { .. } => JobStatus::Failed,
            JobState::Killed { .. } => JobStatus::Killed,
            JobState::TimedOut { .. } => JobStatus::Timeout,
            JobState::Lost { .. } => JobStatus::Lost,
            JobState::EndedBeforeReady { .. } => JobStatus::Failed,
            JobState::Queued => JobStatus::Queued,
            JobState::Skipped { .. } => JobStatus::Skipped,
        }
    }

    /// Finished: the main process has an outcome and nothing of ours supervises it.
    pub fn is_final(&self) -> bool {
        self.status().is_final()
    }

    pub fn ended_at(&self) -> Option<u64> {
        match self {
            JobState::Running | JobState::Orphaned | JobState::Queued => None,
            JobState::Skipped { ended_at, .. }
            | JobState::Exited { ended_at, .. }
            | JobState::Signalled { ended_at, .. }
            | JobState::FailedToStart { ended_at, .. }
            | JobState::Killed { ended_at, .. }
            | JobState::TimedOut { ended_at, .. }
            | JobState::Lost { ended_at, .. }
            | JobState::EndedBeforeReady { ended_at, .. } => Some(*ended_at),
        }
    }

    /// How the main process ended, where that is known.
    pub fn exit(&self) -> Option<Exit> {
        match self {
            JobState::Exited { code, .. } => Some(Exit::Code(*code)),
            JobState::Signalled { signal, .. } => Some(Exit::Signal(signal.clone())),
            JobState::Killed { exit, .. } | JobState::TimedOut { exit, .. } => exit.clone(),
            JobState::EndedBeforeReady { exit, .. } => Some(exit.clone()),
            _ => None,
        }
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self.exit() {
            Some(Exit::Code(code)) => Some(code),
            _ => None,
        }
    }

    /// Name of the signal the main process died of (`SIGTERM`).
    pub fn signal(&self) -> Option<String> {
        match self.exit() {
            Some(Exit::Signal(signal)) => Some(signal),
            _ => None,
        }
    }

    /// Why the job could not start, or why it is lost.
    pub fn error(&self) -> Option<&str> {
        let error = match self {
            JobState::FailedToStart { error, .. } => Some(error.as_str()),
            JobState::Lost { reason, .. } => reason.as_deref(),
            JobState::Skipped { reason, .. } => Some(reason.as_str()),
            _ => None,
        };
        // A `failed` record of format 1 without any detail has none to say.
        error.filter(|e| !e.is_empty())
    }

    /// Whether `next` may follow this state. A running job may become
    /// anything but running again; an orphan may end (nothing brings its
    /// supervisor back); an ended job stays as it ended, except that a job
    /// found lost while we were killing it is recorded as killed (our signals
    /// ended it). A kill recorded after an exit does not replace the exit.
    pub fn can_become(&self, next: &JobState) -> bool {
        match (self, next) {
            // A queued job starts once, or ends without ever running.
            (JobState::Queued, next) => !matches!(next, JobState::Queued | JobState::Orphaned | JobState::Lost { .. }),
            (_, JobState::Running | JobState::Queued) => false,
            (JobState::Running, _) => true,
            (JobState::Orphaned, next) => next.is_final(),
            (JobState::Lost { .. }, JobState::Killed { .. }) => true,
            _ => false,
        }
    }

    /// The exit status a shell would give for this job: its exit code, 128 +
    /// the signal it died of, 143 (SIGTERM's) for a job we ended whose own
    /// end was not seen or was a clean exit under our signal, else 1.
    pub fn shell_exit_code(&self) -> i32 {
        let ended_by_us = matches!(self, JobState::Killed { .. } | JobState::TimedOut { .. });
        if let JobState::EndedBeforeReady { exit: Exit::Code(0), .. } = self {
            return 1;
        }
        match self.exit() {
            Some(Exit::Code(0)) | None if ended_by_us => 128 + crate::model::signals::SIGTERM,
            Some(Exit::Code(code)) => code,
            Some(Exit::Signal(signal)) => match signal_number(&signal) {
                Some(number) => 128 + number,
                None if ended_by_us => 128 + crate::model::signals::SIGTERM,
                None => 1,
            },
            None => 1,
        }
    }
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        crate::model::signals::SIGHUP => "SIGHUP",
        crate::model::signals::SIGINT => "SIGINT",
        crate::model::signals::SIGQUIT => "SIGQUIT",
        crate::model::signals::SIGILL => "SIGILL",
        crate::model::signals::SIGTRAP => "SIGTRAP",
        crate::model::signals::SIGABRT => "SIGABRT",
        crate::model::signals::SIGBUS => "SIGBUS",
        crate::model::signals::SIGFPE => "SIGFPE",
        crate::model::signals::SIGKILL => "SIGKILL",
        crate::model::signals::SIGUSR1 => "SIGUSR1",
        crate::model::signals::SIGSEGV => "SIGSEGV",
        crate::model::signals::SIGUSR2 => "SIGUSR2",
        crate::model::signals::SIGPIPE => "SIGPIPE",
        crate::model::signals::SIGALRM => "SIGALRM",
        crate::model::signals::SIGTERM => "SIGTERM",
        crate::model::signals::SIGXCPU => "SIGXCPU",
        crate::model::signals::SIGXFSZ => "SIGXFSZ",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

pub fn signal_number(name: &str) -> Option<i32> {
    (1..32).find(|&n| signal_name(n) == name)
}
