//! What the faces ask for: start, check, wait, kill, reconcile, orphans, prune, summary, and process snapshots.

pub mod cancel;
pub mod follow;
pub mod ops;
pub mod procs;
pub mod queue;
pub mod spawn;
pub mod start_options;
pub mod yielding;
pub mod send;
