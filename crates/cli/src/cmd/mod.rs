//! One file per subcommand: each turns its parsed arguments into a call to
//! the core and prints what `present` makes of the result.

pub mod announce;
pub mod check;
pub mod deliver;
pub mod kill;
pub mod list;
pub mod logs;
pub mod orphans;
pub mod prune;
pub mod ps;
pub mod reconcile;
pub mod start;
pub mod summary;
pub mod supervise;
pub mod wait;
pub mod watch;

use proc_manager_core::verbs::ops::Context;

/// What the hidden background modes (`__announce`, `__deliver`, `__watch`)
/// start with: detached from whoever started them, in the home's context.
/// `None` when either fails; they then exit 1.
fn background_context() -> Option<Context> {
    proc_manager_core::supervise::supervisor::detach().ok()?;
    Context::load().ok()
}
