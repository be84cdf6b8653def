//! One file per subcommand: each turns its parsed arguments into a call to
//! the core and prints what `present` makes of the result.

pub mod announce;
pub mod check;
pub mod codex_trust;
pub mod hook;
pub mod deliver;
pub mod kill;
pub mod list;
pub mod logs;
pub mod orphans;
pub mod pause;
pub mod prune;
pub mod ps;
pub mod reconcile;
pub mod rerun;
pub mod send;
pub mod stack;
pub mod start;
pub mod summary;
pub mod supervise;
pub mod top;
pub mod wait;
pub mod watch;

use proc_manager_core::model::protocol::Errand;
use proc_manager_core::verbs::context::Context;

/// The hidden background modes the core starts (`__announce`, `__deliver`,
/// `__watch`): detached from whoever started them, in the home's context;
/// exit 1 when either fails, 2 when the core asked badly.
pub fn run_errand(errand: proc_manager_core::Result<Errand>) -> i32 {
    if proc_manager_core::os::sys::detach_self().is_err() {
        return 1;
    }
    // Held as a supervisor holds it: they write logs and run hooks there.
    let Ok((context, _held)) = Context::load_holding() else { return 1 };
    match errand {
        Ok(Errand::Announce { job_id, claimed }) => announce::run(&context, &job_id, claimed),
        Ok(Errand::Deliver) => deliver::run(&context),
        Ok(Errand::Watch { job_id }) => watch::run(context, &job_id),
        Err(_) => 2,
    }
}
