//! Where there is no child subreaper and no smaps_rollup (macOS, Windows):
//! the snapshot's answers that say so. `snapshot_linux.rs` has the real ones.

use crate::os::snapshot::Child;

/// No smaps_rollup: resident memory is all there is.
pub fn pss_kb(_pid: u32) -> Option<u64> {
    None
}

/// Never asked: `own_children` lists nothing here.
pub fn is_ending(_pid: u32) -> bool {
    false
}

/// No child subreapers on this system, so nothing is ever adopted and
/// there is nothing of anyone else's to reap.
pub fn own_children() -> Vec<Child> {
    Vec::new()
}

/// No child subreapers on this system.
pub const CHILD_SUBREAPERS: bool = false;

/// No smaps_rollup (`pss_kb`).
pub const READS_PSS: bool = false;

pub fn is_child_subreaper() -> bool {
    false
}

/// Nothing to set: nothing is ever adopted here.
pub fn set_child_subreaper(_on: bool) -> std::io::Result<()> {
    Ok(())
}

/// Never asked: `own_children` lists nothing here.
pub fn reap_exactly(_child: Child) {}
