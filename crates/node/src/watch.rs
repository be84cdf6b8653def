//! `watchJobs`: each job end, as it happens, from any process of the user, as
//! a JS async iterator. A native thread waits in the core's inotify watch
//! (`supervise::ends`), so nothing polls on the JS thread; it ends at once
//! when the consumer stops (`return()`, as `break` calls it), when the
//! `signal` aborts, or when the iterator is collected.

use crate::js_args::Options;
use crate::{abort_error, cancel_on, context};
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
}

fn step(value: Option<serde_json::Value>) -> Settle {
    Box::new(move |_| {
        Ok(match value {
            Some(value) => serde_json::json!({ "value": value, "done": false }),
            None => serde_json::json!({ "done": true }),
        })
    })
}

fn settle_end(end: &End) -> Settle {
    match end.clone() {
        End::Done => step(None),
        End::Aborted => Box::new(|env| Err(abort_error(&env))),
        End::Failed(message) => Box::new(move |_| Err(napi::Error::from_reason(message))),
    }
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
                pending.resolve(settle_end(&end));
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
#[napi]
pub struct JobEnds {
    stream: Arc<Stream>,
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
            deferred.resolve(settle_end(end));
        } else {
            state.waiting.push_back(deferred);
        }
        Ok(promise)
    }

    /// Stops watching (what `break` in `for await` calls).
    #[napi(js_name = "return", ts_return_type = "Promise<IteratorResult<JobEnd, undefined>>")]
    pub fn finish<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        self.stream.close();
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
    });
    let aborter = Arc::downgrade(&stream);
    cancel_on(env, signal, move || {
        if let Some(stream) = aborter.upgrade() {
            stream.stop(End::Aborted);
        }
    })?;
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
        .map_err(|e| napi::Error::from_reason(format!("cannot start a thread: {e}")))?;
    let iterator = JobEnds { stream }.into_instance(env)?;
    let object = iterator.as_object(env);
    let make_iterable: Function<Object, ()> =
        env.run_script("(function (it) { it[Symbol.asyncIterator] = function () { return this } })")?;
    make_iterable.call(object)?;
    Ok(iterator.as_object(env))
}
