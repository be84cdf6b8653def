//! Promise plumbing: blocking work run on a thread of its own and settled
//! into a promise, and bad input rejected rather than thrown.

use crate::abort::{abort_error, Listening};
use crate::core_calls::{Failure, Outcome};
use napi::bindgen_prelude::*;
use proc_manager_core::verbs::cancel::Cancel;
use std::sync::{Arc, Mutex};

/// How a promise's work ended: with its value, or stopped by its `AbortSignal`.
pub(crate) enum Settled<T> {
    Done(T),
    /// With the id of the job the call started, if it started one.
    Aborted(Option<String>),
}

pub(crate) type Settle = Box<dyn FnOnce(Env) -> Result<serde_json::Value> + Send>;

/// Runs blocking `work` on its own thread and settles a promise with it, so
/// a long wait never occupies one of libuv's few pool threads. `cancel` is
/// released once the work is done (its pipe closed), and the signal's
/// listener removed as the promise settles (on the JS thread).
pub(crate) fn spawn_promise<'env, F>(env: &'env Env, (cancel, listening): (Cancel, Option<Listening>), work: F) -> Outcome<Object<'env>>
where
    F: FnOnce() -> std::result::Result<Settled<serde_json::Value>, proc_manager_core::Error> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
    // Shared with the thread so that, if it cannot start, both are undone here.
    let (undo_cancel, slot) = (cancel.clone(), Arc::new(Mutex::new(listening)));
    let listening = slot.clone();
    let spawned = std::thread::Builder::new().name("proc-manager-wait".into()).spawn(move || {
        let settled = work();
        cancel.release();
        let listening = lock(&listening).take();
        deferred.resolve(Box::new(move |env| {
            let reason = listening.map(|listening| listening.remove(&env)).transpose();
            let value = match settled {
                Ok(Settled::Done(value)) => value,
                Ok(Settled::Aborted(job_id)) => return Err(abort_error(&env, job_id.as_deref(), reason.ok().flatten())),
                Err(e) => return Err(Failure::Core(e).into_js(&env)),
            };
            reason.map(|_| value)
        }))
    });
    spawned.map_err(|e| {
        undo_cancel.release();
        if let Some(listening) = lock(&slot).take() {
            let _ = listening.remove(env);
        }
        proc_manager_core::Error::Other(format!("cannot start a thread: {e}"))
    })?;
    Ok(promise)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A promise-returning function rejects, never throws, on bad input, as an
/// async function would: `body` checks its arguments before any work starts.
pub(crate) fn rejecting<'env>(env: &'env Env, body: impl FnOnce() -> Outcome<Object<'env>>) -> Result<Object<'env>> {
    body().or_else(|failure| {
        let (deferred, promise) = env.create_deferred::<(), fn(Env) -> Result<()>>()?;
        deferred.reject(failure.into_js(env));
        Ok(promise)
    })
}
