//! What a job was started with beside its command: how it waits to start, when it is
//! ready, the process it is tied to, how it restarts.

use super::identity::ProcessIdentity;
use serde::{Deserialize, Serialize};

/// What a job started later waits for: a slot in its queue, the end of
/// other jobs. Kept after it starts, to show what it waited for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Waits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Higher starts first; first come first served within a priority.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    /// Jobs that must have ended (successfully, unless `after_any`) first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_any: bool,
    /// A job of `after` that has a readiness check counts once it was
    /// ready, not only once it ended well (a stack's web server after its
    /// database); one never ready by its readiness timeout skips this job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_ready: bool,
    /// When it was submitted (its place in the queue; `started_at` becomes
    /// the real start).
    pub queued_at: u64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// What makes a job ready (`--ready-log`, `--ready-port`, `--ready-url`):
/// the first of them that holds. Patterns are checked when the job starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Readiness {
    /// A line of output matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// Something accepts TCP connections on 127.0.0.1 or ::1 at this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// An `http://` URL answers a GET with 2xx or 3xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Readiness is watched this long after the start; then the job runs
    /// on, `not ready after …`. None: as long as the job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A job tied to a process (`run-bg --tie`, `--tie-pid`): when that process
/// ends, the supervisor kills the job's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tie {
    /// The process watched (the caller of `run-bg`, or the Node process).
    pub to: ProcessIdentity,
    /// When its end was seen and the kill begun for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<u64>,
    /// Whether `to` is the caller of the start (`--tie`, `tie: true`) rather
    /// than a process named by pid (`--tie-pid`, `tiePid`). Records written
    /// before it was kept read as named by pid: the neutral wording is true
    /// of both.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub caller: bool,
}

impl Tie {
    /// Why a job whose tie fired was killed.
    pub fn reason(&self) -> String {
        if self.caller {
            format!("its caller (pid {}) exited", self.to.pid)
        } else {
            format!("the process it was tied to (pid {}) exited", self.to.pid)
        }
    }
}

/// When a job's main process is started again after it ends (`--restart`):
/// `on-failure` after an exit other than 0 or a death by signal (an exit 0
/// ends the job), `always` after any end, an exit 0 too.
// The variants' docs would be their help in the CLI and in the JSON Schema
// (changing how both show them): the enum's doc says it instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    OnFailure,
    Always,
}

impl RestartPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Always => "always",
        }
    }

    pub fn parse(text: &str) -> crate::Result<RestartPolicy> {
        match text {
            "on-failure" => Ok(RestartPolicy::OnFailure),
            "always" => Ok(RestartPolicy::Always),
            _ => Err(crate::Error::Usage(format!("bad restart policy `{text}`: expected on-failure or always"))),
        }
    }
}

/// A job started with `--restart`: its settings, then what its supervisor
/// records at each restart (`count`, `last_reason`, `last_at`). One record,
/// one job id, across every run of the main process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restart {
    pub policy: RestartPolicy,
    /// Restarts in a row (without a healthy run between) before giving up.
    pub max_restarts: u32,
    /// The first delay; later ones double up to a cap (supervise/restart.rs).
    pub delay_ms: u64,
    /// Restarts so far.
    #[serde(default)]
    pub count: u32,
    /// How the run before the last restart ended: `exit 1`, `signal SIGSEGV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
    /// When that run ended (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<u64>,
    /// While it waits out the restart delay: when the next run starts (ms
    /// since the epoch; later if the job is paused meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<u64>,
}
