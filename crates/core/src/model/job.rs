//! The record of one job as `jobs.json` and its `job.json` keep it: what was
//! started, its state, its processes, its notification and hooks.

use crate::model::os_text;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Running,
    /// Running, with its whole tree stopped (`pause`, SIGSTOP) until `resume`.
    /// Shown, never stored: the record keeps `running` and `paused_at`, so
    /// that a version without pause reads it (as running).
    Paused,
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
    /// Waiting for a queue slot or for the jobs it runs after; nothing started yet.
    Queued,
    /// Never started: a job it was to run after did not succeed.
    Skipped,
}

impl JobStatus {
    pub const ALL: [JobStatus; 10] = [
        JobStatus::Running,
        JobStatus::Paused,
        JobStatus::Success,
        JobStatus::Failed,
        JobStatus::Killed,
        JobStatus::Timeout,
        JobStatus::Orphaned,
        JobStatus::Lost,
        JobStatus::Queued,
        JobStatus::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Paused => "paused",
            JobStatus::Success => "success",
            JobStatus::Failed => "failed",
            JobStatus::Killed => "killed",
            JobStatus::Timeout => "timeout",
            JobStatus::Orphaned => "orphaned",
            JobStatus::Lost => "lost",
            JobStatus::Queued => "queued",
            JobStatus::Skipped => "skipped",
        }
    }

    pub fn parse(text: &str) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// As `parse`, with the error a caller should see.
    pub fn parse_or_explain(text: &str) -> crate::Result<JobStatus> {
        JobStatus::parse(text).ok_or_else(|| {
            let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
            crate::Error::Usage(format!("bad status `{text}`: expected one of {}", names.join(", ")))
        })
    }

    /// Finished: the main process has an outcome and nothing of ours supervises it.
    pub fn is_final(self) -> bool {
        !matches!(self, JobStatus::Running | JobStatus::Paused | JobStatus::Orphaned | JobStatus::Queued)
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

/// How the main process ended, as `waitpid` told its supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It died of this signal (its name: `SIGTERM`).
    Signal(String),
}

/// Who ended a job whose main process the supervisor reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// The job itself (or a signal nobody here sent).
    Itself,
    /// A `kill`.
    Kill,
    /// Its time limit.
    Timeout,
}

/// Where a job is, with exactly the facts that state has: a running job has
/// no exit code, an ended one always has its end time, only a start failure
/// has a start error. `JobStatus` is its one-word name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Under its supervisor.
    Running,
    /// Its supervisor is gone but processes of the job still run.
    Orphaned,
    /// The main process exited by itself: `success` with code 0, else `failed`.
    Exited { code: i32, ended_at: u64 },
    /// The main process died of a signal nobody here sent (`failed`).
    Signalled { signal: String, ended_at: u64 },
    /// No main process ever ran: why (`failed`).
    FailedToStart { error: String, ended_at: u64 },
    /// Ended by `kill`; how its main process ended, where it was seen.
    Killed { exit: Option<Exit>, ended_at: u64 },
    /// Ended by its time limit; how its main process ended, where it was seen.
    TimedOut { exit: Option<Exit>, ended_at: u64 },
    /// Supervisor and processes gone, no exit status recorded; why, where known.
    Lost { reason: Option<String>, ended_at: u64 },
    /// A job with a readiness check whose main process ended by itself
    /// before it was ready (`failed`, even with exit code 0: a server that
    /// exits before it serves did not do its job).
    EndedBeforeReady { exit: Exit, ended_at: u64 },
    /// Recorded, not started: waits for a queue slot or the jobs it runs after.
    Queued,
    /// Never started, and never will: why (`skipped: build-3f2a1c failed (exit 1)`).
    Skipped { reason: String, ended_at: u64 },
}

impl JobState {
    /// The state a supervisor records when its job's main process was reaped
    /// (`exit`, from `waitpid`) and nothing is left to wait for. The end of a
    /// kill or timeout is theirs whatever the main process did meanwhile; one
    /// whose exit could not be read is lost (waitpid without WUNTRACED reports
    /// only exits and deaths by signal, so this does not happen).
    pub fn ended(by: EndedBy, exit: Option<Exit>, ended_at: u64) -> JobState {
        match (by, exit) {
            (EndedBy::Kill, exit) => JobState::Killed { exit, ended_at },
            (EndedBy::Timeout, exit) => JobState::TimedOut { exit, ended_at },
            (EndedBy::Itself, Some(Exit::Code(code))) => JobState::Exited { code, ended_at },
            (EndedBy::Itself, Some(Exit::Signal(signal))) => JobState::Signalled { signal, ended_at },
            (EndedBy::Itself, None) => JobState::Lost {
                reason: Some("the main process ended without an exit status".to_string()),
                ended_at,
            },
        }
    }

    pub fn status(&self) -> JobStatus {
        match self {
            JobState::Running => JobStatus::Running,
            JobState::Orphaned => JobStatus::Orphaned,
            JobState::Exited { code: 0, .. } => JobStatus::Success,
            JobState::Exited { .. } | JobState::Signalled { .. } | JobState::FailedToStart { .. } => JobStatus::Failed,
            JobState::Killed { .. } => JobStatus::Killed,
            JobState::TimedOut { .. } => JobStatus::Timeout,
            JobState::Lost { .. } => JobStatus::Lost,
            JobState::EndedBeforeReady { .. } => JobStatus::Failed,
            JobState::Queued => JobStatus::Queued,
            JobState::Skipped { .. } => JobStatus::Skipped,
        }
    }

    /// Finished: the main process has an outcome and nothing of ours supervises it.
    pub fn is_final(&self) -> bool {
        self.status().is_final()
    }

    pub fn ended_at(&self) -> Option<u64> {
        match self {
            JobState::Running | JobState::Orphaned | JobState::Queued => None,
            JobState::Skipped { ended_at, .. }
            | JobState::Exited { ended_at, .. }
            | JobState::Signalled { ended_at, .. }
            | JobState::FailedToStart { ended_at, .. }
            | JobState::Killed { ended_at, .. }
            | JobState::TimedOut { ended_at, .. }
            | JobState::Lost { ended_at, .. }
            | JobState::EndedBeforeReady { ended_at, .. } => Some(*ended_at),
        }
    }

    /// How the main process ended, where that is known.
    pub fn exit(&self) -> Option<Exit> {
        match self {
            JobState::Exited { code, .. } => Some(Exit::Code(*code)),
            JobState::Signalled { signal, .. } => Some(Exit::Signal(signal.clone())),
            JobState::Killed { exit, .. } | JobState::TimedOut { exit, .. } => exit.clone(),
            JobState::EndedBeforeReady { exit, .. } => Some(exit.clone()),
            _ => None,
        }
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self.exit() {
            Some(Exit::Code(code)) => Some(code),
            _ => None,
        }
    }

    /// Name of the signal the main process died of (`SIGTERM`).
    pub fn signal(&self) -> Option<String> {
        match self.exit() {
            Some(Exit::Signal(signal)) => Some(signal),
            _ => None,
        }
    }

