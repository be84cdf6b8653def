//! `kill` and `kill --all`: every process of a job's tree, signalled by
//! identity, the ends waited for together and recorded once.

use crate::model::job::{Job, JobState, JobStatus, ProcessIdentity};
use crate::store::paths::create_private_dir_all;
use crate::os::procinfo::{self, ProcessEntry, SignalOutcome};
use crate::store::registry::{write_json_file, Patience};
use crate::model::protocol::{Errand, KillRequest, KILL_REQUEST_FILE};
use crate::os::tree::Tree;
use crate::{os::tree, now_ms, Error, Result};
use std::time::{Duration, Instant};
use crate::verbs::context::{wait_until, Context};
use crate::verbs::list::ListFilter;

mod sweep;
pub(crate) mod unreadable;
use sweep::{SharedRequest, Strays, STILL_EXITING_PATIENCE};

/// A kill that ended more jobs than this records their ends in the registry
/// by a detached `__take-in`; up to this many, before it returns (a few
/// job.json files to read, and no spawn of a process to do it).
const TAKE_IN_INLINE_UP_TO: usize = 16;

#[derive(Debug, Clone)]
pub struct KillOutcome {
    pub job: Job,
    pub signalled: bool,
    pub message: String,
}

/// One job's outcome of a kill of many, or why it could not be killed.
pub type KillResult = std::result::Result<KillOutcome, (String, Error)>;

