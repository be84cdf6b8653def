//! Every public shape the faces return, defined once: the CLI prints these
//! with serde_json (`--json`) and the napi addon hands the same serialization
//! to JS, so the two cannot drift. Field names are camelCase, as the JS API
//! (index.d.ts) names them. A field that has no value is left out (not `null`),
//! as the JS API has always done: `undefined` in JS, absent in JSON.

mod control;
mod job;
mod logs;
mod orphans;
mod stack;
#[cfg(test)]
mod tests;
#[cfg(feature = "schema")]
pub(crate) mod unions;

pub use control::{wait_exit_code, JobResultView, KillView, PauseView, SendView, StartFailedView, StartView, WaitView, YieldView};
pub use job::{
    kb_to_mb, shell_exit_code, CheckView, CorruptJobView, HookView, JobView, NotificationView, ProcessView, PruneView, SummaryView, TieView,
    WakeView,
};
pub use logs::{LogReadView, LogsView, StreamLineView, StreamLinesView};
pub use orphans::{processes_from_json, OrphanReportView, OrphanView, PhaseView, ProcessInfoView, ReconcileView, SnapshotView};
pub use stack::{StackDownView, StackKillView, StackProcessView, StackUpView};
