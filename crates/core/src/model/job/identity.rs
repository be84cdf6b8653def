//! How a process we may signal later is known.

use serde::{Deserialize, Serialize};

/// A process we may signal later, known by pid *and* start time so that a
/// reused pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    /// Clock ticks since boot (field 22 of /proc/<pid>/stat). Two processes
    /// that get the same pid within one tick (10 ms) share it. On macOS:
    /// microseconds since the epoch (the kernel's start time, `p_start`).
    pub start_ticks: u64,
    /// The inode number of the process's pidfd on pidfs (Linux 6.9+): unique
    /// to one process for the whole boot, so it tells apart even a pid reused
    /// within one tick. Recorded for the processes we start; absent in
    /// records of older versions and on kernels without pidfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pidfs_ino: Option<u64>,
    /// The boot the identity was taken in (a tag of the kernel's boot_id):
    /// start ticks and pidfs inodes restart with each boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<u64>,
}

impl ProcessIdentity {
    /// Whether a job's process could have this pid at all. pid 0 and 1 never
    /// can (the kernel, init), and a pid past `i32::MAX` turns negative in a
    /// signal call; a record naming one is corrupt or forged, and acting on
    /// it (`killpg(1)` is `kill(-1)`) would signal every process we may.
    pub fn is_possible_job_process(&self) -> bool {
        self.pid > 1 && self.pid <= i32::MAX as u32
    }

    /// An identity known by pid and start time only (from a scan of the
    /// process table, where opening a pidfd per process would cost too much).
    pub fn from_stat(pid: u32, start_ticks: u64) -> ProcessIdentity {
        ProcessIdentity { pid, start_ticks, pidfs_ino: None, boot: None }
    }

    /// Whether two identities can be the same process: pid and start time
    /// agree, and so do the pidfs inode and boot where both are known.
    pub fn matches(&self, other: &ProcessIdentity) -> bool {
        let agree = |a: Option<u64>, b: Option<u64>| a.zip(b).is_none_or(|(a, b)| a == b);
        self.pid == other.pid
            && self.start_ticks == other.start_ticks
            && agree(self.pidfs_ino, other.pidfs_ino)
            && agree(self.boot, other.boot)
    }
}
