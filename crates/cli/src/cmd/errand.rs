//! The hidden background modes the core starts (`__announce`, `__deliver`,
//! `__watch`, `__sweep`, `__take-in`): detached from whoever started them,
//! in the home's context.

use super::{announce, deliver, watch};
use proc_manager_core::model::protocol::Errand;
use proc_manager_core::store::registry::Patience;
use proc_manager_core::verbs::context::Context;

/// Exit 1 when the errand fails, 2 when the core asked badly.
pub fn run(errand: proc_manager_core::Result<Errand>) -> i32 {
    if proc_manager_core::os::sys::detach_self().is_err() {
        return 1;
    }
    // Held as a supervisor holds it: they write logs and run hooks there.
    let Ok((context, _held)) = Context::load_holding() else { return 1 };
    match errand {
        Ok(Errand::Announce { job_id, claimed }) => announce::run(&context, &job_id, claimed),
        Ok(Errand::Deliver) => deliver::run(&context),
        Ok(Errand::Watch { job_id }) => watch::run(context, &job_id),
        Ok(Errand::Sweep { folder }) => i32::from(context.registry().sweep_forgotten(&folder).is_err()),
        Ok(Errand::TakeIn) => {
            let taken = context.registry().take_in(Patience::Full, "record the ends of killed jobs");
            i32::from(taken.is_err())
        }
        Err(_) => 2,
    }
}
