//! `logs`: a job's log lines by number or after a cursor, across rotations.

use crate::model::job::Job;
use crate::{store::log_read, Error, Result};
use crate::verbs::context::Context;
use crate::verbs::check::log_has_no_writer;

/// Which lines of a job's log `read_log` gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LogRange {
    /// `count` lines from line `from` (1 = the oldest kept), or the last `count`.
    Lines { from: Option<usize>, count: usize },
    /// At most `count` lines written after the cursor `since`.
    Since { since: u64, count: usize },
}

/// What `read_log` read: lines by number, or the lines after a cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum LogRead {
    Lines(log_read::LineWindow),
    Since(log_read::LinesSince),
}

impl Context {
    /// A job's log lines by number or after a cursor, across rotations.
    pub fn read_log(&self, id: &str, range: LogRange) -> Result<(Job, LogRead)> {
        self.read_log_within(id, range, None)
    }

    /// `read_log` keeping only the first lines that fit in `budget`
    /// characters, the cursor right after them and the rest counted (see
    /// `log_read::line_window_within`): one read, so an answer cut to size
    /// still gets the cursor of what it shows.
    pub fn read_log_within(&self, id: &str, range: LogRange, budget: Option<usize>) -> Result<(Job, LogRead)> {
        let job = self.job(id)?;
        let log = std::path::Path::new(&job.log_path);
        let ended = log_has_no_writer(&job);
        let read = match range {
            LogRange::Lines { from: Some(0), .. } => {
                return Err(Error::Usage("bad fromLine: 0; lines are numbered from 1".into()))
            }
            LogRange::Lines { from, count } => LogRead::Lines(log_read::line_window_within(log, from, count, ended, budget)),
            LogRange::Since { since, count } => {
                LogRead::Since(log_read::lines_since_within(log, since, count, ended, budget)?)
            }
        };
        Ok((job, read))
    }

    /// `read_log` after a cursor, one line at a time (see `SinceRead`).
    pub fn read_log_since(&self, id: &str, since: u64, count: usize) -> Result<(Job, log_read::SinceRead)> {
        let job = self.job(id)?;
        let read = log_read::SinceRead::open(std::path::Path::new(&job.log_path), since, count, log_has_no_writer(&job))?;
        Ok((job, read))
    }
}
