//! The public shape of a job (camelCase, as SPEC.md names the fields), shared
//! by the CLI's `--json` output and the JS API.

use crate::model::job::{Job, JobStatus};
use crate::os::procinfo::ProcessEntry;
use crate::verbs::ops::WaitOutcome;
use crate::now_ms;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub job_id: String,
    pub label: String,
    pub command: String,
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub pid: Option<u32>,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub duration_ms: u64,
    pub log_path: String,
    pub cwd: String,
    pub owner: Option<String>,
    pub context: Option<serde_json::Value>,
    pub error: Option<String>,
    /// The announcement of the job's end: `eventId`, `state` (pending,
    /// delivered, failed), `attempts`, `lastError`.
    pub notification: Option<NotificationView>,
    pub hooks: Vec<HookView>,
    /// Peak RSS of the job's largest process, once it has ended.
    pub peak_rss_mb: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationView {
    pub event_id: String,
    pub state: String,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub delivered_at: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookView {
    pub command: String,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> JobView {
        JobView {
            job_id: job.id.clone(),
            label: job.label.clone(),
            command: job.command.clone(),
            status: job.status().as_str().to_string(),
            exit_code: job.exit_code(),
            signal: job.signal(),
            pid: job.pid(),
            started_at: job.started_at,
            ended_at: job.ended_at(),
            duration_ms: job.duration_ms(now_ms()),
            log_path: job.log_path.clone(),
            cwd: job.cwd.clone(),
            owner: job.owner.clone(),
            context: job.context.clone(),
            error: job.error().map(str::to_string),
            notification: job.notification.as_ref().map(|n| NotificationView {
                event_id: n.event_id.clone(),
                state: n.state.as_str().to_string(),
                attempts: n.attempts,
                last_error: n.last_error.clone(),
                delivered_at: n.delivered_at,
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
        }
    }
}

pub fn kb_to_mb(kb: u64) -> f64 {
    (kb as f64 / 1024.0 * 10.0).round() / 10.0
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckView {
    #[serde(flatten)]
    pub job: JobView,
    pub tail: Vec<String>,
    /// Processes still running although the main process ended.
    pub lingering: Vec<ProcessView>,
    /// How many of the job's processes run now, and their resident memory.
    pub processes: Option<usize>,
    pub rss_mb: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessView {
    pub pid: u32,
    pub command: String,
}

impl From<&ProcessEntry> for ProcessView {
    fn from(entry: &ProcessEntry) -> ProcessView {
        ProcessView { pid: entry.identity.pid, command: entry.command.clone() }
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
    fn a_job_view_has_the_fields_spec_names_in_camel_case() {
        let mut job = ended(JobStatus::Failed, Some(3), None);
        job.peak_rss_kb = Some(2048);
        let value = serde_json::to_value(JobView::from(&job)).unwrap();
        let mut keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "command", "context", "cwd", "durationMs", "endedAt", "error", "exitCode", "hooks", "jobId", "label",
                "logPath", "notification", "owner", "peakRssMb", "pid", "signal", "startedAt", "status"
            ]
        );
        assert_eq!(value["status"], "failed");
        assert_eq!(value["exitCode"], 3);
        assert_eq!(value["pid"], 4242);
        assert_eq!(value["peakRssMb"], 2.0);
        assert_eq!(value["durationMs"], 2 * 3_600_000 + 13 * 60_000);
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
