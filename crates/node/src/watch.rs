//! `watchJobs`: each job end, as it happens, from any process of the user, as
//! a JS async iterator. A native thread waits in the core's inotify watch
//! (`supervise::ends`), so nothing polls on the JS thread; it ends at once
//! when the consumer stops (`return()`, as `break` calls it), when the
//! `signal` aborts, or when the iterator is collected.

use crate::js_args::Options;
use crate::{abort_error, cancel_on, context, Listening};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::collections::VecDeque;
use std::io::{PipeWriter, Write};
use std::sync::{Arc, Mutex, MutexGuard};

type Settle = Box<dyn FnOnce(Env) -> Result<serde_json::Value> + Send>;
type Pending = napi::JsDeferred<serde_json::Value, Settle>;

#[derive(Clone)]
enum End {
    Done,
    Aborted,
    Failed(String),
}

struct State {
    ends: VecDeque<serde_json::Value>,
    waiting: VecDeque<Pending>,
    end: Option<End>,
}

struct Stream {
    state: Mutex<State>,
    /// Written (then dropped) to wake the watching thread so that it stops.
    stop: Mutex<Option<PipeWriter>>,
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

fn step(value: Option<serde_json::Value>) -> Settle {
    Box::new(move |_| {
        Ok(match value {
            Some(value) => serde_json::json!({ "value": value, "done": false }),
            None => serde_json::json!({ "done": true }),
        })
    })
}

/// Settles a `next()` with the stream's end, the signal's listener removed first.
fn settle_end(end: &End, listening: &Unlisten) -> Settle {
    let (end, listening) = (end.clone(), listening.clone());
    Box::new(move |env| {
        unlisten(&listening, &env)?;
        match end {
            End::Done => step(None)(env),
            End::Aborted => Err(abort_error(&env, None)),
            End::Failed(message) => Err(napi::Error::from_reason(message)),
        }
    })
}

impl Stream {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An end from the watching thread; false once the stream has stopped.
    fn push(&self, value: serde_json::Value) -> bool {
        let mut state = self.lock();
        if state.end.is_some() {
            return false;
        }
        match state.waiting.pop_front() {
            Some(pending) => pending.resolve(step(Some(value))),
            None => state.ends.push_back(value),
        }
        true
    }

    fn stop(&self, end: End) {
        let mut state = self.lock();
        if state.end.is_none() {
            if !matches!(end, End::Done) {
                state.ends.clear();
            }
            for pending in state.waiting.drain(..) {
                pending.resolve(settle_end(&end, &self.listening));
            }
            state.end = Some(end);
        }
        drop(state);
        if let Some(mut writer) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.write_all(&[1]);
        }
    }

    fn close(&self) {
        self.lock().ends.clear();
        self.stop(End::Done);
    }
}

/// The iterator `watchJobs` returns. `[Symbol.asyncIterator]` returns itself.
#[napi(custom_finalize)]
pub struct JobEnds {
    stream: Arc<Stream>,
}

impl ObjectFinalize for JobEnds {
    /// Collected: the signal lets go of the listener (then `drop` ends the thread).
    fn finalize(self, env: Env) -> Result<()> {
        unlisten(&self.stream.listening, &env)
    }
}

impl Drop for JobEnds {
    fn drop(&mut self) {
        self.stream.close();
    }
}

#[napi]
impl JobEnds {
    /// The next job end (the `data` of its notification); waits for one.
    #[napi(ts_return_type = "Promise<IteratorResult<JobEnd, undefined>>")]
    pub fn next<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        let mut state = self.stream.lock();
        if let Some(value) = state.ends.pop_front() {
            drop(state);
            deferred.resolve(step(Some(value)));
        } else if let Some(end) = &state.end {
            deferred.resolve(settle_end(end, &self.stream.listening));
        } else {
            state.waiting.push_back(deferred);
        }
        Ok(promise)
    }

    /// Stops watching (what `break` in `for await` calls).
    #[napi(js_name = "return", ts_return_type = "Promise<IteratorResult<JobEnd, undefined>>")]
    pub fn finish<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        self.stream.close();
        unlisten(&self.stream.listening, env)?;
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        deferred.resolve(step(None));
        Ok(promise)
    }
}

/// Each job end from now on, from any process of the user (the same `data`
/// as the exit notification's POST), as it happens; `owner` keeps only that
/// owner's jobs. `break` out of the loop, or an aborted `signal`, stops the
/// native thread at once.
#[napi(ts_args_type = "options?: WatchJobsOptions | undefined | null", ts_return_type = "JobEnds")]
pub fn watch_jobs<'env>(env: &'env Env, options: Option<Unknown>) -> Result<Object<'env>> {
    let mut o = Options::new("watchJobs", options)?;
    let owner = o.string("owner")?;
    let signal = o.signal("signal")?;
    o.finish()?;
    let context = context()?;
    let (reader, writer) = std::io::pipe().map_err(|e| napi::Error::from_reason(format!("cannot create a pipe: {e}")))?;
    let stream = Arc::new(Stream {
        state: Mutex::new(State { ends: VecDeque::new(), waiting: VecDeque::new(), end: None }),
        stop: Mutex::new(Some(writer)),
        listening: Arc::default(),
    });
    let aborter = Arc::downgrade(&stream);
    let listening = cancel_on(env, signal, move || {
        if let Some(stream) = aborter.upgrade() {
            stream.stop(End::Aborted);
        }
    })?;
    *stream.listening.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = listening;
    let watcher = stream.clone();
    std::thread::Builder::new()
        .name("proc-manager-watch-jobs".into())
        .spawn(move || {
            let result = proc_manager_core::supervise::ends::watch(
                &context.home,
                &context.config,
                owner.as_deref(),
                &reader,
                |value| watcher.push(value),
            );
            match result {
                Ok(()) => watcher.stop(End::Done),
                Err(e) => watcher.stop(End::Failed(proc_manager_core::model::text::visible(&e.to_string()).into_owned())),
            }
        })
        .map_err(|e| {
            // Nothing will end this stream: its listener goes now.
            let _ = unlisten(&stream.listening, env);
            napi::Error::from_reason(format!("cannot start a thread: {e}"))
        })?;
    let iterator = JobEnds { stream }.into_instance(env)?;
    let object = iterator.as_object(env);
    let make_iterable: Function<Object, ()> =
        env.run_script("(function (it) { it[Symbol.asyncIterator] = function () { return this } })")?;
    make_iterable.call(object)?;
    Ok(iterator.as_object(env))
}
