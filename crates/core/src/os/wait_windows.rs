//! Windows's wait for a supervisor's loop (what woke it: os/wait.rs): one
//! `WaitForMultipleObjects` on the doorbells (two named events: requests
//! left beside the job, and the stop bell, told apart by the supervisor as
//! Unix's tells its signal flags apart), the output's news (an event its
//! copying threads set), the main process and the tied process.

use crate::os::wait::Woken;
use crate::os::windows_job::{self, Woken as Handle};
use std::os::windows::io::BorrowedHandle;
use std::time::Duration;

/// Sleeps until one handle is signalled or `limit` has passed; says which.
pub fn wait(doorbells: [BorrowedHandle; 2], output: Option<BorrowedHandle>, main: Option<BorrowedHandle>, tie: Option<BorrowedHandle>, limit: Duration) -> Woken {
    let [doorbell, stop] = doorbells;
    // Each handle's place among those waited on: the bells, then the output, the main process, the tie.
    let (has_output, has_main) = (output.is_some(), main.is_some());
    let output_slot = has_output.then_some(2);
    let main_slot = has_main.then_some(2 + usize::from(has_output));
    let handles: Vec<BorrowedHandle> = [Some(doorbell), Some(stop), output, main, tie].into_iter().flatten().collect();
    match windows_job::wait_any(&handles, limit) {
        Handle::Handle(0 | 1) => Woken { doorbell: true, ..Woken::default() },
        Handle::Handle(i) if Some(i) == output_slot => Woken { output: true, ..Woken::default() },
        Handle::Handle(i) if Some(i) == main_slot => Woken { main_ended: true, ..Woken::default() },
        Handle::Handle(_) => Woken { tie: true, ..Woken::default() },
        Handle::TimedOut => Woken::default(),
        Handle::Failed => Woken { failed: true, ..Woken::default() },
    }
}
