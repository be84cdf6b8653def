//! `run-bg __deliver`: the home's background deliverer of the notification
//! spool (one at a time; it returns when nothing is left to keep trying).

use proc_manager_core::supervise::notify;
use proc_manager_core::verbs::context::Context;

pub fn run(context: &Context) -> i32 {
    notify::deliver(&context.home, &context.config);
    0
}