    /// Why the job could not start, or why it is lost.
    pub fn error(&self) -> Option<&str> {
        let error = match self {
            JobState::FailedToStart { error, .. } => Some(error.as_str()),
            JobState::Lost { reason, .. } => reason.as_deref(),
            JobState::Skipped { reason, .. } => Some(reason.as_str()),
            _ => None,
        };
        // A `failed` record of format 1 without any detail has none to say.
        error.filter(|e| !e.is_empty())
    }

    /// Whether `next` may follow this state. A running job may become
    /// anything but running again; an orphan may end (nothing brings its
    /// supervisor back); an ended job stays as it ended, except that a job
    /// found lost while we were killing it is recorded as killed (our signals
    /// ended it). A kill recorded after an exit does not replace the exit.
    pub fn can_become(&self, next: &JobState) -> bool {
        match (self, next) {
            // A queued job starts once, or ends without ever running.
            (JobState::Queued, next) => !matches!(next, JobState::Queued | JobState::Orphaned | JobState::Lost { .. }),
            (_, JobState::Running | JobState::Queued) => false,
            (JobState::Running, _) => true,
            (JobState::Orphaned, next) => next.is_final(),
            (JobState::Lost { .. }, JobState::Killed { .. }) => true,
            _ => false,
        }
    }

    /// The exit status a shell would give for this job: its exit code, 128 +
    /// the signal it died of, 143 (SIGTERM's) for a job we ended whose own
    /// end was not seen or was a clean exit under our signal, else 1.
    pub fn shell_exit_code(&self) -> i32 {
        let ended_by_us = matches!(self, JobState::Killed { .. } | JobState::TimedOut { .. });
        if let JobState::EndedBeforeReady { exit: Exit::Code(0), .. } = self {
            return 1;
        }
        match self.exit() {
            Some(Exit::Code(0)) | None if ended_by_us => 128 + crate::model::signals::SIGTERM,
            Some(Exit::Code(code)) => code,
            Some(Exit::Signal(signal)) => match signal_number(&signal) {
                Some(number) => 128 + number,
                None if ended_by_us => 128 + crate::model::signals::SIGTERM,
                None => 1,
            },
            None => 1,
        }
    }
}

/// One job as recorded in `jobs.json` (and mirrored in `jobs/<id>/job.json`).
///
/// On disk its state is the flat fields of format 1 (`status`, `exit_code`,
/// `signal`, `ended_at`, `error`; see `JobRecord`), so records written by
/// earlier versions load unchanged and are written back the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "JobRecord", into = "JobRecord")]
pub struct Job {
    pub id: String,
    pub label: String,
    /// The argv executed (for a shell command: `/bin/sh -c <line>`): bytes,
    /// as Unix has them (see `os_text`).
    pub argv: Vec<OsString>,
    /// The command as the user gave it, for display.
    pub command: String,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, OsString>,
    pub owner: Option<String>,
    pub context: Option<serde_json::Value>,
    pub state: JobState,
    /// An error the record carries beside a state that has none of its own
    /// (only a hand edit makes one): kept, shown and written back as it was,
    /// never set by this program.
    pub note: Option<String>,
    pub main: Option<ProcessIdentity>,
    pub supervisor: Option<ProcessIdentity>,
    pub started_at: u64,
    pub timeout_ms: Option<u64>,
    pub notify: bool,
    pub on_exit: Option<String>,
    pub log_path: PathBuf,
    /// The last announcement of this job's end (or of it being orphaned or lost).
    pub notification: Option<Notification>,
    /// Command hooks run when the job ended.
    pub hooks: Vec<HookRun>,
    /// Peak resident memory of the job's largest process (getrusage of the
    /// reaped descendants), recorded when it ends.
    pub peak_rss_kb: Option<u64>,
    /// When someone first looked at the ended job (check, wait, logs); until
    /// then `summary` lists it as finished but unseen.
    pub seen_at: Option<u64>,
    /// How the job says it is ready to serve (issue 15), if it was asked.
    pub ready: Option<Readiness>,
    /// When its supervisor saw it ready (ms since the epoch).
    pub ready_at: Option<u64>,
    /// What its supervisor last saw keep it from being ready: `port 3000 is
    /// held by pid 812 (nginx), not by this job`.
    pub ready_blocked: Option<String>,
    /// Patterns of output lines that each send a `matched` notification.
    pub notify_on: Vec<String>,
    /// `--restart`: the policy it was started with and how its restarts went.
    pub restart: Option<Restart>,
    /// `--stdin pipe`: its stdin is `jobs/<id>/pipes/stdin`, written by `send`.
    pub stdin_pipe: bool,
    /// The one-off rule registered with the interrupt service for this job (`--wake`).
    pub wake: Option<Wake>,
    /// How it waits before it starts (`--queue`, `--priority`, `--after`);
    /// `None` for a job started at once.
    pub waits: Option<Waits>,
    /// `--tie`: the process whose end kills the job's tree.
    pub tie: Option<Tie>,
    /// `--nice`: the niceness its main process starts at, each run.
    pub nice: Option<i32>,
    /// When `pause` stopped its tree (ms since the epoch); `None` while it
    /// runs. Written by its supervisor, which also stops the timeout clock.
    pub paused_at: Option<u64>,
    /// How long its pauses that are over lasted, in all (ms): the clocks
    /// that count the job's own time (`--ready-timeout`) leave them out.
    pub paused_ms: u64,
    /// The job this one is a rerun of (`rerun`).
    pub rerun_of: Option<String>,
    /// The agent harness session that started it (`RUN_BG_SESSION`, or the
    /// session whose harness process is an ancestor of the starter; see
    /// `store::sessions`): that session is woken when it ends and kills it
    /// when the session ends, unless `outlive_session`.
    pub session: Option<String>,
    /// `--outlive-session`: the session's end leaves it running.
    pub outlive_session: bool,
}

/// What a job started later waits for: a slot in its queue, the end of
/// other jobs. Kept after it starts, to show what it waited for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Waits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Higher starts first; first come first served within a priority.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    /// Jobs that must have ended (successfully, unless `after_any`) first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_any: bool,
    /// A job of `after` that has a readiness check counts once it was
    /// ready, not only once it ended well (a stack's web server after its
    /// database); one never ready by its readiness timeout skips this job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_ready: bool,
    /// When it was submitted (its place in the queue; `started_at` becomes
    /// the real start).
    pub queued_at: u64,
}

