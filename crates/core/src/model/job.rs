//! The record of one job as `jobs.json` and its `job.json` keep it: what was
//! started, its state, its processes, its notification and hooks.

use crate::model::os_text;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

mod identity;
mod notification;
#[cfg(test)]
mod samples;
mod settings;
mod state;
mod status;
#[cfg(test)]
mod tests;
mod wake;

pub use identity::ProcessIdentity;
pub use notification::{DeliveryState, HookRun, Notification};
#[cfg(test)]
pub(crate) use samples::{sample_ended, sample_in, sample_job};
pub use settings::{Readiness, Restart, RestartPolicy, Tie, Waits};
pub use state::{signal_name, signal_number, EndedBy, Exit, JobState};
pub use status::JobStatus;
pub use wake::{Wake, WakeAction, WakeState};

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
    /// `--stdin pipe`: its stdin is `pipes/<id>.stdin`, written by `send`.
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

fn no_time(ms: &u64) -> bool {
    *ms == 0
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
