//! What the faces ask for: start, check, wait, kill, reconcile, orphans, prune, summary, and process snapshots.

pub mod cancel;
pub mod follow;
pub mod harness;
pub mod harness_install;
pub mod check;
pub mod context;
pub mod kill;
pub mod left_behind;
pub mod list;
pub mod logs;
pub mod logs_all;
pub mod orphan_watch;
pub mod orphans;
pub mod pause;
pub mod prune;
pub mod reconcile;
pub mod rerun;
pub mod wait;
pub mod queue;
pub mod request;
pub mod resource_tracker;
pub mod spawn;
pub mod stack;
pub mod start;
pub mod start_options;
pub mod usage;
pub mod verb_options;
pub mod yielding;
/// `run-bg send`: writes to a job's stdin (its FIFO on Unix, its named pipe on Windows).
pub mod send;
