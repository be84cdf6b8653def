//! A job's wake rule at the interrupt service (`--wake`).

use serde::{Deserialize, Serialize};

/// What the interrupt service does with a job's wake rule when it matches:
/// `message` injects the text into the agent's session, `subagent` hands it
/// (with the instruction) to a sub-agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum WakeAction {
    #[default]
    Message,
    Subagent,
}

impl WakeAction {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeAction::Message => "message",
            WakeAction::Subagent => "subagent",
        }
    }

    pub fn parse(text: &str) -> std::result::Result<WakeAction, String> {
        match text {
            "message" => Ok(WakeAction::Message),
            "subagent" => Ok(WakeAction::Subagent),
            other => Err(format!("bad wake action `{other}`: expected message or subagent")),
        }
    }
}

/// Where a job's wake rule stands at the interrupt service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WakeState {
    /// Being registered (the supervisor does it as the job starts).
    #[default]
    Pending,
    /// The service took the rule (`rule_id`).
    Registered,
    /// The service did not take it, or did not answer in time (`reason`).
    Failed,
    /// The job's end event matched it and the service queued it
    /// (`queued_at`): whether it fires shows once the service's batch went
    /// out (see `supervise::wake::confirm_due`).
    Queued,
    /// The service dispatched it (the one-off rule is gone from its rules).
    Fired,
    /// Its end event matched it, but the service kept it past its dispatch
    /// (the `openclaw` call failed, or it restarted and lost its queue):
    /// the agent was not woken through it within the wait (`reason` says
    /// how long); removed by us.
    NotFired,
    /// Removed by us (`DELETE /rules/<id>`): the end event did not go through it (`reason`).
    Removed,
}

impl WakeState {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeState::Pending => "pending",
            WakeState::Registered => "registered",
            WakeState::Failed => "failed",
            WakeState::Queued => "queued",
            WakeState::Fired => "fired",
            WakeState::NotFired => "not-fired",
            WakeState::Removed => "removed",
        }
    }
}

/// A job's wake rule (`--wake`): a one-off rule of the interrupt service
/// matching this job's events, registered when the job starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Wake {
    /// The text the agent gets, with `{{key}}` filled from the event's `data`
    /// by the service; without one the service uses `data.message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For a sub-agent: what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    #[serde(default)]
    pub action: WakeAction,
    #[serde(default)]
    pub state: WakeState,
    /// The rule's id at the service (`run-bg-<jobId>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// The rules address it was registered at, for its removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `failed`: what the service answered, or that it did not; `removed`,
    /// `not-fired`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `queued`: when the service queued the end event that matched it (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<u64>,
}
