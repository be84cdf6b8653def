//! `run-bg __deliver`: delivers what waits in the notification spool, in the
//! background.

use proc_manager_core::supervise::notify;
use proc_manager_core::verbs::ops::Context;

pub fn run(context: &Context) -> i32 {
    notify::drain_spool(&context.home, &context.config);
    0
}