impl Context {
    /// SIGTERM to the job's tree, SIGKILL after `grace` (or at once with
    /// `force`); returns once every process of the tree is gone, or says how
    /// many are still exiting at the bound. An ended job whose processes live
    /// on has them killed; only one with none left is "nothing to kill".
    pub fn kill(&self, id: &str, grace: Option<Duration>, force: bool) -> Result<KillOutcome> {
        let job = match self.job(id) {
            Ok(job) => job,
            Err(e) => return self.registry().corrupt_record(id).map_or(Err(e), |record| self.kill_corrupt(record, grace, force)),
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
        if let (Some(supervisor), false) = (supervised, nothing_left) {
            let outcome = procinfo::OwnIds::fixed_while(|| self.kill_supervised(vec![(job, supervisor)], grace, force, None)).pop();
            return outcome.expect("one outcome for one job").map_err(|(_, e)| e);
        }
        if job.status() == JobStatus::Orphaned {
            return self.kill_orphaned(job.clone(), tree, grace, force);
        }
        if !nothing_left {
            // Ended, its supervisor gone, and processes of it live on (a
            // daemon it recorded, a cookie carrier): they are what is killed.
            let (count, exiting) = terminate_tree(tree, grace, force, job.paused_at.is_some());
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
        filter: &ListFilter,
        older_than: Option<Duration>,
        grace: Option<Duration>,
        force: bool,
    ) -> Result<Vec<std::result::Result<KillOutcome, (String, Error)>>> {
        self.kill_all_where(filter, older_than, grace, force, &|_| true)
    }

    /// `kill_all` of the jobs `pick` takes among those the filter selects.
    pub fn kill_all_where(
        &self,
        filter: &ListFilter,
        older_than: Option<Duration>,
        grace: Option<Duration>,
        force: bool,
        pick: &dyn Fn(&Job) -> bool,
    ) -> Result<Vec<std::result::Result<KillOutcome, (String, Error)>>> {
        let started_by = older_than.map(|age| now_ms().saturating_sub(age.as_millis() as u64));
        // One read of the registry: what is listed, and which directories
        // it names (those it does not may hold an unreadable record).
        let (listed, known) = match self.registry().load() {
            Ok(jobs) => {
                let known: std::collections::HashSet<String> = jobs.iter().map(|j| j.id.clone()).collect();
                (self.list_of(jobs, filter)?, known)
            }
            // A registry that cannot be read never keeps a job alive: its
            // jobs' own records say what runs, as for `kill <id>`.
            Err(e @ (Error::Io { .. } | Error::Other(_))) => {
                tracing::warn!("{e}; killing by the job directories' own records instead");
                (self.list_without_registry(filter)?, Default::default())
            }
            Err(e) => return Err(e),
        };
        let jobs: Vec<Job> = listed.into_iter().filter(|j| started_by.is_none_or(|cut| j.started_at <= cut) && pick(j)).collect();
        // Ended jobs whose processes live on are part of "everything I started"
        // (one pass over the process table for all of them).
        let left = self.leftover_counts(&jobs);
        let targets: Vec<Job> = jobs
            .into_iter()
            .filter(|j| !j.status().is_final() || left.contains_key(&j.id))
            .collect();
        // A job whose record cannot be read has no owner, session or age to
        // select it by: only a kill of everything takes it, and only while
        // something of it lives (its processes ended, its record then most
        // often written anew by its supervisor; see `kill_corrupt`).
        let everything = filter.owner.is_none() && filter.session.is_none() && filter.status.is_none() && older_than.is_none();
        let unreadable = if everything { self.live_unreadable_jobs(&known) } else { Vec::new() };
        if unreadable.is_empty() {
            return Ok(self.kill_jobs(targets, grace, force));
        }
        Ok(std::thread::scope(|scope| {
            let handles: Vec<_> = unreadable
                .into_iter()
                .map(|record| (record.id.clone(), scope.spawn(move || self.kill_corrupt(record, grace, force))))
                .collect();
            let mut results = self.kill_jobs(targets, grace, force);
            for (id, handle) in handles {
                results.push(match handle.join() {
                    Ok(result) => result.map_err(|e| (id, e)),
                    Err(_) => Err((id, Error::Other("kill thread panicked".into()))),
                });
            }
            results
        }))
    }

    /// Kills `jobs` at once, each reported once (in their order): those with
    /// a live supervisor together (`kill_supervised`), any other (queued,
    /// orphaned, ended with processes left and no supervisor) on its own
    /// thread, so that every grace period overlaps.
    pub fn kill_jobs(&self, jobs: Vec<Job>, grace: Option<Duration>, force: bool) -> Vec<KillResult> {
        let order: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let mut results: std::collections::HashMap<String, KillResult> = std::thread::scope(|scope| {
            // With many jobs, the pass over the table `kill_supervised` needs
            // comes first (the time of it taken before it; it reads on both
            // cores while the supervisors idle), and tells every supervisor
            // apart too (its identity and its mark), once: asked of each
            // supervisor's own stat and environment beside it, the two read
            // the same files twice, a sixth of a kill of 1,000 jobs.
            let since = if force { None } else { crate::os::platform::boot_ticks_now() };
            let many = jobs.iter().filter(|j| j.status() != JobStatus::Queued).nth(1).is_some();
            let rows = many.then(procinfo::table);
            let index = rows.as_deref().map(tree::TableIndex::new);
            let mut supervised: Vec<(Job, ProcessIdentity)> = Vec::new();
            let mut others: Vec<Job> = Vec::new();
            for job in jobs {
                let supervisor = match &index {
                    _ if job.status() == JobStatus::Queued => None,
                    Some(index) => index.live_supervisor(&job),
                    None => tree::live_supervisor(&job),
                };
                match supervisor {
                    Some(supervisor) => supervised.push((job, supervisor)),
                    None => others.push(job),
                }
            }
            drop(index);
            let table = rows.map(|rows| (since, rows));
            let handles: Vec<_> = others
                .into_iter()
                .map(|job| (job.id.clone(), scope.spawn(move || self.kill(&job.id, grace, force))))
                .collect();
            let grace = grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
            let mut results: std::collections::HashMap<String, KillResult> =
                procinfo::OwnIds::fixed_while(|| self.kill_supervised(supervised, grace, force, table))
                    .into_iter()
                    .map(|r| (result_id(&r), r))
                    .collect();
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
    /// `table`: the start time and rows of a pass over the table begun
    /// after that time, if the caller made one. Called within
    /// `procinfo::OwnIds::fixed_while`: our own pid, group and session,
    /// which no signal may reach, asked once for the thousands of signals
    /// and checks (nothing here changes them).
    fn kill_supervised(
        &self,
        jobs: Vec<(Job, ProcessIdentity)>,
        grace: Duration,
        force: bool,
        table: Option<(Option<u64>, Vec<procinfo::Row>)>,
    ) -> Vec<KillResult> {
        if jobs.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let grace_ends = started + if force { Duration::ZERO } else { grace };
        let mut targets: Vec<Target> = Vec::with_capacity(jobs.len());
        let mut results: Vec<KillResult> = Vec::new();
        // Processes outside a supervisor's subtree that we signal ourselves.
        let mut strays = Strays::default();
        // Taken before the pass over the table: what starts later may have
        // been missed by it, and is the supervisor's to signal.
        let (since, rows) =
            table.unwrap_or_else(|| (if force { None } else { crate::os::platform::boot_ticks_now() }, procinfo::table()));
        let index = tree::TableIndex::new(&rows);
        // Each supervisor is rung as soon as its request is written: its kill
        // work, a wake, an end recorded and an exit, is most of a kill of
        // many jobs, and runs on the other cores while we go on (all
        // requests first left them idle for a tenth of the kill of 1,000).
        let request = KillRequest { grace_ms: grace.as_millis() as u64, force, caller_sweeps: true, caller_signalled_since: since };
        let shared = (jobs.len() > 1).then(|| SharedRequest::write(&self.home, &request)).flatten();
        let mut rung = Vec::with_capacity(jobs.len());
        for (job, supervisor) in jobs {
            let recorded = self.recorded_processes(&job);
            let members = index.members(Tree::of(&job).with_recorded(&recorded));
            // Decided now, before the supervisor is asked: a main process
            // that is gone by the time a slow supervisor would have answered
            // was most likely killed by it (issue 25).
            let main_was_running = job.main.is_some_and(|m| index.is_alive(&m));
            // A main process that had exited already (a zombie its supervisor
            // has not reaped yet) ended the job on its own: that supervisor
            // is asked the old way, and its exit stays the outcome.
            let own = if main_was_running { request } else { KillRequest { caller_signalled_since: None, ..request } };
            let linked = main_was_running && shared.as_ref().is_some_and(|shared| shared.link_into(&self.home.job_dir(&job.id)));
            let doorbell = if linked || self.write_kill_request(&job.id, own).is_ok() {
                crate::model::signals::SIGUSR1
            } else {
                crate::os::sys::DOORBELL_FALLBACK
            };
            // Its tree first, then its doorbell, each job's in turn (rung all
            // first, a supervisor looked at its tree again and again until
            // our signal came; rung before its tree, it woke twice and looked
            // once). Its request, written before either, tells it that the
            // deaths are a kill, should it see them first; with none written
            // (a full or read-only disk) it is rung with its stop signal
            // instead and sends its own.
            // Whether it can act at all, as it was when the kill began: looked
            // at after our signals, a supervisor stopped meanwhile (its job's
            // processes already gone) would read as stopped from the start.
            let stopped = procinfo::is_stopped(supervisor.pid);
            let signalled = since.is_some() && main_was_running && doorbell == crate::model::signals::SIGUSR1;
            if signalled {
                strays.signal_whole_job(&members, job.main, job.paused_at.is_some());
            }
            let outcome = match procinfo::signal_process(&supervisor, doorbell) {
                // Gone after it recorded the end our signals brought, before its doorbell.
                SignalOutcome::Gone if signalled && self.registry().own_record(&job.id).is_some_and(|j| j.status().is_final()) => {
                    SignalOutcome::Sent
                }
                other => other,
            };
            match outcome {
                SignalOutcome::Sent => rung.push((job, supervisor, recorded, members, main_was_running, signalled, stopped)),
                // It ended meanwhile: the job is now ended, orphaned or lost.
                SignalOutcome::Gone | SignalOutcome::Replaced => {
                    results.push(self.kill(&job.id, Some(grace), force).map_err(|e| (job.id.clone(), e)));
                }
                SignalOutcome::Failed(why) => {
                    let tree = if signalled { "; its processes were sent SIGTERM" } else { "" };
                    let error = Error::Other(format!("cannot signal the supervisor of {} (pid {}): {why}{tree}", job.id, supervisor.pid));
                    results.push(Err((job.id.clone(), error)));
                }
            }
        }
        drop(shared);
        // What each target's supervisor recorded, in the targets' order.
        let mut recorded: Vec<Vec<ProcessIdentity>> = Vec::with_capacity(rung.len());
        for (job, supervisor, job_recorded, members, main_was_running, signalled, stopped) in rung {
            recorded.push(job_recorded);
            let mut seen = Seen::default();
            seen.add_identities(members.rows.iter().map(|r| r.identity));
            // One signalled as its supervisor was rung (above) is left be.
            if let Some(signal) = stray_signal(force).filter(|_| !signalled) {
                strays.signal(&members, signal, job.paused_at.is_some());
            }
            let ended_before = job.status().is_final();
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
            // The whole table again only for what only it shows: strays (none
            // found at the start means none to follow), and what jobs that had
            // ended still ran. Each supervisor kills its own subtree; whether a
            // job's main process is gone its lock tells (`supervisor_holds`).
            let table_needed = !strays.all.is_empty() || targets.iter().any(|t| t.pending() && t.ended_before);
            if scanned && !table_needed {
                next_scan = now + Duration::from_millis(50);
                for target in targets.iter_mut().filter(|t| t.pending() && !t.main_gone) {
                    target.main_gone = !self.supervisor_holds(&target.job.id)
                        && target.job.main.is_none_or(|m| !procinfo::is_same_process_alive(&m));
                }
            }
            if scanned && table_needed {
                next_scan = now + Duration::from_millis(50);
                let rows = procinfo::table();
                let index = tree::TableIndex::new(&rows);
                let hard = now >= grace_ends;
                for (target, recorded) in targets.iter_mut().zip(&recorded).filter(|(t, _)| t.pending()) {
                    let members = index.members(Tree::of(&target.job).with_recorded(recorded));
                    target.seen.add_identities(members.rows.iter().map(|r| r.identity));
                    if let Some(signal) = stray_signal(hard) {
                        strays.signal(&members, signal, target.job.paused_at.is_some());
                    }
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
        // A supervisor with nothing to announce exits as soon as it has
        // recorded the end: `kill` returns once it has, so that nothing of a
        // job it reports killed is left when it does (one with a notifier
        // stays for it, as long as its retries take; said in the docs).
        let quiet_ends = Instant::now() + STILL_EXITING_PATIENCE;
        let mut supervisor_left: std::collections::HashSet<String> = std::collections::HashSet::new();
        for target in answered.iter().filter(|t| !t.ended_before) {
            let ended = target.ended.as_ref().unwrap_or(&target.job);
            if crate::supervise::notify::has_work(&self.config.notify, ended) || target.unrecorded.is_some() {
                continue;
            }
            let limit = quiet_ends.saturating_duration_since(Instant::now());
            procinfo::wait_for_exit(&target.supervisor, limit);
            if procinfo::is_same_process_alive(&target.supervisor) {
                supervisor_left.insert(target.job.id.clone());
            }
        }
        // Once for every end. Briefly: each is in its job.json already, which
        // readers prefer, and any later registry write takes it in; a kill
        // must not wait on a lock a stopped process holds. Many ends are
        // written by a detached `__take-in` started here, while we return:
        // reading 1,000 job.json files, forgetting the jobs over the cap and
        // rewriting jobs.json took 70-85 ms of a `kill --all` of 1,000 jobs,
        // and nothing this kill reports depends on it.
        let action = format!("record the end of {} killed job(s)", answered.len());
        let in_background = answered.len() > TAKE_IN_INLINE_UP_TO && self.started_in_background(Errand::TakeIn);
        let written = if in_background { Ok(()) } else { self.registry().take_in(Patience::Brief, &action) };
        let unrecorded = match written {
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
                let supervisor = if supervisor_left.contains(&after.id) {
                    format!("; its supervisor (pid {}) is still exiting", target.supervisor.pid)
                } else {
                    String::new()
                };
                match ended_by_itself(&after, count) {
                    true => format!("{} ended on its own ({}) before the kill; nothing was signalled", after.id, after.status()),
                    false => format!("killed {} ({}): {count} process(es) signalled{exiting}{supervisor}{unrecorded}{kept}", after.id, after.status()),
                }
            };
            // A job whose own exit came first was not killed, and nothing of it was signalled.
            let signalled = !ended_by_itself(&after, count);
            results.push(Ok(KillOutcome { message, signalled, job: after }));
        }
        results.extend(late);
        results
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
        let (count, exiting) = terminate_tree(tree, grace, force, job.paused_at.is_some());
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
        let (count, exiting) = terminate_tree(tree, grace, force, job.paused_at.is_some());
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
    pub(crate) fn note_kill_request(&self, id: &str, grace: Duration, force: bool) -> Result<()> {
        self.write_kill_request(id, KillRequest { grace_ms: grace.as_millis() as u64, force, caller_sweeps: false, caller_signalled_since: None })
    }

    fn write_kill_request(&self, id: &str, request: KillRequest) -> Result<()> {
        let dir = self.home.job_dir(id);
        create_private_dir_all(&dir)?;
        write_json_file(&dir.join(KILL_REQUEST_FILE), &request, false)
    }
}

pub(crate) fn mark_killed(job: &mut Job) -> bool {
    // Over `lost` too (see `JobState::can_become`): its watcher saw the
    // processes end under our signals before we could record the kill (on a
    // full disk it cannot see our note); the end keeps its time.
    let ended_at = job.ended_at().unwrap_or_else(now_ms);
    let changed = job.change_state(JobState::Killed { exit: None, ended_at });
    if changed {
        // Its tree was continued to take the SIGTERM (`terminate_tree`).
        job.paused_at = None;
    }
    changed
}

/// SIGTERM to the job's tree, SIGKILL to what is left after `grace` (at once
/// with `force`); a `paused` tree gets SIGCONT after the SIGTERM, so that it
/// can act on it within the grace period (a stopped process only takes
/// SIGKILL). Returns how many distinct processes were signalled (a
/// process signalled by both passes, or by repeated SIGKILLs while it dies,
/// counts once) and how many of them, or of the tree, still live at the bound.
pub(super) fn terminate_tree(tree: Tree, grace: Duration, force: bool, paused: bool) -> (usize, usize) {
    let mut signalled = Seen::default();
    let mut send = |signal| signalled.add(&tree::signal_tree(tree, signal).sent);
    if !force {
        send(crate::model::signals::SIGTERM);
        if paused {
            tree::signal_tree(tree, crate::model::signals::SIGCONT);
        }
        wait_until(grace, Duration::from_millis(20), || !tree::tree_alive(tree));
    }
    let stubborn_deadline = Instant::now() + Duration::from_secs(2);
    while tree::tree_alive(tree) && Instant::now() < stubborn_deadline {
        send(crate::model::signals::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
    }
    let exiting = signalled.wait_gone(tree, STILL_EXITING_PATIENCE);
    (signalled.len(), exiting)
}

/// The job's own exit decided its outcome (it ended as the kill began,
/// before its supervisor took the request) and nothing of it was signalled.
fn ended_by_itself(job: &Job, signalled: usize) -> bool {
    signalled == 0 && job.status().is_final() && !matches!(job.status(), JobStatus::Killed | JobStatus::Timeout)
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
        use crate::os::sys::MetadataExt;
        let now = std::fs::symlink_metadata(path).ok().and_then(|m| Some((m.ino(), m.modified().ok()?)));
        now.is_some() && std::mem::replace(&mut self.0, now) != now
    }
}

impl Target {
    fn pending(&self) -> bool {
        self.ended.is_none() && !self.late
    }
}

/// How long past its grace period a supervisor may take to record a kill
/// before `kill` acts without it.
const SUPERVISOR_ANSWER: Duration = Duration::from_secs(2);

/// The same for a set of processes; returns (pid, reason) for those that refuse or survive.
pub(crate) fn terminate_processes(targets: &[&ProcessEntry], grace: Duration, force: bool) -> Vec<(u32, String)> {
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
        send(crate::model::signals::SIGTERM, &mut failures);
        wait_until(grace, Duration::from_millis(20), all_gone);
    }
    if !all_gone() {
        send(crate::model::signals::SIGKILL, &mut failures);
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

/// The signal for a job's process outside its supervisor's subtree: SIGKILL
/// once the kill is hard, else the system's polite one, if it has one
/// (`os::sys::polite_stray_signal`).
fn stray_signal(hard: bool) -> Option<i32> {
    if hard { Some(crate::model::signals::SIGKILL) } else { crate::os::sys::polite_stray_signal() }
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
