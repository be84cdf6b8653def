//! Job ends as they happen, for an in-process consumer (the addon's
//! `watchJobs`): inotify on the home tells when a job's `job.json` or the
//! registry was written, by whichever process of the user; each end not seen
//! before is handed over with the same `data` as the POST to the interrupt
//! service. Between writes the thread sleeps in `poll`, at no CPU cost.

use crate::model::job::JobStatus;
use crate::store::config::Config;
use crate::store::paths::Home;
use crate::store::registry::Registry;
use crate::supervise::notify;
use crate::os::platform::DirWatcher;
use std::collections::HashSet;
use std::time::Duration;

/// A status worth telling: the job ended, or its supervisor is gone.
fn is_end(status: JobStatus) -> bool {
    status.is_final() || status == JobStatus::Orphaned
}

/// Hands each job end from now on (of `owner`'s jobs, when given) to `emit`
/// until `emit` returns false or `stop` becomes readable; ends recorded
/// before the call are not handed over.
pub fn watch(home: &Home, config: &Config, owner: Option<&str>, stop: &std::io::PipeReader, mut emit: impl FnMut(serde_json::Value) -> bool) -> crate::Result<()> {
    let inotify = DirWatcher::new().map_err(|e| crate::Error::io("watch", home.root.clone(), e))?;
    let jobs_dir = home.jobs_dir();
    let _ = std::fs::create_dir_all(&jobs_dir);
    inotify.watch(&home.root);
    inotify.watch(&jobs_dir);
    if let Ok(dir) = std::fs::read_dir(&jobs_dir) {
        for entry in dir.flatten() {
            inotify.watch(&entry.path());
        }
    }
    let registry = Registry::for_config(home, config);
    let mut told: HashSet<String> = HashSet::new();
    let scan = |told: &mut HashSet<String>, emit_new: bool, emit: &mut dyn FnMut(serde_json::Value) -> bool| -> bool {
        for job in registry.load().unwrap_or_default() {
            if !is_end(job.status()) || owner.is_some_and(|o| job.owner.as_deref() != Some(o)) {
                continue;
            }
            if told.insert(job.event_id()) && emit_new && !emit(notify::event_body(home, &config.notify, &job)["data"].take()) {
                return false;
            }
        }
        true
    };
    scan(&mut told, false, &mut emit);
    loop {
        // Where the platform cannot tell when a directory changes, look
        // again every 250 ms (in this thread, not the consumer's).
        let watched = inotify.fd();
        let pause = if watched.is_some() { Duration::MAX } else { Duration::from_millis(250) };
        crate::os::sys::pause_until_readable(pause, watched, Some(stop), &|| false);
        if crate::os::sys::has_input(stop) {
            return Ok(());
        }
        let drained = inotify.drain();
        for name in drained.new_dirs {
            inotify.watch(&jobs_dir.join(name));
        }
        // A rotation of some job's log wakes us too; only a record's change
        // is worth reading every job's record again.
        if drained.records_changed && !scan(&mut told, true, &mut emit) {
            return Ok(());
        }
    }
}
