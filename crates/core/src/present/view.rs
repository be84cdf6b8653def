//! Every public shape the faces return, defined once: the CLI prints these
//! with serde_json (`--json`) and the napi addon hands the same serialization
//! to JS, so the two cannot drift. Field names are camelCase, as the JS API
//! (index.d.ts) names them. A field that has no value is left out (not `null`),
//! as the JS API has always done: `undefined` in JS, absent in JSON.

use crate::model::job::{Job, JobStatus};
use crate::os::procinfo::ProcessEntry;
use crate::verbs::check::CheckResult;
use crate::verbs::kill::KillOutcome;
use crate::verbs::logs::LogRead;
use crate::verbs::orphans::{OrphanProcess, OrphanReport};
use crate::verbs::wait::WaitOutcome;
use crate::verbs::left_behind;
use crate::verbs::resource_tracker::PhaseReport;
use crate::verbs::request::Started;
use crate::now_ms;
use serde::{Deserialize, Serialize};

/// A job as recorded, with its status verified against the OS (`listJobs`,
/// `run-bg list --json`; the head of every other job shape).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub job_id: String,
    pub label: String,
    pub command: String,
    /// running | paused | success | failed | killed | timeout | orphaned | lost | queued | skipped
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Milliseconds since the epoch.
    pub started_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    pub duration_ms: u64,
    pub log_path: String,
    pub cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
    /// Why the job could not start, or what went wrong around it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The announcement of the job's end: `eventId`, `state` (pending,
    /// queued, ignored, failed, no-listener, delivered), `attempts`, `lastError`,
    /// `matched`, `reason`, `level`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notification: Option<NotificationView>,
    pub hooks: Vec<HookView>,
    /// Peak RSS of the job's largest process, once it has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_mb: Option<f64>,
    /// When the job was seen ready (`--ready-log/-port/-url`), ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<u64>,
    /// What kept it from being ready, while it was not: `port 3000 is held
    /// by pid 812 (nginx), not by this job`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_blocked: Option<String>,
    /// `--restart`: how many times the main process was started again (0 so far).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// How the run before the last restart ended (`exit 1`, `signal SIGSEGV`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restart: Option<String>,
    /// When that run ended (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restart_at: Option<u64>,
    /// `pipe` for a job started with `--stdin pipe` (`send` writes to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// The job's wake rule at the interrupt service (`--wake`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake: Option<WakeView>,
    /// Its queue (`--queue`, or `default`), for a job that waited or waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// `--priority`, when not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// `--after`: the jobs it runs after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// Queued: its place, 1 = next to start (in its queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// Queued: the jobs of `after` that have not ended yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Vec<String>>,
    /// `--tie`: the process whose end kills the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tie: Option<TieView>,
    /// When `pause` stopped its tree (ms since the epoch), while it is paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<u64>,
    /// The job this one is a rerun of (`rerun`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
    /// The agent harness session it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// `--outlive-session`: its session's end leaves it running.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub outlive_session: bool,
}

impl JobView {
    /// With a queued job's place (`list` knows it, from every job).
    pub fn placed(mut self, place: Option<&crate::verbs::request::QueuedPlace>) -> JobView {
        if let Some(place) = place {
            self.position = Some(place.position);
            self.waiting_for = Some(place.after.clone());
        }
        self
    }
}

