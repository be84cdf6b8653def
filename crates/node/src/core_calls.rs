//! The core as each call reaches it: the `Context` loaded (with the run-bg
//! binary as its runner), the core's errors as JS errors and its results as
//! JS values.

use crate::binary::supervisor_exe;
use napi::bindgen_prelude::*;
use proc_manager_core::model::text::visible;
use proc_manager_core::verbs::context::Context;
use serde::Serialize;

/// Error messages quote user input (a path, an id, a label): written out so
/// that whoever prints them prints no control characters.
pub(crate) fn to_js_error(error: proc_manager_core::Error) -> napi::Error {
    let message = match error {
        proc_manager_core::Error::StartFailed { job_id, message } => format!("{message} (recorded as failed job {job_id})"),
        other => other.to_string(),
    };
    napi::Error::from_reason(visible(&message).into_owned())
}

pub(crate) fn context() -> Result<Context> {
    with_runner(Context::load().map_err(to_js_error)?)
}

/// See `Context::load_for_kill`: a broken config.json never blocks a kill.
pub(crate) fn context_for_kill() -> Result<Context> {
    with_runner(Context::load_for_kill().map_err(to_js_error)?)
}

fn with_runner(context: Context) -> Result<Context> {
    // Without the binary the API still reads jobs; starting one reports the problem.
    Ok(match supervisor_exe() {
        Ok(exe) => context.with_runner(exe),
        Err(_) => context,
    })
}

/// Every result reaches JS as the core's `present` shape, serialized once
/// (napi's serde-json support turns the value into JS objects): the same
/// fields, names and values `run-bg --json` prints. A field without a value
/// is left out, so it reads `undefined`.
pub(crate) fn shape<T: Serialize>(view: &T) -> Result<serde_json::Value> {
    serde_json::to_value(view).map_err(|e| napi::Error::from_reason(format!("cannot convert a result to JS: {e}")))
}

/// A conversion that failed on the worker thread, said as the core's errors are.
pub(crate) fn napi_to_core(e: napi::Error) -> proc_manager_core::Error {
    proc_manager_core::Error::Usage(e.reason.clone())
}
