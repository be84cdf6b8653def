//! `up` and `down` of a stack file.

use super::control::KillView;
use serde::Serialize;

/// `up`, `run-bg up --json`: what each process of the stack became.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "StackUpResult"))]
#[serde(rename_all = "camelCase")]
pub struct StackUpView {
    /// The stack file read.
    pub file: String,
    /// The owner of the stack's jobs (`listJobs({ owner })` shows them).
    pub owner: String,
    /// In the order they were started: each after what it runs after.
    pub processes: Vec<StackProcessView>,
    /// With `yieldMs`: whether every process is up (ready, running, or a task that ended with exit 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// With `yieldMs`: what was not up, one line a process (`web: failed (exit 1) (run-bg check web-3f2a1c)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "StackProcess"))]
#[serde(rename_all = "camelCase")]
pub struct StackProcessView {
    /// The process's name in the file: its job's label.
    pub name: String,
    /// Absent when it could not even be submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `already running`: a job of the stack with this label runs (or waits in its queue).
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::up_action"))]
    pub action: String,
    /// Queued: the processes it waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
    /// Failed, skipped (a process it runs after had failed already): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<&crate::verbs::stack::StackUp> for StackUpView {
    fn from(up: &crate::verbs::stack::StackUp) -> StackUpView {
        use crate::model::text::visible;
        StackUpView {
            file: crate::model::os_text::escaped(up.file.as_os_str()).into_owned(),
            owner: up.owner.clone(),
            processes: up
                .processes
                .iter()
                .map(|e| StackProcessView {
                    name: e.name.clone(),
                    job_id: e.job_id.clone(),
                    pid: e.pid,
                    action: e.action.as_str().to_string(),
                    waiting_for: e.waiting_for.clone(),
                    error: e.error.as_deref().map(|m| visible(m).into_owned()),
                })
                .collect(),
            ready: up.settled.as_ref().map(|s| s.is_ok()),
            problems: match &up.settled {
                Some(Err(problems)) => problems.iter().map(|p| visible(p).into_owned()).collect(),
                _ => Vec::new(),
            },
        }
    }
}

/// `down`, `run-bg down --json`: what was killed, what runs after others first.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "StackDownResult"))]
#[serde(rename_all = "camelCase")]
pub struct StackDownView {
    pub file: String,
    pub owner: String,
    /// In the order killed.
    pub killed: Vec<StackKillView>,
}

/// A `KillResult` with the process's name.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "StackKillResult", extend("x-ts-extends" = "KillResult")))]
#[serde(rename_all = "camelCase")]
pub struct StackKillView {
    /// The process's name in the file.
    pub name: String,
    #[serde(flatten)]
    pub kill: KillView,
}

impl From<&crate::verbs::stack::StackDown> for StackDownView {
    fn from(down: &crate::verbs::stack::StackDown) -> StackDownView {
        StackDownView {
            file: crate::model::os_text::escaped(down.file.as_os_str()).into_owned(),
            owner: down.owner.clone(),
            killed: down
                .killed
                .iter()
                .map(|(name, result)| StackKillView {
                    name: name.clone(),
                    kill: match result {
                        Ok(outcome) => KillView::from(outcome),
                        Err((job_id, e)) => KillView::refused(job_id, e),
                    },
                })
                .collect(),
        }
    }
}