/// `pending` (being registered), `registered`, `failed` (`reason`), `fired`
/// (the end event matched it; the service removes it), `removed` (by us: the
/// end event did not go through it; `reason`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WakeView {
    pub state: String,
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TieView {
    /// The process watched.
    pub pid: u32,
    /// When it ended and the job was killed for it (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<u64>,
    /// `its caller (pid N) exited`, once it fired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NotificationView {
    pub event_id: String,
    /// `pending` (being retried), `queued` (the interrupt service queued it
    /// for the agent), `ignored` (it took it and passes it to no one),
    /// `failed` (refused, or given up on), `no-listener` (no service at the
    /// default address), `delivered` (a 2xx from another kind of receiver).
    pub state: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<u64>,
    /// `queued`: how many of the service's rules matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<u32>,
    /// `ignored`: the service's reason; `failed`: what the refusal said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The interrupt service's level it was sent at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HookView {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> JobView {
        JobView {
            job_id: job.id.clone(),
            label: job.label.clone(),
            command: job.command.clone(),
            status: job.shown_status().as_str().to_string(),
            exit_code: job.exit_code(),
            signal: job.signal(),
            pid: job.pid(),
            started_at: job.started_at,
            ended_at: job.ended_at(),
            duration_ms: job.duration_ms(now_ms()),
            log_path: crate::model::os_text::escaped(job.log_path.as_os_str()).into_owned(),
            // Text for the JSON API: bytes that are no UTF-8 written out (`caf\xe9`).
            cwd: crate::model::os_text::escaped(job.cwd.as_os_str()).into_owned(),
            owner: job.owner.clone(),
            context: job.context.clone(),
            error: job.error().map(str::to_string),
            notification: job.notification.as_ref().map(|n| NotificationView {
                event_id: n.event_id.clone(),
                state: n.state.as_str().to_string(),
                attempts: n.attempts,
                last_error: n.last_error.clone(),
                delivered_at: n.delivered_at,
                matched: n.matched,
                reason: n.reason.clone(),
                level: n.level.clone(),
            }),
            hooks: job
                .hooks
                .iter()
                .map(|h| HookView {
                    command: h.command.clone(),
                    exit_code: h.exit_code,
                    error: h.error.clone(),
                    duration_ms: h.duration_ms,
                })
                .collect(),
            peak_rss_mb: job.peak_rss_kb.map(kb_to_mb),
            ready_at: job.ready_at,
            ready_blocked: job.ready_blocked.clone().filter(|_| job.ready_at.is_none()),
            restarts: job.restart.as_ref().map(|r| r.count),
            last_restart: job.restart.as_ref().and_then(|r| r.last_reason.clone()),
            last_restart_at: job.restart.as_ref().and_then(|r| r.last_at),
            stdin: job.stdin_pipe.then(|| "pipe".to_string()),
            wake: job.wake.as_ref().map(|w| WakeView {
                state: w.state.as_str().to_string(),
                action: w.action.as_str().to_string(),
                rule_id: w.rule_id.clone(),
                message: w.message.clone(),
                reason: w.reason.clone(),
            }),
            queue: job.waits.as_ref().and_then(|w| w.queue.clone()),
            priority: job.waits.as_ref().map(|w| w.priority).filter(|&p| p != 0),
            after: job.waits.as_ref().map(|w| w.after.clone()).filter(|a| !a.is_empty()),
            position: None,
            waiting_for: None,
            tie: job.tie.as_ref().map(|t| TieView {
                pid: t.to.pid,
                fired_at: t.fired_at,
                reason: t.fired_at.map(|_| t.reason()),
            }),
            paused_at: job.paused_at,
            rerun_of: job.rerun_of.clone(),
            session: job.session.clone(),
            outlive_session: job.outlive_session,
        }
    }
}

pub fn kb_to_mb(kb: u64) -> f64 {
    (kb as f64 / 1024.0 * 10.0).round() / 10.0
}

/// `checkJob`, `run-bg check --json`: the job plus the last lines of its output.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CheckView {
    #[serde(flatten)]
    pub job: JobView,
    /// Last lines of output, oldest first.
    pub tail: Vec<String>,
    /// Where the log stood after the last complete line read: `readLog` with
    /// `since` gives only what came after.
    pub cursor: u64,
    /// Why `cursor` is not to be used: the log's start record is corrupt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_problem: Option<String>,
    /// Processes still running although the main process ended.
    pub lingering: Vec<ProcessView>,
    /// How many of the job's processes run now, and their resident memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_mb: Option<f64>,
}

impl From<&CheckResult> for CheckView {
    fn from(check: &CheckResult) -> CheckView {
        CheckView {
            job: JobView::from(&check.job),
            tail: check.tail.clone(),
            cursor: check.cursor,
            log_problem: check.log_problem.clone(),
            lingering: check.lingering.iter().map(ProcessView::from).collect(),
            processes: check.usage.map(|u| u.processes),
            rss_mb: check.usage.map(|u| kb_to_mb(u.rss_kb)),
        }
    }
}

