//! `followLog`: a job's output lines as a JS async iterator. A native thread
//! runs the core's follow (`Context::follow_log`, rotation-aware) and hands
//! complete lines over; it blocks while nothing comes (polling its cancel
//! pipe beside the log), while the consumer is behind, and ends at once when
//! the consumer stops (`return()`, as `break` calls it), when the `signal`
//! aborts, or when the iterator is collected.

use crate::js_args::{string_arg, Options};
use crate::{abort_error, cancel_on, context, to_js_error, Listening};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use proc_manager_core::store::logs::{self, LogFollower};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::follow::Followed;
use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Lines read ahead of the consumer before the thread waits for it.
const READ_AHEAD: usize = 1024;

type Settle = Box<dyn FnOnce(Env) -> Result<serde_json::Value> + Send>;
type Pending = napi::JsDeferred<serde_json::Value, Settle>;

/// How the stream ended; what every later `next()` answers.
#[derive(Clone)]
enum End {
    /// The job ended and every line was handed over (or `return()` was called).
    Done,
    Aborted,
    Failed(String),
}

struct State {
    lines: VecDeque<String>,
    /// `next()` calls waiting for a line, oldest first.
    waiting: VecDeque<Pending>,
    end: Option<End>,
}

struct Stream {
    state: Mutex<State>,
    /// Signalled when the consumer takes a line or the stream stops.
    room: Condvar,
    cancel: Cancel,
    /// The `signal`'s listener, removed on the JS thread once the stream has
    /// ended (its end handed to `next()`, `return()`, or the iterator collected).
    listening: Unlisten,
}

type Unlisten = Arc<Mutex<Option<Listening>>>;

/// Removes the signal's listener, if it is still there. On the JS thread.
fn unlisten(slot: &Unlisten, env: &Env) -> Result<()> {
    let taken = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    taken.map_or(Ok(()), |listening| listening.remove(env))
}

/// An `IteratorResult`: `{ value, done: false }`, or `{ done: true }` at the end.
#[derive(serde::Serialize)]
struct Step {
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    done: bool,
}

fn settle_with(step: Step) -> Settle {
    Box::new(move |_| serde_json::to_value(step).map_err(|e| napi::Error::from_reason(e.to_string())))
}

fn step(line: String) -> Settle {
    settle_with(Step { value: Some(line), done: false })
}

fn finished() -> Settle {
    settle_with(Step { value: None, done: true })
}

/// Settles a `next()` with the stream's end, the signal's listener removed first.
fn settle_end(end: &End, listening: &Unlisten) -> Settle {
    let (end, listening) = (end.clone(), listening.clone());
    Box::new(move |env| {
        unlisten(&listening, &env)?;
        match end {
            End::Done => finished()(env),
            End::Aborted => Err(abort_error(&env, None)),
            End::Failed(message) => Err(napi::Error::from_reason(message)),
        }
    })
}

impl Stream {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A line from the follower thread: to the oldest waiting `next()`, else
    /// queued; waits while the consumer is `READ_AHEAD` lines behind. False
    /// once the stream has stopped.
    fn push(&self, line: String) -> bool {
        let mut state = self.lock();
        if state.end.is_some() {
            return false;
        }
        if let Some(pending) = state.waiting.pop_front() {
            pending.resolve(step(line));
            return true;
        }
        state.lines.push_back(line);
        while state.lines.len() >= READ_AHEAD && state.end.is_none() {
            state = self.room.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        state.end.is_none()
    }

    /// Ends the stream (unless it has ended already): waiting `next()` calls
    /// get `end`, and the follower thread is woken to stop at once.
    fn stop(&self, end: End) {
        let mut state = self.lock();
        if state.end.is_none() {
            if !matches!(end, End::Done) {
                // An abort or a failure is said at once, not after the lines read ahead.
                state.lines.clear();
            }
            for pending in state.waiting.drain(..) {
                pending.resolve(settle_end(&end, &self.listening));
            }
            state.end = Some(end);
        }
        drop(state);
        self.cancel.cancel();
        self.room.notify_all();
    }

    /// The consumer's `return()`: no more lines, the thread ends.
    fn close(&self) {
        let mut state = self.lock();
        state.lines.clear();
        drop(state);
        self.stop(End::Done);
    }
}

/// Splits the follower's bytes into lines (lossy UTF-8, without the `\n`).
struct LineSink {
    stream: Arc<Stream>,
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

/// The iterator `followLog` returns. `[Symbol.asyncIterator]` returns itself.
#[napi(custom_finalize)]
pub struct LogLines {
    stream: Arc<Stream>,
}

impl ObjectFinalize for LogLines {
    /// Collected: the signal lets go of the listener (then `drop` ends the thread).
    fn finalize(self, env: Env) -> Result<()> {
        unlisten(&self.stream.listening, &env)
    }
}

impl Drop for LogLines {
    /// Collected without `return()` (the consumer dropped it): the thread ends.
    fn drop(&mut self) {
        self.stream.close();
    }
}

#[napi]
impl LogLines {
    /// The next line; `{ done: true }` once the job has ended and every line
    /// was given; rejects with an `AbortError` once the signal aborted.
    #[napi(ts_return_type = "Promise<IteratorResult<string, undefined>>")]
    pub fn next<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        let mut state = self.stream.lock();
        if let Some(line) = state.lines.pop_front() {
            drop(state);
            self.stream.room.notify_all();
            deferred.resolve(step(line));
        } else if let Some(end) = &state.end {
            deferred.resolve(settle_end(end, &self.stream.listening));
        } else {
            state.waiting.push_back(deferred);
        }
        Ok(promise)
    }

