//! What the faces ask for: start, check, wait, kill, reconcile, orphans, prune, summary, and process snapshots.

pub mod cancel;
pub mod follow;
pub mod left_behind;
pub mod ops;
pub mod queue;
pub mod resource_tracker;
pub mod spawn;
pub mod start_options;
pub mod yielding;
pub mod send;
