//! The per-job supervisor: its loop, the job's output pipe, and the notifications it sends when the job ends.

pub mod notify;
pub mod outpipe;
pub mod pace;
pub mod end_watch;
pub mod supervisor;
pub mod phase;
pub mod output_copy;
pub mod signals;
pub mod memory;
pub mod start;
pub mod outcome;
pub mod ready;
pub mod matchers;
pub mod restart;
pub mod service;
pub mod stdin;
pub mod wake;
pub mod tie;
