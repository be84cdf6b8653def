//! A job's output as `logs`, `readLog` and `followLogs` return it.

use crate::verbs::logs::LogRead;
use serde::Serialize;

/// `run-bg logs --json`: a job's output lines (lossy UTF-8).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsView {
    pub job_id: String,
    pub lines: Vec<String>,
}

/// One line of `followLogs` (lossy UTF-8, without its newline).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "JobLogLine"))]
#[serde(rename_all = "camelCase")]
pub struct StreamLineView {
    /// The job's id.
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

/// `readLog`'s answer: lines as `check` cleans them, never folded.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "LogRead"))]
#[serde(rename_all = "camelCase")]
pub struct LogReadView {
    pub job_id: String,
    /// The number of the first line in `lines` (not with `since`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_line: Option<usize>,
    pub lines: Vec<String>,
    /// How many lines the log holds now, rotated files included (not with `since`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<usize>,
    /// Where the last line in `lines` ends in everything ever written to the
    /// log: give it as `since` for only what comes next. An unfinished last
    /// line counts as read only once the job has ended.
    pub cursor: u64,
    /// As `CheckResult.logProblem`: `cursor` is not to be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_problem: Option<String>,
    /// With `since`: bytes after it that were rotated away and deleted before
    /// this read; `lines` then start at the oldest line kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotated_away_bytes: Option<u64>,
    /// With `since`: more lines follow `cursor` than `lines` asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<bool>,
    /// With `maxChars`: lines asked for that were left out to keep within it; they start at `cursor`.
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
