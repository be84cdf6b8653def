//! What is left behind: reconcile, orphans, process snapshots and the resource tracker's phases.

use super::job::JobView;
use crate::model::job::Job;
use crate::verbs::left_behind;
use crate::verbs::orphans::{OrphanProcess, OrphanReport};
use crate::verbs::resource_tracker::PhaseReport;
use serde::{Deserialize, Serialize};

/// `reconcile`, `run-bg reconcile --json`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "ReconcileResult"))]
#[serde(rename_all = "camelCase")]
pub struct ReconcileView {
    pub orphaned: Vec<JobView>,
    pub lost: Vec<JobView>,
}

impl ReconcileView {
    pub fn new(orphaned: &[Job], lost: &[Job]) -> ReconcileView {
        ReconcileView { orphaned: orphaned.iter().map(JobView::from).collect(), lost: lost.iter().map(JobView::from).collect() }
    }
}

/// A process left behind by an ended (or orphaned) job.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "OrphanInfo"))]
#[serde(rename_all = "camelCase")]
pub struct OrphanView {
    pub job_id: String,
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::job_status"))]
    pub job_status: String,
    pub pid: u32,
    pub command: String,
    /// Why it could not be killed (in `failed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl OrphanView {
    fn new(orphan: &OrphanProcess, reason: Option<&String>) -> OrphanView {
        OrphanView {
            job_id: orphan.job_id.clone(),
            job_status: orphan.job_status.as_str().to_string(),
            pid: orphan.process.identity.pid,
            command: orphan.process.command.clone(),
            reason: reason.cloned(),
        }
    }
}

/// `cleanupOrphans`, `run-bg orphans --json`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "CleanupReport"))]
#[serde(rename_all = "camelCase")]
pub struct OrphanReportView {
    /// Jobs whose supervisor is gone while their processes run.
    pub orphaned_jobs: Vec<JobView>,
    /// Every process found that belongs to an ended or orphaned job.
    pub processes: Vec<OrphanView>,
    /// With `mode: 'kill'`: the processes removed.
    pub killed: Vec<OrphanView>,
    /// With `mode: 'kill'`: the processes that could not be removed, with `reason`.
    pub failed: Vec<OrphanView>,
}

impl From<&OrphanReport> for OrphanReportView {
    fn from(report: &OrphanReport) -> OrphanReportView {
        OrphanReportView {
            orphaned_jobs: report.orphaned_jobs.iter().map(JobView::from).collect(),
            processes: report.found.iter().map(|o| OrphanView::new(o, None)).collect(),
            killed: report.killed.iter().map(|o| OrphanView::new(o, None)).collect(),
            failed: report.failed.iter().map(|(o, why)| OrphanView::new(o, Some(why))).collect(),
        }
    }
}

/// A process in a snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "ProcessInfo"))]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfoView {
    pub pid: u32,
    pub ppid: u32,
    /// Full argv joined with spaces (`[name]` for kernel threads).
    pub command: String,
    /// Resident set size in MiB.
    pub memory_mb: f64,
    /// Start time, milliseconds since the epoch: with the pid it identifies the process.
    #[serde(deserialize_with = "whole_number")]
    pub start_time: u64,
    /// The program (argv[0]'s or the executable's base name, or the script an
    /// interpreter such as node or npx runs) matches one of
    /// `diagnostics.resource_tracking.mcp_patterns`.
    pub is_mcp: bool,
    /// The job that owns the process (`run-bg ps --json` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

impl From<&left_behind::ProcessInfo> for ProcessInfoView {
    fn from(p: &left_behind::ProcessInfo) -> ProcessInfoView {
        ProcessInfoView {
            pid: p.pid,
            ppid: p.ppid,
            command: p.command.clone(),
            memory_mb: p.memory_mb,
            start_time: p.start_time,
            is_mcp: p.is_mcp,
            job_id: p.job_id.clone(),
        }
    }
}

impl From<&ProcessInfoView> for left_behind::ProcessInfo {
    fn from(p: &ProcessInfoView) -> left_behind::ProcessInfo {
        left_behind::ProcessInfo {
            pid: p.pid,
            ppid: p.ppid,
            command: p.command.clone(),
            memory_mb: p.memory_mb,
            start_time: p.start_time,
            is_mcp: p.is_mcp,
            job_id: p.job_id.clone(),
        }
    }
}

/// A whole number read back from JS, where every number is a double (a
/// millisecond time is past what a u32 holds, so it arrives as a float).
fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<u64, D::Error> {
    let n = f64::deserialize(deserializer)?;
    // Up to 2^53: beyond, a double no longer holds every whole number.
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 {
        Ok(n as u64)
    } else {
        Err(serde::de::Error::custom(format!("{n} is not a whole number >= 0")))
    }
}