fn no_time(ms: &u64) -> bool {
    *ms == 0
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// What makes a job ready (`--ready-log`, `--ready-port`, `--ready-url`):
/// the first of them that holds. Patterns are checked when the job starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Readiness {
    /// A line of output matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// Something accepts TCP connections on 127.0.0.1 or ::1 at this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// An `http://` URL answers a GET with 2xx or 3xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Readiness is watched this long after the start; then the job runs
    /// on, `not ready after …`. None: as long as the job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl Job {
    /// The id of the event this job's current status is: `<jobId>:<status>`,
    /// the same across retries and deliverers, so a receiver drops duplicates by it.
    pub fn event_id(&self) -> String {
        format!("{}:{}", self.id, self.status())
    }

    /// Whether a wait for readiness is over: the job was seen ready, ended,
    /// or its readiness timeout passed (at `now_ms`), or it has no check.
    pub fn readiness_settled(&self, now_ms: u64) -> bool {
        self.ready.is_none() || self.ready_at.is_some() || self.status().is_final() || self.not_ready_after(now_ms).is_some()
    }

    /// The readiness timeout (ms), once it passed with the job still not ready.
    /// Not while it is queued: its `started_at` is then when it was queued,
    /// and the timeout counts from its real start.
    pub fn not_ready_after(&self, now_ms: u64) -> Option<u64> {
        let limit = self.ready.as_ref()?.timeout_ms?;
        if self.state == JobState::Queued {
            return None;
        }
        (self.ready_at.is_none() && self.unpaused_ms(now_ms) >= limit).then_some(limit)
    }

    /// The pause in force, if any, is over at `now_ms`: its time joins `paused_ms`.
    pub fn end_pause(&mut self, now_ms: u64) {
        if let Some(at) = self.paused_at.take() {
            self.paused_ms = self.paused_ms.saturating_add(now_ms.saturating_sub(at));
        }
    }

    /// How long the job has run at `now_ms` since its start, its pauses
    /// left out (the one in force too): its `--ready-timeout` is of that.
    pub fn unpaused_ms(&self, now_ms: u64) -> u64 {
        let pausing = self.paused_at.map_or(0, |at| now_ms.saturating_sub(at));
        now_ms.saturating_sub(self.started_at).saturating_sub(self.paused_ms).saturating_sub(pausing)
    }
}

/// A job tied to a process (`run-bg --tie`, `--tie-pid`): when that process
/// ends, the supervisor kills the job's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tie {
    /// The process watched (the caller of `run-bg`, or the Node process).
    pub to: ProcessIdentity,
    /// When its end was seen and the kill begun for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fired_at: Option<u64>,
    /// Whether `to` is the caller of the start (`--tie`, `tie: true`) rather
    /// than a process named by pid (`--tie-pid`, `tiePid`). Records written
    /// before it was kept read as named by pid: the neutral wording is true
    /// of both.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub caller: bool,
}

impl Tie {
    /// Why a job whose tie fired was killed.
    pub fn reason(&self) -> String {
        if self.caller {
            format!("its caller (pid {}) exited", self.to.pid)
        } else {
            format!("the process it was tied to (pid {}) exited", self.to.pid)
        }
    }
}

/// A job as written in format 1: the state as flat fields, in this order.
#[derive(Serialize, Deserialize)]
struct JobRecord {
    id: String,
    label: String,
    /// Text, as every build reads it; a word that is no UTF-8 is written out
    /// here and kept exactly in `argv_bytes` (see `os_text`), and so are the
    /// other values that are bytes.
    argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    argv_bytes: Option<os_text::WordBytes>,
    command: String,
    cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd_bytes: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env_bytes: BTreeMap<String, Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context: Option<serde_json::Value>,
    status: JobStatus,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    main: Option<ProcessIdentity>,
    #[serde(default)]
    supervisor: Option<ProcessIdentity>,
    started_at: u64,
    #[serde(default)]
    ended_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(default = "default_true")]
    notify: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on_exit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    log_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log_path_bytes: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    notification: Option<Notification>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    hooks: Vec<HookRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    peak_rss_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seen_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ready: Option<Readiness>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ready_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ready_blocked: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notify_on: Vec<String>,
    /// A `failed` job that ended by itself before it was ready (its exit
    /// code may be 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    before_ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    restart: Option<Restart>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stdin_pipe: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wake: Option<Wake>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    waits: Option<Waits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tie: Option<Tie>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    paused_at: Option<u64>,
    #[serde(default, skip_serializing_if = "no_time")]
    paused_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rerun_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    outlive_session: bool,
}

/// The state a format-1 record describes. Every record this program writes
/// reads back as the state it was written from. A hand-edited record whose
/// fields contradict each other is read by its status, keeping the facts that
/// status can have: a running job's exit code is dropped, an ended job without
/// an end time ended when it started, a `failed` one with an exit code 0 is a
/// success.
fn state_of_record(r: &JobRecord) -> JobState {
    let ended_at = r.ended_at.unwrap_or(r.started_at);
    let exit = match (r.exit_code, &r.signal) {
        (Some(code), _) => Some(Exit::Code(code)),
        (None, Some(signal)) => Some(Exit::Signal(signal.clone())),
        (None, None) => None,
    };
    if let (JobStatus::Failed, true, Some(exit)) = (r.status, r.before_ready, exit.clone()) {
        return JobState::EndedBeforeReady { exit, ended_at };
    }
    match r.status {
        // `paused` is never written (see `JobStatus::Paused`); a hand edit
        // naming it names a running job.
        JobStatus::Running | JobStatus::Paused => JobState::Running,
        JobStatus::Orphaned => JobState::Orphaned,
        JobStatus::Success => JobState::Exited { code: 0, ended_at },
        JobStatus::Failed => match exit {
            Some(Exit::Code(code)) => JobState::Exited { code, ended_at },
            Some(Exit::Signal(signal)) => JobState::Signalled { signal, ended_at },
            None => JobState::FailedToStart { error: r.error.clone().unwrap_or_default(), ended_at },
        },
        JobStatus::Killed => JobState::Killed { exit, ended_at },
        JobStatus::Timeout => JobState::TimedOut { exit, ended_at },
        JobStatus::Lost => JobState::Lost { reason: r.error.clone(), ended_at },
        JobStatus::Queued => JobState::Queued,
        JobStatus::Skipped => JobState::Skipped { reason: r.error.clone().unwrap_or_default(), ended_at },
    }
}

impl From<JobRecord> for Job {
    fn from(r: JobRecord) -> Job {
        let state = state_of_record(&r);
        let note = if state.error().is_some() { None } else { r.error.filter(|e| !e.is_empty()) };
        Job {
            id: r.id,
            label: r.label,
            argv: os_text::words_from_record(r.argv, r.argv_bytes),
            command: r.command,
            cwd: os_text::from_record(r.cwd, r.cwd_bytes).into(),
            env: os_text::env_from_record(r.env, r.env_bytes),
            owner: r.owner,
            context: r.context,
            state,
            note,
            main: r.main,
            supervisor: r.supervisor,
            started_at: r.started_at,
            timeout_ms: r.timeout_ms,
            notify: r.notify,
            on_exit: r.on_exit,
            log_path: os_text::from_record(r.log_path, r.log_path_bytes).into(),
            notification: r.notification,
            hooks: r.hooks,
            peak_rss_kb: r.peak_rss_kb,
            seen_at: r.seen_at,
            ready: r.ready,
            ready_at: r.ready_at,
            ready_blocked: r.ready_blocked,
            notify_on: r.notify_on,
            restart: r.restart,
            stdin_pipe: r.stdin_pipe,
            wake: r.wake,
            waits: r.waits,
            tie: r.tie,
            nice: r.nice,
            paused_at: r.paused_at,
            paused_ms: r.paused_ms,
            rerun_of: r.rerun_of,
            session: r.session,
            outlive_session: r.outlive_session,
        }
    }
}

