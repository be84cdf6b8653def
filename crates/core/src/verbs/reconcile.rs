//! Looking at recorded jobs against the OS: a job whose supervisor is gone
//! is `orphaned` while its processes live, else `lost` (or `killed`), and an
//! orphan gets a watcher.

use crate::model::ids::validate_job_id;
use crate::model::job::{Job, JobState, JobStatus, ProcessIdentity};
use crate::os::procinfo::{self};
use crate::store::registry::Patience;
use crate::model::protocol::{Errand, KILL_REQUEST_FILE};
use crate::{os::tree, now_ms, supervise::outpipe, verbs::spawn, Error, Result};
use std::time::Duration;
use crate::verbs::context::{wait_until, Context};

/// Held (flock) by the one watcher of an orphaned job, in the job's directory.
pub(crate) const WATCH_LOCK: &str = "watch.lock";

/// How long a look at an orphan whose processes have ended waits for its
/// watcher to log their last output and record the end.
const WATCHER_PATIENCE: Duration = Duration::from_secs(2);

impl Context {
    /// A job by id, its status verified against the OS first.
    pub fn job(&self, id: &str) -> Result<Job> {
        validate_job_id(id)?;
        let job = match self.registry().view_of(id) {
            // Not "no job": a directory whose record cannot be read is said to be one.
            Err(Error::UnknownJob(_)) => match self.registry().corrupt_record(id) {
                Some(record) => return Err(Error::Other(record.describe())),
                None => return Err(Error::UnknownJob(id.to_string())),
            },
            found => found?,
        };
        self.reconcile_job(job)
    }

    /// For a job recorded as running or orphaned whose supervisor is gone:
    /// processes of the job still alive make it `orphaned`, none make it `lost`.
    pub fn reconcile_job(&self, job: Job) -> Result<Job> {
        self.reconcile_job_as(job, false)
    }

    /// `by_watcher`: called by the orphan's own watcher, which has logged its
    /// last output. Anyone else leaves the end of an orphan with a watcher to
    /// that watcher for a moment, so that the log is complete once the end
    /// is recorded; a watcher that does not do it in time is not waited for.
    pub(crate) fn reconcile_job_as(&self, job: Job, by_watcher: bool) -> Result<Job> {
        let mut looked = self.reconcile_jobs_as(vec![job], by_watcher)?;
        Ok(looked.pop().expect("one job looked at, one job back"))
    }

    /// `reconcile_job` for many jobs, in their order: one pass over the
    /// process table for all whose supervisor is gone, and one registry write
    /// for all their verdicts. One look per job (a table pass and a registry
    /// rewrite each) made `list` or `prune` after 1,000 supervisors died
    /// quadratic in the number of jobs.
    pub fn reconcile_jobs(&self, jobs: Vec<Job>) -> Result<Vec<Job>> {
        self.reconcile_jobs_as(jobs, false)
    }

    fn reconcile_jobs_as(&self, jobs: Vec<Job>, by_watcher: bool) -> Result<Vec<Job>> {
        let looks: Vec<Look> = jobs.into_iter().map(|job| self.look_at(job)).collect();
        // No pass over the table when every job is settled (`processes_of_jobs` of none).
        let alive = self.processes_of_jobs(looks.iter().filter_map(|look| match look {
            Look::SupervisorGone(job) => Some(job),
            Look::Settled(_) => None,
        }));
        let mut changes: std::collections::HashMap<String, (JobStatus, JobState)> = std::collections::HashMap::new();
        let mut shown: Vec<Shown> = Vec::with_capacity(looks.len());
        // Watchers started by this look, each waited for once all are started.
        let mut detaching = spawn::Detaching::default();
        for look in looks {
            let job = match look {
                Look::Settled(job) => {
                    shown.push(Shown::Done(job));
                    continue;
                }
                Look::SupervisorGone(job) => job,
            };
            let has_processes = alive.get(&job.id).is_some_and(|processes| !processes.is_empty());
            let Verdict::Change { verdict, next, ask_watcher } = self.verdict_without_supervisor(&job, has_processes, &mut detaching) else {
                shown.push(Shown::Done(job));
                continue;
            };
            if ask_watcher && !by_watcher {
                let recorded = || self.registry().get(&job.id).map_or(true, |j| j.status() != JobStatus::Orphaned);
                if wait_until(WATCHER_PATIENCE, Duration::from_millis(20), recorded) {
                    shown.push(Shown::Done(self.registry().get(&job.id)?));
                    continue;
                }
            }
            changes.insert(job.id.clone(), (verdict, next));
            shown.push(Shown::Changed(job));
        }
        let apply = |stored: &mut Job| changes.get(&stored.id).is_some_and(|(verdict, next)| apply_verdict(stored, *verdict, next));
        // A look must work where nothing can be recorded (a full disk, a
        // registry held by a stopped process): the verdicts are then shown,
        // and recorded (and announced) by a later look.
        let ids: Vec<String> = changes.keys().cloned().collect();
        let stored: std::collections::HashMap<String, Job> = if ids.is_empty() {
            std::collections::HashMap::new()
        } else {
            match self.change_statuses(&ids, Patience::Brief, apply) {
                Ok(stored) => stored.into_iter().map(|job| (job.id.clone(), job)).collect(),
                Err(e) => {
                    if !matches!(e, Error::Busy(_)) {
                        for (id, (verdict, _)) in &changes {
                            tracing::warn!("{id} is {verdict}, but that could not be recorded: {e}");
                        }
                    }
                    std::collections::HashMap::new()
                }
            }
        };
        let looked = shown
            .into_iter()
            .map(|shown| match shown {
                Shown::Done(job) => job,
                Shown::Changed(mut job) => match stored.get(&job.id) {
                    Some(stored) => {
                        if stored.status() == JobStatus::Orphaned {
                            // So that its end is noticed (and announced) without anyone asking.
                            detaching.add(self.start_watcher(&stored.id));
                        }
                        stored.clone()
                    }
                    None => {
                        apply(&mut job);
                        job
                    }
                },
            })
            .collect();
        drop(detaching);
        Ok(looked)
    }

