//! An event kept for later delivery: what the spool holds and the tries read.

use crate::model::job::Notification;
use serde::{Deserialize, Serialize};

/// An event the supervisor could not deliver, kept in `<home>/spool/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpoolEntry {
    pub event_id: String,
    pub job_id: String,
    pub url: String,
    pub body: serde_json::Value,
    pub attempts: u32,
    /// 5xx answers so far (`MAX_SERVER_ERRORS` ends the retries).
    #[serde(default)]
    pub server_errors: u32,
    pub spooled_at: u64,
    pub next_attempt_at: u64,
    pub last_error: Option<String>,
    /// `notify.url` was set in config.json: a service is installed, so the
    /// background deliverer keeps at it (up to a day) without any invocation.
    #[serde(default)]
    pub keep_trying: bool,
    /// Tries made from the spool, for the deliverer's backoff.
    #[serde(default)]
    pub spool_tries: u32,
    /// Held back by the pace (never sent yet): sent at `next_attempt_at`
    /// together with every other event held for the same pipeline.
    #[serde(default)]
    pub held: bool,
    /// The notification as its last writer left it, for the next to go on from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<Notification>,
    /// The job has a wake rule to settle once the event is answered for good
    /// (unknown in entries spooled before this was kept: looked at).
    #[serde(default = "unknown_is_yes")]
    pub has_wake: bool,
}

fn unknown_is_yes() -> bool {
    true
}
