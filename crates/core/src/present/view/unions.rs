//! The string unions of the views' fields as their JSON Schema says them
//! (feature `schema`): each field's values from the core's own enum, and
//! `x-ts`, the TypeScript index.d.ts writes for it (a name it declares once
//! as the union, or a type of its own). The views name these with
//! `schemars(schema_with)`; present/schema.rs exports the result.

use crate::model::job::{DeliveryState, JobStatus, WakeAction, WakeState};
use schemars::{json_schema, Schema, SchemaGenerator};

/// A string of one of `values`; `ts`: the TypeScript index.d.ts writes for
/// it (a name it declares once as the union of `values`, or a type of its own).
fn strings(values: &[&str], ts: Option<&str>) -> Schema {
    match ts {
        Some(ts) => json_schema!({ "type": "string", "enum": values, "x-ts": ts }),
        None => json_schema!({ "type": "string", "enum": values }),
    }
}

fn statuses() -> Vec<&'static str> {
    JobStatus::ALL.iter().map(|s| s.as_str()).collect()
}

/// A job's status: index.d.ts's `JobStatus`.
pub(crate) fn job_status(_: &mut SchemaGenerator) -> Schema {
    let mut schema = strings(&statuses(), Some("JobStatus"));
    schema.insert("x-ts-doc".into(), "A job's status, verified against the OS.".into());
    schema
}

/// A kill's status: the job's, or `unknown` where it could not be killed.
pub(crate) fn kill_status(_: &mut SchemaGenerator) -> Schema {
    let mut values = statuses();
    values.push("unknown");
    strings(&values, Some("JobStatus | 'unknown'"))
}

/// A start's status: running, or queued for a slot, as the JS API returns
/// it (index.d.ts's union). No `enum`: the MCP tool's answer for a start
/// that failed has this shape too, with `failed` (the JS API throws instead).
pub(crate) fn start_status(_: &mut SchemaGenerator) -> Schema {
    let ts = format!("'{}' | '{}'", JobStatus::Running.as_str(), JobStatus::Queued.as_str());
    json_schema!({ "type": "string", "x-ts": ts })
}

/// A notification's state: index.d.ts's `NotificationState`.
pub(crate) fn delivery_state(_: &mut SchemaGenerator) -> Schema {
    use DeliveryState::*;
    let all = [Pending, Queued, Ignored, Failed, NoListener, Delivered];
    // No wildcard: a state added to the enum fails to build here until listed above.
    let values: Vec<&str> = all.iter().map(|s| match s { Pending | Queued | Ignored | Failed | NoListener | Delivered => s.as_str() }).collect();
    let mut schema = strings(&values, Some("NotificationState"));
    schema.insert(
        "x-ts-doc".into(),
        "What became of an exit notification, as the receiver answered it:
`pending` (being retried: refused connection, timeout, 5xx), `queued` (the
interrupt service queued it for the agent), `ignored` (it took it and
passes it to no one, e.g. `info` matching no rule), `failed` (a 4xx, 3
server errors, or a day of retries), `no-listener` (nothing listens at the
default address: no service installed), `delivered` (a 2xx from a receiver
that is not the interrupt service; also older records)."
            .into(),
    );
    schema
}

/// The interrupt service's levels.
pub(crate) fn level(_: &mut SchemaGenerator) -> Schema {
    strings(&crate::store::config::LEVELS, None)
}

pub(crate) fn wake_state(_: &mut SchemaGenerator) -> Schema {
    use WakeState::*;
    let all = [Pending, Registered, Failed, Queued, Fired, NotFired, Removed];
    // No wildcard: a state added to the enum fails to build here until listed above.
    let values: Vec<&str> =
        all.iter().map(|s| match s { Pending | Registered | Failed | Queued | Fired | NotFired | Removed => s.as_str() }).collect();
    strings(&values, None)
}

pub(crate) fn wake_action(_: &mut SchemaGenerator) -> Schema {
    use WakeAction::*;
    let values: Vec<&str> = [Message, Subagent].iter().map(|a| match a { Message | Subagent => a.as_str() }).collect();
    strings(&values, None)
}

/// A job's `stdin`, shown only when it is a pipe.
pub(crate) fn stdin_pipe(_: &mut SchemaGenerator) -> Schema {
    strings(&["pipe"], None)
}

/// A corrupt record's status.
pub(crate) fn corrupt(_: &mut SchemaGenerator) -> Schema {
    strings(&["corrupt"], None)
}

pub(crate) fn up_action(_: &mut SchemaGenerator) -> Schema {
    use crate::verbs::stack::UpAction::*;
    let all = [Started, Queued, AlreadyRunning, Failed, Skipped];
    let values: Vec<&str> =
        all.iter().map(|a| match a { Started | Queued | AlreadyRunning | Failed | Skipped => a.as_str() }).collect();
    strings(&values, None)
}

pub(crate) fn memory_source(_: &mut SchemaGenerator) -> Schema {
    use crate::verbs::resource_tracker::MemorySource::*;
    let values: Vec<&str> = [Pss, Rss].iter().map(|m| match m { Pss | Rss => m.as_str() }).collect();
    strings(&values, None)
}
