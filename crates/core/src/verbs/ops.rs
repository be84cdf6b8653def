//! The verbs both faces share: check, list, wait, kill, reconcile, logs.

use crate::store::config::Config;
use crate::model::ids::validate_job_id;
use crate::model::job::{Job, JobState, JobStatus, ProcessIdentity};
use crate::store::paths::{create_private_dir_all, Home};
use crate::os::procinfo::{self, ProcessEntry, SignalOutcome};
use crate::store::registry::{write_json_file, Patience, Registry};
use crate::model::protocol::{Errand, KillRequest, KILL_REQUEST_FILE};
use crate::model::duration::format_duration_ms;
use crate::os::tree::Tree;
use crate::{store::digest, os::tree, supervise::notify, now_ms, supervise::outpipe, verbs::spawn, model::text, Error, Result};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Held (flock) by the one watcher of an orphaned job, in the job's directory.
const WATCH_LOCK: &str = "watch.lock";

/// How long a look at an orphan whose processes have ended waits for its
/// watcher to log their last output and record the end.
const WATCHER_PATIENCE: Duration = Duration::from_secs(2);

/// Home plus settings: what every verb needs.
#[derive(Debug, Clone)]
pub struct Context {
    pub home: Home,
    pub config: Config,
    /// The `run-bg` binary, for work handed to a background process
    /// (announcing an orphaned or lost job, draining the notification spool).
    pub runner: Option<PathBuf>,
}

impl Context {
    pub fn load() -> Result<Context> {
        let home = Home::resolve()?;
        let config = Config::load(&home.config_path())?;
        Ok(Context { home, config, runner: None })
    }

    /// For the long-lived errands (`__watch`, `__announce`, `__deliver`): the
    /// home held as a supervisor holds it (`Home::hold_for_errand`), so that
    /// their logs and hooks never follow the home's name elsewhere. Keep the
    /// `HeldHome` for as long as the context is used.
    pub fn load_holding() -> Result<(Context, crate::store::paths::HeldHome)> {
        let (home, held) = Home::hold_for_errand(Home::resolve_root()?)?;
        let config = Config::load(&home.config_path())?;
        Ok((Context { home, config, runner: None }, held))
    }

    /// For stopping jobs: a config.json that cannot be used must not keep
    /// anyone from killing what runs, so it falls back to the defaults and
    /// says so (a `tracing` warning; the CLI prints it on stderr).
    pub fn load_for_kill() -> Result<Context> {
        let home = Home::resolve()?;
        let config = match Config::load(&home.config_path()) {
            Ok(config) => config,
            Err(e @ Error::Config { .. }) => {
                tracing::warn!("{e}; killing with the default settings");
                Config::default()
            }
            Err(e) => return Err(e),
        };
        Ok(Context { home, config, runner: None })
    }

    /// With the `run-bg` binary known; also hands any notification that is due
    /// in the spool to a background deliverer, so every invocation of either
    /// face delivers what an earlier one could not, without waiting for it.
    pub fn with_runner(mut self, runner: PathBuf) -> Context {
        self.runner = Some(runner);
        if notify::spool_due(&self.home) {
            self.run_in_background(Errand::Deliver);
        }
        self.fill_queues();
        self
    }

    fn run_in_background(&self, errand: Errand) {
        if let Some(runner) = &self.runner {
            let args = errand.args();
            if let Err(e) = spawn::spawn_detached(runner, &self.home, &args) {
                tracing::error!("cannot start background `{}`: {e}", args.join(" "));
            }
        }
    }

    /// Changes a job's status under the lock when `change` says it did, and
    /// claims and sends the announcement that goes with it (once: the claim is
    /// made in the same locked update as the change).
    fn change_status(&self, id: &str, patience: Patience, change: impl FnOnce(&mut Job) -> bool) -> Result<Job> {
        let mut announce = false;
        let job = self.registry().modify_with(patience, id, |stored| {
            if change(stored) {
                stored.notification = notify::claim(&self.config.notify, stored);
                announce = notify::has_work(&self.config.notify, stored);
            }
        })?;
        if announce {
            // The status claimed here is the one announced, even if the job
            // has moved on (orphaned, then lost) by the time the announcer runs.
            self.run_in_background(Errand::Announce { job_id: id.to_string(), claimed: Some(job.status()) });
        }
        Ok(job)
    }

    /// `change_status` for many jobs, in one registry write.
    fn change_statuses(&self, ids: &[String], patience: Patience, change: impl Fn(&mut Job) -> bool) -> Result<Vec<Job>> {
        let mut announce = Vec::new();
        let jobs = self.registry().modify_many(patience, ids, |stored| {
            if change(stored) {
                stored.notification = notify::claim(&self.config.notify, stored);
                if notify::has_work(&self.config.notify, stored) {
                    announce.push((stored.id.clone(), stored.status()));
                }
            }
        })?;
        for (job_id, claimed) in announce {
            self.run_in_background(Errand::Announce { job_id, claimed: Some(claimed) });
        }
        Ok(jobs)
    }

    pub fn registry(&self) -> Registry {
        Registry::for_config(&self.home, &self.config)
    }

    /// A job by id, its status verified against the OS first.
    pub fn job(&self, id: &str) -> Result<Job> {
        validate_job_id(id)?;
        let job = match self.registry().get(id) {
            // Not "no job": a directory whose record cannot be read is said to be one.
            Err(Error::UnknownJob(_)) => match self.registry().corrupt_record(id) {
                Some(record) => return Err(Error::Other(record.describe())),
                None => return Err(Error::UnknownJob(id.to_string())),
            },
            found => found?,
        };
        self.reconcile_job(job)
    }

    /// Job directories whose job.json cannot be read (see `Registry::corrupt_records`).
    pub fn corrupt_records(&self) -> Result<Vec<crate::store::registry::CorruptRecord>> {
        self.registry().corrupt_records()
    }

    /// `kill` of a job whose record cannot be read: nothing can be known to
    /// signal, so its directory (its launch spec with the submitter's
    /// environment) is what is removed.
    fn kill_corrupt(&self, record: crate::store::registry::CorruptRecord) -> Result<KillOutcome> {
        if !record.removable {
            return Err(Error::Other(record.describe()));
        }
        if !self.registry().remove_corrupt(&record.id)? {
            // Recorded meanwhile (or removed): it is a job again, or gone.
            return self.kill(&record.id, None, false);
        }
        let message = format!(
            "removed {}: its record {} could not be read ({}); its directory, launch spec included, is deleted; nothing was signalled",
            record.id,
            record.file.display(),
            record.reason
        );
        // What the outcome names: the id, and that it is gone for good.
        let placeholder = serde_json::json!({
            "id": record.id, "label": record.id, "argv": [], "command": "", "cwd": "",
            "status": "killed", "started_at": record.modified_ms, "ended_at": now_ms(),
            "log_path": self.home.job_dir(&record.id).join("output.log"),
        });
        let job: Job = serde_json::from_value(placeholder).map_err(|e| Error::Other(e.to_string()))?;
        Ok(KillOutcome { job, signalled: false, message })
    }

    /// Records that the outcome of an ended job has been looked at. Best
    /// effort: a read-only home still lets one look.
    pub fn mark_seen(&self, job: Job) -> Result<Job> {
        if !job.status().is_final() || job.seen_at.is_some() {
            return Ok(job);
        }
        Ok(self
            .registry()
            .modify_with(Patience::Brief, &job.id, |stored| {
                stored.seen_at.get_or_insert(now_ms());
            })
            .unwrap_or(job))
    }

