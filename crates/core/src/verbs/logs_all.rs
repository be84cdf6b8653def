//! `logs --all`: every job's output in one stream, each line with its job.
//! Without following, the last lines of each job; following, those and then
//! each new line as the follower finds it, jobs joining as they start and
//! leaving once nothing can write to their log any more.
//!
//! One thread follows every job: it sleeps on one inotify descriptor that
//! every followed job's directory (log writes, rotations, its `job.json`)
//! and the jobs' directory (new jobs) wake, never on a timer per file. Where
//! there is no inotify (macOS, Windows) it looks on a short timer instead.

use crate::model::job::Job;
use crate::store::logs::{self, LogFollower, MAX_LINE_BYTES};
use crate::verbs::cancel::Cancel;
use crate::verbs::check::log_has_no_writer;
use crate::verbs::context::Context;
use crate::verbs::list::ListFilter;
use crate::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// Lines of each job's log the stream starts with, unless asked otherwise.
pub const DEFAULT_LINES_PER_JOB: usize = 10;

/// How often the registry is looked at for new and ended jobs when no record
/// write announced one (a supervisor that died writes nothing).
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Where the watcher wakes nobody (no inotify): how often the logs are read.
const TIMED_READ_EVERY: Duration = Duration::from_millis(100);

/// The least time between two reads of every log while writes keep waking
/// the follower: a job writing without pause then costs 50 reads a second,
/// not one per write, and a line waits at most this long.
const LEAST_BETWEEN_READS: Duration = Duration::from_millis(20);

/// A job in the stream.
#[derive(Debug, Clone)]
pub struct StreamJob {
    pub id: String,
    pub label: String,
    /// What its lines are shown under: its label, or its id where another
    /// job of the stream was shown under the same label first.
    pub name: String,
}

/// Where the stream goes. A write error ends the stream with it.
pub trait StreamSink {
    /// `job` enters the stream; its lines follow.
    fn joined(&mut self, job: &StreamJob) -> std::io::Result<()>;
    /// One line of `job`'s output, without its newline.
    fn line(&mut self, job: &StreamJob, line: &[u8]) -> std::io::Result<()>;
    /// Following: `job` has ended and every line it wrote was passed on;
    /// `record` is how it ended.
    fn ended(&mut self, job: &StreamJob, record: &Job) -> std::io::Result<()>;
    /// The lines passed so far may be written out now.
    fn flush(&mut self) -> std::io::Result<()>;
}

/// Which jobs' logs, and how many lines of each first.
#[derive(Debug, Clone, Default)]
pub struct StreamQuery {
    pub owner: Option<String>,
    /// Lines of each job's log to start with (`DEFAULT_LINES_PER_JOB` when None).
    pub lines: Option<usize>,
}

impl StreamQuery {
    fn lines(&self) -> usize {
        self.lines.unwrap_or(DEFAULT_LINES_PER_JOB)
    }
}

impl Context {
    /// The last lines of every job `list` shows (of `query.owner`), one job
    /// after the other, the job whose log was written to last coming last.
    /// The log keeps no time per line, so lines of different jobs are not
    /// interleaved by time.
    pub fn tail_all_logs(&self, query: &StreamQuery, sink: &mut dyn StreamSink) -> Result<()> {
        let (records, _) = self.stream_jobs(query)?;
        let jobs = Names::default().start(&records);
        let failed = |e| Error::io("write", "the output", e);
        for job in &jobs {
            sink.joined(job).map_err(failed)?;
        }
        for (job, record) in jobs.iter().zip(&records) {
            for line in logs::tail_lines(Path::new(&record.log_path), query.lines(), |_| true) {
                sink.line(job, &line).map_err(failed)?;
            }
        }
        sink.flush().map_err(failed)
    }

