//! What the verbs that start and steer a job return: start, yield, wait, kill, pause, send.

use super::job::{shell_exit_code, CheckView, JobView};
use crate::model::job::{Job, JobStatus};
use crate::verbs::kill::KillOutcome;
use crate::verbs::request::Started;
use crate::verbs::wait::WaitOutcome;
use serde::Serialize;

/// `runBackground`, `run-bg --json`: the job just started.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "RunResult"))]
#[serde(rename_all = "camelCase")]
pub struct StartView {
    pub job_id: String,
    /// Absent while the job is queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub log_path: String,
    pub label: String,
    /// `running` once the main process runs; `queued` while it waits (`queue`, `after`).
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::start_status"))]
    pub status: String,
    /// Said about the request without refusing it (a wake template's unknown `{{key}}`s).
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "YieldResult"))]
#[serde(rename_all = "camelCase")]
pub struct YieldView {
    pub job_id: String,
    /// True when the job ended within `yieldMs`; then `check` holds its outcome.
    pub done: bool,
    /// True when the job has a readiness check and was ready within `yieldMs`
    /// (then `check` holds it, still running). Its readiness timeout passing
    /// first also gives `check`, with `ready` false.
    pub ready: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckView>,
}

/// `waitJob`'s answer (each of `run-bg wait --json`'s `jobs`): the job and how the wait ended.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "JobResult", extend("x-ts-extends" = "JobSummary")))]
#[serde(rename_all = "camelCase")]
pub struct JobResultView {
    #[serde(flatten)]
    pub job: JobView,
    /// `timeoutMs` passed while the job still ran.
    pub timed_out: bool,
    /// The exit status a shell would report (128+signal for a signal), or
    /// 124 when `timeoutMs` passed first, as `run-bg wait` exits; with
    /// `ready`, 0 once the job is ready (1 for one that ended with exit 0 first).
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

impl WaitView {
    /// A wait until the jobs were ready (`wait --ready`, `waitJob` with
    /// `ready`): each status as `ready_exit_code` gives it, the whole wait's
    /// and each job's (a ready job read 1, a running job's status).
    pub fn until_ready(outcome: &WaitOutcome) -> WaitView {
        let mut view = WaitView::from(outcome);
        view.shell_exit_code = ready_exit_code(&outcome.jobs, outcome.timed_out);
        for (shown, job) in view.jobs.iter_mut().zip(&outcome.jobs) {
            // A job that became ready did not time out, whatever another did.
            shown.timed_out = outcome.timed_out && job.ready_at.is_none() && !job.status().is_final();
            shown.shell_exit_code = ready_exit_code(std::slice::from_ref(job), shown.timed_out);
        }
        view
    }
}

/// The status of a wait until ready: 0 once every job is; the first job's
/// own status that ended before it was ready (1 where that was exit 0); 124
/// when the time limit or a job's readiness timeout passed first.
pub fn ready_exit_code(jobs: &[Job], timed_out: bool) -> i32 {
    if let Some(ended) = jobs.iter().find(|j| j.ready_at.is_none() && j.status().is_final()) {
        return match ended.state.shell_exit_code() {
            0 => 1,
            code => code,
        };
    }
    if timed_out || jobs.iter().any(|j| j.ready_at.is_none()) {
        return 124;
    }
    0
}

/// `killJob`, each entry of `killAll` and of `run-bg kill --json`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "KillResult"))]
#[serde(rename_all = "camelCase")]
pub struct KillView {
    pub job_id: String,
    /// The job's status after the kill; `unknown` when it could not be killed.
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::kill_status"))]
    pub status: String,
    /// Whether a signal was sent (false when the job had already ended).
    pub signalled: bool,
    /// What happened, to show (control characters of user text written out).
    pub message: String,
    /// In `killAll` results: why this job could not be killed.
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "PauseResult"))]
#[serde(rename_all = "camelCase")]
pub struct PauseView {
    pub job_id: String,
    /// `paused`, or `running` after a resume (`orphaned` for an orphan resumed).
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::present::view::unions::job_status"))]
    pub status: String,
    /// While paused: since when (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<u64>,
    /// False when there was nothing to do (already paused; not paused).
    pub changed: bool,
    /// What happened, to show.
    pub message: String,
    /// Why the job could not be paused or resumed (`run-bg pause --json`
    /// only: the JS API rejects instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub error: Option<String>,
}

impl PauseView {
    /// A job that could not be paused or resumed, as it stands.
    pub fn refused(job: &crate::model::job::Job, error: &crate::Error) -> PauseView {
        let said = crate::model::text::visible(&error.to_string()).into_owned();
        PauseView {
            job_id: job.id.clone(),
            status: job.shown_status().as_str().to_string(),
            paused_at: job.paused_at,
            changed: false,
            message: said.clone(),
            error: Some(said),
        }
    }
}

impl From<&crate::verbs::pause::PauseOutcome> for PauseView {
    fn from(outcome: &crate::verbs::pause::PauseOutcome) -> PauseView {
        PauseView {
            job_id: outcome.job.id.clone(),
            status: outcome.job.shown_status().as_str().to_string(),
            paused_at: outcome.job.paused_at,
            changed: outcome.changed,
            message: crate::model::text::visible(&outcome.message).into_owned(),
            error: None,
        }
    }
}

/// `sendInput`, `run-bg send --json`: what went to the job's stdin.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "SendResult"))]
#[serde(rename_all = "camelCase")]
pub struct SendView {
    pub job_id: String,
    /// Bytes written, the newline included.
    pub bytes: usize,
    /// Whether its stdin was closed (`eof`).
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
