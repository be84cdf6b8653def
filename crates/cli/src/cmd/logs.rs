//! `run-bg logs <id>`: a job's output; `--follow` keeps printing until it
//! ends; `--since <cursor>` gives only what came after a cursor.

use crate::print::{print_json, reader_gone, stdout_failed};
use proc_manager_core::model::job::Job;
use proc_manager_core::present::prefixed::{self, Prefixer};
use proc_manager_core::present::view::{LogReadView, LogsView, StreamLineView, StreamLinesView};
use proc_manager_core::verbs::logs_all::{StreamJob, StreamQuery, StreamSink};
use proc_manager_core::store::logs;
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::store::log_read::LinesSince;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::logs::{LogRange, LogRead};
use proc_manager_core::{Error, Result};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

pub fn run(context: &Context, id: &str, lines: Option<usize>, all: bool, follow: bool, json: bool) -> Result<i32> {
    if all && lines.is_some() {
        return Err(Error::Usage("-n and --all of one job's log: give one, not both (--all is the whole log)".into()));
    }
    let job = context.mark_seen(context.job(id)?)?;
    let log = PathBuf::from(&job.log_path);
    if json {
        let raw = if all {
            let mut bytes = Vec::new();
            logs::copy_all(&log, &mut bytes).map_err(|e| Error::io("read log", &log, e))?;
            bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect::<Vec<_>>()
        } else {
            logs::tail_lines(&log, lines.unwrap_or(100), |_| true)
        };
        let mut text: Vec<String> = raw.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect();
        if all && text.last().is_some_and(String::is_empty) {
            text.pop();
        }
        print_json(&LogsView { job_id: job.id, lines: text });
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    if follow {
        // The follower goes on exactly where the lines printed first end.
        let mut follower = if all {
            logs::LogFollower::from_start(&log)
        } else {
            let (lines, follower) = logs::tail_then_follow(&log, lines.unwrap_or(100));
            print_lines(&mut out, &lines);
            follower
        };
        let _ = out.flush();
        context.follow_log(&job, &mut follower, &mut StdoutSink(&mut out), &Cancel::never())?;
    } else if all {
        logs::copy_all(&log, &mut out)
            .map_err(|e| if reader_gone(&e) { stdout_failed(e) } else { Error::io("read log", &log, e) })?;
    } else {
        print_lines(&mut out, &logs::tail_lines(&log, lines.unwrap_or(100), |_| true));
    }
    let _ = out.flush();
    Ok(0)
}

/// `logs --since <cursor>`: the lines after the cursor (every one, or at
/// most `lines`), then the new cursor on stderr, so that stdout holds only
/// the log's lines and what is missing from them. The text is printed as it
/// is read: one line in memory however long the log.
pub fn since(context: &Context, id: &str, since: u64, lines: Option<usize>, json: bool) -> Result<i32> {
    let job = context.mark_seen(context.job(id)?)?;
    let count = lines.unwrap_or(usize::MAX);
    if json {
        let (job, read) = context.read_log(&job.id, LogRange::Since { since, count })?;
        print_json(&LogReadView::new(&job.id, &read));
        return Ok(0);
    }
    let (job, read) = context.read_log_since(&job.id, since, count)?;
    // The same note as every face's, before the first line.
    let gone = LinesSince { lines: Vec::new(), cursor: since, rotated_away: read.rotated_away(), more: false, not_shown: 0 };
    let note = LogReadView::new(&job.id, &LogRead::Since(gone)).rotated_note();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut print = |line: String| {
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|_| out.write_all(b"\n")) {
            stdout_failed(e);
        }
    };
    if let Some(note) = note {
        print(note);
    }
    let end = read.each_line(print);
    if let Err(e) = out.flush() {
        stdout_failed(e);
    }
    let more = if end.more { "more lines follow; " } else { "" };
    eprintln!("cursor {}: {more}run-bg logs {} --since {} for what comes next", end.cursor, job.id, end.cursor);
    Ok(0)
}

fn print_lines(out: &mut dyn Write, lines: &[Vec<u8>]) {
    for line in lines {
        if let Err(e) = out.write_all(line).and_then(|_| out.write_all(b"\n")) {
            stdout_failed(e);
        }
    }
}

