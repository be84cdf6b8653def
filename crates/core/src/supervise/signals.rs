//! The signals the supervisor's loop waits on: handlers that set a flag
//! and wake `poll` through a self-pipe.

use crate::os::launch::new_pipe;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The signals the loop waits on, as signal-hook's handlers leave them: a
/// flag per kind, set before the handler writes a byte into `wake`, which is
/// what `poll` watches. A full pipe drops the byte, which is harmless: one
/// pending byte is enough to wake the loop, and the flags say what came.
pub(super) struct Signals {
    /// The read end of the self-pipe; its write end is the handlers' for
    /// the life of the process.
    pub(super) wake: OwnedFd,
    /// SIGCHLD: a child (the main process, an adopted descendant, the notifier) may be reapable.
    pub(super) child: Arc<AtomicBool>,
    /// SIGUSR1: `kill` may have left a request.
    pub(super) kill_request: Arc<AtomicBool>,
    /// SIGTERM, SIGINT or SIGHUP: someone wants the job gone.
    pub(super) stop: Arc<AtomicBool>,
}

/// Every signal the supervisor handles; the notifier puts them back to default.
pub(super) const HANDLED: [i32; 5] = [libc::SIGCHLD, libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

pub(super) fn install_signal_handlers() -> std::io::Result<Signals> {
    let (wake, write) = new_pipe(libc::O_NONBLOCK)?;
    let signals = Signals {
        wake,
        child: Arc::new(AtomicBool::new(false)),
        kill_request: Arc::new(AtomicBool::new(false)),
        stop: Arc::new(AtomicBool::new(false)),
    };
    // Owned by the handlers from now on, so it stays open while they may run.
    let write = write.into_raw_fd();
    for signal in HANDLED {
        let flag = match signal {
            libc::SIGCHLD => &signals.child,
            libc::SIGUSR1 => &signals.kill_request,
            _ => &signals.stop,
        };
        // The flag first: signal-hook runs a signal's actions in the order
        // they were registered, so the loop never wakes to a flag not yet set.
        signal_hook::flag::register(signal, Arc::clone(flag))?;
        signal_hook::low_level::pipe::register_raw(signal, write)?;
    }
    Ok(signals)
}
