//! Unix's wait for a supervisor's loop (what woke it: os/wait.rs): one
//! `poll(2)` on the signal handlers' self-pipe (the doorbell), the job's
//! output pipe, and the tied process's pidfd.

use crate::os::wait::Woken;
use rustix::event::{PollFd, PollFlags};
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Sleeps until one of the descriptors is readable or `limit` has passed
/// (`None`: until woken). Interrupted by a signal, it returns at once with
/// the doorbell's answer as it stands.
pub fn wait(doorbell: BorrowedFd, output: Option<BorrowedFd>, tie: Option<BorrowedFd>, limit: Option<Duration>) -> Woken {
    let timeout = limit.map(timespec);
    // On the stack: this runs once per step of the output's copy.
    let bell = PollFd::new(&doorbell, PollFlags::IN);
    let mut fds = [bell.clone(), bell.clone(), bell];
    let mut watched = 1;
    let output_slot = output.as_ref().map(|fd| {
        fds[watched] = PollFd::new(fd, PollFlags::IN);
        watched += 1;
        watched - 1
    });
    // The tied process's pidfd, after the others (issue 14).
    let tie_slot = tie.as_ref().map(|fd| {
        fds[watched] = PollFd::new(fd, PollFlags::IN);
        watched += 1;
        watched - 1
    });
    let failed = match rustix::event::poll(&mut fds[..watched], timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => false,
        Err(_) => true,
    };
    let ready = |slot: Option<usize>| slot.is_some_and(|i| !fds[i].revents().is_empty());
    Woken { doorbell: !fds[0].revents().is_empty(), output: ready(output_slot), main_ended: false, tie: ready(tie_slot), failed }
}

/// Waits up to `limit` for the doorbell alone (a pause that a signal ends).
pub fn doorbell_or(doorbell: BorrowedFd, limit: Duration) {
    let mut fds = [PollFd::new(&doorbell, PollFlags::IN)];
    let _ = rustix::event::poll(&mut fds, Some(&timespec(limit)));
}

pub fn timespec(d: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: d.subsec_nanos() as _ }
}