    /// Stops following (what `break` in `for await` calls): the native thread
    /// ends at once; later `next()` calls give `{ done: true }`.
    #[napi(js_name = "return", ts_return_type = "Promise<IteratorResult<string, undefined>>")]
    pub fn finish<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        self.stream.close();
        unlisten(&self.stream.listening, env)?;
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        deferred.resolve(finished());
        Ok(promise)
    }
}

/// A job's output lines as they are written, across log rotations: the
/// whole log kept (or its last `lines` lines), then each new line, ending
/// after the last line once the job has ended. `break` out of the loop, or an
/// aborted `signal`, stops the native thread that follows the log at once;
/// with the signal, the pending `next()` rejects with an `AbortError`.
#[napi(ts_args_type = "jobId: string, options?: FollowOptions | undefined | null", ts_return_type = "LogLines")]
pub fn follow_log<'env>(env: &'env Env, job_id: Unknown, options: Option<Unknown>) -> Result<Object<'env>> {
    let job_id = string_arg("jobId", job_id)?;
    let mut o = Options::new("followLog", options)?;
    let lines = o.count("lines", "lines")?;
    let signal = o.signal("signal")?;
    o.finish()?;
    let context = context()?;
    let job = context.mark_seen(context.job(&job_id).map_err(to_js_error)?).map_err(to_js_error)?;
    let cancel = Cancel::new().map_err(to_js_error)?;
    let stream = Arc::new(Stream {
        state: Mutex::new(State { lines: VecDeque::new(), waiting: VecDeque::new(), end: None }),
        room: Condvar::new(),
        cancel: cancel.clone(),
        listening: Arc::default(),
    });
    let aborter = Arc::downgrade(&stream);
    let listening = cancel_on(env, signal, move || {
        if let Some(stream) = aborter.upgrade() {
            stream.stop(End::Aborted);
        }
    });
    match listening {
        Ok(listening) => *stream.listening.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = listening,
        Err(e) => {
            cancel.release();
            return Err(e);
        }
    }

    let follower_stream = stream.clone();
    std::thread::Builder::new()
        .name("proc-manager-follow".into())
        .spawn(move || {
            let stream = follower_stream;
            let log = Path::new(&job.log_path).to_path_buf();
            let mut sink = LineSink { stream: stream.clone(), partial: Vec::new() };
            let mut follower = match lines {
                None => LogFollower::from_start(&log),
                Some(n) => {
                    let (tail, follower) = logs::tail_then_follow(&log, n as usize);
                    for line in &tail {
                        if sink.hand_over(line).is_err() {
                            break;
                        }
                    }
                    follower
                }
            };
            let end = match context.follow_log(&job, &mut follower, &mut sink, &stream.cancel) {
                // A last line without its newline is still a line.
                Ok(Followed::Ended) if !sink.partial.is_empty() => {
                    let last = std::mem::take(&mut sink.partial);
                    let _ = sink.hand_over(&last);
                    End::Done
                }
                Ok(_) => End::Done,
                // The stream was stopped while the thread handed a line over.
                Err(_) if stream.cancel.is_cancelled() => End::Done,
                Err(e) => End::Failed(proc_manager_core::model::text::visible(&e.to_string()).into_owned()),
            };
            stream.stop(end);
            stream.cancel.release();
        })
        .map_err(|e| {
            // Nothing will end this stream: its listener goes now.
            let _ = unlisten(&stream.listening, env);
            napi::Error::from_reason(format!("cannot start a thread: {e}"))
        })?;

    let iterator = LogLines { stream }.into_instance(env)?;
    let object = iterator.as_object(env);
    let make_iterable: Function<Object, ()> =
        env.run_script("(function (it) { it[Symbol.asyncIterator] = function () { return this } })")?;
    make_iterable.call(object)?;
    Ok(iterator.as_object(env))
}
