//! One file per verb: each turns its parsed arguments into a call to the
//! core and prints what `present` makes of the result (through `print`).

pub mod announce;
pub mod check;
pub mod codex_trust;
pub mod deliver;
pub mod errand;
pub mod hook;
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
