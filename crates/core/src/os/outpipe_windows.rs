//! The job's output pipe on Windows: an anonymous pipe the supervisor holds
//! alone, so there is no name to reopen and no watcher to hand it to when
//! the supervisor dies (an orphan's later output is not logged there; the
//! Platforms table says so). The same functions as supervise/outpipe.rs
//! (which is this file on Windows), each saying there is nothing.

use std::path::Path;

pub fn make(_job_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

pub fn reopen(_job_dir: &Path) -> std::io::Result<Option<std::os::windows::io::OwnedHandle>> {
    Ok(None)
}

pub fn take_inherited(_job_dir: &Path) -> Option<std::os::windows::io::OwnedHandle> {
    None
}

pub fn remove(_job_dir: &Path) {}

/// Never opened here (see the module's note): `open` gives None, so the
/// orphan's watcher only waits for its processes to end.
pub struct Reattached(std::convert::Infallible);

impl Reattached {
    /// `logs` is the home's logs config, as Unix's takes it (a type of the
    /// store, above this layer: nothing of it is read here).
    pub fn open<L>(
        _job_dir: &Path,
        _inherited: Option<std::os::windows::io::OwnedHandle>,
        _log_path: &Path,
        _logs: &L,
    ) -> Option<Reattached> {
        None
    }

    pub fn is_open(&self) -> bool {
        match self.0 {}
    }

    pub fn drain(&mut self) {
        match self.0 {}
    }

    pub fn pump(&mut self, _main: Option<&crate::model::job::ProcessIdentity>, _limit: std::time::Duration) {
        match self.0 {}
    }
}
