//! What became of a job's end announcement and of its command hooks.

use serde::{Deserialize, Serialize};

/// What became of a job's exit notification, as the receiver answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryState {
    /// Not answered yet: being sent or retried (refused, timed out, 5xx), or
    /// waiting in the spool.
    #[default]
    Pending,
    /// A 2xx from a receiver that does not answer as the interrupt service
    /// does (and what records before the service's answers were read say).
    Delivered,
    /// The interrupt service queued it for the agent (`matched` rules).
    Queued,
    /// The interrupt service took it and passes it on to no one (`reason`).
    Ignored,
    /// Refused for good (a 4xx, repeated 5xx) or given up on after a day.
    Failed,
    /// Nothing listened at the built-in default address for the whole retry
    /// period: no interrupt service is installed, so nothing is spooled.
    NoListener,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Queued => "queued",
            DeliveryState::Ignored => "ignored",
            DeliveryState::Failed => "failed",
            DeliveryState::NoListener => "no-listener",
        }
    }

    /// Nothing more will be tried for it.
    pub fn is_settled(self) -> bool {
        self != DeliveryState::Pending
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Notification {
    /// Stable across retries, so a receiver can drop duplicates: `<jobId>:<status>`.
    pub event_id: String,
    pub state: DeliveryState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the receiver took it (queued, ignored or delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<u64>,
    /// `queued`: how many of the service's rules matched (0: its default action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<u32>,
    /// `ignored`: the service's reason; `failed`: what the refusal said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The level it was sent at (`info`, `warn`, `alert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// `no-listener`: this is the home's first, which says how to set up or
    /// turn off notifications (later ones say it in a few words).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hint: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRun {
    pub command: String,
    pub exit_code: Option<i32>,
    /// Why it failed: timed out, could not start, died of a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
    /// The event it ran for: a record of that event's hooks replaces them
    /// (see `store::deliveries`), so one folded twice adds nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}
