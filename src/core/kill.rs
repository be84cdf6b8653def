//! Signalling a job's tree: its process group plus every process that carries
//! the job's cookie (descendants that left the group with setsid or a double fork).

use super::procinfo;

/// Sends `signal` to the group `pgid` and to every process carrying the job's
/// cookie. Returns how many targets were signalled (the group counts as one).
pub fn signal_tree(pgid: u32, job_id: &str, signal: i32) -> usize {
    let mut signalled = 0;
    if unsafe { libc::killpg(pgid as libc::pid_t, signal) } == 0 {
        signalled += 1;
    }
    for process in procinfo::processes_with_cookie(job_id) {
        // Re-checked right before the signal: the pid must still be the process we saw.
        if procinfo::is_same_process_alive(&process)
            && unsafe { libc::kill(process.pid as libc::pid_t, signal) } == 0
        {
            signalled += 1;
        }
    }
    signalled
}

/// True while any member of the group or any cookie carrier is alive
/// (zombies awaiting their reaper do not count).
pub fn tree_alive(pgid: u32, job_id: &str) -> bool {
    group_has_live_member(pgid) || !procinfo::processes_with_cookie(job_id).is_empty()
}

fn group_has_live_member(pgid: u32) -> bool {
    if unsafe { libc::killpg(pgid as libc::pid_t, 0) } != 0 {
        return false;
    }
    // killpg(…, 0) also succeeds for a group of zombies; look closer where we can.
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc") else { return true };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            let member = unsafe { libc::getpgid(pid) } == pgid as i32;
            if member && procinfo::identify(pid as u32).is_some() {
                return true;
            }
        }
        false
    }
    #[cfg(not(target_os = "linux"))]
    true
}
