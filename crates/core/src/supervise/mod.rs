//! The per-job supervisor: its loop, the job's output pipe, and the notifications it sends when the job ends.
//!
//! Unix's supervisor forks, waits on signals and a named pipe, and adopts
//! orphans; Windows's (`windows_supervisor.rs`) holds the job's tree in a Job
//! Object and waits on handles. Each platform's files are chosen here; what
//! a job's end means, its notifications and readiness are shared.

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

#[cfg(unix)]
pub mod outpipe;
#[cfg(unix)]
pub mod supervisor;
#[cfg(unix)]
pub mod output_copy;
#[cfg(unix)]
pub mod signals;
#[cfg(unix)]
pub mod memory;
#[cfg(unix)]
pub mod start;
#[cfg(unix)]
pub mod outcome;
#[cfg(unix)]
pub mod stdin;

/// The supervisor on Windows: `supervise_main`, as `start` has it on Unix.
#[cfg(windows)]
#[path = "windows_supervisor.rs"]
pub mod start;
/// No named output pipe on Windows: the job's output dies with its
/// supervisor there, and nothing reopens it (os/outpipe_windows.rs).
#[cfg(windows)]
pub use crate::os::outpipe_windows as outpipe;