impl From<Job> for JobRecord {
    fn from(job: Job) -> JobRecord {
        let state = &job.state;
        let (argv, argv_bytes) = os_text::words_to_record(&job.argv);
        let (cwd, cwd_bytes) = os_text::to_record(job.cwd.as_os_str());
        let (env, env_bytes) = os_text::env_to_record(&job.env);
        let (log_path, log_path_bytes) = os_text::to_record(job.log_path.as_os_str());
        JobRecord {
            status: state.status(),
            exit_code: state.exit_code(),
            signal: state.signal(),
            ended_at: state.ended_at(),
            error: state.error().or(job.note.as_deref()).map(str::to_string),
            before_ready: matches!(state, JobState::EndedBeforeReady { .. }),
            id: job.id,
            label: job.label,
            argv,
            argv_bytes,
            command: job.command,
            cwd,
            cwd_bytes,
            env,
            env_bytes,
            owner: job.owner,
            context: job.context,
            main: job.main,
            supervisor: job.supervisor,
            started_at: job.started_at,
            timeout_ms: job.timeout_ms,
            notify: job.notify,
            on_exit: job.on_exit,
            log_path,
            log_path_bytes,
            notification: job.notification,
            hooks: job.hooks,
            peak_rss_kb: job.peak_rss_kb,
            seen_at: job.seen_at,
            ready: job.ready,
            ready_at: job.ready_at,
            ready_blocked: job.ready_blocked,
            notify_on: job.notify_on,
            restart: job.restart,
            stdin_pipe: job.stdin_pipe,
            wake: job.wake,
            waits: job.waits,
            tie: job.tie,
            nice: job.nice,
            paused_at: job.paused_at,
            paused_ms: job.paused_ms,
            rerun_of: job.rerun_of,
            session: job.session,
            outlive_session: job.outlive_session,
        }
    }
}

/// What became of a job's exit notification, as the receiver answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryState {
    /// Not answered yet: being sent or retried (refused, timed out, 5xx), or
    /// waiting in the spool.
    #[default]
    Pending,
    /// A 2xx from a receiver that does not answer as the interrupt service
    /// does (and what records before the service's answers were read say).
    Delivered,
    /// The interrupt service queued it for the agent (`matched` rules).
    Queued,
    /// The interrupt service took it and passes it on to no one (`reason`).
    Ignored,
    /// Refused for good (a 4xx, repeated 5xx) or given up on after a day.
    Failed,
    /// Nothing listened at the built-in default address for the whole retry
    /// period: no interrupt service is installed, so nothing is spooled.
    NoListener,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Queued => "queued",
            DeliveryState::Ignored => "ignored",
            DeliveryState::Failed => "failed",
            DeliveryState::NoListener => "no-listener",
        }
    }

    /// Nothing more will be tried for it.
    pub fn is_settled(self) -> bool {
        self != DeliveryState::Pending
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Notification {
    /// Stable across retries, so a receiver can drop duplicates: `<jobId>:<status>`.
    pub event_id: String,
    pub state: DeliveryState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the receiver took it (queued, ignored or delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<u64>,
    /// `queued`: how many of the service's rules matched (0: its default action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<u32>,
    /// `ignored`: the service's reason; `failed`: what the refusal said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The level it was sent at (`info`, `warn`, `alert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// `no-listener`: this is the home's first, which says how to set up or
    /// turn off notifications (later ones say it in a few words).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hint: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRun {
    pub command: String,
    pub exit_code: Option<i32>,
    /// Why it failed: timed out, could not start, died of a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
    /// The event it ran for: a record of that event's hooks replaces them
    /// (see `store::deliveries`), so one folded twice adds nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

/// When a job's main process is started again after it ends (`--restart`):
/// `on-failure` after an exit other than 0 or a death by signal (an exit 0
/// ends the job), `always` after any end, an exit 0 too.
// The variants' docs would be their help in the CLI and in the JSON Schema
// (changing how both show them): the enum's doc says it instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    OnFailure,
    Always,
}

impl RestartPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Always => "always",
        }
    }

    pub fn parse(text: &str) -> crate::Result<RestartPolicy> {
        match text {
            "on-failure" => Ok(RestartPolicy::OnFailure),
            "always" => Ok(RestartPolicy::Always),
            _ => Err(crate::Error::Usage(format!("bad restart policy `{text}`: expected on-failure or always"))),
        }
    }
}

/// What the interrupt service does with a job's wake rule when it matches:
/// `message` injects the text into the agent's session, `subagent` hands it
/// (with the instruction) to a sub-agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum WakeAction {
    #[default]
    Message,
    Subagent,
}

impl WakeAction {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeAction::Message => "message",
            WakeAction::Subagent => "subagent",
        }
    }

    pub fn parse(text: &str) -> std::result::Result<WakeAction, String> {
        match text {
            "message" => Ok(WakeAction::Message),
            "subagent" => Ok(WakeAction::Subagent),
            other => Err(format!("bad wake action `{other}`: expected message or subagent")),
        }
    }
}

/// Where a job's wake rule stands at the interrupt service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WakeState {
    /// Being registered (the supervisor does it as the job starts).
    #[default]
    Pending,
    /// The service took the rule (`rule_id`).
    Registered,
    /// The service did not take it, or did not answer in time (`reason`).
    Failed,
    /// The job's end event matched it and the service queued it
    /// (`queued_at`): whether it fires shows once the service's batch went
    /// out (see `supervise::wake::confirm_due`).
    Queued,
    /// The service dispatched it (the one-off rule is gone from its rules).
    Fired,
    /// Its end event matched it, but the service kept it past its dispatch
    /// (the `openclaw` call failed, or it restarted and lost its queue):
    /// the agent was not woken through it within the wait (`reason` says
    /// how long); removed by us.
    NotFired,
    /// Removed by us (`DELETE /rules/<id>`): the end event did not go through it (`reason`).
    Removed,
}

impl WakeState {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeState::Pending => "pending",
            WakeState::Registered => "registered",
            WakeState::Failed => "failed",
            WakeState::Queued => "queued",
            WakeState::Fired => "fired",
            WakeState::NotFired => "not-fired",
            WakeState::Removed => "removed",
        }
    }
}

/// A job started with `--restart`: its settings, then what its supervisor
/// records at each restart (`count`, `last_reason`, `last_at`). One record,
/// one job id, across every run of the main process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restart {
    pub policy: RestartPolicy,
    /// Restarts in a row (without a healthy run between) before giving up.
    pub max_restarts: u32,
    /// The first delay; later ones double up to a cap (supervise/restart.rs).
    pub delay_ms: u64,
    /// Restarts so far.
    #[serde(default)]
    pub count: u32,
    /// How the run before the last restart ended: `exit 1`, `signal SIGSEGV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
    /// When that run ended (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<u64>,
}

/// A job's wake rule (`--wake`): a one-off rule of the interrupt service
/// matching this job's events, registered when the job starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Wake {
    /// The text the agent gets, with `{{key}}` filled from the event's `data`
    /// by the service; without one the service uses `data.message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For a sub-agent: what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    #[serde(default)]
    pub action: WakeAction,
    #[serde(default)]
    pub state: WakeState,
    /// The rule's id at the service (`run-bg-<jobId>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// The rules address it was registered at, for its removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `failed`: what the service answered, or that it did not; `removed`,
    /// `not-fired`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `queued`: when the service queued the end event that matched it (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<u64>,
}

