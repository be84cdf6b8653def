//! The process table for a snapshot where there is no /proc (macOS), from
//! sysinfo; `snapshot_linux.rs` has the same functions.

use crate::os::snapshot::{Child, Marker, ProcessInfo};
use crate::os::platform as portable;
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

/// Every process, marked `is_mcp` by `mark` on its command line: the
/// executable's name is argv[0]'s here (sysinfo's exe needs a second
/// pass).
pub fn processes(mark: Option<Marker>) -> Vec<ProcessInfo> {
    let Ok(mut system) = System::new() else { return Vec::new() };
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_memory().with_cmd(UpdateKind::Always),
    );
    system
        .processes()
        .values()
        .map(|p| {
            let command = portable::command(p);
            let is_mcp = mark.is_some_and(|mark| mark(&command, None));
            ProcessInfo {
                pid: p.pid().as_u32(),
                ppid: p.parent().map(|pp| pp.as_u32()).unwrap_or(0),
                command,
                memory_mb: p.memory() as f64 / (1024.0 * 1024.0),
                start_time: p.start_time() * 1000,
                is_mcp,
                job_id: None,
            }
        })
        .collect()
}

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
pub fn set_child_subreaper(_on: bool) -> rustix::io::Result<()> {
    Ok(())
}

/// Never asked: `own_children` lists nothing here.
pub fn reap_exactly(_child: Child) {}
