//! The job as every verb shows it (`list`, `check`), its parts, and the exit status it hands on.

use crate::model::job::Job;
use crate::os::procinfo::ProcessEntry;
use crate::verbs::check::CheckResult;
use crate::now_ms;
use serde::Serialize;

/// A job as recorded, with its status verified against the OS.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "JobSummary"))]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub job_id: String,
    pub label: String,
    pub command: String,
    /// running | paused | success | failed | killed | timeout | orphaned | lost | queued | skipped
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::job_status"))]
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
    /// The announcement of the job's end to the interrupt service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notification: Option<NotificationView>,
    /// Command hooks run when the job ended.
    pub hooks: Vec<HookView>,
    /// Peak RSS of the job's largest process in MiB, once it has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_mb: Option<f64>,
    /// When the job was seen ready (`readyLog`/`readyPort`/`readyUrl`), ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<u64>,
    /// Not ready yet (or never was): what stands in the way, e.g. `port 3000 is held by pid 812 (nginx), not by this job`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_blocked: Option<String>,
    /// With `restart`: how many times its main process was started again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// How the run before the last restart ended (`exit 1`, `signal SIGSEGV`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restart: Option<String>,
    /// When that run ended (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_restart_at: Option<u64>,
    /// While it waits out the restart delay: when its next run starts (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<u64>,
    /// `pipe` when started with `stdin: 'pipe'` (`sendInput` writes to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::stdin_pipe"))]
    pub stdin: Option<String>,
    /// The job's wake rule at the interrupt service (`wake` / `--wake`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake: Option<WakeView>,
    /// Its queue (`queue`, or `default`), for a job that waited or waits for a slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Its `priority`, when not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The jobs it runs `after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// `listJobs`, queued: its place, 1 = next to start (in its queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// `listJobs`, queued: the jobs of `after` that have not ended yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Vec<String>>,
    /// `tie`/`tiePid`: the process whose exit kills the job's tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tie: Option<TieView>,
    /// While `pauseJob` holds it (status `paused`): since when, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<u64>,
    /// `rerunJob`: the job this one starts again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
    /// The agent harness session it belongs to (`session`, `RUN_BG_SESSION`, or the harness that started it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// `outliveSession`: its session's end leaves it running.
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

/// `pending` (being registered), `registered`, `failed` (`reason`), `queued`
/// (the end event matched it; the service has not dispatched it yet), `fired`
/// (the service dispatched it and removed the one-off rule), `not-fired` (the
/// service still had it after its batch window and dispatch: its `openclaw`
/// call failed or it restarted and lost its queue; removed by us, `reason`),
/// `removed` (by us, with DELETE: the end event did not go through it; `reason`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "WakeInfo"))]
#[serde(rename_all = "camelCase")]
pub struct WakeView {
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::wake_state"))]
    pub state: String,
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::wake_action"))]
    pub action: String,
    /// `run-bg-<jobId>`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "TieInfo"))]
#[serde(rename_all = "camelCase")]
pub struct TieView {
    /// The process watched.
    pub pid: u32,
    /// When it exited and the job was killed for it (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<u64>,
    /// Once it fired: `its caller (pid N) exited` (`tie: true`), `the process it was tied to (pid N) exited` (`tiePid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "NotificationInfo"))]
#[serde(rename_all = "camelCase")]
pub struct NotificationView {
    /// `<jobId>:<status>`, stable across retries.
    pub event_id: String,
    /// `pending` (being retried), `queued` (the interrupt service queued it
    /// for the agent), `ignored` (it took it and passes it to no one),
    /// `failed` (refused, or given up on), `no-listener` (no service at the
    /// default address), `delivered` (a 2xx from another kind of receiver).
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::delivery_state"))]
    pub state: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the receiver took it (queued, ignored, delivered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<u64>,
    /// `queued`: how many of the service's rules matched (0: its default action for the level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<u32>,
    /// `ignored`: the service's reason; `failed`: what the refusal said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The interrupt service's level it was sent at: `info`, `warn` or `alert`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::level"))]
    pub level: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "HookInfo"))]
#[serde(rename_all = "camelCase")]
pub struct HookView {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why it failed (exited non-zero, timed out, could not start).
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
            // Past while paused between runs: then no time is known.
            next_run_at: job.restart.as_ref().and_then(|r| r.next_run_at).filter(|&at| !job.status().is_final() && at > crate::now_ms()),
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

/// `checkJob`'s answer (`run-bg check --json`): the job plus the last lines of its output.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "CheckResult", extend("x-ts-extends" = "JobSummary")))]
#[serde(rename_all = "camelCase")]
pub struct CheckView {
    #[serde(flatten)]
    pub job: JobView,
    /// Last lines of output, oldest first, cleaned and folded as `run-bg check`
    /// shows them (`same [×3]`). With `errors`, groups are parted by `--`, and
    /// where the look stopped at its bound (200,000 lines or 64 MiB) the first
    /// line says so: `[none in the last N lines; earlier lines not searched]` or
    /// `[only the last N lines were searched]`.
    pub tail: Vec<String>,
    /// Where the log stood after its last complete line when the tail was read:
    /// `readLog(jobId, { since: cursor })` gives only what came after.
    pub cursor: u64,
    /// Present when `cursor` is not to be used: the log's start record
    /// (`.output.log.start`) is corrupt, so where the kept lines lie in
    /// everything written is unknown; reads by cursor are refused saying so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_problem: Option<String>,
    /// Processes still running although the main process ended (or its supervisor died).
    pub lingering: Vec<ProcessView>,
    /// How many of the job's processes run now (running or lingering).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// Their resident memory now, in MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_mb: Option<f64>,
    /// With `text: true`: this check as `checkJobText` writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
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
            text: None,
        }
    }
}

/// One of a job's processes.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "JobProcess"))]
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

/// A job directory whose `job.json` cannot be read: listed (without a
/// `status` or `owner` filter) so that it does not vanish; `killJob` or
/// `prune` removes its directory.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "CorruptJob"))]
#[serde(rename_all = "camelCase")]
pub struct CorruptJobView {
    pub job_id: String,
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::corrupt"))]
    pub status: String,
    /// The `job.json` that cannot be read.
    pub record_file: String,
    /// Why, and what removes it.
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

/// `run-bg prune --json` (`pruneJobs` returns the ids alone).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneView {
    pub removed: Vec<String>,
}

/// `run-bg summary --json` (`summary` returns the lines joined).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "Summary"))]
#[serde(rename_all = "camelCase")]
pub struct SummaryView {
    pub lines: Vec<String>,
}

/// The exit status to hand on for a job: its own exit code, 128 + signal for
/// a signal, 1 for `lost`. A job ended by `kill` or its timeout that still
/// exited 0 on SIGTERM is reported as 143 (128 + SIGTERM), never as success.
/// (`wait` itself uses 124 when its own `--timeout` passes first.)
pub fn shell_exit_code(job: &Job) -> i32 {
    job.state.shell_exit_code()
}