/// One of a job's processes.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProcessView {
    pub pid: u32,
    /// argv joined with spaces.
    pub command: String,
}

impl From<&ProcessEntry> for ProcessView {
    fn from(entry: &ProcessEntry) -> ProcessView {
        ProcessView { pid: entry.identity.pid, command: entry.command.clone() }
    }
}

/// A job directory whose record cannot be read, as `list` shows it beside
/// the jobs: `status` is `corrupt`, `error` says why and what removes it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CorruptJobView {
    pub job_id: String,
    pub status: String,
    /// The job.json that cannot be read.
    pub record_file: String,
    pub error: String,
}

impl From<&crate::store::registry::CorruptRecord> for CorruptJobView {
    fn from(record: &crate::store::registry::CorruptRecord) -> CorruptJobView {
        CorruptJobView {
            job_id: record.id.clone(),
            status: "corrupt".to_string(),
            record_file: record.file.display().to_string(),
            error: record.describe(),
        }
    }
}

/// `runBackground`, `run-bg --json`: the job just started.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StartView {
    pub job_id: String,
    /// Absent while the job is queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub log_path: String,
    pub label: String,
    /// `running` (the call returns once the main process runs), or `queued`.
    pub status: String,
    /// Said about the request without refusing it (a wake template's unknown keys).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Queued: its place, 1 = next to start (in its queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// Queued: its queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Queued: the jobs it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Vec<String>>,
}

impl From<&Started> for StartView {
    fn from(started: &Started) -> StartView {
        StartView {
            job_id: started.job_id.clone(),
            pid: started.pid,
            log_path: crate::model::os_text::escaped(started.log_path.as_os_str()).into_owned(),
            label: started.label.clone(),
            status: match started.queued {
                Some(_) => JobStatus::Queued.as_str().to_string(),
                None => JobStatus::Running.as_str().to_string(),
            },
            position: started.queued.as_ref().map(|q| q.position),
            queue: started.queued.as_ref().and_then(|q| q.queue.clone()),
            waiting_for: started.queued.as_ref().map(|q| q.after.clone()).filter(|a| !a.is_empty()),
            warnings: started.warnings.clone(),
        }
    }
}

/// `run-bg --json` for a job that could not start (the JS API throws instead).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartFailedView {
    pub job_id: String,
    pub status: String,
    pub error: String,
}

impl StartFailedView {
    pub fn new(job_id: &str, error: &str) -> StartFailedView {
        StartFailedView { job_id: job_id.to_string(), status: JobStatus::Failed.as_str().to_string(), error: error.to_string() }
    }
}

/// `runYield`: whether the job ended within the time given, and if so its check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct YieldView {
    pub job_id: String,
    /// True when the job ended in time; then `check` holds its outcome.
    pub done: bool,
    /// True when the job has a readiness check and was seen ready in time;
    /// then `check` holds it, still running. (Its readiness timeout passing
    /// first also returns `check`, with `ready` false.)
    pub ready: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckView>,
}

/// `waitJob`, and each job of `run-bg wait --json`: the job and how the wait ended.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobResultView {
    #[serde(flatten)]
    pub job: JobView,
    /// The wait's time limit passed while this job still ran.
    pub timed_out: bool,
    /// The exit status a shell would report (`shell_exit_code`), 124 when
    /// the wait's time limit passed first.
    pub shell_exit_code: i32,
}

/// `run-bg wait --json`: every job waited for, and the status `wait` exits with.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitView {
    pub timed_out: bool,
    pub shell_exit_code: i32,
    pub jobs: Vec<JobResultView>,
}

impl From<&WaitOutcome> for WaitView {
    fn from(outcome: &WaitOutcome) -> WaitView {
        let jobs = outcome
            .jobs
            .iter()
            .map(|job| {
                // Each job as if waited for alone: the same rule as the whole wait's.
                let alone = WaitOutcome { jobs: vec![job.clone()], timed_out: outcome.timed_out && !job.status().is_final() };
                JobResultView { job: JobView::from(job), timed_out: alone.timed_out, shell_exit_code: wait_exit_code(&alone) }
            })
            .collect();
        WaitView { timed_out: outcome.timed_out, shell_exit_code: wait_exit_code(outcome), jobs }
    }
}

