//! The context every verb works in: the core's, with this very binary as
//! the runner that supervises jobs and does their background work.

use proc_manager_core::verbs::context::Context;
use proc_manager_core::{Error, Result};

/// The home's context; loading it also kicks the notification spool.
pub fn load() -> Result<Context> {
    with_own_runner(Context::load()?)
}

/// For `kill`, `orphans --kill` and `down`: a config.json that cannot be
/// used must not keep anyone from stopping what runs (`Context::load_for_kill`).
pub fn load_for_kill() -> Result<Context> {
    with_own_runner(Context::load_for_kill()?)
}

fn with_own_runner(context: Context) -> Result<Context> {
    let exe = std::env::current_exe().map_err(|e| Error::io("find own executable", "/proc/self/exe", e))?;
    Ok(context.with_runner(exe))
}
