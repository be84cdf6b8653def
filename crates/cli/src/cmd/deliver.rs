//! `run-bg __deliver`: delivers what waits in the notification spool, in the
//! background.

use proc_manager_core::supervise::notify;

pub fn run() -> i32 {
    let Some(context) = super::background_context() else { return 1 };
    notify::drain_spool(&context.home, &context.config);
    0
}
