//! `run-bg __watch <id>`: stays with an orphaned job until its processes end,
//! logging what they still write (see `Context::watch_orphan`).

use proc_manager_core::verbs::context::Context;
use proc_manager_core::os::sys::OpenOptionsExt;

/// `id` is a valid job id (`Errand::parse` checks it): it names a directory.
pub fn run(context: Context, id: &str) -> i32 {
    // What it cannot do (log the orphan's output) is said where the supervisor's errors go.
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true).mode(0o600);
    let errors = proc_manager_core::os::sys::no_follow(&mut options).open(context.home.job_dir(id).join("supervisor.log"));
    if let Ok(errors) = errors {
        proc_manager_core::os::sys::redirect_stderr(&errors);
    }
    let inherited = proc_manager_core::supervise::outpipe::take_inherited(&context.home.job_dir(id));
    let runner = std::env::current_exe().ok();
    let context = Context { runner, ..context };
    if context.watch_orphan(id, inherited).is_err() {
        return 1;
    }
    0
}
