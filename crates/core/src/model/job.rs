use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Running,
    /// Main process exited 0.
    Success,
    /// Exited non-zero, died of a signal nobody here sent, or could not start.
    Failed,
    /// Ended by `kill`.
    Killed,
    /// Ended by its time limit.
    Timeout,
    /// Its supervisor is gone but processes of the job still run.
    Orphaned,
    /// Supervisor and processes gone, no exit status recorded.
    Lost,
}

impl JobStatus {
    pub const ALL: [JobStatus; 7] = [
        JobStatus::Running,
        JobStatus::Success,
        JobStatus::Failed,
        JobStatus::Killed,
        JobStatus::Timeout,
        JobStatus::Orphaned,
        JobStatus::Lost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Success => "success",
            JobStatus::Failed => "failed",
            JobStatus::Killed => "killed",
            JobStatus::Timeout => "timeout",
            JobStatus::Orphaned => "orphaned",
            JobStatus::Lost => "lost",
        }
    }

    pub fn parse(text: &str) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// As `parse`, with the error a caller should see.
    pub fn parse_or_explain(text: &str) -> Result<JobStatus, String> {
        JobStatus::parse(text).ok_or_else(|| {
            let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("bad status `{text}`: expected one of {}", names.join(", "))
        })
    }

    /// Finished: the main process has an outcome and nothing of ours supervises it.
    pub fn is_final(self) -> bool {
        !matches!(self, JobStatus::Running | JobStatus::Orphaned)
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A process we may signal later, known by pid *and* start time so that a
/// reused pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    /// Clock ticks since boot (field 22 of /proc/<pid>/stat). Two processes
    /// that get the same pid within one tick (10 ms) share it.
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

/// One job as recorded in `jobs.json` (and mirrored in `jobs/<id>/job.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    pub label: String,
    /// The argv executed (for a shell command: `/bin/sh -c <line>`).
    pub argv: Vec<String>,
    /// The command as the user gave it, for display.
    pub command: String,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
    pub status: JobStatus,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Name of the signal the main process died of (`SIGTERM`).
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub main: Option<ProcessIdentity>,
    #[serde(default)]
    pub supervisor: Option<ProcessIdentity>,
    pub started_at: u64,
    #[serde(default)]
    pub ended_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default = "default_true")]
    pub notify: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exit: Option<String>,
    /// Why the job could not start, or what went wrong around it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub log_path: String,
    /// The last announcement of this job's end (or of it being orphaned or lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<Notification>,
    /// Command hooks run when the job ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
    /// Peak resident memory of the job's largest process (getrusage of the
    /// reaped descendants), recorded when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_kb: Option<u64>,
    /// When someone first looked at the ended job (check, wait, logs); until
    /// then `summary` lists it as finished but unseen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Not delivered yet: being retried, or waiting in the spool.
    Pending,
    Delivered,
    /// Given up on after a day of retries.
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Stable across retries, so a receiver can drop duplicates: `<jobId>:<status>`.
    pub event_id: String,
    pub state: DeliveryState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRun {
    pub command: String,
    pub exit_code: Option<i32>,
    /// Why it failed: timed out, could not start, died of a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

fn default_true() -> bool {
    true
}

impl Job {
    pub fn pid(&self) -> Option<u32> {
        self.main.map(|m| m.pid)
    }

    /// What makes this record unusable for signalling, if anything: a main
    /// process or supervisor at a pid no job's process can have.
    pub fn impossible_identity(&self) -> Option<String> {
        let bad = |role: &str, who: Option<ProcessIdentity>| {
            who.filter(|p| !p.is_possible_job_process()).map(|p| {
                format!("the record is corrupt: it names pid {} as the job's {role}, which no job's process can be; nothing was signalled", p.pid)
            })
        };
        bad("main process", self.main).or_else(|| bad("supervisor", self.supervisor))
    }

    pub fn duration_ms(&self, now_ms: u64) -> u64 {
        self.ended_at.unwrap_or(now_ms).saturating_sub(self.started_at)
    }
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

pub fn signal_number(name: &str) -> Option<i32> {
    (1..32).find(|&n| signal_name(n) == name)
}
/// `exit 3`, `signal SIGTERM`, `could not start` (no main process was ever
/// recorded: its exec failed), or what is known of an end without a status.
/// Decided on the record's facts: an `error` alone says nothing about the start.
pub fn how_it_ended(job: &Job) -> String {
    match (job.exit_code, &job.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {}", crate::model::text::visible(signal)),
        _ if job.main.is_none() && job.status == JobStatus::Failed => "could not start".to_string(),
        _ if job.status == JobStatus::Lost => match job.supervisor {
            Some(s) => format!("supervisor pid {} gone, no exit status recorded", s.pid),
            None => "supervisor gone, no exit status recorded".to_string(),
        },
        _ => "no exit status".to_string(),
    }
}