fn default_true() -> bool {
    true
}

impl Job {
    pub fn pid(&self) -> Option<u32> {
        self.main.map(|m| m.pid)
    }

    pub fn status(&self) -> JobStatus {
        self.state.status()
    }

    /// The status people and the faces see: `paused` for a running job
    /// whose tree `pause` stopped; else `status`.
    pub fn shown_status(&self) -> JobStatus {
        match self.status() {
            JobStatus::Running if self.paused_at.is_some() => JobStatus::Paused,
            status => status,
        }
    }

    pub fn ended_at(&self) -> Option<u64> {
        self.state.ended_at()
    }

    pub fn exit_code(&self) -> Option<i32> {
        self.state.exit_code()
    }

    pub fn signal(&self) -> Option<String> {
        self.state.signal()
    }

    /// Why it could not start or is lost, or the note a record carries.
    pub fn error(&self) -> Option<&str> {
        self.state.error().or(self.note.as_deref())
    }

    /// Moves the job to `next` if that may follow its state (see
    /// `JobState::can_become`); says whether it did.
    pub fn change_state(&mut self, next: JobState) -> bool {
        let allowed = self.state.can_become(&next);
        if allowed {
            self.state = next;
        }
        allowed
    }

    /// The job as an announcement made for `claimed` describes it: the
    /// status changed under the lock, which the job may have left since
    /// (orphaned, then lost or killed). A claimed state that carries facts
    /// the record no longer has (an exit) leaves the recorded state.
    pub fn as_claimed(mut self, claimed: JobStatus) -> Job {
        if self.status() != claimed {
            match claimed {
                JobStatus::Orphaned => self.state = JobState::Orphaned,
                JobStatus::Lost => {
                    let ended_at = self.ended_at().unwrap_or_else(crate::now_ms);
                    self.state = JobState::Lost { reason: None, ended_at };
                }
                _ => {}
            }
        }
        self
    }

    /// What makes this record unusable for signalling, if anything: a main
    /// process or supervisor at a pid no job's process can have.
    pub fn impossible_identity(&self) -> Option<String> {
        let bad = |role: &str, who: Option<ProcessIdentity>| {
            who.filter(|p| !p.is_possible_job_process()).map(|p| {
                format!("{CORRUPT_RECORD}: it names pid {} as the job's {role}, which no job's process can be; nothing was signalled", p.pid)
            })
        };
        bad("main process", self.main).or_else(|| bad("supervisor", self.supervisor))
    }

    /// Whether the job was found lost because its record is corrupt
    /// (`impossible_identity`): the identities it named are dropped from it
    /// then, so its reason is all that tells.
    pub fn lost_to_corrupt_record(&self) -> bool {
        matches!(&self.state, JobState::Lost { reason: Some(reason), .. } if reason.starts_with(CORRUPT_RECORD))
    }

    pub fn duration_ms(&self, now_ms: u64) -> u64 {
        self.ended_at().unwrap_or(now_ms).saturating_sub(self.started_at)
    }
}

/// How the reason of a job lost to a corrupt record begins.
pub const CORRUPT_RECORD: &str = "the record is corrupt";

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        crate::model::signals::SIGHUP => "SIGHUP",
        crate::model::signals::SIGINT => "SIGINT",
        crate::model::signals::SIGQUIT => "SIGQUIT",
        crate::model::signals::SIGILL => "SIGILL",
        crate::model::signals::SIGTRAP => "SIGTRAP",
        crate::model::signals::SIGABRT => "SIGABRT",
        crate::model::signals::SIGBUS => "SIGBUS",
        crate::model::signals::SIGFPE => "SIGFPE",
        crate::model::signals::SIGKILL => "SIGKILL",
        crate::model::signals::SIGUSR1 => "SIGUSR1",
        crate::model::signals::SIGSEGV => "SIGSEGV",
        crate::model::signals::SIGUSR2 => "SIGUSR2",
        crate::model::signals::SIGPIPE => "SIGPIPE",
        crate::model::signals::SIGALRM => "SIGALRM",
        crate::model::signals::SIGTERM => "SIGTERM",
        crate::model::signals::SIGXCPU => "SIGXCPU",
        crate::model::signals::SIGXFSZ => "SIGXFSZ",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

pub fn signal_number(name: &str) -> Option<i32> {
    (1..32).find(|&n| signal_name(n) == name)
}
/// `exit 3`, `signal SIGTERM`, `could not start` (no main process was ever
/// recorded: its exec failed), or what is known of an end without a status.
pub fn how_it_ended(job: &Job) -> String {
    match (&job.state, job.state.exit()) {
        (JobState::EndedBeforeReady { .. }, Some(Exit::Code(code))) => format!("exit {code} before it was ready"),
        (JobState::EndedBeforeReady { .. }, Some(Exit::Signal(signal))) => {
            format!("signal {} before it was ready", crate::model::text::visible(&signal))
        }
        (_, Some(Exit::Code(code))) => format!("exit {code}"),
        (_, Some(Exit::Signal(signal))) => format!("signal {}", crate::model::text::visible(&signal)),
        (JobState::FailedToStart { .. }, None) if job.main.is_none() => "could not start".to_string(),
        (JobState::Skipped { reason, .. }, None) => format!("never started ({})", reason.trim_start_matches("skipped: ")),
        (JobState::Queued, None) => "not started yet".to_string(),
        (JobState::Killed { .. }, None) if job.main.is_none() && job.waits.is_some() => "while queued, never started".to_string(),
        (JobState::Lost { .. }, None) if job.lost_to_corrupt_record() => CORRUPT_RECORD.to_string(),
        (JobState::Lost { .. }, None) => match job.supervisor {
            Some(s) => format!("supervisor pid {} gone, no exit status recorded", s.pid),
            None => "supervisor gone, no exit status recorded".to_string(),
        },
        _ => "no exit status".to_string(),
    }
}

/// A plain record for unit tests anywhere in the crate: a job that ran
/// `make -j2` for 2h13m as pid 4242 under supervisor 4241, ended now, in
/// the plainest state of `status` (`failed`: exit 1); tests set what they
/// look at.
#[cfg(test)]
pub(crate) fn sample_job(status: JobStatus) -> Job {
    let now = crate::now_ms();
    let state = match status {
        JobStatus::Running | JobStatus::Paused => JobState::Running,
        JobStatus::Orphaned => JobState::Orphaned,
        JobStatus::Success => JobState::Exited { code: 0, ended_at: now },
        JobStatus::Failed => JobState::Exited { code: 1, ended_at: now },
        JobStatus::Killed => JobState::Killed { exit: None, ended_at: now },
        JobStatus::Timeout => JobState::TimedOut { exit: None, ended_at: now },
        JobStatus::Lost => JobState::Lost { reason: None, ended_at: now },
        JobStatus::Queued => JobState::Queued,
        JobStatus::Skipped => JobState::Skipped { reason: "skipped: build-000000 failed (exit 1)".into(), ended_at: now },
    };
    let mut job = sample_in(state);
    if status == JobStatus::Paused {
        job.paused_at = Some(now);
    }
    job
}

