//! The whole process table as a snapshot reads it (each process's command,
//! memory and start), and this process's own children as a child subreaper
//! sees them (which are ending, reaping one it adopted). Linux reads /proc
//! directly (one `stat` and one `cmdline` read per process); macOS uses
//! libproc and `KERN_PROCARGS2`. The platform's reading is in
//! snapshot_linux.rs and snapshot_macos.rs, chosen in os/mod.rs.

pub use crate::os::snapshot_platform::{
    is_child_subreaper, is_ending, own_children, processes, pss_kb, reap_exactly, set_child_subreaper, CHILD_SUBREAPERS, READS_PSS,
};

/// Whether a process is to be marked `is_mcp`, from its command line and
/// the base name of its executable where that was read (`processes`).
pub type Marker<'a> = &'a (dyn Fn(&str, Option<&str>) -> bool + Sync);

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// Full argv joined with spaces; `[name]` for kernel threads.
    pub command: String,
    /// Resident set size.
    pub memory_mb: f64,
    /// Milliseconds since the epoch (10 ms resolution on Linux): with the pid,
    /// it tells a process from a later one that reused the pid.
    pub start_time: u64,
    pub is_mcp: bool,
    /// The job that owns the process (`ps` fills it in; a plain snapshot does not).
    pub job_id: Option<String>,
}

/// A direct child of the calling process, as the kernel lists it.
#[derive(Debug, Clone, Copy)]
pub struct Child {
    pub pid: u32,
    pub start_time: u64,
    pub zombie: bool,
    pub session: Option<u32>,
}