/// Our stdout for the core's writers: a failed write ends the CLI as any
/// other write to stdout does (quietly once the reader is gone).
struct StdoutSink<'a>(&'a mut dyn Write);

impl Write for StdoutSink<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.write(data).map_err(fail_unless_interrupted)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(fail_unless_interrupted)
    }
}

/// EINTR is retried by `write_all`; anything else ends the CLI.
fn fail_unless_interrupted(error: std::io::Error) -> std::io::Error {
    if error.kind() == std::io::ErrorKind::Interrupted {
        return error;
    }
    stdout_failed(error)
}

/// `logs --all` without an id: every job's output, each line after its
/// job's name (padded to a common width, coloured per job on a terminal).
/// Without --follow, the last lines of each job (10 unless -n), job after
/// job; with it, those and then every line as written, jobs joining as they
/// start, until interrupted.
pub fn all_jobs(context: &Context, owner: Option<String>, lines: Option<usize>, follow: bool, since: Option<u64>, json: bool, raw: bool) -> Result<i32> {
    if since.is_some() {
        return Err(Error::Usage("--since reads one job's log: give its id (run-bg logs <id> --since <cursor>)".into()));
    }
    let query = StreamQuery { owner, lines };
    if json {
        let mut collected = Collected(Vec::new());
        context.tail_all_logs(&query, &mut collected)?;
        print_json(&StreamLinesView { lines: collected.0 });
        return Ok(0);
    }
    let terminal = std::io::stdout().is_terminal();
    let colour = prefixed::colour_wanted(terminal, std::env::var_os("NO_COLOR").as_deref());
    // A person's terminal gets what check shows: a job's escape codes would
    // set their clipboard or title, clear the screen, or with `\r` print a
    // line that seems another job's. A pipe gets the bytes as written.
    let clean = terminal && !raw;
    let mut out = Prefixed { out: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock()), prefixer: Prefixer::new(colour), clean };
    if follow {
        context.follow_all_logs(&query, &mut out, &Cancel::never())?;
    } else {
        context.tail_all_logs(&query, &mut out)?;
    }
    Ok(0)
}

/// The stream as people read it: `name | line`.
struct Prefixed<W: Write> {
    out: W,
    prefixer: Prefixer,
    /// Lines cleaned of escape codes and redraws (on a terminal).
    clean: bool,
}

impl<W: Write> Prefixed<W> {
    fn write_line(&mut self, job: &StreamJob, line: &[u8]) -> std::io::Result<()> {
        let cleaned;
        let line = if self.clean {
            let text = String::from_utf8_lossy(line);
            cleaned = proc_manager_core::model::text::strip_ansi(proc_manager_core::model::text::last_redraw(&text));
            cleaned.as_bytes()
        } else {
            line
        };
        let prefix = self.prefixer.prefix(&job.id, &job.name);
        let written = self.out.write_all(prefix.as_bytes()).and_then(|_| self.out.write_all(line)).and_then(|_| self.out.write_all(b"\n"));
        written.map_err(fail_unless_interrupted)
    }
}

impl<W: Write> StreamSink for Prefixed<W> {
    fn joined(&mut self, job: &StreamJob) -> std::io::Result<()> {
        self.prefixer.joined(&job.id, &job.name);
        Ok(())
    }

    fn line(&mut self, job: &StreamJob, line: &[u8]) -> std::io::Result<()> {
        self.write_line(job, line)
    }

    fn ended(&mut self, job: &StreamJob, record: &Job) -> std::io::Result<()> {
        self.write_line(job, prefixed::ended_line(record).as_bytes())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush().map_err(fail_unless_interrupted)
    }
}

/// `logs --all --json`: the lines as data.
struct Collected(Vec<StreamLineView>);

impl StreamSink for Collected {
    fn joined(&mut self, _: &StreamJob) -> std::io::Result<()> {
        Ok(())
    }

    fn line(&mut self, job: &StreamJob, line: &[u8]) -> std::io::Result<()> {
        let line = String::from_utf8_lossy(line).into_owned();
        self.0.push(StreamLineView { id: job.id.clone(), label: job.label.clone(), line });
        Ok(())
    }

    fn ended(&mut self, _: &StreamJob, _: &Job) -> std::io::Result<()> {
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
