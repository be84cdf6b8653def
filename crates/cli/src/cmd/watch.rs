//! `run-bg __watch <id>`: stays with an orphaned job until its processes end,
//! logging what they still write (see `Context::watch_orphan`).

use proc_manager_core::verbs::context::Context;
use std::os::unix::fs::OpenOptionsExt;

/// `id` is a valid job id (`Errand::parse` checks it): it names a directory.
pub fn run(context: Context, id: &str) -> i32 {
    // What it cannot do (log the orphan's output) is said where the supervisor's errors go.
    let errors = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(context.home.job_dir(id).join("supervisor.log"));
    if let Ok(errors) = errors {
        // SAFETY: dup2 onto our own stderr, which nothing else in this process holds a pointer into.
        // Its result needs no check: when it fails, stderr stays /dev/null, where the errand was started with it.
        unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&errors), 2) };
    }
    let inherited = proc_manager_core::supervise::outpipe::take_inherited(&context.home.job_dir(id));
    let runner = std::env::current_exe().ok();
    let context = Context { runner, ..context };
    if context.watch_orphan(id, inherited).is_err() {
        return 1;
    }
    0
}