    /// What can be said of a job without its processes: settled (ended,
    /// queued, a live supervisor answers for it, a corrupt record dealt
    /// with), or its supervisor is gone and its processes decide.
    fn look_at(&self, job: Job) -> Look {
        if let Some(reason) = job.impossible_identity() {
            let shown = job.clone();
            return Look::Settled(self.mark_corrupt(job, reason).unwrap_or(shown));
        }
        // A queued job has no process to verify yet.
        if job.status().is_final() || job.status() == JobStatus::Queued {
            return Look::Settled(job);
        }
        // Its supervisor holds the job: alive, and no end yet it could not write.
        if self.supervisor_holds(&job.id) {
            return Look::Settled(job);
        }
        if let Some(supervisor) = tree::live_supervisor(&job) {
            return Look::Settled(self.unrecorded_end(&job, &supervisor).map_or(job, |(end, _)| end));
        }
        Look::SupervisorGone(job)
    }

    /// For a job whose supervisor is gone: `orphaned` while any of its
    /// processes lives (`has_processes`), else `killed` if we were killing
    /// it, else `lost`.
    /// A watcher started for an orphan that lost its own goes to `detaching`.
    fn verdict_without_supervisor(&self, job: &Job, has_processes: bool, detaching: &mut spawn::Detaching) -> Verdict {
        let being_killed = self.home.job_dir(&job.id).join(KILL_REQUEST_FILE).exists();
        let verdict = if has_processes {
            JobStatus::Orphaned
        } else if being_killed {
            JobStatus::Killed // an orphan we were killing: gone because of us
        } else {
            JobStatus::Lost
        };
        if verdict == job.status() {
            if verdict == JobStatus::Orphaned && !self.watcher_attached(&job.id) {
                // Its watcher died (or never started): a new one takes up its output.
                detaching.add(self.start_watcher(&job.id));
            }
            return Verdict::Unchanged;
        }
        let reason = match job.main {
            // Its watcher (or a look after it) saw the orphan's processes end.
            _ if job.status() == JobStatus::Orphaned => format!(
                "its supervisor{} died; the job ran on without it and ended; its exit status is unknown \
                 (the main process was no longer a child of ours)",
                job.supervisor.map(|s| format!(" (pid {})", s.pid)).unwrap_or_default()
            ),
            Some(main) if procinfo::identify(main.pid).is_some() => format!(
                "the supervisor and the job's processes are gone and no exit status was recorded; \
                 pid {} now belongs to another process, which was not touched",
                main.pid
            ),
            _ => "the supervisor and the job's processes are gone and no exit status was recorded".to_string(),
        };
        let ended_at = now_ms();
        let next = match verdict {
            JobStatus::Orphaned => JobState::Orphaned,
            JobStatus::Killed => JobState::Killed { exit: None, ended_at },
            _ => JobState::Lost { reason: Some(reason), ended_at },
        };
        // An orphan's attached watcher records its end with the log complete.
        let ask_watcher = job.status() == JobStatus::Orphaned && self.watcher_attached(&job.id);
        Verdict::Change { verdict, next, ask_watcher }
    }

    /// The end a job's live supervisor keeps because it could not write it
    /// (a read-only home), and why: what readers show until it is written,
    /// its reason in the job's note.
    pub(crate) fn unrecorded_end(&self, job: &Job, supervisor: &ProcessIdentity) -> Option<(Job, String)> {
        // While the main process runs there is no end (a restart's run included).
        if job.status().is_final() || job.main.is_some_and(|main| procinfo::is_same_process_alive(&main)) {
            return None;
        }
        let bytes = crate::os::platform::read_unrecorded(supervisor.pid)?;
        let kept: crate::model::protocol::UnrecordedEnd = serde_json::from_slice(&bytes).ok()?;
        // Still that process: the descriptor read was the supervisor's own.
        if kept.job.id != job.id || !kept.job.status().is_final() || !procinfo::is_same_process_alive(supervisor) {
            return None;
        }
        let mut end = kept.job;
        end.note.get_or_insert_with(|| {
            format!(
                "not recorded yet: {}; its supervisor (pid {}) keeps the outcome and records it once the home can be written",
                kept.error, supervisor.pid
            )
        });
        Some((end, kept.error))
    }

