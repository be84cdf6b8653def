//! Jobs that start later, without a daemon: `--after <id>…`, `--queue
//! <name>` (at most `max_parallel` of its jobs at once) and `--priority`.
//!
//! A queued job is recorded at once (`queued`), with its launch spec
//! (`jobs/<id>/spec.json`: the environment its submitter had, which the
//! supervisor and so the job inherit) written before its record. Whoever
//! frees a slot starts the next one: the supervisor of a job that ends, once
//! its end is recorded (`after_end`), and any later `run-bg` invocation or
//! addon call (`Context::with_runner`), for slots a dead supervisor never
//! handed on. The choice and the start happen under the registry lock
//! (`store::schedule::next_queue_step`), the job marked started in the same
//! locked update, so no job starts twice and no slot stays free while a job
//! waits for it.

use crate::model::ids::validate_job_id;
use crate::model::job::{Job, JobState, JobStatus, Waits};
use crate::model::protocol::Errand;
use crate::store::config::{validate_queue_name, Config, DEFAULT_QUEUE};
use crate::store::paths::Home;
use crate::store::registry::{self, Patience};
use crate::store::schedule::{self, QueueStep};
use crate::supervise::notify;
use crate::supervise::start::SupervisorSpec;
use crate::verbs::context::Context;
use crate::verbs::request::{QueuedPlace, StartRequest, Started};
use crate::verbs::spawn;
use crate::{now_ms, Error, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use crate::model::os_text::{bytes_of, from_bytes};
use std::path::Path;

/// A queued job's launch spec, beside its job.json.
const SPEC_FILE: &str = "spec.json";

/// In the home while some job may be queued: the one file an invocation
/// looks at (a stat) before it reads the registry to fill free slots.
const PENDING_FILE: &str = "queue.pending";

/// What a queued job needs to start later that its record does not hold.
#[derive(Serialize, Deserialize)]
struct LaunchSpec {
    /// The submitter's whole environment: a supervisor's is its job's.
    environ: Vec<(EnvWord, EnvWord)>,
}

/// An environment string as it was: text, or its bytes when not UTF-8.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum EnvWord {
    Text(String),
    Bytes(Vec<u8>),
}

impl EnvWord {
    fn from_os(word: OsString) -> EnvWord {
        match word.into_string() {
            Ok(text) => EnvWord::Text(text),
            Err(raw) => EnvWord::Bytes(bytes_of(&raw).to_vec()),
        }
    }

    fn into_os(self) -> OsString {
        match self {
            EnvWord::Text(text) => text.into(),
            EnvWord::Bytes(bytes) => from_bytes(bytes),
        }
    }
}

/// How the request waits (`None`: it starts at once), checked against the
/// registry and config.json: an unknown queue or job is refused here, at submit.
pub fn waits_for_request(context: &Context, request: &StartRequest) -> Result<Option<Waits>> {
    let queues = &context.config.queues;
    if let Some(queue) = &request.queue {
        validate_queue_name(queue).map_err(Error::Usage)?;
        if !queues.contains_key(queue) {
            let known: Vec<&str> = queues.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            return Err(Error::Usage(format!(
                "unknown queue `{queue}`: config.json's `queues` names {known}; add one, e.g. \
                 {{\"queues\": {{\"{queue}\": {{\"max_parallel\": 2}}}}}}"
            )));
        }
    }
    if request.after_any && request.after.is_empty() {
        return Err(Error::Usage("--after-any needs the jobs to run after: give --after <id>…".into()));
    }
    let queue = request.queue.clone().or_else(|| queues.contains_key(DEFAULT_QUEUE).then(|| DEFAULT_QUEUE.to_string()));
    if queue.is_none() && request.after.is_empty() {
        if request.priority != 0 {
            return Err(Error::Usage(
                "--priority orders a queue: give --queue <name> (or configure a `default` queue) or --after".into(),
            ));
        }
        return Ok(None);
    }
    let mut after: Vec<String> = Vec::new();
    for id in &request.after {
        validate_job_id(id).map_err(|e| Error::Usage(format!("--after: {e}")))?;
        if !after.contains(id) {
            after.push(id.clone());
        }
    }
    if !after.is_empty() {
        let jobs = context.registry().load()?;
        if let Some(unknown) = after.iter().find(|id| !jobs.iter().any(|j| &j.id == *id)) {
            return Err(Error::Usage(format!(
                "--after: no job `{unknown}` in the registry; give the id of a job started before (`run-bg list --all` shows them)"
            )));
        }
    }
    Ok(Some(Waits {
        queue,
        priority: request.priority,
        after,
        after_any: request.after_any,
        after_ready: request.after_ready,
        queued_at: now_ms(),
    }))
}