/// `killJob`, each entry of `killAll` and of `run-bg kill --json`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct KillView {
    pub job_id: String,
    pub status: String,
    /// Whether a signal was sent (false when the job had already ended).
    pub signalled: bool,
    /// What happened, to show: control characters of user text written out.
    pub message: String,
    /// Why this job could not be killed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<&KillOutcome> for KillView {
    fn from(outcome: &KillOutcome) -> KillView {
        KillView {
            job_id: outcome.job.id.clone(),
            status: outcome.job.status().as_str().to_string(),
            signalled: outcome.signalled,
            message: crate::model::text::visible(&outcome.message).into_owned(),
            error: None,
        }
    }
}

/// `pauseJob` / `resumeJob`, `run-bg pause|resume --json`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PauseView {
    pub job_id: String,
    /// `paused`, or `running` after a resume (`orphaned` for an orphan resumed).
    pub status: String,
    /// While paused: since when (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<u64>,
    /// False when there was nothing to do (already paused; not paused).
    pub changed: bool,
    /// What happened, to show.
    pub message: String,
}

impl From<&crate::verbs::pause::PauseOutcome> for PauseView {
    fn from(outcome: &crate::verbs::pause::PauseOutcome) -> PauseView {
        PauseView {
            job_id: outcome.job.id.clone(),
            status: outcome.job.shown_status().as_str().to_string(),
            paused_at: outcome.job.paused_at,
            changed: outcome.changed,
            message: crate::model::text::visible(&outcome.message).into_owned(),
        }
    }
}

/// `sendInput`, `run-bg send --json`: what went to the job's stdin.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SendView {
    pub job_id: String,
    /// Bytes written (the newline included).
    pub bytes: usize,
    /// Whether the job's stdin was closed after them (`eof`).
    pub closed: bool,
}

impl From<&crate::verbs::send::Sent> for SendView {
    fn from(sent: &crate::verbs::send::Sent) -> SendView {
        SendView { job_id: sent.job_id.clone(), bytes: sent.bytes, closed: sent.closed }
    }
}

impl KillView {
    /// A kill that could not be done (an unknown job, a signal refused).
    pub fn refused(job_id: &str, error: &crate::Error) -> KillView {
        let said = crate::model::text::visible(&error.to_string()).into_owned();
        KillView {
            job_id: job_id.to_string(),
            status: "unknown".to_string(),
            signalled: false,
            message: said.clone(),
            error: Some(said),
        }
    }
}

/// `reconcile`, `run-bg reconcile --json`.
#[derive(Debug, Clone, Serialize)]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrphanView {
    pub job_id: String,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrphanReportView {
    /// Jobs whose supervisor is gone while their processes run.
    pub orphaned_jobs: Vec<JobView>,
    /// Every process found that belongs to an ended or orphaned job.
    pub processes: Vec<OrphanView>,
    /// With kill: the processes removed.
    pub killed: Vec<OrphanView>,
    /// With kill: the processes that could not be removed, with `reason`.
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

/// A process in a snapshot (`snapshot`, `run-bg ps --json`); also what
/// `detectOrphans` reads back.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The program (argv[0], its executable, or the script an interpreter
    /// runs) matches one of `diagnostics.resource_tracking.mcp_patterns`.
    pub is_mcp: bool,
    /// The job that owns the process (`run-bg ps`), where one does.
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
#[serde(rename_all = "camelCase")]
pub struct SnapshotView {
    /// Milliseconds since the epoch.
    #[serde(deserialize_with = "whole_number")]
    pub timestamp: u64,
    pub processes: Vec<ProcessInfoView>,
    /// Sum of the resident memory of every process in the snapshot, in MiB.
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

/// `ResourceTracker.snapshotAfter`: what a phase left behind.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseView {
    pub label: String,
    /// Processes the phase left behind, MCP ones first.
    pub orphans: Vec<ProcessInfoView>,
    /// `cookie`, `ancestry`, or `disabled`.
    pub rule: String,
    /// Memory of the tracked processes (below the tracking process, and
    /// carriers of its cookie) when the phase began, in MiB.
    pub memory_before_mb: f64,
    pub memory_after_mb: f64,
    pub memory_delta_mb: f64,
    /// The warnings also logged.
    pub warnings: Vec<String>,
    /// Memory of the processes left behind (`orphans`), in MiB.
    pub orphan_memory_mb: f64,
    /// `pss` (/proc/<pid>/smaps_rollup, every process) or `rss`.
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

/// `run-bg prune --json` (`pruneJobs` returns the ids alone).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneView {
    pub removed: Vec<String>,
}

/// `run-bg summary --json` (`summary` returns the lines joined).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SummaryView {
    pub lines: Vec<String>,
}

