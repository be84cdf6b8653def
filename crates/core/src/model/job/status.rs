//! A job's status in one word, as records, filters and every face name it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Running,
    /// Running, with its whole tree stopped (`pause`, SIGSTOP) until `resume`.
    /// Shown, never stored: the record keeps `running` and `paused_at`, so
    /// that a version without pause reads it (as running).
    Paused,
    /// Main process exited 0.
    Success,
    /// Exited non-zero, died of a signal nobody here sent, or could not start.
    Failed,
    /// Ended by `kill`.
    Killed,
    /// Ended by its time limit.
    Timeout,
    /// Its supervisor is gone but processes of the job still run.
    Orphaned,
    /// Supervisor and processes gone, no exit status recorded.
    Lost,
    /// Waiting for a queue slot or for the jobs it runs after; nothing started yet.
    Queued,
    /// Never started: a job it was to run after did not succeed.
    Skipped,
}

impl JobStatus {
    pub const ALL: [JobStatus; 10] = [
        JobStatus::Running,
        JobStatus::Paused,
        JobStatus::Success,
        JobStatus::Failed,
        JobStatus::Killed,
        JobStatus::Timeout,
        JobStatus::Orphaned,
        JobStatus::Lost,
        JobStatus::Queued,
        JobStatus::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Paused => "paused",
            JobStatus::Success => "success",
            JobStatus::Failed => "failed",
            JobStatus::Killed => "killed",
            JobStatus::Timeout => "timeout",
            JobStatus::Orphaned => "orphaned",
            JobStatus::Lost => "lost",
            JobStatus::Queued => "queued",
            JobStatus::Skipped => "skipped",
        }
    }

    pub fn parse(text: &str) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// As `parse`, with the error a caller should see.
    pub fn parse_or_explain(text: &str) -> crate::Result<JobStatus> {
        JobStatus::parse(text).ok_or_else(|| {
            let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
            crate::Error::Usage(format!("bad status `{text}`: expected one of {}", names.join(", ")))
        })
    }

    /// Finished: the main process has an outcome and nothing of ours supervises it.
    pub fn is_final(self) -> bool {
        !matches!(self, JobStatus::Running | JobStatus::Paused | JobStatus::Orphaned | JobStatus::Queued)
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
