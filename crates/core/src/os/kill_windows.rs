//! Windows's side of a kill (its course is supervise/kill.rs): the job's
//! console process group is asked to stop (CTRL_BREAK_EVENT), and the
//! force ends its whole Job Object; the Job Object says what is left.

use crate::os::{platform, windows_job};
use std::os::windows::io::OwnedHandle;

/// Asks the console process group `group` (a run's main process's pid) to
/// stop: CTRL_BREAK_EVENT, which a console program may handle to clean up.
pub fn ask_to_stop(group: u32) -> std::io::Result<()> {
    windows_job::break_group(group)
}

/// Ends every process of the Job Object now, each with the exit code a
/// process ended by `signal` has on Windows; when the Job Object cannot be
/// ended, `main` (the current run's main process) is, and the error said.
pub fn force(job_object: &OwnedHandle, main: Option<&mut std::process::Child>, signal: i32) -> std::io::Result<()> {
    windows_job::terminate_job(job_object, platform::exit_code_for(signal)).inspect_err(|_| {
        if let Some(main) = main {
            let _ = main.kill();
        }
    })
}

/// Whether any process is left in the Job Object.
pub fn anything_left(job_object: &OwnedHandle) -> bool {
    windows_job::active_processes(job_object).unwrap_or(0) > 0
}
