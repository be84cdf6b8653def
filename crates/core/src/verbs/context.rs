//! `Context`, what every verb needs (the home and its settings), and what
//! the verbs share: recording a status change with its announcement, the
//! processes a job owns, polling with a deadline.

use crate::store::config::Config;
use crate::model::job::{Job, JobStatus, ProcessIdentity};
use crate::store::paths::Home;
use crate::os::procinfo::{self, ProcessEntry};
use crate::store::registry::{Patience, Registry};
use crate::model::protocol::Errand;
use crate::os::tree::Tree;
use crate::{os::tree, supervise::notify, now_ms, verbs::spawn, Error, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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

    pub(crate) fn run_in_background(&self, errand: Errand) {
        self.started_in_background(errand);
    }

    /// `run_in_background`, saying whether the errand was started (not
    /// where no runner is known, or it could not be spawned).
    pub(crate) fn started_in_background(&self, errand: Errand) -> bool {
        let Some(runner) = &self.runner else { return false };
        let args = errand.args();
        match spawn::spawn_detached(runner, &self.home, &args) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("cannot start background `{}`: {e}", args.join(" "));
                false
            }
        }
    }

    /// Changes a job's status under the lock when `change` says it did, and
    /// claims and sends the announcement that goes with it (once: the claim is
    /// made in the same locked update as the change).
    pub(crate) fn change_status(&self, id: &str, patience: Patience, change: impl FnOnce(&mut Job) -> bool) -> Result<Job> {
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
    pub(crate) fn change_statuses(&self, ids: &[String], patience: Patience, change: impl Fn(&mut Job) -> bool) -> Result<Vec<Job>> {
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
        let registry = Registry::for_config(&self.home, &self.config);
        let Some(runner) = self.runner.clone() else { return registry };
        let home = self.home.clone();
        // Forgotten job directories are deleted by a detached `__sweep`.
        registry.with_sweeper(std::sync::Arc::new(move |folder: &str| {
            spawn::spawn_detached(&runner, &home, &Errand::Sweep { folder: folder.to_string() }.args()).is_ok()
        }))
    }

    /// Job directories whose job.json cannot be read (see `Registry::corrupt_records`).
    pub fn corrupt_records(&self) -> Result<Vec<crate::store::registry::CorruptRecord>> {
        self.registry().corrupt_records()
    }

    /// Records that the outcome of an ended job has been looked at, and
    /// when the look comes from inside the job's own agent session, that the
    /// session knows of its end (its hooks then do not wake it for it).
    /// Best effort: a read-only home still lets one look.
    pub fn mark_seen(&self, job: Job) -> Result<Job> {
        if !job.status().is_final() {
            return Ok(job);
        }
        if let Some(session) = job.session.as_deref() {
            if crate::store::sessions::detect(&self.home).as_deref() == Some(session) {
                let _ = crate::store::sessions::tell_once(&self.home, session, |told| {
                    (if told.contains(&job.id) { Vec::new() } else { vec![job.id.clone()] }, ())
                });
            }
        }
        if job.seen_at.is_some() {
            return Ok(job);
        }
        Ok(self
            .registry()
            .modify_with(Patience::Brief, &job.id, |stored| {
                stored.seen_at.get_or_insert(now_ms());
            })
            .unwrap_or(job))
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
    /// kill, prune and reconcile all count through here (or
    /// `processes_of_jobs`, the same for many jobs), so they agree, and they
    /// keep finding a daemon that scrubbed its environment after the
    /// supervisor is gone. Where they look is `reach`: the whole process
    /// table only for a job that may have processes anywhere.
    pub fn processes_of(&self, job: &Job) -> Vec<ProcessEntry> {
        let recorded = self.recorded_processes(job);
        let tree = Tree::of(job).with_recorded(&recorded);
        match self.reach(job) {
            Reach::Below(supervisor) => tree::job_subtree(tree, supervisor.pid).0,
            Reach::Recorded => tree::job_recorded(tree).0,
            Reach::Anywhere => tree::job_tree(tree).0,
        }
    }

    /// Where `job`'s processes can be. While its supervisor lives, below it:
    /// a child subreaper keeps every descendant of the job, whatever it
    /// forks, setsids or scrubs, so the walk down from it costs the job's
    /// size, not a pass over every process of the machine (at 1,000 running
    /// jobs, 2,000 processes and their environments for one `check`). Once
    /// its supervisor saw everything below it end and left its mark, among
    /// what it recorded. Otherwise (it died, or the job runs without one)
    /// anywhere: the table is read whole. Not found by the first two: a
    /// process that another program started for the job outside its tree
    /// (a daemon asked over a socket) with the job's cookie passed on, until
    /// the supervisor's last look (which records it) or a kill's sweep.
    pub fn reach(&self, job: &Job) -> Reach {
        if let Some(supervisor) = tree::live_supervisor(job) {
            return Reach::Below(supervisor);
        }
        let done = self.home.job_dir(&job.id).join(crate::model::protocol::SUPERVISOR_DONE_FILE);
        if job.status().is_final() && std::fs::symlink_metadata(done).is_ok_and(|m| m.is_file()) {
            return Reach::Recorded;
        }
        Reach::Anywhere
    }

    /// How many live processes each ended job among `jobs` left behind
    /// (absent: none).
    pub fn leftover_counts(&self, jobs: &[Job]) -> std::collections::HashMap<String, usize> {
        self.processes_of_jobs(jobs.iter().filter(|j| j.status().is_final()))
            .into_iter()
            .filter(|(_, processes)| !processes.is_empty())
            .map(|(id, processes)| (id, processes.len()))
            .collect()
    }

    /// `processes_of` for many jobs: each where `reach` says, with one pass
    /// over the process table for all those that need it.
    pub fn processes_of_jobs<'j>(&self, jobs: impl IntoIterator<Item = &'j Job>) -> std::collections::HashMap<String, Vec<ProcessEntry>> {
        let mut found = std::collections::HashMap::new();
        let mut anywhere: Vec<&Job> = Vec::new();
        for job in jobs {
            let recorded = self.recorded_processes(job);
            let tree = Tree::of(job).with_recorded(&recorded);
            let processes = match self.reach(job) {
                Reach::Below(supervisor) => tree::job_subtree(tree, supervisor.pid).0,
                Reach::Recorded => tree::job_recorded(tree).0,
                Reach::Anywhere => {
                    anywhere.push(job);
                    continue;
                }
            };
            found.insert(job.id.clone(), processes);
        }
        // `list` and `summary` ask for their ended jobs only: with none that
        // needs it (all running, or all ended cleanly), no pass over the table.
        if anywhere.is_empty() {
            return found;
        }
        found.extend(self.processes_of_jobs_anywhere(anywhere));
        found
    }

    /// `processes_of_jobs` looking over the whole table for every job, as
    /// `orphans` does: what ended jobs left anywhere.
    pub fn processes_of_jobs_anywhere<'j>(&self, jobs: impl IntoIterator<Item = &'j Job>) -> std::collections::HashMap<String, Vec<ProcessEntry>> {
        let jobs: Vec<&Job> = jobs.into_iter().collect();
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
}

/// Where a job's processes can be (see `Context::reach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Below its live supervisor.
    Below(ProcessIdentity),
    /// Among what its supervisor recorded before it exited.
    Recorded,
    /// Anywhere in the process table.
    Anywhere,
}

/// `1 process still running`, `3 processes still running`.
pub fn processes_still_running(count: usize) -> String {
    format!("{count} process{} still running", if count == 1 { "" } else { "es" })
}

/// Polls `done` with a pause growing from 1 ms to `max_pause` until it holds or `limit` passes.
pub(crate) fn wait_until(limit: Duration, max_pause: Duration, mut done: impl FnMut() -> bool) -> bool {
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
