//! The errors of every verb, each saying what was wrong and what is accepted.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's mistake: a bad flag value, a malformed id, a missing program.
    #[error("{0}")]
    Usage(String),

    #[error("no job with id `{0}` (run `run-bg list --all` to see known jobs)")]
    UnknownJob(String),

    /// The job could not be started; it is recorded as `failed`.
    #[error("{message}")]
    StartFailed { job_id: String, message: String },

    /// Submitted `--after` a job that had already failed: recorded as
    /// `skipped`, never started; `reason` says why (`skipped: …`).
    #[error("{job_id} was not started: {reason}")]
    Skipped { job_id: String, reason: String },

    #[error("config file {path}: {message}")]
    Config { path: PathBuf, message: String },

    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A write into the home failed for want of space (ENOSPC, EDQUOT).
    #[error("the disk holding {home} is full: cannot {action} {path} ({source}); free some space there")]
    DiskFull {
        home: PathBuf,
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The registry lock could not be had in time; says who holds it and why.
    #[error("{0}")]
    Busy(String),

    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { action, path: path.into(), source }
    }

    /// CLI exit status: 2 for bad usage, 1 for everything that failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Config { .. } => 2,
            _ => 1,
        }
    }
}

/// Why a job's program could not be started (`os::launch`). Its text is what
/// the job's record and the caller are told.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// What was asked cannot be handed to exec: no program, a NUL byte.
    #[error("{0}")]
    BadRequest(String),
    /// A system call of ours around the fork failed.
    #[error("{action}: {source}")]
    System {
        action: String,
        #[source]
        source: std::io::Error,
    },
    /// The child could not reach its program: the step that failed and why.
    #[error("{0}")]
    NotStarted(String),
}

impl LaunchError {
    pub fn system(action: impl Into<String>, source: std::io::Error) -> Self {
        LaunchError::System { action: action.into(), source }
    }
}

/// Why handing a job to its supervisor failed (`verbs::spawn`), up to and
/// including the supervisor's first answer (`model::protocol::parse_ready_line`).
#[derive(Debug, thiserror::Error)]
pub enum HandOffError {
    #[error("cannot start the supervisor {}: {source}", exe.display())]
    CannotStart {
        exe: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Encode(String),
    #[error("cannot hand the job to the supervisor: {0}")]
    CannotHandOver(#[source] std::io::Error),
    /// It could not start the job, and says why.
    #[error("{0}")]
    Refused(String),
    /// It ended before answering.
    #[error("the supervisor exited before starting the job")]
    NoAnswer,
    /// An answer that is none of ours.
    #[error("supervisor sent a bad ready line: {0}")]
    Garbled(String),
}

/// Why one notification POST failed (`supervise::service::post`). Its text is
/// recorded as the notification's `last_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The receiver answered with a status outside 2xx (`404 Not Found`).
    #[error("HTTP {0}")]
    Status(String),
    /// No answer within the timeout (`5.0s`).
    #[error("no answer within {0}")]
    Timeout(String),
    /// The connection was refused: most often no interrupt service is installed.
    #[error("nothing listens at {url} (connection refused)")]
    NothingListens { url: String },
    #[error("{0}")]
    Other(String),
}

/// What is wrong with a `config.json` (`store::config::Config::parse`); the
/// caller adds the file's path (`Error::Config`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// The whole file is not an object (`[]`, `null`).
    #[error("expected a JSON object with any of the keys {0}")]
    NotAnObject(String),
    /// A key with a value of the wrong kind, out of range, or unknown.
    #[error("key `{key}`: {problem}")]
    BadKey { key: String, problem: String },
}

impl ConfigError {
    pub fn bad_key(key: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError::BadKey { key: key.into(), problem: problem.into() }
    }
}