/// The sample job in this state (for tests).
#[cfg(test)]
pub(crate) fn sample_in(state: JobState) -> Job {
    // The state's own end where it has a real one (`sample_job`'s): a second
    // clock read could fall a millisecond later and make the run 2h13m plus
    // a tick. A made-up end (7) is no time to count back from.
    let run_ms = 2 * 3_600_000 + 13 * 60_000;
    let now = state.ended_at().filter(|&end| end > run_ms).unwrap_or_else(crate::now_ms);
    Job {
        id: "build-3f2a1c".into(),
        label: "build".into(),
        argv: vec!["make".into(), "-j2".into()],
        command: "make -j2".into(),
        cwd: "/src".into(),
        env: Default::default(),
        owner: None,
        context: None,
        state,
        note: None,
        main: Some(ProcessIdentity::from_stat(4242, 100)),
        supervisor: Some(ProcessIdentity::from_stat(4241, 99)),
        started_at: now - run_ms,
        timeout_ms: None,
        notify: true,
        on_exit: None,
        log_path: "/tmp/x/output.log".into(),
        notification: None,
        hooks: Vec::new(),
        peak_rss_kb: None,
        seen_at: None,
        ready: None,
        ready_at: None,
        ready_blocked: None,
        notify_on: Vec::new(),
        restart: None,
        stdin_pipe: false,
        wake: None,
        waits: None,
        tie: None,
        nice: None,
        paused_at: None,
        paused_ms: 0,
        rerun_of: None,
        session: None,
        outlive_session: false,
    }
}

