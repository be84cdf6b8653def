//! `watchJobs`: each job end, as it happens, from any process of the user, as
//! a JS async iterator. A native thread waits in the core's inotify watch
//! (`supervise::end_watch`), so nothing polls on the JS thread; it ends at once
//! when the consumer stops (`return()`, as `break` calls it), when the
//! `signal` aborts, or when the iterator is collected.

use crate::core_calls::{api, context};
use crate::js_args::{no_more, Options};
use crate::stream::{spawn_producer, stream_iterator, End, Stream};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use proc_manager_core::verbs::verb_options::WatchOptions;
use std::io::Write;
use std::sync::Mutex;

stream_iterator!(
    /// What `watchJobs` returns: an async iterator (and iterable) of job ends.
    JobEnds,
    serde_json::Value,
    "Promise<IteratorResult<JobEnd, undefined>>",
    "The next job end (the `data` of its notification); waits for one."
);

/// Each job end from now on, from any process of the user (a job started by
/// the CLI, another Node process or this one), as it happens: an async
/// iterator of the same `data` the exit notification POSTs. A native thread
/// waits on inotify for the home's job records, so nothing polls on the JS
/// thread; `break` (the iterator's `return()`) or an aborted `signal` stops it
/// at once. A job that ends while nobody iterates is kept for the next `next()`.
///
/// ```js
/// for await (const end of pm.watchJobs({ owner: 'agent-a' })) console.log(end.message)
/// ```
#[napi(ts_args_type = "options?: WatchJobsOptions | undefined | null", ts_return_type = "JobEnds")]
pub fn watch_jobs<'env>(env: &'env Env, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    api(env, || {
        no_more("watchJobs", "options", extra)?;
        let mut o = Options::new("watchJobs", options)?;
        let WatchOptions { owner } = o.serde()?;
        let signal = o.signal("signal")?;
        o.finish()?;
        let context = context()?;
        let (reader, writer) = std::io::pipe().map_err(|e| proc_manager_core::Error::Other(format!("cannot create a pipe: {e}")))?;
        // Written (then dropped) to wake the watching thread so that it stops.
        let stop = Mutex::new(Some(writer));
        let stream = Stream::new(env, signal, None, move || {
            if let Some(mut writer) = stop.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take() {
                let _ = writer.write_all(&[1]);
            }
        })?;
        spawn_producer(env, &stream, "proc-manager-watch-jobs", move |watcher| {
            let result = proc_manager_core::supervise::end_watch::watch(
                &context.home,
                &context.config,
                owner.as_deref(),
                &reader,
                |value| watcher.push(value),
            );
            match result {
                Ok(()) => watcher.stop(End::Done),
                Err(e) => watcher.stop(End::failed(&e)),
            }
        })?;
        Ok(JobEnds::into_iterable(stream, env)?)
    })
}
