//! `check`: one job's status, the tail of its log and what its processes cost.

use crate::model::job::{Job, JobStatus};
use crate::os::procinfo::ProcessEntry;
use crate::{store::log_read, os::tree, Error, Result};
use crate::verbs::context::Context;

#[derive(Debug, Clone, Default)]
pub struct TailQuery {
    /// At most this many lines (default 20).
    pub lines: usize,
    /// Only lines matching this (on the cleaned text).
    pub grep: Option<regex::Regex>,
    /// Only lines that look like errors, with a line of context.
    pub errors: bool,
}

impl TailQuery {
    pub fn new(lines: Option<usize>, grep: Option<&str>) -> Result<TailQuery> {
        let grep = grep
            .map(|pattern| {
                regex::Regex::new(pattern).map_err(|e| {
                    let reason = e.to_string().lines().last().unwrap_or("").trim().to_string();
                    Error::Usage(format!("bad --grep pattern `{pattern}`: {reason}"))
                })
            })
            .transpose()?;
        Ok(TailQuery { lines: lines.unwrap_or(20), grep, errors: false })
    }

    pub fn errors(mut self, errors: bool) -> Result<TailQuery> {
        if errors && self.grep.is_some() {
            return Err(Error::Usage("give either --grep or --errors, not both".into()));
        }
        self.errors = errors;
        Ok(self)
    }

    /// Which lines the query keeps.
    pub fn selection(&self) -> Selection {
        match (self.errors, &self.grep) {
            _ if self.lines == 0 => Selection::NoLines,
            (true, _) => Selection::Errors,
            (false, Some(_)) => Selection::Matching,
            (false, None) => Selection::Last,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CheckResult {
    pub job: Job,
    pub tail: Vec<String>,
    /// Where the log stood when the tail was read (after its last complete
    /// line): `read_log` since it gives only what came after.
    pub cursor: u64,
    /// Why `cursor` is not to be used: the log's start record is corrupt.
    pub log_problem: Option<String>,
    /// Processes still running although the main process ended (or the supervisor died).
    pub lingering: Vec<ProcessEntry>,
    /// What the job's live processes cost now (None when none run).
    pub usage: Option<TreeUsage>,
    /// Which lines `tail` holds: what an empty tail means.
    pub selection: Selection,
}

/// Which of a log's lines a check shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The last ones.
    Last,
    /// Only those matching a pattern.
    Matching,
    /// Only those that look like errors, with context.
    Errors,
    /// None (`-n 0`: the status alone).
    NoLines,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeUsage {
    pub processes: usize,
    pub rss_kb: u64,
}

impl Context {
    pub fn check(&self, id: &str, query: &TailQuery) -> Result<CheckResult> {
        let job = self.mark_seen(self.job(id)?)?;
        let (tail, cursor, log_problem) = tail_job_log(&job, query);
        // One pass over /proc serves both: the live tree's cost, and what lingers.
        let tree = self.processes_of(&job);
        let usage = (!tree.is_empty()).then(|| TreeUsage {
            processes: tree.len(),
            rss_kb: tree.iter().map(|p| p.rss_kb).sum(),
        });
        let lingering = if job.status().is_final() || job.status() == JobStatus::Orphaned { tree } else { Vec::new() };
        Ok(CheckResult { job, tail, cursor, log_problem, lingering, usage, selection: query.selection() })
    }
}

/// Nothing can write to `job`'s log any more: the job has ended and its
/// supervisor, the log's only writer, is gone. The end alone is not enough:
/// processes the job left behind write through the supervisor after it, so
/// until then a last line without a newline may still grow.
pub fn log_has_no_writer(job: &Job) -> bool {
    job.status().is_final() && tree::live_supervisor(job).is_none()
}

/// The tail `query` asks for, the cursor after it (see `CheckResult::cursor`)
/// and why that cursor is not to be used, if it is not.
pub fn tail_job_log(job: &Job, query: &TailQuery) -> (Vec<String>, u64, Option<String>) {
    let reader = crate::store::logs::ReverseLines::open(std::path::Path::new(&job.log_path));
    let cursor = reader.cursor(log_has_no_writer(job));
    let problem = reader.record_problem().map(str::to_string);
    let tail = if query.errors {
        log_read::error_lines_of(reader, query.lines)
    } else {
        log_read::last_lines_of(reader, query.lines, query.grep.as_ref())
    };
    (tail, cursor, problem)
}