/// A sample job of `status` that ended with this exit code or signal, where
/// that status can have one (for tests).
#[cfg(test)]
pub(crate) fn sample_ended(status: JobStatus, exit_code: Option<i32>, signal: Option<&str>) -> Job {
    let mut job = sample_job(status);
    let ended_at = job.ended_at().unwrap_or_else(crate::now_ms);
    let exit = match (exit_code, signal) {
        (Some(code), _) => Some(Exit::Code(code)),
        (None, Some(signal)) => Some(Exit::Signal(signal.to_string())),
        (None, None) => None,
    };
    job.state = match (status, exit) {
        (JobStatus::Killed, exit) => JobState::Killed { exit, ended_at },
        (JobStatus::Timeout, exit) => JobState::TimedOut { exit, ended_at },
        (JobStatus::Success | JobStatus::Failed, Some(exit)) => JobState::ended(EndedBy::Itself, Some(exit), ended_at),
        (JobStatus::Failed, None) => JobState::FailedToStart { error: String::new(), ended_at },
        (_, _) => job.state,
    };
    assert_eq!(job.status(), status, "no {status} job ends with {exit_code:?} / {signal:?}");
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
        assert!(matches!(error, crate::Error::Usage(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            "bad status `done`: expected one of running, paused, success, failed, killed, timeout, orphaned, lost, queued, skipped"
        );
        assert_eq!(JobStatus::parse_or_explain("lost").unwrap(), JobStatus::Lost);
    }

    #[test]
    fn only_running_and_orphaned_jobs_are_unfinished() {
        let unfinished: Vec<JobStatus> = JobStatus::ALL.into_iter().filter(|s| !s.is_final()).collect();
        assert_eq!(unfinished, [JobStatus::Running, JobStatus::Paused, JobStatus::Orphaned, JobStatus::Queued]);
    }

    #[test]
    fn the_ready_timeout_leaves_out_the_time_paused() {
        let mut job = sample_job(JobStatus::Running);
        job.started_at = 0;
        job.ready = Some(Readiness { log: Some("up".into()), port: None, url: None, timeout_ms: Some(3000) });
        job.paused_at = Some(1000);
        assert_eq!(job.not_ready_after(5000), None, "paused after 1 s of its 3: not judged while paused");
        job.end_pause(5000);
        assert_eq!((job.paused_at, job.paused_ms), (None, 4000));
        assert_eq!(job.not_ready_after(6900), None, "2.9 s of its own time");
        assert_eq!(job.not_ready_after(7000), Some(3000));
        job.paused_at = Some(7500);
        job.end_pause(7600);
        assert_eq!(job.paused_ms, 4100, "pauses add up");
    }

    #[test]
    fn a_paused_job_is_recorded_running_with_its_time_and_shown_paused() {
        let mut job = sample_job(JobStatus::Running);
        job.paused_at = Some(1_700_000_000_000);
        assert_eq!((job.status(), job.shown_status()), (JobStatus::Running, JobStatus::Paused));
        let value = serde_json::to_value(&job).unwrap();
        // `running` on disk: a version without pause reads it as a running job.
        assert_eq!((value["status"].as_str(), value["paused_at"].as_u64()), (Some("running"), Some(1_700_000_000_000)));
        let back: Job = serde_json::from_value(value).unwrap();
        assert_eq!(back, job);
        job.state = JobState::Killed { exit: None, ended_at: 7 };
        assert_eq!(job.shown_status(), JobStatus::Killed, "only a running job is shown paused");
        let mut hand_edited = serde_json::to_value(sample_job(JobStatus::Running)).unwrap();
        hand_edited["status"] = "paused".into();
        assert_eq!(serde_json::from_value::<Job>(hand_edited).unwrap().state, JobState::Running);
    }

    #[test]
    fn signal_names_and_numbers_map_both_ways() {
        assert_eq!(signal_name(crate::model::signals::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(crate::model::signals::SIGKILL), "SIGKILL");
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

    fn ended(state: JobState) -> Job {
        sample_in(state)
    }

    const T: u64 = 1_000;

    #[test]
    fn how_it_ended_says_the_exit_code_or_the_signal() {
        assert_eq!(how_it_ended(&ended(JobState::Exited { code: 3, ended_at: T })), "exit 3");
        assert_eq!(how_it_ended(&ended(JobState::Exited { code: 0, ended_at: T })), "exit 0");
        assert_eq!(how_it_ended(&ended(JobState::Signalled { signal: "SIGKILL".into(), ended_at: T })), "signal SIGKILL");
        let killed = |exit| ended(JobState::Killed { exit, ended_at: T });
        assert_eq!(how_it_ended(&killed(Some(Exit::Signal("SIGTERM".into())))), "signal SIGTERM");
        assert_eq!(how_it_ended(&killed(Some(Exit::Code(0)))), "exit 0", "it exited by itself while being killed");
        assert_eq!(how_it_ended(&killed(None)), "no exit status");
        let timed_out = ended(JobState::TimedOut { exit: Some(Exit::Signal("SIGKILL".into())), ended_at: T });
        assert_eq!(how_it_ended(&timed_out), "signal SIGKILL");
    }

    #[test]
    fn how_it_ended_writes_out_control_characters_in_a_signal_name() {
        let job = ended(JobState::Signalled { signal: "SIGTERM\u{1b}[2J".into(), ended_at: T });
        assert_eq!(how_it_ended(&job), "signal SIGTERM\\x1b[2J");
    }

    #[test]
    fn how_it_ended_says_could_not_start_only_for_a_start_failure_without_main_process() {
        let mut job = ended(JobState::FailedToStart { error: "command not found".into(), ended_at: T });
        job.main = None;
        assert_eq!(how_it_ended(&job), "could not start");
        let mut killed = ended(JobState::Killed { exit: None, ended_at: T });
        killed.main = None;
        assert_eq!(how_it_ended(&killed), "no exit status", "killed before its main process was recorded");
        let ran = ended(JobState::FailedToStart { error: "its supervisor died".into(), ended_at: T });
        assert_eq!(how_it_ended(&ran), "no exit status", "an error beside a main process is no start failure");
    }

    #[test]
    fn how_it_ended_for_a_lost_job_names_its_supervisor_when_known() {
        let mut job = ended(JobState::Lost { reason: None, ended_at: T });
        assert_eq!(how_it_ended(&job), "supervisor pid 4241 gone, no exit status recorded");
        job.supervisor = None;
        assert_eq!(how_it_ended(&job), "supervisor gone, no exit status recorded");
        job.main = None;
        assert_eq!(how_it_ended(&job), "supervisor gone, no exit status recorded", "lost, not `could not start`");
    }

    #[test]
    fn a_shell_reads_an_exit_code_a_signal_or_our_sigterm() {
        let code = |state: JobState| state.shell_exit_code();
        assert_eq!(code(JobState::Exited { code: 0, ended_at: T }), 0);
        assert_eq!(code(JobState::Exited { code: 3, ended_at: T }), 3);
        assert_eq!(code(JobState::Signalled { signal: "SIGKILL".into(), ended_at: T }), 137);
        assert_eq!(code(JobState::Signalled { signal: "SIG64".into(), ended_at: T }), 1, "a signal without a number here");
        assert_eq!(code(JobState::FailedToStart { error: "no such file".into(), ended_at: T }), 1);
        assert_eq!(code(JobState::Lost { reason: None, ended_at: T }), 1);
        for ours in [
            |exit| JobState::Killed { exit, ended_at: T },
            |exit| JobState::TimedOut { exit, ended_at: T },
        ] {
            assert_eq!(code(ours(None)), 143, "ended by us, its own end unseen: as SIGTERM");
            assert_eq!(code(ours(Some(Exit::Code(0)))), 143, "a clean exit under our SIGTERM is still our end");
            assert_eq!(code(ours(Some(Exit::Code(2)))), 2);
            assert_eq!(code(ours(Some(Exit::Signal("SIGKILL".into())))), 137);
            assert_eq!(code(ours(Some(Exit::Signal("SIG64".into())))), 143);
        }
    }

    #[test]
    fn each_state_has_its_status_and_only_ended_ones_an_end_time() {
        let cases = [
            (JobState::Running, JobStatus::Running),
            (JobState::Orphaned, JobStatus::Orphaned),
            (JobState::Exited { code: 0, ended_at: T }, JobStatus::Success),
            (JobState::Exited { code: 1, ended_at: T }, JobStatus::Failed),
            (JobState::Signalled { signal: "SIGSEGV".into(), ended_at: T }, JobStatus::Failed),
            (JobState::FailedToStart { error: "x".into(), ended_at: T }, JobStatus::Failed),
            (JobState::Killed { exit: None, ended_at: T }, JobStatus::Killed),
            (JobState::TimedOut { exit: None, ended_at: T }, JobStatus::Timeout),
            (JobState::Lost { reason: None, ended_at: T }, JobStatus::Lost),
        ];
        for (state, status) in cases {
            assert_eq!(state.status(), status, "{state:?}");
            assert_eq!(state.ended_at().is_some(), status.is_final(), "{state:?}");
            assert_eq!(state.is_final(), status.is_final(), "{state:?}");
        }
    }

    #[test]
    fn a_supervisor_records_the_end_of_a_kill_or_timeout_as_theirs_keeping_the_exit() {
        let exit = Some(Exit::Code(0));
        assert_eq!(JobState::ended(EndedBy::Itself, exit.clone(), T), JobState::Exited { code: 0, ended_at: T });
        assert_eq!(JobState::ended(EndedBy::Kill, exit.clone(), T), JobState::Killed { exit: exit.clone(), ended_at: T });
        assert_eq!(JobState::ended(EndedBy::Timeout, exit.clone(), T), JobState::TimedOut { exit, ended_at: T });
        let signalled = JobState::ended(EndedBy::Itself, Some(Exit::Signal("SIGSEGV".into())), T);
        assert_eq!(signalled, JobState::Signalled { signal: "SIGSEGV".into(), ended_at: T });
        assert_eq!(JobState::ended(EndedBy::Itself, None, T).status(), JobStatus::Lost, "no exit status: lost, not failed");
    }

    #[test]
    fn an_ended_job_never_runs_again_and_keeps_how_it_ended() {
        let running = JobState::Running;
        let orphaned = JobState::Orphaned;
        let exited = JobState::Exited { code: 3, ended_at: T };
        let killed = JobState::Killed { exit: None, ended_at: T + 1 };
        let lost = JobState::Lost { reason: Some("gone".into()), ended_at: T };
        let others = [
            JobState::Signalled { signal: "SIGKILL".into(), ended_at: T },
            JobState::FailedToStart { error: "x".into(), ended_at: T },
            JobState::TimedOut { exit: None, ended_at: T },
            exited.clone(),
            killed.clone(),
        ];
        // A running job may become anything but running; an orphan only ends.
        for next in others.iter().chain([&orphaned, &lost]) {
            assert!(running.can_become(next), "running -> {next:?}");
        }
        assert!(!running.can_become(&running));
        assert!(!orphaned.can_become(&running) && !orphaned.can_become(&orphaned), "nothing brings a supervisor back");
        for next in others.iter().chain([&lost]) {
            assert!(orphaned.can_become(next), "orphaned -> {next:?}");
        }
        // An end stays; a job lost while we killed it is ours.
        for ended in others.iter().chain([&lost]) {
            for next in [&running, &orphaned, &exited, &lost] {
                assert!(!ended.can_become(next), "{ended:?} -> {next:?}");
            }
        }
        assert!(lost.can_become(&killed));
        for ended in &others {
            assert!(!ended.can_become(&killed), "a kill after {ended:?} keeps it");
        }

        let mut job = ended(exited.clone());
        assert!(!job.change_state(killed.clone()), "a kill recorded after the exit");
        assert_eq!((job.state.clone(), job.exit_code()), (exited, Some(3)), "keeps the exit");
        let mut job = ended(JobState::Running);
        assert!(job.change_state(killed.clone()));
        assert_eq!(job.state, killed);
        assert!(!job.change_state(JobState::Running));
        assert_eq!(job.ended_at(), Some(T + 1));
    }

    #[test]
    fn an_announcement_claimed_for_orphaned_or_lost_describes_the_job_so() {
        let lost = ended(JobState::Lost { reason: Some("gone".into()), ended_at: T });
        assert_eq!(lost.clone().as_claimed(JobStatus::Orphaned).state, JobState::Orphaned);
        assert_eq!(lost.clone().as_claimed(JobStatus::Lost), lost, "as recorded");
        let killed = ended(JobState::Killed { exit: None, ended_at: T });
        assert_eq!(killed.clone().as_claimed(JobStatus::Lost).state, JobState::Lost { reason: None, ended_at: T });
        let exited = ended(JobState::Exited { code: 2, ended_at: T });
        assert_eq!(exited.clone().as_claimed(JobStatus::Success), exited, "an exit it cannot invent");
    }

    fn record(status: &str, exit_code: Option<i32>, signal: Option<&str>, ended_at: Option<u64>, error: Option<&str>) -> Job {
        let mut value = serde_json::to_value(sample_job(JobStatus::Running)).unwrap();
        value["status"] = status.into();
        value["exit_code"] = serde_json::json!(exit_code);
        value["signal"] = serde_json::json!(signal);
        value["ended_at"] = serde_json::json!(ended_at);
        if let Some(error) = error {
            value["error"] = error.into();
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn format_1_fields_read_as_the_state_they_describe_and_write_back_the_same() {
        let cases = [
            (("running", None, None, None, None), JobState::Running),
            (("orphaned", None, None, None, None), JobState::Orphaned),
            (("success", Some(0), None, Some(T), None), JobState::Exited { code: 0, ended_at: T }),
            (("failed", Some(3), None, Some(T), None), JobState::Exited { code: 3, ended_at: T }),
            (("failed", None, Some("SIGKILL"), Some(T), None), JobState::Signalled { signal: "SIGKILL".into(), ended_at: T }),
            (("failed", None, None, Some(T), Some("no such file")), JobState::FailedToStart { error: "no such file".into(), ended_at: T }),
            (("killed", None, Some("SIGTERM"), Some(T), None), JobState::Killed { exit: Some(Exit::Signal("SIGTERM".into())), ended_at: T }),
            (("killed", Some(0), None, Some(T), None), JobState::Killed { exit: Some(Exit::Code(0)), ended_at: T }),
            (("timeout", None, None, Some(T), None), JobState::TimedOut { exit: None, ended_at: T }),
            (("lost", None, None, Some(T), Some("gone")), JobState::Lost { reason: Some("gone".into()), ended_at: T }),
            (("lost", None, None, Some(T), None), JobState::Lost { reason: None, ended_at: T }),
            // Without any detail (no version writes this): read back the same.
            (("failed", None, None, Some(T), None), JobState::FailedToStart { error: String::new(), ended_at: T }),
        ];
        for ((status, code, signal, ended_at, error), state) in cases {
            let job = record(status, code, signal, ended_at, error);
            assert_eq!(job.state, state, "{status} {code:?} {signal:?} {error:?}");
            let written = serde_json::to_value(&job).unwrap();
            assert_eq!(written["status"], status);
            assert_eq!(written["exit_code"], serde_json::json!(code));
            assert_eq!(written["signal"], serde_json::json!(signal));
            assert_eq!(written["ended_at"], serde_json::json!(ended_at));
            assert_eq!(written.get("error").and_then(|e| e.as_str()), error, "{status}");
        }
    }

    #[test]
    fn an_error_beside_a_state_without_one_is_kept_as_a_note() {
        let killed = record("killed", None, Some("SIGTERM"), Some(T), Some("edited by hand"));
        assert_eq!(killed.state, JobState::Killed { exit: Some(Exit::Signal("SIGTERM".into())), ended_at: T });
        assert_eq!((killed.note.as_deref(), killed.error()), (Some("edited by hand"), Some("edited by hand")));
        assert_eq!(serde_json::to_value(&killed).unwrap()["error"], "edited by hand", "written back as it was");
        let lost = record("lost", None, None, Some(T), Some("gone"));
        assert_eq!((lost.note.as_deref(), lost.error()), (None, Some("gone")), "a lost job's reason is its state's");
    }

    #[test]
    fn queued_and_skipped_records_read_back_with_what_they_wait_for() {
        let mut job = sample_in(JobState::Queued);
        job.waits = Some(Waits { queue: Some("heavy".into()), priority: 3, after: vec!["a-1".into()], after_any: true, queued_at: 7, ..Waits::default() });
        let written = serde_json::to_value(&job).unwrap();
        assert_eq!(written["status"], "queued");
        assert_eq!(written["waits"], serde_json::json!({"queue": "heavy", "priority": 3, "after": ["a-1"], "after_any": true, "queued_at": 7}));
        assert_eq!(serde_json::from_value::<Job>(written).unwrap(), job);
        let skipped = record("skipped", None, None, Some(T), Some("skipped: a-1 failed (exit 1)"));
        assert_eq!(skipped.state, JobState::Skipped { reason: "skipped: a-1 failed (exit 1)".into(), ended_at: T });
        assert_eq!(skipped.error(), Some("skipped: a-1 failed (exit 1)"));
        assert_eq!(how_it_ended(&skipped), "never started (a-1 failed (exit 1))");
        assert_eq!(skipped.state.shell_exit_code(), 1, "never a success");
        assert!(serde_json::to_value(sample_job(JobStatus::Running)).unwrap().get("waits").is_none(), "absent unless it waited");
        let mut killed_queued = sample_in(JobState::Killed { exit: None, ended_at: T });
        (killed_queued.main, killed_queued.waits) = (None, Some(Waits { queued_at: 7, ..Waits::default() }));
        assert_eq!(how_it_ended(&killed_queued), "while queued, never started");
    }

    #[test]
    fn a_queued_job_starts_once_or_ends_without_running() {
        let queued = JobState::Queued;
        assert!(queued.can_become(&JobState::Running));
        assert!(queued.can_become(&JobState::Killed { exit: None, ended_at: T }));
        assert!(queued.can_become(&JobState::Skipped { reason: "x".into(), ended_at: T }));
        assert!(queued.can_become(&JobState::FailedToStart { error: "x".into(), ended_at: T }));
        assert!(!queued.can_become(&JobState::Lost { reason: None, ended_at: T }), "no process to lose");
        assert!(!queued.can_become(&JobState::Orphaned) && !queued.can_become(&JobState::Queued));
        assert!(!JobState::Running.can_become(&JobState::Queued), "nothing goes back to the queue");
        assert!(!JobState::Skipped { reason: "x".into(), ended_at: T }.can_become(&JobState::Running));
    }

    #[test]
    fn a_record_whose_fields_contradict_its_status_reads_by_its_status() {
        let running = record("running", Some(5), Some("SIGTERM"), Some(T), None);
        assert_eq!(running.state, JobState::Running, "no running job has an exit code");
        let written = serde_json::to_value(&running).unwrap();
        assert_eq!((&written["exit_code"], &written["ended_at"]), (&serde_json::Value::Null, &serde_json::Value::Null));
        let lost = record("lost", Some(2), None, None, None);
        assert_eq!(lost.state, JobState::Lost { reason: None, ended_at: lost.started_at }, "ended when it started");
        assert_eq!(record("failed", Some(0), None, Some(T), None).status(), JobStatus::Success);
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
        assert_eq!(job.duration_ms(1_500), 500);
        job.state = JobState::Exited { code: 0, ended_at: 1_200 };
        assert_eq!(job.duration_ms(9_999), 200);
        job.state = JobState::Running;
        assert_eq!(job.duration_ms(900), 0, "a clock set back gives no negative runtime");
        assert_eq!(job.pid(), Some(4242));
    }
}
