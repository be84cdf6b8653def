//! Where there is no inotify (macOS, Windows): a directory watcher that
//! knows nothing, so its callers (`supervise::end_watch`, `verbs::wait`)
//! look again on a timer. `linux.rs` has the inotify one.

/// What `DirWatcher::drain` read.
pub struct Drained {
    pub new_dirs: Vec<std::ffi::OsString>,
    pub records_changed: bool,
}

pub struct DirWatcher;

impl DirWatcher {
    pub fn new() -> std::io::Result<DirWatcher> {
        Ok(DirWatcher)
    }

    /// None: nothing to poll; the caller looks again on a timer.
    pub fn fd(&self) -> Option<crate::os::sys::WakeFd<'_>> {
        None
    }

    pub fn watch(&self, _dir: &std::path::Path) {}

    pub fn watch_writes(&self, _dir: &std::path::Path) {}

    /// Nothing is known, so the records may have changed; new job
    /// directories are found by the caller's scan of the registry.
    pub fn drain(&self) -> Drained {
        Drained { new_dirs: Vec::new(), records_changed: true }
    }
}