/// `snapshot`, `run-bg ps --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "ProcessSnapshot"))]
#[serde(rename_all = "camelCase")]
pub struct SnapshotView {
    /// Milliseconds since the epoch.
    #[serde(deserialize_with = "whole_number")]
    pub timestamp: u64,
    pub processes: Vec<ProcessInfoView>,
    /// Sum of the resident memory of the processes, in MiB.
    pub total_memory_mb: f64,
}

impl SnapshotView {
    /// The snapshot with only the processes `shown` lets through (`ps --mcp`);
    /// the total stays that of every process.
    pub fn new(snapshot: &left_behind::Snapshot, shown: impl Fn(&left_behind::ProcessInfo) -> bool) -> SnapshotView {
        SnapshotView {
            timestamp: snapshot.timestamp,
            processes: snapshot.processes.iter().filter(|p| shown(p)).map(ProcessInfoView::from).collect(),
            total_memory_mb: snapshot.total_memory_mb,
        }
    }
}

/// A snapshot or a process list as `snapshot()` gives them.
#[derive(Deserialize)]
#[serde(untagged)]
enum Processes {
    Snapshot(SnapshotView),
    List(Vec<ProcessInfoView>),
}

/// What `detectOrphans` takes as `name` (`before`, `after`): a `snapshot()`
/// result or an array of its processes; anything else refused saying so.
pub fn processes_from_json(name: &str, value: serde_json::Value) -> crate::Result<Vec<left_behind::ProcessInfo>> {
    let processes = match serde_json::from_value::<Processes>(value) {
        Ok(Processes::Snapshot(s)) => s.processes,
        Ok(Processes::List(list)) => list,
        Err(_) => {
            return Err(crate::Error::Usage(format!(
                "bad {name}: give a snapshot() result or an array of its processes \
                 ({{ pid, ppid, command, memoryMb, startTime, isMcp }})"
            )))
        }
    };
    Ok(processes.iter().map(left_behind::ProcessInfo::from).collect())
}

/// `ResourceTracker.snapshotAfter`: what a phase left behind.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "PhaseResult"))]
#[serde(rename_all = "camelCase")]
pub struct PhaseView {
    pub label: String,
    /// Processes the phase left behind, MCP ones first.
    pub orphans: Vec<ProcessInfoView>,
    /// `ancestry` (the tracking process is a child subreaper during the phase:
    /// new processes orphaned below it, with their descendants), `cookie`
    /// (`tracker.env()` was handed out: new carriers of it too), or `disabled`.
    /// Never run-bg supervisors, processes of other jobs, or this process's
    /// own live children.
    pub rule: String,
    /// Memory of the tracked processes (below this process, and cookie carriers) at `snapshotBefore`, in MiB.
    pub memory_before_mb: f64,
    /// The same at `snapshotAfter`.
    pub memory_after_mb: f64,
    pub memory_delta_mb: f64,
    /// The warnings also logged (orphans found, memory growth or memory left over the threshold).
    pub warnings: Vec<String>,
    /// Memory of the processes left behind (`orphans`), in MiB.
    pub orphan_memory_mb: f64,
    /// `pss` (proportional set size from /proc/<pid>/smaps_rollup, for every process) or `rss`.
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::memory_source"))]
    pub memory_source: String,
}

impl PhaseView {
    /// `report` of the phase `label`; `None`: the tracker is disabled.
    pub fn new(label: &str, report: Option<&PhaseReport>) -> PhaseView {
        match report {
            Some(r) => PhaseView {
                label: r.label.clone(),
                orphans: r.orphans.iter().map(ProcessInfoView::from).collect(),
                rule: r.rule.as_str().to_string(),
                memory_before_mb: r.memory_before_mb,
                memory_after_mb: r.memory_after_mb,
                memory_delta_mb: r.memory_delta_mb,
                warnings: r.warnings.clone(),
                orphan_memory_mb: r.orphan_memory_mb,
                memory_source: r.memory_source.as_str().to_string(),
            },
            None => PhaseView {
                label: label.to_string(),
                orphans: Vec::new(),
                rule: "disabled".to_string(),
                memory_before_mb: 0.0,
                memory_after_mb: 0.0,
                memory_delta_mb: 0.0,
                warnings: Vec::new(),
                orphan_memory_mb: 0.0,
                memory_source: "rss".to_string(),
            },
        }
    }
}