    /// The last lines of every job `list` shows (as `tail_all_logs`), then
    /// each line as it is written, until `cancel` is thrown or `sink` fails:
    /// jobs started meanwhile join from their first line; a job leaves once
    /// it has ended and nothing can write to its log any more (`sink.ended`).
    /// Each job's lines come once and in order, across rotations as with
    /// `logs --follow`; a line without its newline yet is held until it has
    /// one or the job has ended. Lines of different jobs come in the order
    /// the follower reads them: what one job wrote since the last read, then
    /// the next job's.
    pub fn follow_all_logs(&self, query: &StreamQuery, sink: &mut dyn StreamSink, cancel: &Cancel) -> Result<()> {
        let failed = |e| Error::io("write", "the output", e);
        let watcher = crate::os::platform::DirWatcher::new().ok();
        let woken_by_writes = watcher.as_ref().is_some_and(|w| w.fd().is_some());
        if let Some(watcher) = &watcher {
            // New jobs (directories made) and the registry's writes.
            watcher.watch(&self.home.jobs_dir());
            watcher.watch(&self.home.root);
        }
        let (jobs, mut known) = self.stream_jobs(query)?;
        let mut names = Names::default();
        let mut followed = Vec::new();
        let starting = names.start(&jobs);
        // All joined before the first line, so that the names are padded alike from it on.
        for job in &starting {
            sink.joined(job).map_err(failed)?;
        }
        for (job, record) in starting.into_iter().zip(jobs) {
            if let Some(watcher) = &watcher {
                watcher.watch_writes(&self.home.job_dir(&job.id));
            }
            let (tail, follower) = logs::tail_then_follow(Path::new(&record.log_path), query.lines());
            for line in &tail {
                sink.line(&job, line).map_err(failed)?;
            }
            followed.push(Followed { job, follower, partial: Vec::new() });
        }
        sink.flush().map_err(failed)?;
        let mut last_look: Option<Instant> = None;
        let mut look_now = true;
        loop {
            let round = Instant::now();
            for job in &mut followed {
                job.read_new(sink).map_err(failed)?;
            }
            if look_now || last_look.is_none_or(|at| at.elapsed() >= LOOK_EVERY) {
                last_look = Some(Instant::now());
                self.look(query, &watcher, &mut known, &mut names, &mut followed, sink).map_err(|e| match e {
                    Looked::Sink(e) => failed(e),
                    Looked::Registry(e) => e,
                })?;
            }
            sink.flush().map_err(failed)?;
            let pause = if woken_by_writes { LOOK_EVERY } else { TIMED_READ_EVERY };
            if cancel.pause_or_wake(pause, watcher.as_ref().and_then(|w| w.fd())) {
                return Ok(());
            }
            look_now = false;
            if let Some(watcher) = &watcher {
                let drained = watcher.drain();
                for dir in &drained.new_dirs {
                    // Watched before the job is known, so none of its first writes wakes nobody.
                    watcher.watch_writes(&self.home.jobs_dir().join(dir));
                }
                look_now = drained.records_changed;
            }
            let since = round.elapsed();
            if since < LEAST_BETWEEN_READS && cancel.pause(LEAST_BETWEEN_READS - since) {
                return Ok(());
            }
        }
    }

    /// The jobs `list` shows of the owner, oldest log write first, and the
    /// ids of every job of the owner (the others are not new jobs later).
    fn stream_jobs(&self, query: &StreamQuery) -> Result<(Vec<Job>, HashSet<String>)> {
        let every = self.list(&ListFilter { owner: query.owner.clone(), all: true, status: None, session: None })?;
        let known = every.iter().map(|job| job.id.clone()).collect();
        let recent_since = crate::now_ms().saturating_sub(3_600_000);
        let mut jobs: Vec<Job> =
            every.into_iter().filter(|job| !job.status().is_final() || job.ended_at().unwrap_or(0) >= recent_since).collect();
        jobs.sort_by_cached_key(|job| (last_write(&job.log_path), job.started_at));
        Ok((jobs, known))
    }

    /// New jobs join; jobs whose log nothing can write to any more leave.
    fn look(
        &self,
        query: &StreamQuery,
        watcher: &Option<crate::os::platform::DirWatcher>,
        known: &mut HashSet<String>,
        names: &mut Names,
        followed: &mut Vec<Followed>,
        sink: &mut dyn StreamSink,
    ) -> std::result::Result<(), Looked> {
        let every = self.list(&ListFilter { owner: query.owner.clone(), all: true, status: None, session: None }).map_err(Looked::Registry)?;
        for record in every.iter().filter(|job| known.insert(job.id.clone())) {
            if let Some(watcher) = watcher {
                watcher.watch_writes(&self.home.job_dir(&record.id));
            }
            let job = names.join(record);
            sink.joined(&job).map_err(Looked::Sink)?;
            let follower = LogFollower::from_start(Path::new(&record.log_path));
            followed.push(Followed { job, follower, partial: Vec::new() });
        }
        let records: HashMap<&str, &Job> = every.iter().map(|job| (job.id.as_str(), job)).collect();
        let mut at = 0;
        while at < followed.len() {
            // Asked before the last read, never after one: what the writer
            // wrote between a read and the question would be left unread.
            let record = match records.get(followed[at].job.id.as_str()) {
                Some(record) if log_has_no_writer(record) => *record,
                Some(_) => {
                    at += 1;
                    continue;
                }
                // Pruned, its log deleted: nothing more will come.
                None => {
                    followed.remove(at);
                    continue;
                }
            };
            let mut job = followed.remove(at);
            job.read_new(sink).map_err(Looked::Sink)?;
            if !job.partial.is_empty() {
                // The last line, without its newline: it will get none now.
                let last = std::mem::take(&mut job.partial);
                sink.line(&job.job, &last).map_err(Looked::Sink)?;
            }
            sink.ended(&job.job, record).map_err(Looked::Sink)?;
        }
        Ok(())
    }
}