/// `run-bg logs --json`: a job's output lines (lossy UTF-8).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsView {
    pub job_id: String,
    pub lines: Vec<String>,
}

/// One line of `run-bg logs --all --json` and of `followLogs` (lossy UTF-8).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamLineView {
    pub id: String,
    pub label: String,
    pub line: String,
}

/// `run-bg logs --all --json`: the last lines of each job, job after job.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamLinesView {
    pub lines: Vec<StreamLineView>,
}

/// `readLog`, `run-bg logs --since … --json` and MCP `read_log`: lines by
/// number (`fromLine`, `totalLines`) or the lines after a cursor
/// (`rotatedAwayBytes`, `more`), cleaned as `check` shows them, never folded.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogReadView {
    pub job_id: String,
    /// The number of the first line in `lines` (1 = the oldest line kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_line: Option<usize>,
    pub lines: Vec<String>,
    /// How many lines the log holds now (rotated files included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<usize>,
    /// Where the last line in `lines` ends: give it as `since` for what comes next.
    pub cursor: u64,
    /// Why `cursor` is not to be used: the log's start record is corrupt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_problem: Option<String>,
    /// Bytes after the cursor given that were rotated away and deleted; the
    /// lines start at the oldest line kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotated_away_bytes: Option<u64>,
    /// With `since`: more lines follow `cursor` than were asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<bool>,
    /// With a budget of characters: lines asked for that were left out to
    /// keep within it; they start at `cursor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_shown: Option<usize>,
}

impl LogReadView {
    pub fn new(job_id: &str, read: &LogRead) -> LogReadView {
        match read {
            LogRead::Lines(window) => LogReadView {
                job_id: job_id.to_string(),
                from_line: Some(window.first),
                lines: window.lines.clone(),
                total_lines: Some(window.total),
                cursor: window.cursor,
                log_problem: window.record_problem.clone(),
                rotated_away_bytes: None,
                more: None,
                not_shown: (window.not_shown > 0).then_some(window.not_shown),
            },
            LogRead::Since(since) => LogReadView {
                job_id: job_id.to_string(),
                from_line: None,
                lines: since.lines.clone(),
                total_lines: None,
                cursor: since.cursor,
                log_problem: None,
                rotated_away_bytes: (since.rotated_away > 0).then_some(since.rotated_away),
                more: Some(since.more),
                not_shown: (since.not_shown > 0).then_some(since.not_shown),
            },
        }
    }

    /// What every face says before the lines when output was lost to rotation.
    pub fn rotated_note(&self) -> Option<String> {
        self.rotated_away_bytes.map(|n| format!("[{n} bytes rotated away since your cursor]"))
    }
}

/// The exit status to hand on for a job: its own exit code, 128 + signal for
/// a signal, 1 for `lost`. A job ended by `kill` or its timeout that still
/// exited 0 on SIGTERM is reported as 143 (128 + SIGTERM), never as success.
/// (`wait` itself uses 124 when its own `--timeout` passes first.)
pub fn shell_exit_code(job: &Job) -> i32 {
    job.state.shell_exit_code()
}

