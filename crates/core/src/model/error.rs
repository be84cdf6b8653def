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
