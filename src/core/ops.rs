//! The verbs both faces share: check, list, wait, kill, reconcile, logs.

use super::config::Config;
use super::ids::validate_job_id;
use super::job::{Job, JobStatus};
use super::logs;
use super::paths::Home;
use super::procinfo;
use super::registry::{write_json_file, Registry};
use super::supervisor::{KillRequest, KILL_REQUEST_FILE};
use super::{kill, now_ms, Error, Result};
use std::time::{Duration, Instant};

/// Home plus settings: what every verb needs.
#[derive(Debug, Clone)]
pub struct Context {
    pub home: Home,
    pub config: Config,
}

impl Context {
    pub fn load() -> Result<Context> {
        let home = Home::resolve()?;
        let config = Config::load(&home.config_path())?;
        Ok(Context { home, config })
    }

    pub fn registry(&self) -> Registry {
        Registry::new(&self.home, self.config.registry.max_jobs)
    }

    /// A job by id, its status verified against the OS first.
    pub fn job(&self, id: &str) -> Result<Job> {
        validate_job_id(id)?;
        let job = self.registry().get(id)?;
        self.reconcile_job(job)
    }

    /// For a job recorded as running or orphaned whose supervisor is gone:
    /// processes of the job still alive make it `orphaned`, none make it `lost`.
    pub fn reconcile_job(&self, job: Job) -> Result<Job> {
        if job.status.is_final() || job.supervisor.is_some_and(|s| procinfo::is_same_process_alive(&s)) {
            return Ok(job);
        }
        if job.supervisor.is_none() && now_ms().saturating_sub(job.started_at) < 10_000 {
            return Ok(job); // still being handed to its supervisor
        }
        let verdict = if job_processes_alive(&job) { JobStatus::Orphaned } else { JobStatus::Lost };
        if verdict == job.status {
            return Ok(job);
        }
        let stored = self.registry().modify(&job.id, |stored| {
            // Re-checked under the lock: the supervisor may have recorded the end meanwhile.
            if !stored.status.is_final() {
                stored.status = verdict;
                if verdict == JobStatus::Lost {
                    stored.ended_at.get_or_insert(now_ms());
                    stored.error.get_or_insert_with(|| {
                        "the supervisor and the job's processes are gone and no exit status was recorded".into()
                    });
                }
            }
        })?;
        Ok(stored)
    }

