//! What a job's end says: the one line an agent can act on, the event's
//! JSON body, the first error line and the last lines of the log.

use crate::store::config::NotifyConfig;
use crate::store::log_read;
use crate::model::duration::format_duration_ms;
use crate::model::job::{Exit, Job, JobState, JobStatus};
use crate::store::paths::Home;
use crate::{store::logs, now_ms, model::text};
use std::path::Path;

const LAST_LINES: usize = 5;
const LAST_LINE_CHARS: usize = 200;
/// The first error-looking line of a failed job's log, added to its message, is cut to this.
const ERROR_LINE_CHARS: usize = 160;

/// One line an agent can act on.
pub fn message_line(job: &Job) -> String {
    // Shown to an agent, and by hooks that print $RUN_BG_MESSAGE: control characters written out.
    let command = text::cut(&text::visible(&job.command).replace('\n', " "), 80);
    let label = if job.id.starts_with(&crate::model::ids::id_prefix_from_label(&job.label)) {
        String::new()
    } else {
        format!(" \"{}\"", text::cut(&text::visible(&job.label), 40))
    };
    let after = format_duration_ms(job.duration_ms(now_ms()));
    let id = &job.id;
    match job.status() {
        JobStatus::Orphaned => format!(
            "run-bg: {id}{label} ({command}) orphaned: its supervisor is gone while its processes run, after {after}; run-bg kill {id}"
        ),
        JobStatus::Lost => format!(
            "run-bg: {id}{label} ({command}) lost: supervisor and processes gone with no exit status, after {after}; run-bg check {id}"
        ),
        status => {
            let how = crate::model::job::how_it_ended(job);
            format!("run-bg: {id}{label} ({command}) {status}, {how}, after {after}; run-bg check {id}")
        }
    }
}

/// `message_line`, and for a failed job the first line of its log that looks
/// like an error (the first `check --errors` shows), with every `{{` and `}}`
/// broken up: the interrupt service fills `{{key}}` in a rule's message from
/// `data`, and uses `data.message` as that template when the rule has none,
/// so text from the log must not be able to pull in other values.
pub fn event_message(home: &Home, job: &Job) -> String {
    let mut message = message_line(job);
    if job.status() == JobStatus::Failed {
        if let Some(line) = first_error_line(home, job) {
            message.push_str("; first error: ");
            message.push_str(&text::cut(&line, ERROR_LINE_CHARS));
        }
    }
    defuse_templates(&message)
}

/// The log is read through the home this process holds (`Home::job_log`).
fn first_error_line(home: &Home, job: &Job) -> Option<String> {
    log_read::error_lines(&home.job_log(&job.id, Path::new(&job.log_path)), 20).into_iter().find(|line| log_read::looks_like_error(line))
}

/// `{{` and `}}` become `{ {` and `} }`, until none is left (`{{{` too).
pub fn defuse_templates(text: &str) -> String {
    let mut text = text.to_string();
    while text.contains("{{") || text.contains("}}") {
        text = text.replace("{{", "{ {").replace("}}", "} }");
    }
    text
}

/// The exit code, as a shell's `$?` reports it: 128 + the signal's number
/// for a death by signal; -1 when no exit status is known (orphaned, lost,
/// never started). Never null, so a rule's `{{exitCode}}` always resolves.
pub fn exit_code_for_event(job: &Job) -> i32 {
    match job.state.exit() {
        Some(Exit::Code(code)) => code,
        Some(Exit::Signal(name)) => crate::model::job::signal_number(&name).map_or(-1, |n| 128 + n),
        None => -1,
    }
}

/// How it ended, in a few words: `exit 1`, `signal SIGTERM`, `timeout after
/// 10m`, `killed (signal SIGTERM)`, `orphaned`, `lost`, `could not start`.
pub fn outcome(job: &Job) -> String {
    let how = crate::model::job::how_it_ended(job);
    match &job.state {
        JobState::TimedOut { .. } => match job.timeout_ms {
            Some(limit) => format!("timeout after {}", format_duration_ms(limit)),
            None => "timeout".to_string(),
        },
        JobState::Killed { exit: Some(_), .. } => format!("killed ({how})"),
        JobState::Killed { exit: None, .. } => "killed".to_string(),
        JobState::Orphaned => "orphaned".to_string(),
        JobState::Lost { .. } => "lost".to_string(),
        _ => how,
    }
}

fn last_lines(home: &Home, job: &Job) -> Vec<String> {
    logs::tail_lines(&home.job_log(&job.id, Path::new(&job.log_path)), LAST_LINES, |_| true)
        .iter()
        .map(|line| text::clean_line(&String::from_utf8_lossy(line), LAST_LINE_CHARS))
        .collect()
}

/// A job's end as its exit notification's `data` says it, and as
/// `watchJobs` yields it. No value is null: the service leaves a rule's
/// `{{key}}` literal for a null.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "JobEnd"))]
#[serde(rename_all = "camelCase")]
pub struct JobEnd {
    /// `<jobId>:<status>`
    pub event_id: String,
    pub job_id: String,
    pub label: String,
    pub command: String,
    /// success | failed | killed | timeout | orphaned | lost
    pub status: String,
    /// The exit code; 128 + the signal's number for a death by signal; -1 when none is known.
    pub exit_code: i32,
    /// The signal's name, or `""`.
    pub signal: String,
    /// `exit 1`, `signal SIGSEGV`, `killed (signal SIGTERM)`, `timeout after 10m`, `orphaned`, `lost`.
    pub outcome: String,
    pub duration_ms: u64,
    pub log_path: String,
    /// `""` when none was given.
    pub owner: String,
    /// One line for an agent; a failed job's ends with its first error line.
    pub message: String,
    /// The last 5 lines of output, cleaned.
    pub last_lines: Vec<String>,
}

impl JobEnd {
    pub fn new(home: &Home, job: &Job) -> JobEnd {
        JobEnd {
            event_id: job.event_id(),
            job_id: job.id.clone(),
            label: job.label.clone(),
            command: job.command.clone(),
            status: job.status().as_str().to_string(),
            exit_code: exit_code_for_event(job),
            signal: job.signal().unwrap_or_default(),
            outcome: outcome(job),
            duration_ms: job.duration_ms(now_ms()),
            log_path: crate::model::os_text::escaped(job.log_path.as_os_str()).into_owned(),
            owner: job.owner.clone().unwrap_or_default(),
            message: event_message(home, job),
            last_lines: last_lines(home, job),
        }
    }
}

/// The request body: `{"source", "level", "data": {...}}`, `data` a `JobEnd`.
pub fn event_body(home: &Home, config: &NotifyConfig, job: &Job) -> serde_json::Value {
    serde_json::json!({
        "source": config.source,
        "level": config.level_for(job.status().as_str()),
        "data": JobEnd::new(home, job),
    })
}
