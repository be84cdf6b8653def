//! `AbortSignal`s: an aborted call's `AbortError`, and a signal wired to a
//! core `Cancel` through a listener removed once the call settles.

use crate::core_calls::Outcome;
use napi::bindgen_prelude::*;
use proc_manager_core::verbs::cancel::Cancel;

/// The error an aborted call rejects with, as Node's own APIs do
/// (`name: 'AbortError'`, `code: 'ABORT_ERR'`, the signal's `reason` as its
/// `cause`: a caller that aborts for a timeout or a user's request can tell
/// which), with the `jobId` of the job the call started, if it started one:
/// it runs on.
pub(crate) fn abort_error(env: &Env, job_id: Option<&str>, reason: Option<Unknown>) -> napi::Error {
    let made = env.create_error(napi::Error::from_reason("The operation was aborted")).and_then(|mut error| {
        error.set_named_property("name", "AbortError")?;
        error.set_named_property("code", "ABORT_ERR")?;
        if let Some(reason) = reason {
            error.set_named_property("cause", reason)?;
        }
        if let Some(job_id) = job_id {
            error.set_named_property("jobId", job_id)?;
        }
        Ok(napi::Error::from(error.to_unknown()))
    });
    made.unwrap_or_else(|e| e)
}

/// An already aborted signal is an error (`AbortError`) before any work starts.
pub(crate) fn refuse_aborted(env: &Env, signal: Option<&Object>) -> Result<()> {
    match signal {
        Some(signal) if signal.get_named_property::<bool>("aborted")? => Err(abort_error(env, None, signal.get_named_property("reason").ok())),
        _ => Ok(()),
    }
}

/// The `signal` option wired to a `Cancel`: its abort throws the switch from
/// the JS thread, and the waiting native thread wakes at once. An already
/// aborted signal is an error (`AbortError`) before any work starts. The
/// listener stays until the returned `Listening` is removed: the caller
/// removes it once its call has settled, so that a signal shared by many
/// calls does not gather their listeners.
pub(crate) fn cancel_on(env: &Env, signal: Option<Object>, on_abort: impl Fn() + 'static) -> Result<Option<Listening>> {
    let Some(signal) = signal else { return Ok(None) };
    refuse_aborted(env, Some(&signal))?;
    let listener = env.create_function_from_closure("onAbort", move |_| {
        on_abort();
        Ok(())
    })?;
    let listening = Listening { signal: signal.create_ref()?, listener: listener.create_ref()? };
    let add: AddEventListener = signal.get_named_property("addEventListener")?;
    let mut once = Object::new(env)?;
    once.set("once", true)?;
    add.apply(signal, ("abort", listener, once).into())?;
    Ok(Some(listening))
}

/// `signal.addEventListener(type, listener, options)`.
type AddEventListener<'env> = Function<'env, FnArgs<(&'env str, Function<'env, (), ()>, Object<'env>)>, ()>;
/// `signal.removeEventListener(type, listener)`.
type RemoveEventListener<'env> = Function<'env, FnArgs<(&'env str, Function<'env, (), ()>)>, ()>;

/// A listener `cancel_on` added to a signal. Removed (and the signal let go)
/// by `remove`, on the JS thread; the references are sendable so that a
/// worker thread can carry them to the promise's settling.
pub(crate) struct Listening {
    // No leak check: a reference dropped unremoved (a teardown) only keeps
    // the signal alive, which is all `remove` would have ended.
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl Listening {
    /// Removes the listener; gives the signal's `reason` (what an aborted
    /// call's error carries), read before the signal is let go.
    pub(crate) fn remove(self, env: &Env) -> Result<Unknown<'_>> {
        let signal = self.signal.get_value(env)?;
        let reason = signal.get_named_property::<Unknown>("reason");
        let listener = self.listener.borrow_back(env)?;
        let remove: RemoveEventListener = signal.get_named_property("removeEventListener")?;
        let removed = remove.apply(signal, ("abort", listener).into());
        self.signal.unref(env)?;
        removed.and(reason)
    }
}

/// A `Cancel` for `signal` (none needed without one), and its listener.
pub(crate) fn cancel_for(env: &Env, signal: Option<Object>) -> Outcome<(Cancel, Option<Listening>)> {
    if signal.is_none() {
        return Ok((Cancel::never(), None));
    }
    let cancel = Cancel::new()?;
    let thrower = cancel.clone();
    match cancel_on(env, signal, move || thrower.cancel()) {
        Ok(listening) => Ok((cancel, listening)),
        Err(e) => {
            cancel.release();
            Err(e.into())
        }
    }
}
