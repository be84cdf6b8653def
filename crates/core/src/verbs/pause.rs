//! `pause` and `resume`: the job's whole tree stopped (SIGSTOP; on Windows
//! every process of its Job Object suspended) and continued (SIGCONT;
//! resumed) by its supervisor, which also stops the `--timeout` clock while
//! the job is paused (supervise/pause.rs; on Windows the wiring in
//! os/supervision_windows.rs, the suspending in os/pause_windows.rs). Asked as a kill is
//! asked: a request beside the job and the supervisor's doorbell; the answer
//! is the supervisor's record in job.json.

use crate::model::job::{Job, JobStatus};
use crate::model::protocol::{PauseRequest, KILL_REQUEST_FILE, PAUSE_LOCK_FILE, PAUSE_REQUEST_FILE};
use crate::os::procinfo::{self, SignalOutcome};
use crate::os::tree::{self, Tree};
use crate::store::registry::{write_json_file, Patience};
use crate::verbs::context::Context;
use crate::{Error, Result};
use std::time::{Duration, Instant};

/// How long a supervisor may take to stop or continue its tree and record it.
const ANSWER_PATIENCE: Duration = Duration::from_secs(5);

/// How long a pause or resume waits for those of the same job before it:
/// each holds its turn for at most `ANSWER_PATIENCE`, most for a few ms.
const TURN_PATIENCE: Duration = Duration::from_secs(30);

/// What a pause or resume did.
#[derive(Debug, Clone)]
pub struct PauseOutcome {
    /// The job as recorded afterwards.
    pub job: Job,
    /// False when there was nothing to do (already paused, not paused).
    pub changed: bool,
    pub message: String,
}

impl Context {
    /// Stops every process of a running job (the tree `kill` finds) and its
    /// timeout clock. A job already paused is left as it is (`changed`
    /// false); one that does not run (queued, ended, orphaned) is refused.
    pub fn pause(&self, id: &str) -> Result<PauseOutcome> {
        self.set_paused(id, true)
    }

    /// Continues a paused job's tree, and its timeout clock from where the
    /// pause stopped it. A job not paused is left as it is (`changed`
    /// false). An orphaned job that was paused when its supervisor died is
    /// continued here, by identity: nothing else would ever continue it.
    pub fn resume(&self, id: &str) -> Result<PauseOutcome> {
        self.set_paused(id, false)
    }

    fn set_paused(&self, id: &str, pause: bool) -> Result<PauseOutcome> {
        let (verb, done) = if pause { ("pause", "paused") } else { ("resume", "resumed") };
        let job = self.job(id)?;
        self.refuse_unless_running(&job, verb)?;
        // One request at a time per job, each decided on the record as the
        // one before left it: a pause and a resume at once are answered in turn.
        let _turn = self.pause_turn(&job.id, verb)?;
        let job = self.job(id)?;
        self.refuse_unless_running(&job, verb)?;
        if job.status() == JobStatus::Orphaned {
            return self.pause_orphaned(job, pause);
        }
        if pause == job.paused_at.is_some() {
            let message = match job.paused_at {
                Some(at) => format!("{id} is already paused (since {} ago); nothing to do", ago(at)),
                None => format!("{id} is not paused (it is running); nothing to do"),
            };
            return Ok(PauseOutcome { job, changed: false, message });
        }
        let supervisor = tree::live_supervisor(&job)
            .ok_or_else(|| Error::Other(format!("cannot {verb} {id}: its supervisor has just ended; look at it again")))?;
        let dir = self.home.job_dir(&job.id);
        if dir.join(KILL_REQUEST_FILE).exists() {
            return Err(Error::Other(format!("cannot {verb} {id}: it is being killed")));
        }
        if procinfo::is_stopped(supervisor.pid) {
            return Err(Error::Other(format!(
                "cannot {verb} {id}: its supervisor (pid {}) is stopped itself (SIGSTOP or a debugger) and cannot act",
                supervisor.pid
            )));
        }
        let request = dir.join(PAUSE_REQUEST_FILE);
        write_json_file(&request, &PauseRequest { pause }, false)?;
        match procinfo::signal_process(&supervisor, crate::model::signals::SIGUSR1) {
            SignalOutcome::Sent => {}
            SignalOutcome::Gone | SignalOutcome::Replaced => {
                let _ = std::fs::remove_file(&request);
                return Err(Error::Other(format!("cannot {verb} {id}: its supervisor has just ended; look at it again")));
            }
            SignalOutcome::Failed(why) => {
                let _ = std::fs::remove_file(&request);
                return Err(Error::Other(format!("cannot ask the supervisor of {id} (pid {}) to {verb} it: {why}", supervisor.pid)));
            }
        }
        let answered = self.wait_for_answer(&job, pause).inspect_err(|_| {
            let _ = std::fs::remove_file(&request);
        })?;
        // The supervisor wrote the registry too if its lock was free; else
        // here, briefly: readers take it from job.json meanwhile. Not into
        // job.json, which the supervisor keeps (a copy read before would
        // undo its record of readiness, written just after a resume).
        let (paused_at, paused_ms) = (answered.paused_at, answered.paused_ms);
        let stored = self
            .registry()
            .modify_registry_only(Patience::Brief, id, |j| {
                j.paused_at = paused_at;
                j.paused_ms = paused_ms;
            })
            .unwrap_or(answered);
        let count = self.processes_of(&stored).len();
        let message = match pause {
            true => {
                let clock = if stored.timeout_ms.is_some() { "; its timeout clock stops until it is resumed" } else { "" };
                format!("paused {id}: {count} process(es) stopped{clock}")
            }
            false => format!("resumed {id}: {count} process(es) continued"),
        };
        tracing::debug!("{done} {id}");
        Ok(PauseOutcome { job: stored, changed: true, message })
    }

