//! The process table for a snapshot on Windows, from sysinfo; the same
//! functions as `snapshot_linux.rs`.

use crate::os::platform as portable;
use crate::os::snapshot::{Marker, ProcessInfo};
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

pub use crate::os::no_subreaper::{
    is_child_subreaper, is_ending, own_children, pss_kb, reap_exactly, set_child_subreaper, CHILD_SUBREAPERS, READS_PSS,
};