    /// Verifies every running or orphaned job; returns those found orphaned and lost.
    pub fn reconcile(&self) -> Result<(Vec<Job>, Vec<Job>)> {
        let mut orphaned = Vec::new();
        let mut lost = Vec::new();
        for job in self.registry().load()? {
            if job.status.is_final() {
                continue;
            }
            let job = self.reconcile_job(job)?;
            match job.status {
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
        for job in self.registry().load()? {
            let job = self.reconcile_job(job)?;
            if let Some(status) = filter.status {
                if job.status != status {
                    continue;
                }
            } else if !filter.all && job.status.is_final() && job.ended_at.unwrap_or(0) < recent_since {
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
        let job = self.job(id)?;
        let tail = tail_job_log(&job, query)?;
        Ok(CheckResult { job, tail })
    }

    /// Blocks until every job in `ids` has ended, or `timeout` passes.
    /// Returns the jobs as last seen; `timed_out` says whether any still runs.
    pub fn wait(&self, ids: &[String], timeout: Option<Duration>) -> Result<WaitOutcome> {
        for id in ids {
            validate_job_id(id)?;
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut pause = Duration::from_millis(2);
        let mut last_reconcile = Instant::now();
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
                jobs = jobs.into_iter().map(|j| self.reconcile_job(j)).collect::<Result<_>>()?;
            }
            if jobs.iter().all(|j| j.status.is_final()) {
                return Ok(WaitOutcome { jobs, timed_out: false });
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(WaitOutcome { jobs, timed_out: true });
            }
            let mut sleep = pause;
            if let Some(d) = deadline {
                sleep = sleep.min(d.saturating_duration_since(Instant::now()));
            }
            std::thread::sleep(sleep);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// SIGTERM to the job's tree, SIGKILL after `grace` (or at once with
    /// `force`); returns once the tree is gone. Ended jobs are left alone.
    pub fn kill(&self, id: &str, grace: Option<Duration>, force: bool) -> Result<KillOutcome> {
        let job = self.job(id)?;
        let grace = grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
        let supervised = job.supervisor.filter(|s| procinfo::is_same_process_alive(s));
        if let Some(supervisor) = supervised {
            let request = KillRequest { grace_ms: grace.as_millis() as u64, force };
            write_json_file(&self.home.job_dir(&job.id).join(KILL_REQUEST_FILE), &request, false)?;
            // Identity re-checked right before the signal, never a bare pid.
            if !procinfo::is_same_process_alive(&supervisor) {
                return self.kill(id, Some(grace), force);
            }
            unsafe { libc::kill(supervisor.pid as libc::pid_t, libc::SIGUSR1) };
            let deadline = Instant::now() + grace + Duration::from_secs(10);
            let mut pause = Duration::from_millis(1);
            while procinfo::is_same_process_alive(&supervisor) && Instant::now() < deadline {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            let after = self.job(id)?;
            let was_running = !job.status.is_final();
            return Ok(KillOutcome {
                message: if was_running {
                    format!("killed {} ({})", after.id, after.status)
                } else {
                    format!("{} had already ended ({}); removed what was left of its processes", after.id, after.status)
                },
                signalled: true,
                job: after,
            });
        }
        if job.status == JobStatus::Orphaned {
            return self.kill_orphaned(job, grace, force);
        }
        let message = format!("{} is not running ({}); nothing to kill", job.id, job.status);
        Ok(KillOutcome { job, signalled: false, message })
    }

    /// Kills every running or orphaned job (of `owner`, when given) at once,
    /// so their grace periods overlap instead of adding up.
    pub fn kill_all(&self, owner: Option<&str>, grace: Option<Duration>, force: bool) -> Result<Vec<Result<KillOutcome>>> {
        let filter = ListFilter { all: true, owner: owner.map(str::to_string), status: None };
        let targets: Vec<Job> = self.list(&filter)?.into_iter().filter(|j| !j.status.is_final()).collect();
        Ok(std::thread::scope(|scope| {
            let handles: Vec<_> =
                targets.iter().map(|job| scope.spawn(move || self.kill(&job.id, grace, force))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(Error::Other("kill thread panicked".into()))))
                .collect()
        }))
    }

    /// Forgets finished jobs that ended more than `older_than` ago (all finished
    /// jobs without it) and deletes their logs. Returns the ids removed.
    pub fn prune(&self, older_than: Option<Duration>) -> Result<Vec<String>> {
        let cutoff = now_ms().saturating_sub(older_than.map_or(0, |d| d.as_millis() as u64));
        self.reconcile()?;
        let removed = self.registry().update(|jobs| {
            let mut removed = Vec::new();
            jobs.retain(|job| {
                let supervised = job.supervisor.is_some_and(|s| procinfo::is_same_process_alive(&s));
                let old_enough = job.ended_at.unwrap_or(job.started_at) <= cutoff;
                let remove = job.status.is_final() && !supervised && old_enough;
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
        Ok(removed)
    }

    /// Without a supervisor we signal the tree ourselves, after checking that
    /// the recorded main process is still the same process.
    fn kill_orphaned(&self, job: Job, grace: Duration, force: bool) -> Result<KillOutcome> {
        let Some(main) = job.main else {
            return Ok(KillOutcome { message: format!("{} has no recorded process", job.id), signalled: false, job });
        };
        let pgid = main.pid;
        let group_is_ours = procinfo::is_same_process_alive(&main);
        let signal_ours = |signal| {
            if group_is_ours {
                kill::signal_tree(pgid, &job.id, signal);
            } else {
                for process in procinfo::processes_with_cookie(&job.id) {
                    if procinfo::is_same_process_alive(&process) {
                        unsafe { libc::kill(process.pid as libc::pid_t, signal) };
                    }
                }
            }
        };
        let alive = || {
            (group_is_ours && procinfo::is_same_process_alive(&main))
                || !procinfo::processes_with_cookie(&job.id).is_empty()
        };
        if !force {
            signal_ours(libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if alive() {
            signal_ours(libc::SIGKILL);
        }
        let stored = self.registry().modify(&job.id, |stored| {
            if !stored.status.is_final() {
                stored.status = JobStatus::Killed;
                stored.ended_at = Some(now_ms());
            }
        })?;
        Ok(KillOutcome { message: format!("killed orphaned job {}", stored.id), signalled: true, job: stored })
    }
}

/// True if the job's main process (same start time) or any cookie carrier lives.
pub fn job_processes_alive(job: &Job) -> bool {
    job.main.is_some_and(|m| procinfo::is_same_process_alive(&m))
        || !procinfo::processes_with_cookie(&job.id).is_empty()
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
    pub lines: usize,
    pub grep: Option<regex::bytes::Regex>,
}

impl TailQuery {
    pub fn new(lines: Option<usize>, grep: Option<&str>) -> Result<TailQuery> {
        let grep = grep
            .map(|pattern| {
                regex::bytes::Regex::new(pattern)
                    .map_err(|e| Error::Usage(format!("bad --grep pattern `{pattern}`: {e}")))
            })
            .transpose()?;
        Ok(TailQuery { lines: lines.unwrap_or(20), grep })
    }
}

#[derive(Debug, Clone)]
pub struct CheckResult {
    pub job: Job,
    pub tail: Vec<String>,
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

pub fn tail_job_log(job: &Job, query: &TailQuery) -> Result<Vec<String>> {
    let path = std::path::Path::new(&job.log_path);
    let lines = match &query.grep {
        Some(pattern) => logs::tail_lines(path, query.lines, |line| pattern.is_match(line)),
        None => logs::tail_lines(path, query.lines, |_| true),
    };
    Ok(lines.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect())
}