    /// A record naming a pid no job's process can have is never acted on: a
    /// job not yet ended becomes `lost` with the reason, and the impossible
    /// identities are dropped from the record so no later verb can use them.
    fn mark_corrupt(&self, job: Job, reason: String) -> Result<Job> {
        let clean = |stored: &mut Job| {
            let possible = |who: &ProcessIdentity| who.is_possible_job_process();
            stored.main = stored.main.filter(possible);
            stored.supervisor = stored.supervisor.filter(possible);
        };
        let verdict = |stored: &mut Job| {
            clean(stored);
            if stored.status().is_final() {
                return false;
            }
            stored.change_state(JobState::Lost { reason: Some(reason.clone()), ended_at: now_ms() })
        };
        // Best effort, as any verdict made while reading: what is shown is
        // cleaned whether or not it could be written.
        let mut shown = job.clone();
        verdict(&mut shown);
        if job.status().is_final() {
            return Ok(self.registry().modify(&job.id, clean).map(|mut j| { clean(&mut j); j }).unwrap_or(shown));
        }
        Ok(self.change_status(&job.id, Patience::Brief, verdict).unwrap_or(shown))
    }

    /// Starts `run-bg __watch <id>` with the job's output pipe open on its
    /// stdin: from this moment what waits in the pipe has a holder, so it
    /// survives even if every process of the job ends before the watcher is
    /// up and has reopened the pipe itself.
    /// Returns the child to wait for once it has detached (see
    /// `spawn::start_detached_with_stdin`).
    fn start_watcher(&self, id: &str) -> Option<std::process::Child> {
        let runner = self.runner.as_ref()?;
        let stdin = match outpipe::reopen(&self.home.job_dir(id)) {
            Ok(Some(pipe)) => std::process::Stdio::from(pipe),
            _ => std::process::Stdio::null(),
        };
        let args = Errand::Watch { job_id: id.to_string() }.args();
        spawn::start_detached_with_stdin(runner, &self.home, &args, stdin)
            .map_err(|e| tracing::error!("cannot start background `__watch {id}`: {e}"))
            .ok()
    }

    /// Whether job `id`'s supervisor holds `SUPERVISOR_LOCK_FILE`: it lives and
    /// has not let go of the job (it does so as it records the end). False
    /// says nothing (an older supervisor takes no such lock).
    pub(crate) fn supervisor_holds(&self, id: &str) -> bool {
        let path = self.home.job_dir(id).join(crate::model::protocol::SUPERVISOR_LOCK_FILE);
        let Ok(lock) = crate::store::paths::options_nofollow().read(true).open(&path) else { return false };
        // Taken shared and let go at once: only whether it is held matters.
        matches!(lock.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock))
    }

    /// Whether a watcher holds the orphaned job `id` (see `watch_orphan`).
    fn watcher_attached(&self, id: &str) -> bool {
        let Ok(lock) = crate::store::paths::open_read(&self.home.job_dir(id).join(WATCH_LOCK)) else { return false };
        // Taken and let go at once: only whether someone else holds it matters.
        lock.try_lock().is_err()
    }

    /// Verifies every running or orphaned job; returns those found orphaned and lost.
    pub fn reconcile(&self) -> Result<(Vec<Job>, Vec<Job>)> {
        let mut orphaned = Vec::new();
        let mut lost = Vec::new();
        let unended: Vec<Job> = self.registry().load()?.into_iter().filter(|job| !job.status().is_final()).collect();
        for job in self.reconcile_jobs(unended)? {
            match job.status() {
                JobStatus::Orphaned => orphaned.push(job),
                JobStatus::Lost => lost.push(job),
                _ => {}
            }
        }
        Ok((orphaned, lost))
    }
}

/// A job looked at without its processes (see `Context::look_at`).
enum Look {
    Settled(Job),
    SupervisorGone(Job),
}

/// What a look at a job whose supervisor is gone found to record.
enum Verdict {
    Unchanged,
    /// `ask_watcher`: an orphan whose watcher is attached, which records the
    /// end itself with the log complete if given a moment.
    Change { verdict: JobStatus, next: JobState, ask_watcher: bool },
}

/// A job of a batched look, as shown: settled, or to be shown as recorded.
enum Shown {
    Done(Job),
    Changed(Job),
}

/// Applies a verdict made without the lock, re-checked under it: the
/// supervisor or another look may have recorded an end meanwhile.
fn apply_verdict(stored: &mut Job, verdict: JobStatus, next: &JobState) -> bool {
    if stored.status().is_final() || stored.status() == verdict {
        return false;
    }
    stored.change_state(next.clone())
}
