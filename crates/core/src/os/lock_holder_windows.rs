//! Who holds the registry's lock: Windows has no lock table to ask, so the
//! waiter's message names the pid the holder wrote into the lock file.

/// The holder of a lock on `path`: unknown here.
pub fn flock_holder(_path: &std::path::Path) -> Option<u32> {
    None
}

/// What the process is doing: not told here.
pub fn run_state(_pid: u32) -> Option<&'static str> {
    None
}
