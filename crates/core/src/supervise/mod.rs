//! The per-job supervisor: its loop, the job's output pipe, and the notifications it sends when the job ends.
//!
//! One supervisor for every platform (`supervisor.rs`): its loop, phases,
//! kills, restarts, readiness and recording are shared; what differs is
//! behind `os::supervision` (Unix forks, waits on signals and a named pipe,
//! and adopts orphans; Windows holds the job's tree in a Job Object and
//! waits on handles) and the job's output (`JobOutput`).

pub mod notify;
pub mod pace;
pub mod end_watch;
pub mod spec;
pub mod ready;
pub mod matchers;
pub mod restart;
pub mod pause;
pub mod service;
pub mod wake;
pub mod tie;
pub mod ending;
pub mod kill;
pub mod unrecorded;
pub mod requests;
pub mod phase;

pub mod supervisor;
pub mod start;
pub mod outcome;
pub mod memory;

#[cfg(unix)]
pub mod outpipe;
#[cfg(unix)]
pub mod output_copy;
#[cfg(unix)]
pub mod stdin;
/// The job's output as the supervisor copies it into the log: Unix's loop
/// copies the named pipe itself; Windows's threads copy each run's pipe.
#[cfg(unix)]
use output_copy::{JobOutput, Piece};
#[cfg(windows)]
type JobOutput = crate::os::output_copy_windows::Output<crate::store::logs::RotatingWriter>;
#[cfg(windows)]
use crate::os::output_copy_windows::Piece;

/// No named output pipe on Windows: the job's output dies with its
/// supervisor there, and nothing reopens it (os/outpipe_windows.rs).
#[cfg(windows)]
pub use crate::os::outpipe_windows as outpipe;
/// `--stdin pipe` on Windows: a pipe a thread of the supervisor serves
/// (os/stdin_pipe_windows.rs).
#[cfg(windows)]
pub use crate::os::stdin_pipe_windows as stdin;