enum Looked {
    Sink(std::io::Error),
    Registry(Error),
}

/// When a log was written to last (its current file's change time); never
/// written sorts first.
fn last_write(log: &Path) -> SystemTime {
    std::fs::metadata(log).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The names jobs are shown under: a label once, then ids for the same label.
#[derive(Default)]
struct Names(HashSet<String>);

impl Names {
    /// The jobs at the start: a label two of them share names neither.
    fn start(&mut self, jobs: &[Job]) -> Vec<StreamJob> {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for job in jobs {
            *count.entry(job.label.as_str()).or_default() += 1;
        }
        let shared: HashSet<&str> = count.into_iter().filter(|(_, n)| *n > 1).map(|(label, _)| label).collect();
        for label in &shared {
            // A job joining later with this label is named by its id too.
            self.0.insert(label.to_string());
        }
        jobs.iter()
            .map(|job| match shared.contains(job.label.as_str()) {
                true => self.named(job, job.id.clone()),
                false => self.join(job),
            })
            .collect()
    }

    fn join(&mut self, job: &Job) -> StreamJob {
        let name = if self.0.contains(&job.label) { job.id.clone() } else { job.label.clone() };
        self.named(job, name)
    }

    fn named(&mut self, job: &Job, name: String) -> StreamJob {
        self.0.insert(name.clone());
        StreamJob { id: job.id.clone(), label: job.label.clone(), name }
    }
}

/// A job being followed: where its reader stands and the line it has begun.
struct Followed {
    job: StreamJob,
    follower: LogFollower,
    partial: Vec<u8>,
}

impl Followed {
    fn read_new(&mut self, sink: &mut dyn StreamSink) -> std::io::Result<()> {
        let mut lines = LineSplitter { job: &self.job, partial: &mut self.partial, sink };
        self.follower.read_new(&mut lines).map(|_| ())
    }
}

/// Cuts what the follower reads into lines for the sink; a line longer
/// than `MAX_LINE_BYTES` goes in pieces of that size, as the tail gives it.
struct LineSplitter<'a> {
    job: &'a StreamJob,
    partial: &'a mut Vec<u8>,
    sink: &'a mut dyn StreamSink,
}

impl Write for LineSplitter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let mut rest = data;
        while !rest.is_empty() {
            let room = MAX_LINE_BYTES - self.partial.len();
            match rest.iter().take(room).position(|&b| b == b'\n') {
                Some(newline) if self.partial.is_empty() => {
                    self.sink.line(self.job, &rest[..newline])?;
                    rest = &rest[newline + 1..];
                }
                Some(newline) => {
                    self.partial.extend_from_slice(&rest[..newline]);
                    let line = std::mem::take(self.partial);
                    self.sink.line(self.job, &line)?;
                    rest = &rest[newline + 1..];
                }
                None if rest.len() < room => {
                    self.partial.extend_from_slice(rest);
                    rest = &[];
                }
                None => {
                    self.partial.extend_from_slice(&rest[..room]);
                    let piece = std::mem::take(self.partial);
                    self.sink.line(self.job, &piece)?;
                    rest = &rest[room..];
                }
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collected(Vec<String>);

    impl StreamSink for Collected {
        fn joined(&mut self, _: &StreamJob) -> std::io::Result<()> {
            Ok(())
        }
        fn line(&mut self, job: &StreamJob, line: &[u8]) -> std::io::Result<()> {
            self.0.push(format!("{}|{}", job.name, String::from_utf8_lossy(line)));
            Ok(())
        }
        fn ended(&mut self, _: &StreamJob, _: &Job) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_split_across_writes_are_joined_and_overlong_ones_cut_in_pieces() {
        let job = StreamJob { id: "a-1".into(), label: "a".into(), name: "a".into() };
        let mut sink = Collected::default();
        let mut partial = Vec::new();
        let mut lines = LineSplitter { job: &job, partial: &mut partial, sink: &mut sink };
        lines.write_all(b"one\ntw").unwrap();
        lines.write_all(b"o\n\nthree").unwrap();
        lines.write_all(&vec![b'x'; MAX_LINE_BYTES * 2 + 5]).unwrap();
        assert_eq!(sink.0[..3], ["a|one", "a|two", "a|"]);
        assert_eq!(sink.0.len(), 5);
        assert_eq!(sink.0[3].len(), 2 + MAX_LINE_BYTES);
        assert!(sink.0[3].starts_with("a|three"));
        assert_eq!(partial.len(), MAX_LINE_BYTES * 2 + 5 + 5 - 2 * MAX_LINE_BYTES);
    }
}
