//! The process table for a snapshot on Windows, from sysinfo; the same
//! functions as `snapshot_linux.rs`.

use crate::os::platform as portable;
use crate::os::snapshot::{Child, Marker, ProcessInfo};
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

/// Every process, marked `is_mcp` by `mark` on its command line and its
/// executable's name (`chrome.exe`, `msedge.exe`, …).
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
        .filter(|p| p.pid().as_u32() != 0)
        .map(|p| {
            let command = portable::command(p);
            let name = p.name().to_string_lossy();
            let is_mcp = mark.is_some_and(|mark| mark(&command, Some(&name)));
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

/// No proportional set size here: resident memory is all there is.
pub fn pss_kb(_pid: u32) -> Option<u64> {
    None
}

/// Never asked: `own_children` lists nothing here.
pub fn is_ending(_pid: u32) -> bool {
    false
}

/// Nothing is ever adopted on Windows (no subreapers).
pub fn own_children() -> Vec<Child> {
    Vec::new()
}

pub const CHILD_SUBREAPERS: bool = false;

pub const READS_PSS: bool = false;

pub fn is_child_subreaper() -> bool {
    false
}

/// Never asked: nothing is adopted here.
pub fn reap_exactly(_child: Child) {}

/// Nothing to set: nothing is adopted here.
pub fn set_child_subreaper(_on: bool) -> std::io::Result<()> {
    Ok(())
}