/// Records `job` as queued (its launch spec first), then starts what can
/// start, this job included, in the same locked update.
pub fn enqueue(context: &Context, mut job: Job, waits: Waits, runner: &Path) -> Result<Started> {
    let registry = context.registry();
    let dir = context.home.job_dir(&job.id);
    job.state = JobState::Queued;
    job.waits = Some(waits);
    let spec = LaunchSpec { environ: std::env::vars_os().map(|(k, v)| (EnvWord::from_os(k), EnvWord::from_os(v))).collect() };
    let recorded = registry::write_json_file(&dir.join(SPEC_FILE), &spec, true).and_then(|()| registry.write_job_file(&job, true));
    if let Err(e) = recorded {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let context = context.clone().with_runner_only(runner);
    let mut announce = Vec::new();
    let action = format!("queue job {}", job.id);
    let stored = registry.update_with(Patience::Full, &action, |jobs| {
        // Readers adopt it from its job.json already: another process's fill
        // may have started it while we waited for the lock. That record stands.
        if !jobs.iter().any(|j| j.id == job.id) {
            jobs.push(job.clone());
        }
        mark_pending(&context.home);
        fill_locked(&context, runner, jobs, &mut announce);
        let position = schedule::queue_position(jobs, &job.id);
        jobs.iter().find(|j| j.id == job.id).cloned().map(|stored| (stored, position, jobs.clone()))
    });
    let (stored, position, jobs) = match stored {
        Ok(Some(found)) => found,
        Ok(None) => return Err(Error::Other(format!("job {} left the registry as it was queued", job.id))),
        Err(e) => {
            // Not queued: leave nothing that a later fill would start.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    send_announcements(&context, announce);
    let started = Started {
        job_id: stored.id.clone(),
        pid: stored.pid(),
        log_path: stored.log_path.clone(),
        label: stored.label.clone(),
        command: stored.command.clone(),
        warnings: Vec::new(),
        queued: None,
    };
    match stored.status() {
        JobStatus::Queued => Ok(Started {
            pid: None,
            queued: Some(QueuedPlace {
                position: position.unwrap_or(1),
                queue: schedule::queue_of(&stored).map(str::to_string),
                after: schedule::waiting_for(&stored, &jobs).into_iter().map(str::to_string).collect(),
            }),
            ..started
        }),
        JobStatus::Failed if stored.main.is_none() => {
            Err(Error::StartFailed { job_id: stored.id.clone(), message: stored.error().unwrap_or("could not start").to_string() })
        }
        // Skipped at once (a job it runs after had failed already): the ack says so.
        JobStatus::Skipped => {
            Err(Error::Skipped { job_id: stored.id.clone(), reason: stored.error().unwrap_or("skipped").to_string() })
        }
        _ => Ok(started),
    }
}

/// Where each queued job of `shown` waits, its place counted among `all` jobs.
pub fn places_among(shown: &[Job], all: &[Job]) -> std::collections::HashMap<String, QueuedPlace> {
    shown
        .iter()
        .filter(|j| j.status() == JobStatus::Queued)
        .map(|j| {
            let place = QueuedPlace {
                position: schedule::queue_position(all, &j.id).unwrap_or(1),
                queue: schedule::queue_of(j).map(str::to_string),
                after: schedule::waiting_for(j, all).into_iter().map(str::to_string).collect(),
            };
            (j.id.clone(), place)
        })
        .collect()
}

impl Context {
    /// With the `run-bg` binary known; also hands any notification that is due
    /// in the spool to a background deliverer, so every invocation of either
    /// face delivers what an earlier one could not, without waiting for it.
    pub fn with_runner(mut self, runner: std::path::PathBuf) -> Context {
        self.runner = Some(runner);
        if notify::spool_due(&self.home) {
            self.run_in_background(Errand::Deliver);
        }
        self.fill_queues();
        self
    }

    /// Where each queued job of `shown` waits, counted among every job in
    /// the registry (a list filtered by owner shows the real place).
    pub fn queue_places(&self, shown: &[Job]) -> Result<std::collections::HashMap<String, QueuedPlace>> {
        if !shown.iter().any(|j| j.status() == JobStatus::Queued) {
            return Ok(Default::default());
        }
        Ok(places_among(shown, &self.registry().load()?))
    }

    /// This context with its runner known, without the side errands `with_runner` starts.
    fn with_runner_only(mut self, runner: &Path) -> Context {
        self.runner = Some(runner.to_path_buf());
        self
    }

    /// Starts what the queues let start now, if any job is queued at all
    /// (one stat otherwise). Runs on every invocation that knows the
    /// `run-bg` binary: it hands on the slots of supervisors that died
    /// before they could.
    pub fn fill_queues(&self) {
        // Queued jobs wait there until it is fixed (opening it said so).
        if self.home.parents_are_unsafe() || !self.home.dir().join(PENDING_FILE).exists() {
            return;
        }
        if let Err(e) = fill(self) {
            tracing::warn!("cannot start queued jobs: {e}");
        }
    }

    /// Kill of a queued job: it leaves the queue as `killed`, nothing
    /// started. `None` when it is no longer queued (it started meanwhile):
    /// then it is killed as any job.
    pub(crate) fn kill_queued(&self, id: &str) -> Result<Option<Job>> {
        let mut announce = false;
        let job = self.registry().modify_with(Patience::Full, id, |stored| {
            if stored.status() == JobStatus::Queued && stored.change_state(JobState::Killed { exit: None, ended_at: now_ms() }) {
                stored.notification = notify::claim(&self.config.notify, stored);
                announce = notify::has_work(&self.config.notify, stored);
            }
        })?;
        if job.status() != JobStatus::Killed || job.main.is_some() {
            return Ok(None);
        }
        if announce {
            send_announcements(self, vec![(job.id.clone(), JobStatus::Killed)]);
        }
        // A kill frees no slot, but a job that runs after this one may now be skipped.
        self.fill_queues();
        Ok(Some(job))
    }
}

/// Called by a supervisor once its job's end is recorded: hands its slot on.
/// The supervisor is a child subreaper; a supervisor it starts would be
/// re-parented to it (and kept waiting for) once the start's intermediate
/// process exits, so it stops being one for the moment of the start.
pub fn after_end(home: &Home, config: &Config) {
    if !home.dir().join(PENDING_FILE).exists() {
        return;
    }
    let Ok(runner) = std::env::current_exe() else { return };
    let context = Context { home: home.clone(), config: config.clone(), runner: Some(runner) };
    let _ = crate::os::snapshot::set_child_subreaper(false);
    // Straight to the lock: a slot was just freed, and the look without the
    // lock would only delay the next start.
    let mut announce = Vec::new();
    let runner = context.runner.clone().unwrap_or_default();
    let filled = context.registry().update_with(Patience::Full, "start queued jobs", |jobs| {
        fill_locked(&context, &runner, jobs, &mut announce)
    });
    match filled {
        Ok(_) => send_announcements(&context, announce),
        Err(e) => tracing::warn!("cannot start queued jobs: {e}"),
    }
    if let Err(e) = crate::os::snapshot::set_child_subreaper(true) {
        tracing::warn!("run-bg supervisor: cannot become a child subreaper again: {e}");
    }
}

/// Starts (or skips) every queued job that can move now. Looks without the
/// lock first: only a fill with something to do takes it. A queue that looks
/// full may hold jobs whose supervisor died: those are verified first.
fn fill(context: &Context) -> Result<()> {
    let Some(runner) = context.runner.clone() else { return Ok(()) };
    let registry = context.registry();
    let jobs = registry.load()?;
    if !jobs.iter().any(|j| j.status() == JobStatus::Queued) {
        // Under the lock, so that it never removes a mark a new queued job just made.
        let _ = registry.update_with(Patience::Immediate, "clear the queue mark", |jobs| {
            if !jobs.iter().any(|j| j.status() == JobStatus::Queued) {
                let _ = std::fs::remove_file(context.home.dir().join(PENDING_FILE));
            }
        });
        return Ok(());
    }
    if schedule::next_queue_step(&jobs, &context.config.queues).is_none() {
        // Only the jobs a queued one waits on: those of its queue, those it runs after.
        let waiting: Vec<&Job> = jobs.iter().filter(|j| j.status() == JobStatus::Queued).collect();
        let holds = |job: &Job| {
            waiting.iter().any(|w| {
                schedule::queue_of(w).is_some_and(|q| schedule::queue_of(job) == Some(q))
                    || w.waits.as_ref().is_some_and(|waits| waits.after.contains(&job.id))
            })
        };
        let mut changed = false;
        for job in jobs.iter().filter(|j| matches!(j.status(), JobStatus::Running | JobStatus::Orphaned) && holds(j)) {
            changed |= context.reconcile_job(job.clone())?.status() != job.status();
        }
        let jobs = if changed { registry.load()? } else { jobs };
        if schedule::next_queue_step(&jobs, &context.config.queues).is_none() {
            return Ok(());
        }
    }
    let mut announce = Vec::new();
    registry.update_with(Patience::Full, "start queued jobs", |jobs| fill_locked(context, &runner, jobs, &mut announce))?;
    send_announcements(context, announce);
    Ok(())
}

/// Under the lock: skips and starts queued jobs until nothing more can
/// move. Each start is recorded in `jobs` before the next choice, so the
/// slot it took counts. Returns how many jobs it started.
fn fill_locked(context: &Context, runner: &Path, jobs: &mut [Job], announce: &mut Vec<(String, JobStatus)>) -> usize {
    let registry = context.registry();
    let mut started = 0;
    while let Some(step) = schedule::next_queue_step(jobs, &context.config.queues) {
        let job = match step {
            QueueStep::Skip(i, reason) => {
                let job = &mut jobs[i];
                job.change_state(JobState::Skipped { reason, ended_at: now_ms() });
                job
            }
            // Tied to a process that ended while it waited: its tie has
            // fired, so it ends killed without its command ever running.
            QueueStep::Start(i) if jobs[i].tie.as_ref().is_some_and(|t| !crate::os::procinfo::is_same_process_alive(&t.to)) => {
                let job = &mut jobs[i];
                crate::supervise::tie::fire(&mut job.tie);
                job.change_state(JobState::Killed { exit: None, ended_at: now_ms() });
                job
            }
            QueueStep::Start(i) => {
                started += 1;
                let job = &mut jobs[i];
                *job = start_now(context, runner, job.clone());
                if !matches!(job.state, JobState::FailedToStart { .. }) {
                    continue;
                }
                job
            }
        };
        // Ended without ever running: nobody else tells of it.
        job.notification = notify::claim(&context.config.notify, job);
        if notify::has_work(&context.config.notify, job) {
            announce.push((job.id.clone(), job.status()));
        }
        let _ = registry.write_job_file(job, true);
    }
    if !jobs.iter().any(|j| j.status() == JobStatus::Queued) {
        let _ = std::fs::remove_file(context.home.dir().join(PENDING_FILE));
    }
    started
}

/// Hands the queued job to a new supervisor and returns it as its
/// supervisor recorded it: running (or already ended), or failed to start.
fn start_now(context: &Context, runner: &Path, queued: Job) -> Job {
    let registry = context.registry();
    let dir = context.home.job_dir(&queued.id);
    let mut job = queued;
    job.state = JobState::Running;
    // Its runtime and `--timeout` count from here.
    job.started_at = now_ms();
    let failed = |mut job: Job, error: String| {
        job.state = JobState::FailedToStart { error, ended_at: now_ms() };
        job
    };
    let environ = match read_spec(&dir) {
        Ok(environ) => environ,
        Err(e) => return failed(job, format!("cannot read its launch spec {}: {e}", context.home.shown(&dir.join(SPEC_FILE)).display())),
    };
    let spec = SupervisorSpec { home: context.home.root.clone(), job: job.clone(), config: context.config.clone(), stay_child: false };
    let launched = spawn::launch_queued(&context.home, &spec, runner, &environ);
    // The supervisor wrote job.json before it answered.
    let own = registry.job_file(&job.id).filter(|own| own.status() != JobStatus::Queued);
    match (launched, own) {
        (Ok(_), Some(own)) => Job { seen_at: job.seen_at, ..own },
        (Ok(pid), None) => {
            job.main = crate::os::procinfo::identify_exactly(pid);
            job
        }
        (Err(_), Some(own)) if own.status().is_final() => own,
        (Err(e), _) => failed(job, e.to_string()),
    }
}

fn read_spec(dir: &Path) -> std::result::Result<Vec<(OsString, OsString)>, String> {
    let bytes = crate::store::paths::read_file(&dir.join(SPEC_FILE)).map_err(|e| e.to_string())?;
    let spec: LaunchSpec = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    Ok(spec.environ.into_iter().map(|(k, v)| (k.into_os(), v.into_os())).collect())
}

fn mark_pending(home: &Home) {
    let path = home.dir().join(PENDING_FILE);
    if let Err(e) = crate::store::paths::options_nofollow().write(true).create(true).truncate(false).open(&path) {
        tracing::warn!("cannot write {}: {e}; queued jobs start only as running ones end", home.shown(&path).display());
    }
}

/// Announces, in the background, the jobs that ended here without running.
fn send_announcements(context: &Context, announce: Vec<(String, JobStatus)>) {
    let Some(runner) = &context.runner else { return };
    for (job_id, claimed) in announce {
        let args = Errand::Announce { job_id, claimed: Some(claimed) }.args();
        if let Err(e) = spawn::spawn_detached(runner, &context.home, &args) {
            tracing::error!("cannot start background `{}`: {e}", args.join(" "));
        }
    }
}
