//! The process table for a snapshot on macOS, from libproc and
//! `KERN_PROCARGS2` (read in `macos.rs`); `snapshot_linux.rs` has the same
//! functions.

use crate::os::platform as mac;
use crate::os::procargs::ProcArgs;
use crate::os::snapshot::{Marker, ProcessInfo};

/// Every live process, marked `is_mcp` by `mark` on its command line and
/// the name of the file it executed. Another user's process (whose
/// arguments, memory and start the kernel keeps to that user and root)
/// shows as `[name]` with no memory and a start time of 0.
pub fn processes(mark: Option<Marker>) -> Vec<ProcessInfo> {
    let mut buf = Vec::new();
    mac::all_pids().into_iter().filter_map(|pid| process(pid, mark, &mut buf)).collect()
}

fn process(pid: u32, mark: Option<Marker>, buf: &mut Vec<u8>) -> Option<ProcessInfo> {
    let (ppid, command, exe, memory_bytes, start_time) = match mac::bsd_info(pid) {
        Ok(info) => {
            let args = if mac::read_procargs(pid, buf) { ProcArgs::parse(buf) } else { None };
            let command = args.as_ref().and_then(ProcArgs::command).unwrap_or_else(|| format!("[{}]", mac::name_of(&info)));
            let exe = args.as_ref().and_then(ProcArgs::exec_name);
            (info.pbi_ppid, command, exe, mac::resident_bytes(pid).unwrap_or(0), mac::start_micros(&info) / 1000)
        }
        Err(libc::EPERM) => {
            let short = mac::short_info(pid)?;
            let exe = mark.and_then(|_| mac::executable_name(pid));
            (short.pbsi_ppid, format!("[{}]", mac::c_name(&short.pbsi_comm)), exe, 0, 0)
        }
        Err(_) => return None, // gone, or a zombie
    };
    let is_mcp = mark.is_some_and(|mark| mark(&command, exe.as_deref()));
    Some(ProcessInfo { pid, ppid, command, memory_mb: memory_bytes as f64 / (1024.0 * 1024.0), start_time, is_mcp, job_id: None })
}

pub use crate::os::no_subreaper::{
    is_child_subreaper, is_ending, own_children, pss_kb, reap_exactly, set_child_subreaper, CHILD_SUBREAPERS, READS_PSS,
};