    /// A queued or ended job is refused: nothing of it runs.
    fn refuse_unless_running(&self, job: &Job, verb: &str) -> Result<()> {
        let id = &job.id;
        let status = job.status();
        if status == JobStatus::Queued {
            return Err(Error::Other(format!(
                "cannot {verb} {id}: it is queued, so nothing of it runs yet; only a running job can be paused or resumed"
            )));
        }
        if status.is_final() {
            return Err(Error::Other(format!(
                "cannot {verb} {id}: {id} has ended ({}); only a running job can be paused or resumed",
                ended_as(job)
            )));
        }
        Ok(())
    }

    /// This caller's turn to pause or resume the job: a lock on a file in
    /// the job's directory, held until dropped (or this process ends).
    fn pause_turn(&self, id: &str, verb: &str) -> Result<std::fs::File> {
        use crate::os::sys::OpenOptionsExt;
        let path = self.home.job_dir(id).join(PAUSE_LOCK_FILE);
        let mut options = crate::store::paths::options_nofollow();
        options.read(true).write(true).create(true).truncate(false).mode(0o600);
        let file = options
            .open(&path)
            .map_err(crate::store::paths::no_symlinks)
            .map_err(|e| Error::Other(format!("cannot {verb} {id}: cannot open {}: {e}", path.display())))?;
        let deadline = Instant::now() + TURN_PATIENCE;
        let mut nap = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::Other(format!(
                        "cannot {verb} {id}: another pause or resume of it has not finished within {} s",
                        TURN_PATIENCE.as_secs()
                    )))
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::Other(format!("cannot {verb} {id}: cannot lock {}: {e}", path.display()))),
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(5));
        }
    }

    /// The supervisor's record once it shows the pause (or resume) done.
    fn wait_for_answer(&self, job: &Job, pause: bool) -> Result<Job> {
        let verb = if pause { "pause" } else { "resume" };
        let deadline = Instant::now() + ANSWER_PATIENCE;
        let mut nap = Duration::from_millis(1);
        loop {
            if let Some(own) = self.registry().own_record(&job.id) {
                if own.status().is_final() {
                    return Err(Error::Other(format!("cannot {verb} {}: it ended meanwhile ({})", job.id, ended_as(&own))));
                }
                if own.paused_at.is_some() == pause {
                    return Ok(own);
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Other(format!(
                    "the supervisor of {} did not answer the {verb} request within {} s",
                    job.id,
                    ANSWER_PATIENCE.as_secs()
                )));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    }

    /// An orphan has no supervisor to act or to keep a timeout clock: it is
    /// not paused (`kill` ends it), but one paused before its supervisor
    /// died is continued here, each process by identity.
    fn pause_orphaned(&self, job: Job, pause: bool) -> Result<PauseOutcome> {
        let id = job.id.clone();
        if pause {
            return Err(Error::Other(format!(
                "cannot pause {id}: it is orphaned (its supervisor died), and a pause needs the supervisor, which stops \
                 the --timeout clock and records it; end it with `run-bg kill {id}`"
            )));
        }
        if job.paused_at.is_none() {
            return Ok(PauseOutcome { message: format!("{id} is not paused (it is orphaned); nothing to do"), changed: false, job });
        }
        let recorded = self.recorded_processes(&job);
        let report = tree::signal_tree(Tree::of(&job).with_recorded(&recorded), crate::model::signals::SIGCONT);
        let stored = self.registry().modify(&id, |j| j.end_pause(crate::now_ms()))?;
        let message = format!("resumed orphaned job {id}: {} process(es) continued", report.sent.len());
        Ok(PauseOutcome { job: stored, changed: true, message })
    }
}

/// How an ended job ended, for a refusal: `success`, `failed, exit 3`.
fn ended_as(job: &Job) -> String {
    match (job.status(), job.exit_code(), job.signal()) {
        (status, Some(code), _) => format!("{status}, exit {code}"),
        (status, None, Some(signal)) => format!("{status}, {signal}"),
        (status, None, None) => status.to_string(),
    }
}

fn ago(at_ms: u64) -> String {
    crate::model::duration::format_duration_ms(crate::now_ms().saturating_sub(at_ms))
}
