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


/// A plain record for unit tests anywhere in the crate: a job that ran
/// `make -j2` for 2h13m as pid 4242 under supervisor 4241, ended now, with
/// `status` and no outcome details; tests set what they look at.
#[cfg(test)]
pub(crate) fn sample_job(status: JobStatus) -> Job {
    let now = crate::now_ms();
    Job {
        id: "build-3f2a1c".into(),
        label: "build".into(),
        argv: vec!["make".into(), "-j2".into()],
        command: "make -j2".into(),
        cwd: "/src".into(),
        env: Default::default(),
        owner: None,
        context: None,
        status,
        exit_code: None,
        signal: None,
        main: Some(ProcessIdentity::from_stat(4242, 100)),
        supervisor: Some(ProcessIdentity::from_stat(4241, 99)),
        started_at: now - (2 * 3_600_000 + 13 * 60_000),
        ended_at: if status.is_final() { Some(now) } else { None },
        timeout_ms: None,
        notify: true,
        on_exit: None,
        error: None,
        log_path: "/tmp/x/output.log".into(),
        notification: None,
        hooks: Vec::new(),
        peak_rss_kb: None,
        seen_at: None,
    }
}

/// A sample job that ended with this exit code or signal (for tests).
#[cfg(test)]
pub(crate) fn sample_ended(status: JobStatus, exit_code: Option<i32>, signal: Option<&str>) -> Job {
    let mut job = sample_job(status);
    job.exit_code = exit_code;
    job.signal = signal.map(str::to_string);
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_one_name_that_parses_back_and_is_its_json() {
        for status in JobStatus::ALL {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
            assert_eq!(status.to_string(), status.as_str());
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
            assert_eq!(serde_json::from_value::<JobStatus>(status.as_str().into()).unwrap(), status);
        }
        assert_eq!(JobStatus::parse("Running"), None, "names are lowercase only");
        assert_eq!(JobStatus::parse(""), None);
    }

    #[test]
    fn a_bad_status_is_refused_naming_every_accepted_one() {
        let error = JobStatus::parse_or_explain("done").unwrap_err();
        assert_eq!(
            error,
            "bad status `done`: expected one of running, success, failed, killed, timeout, orphaned, lost"
        );
        assert_eq!(JobStatus::parse_or_explain("lost"), Ok(JobStatus::Lost));
    }

    #[test]
    fn only_running_and_orphaned_jobs_are_unfinished() {
        let unfinished: Vec<JobStatus> = JobStatus::ALL.into_iter().filter(|s| !s.is_final()).collect();
        assert_eq!(unfinished, [JobStatus::Running, JobStatus::Orphaned]);
    }

    #[test]
    fn signal_names_and_numbers_map_both_ways() {
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_number("SIGKILL"), Some(9));
        assert_eq!(signal_number("SIGTERM"), Some(15));
        for n in 1..32 {
            assert_eq!(signal_number(&signal_name(n)), Some(n), "signal {n} ({})", signal_name(n));
        }
        // Numbers without a name here are written as such and read back.
        assert_eq!(signal_name(64), "SIG64");
        assert_eq!(signal_number("SIG64"), None, "only 1..31 are read back");
        assert_eq!(signal_number("TERM"), None);
        assert_eq!(signal_number(""), None);
    }

    #[test]
    fn how_it_ended_prefers_the_exit_code_then_the_signal() {
        let mut job = sample_job(JobStatus::Failed);
        job.exit_code = Some(3);
        assert_eq!(how_it_ended(&job), "exit 3");
        job.signal = Some("SIGKILL".into());
        assert_eq!(how_it_ended(&job), "exit 3", "an exit code says more than a signal");
        job.exit_code = None;
        assert_eq!(how_it_ended(&job), "signal SIGKILL");
        job.exit_code = Some(0);
        job.status = JobStatus::Success;
        assert_eq!(how_it_ended(&job), "exit 0");
    }

    #[test]
    fn how_it_ended_writes_out_control_characters_in_a_signal_name() {
        let mut job = sample_job(JobStatus::Failed);
        job.signal = Some("SIGTERM\u{1b}[2J".into());
        assert_eq!(how_it_ended(&job), "signal SIGTERM\\x1b[2J");
    }

    #[test]
    fn how_it_ended_says_could_not_start_only_for_a_failed_job_without_main_process() {
        let mut job = sample_job(JobStatus::Failed);
        job.main = None;
        assert_eq!(how_it_ended(&job), "could not start");
        job.error = Some("command not found".into());
        assert_eq!(how_it_ended(&job), "could not start");
        job.status = JobStatus::Killed;
        assert_eq!(how_it_ended(&job), "no exit status", "killed before its main process was recorded");
        let mut ran = sample_job(JobStatus::Failed);
        ran.error = Some("its supervisor died".into());
        assert_eq!(how_it_ended(&ran), "no exit status", "an error beside a main process is no start failure");
    }

    #[test]
    fn how_it_ended_for_a_lost_job_names_its_supervisor_when_known() {
        let mut job = sample_job(JobStatus::Lost);
        assert_eq!(how_it_ended(&job), "supervisor pid 4241 gone, no exit status recorded");
        job.supervisor = None;
        assert_eq!(how_it_ended(&job), "supervisor gone, no exit status recorded");
        job.main = None;
        assert_eq!(how_it_ended(&job), "supervisor gone, no exit status recorded", "lost, not `could not start`");
        job.exit_code = Some(2);
        assert_eq!(how_it_ended(&job), "exit 2", "a recorded exit code still wins");
    }

    #[test]
    fn identities_match_on_pid_and_start_time_and_on_inode_and_boot_where_both_know_them() {
        let scanned = ProcessIdentity::from_stat(500, 7);
        let opened = ProcessIdentity { pid: 500, start_ticks: 7, pidfs_ino: Some(11), boot: Some(3) };
        assert!(scanned.matches(&opened) && opened.matches(&scanned), "unknown inode and boot do not disagree");
        assert!(opened.matches(&opened));
        assert!(!opened.matches(&ProcessIdentity { pidfs_ino: Some(12), ..opened }), "pid reused within one tick");
        assert!(!opened.matches(&ProcessIdentity { boot: Some(4), ..opened }), "another boot");
        assert!(!scanned.matches(&ProcessIdentity::from_stat(500, 8)), "pid reused");
        assert!(!scanned.matches(&ProcessIdentity::from_stat(501, 7)));
    }

    #[test]
    fn no_job_process_can_be_pid_0_or_1_or_past_i32_max() {
        let possible = |pid| ProcessIdentity::from_stat(pid, 1).is_possible_job_process();
        assert!(!possible(0) && !possible(1));
        assert!(possible(2) && possible(i32::MAX as u32));
        assert!(!possible(i32::MAX as u32 + 1) && !possible(u32::MAX));

        let mut job = sample_job(JobStatus::Running);
        assert_eq!(job.impossible_identity(), None);
        job.supervisor = Some(ProcessIdentity::from_stat(1, 1));
        let why = job.impossible_identity().unwrap();
        assert!(why.contains("pid 1 as the job's supervisor") && why.contains("nothing was signalled"), "{why}");
        job.main = Some(ProcessIdentity::from_stat(0, 1));
        assert!(job.impossible_identity().unwrap().contains("pid 0 as the job's main process"), "main is named first");
    }

    #[test]
    fn a_job_lasts_until_it_ended_or_until_now() {
        let mut job = sample_job(JobStatus::Running);
        job.started_at = 1_000;
        job.ended_at = None;
        assert_eq!(job.duration_ms(1_500), 500);
        job.ended_at = Some(1_200);
        assert_eq!(job.duration_ms(9_999), 200);
        job.ended_at = None;
        assert_eq!(job.duration_ms(900), 0, "a clock set back gives no negative runtime");
        assert_eq!(job.pid(), Some(4242));
    }
}
