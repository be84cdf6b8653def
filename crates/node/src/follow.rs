//! `followLog`: a job's output lines as a JS async iterator; `followLogs`:
//! every job's, each line with its job. A native thread
//! runs the core's follow (`Context::follow_log`, rotation-aware) and hands
//! complete lines over; it blocks while nothing comes (polling its cancel
//! pipe beside the log), while the consumer is behind, and ends at once when
//! the consumer stops (`return()`, as `break` calls it), when the `signal`
//! aborts, or when the iterator is collected.

use crate::js_args::{no_more, string_arg, Options};
use crate::stream::{spawn_producer, stream_iterator, End, Stream};
use crate::core_calls::{api, context};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use proc_manager_core::store::logs::{self, LogFollower};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::follow::Followed;
use proc_manager_core::model::job::Job;
use proc_manager_core::present::view::StreamLineView;
use proc_manager_core::verbs::logs_all::{StreamJob, StreamQuery, StreamSink};
use proc_manager_core::verbs::verb_options::LogsOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// Lines read ahead of the consumer before the thread waits for it.
const READ_AHEAD: usize = 1024;

/// Splits the follower's bytes into lines (lossy UTF-8, without the `\n`).
struct LineSink {
    stream: Arc<Stream<String>>,
    partial: Vec<u8>,
}

impl LineSink {
    fn hand_over(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.stream.push(String::from_utf8_lossy(line).into_owned()) {
            Ok(())
        } else {
            Err(std::io::Error::other("the consumer stopped following"))
        }
    }
}

impl Write for LineSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let mut rest = data;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                self.hand_over(&rest[..newline])?;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&rest[..newline]);
                self.hand_over(&line)?;
            }
            rest = &rest[newline + 1..];
        }
        self.partial.extend_from_slice(rest);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

stream_iterator!(
    /// What `followLog` returns: an async iterator (and iterable) of lines.
    LogLines,
    String,
    "Promise<IteratorResult<string, undefined>>",
    "The next line; `{ done: true }` once the job has ended and every line was given; rejects with an `AbortError` once the signal aborted."
);

/// A job's output lines as they are written, across log rotations, as an
/// async iterator: the whole log kept (or its last `lines` lines), then each
/// new line; it ends after the last line once the job has ended. `break`
/// (the iterator's `return()`) or an aborted `signal` stops the native thread
/// that follows the log at once; with the signal, the pending `next()`
/// rejects with an `AbortError`.
///
/// ```js
/// for await (const line of pm.followLog(jobId, { signal })) console.log(line)
/// ```
#[napi(ts_args_type = "jobId: string, options?: FollowOptions | undefined | null", ts_return_type = "LogLines")]
pub fn follow_log<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    api(env, || {
        no_more("followLog", "jobId and options", extra)?;
        let job_id = string_arg("jobId", job_id)?;
        let mut o = Options::new("followLog", options)?;
        let lines = o.serde_without::<LogsOptions>(&LogsOptions::left_out("followLog"))?.lines;
        let signal = o.signal("signal")?;
        o.finish()?;
        let context = context()?;
        let job = context.mark_seen(context.job(&job_id)?)?;
        let cancel = Cancel::new()?;
        let stopper = cancel.clone();
        let stream = Stream::new(env, signal, Some(READ_AHEAD), move || stopper.cancel()).inspect_err(|_| cancel.release())?;

        spawn_producer(env, &stream, "proc-manager-follow", move |stream| {
            let log = Path::new(&job.log_path).to_path_buf();
            let mut sink = LineSink { stream: stream.clone(), partial: Vec::new() };
            let mut follower = match lines {
                None => LogFollower::from_start(&log),
                Some(n) => {
                    let (tail, follower) = logs::tail_then_follow(&log, n);
                    for line in &tail {
                        if sink.hand_over(line).is_err() {
                            break;
                        }
                    }
                    follower
                }
            };
            let end = match context.follow_log(&job, &mut follower, &mut sink, &cancel) {
                // A last line without its newline is still a line.
                Ok(Followed::Ended) if !sink.partial.is_empty() => {
                    let last = std::mem::take(&mut sink.partial);
                    let _ = sink.hand_over(&last);
                    End::Done
                }
                Ok(_) => End::Done,
                // The stream was stopped while the thread handed a line over.
                Err(_) if cancel.is_cancelled() => End::Done,
                Err(e) => End::failed(&e),
            };
            stream.stop(end);
            cancel.release();
        })?;
        Ok(LogLines::into_iterable(stream, env)?)
    })
}

/// Hands each line of the stream over as `{ id, label, line }`.
struct StreamLines {
    stream: Arc<Stream<StreamLineView>>,
}

impl StreamSink for StreamLines {
    fn joined(&mut self, _: &StreamJob) -> std::io::Result<()> {
        Ok(())
    }

    fn line(&mut self, job: &StreamJob, line: &[u8]) -> std::io::Result<()> {
        let line = String::from_utf8_lossy(line).into_owned();
        if self.stream.push(StreamLineView { id: job.id.clone(), label: job.label.clone(), line }) {
            Ok(())
        } else {
            Err(std::io::Error::other("the consumer stopped following"))
        }
    }

    fn ended(&mut self, _: &StreamJob, _: &Job) -> std::io::Result<()> {
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

stream_iterator!(
    /// What `followLogs` returns: an async iterator (and iterable) of every job's lines.
    JobLogLines,
    StreamLineView,
    "Promise<IteratorResult<JobLogLine, undefined>>",
    "The next line of any job; rejects with an `AbortError` once the signal aborted."
);

/// Every job's output lines (of `owner`), one stream, as `run-bg logs --all
/// --follow` gives them: the last `lines` lines of each job `listJobs` shows,
/// then each new line as it is written, jobs started meanwhile joining from
/// their first line. Each job's lines come once and in order, across log
/// rotations; lines of different jobs in the order the follower reads them.
/// It never ends by itself: `break` or an aborted `signal` stops the one
/// native thread that follows every log; with the signal, the pending
/// `next()` rejects with an `AbortError`.
///
/// ```js
/// for await (const { label, line } of pm.followLogs({ owner: 'stack', signal })) console.log(`${label} | ${line}`)
/// ```
#[napi(ts_args_type = "options?: FollowLogsOptions | undefined | null", ts_return_type = "JobLogLines")]
pub fn follow_logs<'env>(env: &'env Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    api(env, || {
        no_more("followLogs", "options", extra)?;
        let mut o = Options::new("followLogs", options)?;
        let LogsOptions { owner, lines, .. } = o.serde_without(&LogsOptions::left_out("followLogs"))?;
        let signal = o.signal("signal")?;
        o.finish()?;
        let context = context()?;
        let cancel = Cancel::new()?;
        let stopper = cancel.clone();
        let stream = Stream::new(env, signal, Some(READ_AHEAD), move || stopper.cancel()).inspect_err(|_| cancel.release())?;
        spawn_producer(env, &stream, "proc-manager-follow-all", move |stream| {
            let mut sink = StreamLines { stream: stream.clone() };
            let end = match context.follow_all_logs(&StreamQuery { owner, lines }, &mut sink, &cancel) {
                Ok(()) => End::Done,
                // The stream was stopped while the thread handed a line over.
                Err(_) if cancel.is_cancelled() => End::Done,
                Err(e) => End::failed(&e),
            };
            stream.stop(end);
            cancel.release();
        })?;
        Ok(JobLogLines::into_iterable(stream, env)?)
    })
}