/// The exit status of a wait for `outcome`'s jobs, as `run-bg wait` exits
/// and the JS API's `shellExitCode` says: 124 (as timeout(1)) when the wait's
/// own time limit passed first, one job's own status (`shell_exit_code`),
/// and for several jobs 0 only when every one succeeded, else 1.
pub fn wait_exit_code(outcome: &WaitOutcome) -> i32 {
    if outcome.timed_out {
        return 124;
    }
    match outcome.jobs.as_slice() {
        [job] => shell_exit_code(job),
        jobs if jobs.iter().all(|j| j.status() == JobStatus::Success) => 0,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{sample_ended as ended, sample_job};


    #[test]
    fn a_job_that_exited_hands_on_its_own_exit_code() {
        assert_eq!(shell_exit_code(&ended(JobStatus::Success, Some(0), None)), 0);
        assert_eq!(shell_exit_code(&ended(JobStatus::Failed, Some(3), None)), 3);
        assert_eq!(shell_exit_code(&ended(JobStatus::Failed, Some(255), None)), 255);
    }

    #[test]
    fn a_job_that_died_of_a_signal_hands_on_128_plus_the_signal() {
        assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, Some("SIGKILL"))), 137);
        assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, Some("SIGSEGV"))), 139);
        assert_eq!(shell_exit_code(&ended(JobStatus::Killed, None, Some("SIGKILL"))), 137, "killed after the grace period");
        assert_eq!(shell_exit_code(&ended(JobStatus::Timeout, None, Some("SIGTERM"))), 143);
    }

    #[test]
    fn a_job_ended_by_us_is_never_a_success() {
        // It caught SIGTERM and exited 0, or no status was recorded at all.
        assert_eq!(shell_exit_code(&ended(JobStatus::Killed, Some(0), None)), 143);
        assert_eq!(shell_exit_code(&ended(JobStatus::Timeout, Some(0), None)), 143);
        assert_eq!(shell_exit_code(&ended(JobStatus::Killed, None, None)), 143);
        assert_eq!(shell_exit_code(&ended(JobStatus::Timeout, None, None)), 143);
        // Its own non-zero code on the way out is handed on as it is.
        assert_eq!(shell_exit_code(&ended(JobStatus::Killed, Some(2), None)), 2);
    }

    #[test]
    fn a_job_without_exit_status_or_known_signal_hands_on_1() {
        assert_eq!(shell_exit_code(&ended(JobStatus::Lost, None, None)), 1);
        assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, None)), 1, "could not start");
        assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, Some("SIG64"))), 1, "a signal name not read back");
        assert_eq!(shell_exit_code(&ended(JobStatus::Orphaned, None, None)), 1);
    }

    #[test]
    fn memory_is_shown_in_mib_to_one_decimal() {
        assert_eq!(kb_to_mb(0), 0.0);
        assert_eq!(kb_to_mb(1024), 1.0);
        assert_eq!(kb_to_mb(1536), 1.5);
        assert_eq!(kb_to_mb(1540), 1.5);
        assert_eq!(kb_to_mb(1100), 1.1);
    }

    #[test]
    fn a_job_view_has_the_fields_spec_names_in_camel_case_and_leaves_out_what_it_lacks() {
        let mut job = ended(JobStatus::Failed, Some(3), None);
        job.peak_rss_kb = Some(2048);
        job.owner = Some("agent-1".into());
        job.context = Some(serde_json::json!({ "ticket": null }));
        job.note = Some("boom".into());
        let value = serde_json::to_value(JobView::from(&job)).unwrap();
        let keys = |value: &serde_json::Value| {
            let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
            keys.sort_unstable();
            keys
        };
        assert_eq!(
            keys(&value),
            [
                "command", "context", "cwd", "durationMs", "endedAt", "error", "exitCode", "hooks", "jobId", "label",
                "logPath", "owner", "peakRssMb", "pid", "startedAt", "status"
            ]
        );
        assert_eq!(value["status"], "failed");
        assert_eq!(value["exitCode"], 3);
        assert_eq!(value["pid"], 4242);
        assert_eq!(value["peakRssMb"], 2.0);
        assert_eq!(value["context"], serde_json::json!({ "ticket": null }), "JSON data keeps its nulls");
        assert_eq!(value["durationMs"], 2 * 3_600_000 + 13 * 60_000);

        let running = serde_json::to_value(JobView::from(&sample_job(JobStatus::Running))).unwrap();
        for absent in ["exitCode", "signal", "endedAt", "notification", "peakRssMb"] {
            assert!(running.get(absent).is_none(), "{absent} is left out, not null: {running}");
        }
    }

    #[test]
    fn a_snapshot_reads_back_what_it_wrote_even_with_its_times_as_floats() {
        let json = r#"{"timestamp": 1795440671592.0, "totalMemoryMb": 3,
            "processes": [{"pid": 7, "ppid": 1, "command": "sleep 1", "memoryMb": 1.5, "startTime": 1795440671000.0, "isMcp": false}]}"#;
        let snapshot: SnapshotView = serde_json::from_str(json).unwrap();
        assert_eq!((snapshot.timestamp, snapshot.processes[0].start_time), (1_795_440_671_592, 1_795_440_671_000));
        let back: SnapshotView = serde_json::from_value(serde_json::to_value(&snapshot).unwrap()).unwrap();
        assert_eq!(back.processes[0].start_time, 1_795_440_671_000);
        assert!(serde_json::from_str::<ProcessInfoView>(
            r#"{"pid": 7, "ppid": 1, "command": "x", "memoryMb": 1, "startTime": 1.5, "isMcp": false}"#
        )
        .is_err());
    }

    #[test]
    fn each_job_of_a_wait_says_whether_the_wait_gave_up_on_it() {
        let running = sample_job(JobStatus::Running);
        let done = ended(JobStatus::Failed, Some(3), None);
        let view = WaitView::from(&WaitOutcome { jobs: vec![done, running], timed_out: true });
        assert_eq!((view.timed_out, view.shell_exit_code), (true, 124));
        let each: Vec<(bool, i32)> = view.jobs.iter().map(|j| (j.timed_out, j.shell_exit_code)).collect();
        assert_eq!(each, [(false, 3), (true, 124)]);
        let value = serde_json::to_value(&view.jobs[0]).unwrap();
        assert_eq!((value["jobId"].as_str(), value["timedOut"].as_bool()), (Some("build-3f2a1c"), Some(false)), "{value}");
    }

    #[test]
    fn a_wait_exits_124_when_its_own_time_limit_passes_first() {
        let running = sample_job(JobStatus::Running);
        assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![running.clone()], timed_out: true }), 124);
        let done = ended(JobStatus::Success, Some(0), None);
        assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![done, running], timed_out: true }), 124);
    }

    #[test]
    fn a_wait_for_one_job_exits_as_the_job_did() {
        for job in [
            ended(JobStatus::Success, Some(0), None),
            ended(JobStatus::Failed, Some(3), None),
            ended(JobStatus::Killed, Some(0), None),
            ended(JobStatus::Failed, None, Some("SIGKILL")),
            ended(JobStatus::Lost, None, None),
        ] {
            let code = shell_exit_code(&job);
            assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![job], timed_out: false }), code);
        }
    }

    #[test]
    fn a_wait_for_several_jobs_exits_0_only_when_all_succeeded() {
        let ok = || ended(JobStatus::Success, Some(0), None);
        assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![ok(), ok()], timed_out: false }), 0);
        let failed = ended(JobStatus::Failed, Some(3), None);
        assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![ok(), failed], timed_out: false }), 1, "1, not the 3");
        let killed = ended(JobStatus::Killed, None, Some("SIGTERM"));
        assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![killed, ok()], timed_out: false }), 1);
    }
}

/// `up`, `run-bg up --json`: what each process of the stack became.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackUpView {
    /// The stack file read.
    pub file: String,
    /// The owner of the stack's jobs (`list --owner` shows them).
    pub owner: String,
    /// In the order they were started: each after what it runs after.
    pub processes: Vec<StackProcessView>,
    /// With a yield: whether every process is up (ready, running, or a task
    /// that ended well); `problems` says what was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackProcessView {
    /// The process's name in the file, its job's label.
    pub name: String,
    /// Absent when it could not even be submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// started | queued | already running | failed | skipped
    pub action: String,
    /// Queued: the processes it waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
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
#[serde(rename_all = "camelCase")]
pub struct StackDownView {
    pub file: String,
    pub owner: String,
    pub killed: Vec<StackKillView>,
}

/// A `KillView` with the process's name.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackKillView {
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