    /// The few lines an agent harness puts in front of each model call: jobs
    /// still running (pid, command, runtime, last line) and jobs that ended
    /// but nobody has looked at yet. Empty when there is nothing to say.
    pub fn summary(&self, owner: Option<&str>) -> Result<Vec<String>> {
        let filter = ListFilter { all: true, owner: owner.map(str::to_string), status: None };
        let jobs = self.list(&filter)?;
        let now = now_ms();
        let mut lines = Vec::new();
        for job in jobs.iter().filter(|j| !j.status().is_final()) {
            let command = text::cut(&text::visible(&job.command).replace('\n', " "), 60);
            let runtime = format_duration_ms(job.duration_ms(now));
            let pid = job.pid().map(|p| format!("PID {p} ")).unwrap_or_default();
            let state = match job.status() {
                JobStatus::Orphaned => format!("orphaned (supervisor gone) after {runtime}"),
                JobStatus::Queued => format!("queued for {runtime}"),
                _ => format!("running {runtime}"),
            };
            let last = digest::last_lines(std::path::Path::new(&job.log_path), 1, Some(non_blank()))
                .pop()
                .map(|l| format!(", last line: \"{}\"", text::cut(&l, 80)))
                .unwrap_or_default();
            lines.push(format!("{pid}({}): `{command}` — {state}{last}", job.id));
        }
        // One pass over /proc for every ended job: one whose processes run on
        // is said so, never plain `success`.
        let left = self.leftover_counts(&jobs);
        let left_count = |job: &Job| left.get(&job.id).copied().unwrap_or(0);
        let unseen: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.status().is_final() && j.seen_at.is_none())
            .filter(|j| now.saturating_sub(j.ended_at().unwrap_or(j.started_at)) < 24 * 3_600_000)
            .collect();
        const SHOWN: usize = 5;
        for job in unseen.iter().rev().take(SHOWN) {
            let how = crate::model::job::how_it_ended(job);
            let still = match left_count(job) {
                0 => String::new(),
                n => format!(", {},", processes_still_running(n)),
            };
            lines.push(format!(
                "finished: {} `{}` {} ({how}){still} after {} — run-bg check {}",
                job.id,
                text::cut(&text::visible(&job.command).replace('\n', " "), 50),
                job.status(),
                format_duration_ms(job.duration_ms(now)),
                job.id
            ));
        }
        // Ended jobs already looked at (or not shown above) whose processes run on.
        let shown: std::collections::HashSet<&str> = unseen.iter().rev().take(SHOWN).map(|j| j.id.as_str()).collect();
        for job in jobs.iter().filter(|j| j.status().is_final() && left_count(j) > 0 && !shown.contains(j.id.as_str())) {
            lines.push(format!(
                "ended: {} `{}` {} ({}), {} — run-bg kill {} removes them",
                job.id,
                text::cut(&text::visible(&job.command).replace('\n', " "), 50),
                job.status(),
                crate::model::job::how_it_ended(job),
                processes_still_running(left_count(job)),
                job.id
            ));
        }
        if unseen.len() > SHOWN {
            lines.push(format!("…and {} more finished jobs not looked at (run-bg list)", unseen.len() - SHOWN));
        }
        Ok(lines)
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
    fn reconcile_job_as(&self, job: Job, by_watcher: bool) -> Result<Job> {
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
        for look in looks {
            let job = match look {
                Look::Settled(job) => {
                    shown.push(Shown::Done(job));
                    continue;
                }
                Look::SupervisorGone(job) => job,
            };
            let has_processes = alive.get(&job.id).is_some_and(|processes| !processes.is_empty());
            let Verdict::Change { verdict, next, ask_watcher } = self.verdict_without_supervisor(&job, has_processes) else {
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
        Ok(shown
            .into_iter()
            .map(|shown| match shown {
                Shown::Done(job) => job,
                Shown::Changed(mut job) => match stored.get(&job.id) {
                    Some(stored) => {
                        if stored.status() == JobStatus::Orphaned {
                            // So that its end is noticed (and announced) without anyone asking.
                            self.start_watcher(&stored.id);
                        }
                        stored.clone()
                    }
                    None => {
                        apply(&mut job);
                        job
                    }
                },
            })
            .collect())
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
        if let Some(supervisor) = tree::live_supervisor(&job) {
            return Look::Settled(self.unrecorded_end(&job, &supervisor).map_or(job, |(end, _)| end));
        }
        Look::SupervisorGone(job)
    }

    /// For a job whose supervisor is gone: `orphaned` while any of its
    /// processes lives (`has_processes`), else `killed` if we were killing
    /// it, else `lost`.
    fn verdict_without_supervisor(&self, job: &Job, has_processes: bool) -> Verdict {
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
                self.start_watcher(&job.id);
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
    fn unrecorded_end(&self, job: &Job, supervisor: &ProcessIdentity) -> Option<(Job, String)> {
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
    fn start_watcher(&self, id: &str) {
        let Some(runner) = &self.runner else { return };
        let stdin = match outpipe::reopen(&self.home.job_dir(id)) {
            Ok(Some(pipe)) => std::process::Stdio::from(pipe),
            _ => std::process::Stdio::null(),
        };
        let args = Errand::Watch { job_id: id.to_string() }.args();
        if let Err(e) = spawn::spawn_detached_with_stdin(runner, &self.home, &args, stdin) {
            tracing::error!("cannot start background `__watch {id}`: {e}");
        }
    }

    /// Whether a watcher holds the orphaned job `id` (see `watch_orphan`).
    fn watcher_attached(&self, id: &str) -> bool {
        let Ok(lock) = crate::store::paths::open_read(&self.home.job_dir(id).join(WATCH_LOCK)) else { return false };
        // Taken and let go at once: only whether someone else holds it matters.
        lock.try_lock().is_err()
    }

    /// `run-bg __watch <id>`: stays with an orphaned job until its last process
    /// is gone, then has `reconcile_job` record its end (`lost`, or `killed` if
    /// we were killing it) with the time it ended. Meanwhile it reopens the
    /// job's output pipe and logs what waited there and what follows, as the
    /// supervisor would have. Its exit status cannot be had: the main process
    /// is not our child. One watcher per job.
    /// `inherited`: the pipe as `start_watcher` handed it over, if it did.
    pub fn watch_orphan(&self, id: &str, inherited: Option<std::os::fd::OwnedFd>) -> Result<()> {
        let lock_path = self.home.job_dir(id).join(WATCH_LOCK);
        let Ok(lock) =
            crate::store::paths::options_nofollow().create(true).truncate(false).write(true).mode(0o600).open(&lock_path)
        else {
            return Ok(());
        };
        if lock.try_lock().is_err() {
            return Ok(()); // another watcher has it
        }
        // Its own job.json, not the registry: N watchers started by one look
        // each parsing a registry of N jobs made that look quadratic.
        let job = match self.registry().own_record(id) {
            Some(job) => job,
            None => self.registry().get(id)?,
        };
        let mut output = outpipe::Reattached::open(
            &self.home.job_dir(id),
            inherited,
            &self.home.job_log(id, std::path::Path::new(&job.log_path)),
            &self.config.logs,
        );
        let mut waited_for_killer = false;
        loop {
            // Its own job.json, which every status change rewrites: reading the
            // whole registry (and each unended job's job.json) on each wake made
            // N watchers cost N squared when their orphans were killed together.
            let job = match self.registry().own_record(id) {
                Some(job) => job,
                None => self.registry().get(id)?,
            };
            let main = job.main.filter(procinfo::is_same_process_alive);
            // Its main process gone under a kill: the killer's record comes
            // first, before this watcher's own look over /proc (400 watchers
            // looking at once held up the kill itself).
            if main.is_none() && job.status() == JobStatus::Orphaned && !waited_for_killer {
                waited_for_killer = true;
                if self.killer_records(id) {
                    continue;
                }
            }
            let ended = job.status() != JobStatus::Orphaned || (main.is_none() && self.processes_of(&job).is_empty());
            if ended {
                // What they wrote last is in the log before their end is recorded.
                if let Some(output) = &mut output {
                    output.drain();
                }
                // The pipe at its end (no writer left) says so without a
                // look over /proc; after a kill of N orphans, N watchers
                // each looking over a table of N made the kill quadratic.
                let pipe_ended = output.as_ref().is_some_and(|output| !output.is_open());
                if pipe_ended || self.processes_of(&job).is_empty() {
                    outpipe::remove(&self.home.job_dir(id));
                }
                // Still orphaned: a wait above for the killer was in vain, or
                // one now is.
                if job.status() == JobStatus::Orphaned && (waited_for_killer || !self.killer_records(id)) {
                    self.reconcile_job_as(job, true)?;
                }
                return Ok(());
            }
            let pace = if main.is_some() { Duration::from_secs(5) } else { Duration::from_secs(1) };
            match (&mut output, main) {
                (Some(output), main) if output.is_open() => output.pump(main.as_ref(), pace),
                (_, Some(main)) => procinfo::wait_for_exit(&main, pace),
                (_, None) => std::thread::sleep(pace),
            }
        }
    }

    /// Whether a kill that asked for this orphan's end (its request beside
    /// the job, written in the last minute) recorded it within
    /// `KILLER_RECORDS_PATIENCE`, as seen in the job's own job.json. The
    /// killer (`orphans --kill`, `kill --all`) records all its jobs in one
    /// registry write once every one is gone; a watcher per job writing
    /// too made `orphans --kill` of 400 orphans wait behind 400 rewrites of
    /// the registry (28 ms a job, 15 at 100).
    fn killer_records(&self, id: &str) -> bool {
        let request = self.home.job_dir(id).join(KILL_REQUEST_FILE);
        let fresh = crate::store::paths::age(&request).is_some_and(|age| age < Duration::from_secs(60));
        fresh
            && wait_until(KILLER_RECORDS_PATIENCE, Duration::from_millis(100), || {
                self.registry().own_record(id).is_some_and(|j| j.status().is_final())
            })
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

    pub fn list(&self, filter: &ListFilter) -> Result<Vec<Job>> {
        let recent_since = now_ms().saturating_sub(3_600_000);
        let mut jobs = Vec::new();
        for job in self.reconcile_jobs(self.registry().load()?)? {
            if let Some(status) = filter.status {
                if job.status() != status {
                    continue;
                }
            } else if !filter.all && job.status().is_final() && job.ended_at().unwrap_or(0) < recent_since {
                continue;
            }
            if filter.owner.as_ref().is_some_and(|owner| job.owner.as_ref() != Some(owner)) {
                continue;
            }
            jobs.push(job);
        }
        Ok(jobs)
    }

    pub fn check(&self, id: &str, query: &TailQuery) -> Result<CheckResult> {
        let job = self.mark_seen(self.job(id)?)?;
        let (tail, cursor, log_problem) = tail_job_log(&job, query);
        // One pass over /proc serves both: the live tree's cost, and what lingers.
        let tree = self.processes_of(&job);
        let usage = (!tree.is_empty()).then(|| TreeUsage {
            processes: tree.len(),
            rss_kb: tree.iter().map(|p| p.rss_kb).sum(),
        });
        let lingering = if job.status().is_final() || job.status() == JobStatus::Orphaned { tree } else { Vec::new() };
        Ok(CheckResult { job, tail, cursor, log_problem, lingering, usage, selection: query.selection() })
    }

    /// Blocks until every job in `ids` has ended, or `timeout` passes.
    /// Returns the jobs as last seen; `timed_out` says whether any still runs.
    pub fn wait(&self, ids: &[String], timeout: Option<Duration>) -> Result<WaitOutcome> {
        let outcome = self.wait_or_cancel(ids, timeout, &crate::verbs::cancel::Cancel::never())?;
        Ok(outcome.expect("a wait that cannot be cancelled ends with an outcome"))
    }

    /// `wait`, stopped at once when `cancel` is thrown: then `None`.
    pub fn wait_or_cancel(
        &self,
        ids: &[String],
        timeout: Option<Duration>,
        cancel: &crate::verbs::cancel::Cancel,
    ) -> Result<Option<WaitOutcome>> {
        self.wait_until_or_cancel(ids, timeout, cancel, &|job: &Job| job.status().is_final())
    }

    /// As `wait_or_cancel`, until every job is ready (`--ready-*`), has
    /// passed its readiness timeout, or ended; refuses a job without a
    /// readiness check, whose wait would only be a wait for its end.
    pub fn wait_ready_or_cancel(
        &self,
        ids: &[String],
        timeout: Option<Duration>,
        cancel: &crate::verbs::cancel::Cancel,
    ) -> Result<Option<WaitOutcome>> {
        for id in ids {
            if self.job(id)?.ready.is_none() {
                return Err(Error::Usage(format!(
                    "job {id} has no readiness check (start it with --ready-log, --ready-port or --ready-url); wait without --ready waits for its end"
                )));
            }
        }
        self.wait_until_or_cancel(ids, timeout, cancel, &|job: &Job| job.readiness_settled(crate::now_ms()))
    }

    /// As `wait_or_cancel`, until `done` holds for every job (an ended job
    /// counts as done whatever `done` says, see `wait --ready`); jobs are
    /// marked seen only once all have ended.
    pub fn wait_until_or_cancel(
        &self,
        ids: &[String],
        timeout: Option<Duration>,
        cancel: &crate::verbs::cancel::Cancel,
        done: &dyn Fn(&Job) -> bool,
    ) -> Result<Option<WaitOutcome>> {
        for id in ids {
            validate_job_id(id)?;
        }
        let started = Instant::now();
        let deadline = timeout.map(|t| started + t);
        let mut pause = Duration::from_millis(2);
        let mut last_reconcile = Instant::now();
        // Woken when a record is written (the registry, each job's job.json:
        // an end, or readiness) rather than only at the next look; the looks
        // stay, for what no write announces (a supervisor that died).
        let watcher = crate::os::platform::DirWatcher::new().ok();
        if let Some(watcher) = &watcher {
            watcher.watch(&self.home.root);
            for id in ids {
                watcher.watch(&self.home.job_dir(id));
            }
        }
        loop {
            let all = self.registry().load()?;
            let mut jobs = Vec::with_capacity(ids.len());
            for id in ids {
                let job = all.iter().find(|j| &j.id == id).cloned().ok_or_else(|| Error::UnknownJob(id.clone()))?;
                jobs.push(job);
            }
            // Cheap checks each round; the OS check (is the supervisor still there?) once a second.
            if last_reconcile.elapsed() >= Duration::from_secs(1) {
                last_reconcile = Instant::now();
                jobs = self.reconcile_jobs(jobs)?;
                if jobs.iter().any(|j| j.status() == JobStatus::Queued) {
                    // A slot whose supervisor died without handing it on.
                    self.fill_queues();
                }
            }
            if jobs.iter().all(|j| j.status().is_final()) {
                let jobs = jobs.into_iter().map(|j| self.mark_seen(j)).collect::<Result<_>>()?;
                return Ok(Some(WaitOutcome { jobs, timed_out: false }));
            }
            if jobs.iter().all(|j| j.status().is_final() || done(j)) {
                return Ok(Some(WaitOutcome { jobs, timed_out: false }));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(Some(WaitOutcome { jobs, timed_out: true }));
            }
            let mut sleep = pause;
            if let Some(d) = deadline {
                sleep = sleep.min(d.saturating_duration_since(Instant::now()));
            }
            if cancel.pause_or_wake(sleep, watcher.as_ref().and_then(|w| w.fd())) {
                return Ok(None);
            }
            if let Some(watcher) = &watcher {
                watcher.drain();
            }
            // The end of a short job is noticed within tens of ms; a long wait
            // looks less often, so hours of waiting do not cost a core.
            let cap = match started.elapsed().as_secs() {
                0..=4 => Duration::from_millis(20),
                5..=59 => Duration::from_millis(100),
                _ => Duration::from_millis(250),
            };
            pause = (pause * 2).min(cap);
        }
    }

    /// SIGTERM to the job's tree, SIGKILL after `grace` (or at once with
    /// `force`); returns once every process of the tree is gone, or says how
    /// many are still exiting at the bound. An ended job whose processes live
    /// on has them killed; only one with none left is "nothing to kill".
    pub fn kill(&self, id: &str, grace: Option<Duration>, force: bool) -> Result<KillOutcome> {
        let job = match self.job(id) {
            Ok(job) => job,
            Err(e) => return self.registry().corrupt_record(id).map_or(Err(e), |record| self.kill_corrupt(record)),
        };
        if job.status() == JobStatus::Queued {
            if let Some(job) = self.kill_queued(id)? {
                let message = format!("killed {} (it was queued; nothing had started)", job.id);
                return Ok(KillOutcome { message, signalled: false, job });
            }
            return self.kill(id, grace, force);
        }
        let grace = grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
        let supervised = tree::live_supervisor(&job);
        let recorded = self.recorded_processes(&job);
        let tree = Tree::of(&job).with_recorded(&recorded);
        // Every process of the job seen from now on: what the kill is about.
        let mut seen = Seen::default();
        seen.add(&tree::job_tree(tree).0);
        let nothing_left = job.status().is_final() && seen.is_empty();
        if supervised.is_some() && !nothing_left {
            let outcome = self.kill_supervised(vec![job], grace, force).pop();
            return outcome.expect("one outcome for one job").map_err(|(_, e)| e);
        }
        if job.status() == JobStatus::Orphaned {
            return self.kill_orphaned(job.clone(), tree, grace, force);
        }
        if !nothing_left {
            // Ended, its supervisor gone, and processes of it live on (a
            // daemon it recorded, a cookie carrier): they are what is killed.
            let (count, exiting) = terminate_tree(tree, grace, force);
            let message = left_running_removed(&job, count, &still_exiting(exiting));
            return Ok(KillOutcome { message, signalled: count > 0, job });
        }
        let message = match (&job.status(), &job.error()) {
            (JobStatus::Lost, Some(error)) => format!("{} is not running (lost: {error}); nothing to kill", job.id),
            _ => format!("{} is not running ({}); nothing to kill", job.id, job.status()),
        };
        Ok(KillOutcome { job, signalled: false, message })
    }

    /// Kills every running or orphaned job, and every ended job whose
    /// processes live on (of `owner`, when given; only those started over
    /// `older_than` ago, when given: for cleanup scripts), at once, so their
    /// grace periods overlap instead of adding up.
    pub fn kill_all(
        &self,
        owner: Option<&str>,
        older_than: Option<Duration>,
        grace: Option<Duration>,
        force: bool,
    ) -> Result<Vec<std::result::Result<KillOutcome, (String, Error)>>> {
        let filter = ListFilter { all: true, owner: owner.map(str::to_string), status: None };
        let started_by = older_than.map(|age| now_ms().saturating_sub(age.as_millis() as u64));
        let jobs: Vec<Job> =
            self.list(&filter)?.into_iter().filter(|j| started_by.is_none_or(|cut| j.started_at <= cut)).collect();
        // Ended jobs whose processes live on are part of "everything I started"
        // (one pass over the process table for all of them).
        let left = self.leftover_counts(&jobs);
        let targets: Vec<Job> = jobs
            .into_iter()
            .filter(|j| !j.status().is_final() || left.contains_key(&j.id))
            .collect();
        Ok(self.kill_jobs(targets, grace, force))
    }

    /// Kills `jobs` at once, each reported once (in their order): those with
    /// a live supervisor together (`kill_supervised`), any other (queued,
    /// orphaned, ended with processes left and no supervisor) on its own
    /// thread, so that every grace period overlaps.
    pub fn kill_jobs(&self, jobs: Vec<Job>, grace: Option<Duration>, force: bool) -> Vec<KillResult> {
        let order: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let (supervised, others): (Vec<Job>, Vec<Job>) =
            jobs.into_iter().partition(|j| j.status() != JobStatus::Queued && tree::live_supervisor(j).is_some());
        let mut results: std::collections::HashMap<String, KillResult> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                others.iter().map(|job| (job.id.clone(), scope.spawn(move || self.kill(&job.id, grace, force)))).collect();
            let grace = grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
            let mut results: std::collections::HashMap<String, KillResult> =
                self.kill_supervised(supervised, grace, force).into_iter().map(|r| (result_id(&r), r)).collect();
            for (id, handle) in handles {
                let result = match handle.join() {
                    Ok(Ok(outcome)) => Ok(outcome),
                    Ok(Err(e)) => Err((id.clone(), e)),
                    Err(_) => Err((id.clone(), Error::Other("kill thread panicked".into()))),
                };
                results.insert(id, result);
            }
            results
        });
        order.iter().filter_map(|id| results.remove(id)).collect()
    }

    /// Kills jobs whose supervisors live, all together, at a cost linear in
    /// their number: every supervisor is asked at once (its kill request
    /// says we sweep: it looks only below itself and records in job.json),
    /// what of a job lies outside its supervisor's subtree is signalled
    /// here, the ends are waited for together (one pass over the table per
    /// look, and a job's job.json read only once its main process is gone),
    /// and the registry is written once for them all. Asking one job at a
    /// time, each waiting on the registry and on its own passes over the
    /// table, made `kill --all` of 1,000 jobs take 75 s (issue 25).
    fn kill_supervised(&self, jobs: Vec<Job>, grace: Duration, force: bool) -> Vec<KillResult> {
        if jobs.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let grace_ends = started + if force { Duration::ZERO } else { grace };
        let recorded: Vec<Vec<ProcessIdentity>> = jobs.iter().map(|j| self.recorded_processes(j)).collect();
        let mut targets: Vec<Target> = Vec::with_capacity(jobs.len());
        let mut results: Vec<KillResult> = Vec::new();
        // Processes outside a supervisor's subtree that we signal ourselves.
        let mut strays = Strays::default();
        let rows = procinfo::table();
        let index = tree::TableIndex::new(&rows);
        for (job, recorded) in jobs.into_iter().zip(&recorded) {
            let Some(supervisor) = tree::live_supervisor(&job) else {
                results.push(self.kill(&job.id, Some(grace), force).map_err(|e| (job.id.clone(), e)));
                continue;
            };
            let members = index.members(Tree::of(&job).with_recorded(recorded));
            let mut seen = Seen::default();
            seen.add_identities(members.rows.iter().map(|r| r.identity));
            // Decided now, before the supervisor is asked: a main process
            // that is gone by the time a slow supervisor would have answered
            // was most likely killed by it (issue 25).
            let main_was_running = job.main.is_some_and(|m| procinfo::is_same_process_alive(&m));
            let ended_before = job.status().is_final();
            let request = KillRequest { grace_ms: grace.as_millis() as u64, force, caller_sweeps: true };
            let doorbell = match self.write_kill_request(&job.id, request) {
                Ok(()) => libc::SIGUSR1,
                Err(_) => libc::SIGTERM,
            };
            match procinfo::signal_process(&supervisor, doorbell) {
                SignalOutcome::Sent => {}
                // It ended meanwhile: the job is now ended, orphaned or lost.
                SignalOutcome::Gone | SignalOutcome::Replaced => {
                    results.push(self.kill(&job.id, Some(grace), force).map_err(|e| (job.id.clone(), e)));
                    continue;
                }
                SignalOutcome::Failed(why) => {
                    let error = Error::Other(format!("cannot signal the supervisor of {} (pid {}): {why}", job.id, supervisor.pid));
                    results.push(Err((job.id.clone(), error)));
                    continue;
                }
            }
            strays.signal(&members, if force { libc::SIGKILL } else { libc::SIGTERM });
            let stopped = procinfo::is_stopped(supervisor.pid);
            let answer_by = if stopped { Instant::now() } else { started + grace + SUPERVISOR_ANSWER };
            let record = RecordStamp::default();
            targets.push(Target { job, supervisor, stopped, main_was_running, ended_before, seen, answer_by, ended: None, late: false, main_gone: !main_was_running, record, unrecorded: None });
        }
        // The ends, together: a supervisor records a kill once its tree is
        // gone. One pass over the table per look serves every job: what it
        // still owns, strays to signal, and whether its main process is gone;
        // only then is its job.json read, and again only once it was replaced.
        let mut next_scan = Instant::now() + Duration::from_millis(20);
        let mut pause = Duration::from_millis(1);
        loop {
            let now = Instant::now();
            let scanned = now >= next_scan;
            if scanned {
                next_scan = now + Duration::from_millis(50);
                let rows = procinfo::table();
                let index = tree::TableIndex::new(&rows);
                let hard = now >= grace_ends;
                for (target, recorded) in targets.iter_mut().zip(&recorded).filter(|(t, _)| t.pending()) {
                    let members = index.members(Tree::of(&target.job).with_recorded(recorded));
                    target.seen.add_identities(members.rows.iter().map(|r| r.identity));
                    strays.signal(&members, if hard { libc::SIGKILL } else { libc::SIGTERM });
                    target.main_gone |= target.job.main.is_none_or(|m| !index.is_alive(&m));
                    if target.ended_before && members.rows.is_empty() {
                        target.ended = Some(target.job.clone());
                    }
                }
            }
            // A job.json replaced is looked at on every turn (a stat each,
            // read only once it changed): the end is seen as soon as it is
            // recorded, not at the next scan of the process table.
            for target in targets.iter_mut().filter(|t| t.pending() && !t.ended_before) {
                if target.record.changed(&self.home.job_dir(&target.job.id).join("job.json")) {
                    target.ended = self.registry().own_record(&target.job.id).filter(|j| j.status().is_final());
                }
                // An end its supervisor could not write (a read-only home) is
                // an end too. Looked for at the scans only: it is read from
                // the supervisor's descriptors, a pass over /proc/<pid>/fd.
                if target.ended.is_none() && scanned && target.main_gone {
                    if let Some((end, error)) = self.unrecorded_end(&target.job, &target.supervisor) {
                        target.ended = Some(end);
                        target.unrecorded = Some(error);
                    }
                }
            }
            for target in targets.iter_mut().filter(|t| t.pending() && now >= t.answer_by) {
                target.late = true;
            }
            if targets.iter().all(|t| !t.pending()) {
                break;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
        strays.finish(grace_ends);
        // A supervisor that did not answer in time (stopped, hung): its tree
        // is killed here, without it, each on its own thread.
        let late: Vec<KillResult> = std::thread::scope(|scope| {
            let handles: Vec<_> = targets
                .iter()
                .zip(&recorded)
                .filter(|(t, _)| t.late)
                .map(|(t, recorded)| {
                    scope.spawn(move || {
                        let tree = Tree::of(&t.job).with_recorded(recorded);
                        // Its grace period was spent waiting for it, unless it was stopped from the start.
                        let direct_grace = if t.stopped { grace } else { Duration::ZERO };
                        let main_was_running = t.main_was_running && !t.ended_before;
                        self.kill_without_supervisor(&t.job, tree, t.supervisor, t.stopped, direct_grace, force || !t.stopped, main_was_running)
                            .map_err(|e| (t.job.id.clone(), e))
                    })
                })
                .collect();
            let ids = targets.iter().filter(|t| t.late).map(|t| t.job.id.clone());
            handles
                .into_iter()
                .zip(ids)
                .map(|(h, id)| h.join().unwrap_or_else(|_| Err((id, Error::Other("kill thread panicked".into())))))
                .collect()
        });
        // What was signalled is gone, or said to be still exiting.
        let answered: Vec<&Target> = targets.iter().filter(|t| !t.late).collect();
        let patience_ends = Instant::now() + STILL_EXITING_PATIENCE;
        let mut left: Vec<usize> = answered.iter().map(|t| t.seen.alive()).collect();
        while left.iter().any(|&n| n > 0) && Instant::now() < patience_ends {
            std::thread::sleep(Duration::from_millis(20));
            left = answered.iter().map(|t| t.seen.alive()).collect();
        }
        // Once for every end. Briefly: each is in its job.json already, which
        // readers prefer, and any later registry write takes it in; a kill
        // must not wait on a lock a stopped process holds.
        let action = format!("record the end of {} killed job(s)", answered.len());
        let unrecorded = match self.registry().take_in(Patience::Brief, &action) {
            Ok(()) | Err(Error::Busy(_)) => String::new(),
            Err(e) => format!("; the registry could not be written ({e}); the end is kept in its job.json"),
        };
        for (target, exiting) in answered.into_iter().zip(left) {
            let after = target.ended.clone().unwrap_or_else(|| target.job.clone());
            let exiting = still_exiting(exiting);
            let count = target.seen.len();
            let message = if target.ended_before {
                left_running_removed(&after, count, &exiting)
            } else {
                let kept = target.unrecorded.as_ref().map_or(String::new(), |error| {
                    format!(
                        "; its end could not be recorded ({error}): its supervisor (pid {}) keeps it and records it once \
                         the home can be written",
                        target.supervisor.pid
                    )
                });
                format!("killed {} ({}): {count} process(es) signalled{exiting}{unrecorded}{kept}", after.id, after.status())
            };
            results.push(Ok(KillOutcome { message, signalled: true, job: after }));
        }
        results.extend(late);
        results
    }

    /// Forgets finished jobs that ended more than `older_than` ago (all finished
    /// jobs without it) and deletes their logs. Returns the ids removed.
    pub fn prune(&self, older_than: Option<Duration>) -> Result<Vec<String>> {
        let cutoff = now_ms().saturating_sub(older_than.map_or(0, |d| d.as_millis() as u64));
        self.reconcile()?;
        let rows = procinfo::table();
        let live = tree::TableIndex::new(&rows);
        let removed = self.registry().update(|jobs| {
            let mut removed = Vec::new();
            jobs.retain(|job| {
                let old_enough = job.ended_at().unwrap_or(job.started_at) <= cutoff;
                let remove = job.status().is_final()
                    && old_enough
                    && !tree::has_live_processes(job, &crate::store::procset::load(&self.home.job_dir(&job.id)), &live);
                if remove {
                    removed.push(job.id.clone());
                }
                !remove
            });
            removed
        })?;
        for id in &removed {
            let _ = std::fs::remove_dir_all(self.home.job_dir(id));
        }
        let mut removed = removed;
        // Unreadable records never run: as old as their job.json, they go too.
        for record in self.registry().corrupt_records()?.into_iter().filter(|r| r.removable && r.modified_ms <= cutoff) {
            if self.registry().remove_corrupt(&record.id)? {
                removed.push(record.id);
            }
        }
        Ok(removed)
    }

    /// A supervisor that does not answer its doorbell cannot be waited for:
    /// the job's tree (which still includes everything below the supervisor)
    /// is signalled here, each process by identity, and the kill recorded. The
    /// supervisor itself is left alone: someone stopped it on purpose, and
    /// once it runs again it finds the kill request and the tree gone.
    // Each argument is a fact about the job the kill found; no struct would say more.
    #[allow(clippy::too_many_arguments)]
    fn kill_without_supervisor(
        &self,
        job: &Job,
        tree: Tree,
        supervisor: ProcessIdentity,
        stopped: bool,
        grace: Duration,
        force: bool,
        main_was_running: bool,
    ) -> Result<KillOutcome> {
        // `main_was_running`: before the supervisor was asked. A main process
        // that had already exited (a zombie the stopped supervisor has not
        // reaped) ended the job on its own: its outcome is the supervisor's
        // to record when it resumes, not ours to call a kill. One gone only
        // since was killed by the supervisor, which then did not record it
        // in time: that is a kill.
        let (count, exiting) = terminate_tree(tree, grace, force);
        let exiting = still_exiting(exiting);
        let why = if stopped { "is stopped" } else { "did not answer in time" };
        if job.status().is_final() || !main_was_running {
            let after = self.job(&job.id)?;
            let message = format!(
                "{} had already ended; removed what it left running ({count} process(es) signalled) without its supervisor, \
                 which {why} (pid {}) and records the outcome when it runs again{exiting}",
                after.id, supervisor.pid
            );
            return Ok(KillOutcome { message, signalled: count > 0, job: after });
        }
        let (after, unrecorded) = self.record_kill(job.clone());
        let message = format!(
            "killed {} ({}) without its supervisor, which {why} (pid {}): {count} process(es) signalled{exiting}{unrecorded}",
            after.id, after.status(), supervisor.pid
        );
        Ok(KillOutcome { message, signalled: true, job: after })
    }

    /// Without a supervisor we signal the tree ourselves, each process by
    /// identity. What cannot be recorded (a full disk) never stops the kill;
    /// the message then says so.
    fn kill_orphaned(&self, job: Job, tree: Tree, grace: Duration, force: bool) -> Result<KillOutcome> {
        let _ = self.note_kill_request(&job.id, grace, force);
        let (count, exiting) = terminate_tree(tree, grace, force);
        let (stored, unrecorded) = self.record_kill(job);
        let message =
            format!("killed orphaned job {} ({count} process(es) signalled){}{unrecorded}", stored.id, still_exiting(exiting));
        Ok(KillOutcome { message, signalled: true, job: stored })
    }

    /// Records a kill done here; what cannot be recorded (a full disk) never
    /// undoes the kill: the job is shown killed and the note says why it is
    /// not on disk.
    fn record_kill(&self, job: Job) -> (Job, String) {
        match self.change_status(&job.id, Patience::Full, mark_killed) {
            Ok(stored) => (stored, String::new()),
            Err(e) => {
                let mut shown = job;
                mark_killed(&mut shown);
                (shown, format!("; it could not be recorded: {e}"))
            }
        }
    }

    /// Leaves word beside the job that it is being killed: its supervisor acts
    /// on it, and an orphan's watcher records `killed` rather than `lost`.
    fn note_kill_request(&self, id: &str, grace: Duration, force: bool) -> Result<()> {
        self.write_kill_request(id, KillRequest { grace_ms: grace.as_millis() as u64, force, caller_sweeps: false })
    }

    fn write_kill_request(&self, id: &str, request: KillRequest) -> Result<()> {
        let dir = self.home.job_dir(id);
        create_private_dir_all(&dir)?;
        write_json_file(&dir.join(KILL_REQUEST_FILE), &request, false)
    }

    /// Processes still running for a job whose main process has ended (or
    /// whose supervisor is gone). Empty for a job still running normally.
    pub fn lingering(&self, job: &Job) -> Vec<ProcessEntry> {
        if job.status().is_final() || job.status() == JobStatus::Orphaned {
            self.processes_of(job)
        } else {
            Vec::new()
        }
    }

    /// What the job's supervisor recorded seeing below itself (`store::procset`).
    pub fn recorded_processes(&self, job: &Job) -> Vec<ProcessIdentity> {
        crate::store::procset::load(&self.home.job_dir(&job.id))
    }

    /// The live processes `job` owns: the union of what its supervisor
    /// recorded (each only while a live process has the same pid and start
    /// time), what carries its cookie, its process group while provably its
    /// own, and what runs below its live supervisor. Check, list, summary,
    /// orphans, kill, prune and reconcile all count through here (or
    /// `processes_of_jobs`, the same for many jobs), so they agree, and they
    /// keep finding a daemon that scrubbed its environment after the
    /// supervisor is gone.
    pub fn processes_of(&self, job: &Job) -> Vec<ProcessEntry> {
        let recorded = self.recorded_processes(job);
        tree::job_tree(Tree::of(job).with_recorded(&recorded)).0
    }

    /// How many live processes each ended job among `jobs` left behind
    /// (absent: none), from one pass over the process table.
    pub fn leftover_counts(&self, jobs: &[Job]) -> std::collections::HashMap<String, usize> {
        self.processes_of_jobs(jobs.iter().filter(|j| j.status().is_final()))
            .into_iter()
            .filter(|(_, processes)| !processes.is_empty())
            .map(|(id, processes)| (id, processes.len()))
            .collect()
    }

    /// `processes_of` for many jobs, from one pass over the process table.
    pub fn processes_of_jobs<'j>(&self, jobs: impl IntoIterator<Item = &'j Job>) -> std::collections::HashMap<String, Vec<ProcessEntry>> {
        let jobs: Vec<&Job> = jobs.into_iter().collect();
        // `list` and `summary` ask for their ended jobs only: with none (all
        // running), no pass over the process table.
        if jobs.is_empty() {
            return std::collections::HashMap::new();
        }
        let rows = procinfo::table();
        let index = tree::TableIndex::new(&rows);
        jobs.into_iter()
            .map(|job| {
                let recorded = self.recorded_processes(job);
                let members = index.members(Tree::of(job).with_recorded(&recorded));
                (job.id.clone(), members.rows.into_iter().map(procinfo::Row::entry).collect())
            })
            .collect()
    }

    /// Orphaned jobs, and every process that still carries the cookie of a job
    /// that has ended. With `kill`, removes them (SIGTERM, grace, SIGKILL).
    pub fn orphans(&self, options: &OrphanOptions) -> Result<OrphanReport> {
        self.reconcile()?;
        let jobs: Vec<Job> = self
            .registry()
            .load()?
            .into_iter()
            .filter(|j| j.status().is_final() || j.status() == JobStatus::Orphaned)
            .filter(|j| options.owner.as_ref().is_none_or(|o| j.owner.as_ref() == Some(o)))
            .collect();
        let mut owned = self.processes_of_jobs(&jobs);
        let found: Vec<OrphanProcess> = jobs
            .iter()
            .flat_map(|job| {
                let processes = owned.remove(&job.id).unwrap_or_default();
                processes.into_iter().map(|process| OrphanProcess { job_id: job.id.clone(), job_status: job.status(), process })
            })
            .collect();
        let orphaned_jobs: Vec<Job> = jobs.iter().filter(|j| j.status() == JobStatus::Orphaned).cloned().collect();
        let mut report = OrphanReport { found, orphaned_jobs, killed: Vec::new(), failed: Vec::new() };
        if !options.kill {
            return Ok(report);
        }
        let grace = options.grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
        for job in &report.orphaned_jobs {
            let _ = self.note_kill_request(&job.id, grace, options.force);
        }
        let targets: Vec<&ProcessEntry> = report.found.iter().map(|o| &o.process).collect();
        let failures = terminate_processes(&targets, grace, options.force);
        for orphan in &report.found {
            match failures.iter().find(|(pid, _)| *pid == orphan.process.identity.pid) {
                Some((_, why)) => report.failed.push((orphan.clone(), why.clone())),
                None => report.killed.push(orphan.clone()),
            }
        }
        // One registry write for them all: one each made `orphans --kill` of
        // N orphaned jobs cost N registry rewrites.
        let ids: Vec<String> = report.orphaned_jobs.iter().map(|j| j.id.clone()).collect();
        if let Err(e) = self.change_statuses(&ids, Patience::Full, mark_killed) {
            tracing::warn!("killed {} orphaned job(s), but that could not be recorded: {e}", ids.len());
        }
        Ok(report)
    }
}

fn mark_killed(job: &mut Job) -> bool {
    // Over `lost` too (see `JobState::can_become`): its watcher saw the
    // processes end under our signals before we could record the kill (on a
    // full disk it cannot see our note); the end keeps its time.
    let ended_at = job.ended_at().unwrap_or_else(now_ms);
    job.change_state(JobState::Killed { exit: None, ended_at })
}

/// SIGTERM to the job's tree, SIGKILL to what is left after `grace` (at once
/// with `force`). Returns how many distinct processes were signalled (a
/// process signalled by both passes, or by repeated SIGKILLs while it dies,
/// counts once) and how many of them, or of the tree, still live at the bound.
fn terminate_tree(tree: Tree, grace: Duration, force: bool) -> (usize, usize) {
    let mut signalled = Seen::default();
    let mut send = |signal| signalled.add(&tree::signal_tree(tree, signal).sent);
    if !force {
        send(libc::SIGTERM);
        wait_until(grace, Duration::from_millis(20), || !tree::tree_alive(tree));
    }
    let stubborn_deadline = Instant::now() + Duration::from_secs(2);
    while tree::tree_alive(tree) && Instant::now() < stubborn_deadline {
        send(libc::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
    }
    let exiting = signalled.wait_gone(tree, STILL_EXITING_PATIENCE);
    (signalled.len(), exiting)
}

/// How long an orphan's watcher waits for the kill that asked for its end to
/// record it (the kill's grace period, 5 s by default, and its SIGKILL's
/// 2 s fit), before it records the end itself.
const KILLER_RECORDS_PATIENCE: Duration = Duration::from_secs(10);

/// After the tree was signalled and SIGKILL had its chance, how long `kill`
/// still waits for the last of it to be gone before it says how many are
/// still exiting (a process in uninterruptible sleep cannot be hurried).
const STILL_EXITING_PATIENCE: Duration = Duration::from_secs(2);

/// `1 process still running`, `3 processes still running`.
pub fn processes_still_running(count: usize) -> String {
    format!("{count} process{} still running", if count == 1 { "" } else { "es" })
}

/// What `kill` says of an ended job whose left-over processes it removed.
fn left_running_removed(job: &Job, count: usize, exiting: &str) -> String {
    format!(
        "{} had already ended ({}); removed the processes it left running ({count} process(es) signalled){exiting}",
        job.id,
        job.status()
    )
}

fn still_exiting(count: usize) -> String {
    if count == 0 {
        String::new()
    } else {
        format!("; {count} still exiting")
    }
}

/// The processes of a job a kill has seen, by identity.
#[derive(Debug, Default)]
struct Seen(std::collections::HashMap<(u32, u64), ProcessIdentity>);

impl Seen {
    fn add(&mut self, processes: &[ProcessEntry]) {
        for p in processes {
            self.0.entry((p.identity.pid, p.identity.start_ticks)).or_insert(p.identity);
        }
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add_identities(&mut self, processes: impl IntoIterator<Item = ProcessIdentity>) {
        for who in processes {
            self.0.entry((who.pid, who.start_ticks)).or_insert(who);
        }
    }

    /// How many of these still live.
    fn alive(&self) -> usize {
        self.0.values().filter(|who| procinfo::is_same_process_alive(who)).count()
    }

    /// Waits until none of these lives and the tree has no process left,
    /// or `limit` passes; returns how many are left then. Sleeps on a pidfd
    /// of a process still there rather than looking again and again.
    fn wait_gone(&self, tree: Tree, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            let left: Vec<ProcessIdentity> = self.0.values().copied().filter(procinfo::is_same_process_alive).collect();
            // Not signalled by this kill, if any: they count as left, not as signalled.
            let newcomers = if left.is_empty() { tree::job_tree(tree).0.len() } else { 0 };
            let remaining = left.len() + newcomers;
            let now = Instant::now();
            if remaining == 0 || now >= deadline {
                return remaining;
            }
            let pause = (deadline - now).min(Duration::from_millis(50));
            match left.first() {
                Some(who) => procinfo::wait_for_exit(who, pause),
                None => std::thread::sleep(pause),
            }
        }
    }
}

/// One job's outcome of a kill of many, or why it could not be killed.
pub type KillResult = std::result::Result<KillOutcome, (String, Error)>;

fn result_id(result: &KillResult) -> String {
    match result {
        Ok(outcome) => outcome.job.id.clone(),
        Err((id, _)) => id.clone(),
    }
}

/// A job `kill_supervised` is killing.
struct Target {
    job: Job,
    supervisor: ProcessIdentity,
    /// Stopped when asked: it will not answer, and is not waited for.
    stopped: bool,
    main_was_running: bool,
    /// Ended before the kill, with processes left: done once they are gone.
    ended_before: bool,
    seen: Seen,
    /// Past this, we act without the supervisor.
    answer_by: Instant,
    /// The job as recorded once its end is (or, ended before, once its processes are gone).
    ended: Option<Job>,
    late: bool,
    /// Its main process is gone: its supervisor records the end next.
    main_gone: bool,
    /// Which job.json was read last.
    record: RecordStamp,
    /// Why its end could not be written (a read-only home): its supervisor
    /// keeps the end, and it is read from there.
    unrecorded: Option<String>,
}

/// A file's identity and time of change: its supervisor replaces a job.json
/// (a new inode) to record the end, so one not replaced need not be read.
#[derive(Default)]
struct RecordStamp(Option<(u64, std::time::SystemTime)>);

impl RecordStamp {
    fn changed(&mut self, path: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::symlink_metadata(path).ok().and_then(|m| Some((m.ino(), m.modified().ok()?)));
        now.is_some() && std::mem::replace(&mut self.0, now) != now
    }
}

impl Target {
    fn pending(&self) -> bool {
        self.ended.is_none() && !self.late
    }
}

/// Processes of jobs that lie outside their live supervisor's subtree
/// (a cookie carrier started through another process's hands, a recorded
/// one adopted elsewhere): the supervisor of a sweeping kill does not look
/// for them, so they are signalled here, each by identity, each newcomer
/// at the next look, SIGKILL once the grace period is over.
#[derive(Default)]
struct Strays {
    termed: std::collections::HashSet<(u32, u64)>,
    killed: std::collections::HashSet<(u32, u64)>,
    all: Vec<ProcessIdentity>,
}

impl Strays {
    fn signal(&mut self, members: &tree::Members, signal: i32) {
        for row in members.rows.iter().filter(|r| !members.below_supervisor.contains(&r.identity.pid)) {
            let who = row.identity;
            let key = (who.pid, who.start_ticks);
            if !self.termed.contains(&key) && !self.killed.contains(&key) {
                self.all.push(who);
            }
            let first = if signal == libc::SIGKILL { self.killed.insert(key) } else { self.termed.insert(key) };
            if first {
                procinfo::signal_process(&who, signal);
            }
        }
    }

    /// Those still alive get SIGKILL once the grace period is over.
    fn finish(&mut self, grace_ends: Instant) {
        let alive = |all: &[ProcessIdentity]| all.iter().copied().filter(procinfo::is_same_process_alive).collect::<Vec<_>>();
        if alive(&self.all).is_empty() {
            return;
        }
        wait_until(grace_ends.saturating_duration_since(Instant::now()), Duration::from_millis(20), || alive(&self.all).is_empty());
        for who in alive(&self.all) {
            procinfo::signal_process(&who, libc::SIGKILL);
        }
        wait_until(STILL_EXITING_PATIENCE, Duration::from_millis(20), || alive(&self.all).is_empty());
    }
}

/// How long past its grace period a supervisor may take to record a kill
/// before `kill` acts without it.
const SUPERVISOR_ANSWER: Duration = Duration::from_secs(2);

/// The same for a set of processes; returns (pid, reason) for those that refuse or survive.
fn terminate_processes(targets: &[&ProcessEntry], grace: Duration, force: bool) -> Vec<(u32, String)> {
    let mut failures: Vec<(u32, String)> = Vec::new();
    let send = |signal: i32, failures: &mut Vec<(u32, String)>| {
        for entry in targets {
            if failures.iter().any(|(pid, _)| *pid == entry.identity.pid) {
                continue;
            }
            match procinfo::signal_process(&entry.identity, signal) {
                SignalOutcome::Sent | SignalOutcome::Gone => {}
                SignalOutcome::Replaced => failures.push((entry.identity.pid, "pid was reused; not signalled".into())),
                SignalOutcome::Failed(why) => failures.push((entry.identity.pid, why)),
            }
        }
    };
    let all_gone = || targets.iter().all(|e| !procinfo::is_same_process_alive(&e.identity));
    if !force {
        send(libc::SIGTERM, &mut failures);
        wait_until(grace, Duration::from_millis(20), all_gone);
    }
    if !all_gone() {
        send(libc::SIGKILL, &mut failures);
        wait_until(Duration::from_secs(2), Duration::from_millis(20), all_gone);
    }
    for entry in targets {
        let already = failures.iter().any(|(pid, _)| *pid == entry.identity.pid);
        if !already && procinfo::is_same_process_alive(&entry.identity) {
            failures.push((entry.identity.pid, "still running after SIGKILL".into()));
        }
    }
    failures
}

/// Polls `done` with a pause growing from 1 ms to `max_pause` until it holds or `limit` passes.
fn wait_until(limit: Duration, max_pause: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(max_pause);
    }
}

#[derive(Debug, Clone, Default)]
pub struct OrphanOptions {
    pub kill: bool,
    pub force: bool,
    pub owner: Option<String>,
    pub grace: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct OrphanProcess {
    pub job_id: String,
    pub job_status: JobStatus,
    pub process: ProcessEntry,
}

#[derive(Debug, Clone)]
pub struct OrphanReport {
    /// Processes left behind by ended or orphaned jobs.
    pub found: Vec<OrphanProcess>,
    /// Jobs whose supervisor is gone while their processes run.
    pub orphaned_jobs: Vec<Job>,
    pub killed: Vec<OrphanProcess>,
    pub failed: Vec<(OrphanProcess, String)>,
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<JobStatus>,
    pub owner: Option<String>,
    /// Without it, jobs that ended over an hour ago are left out.
    pub all: bool,
}

#[derive(Debug, Clone, Default)]
pub struct TailQuery {
    /// At most this many lines (default 20).
    pub lines: usize,
    /// Only lines matching this (on the cleaned text).
    pub grep: Option<regex::Regex>,
    /// Only lines that look like errors, with a line of context.
    pub errors: bool,
}

impl TailQuery {
    pub fn new(lines: Option<usize>, grep: Option<&str>) -> Result<TailQuery> {
        let grep = grep
            .map(|pattern| {
                regex::Regex::new(pattern).map_err(|e| {
                    let reason = e.to_string().lines().last().unwrap_or("").trim().to_string();
                    Error::Usage(format!("bad --grep pattern `{pattern}`: {reason}"))
                })
            })
            .transpose()?;
        Ok(TailQuery { lines: lines.unwrap_or(20), grep, errors: false })
    }

    pub fn errors(mut self, errors: bool) -> Result<TailQuery> {
        if errors && self.grep.is_some() {
            return Err(Error::Usage("give either --grep or --errors, not both".into()));
        }
        self.errors = errors;
        Ok(self)
    }

    /// Which lines the query keeps.
    pub fn selection(&self) -> Selection {
        match (self.errors, &self.grep) {
            (true, _) => Selection::Errors,
            (false, Some(_)) => Selection::Matching,
            (false, None) => Selection::Last,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CheckResult {
    pub job: Job,
    pub tail: Vec<String>,
    /// Where the log stood when the tail was read (after its last complete
    /// line): `read_log` since it gives only what came after.
    pub cursor: u64,
    /// Why `cursor` is not to be used: the log's start record is corrupt.
    pub log_problem: Option<String>,
    /// Processes still running although the main process ended (or the supervisor died).
    pub lingering: Vec<ProcessEntry>,
    /// What the job's live processes cost now (None when none run).
    pub usage: Option<TreeUsage>,
    /// Which lines `tail` holds: what an empty tail means.
    pub selection: Selection,
}

/// Which of a log's lines a check shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The last ones.
    Last,
    /// Only those matching a pattern.
    Matching,
    /// Only those that look like errors, with context.
    Errors,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeUsage {
    pub processes: usize,
    pub rss_kb: u64,
}

#[derive(Debug, Clone)]
pub struct WaitOutcome {
    pub jobs: Vec<Job>,
    pub timed_out: bool,
}

#[derive(Debug, Clone)]
pub struct KillOutcome {
    pub job: Job,
    pub signalled: bool,
    pub message: String,
}

/// Nothing can write to `job`'s log any more: the job has ended and its
/// supervisor, the log's only writer, is gone. The end alone is not enough:
/// processes the job left behind write through the supervisor after it, so
/// until then a last line without a newline may still grow.
pub fn log_has_no_writer(job: &Job) -> bool {
    job.status().is_final() && tree::live_supervisor(job).is_none()
}

/// The tail `query` asks for, the cursor after it (see `CheckResult::cursor`)
/// and why that cursor is not to be used, if it is not.
pub fn tail_job_log(job: &Job, query: &TailQuery) -> (Vec<String>, u64, Option<String>) {
    let reader = crate::store::logs::ReverseLines::open(std::path::Path::new(&job.log_path));
    let cursor = reader.cursor(log_has_no_writer(job));
    let problem = reader.record_problem().map(str::to_string);
    let tail = if query.errors {
        digest::error_lines_of(reader, query.lines)
    } else {
        digest::last_lines_of(reader, query.lines, query.grep.as_ref())
    };
    (tail, cursor, problem)
}

/// Which lines of a job's log `read_log` gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LogRange {
    /// `count` lines from line `from` (1 = the oldest kept), or the last `count`.
    Lines { from: Option<usize>, count: usize },
    /// At most `count` lines written after the cursor `since`.
    Since { since: u64, count: usize },
}

/// What `read_log` read: lines by number, or the lines after a cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum LogRead {
    Lines(digest::LineWindow),
    Since(digest::LinesSince),
}

impl Context {
    /// A job's log lines by number or after a cursor, across rotations.
    pub fn read_log(&self, id: &str, range: LogRange) -> Result<(Job, LogRead)> {
        self.read_log_within(id, range, None)
    }

    /// `read_log` keeping only the first lines that fit in `budget`
    /// characters, the cursor right after them and the rest counted (see
    /// `digest::line_window_within`): one read, so an answer cut to size
    /// still gets the cursor of what it shows.
    pub fn read_log_within(&self, id: &str, range: LogRange, budget: Option<usize>) -> Result<(Job, LogRead)> {
        let job = self.job(id)?;
        let log = std::path::Path::new(&job.log_path);
        let ended = log_has_no_writer(&job);
        let read = match range {
            LogRange::Lines { from: Some(0), .. } => {
                return Err(Error::Usage("bad fromLine: 0; lines are numbered from 1".into()))
            }
            LogRange::Lines { from, count } => LogRead::Lines(digest::line_window_within(log, from, count, ended, budget)),
            LogRange::Since { since, count } => {
                LogRead::Since(digest::lines_since_within(log, since, count, ended, budget)?)
            }
        };
        Ok((job, read))
    }

    /// `read_log` after a cursor, one line at a time (see `SinceRead`).
    pub fn read_log_since(&self, id: &str, since: u64, count: usize) -> Result<(Job, digest::SinceRead)> {
        let job = self.job(id)?;
        let read = digest::SinceRead::open(std::path::Path::new(&job.log_path), since, count, log_has_no_writer(&job))?;
        Ok((job, read))
    }
}

fn non_blank() -> &'static regex::Regex {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| regex::Regex::new(r"\S").expect("valid pattern"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::sample_job;

    #[test]
    fn a_kill_is_recorded_over_a_running_orphaned_or_lost_job() {
        for status in [JobStatus::Running, JobStatus::Orphaned] {
            let mut job = sample_job(status);
            assert!(mark_killed(&mut job), "{status}");
            assert_eq!(job.status(), JobStatus::Killed);
            assert!(job.ended_at().is_some(), "{status}: the end is dated");
        }
        // Lost meanwhile: its watcher saw the processes end under our signals.
        let mut lost = sample_job(JobStatus::Lost);
        lost.state = JobState::Lost { reason: Some("no exit status was recorded".into()), ended_at: 7 };
        let ended_at = lost.ended_at();
        assert!(mark_killed(&mut lost));
        assert_eq!((lost.status(), lost.error(), lost.ended_at()), (JobStatus::Killed, None, ended_at));
    }

    #[test]
    fn a_kill_never_overwrites_an_outcome() {
        let exited = |code| JobState::Exited { code, ended_at: 7 };
        let exit = Some(crate::model::job::Exit::Code(0));
        for state in [
            exited(0),
            exited(3),
            JobState::Signalled { signal: "SIGSEGV".into(), ended_at: 7 },
            JobState::FailedToStart { error: "no such file".into(), ended_at: 7 },
            JobState::Killed { exit: exit.clone(), ended_at: 7 },
            JobState::TimedOut { exit, ended_at: 7 },
        ] {
            let mut job = crate::model::job::sample_in(state);
            let status = job.status();
            let before = job.clone();
            assert!(!mark_killed(&mut job), "{status}");
            assert_eq!(job, before, "{status}");
        }
    }
}
