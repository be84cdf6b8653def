//! The job records: `jobs.json` (the registry) and each job's own
//! `jobs/<id>/job.json`.
//!
//! Every registry update holds an exclusive lock on `jobs.lock` and replaces
//! the file atomically (temp file, fsync, rename), so readers never see half a
//! write and concurrent writers never lose each other's updates. The lock is
//! waited for with a deadline: a holder that makes no progress (stopped,
//! frozen) is named in the error instead of hanging everyone.
//!
//! A job's own job.json is written first and needs no lock: its supervisor
//! writes it when the job starts (with room reserved for the outcome) and when
//! it ends. Readers merge it in, so a job is listed, killable and its outcome
//! kept when the registry cannot be written: a stuck lock, a full disk, a
//! read-only `jobs.json`. The next registry write takes it in.
//!
//! Its rooms: the lock and the naming of its holder (`lock`), writing each
//! job's own job.json and the directories whose record cannot be read
//! (`records`; the files themselves are `store::job_file`'s); files
//! replaced whole are `store::atomic`'s.

use crate::store::config::Config;
use crate::model::ids::validate_job_id;
use crate::model::job::{Job, JobStatus};
use crate::store::deliveries;
use crate::store::index;
use crate::store::paths::{self, Home};
use crate::os::procinfo;
use crate::{now_ms, Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod lock;
mod records;
#[cfg(test)]
mod tests;

pub use crate::store::atomic::{write_json_file, write_temp_beside};
pub use crate::store::job_file::CorruptRecord;
use crate::store::atomic::write_file_atomically;
use crate::store::job_file::{gone_dir_abandoned, read_job_file, read_job_file_stamped};

const FORMAT_VERSION: u32 = 1;


/// How long a best-effort write (from a read, or a supervisor's first
/// registration) waits for the lock in all; what it would record is then
/// left to the next write, which merges it in from job.json.
pub const BRIEF_WAIT: Duration = Duration::from_millis(100);



#[derive(Serialize, Deserialize)]
struct RegistryFile {
    version: u32,
    jobs: Vec<Job>,
}

#[derive(Clone)]
pub struct Registry {
    home: Home,
    max_jobs: usize,
    lock_timeout: Duration,
    /// Hands a folder of forgotten job directories (see `forget_dirs`) to a
    /// background process to delete, when the caller has one to start.
    sweeper: Option<Sweeper>,
}

/// Starts the removal of `jobs/<name>` in the background; false when it could not.
pub type Sweeper = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Up to this many forgotten job directories are deleted by the write that
/// forgot them; more go to a sweeper, off the caller's path: a `kill --all`
/// of 1,000 jobs forgets 800 over the cap, and deleting their 6,400 files
/// took it 2 to 5 s on a 2-core host (an unlink that frees blocks waits for
/// the discard on a `discard`-mounted disk), against 0.2 s for the kill.
const FORGET_INLINE: usize = 16;

/// How long a folder of forgotten job directories may sit untouched before
/// a later sweeper takes it for one a killed sweeper left.
const STALE_FORGOTTEN: std::time::Duration = std::time::Duration::from_secs(3600);

/// How long to wait for the registry lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// As long as the holders change; give up once one holder has kept it
    /// for `registry.lock_timeout_ms`, naming it.
    Full,
    /// At most `BRIEF_WAIT` in all: for writes that may be left to later.
    Brief,
    /// Only if the lock is free now: for writes nobody needs.
    Immediate,
}

/// The least time between two folds of delivery records (see `fold_deliveries`).
const FOLD_GAP: Duration = Duration::from_secs(1);
/// How long a notifier stays for its records to be folded.
pub const FOLD_PATIENCE: Duration = Duration::from_secs(3);

/// Whether a registry write forgets the oldest ended jobs beyond `max_jobs`.
#[derive(PartialEq)]
enum Trim {
    ToCap,
    No,
}

enum Fold {
    Done,
    NotYet(Duration),
}

/// Job directories a registry write moved out of readers' sight (see `Registry::forget_dirs`).
#[derive(Default)]
struct SetAside {
    folder: Option<PathBuf>,
    /// Each directory's place, and where it is now.
    moved: Vec<(PathBuf, PathBuf)>,
}

impl SetAside {
    /// Puts every directory back (the registry still names them).
    fn restore(self) {
        for (from, to) in &self.moved {
            let _ = std::fs::rename(to, from);
        }
        if let Some(folder) = self.folder {
            let _ = std::fs::remove_dir(folder);
        }
    }
}


/// What a registry read found beyond the registry itself.
#[derive(Default)]
struct Merge {
    /// Records dropped because another one named the same job.
    duplicates: usize,
    /// Jobs known only from their job.json (a start whose registration has
    /// not landed yet, or a registry rebuilt).
    adopted: usize,
    /// The job.json files looked at, with their stamps (for the index).
    stamps: index::OwnStamps,
    /// A job the registry names unended has no directory (looked for by readers only).
    vanished: bool,
}

impl Registry {
    pub fn new(home: &Home, max_jobs: usize) -> Registry {
        let lock_timeout = Duration::from_millis(crate::store::config::RegistryConfig::default().lock_timeout_ms);
        Registry { home: home.clone(), max_jobs, lock_timeout, sweeper: None }
    }

    /// With a way to delete forgotten job directories in the background.
    pub fn with_sweeper(mut self, sweeper: Sweeper) -> Registry {
        self.sweeper = Some(sweeper);
        self
    }

    pub fn for_config(home: &Home, config: &Config) -> Registry {
        Registry {
            home: home.clone(),
            max_jobs: config.registry.max_jobs,
            lock_timeout: Duration::from_millis(config.registry.lock_timeout_ms),
            sweeper: None,
        }
    }

    /// Every job, oldest first, without taking the lock (each registry write
    /// is one rename): the registry merged with what only the job directories
    /// know (see `merged`).
    pub fn load(&self) -> Result<Vec<Job>> {
        self.load_at(2)
    }

    /// `load`, reading again up to `rereads` times when a write was
    /// forgetting a job that the `jobs.json` read still names (see below).
    fn load_at(&self, rereads: u8) -> Result<Vec<Job>> {
        let path = self.home.registry_path();
        // Taken before the read: a registry replaced meanwhile is read again next time.
        let stamp = index::Stamp::of(&path);
        if let Some(mut jobs) = index::load(&self.home, stamp, |id| read_job_file(&self.home, id)) {
            if deliveries::lay_over(&self.home, &mut jobs) {
                let _ = self.fold_if_due();
            }
            return Ok(jobs);
        }
        let (jobs, missing) = match read_registry(&path) {
            Ok(jobs) => (jobs, false),
            Err(ReadFailure::Io(e)) => return Err(self.home.explain(Error::io("read registry", path, e))),
            Err(ReadFailure::Missing) => (Vec::new(), true),
            // Moving the bad file aside must happen under the lock. When the
            // lock cannot be had now, the job directories still tell.
            Err(ReadFailure::Corrupt(_)) => match self.update_with(Patience::Brief, "recover the registry", |jobs| jobs.clone()) {
                Ok(jobs) => return Ok(jobs),
                Err(_) => (Vec::new(), true),
            },
        };
        let registry_ids: HashSet<String> = if missing { HashSet::new() } else { jobs.iter().map(|j| j.id.clone()).collect() };
        let (mut jobs, merge) = self.merged(jobs, false);
        if merge.vanished && !missing && rereads > 0 {
            // A job this jobs.json names unended has no directory: a write
            // forgetting it (over the cap) moves it out of sight before it
            // writes jobs.json, and its end may be in its job.json alone, so
            // this read would list it running. Once that write is done, the
            // jobs.json it wrote is read instead. Never by waiting for the
            // lock: a reader polling it starves behind a stream of writers
            // (a list took 95 s so). A directory removed by hand costs a
            // look at a free lock.
            if self.registry_replaced_by_writer(&path, stamp) {
                return self.load_at(rereads - 1);
            }
        }
        // For the next reader: only while nobody writes (a writer writes it too).
        if let Ok(_guard) = self.lock(Patience::Immediate, "index the registry") {
            if index::Stamp::of(&path) == stamp {
                self.write_index(stamp, index::entries(&jobs, &merge.stamps, &registry_ids, settled_for_readers));
            }
        }
        if deliveries::lay_over(&self.home, &mut jobs) {
            // Left by notifiers that gave up waiting for a fold: the next
            // reader, not every one, takes them in.
            let _ = self.fold_if_due();
        }
        if missing && merge.adopted > 0 {
            // Written back when it can be at once; readers do not need it.
            let _ = self.update_with(Patience::Immediate, "rebuild the registry", |_| ());
        }
        Ok(jobs)
    }

    /// Every job the job directories know, oldest first, without reading
    /// `jobs.json`: what a kill of everything goes by when the registry
    /// cannot be read (a newer version's, a directory in its place), so that
    /// it never keeps a job alive.
    pub fn load_job_files_only(&self) -> Vec<Job> {
        self.merged(Vec::new(), false).0
    }

    /// A job's own `jobs/<id>/job.json`, without reading the registry: what
    /// its supervisor or a killer recorded last.
    pub fn own_record(&self, id: &str) -> Option<Job> {
        read_job_file(&self.home, id)
    }

    /// Writes the registry with what the job directories know and it does
    /// not yet (ends recorded in job.json only, new jobs): one write for
    /// many ends (see `KillRequest::caller_sweeps`).
    pub fn take_in(&self, patience: Patience, action: &str) -> Result<()> {
        self.update_with(patience, action, |_| ())
    }

    /// Folds the delivery records gathered in `deliveries/` into the registry
    /// once `mine` (a notifier's last record) is the one to wait for, or any
    /// record with `None`: at most one fold per `FOLD_GAP` (the time since
    /// jobs.json was last written), so that of 1,000 notifiers ending
    /// together the first to find the gap over folds for all the others,
    /// whose records are then gone. Gives up after `patience`: the next
    /// registry write folds what is left, and readers lay it over meanwhile.
    pub fn fold_deliveries(&self, mine: Option<&Path>, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            let waiting = match mine {
                Some(path) => std::fs::symlink_metadata(path).is_ok(),
                None => deliveries::any(&self.home),
            };
            if !waiting || Instant::now() >= deadline {
                return;
            }
            match self.fold_if_due() {
                Fold::Done => return,
                Fold::NotYet(wait) => std::thread::sleep(wait.min(deadline.saturating_duration_since(Instant::now()))),
            }
        }
    }

    /// One fold, if the registry was not written in the last `FOLD_GAP` and
    /// its lock is free now.
    fn fold_if_due(&self) -> Fold {
        let since_written = paths::age(&self.home.registry_path()).unwrap_or(FOLD_GAP);
        if since_written < FOLD_GAP {
            return Fold::NotYet(FOLD_GAP - since_written);
        }
        // Forgets nothing: a `kill --all` still waiting for the ends of the
        // jobs it killed would lose sight of the ones forgotten.
        match self.write(Patience::Immediate, "record notifications", Trim::No, |_| ()) {
            Ok(()) => Fold::Done,
            // Held, most likely by a fold that takes ours in too.
            Err(_) => Fold::NotYet(FOLD_GAP / 4),
        }
    }

    /// Best effort, not fsynced: a lost index is a full read, which writes it
    /// again. Without entries (see `index::entries`), none is left.
    fn write_index(&self, registry: Option<index::Stamp>, entries: Option<Vec<index::Entry>>) {
        match entries.and_then(|entries| index::encode(registry, entries)) {
            Some(bytes) => {
                let _ = write_file_atomically(&index::path(&self.home), &bytes, false);
            }
            None => index::forget(&self.home),
        }
    }

    /// One job as readers see it (`load`'s record of it), read from its own
    /// directory when that tells all, at a cost that does not grow with the
    /// registry: its job.json, with the delivery records laid over. Every
    /// registry change to a job is copied into its job.json (`modify_*`, a
    /// fold's deliveries of an ended job), but for what a fold tells of an
    /// event a running job announced (a `--notify-on` match, an orphan):
    /// such a job is read with the registry. A verdict only the registry
    /// holds (a copy that could not be written) is found by the reconcile
    /// that follows, which records through the registry.
    pub fn view_of(&self, id: &str) -> Result<Job> {
        if let Some(own) = read_job_file(&self.home, id) {
            if own.status().is_final() || own.notification.is_none() {
                let mut one = vec![own];
                deliveries::lay_over(&self.home, &mut one);
                return Ok(one.pop().expect("one job"));
            }
        }
        self.get(id)
    }

    pub fn get(&self, id: &str) -> Result<Job> {
        self.load()?.into_iter().find(|j| j.id == id).ok_or_else(|| Error::UnknownJob(id.to_string()))
    }

    /// Read-modify-write under the lock. `change` sees every job, oldest first.
    pub fn update<T>(&self, change: impl FnOnce(&mut Vec<Job>) -> T) -> Result<T> {
        self.update_with(Patience::Full, "update the registry", change)
    }

    /// As `update`, waiting for the lock as `patience` says; `action` is what
    /// a process that waits for us is told we are doing. A job `change` drops
    /// loses its directory too (its job.json would bring it back otherwise).
    pub fn update_with<T>(
        &self,
        patience: Patience,
        action: &str,
        change: impl FnOnce(&mut Vec<Job>) -> T,
    ) -> Result<T> {
        self.write(patience, action, Trim::ToCap, change)
    }

    fn write<T>(&self, patience: Patience, action: &str, trim: Trim, change: impl FnOnce(&mut Vec<Job>) -> T) -> Result<T> {
        let guard = self.lock(patience, action)?;
        let path = self.home.registry_path();
        let (jobs, moved_aside) = match read_registry(&path) {
            Ok(jobs) => (jobs, None),
            Err(ReadFailure::Io(e)) => return Err(self.home.explain(Error::io("read registry", path, e))),
            Err(ReadFailure::Corrupt(reason)) => (Vec::new(), Some(self.move_aside(&path, reason)?)),
            Err(ReadFailure::Missing) => (Vec::new(), None),
        };
        let (mut jobs, merge) = self.merged(jobs, true);
        if let Some((aside, reason)) = moved_aside {
            tracing::warn!(
                "{} could not be read ({reason}); moved it to {} and rebuilt {} job(s) from the job directories",
                path.display(),
                aside.display(),
                jobs.len()
            );
        }
        if merge.duplicates > 0 {
            tracing::warn!(
                "{} named {} job(s) more than once; kept for each the record that knows most \
                 (an outcome over lost over orphaned over running, then the later end, then the later entry)",
                path.display(),
                merge.duplicates
            );
        }
        let (folded, delivered) = deliveries::fold(&self.home, &mut jobs);
        let before: HashSet<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let result = change(&mut jobs);
        if trim == Trim::ToCap {
            self.evict_over_cap(&mut jobs);
        }
        let kept: HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        let dropped: Vec<&str> = before.iter().map(String::as_str).filter(|id| !kept.contains(id)).collect();
        // Out of readers' sight before the registry forgets them, and back if it cannot.
        let aside = self.forget_dirs(&dropped);
        // As readers will find them: every job this write keeps in jobs.json is in it.
        let written: HashSet<String> = jobs.iter().filter(|j| !kept_in_job_file_only(j)).map(|j| j.id.clone()).collect();
        let entries = index::entries(&jobs, &merge.stamps, &written, settled_for_readers);
        // What the records told of an ended job goes to its job.json too, which
        // `check` reads alone (`view_of`); nothing else writes an ended job's file.
        let delivered: Vec<Job> = jobs.iter().filter(|j| delivered.contains(&j.id) && j.status().is_final()).cloned().collect();
        let jobs: Vec<Job> = jobs.into_iter().filter(|j| !kept_in_job_file_only(j)).collect();
        // Until the index names the new registry, no reader may trust the old one's.
        index::forget(&self.home);
        if let Err(e) = write_atomically(&path, &RegistryFile { version: FORMAT_VERSION, jobs }) {
            aside.restore();
            return Err(self.home.explain(e));
        }
        for job in &delivered {
            self.write_job_copy(job);
        }
        self.write_index(index::Stamp::of(&path), entries);
        // Only once the registry holds what they said (a reader that sees
        // both in between lays a record over itself, which changes nothing).
        for path in folded {
            let _ = std::fs::remove_file(path);
        }
        drop(guard);
        self.delete_forgotten(aside);
        Ok(result)
    }

    /// Moves the directories of jobs `ids` into one hidden folder that no
    /// reader takes for a job (`.gone-<pid>-<random>`), to be deleted once
    /// the registry has forgotten them, or moved back if it could not.
    fn forget_dirs(&self, ids: &[&str]) -> SetAside {
        let mut aside = SetAside::default();
        if ids.is_empty() {
            return aside;
        }
        let Some(folder) = paths::random_hex(4).ok().map(|r| self.home.jobs_dir().join(format!(".gone-{}-{r}", std::process::id()))) else {
            return aside;
        };
        if paths::create_private_dir_all(&folder).is_err() {
            return aside;
        }
        for id in ids {
            let from = self.home.job_dir(id);
            let to = folder.join(id);
            if std::fs::rename(&from, &to).is_ok() {
                // Its pipes are in the home's shared directory, not in the
                // folder: left by a supervisor that was killed, they would
                // outlast it.
                #[cfg(unix)]
                crate::store::pipes::remove_shared(&from);
                aside.moved.push((from, to));
            }
        }
        aside.folder = Some(folder);
        aside
    }

    /// Deletes what `forget_dirs` set aside: here when it is little or no
    /// sweeper can be started, else in the background.
    fn delete_forgotten(&self, aside: SetAside) {
        let Some(folder) = aside.folder else { return };
        let name = folder.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let swept = aside.moved.len() > FORGET_INLINE && self.sweeper.as_ref().is_some_and(|sweep| sweep(name));
        if !swept {
            let _ = std::fs::remove_dir_all(&folder);
        }
    }

    /// The background half of `delete_forgotten`: deletes the folder `name`
    /// of forgotten job directories, if that is what it names.
    pub fn sweep_forgotten(&self, name: &str) -> Result<()> {
        if !name.starts_with(".gone-") || name.contains(['/', '\\']) || name.contains("..") {
            return Err(Error::Usage(format!("`{name}` names no folder of forgotten job directories (.gone-<pid>-<hex>)")));
        }
        let folder = self.home.jobs_dir().join(name);
        let removed = match std::fs::remove_dir_all(&folder) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", folder, e)),
            _ => Ok(()),
        };
        self.sweep_stale_forgotten();
        removed
    }

    /// Deletes what an earlier sweeper left when it was killed midway: a
    /// `.gone-*` folder untouched for `STALE_FORGOTTEN` (every rename into
    /// one and every delete from it touches it, so a live sweep's never is).
    /// Off the writer's path, like the sweep itself.
    fn sweep_stale_forgotten(&self) {
        let Ok(entries) = std::fs::read_dir(self.home.jobs_dir()) else { return };
        for entry in entries.flatten() {
            let stale = entry.file_name().to_str().is_some_and(|n| n.starts_with(".gone-"))
                && entry.metadata().ok().filter(std::fs::Metadata::is_dir).and_then(|m| m.modified().ok())
                    .and_then(|at| at.elapsed().ok())
                    .is_some_and(|age| age > STALE_FORGOTTEN);
            if stale {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Inserts or replaces `job`, and refreshes its copy in `jobs/<id>/job.json`.
    pub fn upsert(&self, job: &Job) -> Result<()> {
        let action = format!("record job {}", job.id);
        self.update_with(Patience::Full, &action, |jobs| {
            match jobs.iter_mut().find(|j| j.id == job.id) {
                Some(slot) => *slot = job.clone(),
                None => jobs.push(job.clone()),
            }
            self.write_job_copy(job);
        })
    }

    /// Adds a job whose job.json its supervisor has just written, if the lock
    /// can be had as `patience` says; until then readers list the job from its
    /// job.json, and any registry write takes it in. Only a start that failed
    /// registers (a running job's start writes its job.json alone).
    pub fn register(&self, job: &Job, patience: Patience) -> Result<()> {
        let action = format!("register job {}", job.id);
        self.update_with(patience, &action, |jobs| match jobs.iter_mut().find(|j| j.id == job.id) {
            Some(slot) => *slot = job.clone(),
            None => jobs.push(job.clone()),
        })
    }

    /// Applies `change` to one job if it exists; returns the job as stored.
    pub fn modify(&self, id: &str, change: impl FnOnce(&mut Job)) -> Result<Job> {
        self.modify_with(Patience::Full, id, change)
    }

    pub fn modify_with(&self, patience: Patience, id: &str, change: impl FnOnce(&mut Job)) -> Result<Job> {
        self.modify_entry(patience, id, true, change)
    }

    /// `modify_with` in jobs.json only, the job's own job.json left alone:
    /// for what its live supervisor has written there already, and may be
    /// writing again at this moment (readiness after a resume), which a
    /// copy of the record read before would undo.
    pub fn modify_registry_only(&self, patience: Patience, id: &str, change: impl FnOnce(&mut Job)) -> Result<Job> {
        self.modify_entry(patience, id, false, change)
    }

    fn modify_entry(&self, patience: Patience, id: &str, copy: bool, change: impl FnOnce(&mut Job)) -> Result<Job> {
        let action = format!("update job {id}");
        let updated = self.update_with(patience, &action, |jobs| {
            jobs.iter_mut().find(|j| j.id == id).map(|job| {
                change(job);
                if copy {
                    self.write_job_copy(job);
                }
                job.clone()
            })
        })?;
        updated.ok_or_else(|| Error::UnknownJob(id.to_string()))
    }

    /// `modify_with` for many jobs in one registry write; returns the jobs
    /// found, as stored (an id not in the registry is left out).
    pub fn modify_many(&self, patience: Patience, ids: &[String], mut change: impl FnMut(&mut Job)) -> Result<Vec<Job>> {
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let action = format!("update {} job(s)", ids.len());
        self.update_with(patience, &action, |jobs| {
            jobs.iter_mut()
                .filter(|j| wanted.contains(j.id.as_str()))
                .map(|job| {
                    change(job);
                    self.write_job_copy(job);
                    job.clone()
                })
                .collect()
        })
    }





    /// Moves the unreadable file aside (never overwriting it); the jobs are
    /// then rebuilt from each job directory's job.json by `merged`.
    fn move_aside(&self, path: &Path, reason: String) -> Result<(PathBuf, String)> {
        let aside = path.with_file_name(format!("jobs.json.corrupt-{}", now_ms()));
        std::fs::rename(path, &aside).map_err(|e| Error::io("move aside corrupt registry", path, e))?;
        Ok((aside, reason))
    }

    /// The registry's jobs, each once, with what only the job directories know:
    /// an outcome that only a job's own job.json kept (its supervisor could
    /// not write the registry, or was killed doing it), and jobs not in the
    /// registry yet. With `writing` (under the lock), leftovers of removals
    /// that were interrupted are cleaned, and `lost` jobs are looked at too:
    /// a `lost` over an outcome in job.json is only in registries written
    /// before job.json came first (today nothing records `lost` while the
    /// supervisor could still write), and reading every lost job's file on
    /// each read would cost more than the next write's repair.
    fn merged(&self, jobs: Vec<Job>, writing: bool) -> (Vec<Job>, Merge) {
        let (mut jobs, duplicates) = dedupe(jobs);
        let mut merge = Merge { duplicates, adopted: 0, stamps: index::OwnStamps::new(), vanished: false };
        let below = if writing { OUTCOME } else { rank_of(JobStatus::Lost) };
        for job in jobs.iter_mut().filter(|j| rank(j) < below) {
            let read = read_job_file_stamped(&self.home, &job.id);
            merge.stamps.insert(job.id.clone(), read.as_ref().map(|(_, stamp)| *stamp));
            if read.is_none() && !writing && std::fs::symlink_metadata(self.home.job_dir(&job.id)).is_err() {
                merge.vanished = true;
            }
            if let Some((mut own, _)) = read {
                // A version that does not know `waits` wrote this entry without it.
                if job.waits.is_none() {
                    job.waits = own.waits.clone();
                }
                if rank(&own) > rank(job) {
                    own.seen_at = own.seen_at.or(job.seen_at);
                    *job = own;
                } else {
                    // Its supervisor records readiness in job.json, without
                    // the lock: for the same state job.json has the last
                    // word (a restart clears it between runs).
                    if job.ready_at.is_none() || job.state == own.state {
                        job.ready_at = own.ready_at;
                    }
                    // And a pause or resume (supervise/pause.rs): job.json has the last word.
                    if job.state == own.state {
                        job.paused_at = own.paused_at;
                        job.paused_ms = own.paused_ms;
                    }
                }
            }
        }
        let known: HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        let mut adopted = Vec::new();
        if let Ok(entries) = std::fs::read_dir(self.home.jobs_dir()) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with(".gone-") {
                    if writing && gone_dir_abandoned(name) {
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                    continue;
                }
                if known.contains(name) || validate_job_id(name).is_err() || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if let Some((own, stamp)) = read_job_file_stamped(&self.home, name) {
                    merge.stamps.insert(own.id.clone(), Some(stamp));
                    adopted.push(own);
                }
            }
        }
        if !adopted.is_empty() {
            merge.adopted = adopted.len();
            jobs.extend(adopted);
            jobs.sort_by_key(|j| j.started_at);
        }
        (jobs, merge)
    }





    /// Drops the oldest ended jobs beyond `max_jobs` ended ones. A job whose
    /// main process ended while some of its processes live on stays. Running,
    /// paused, queued and orphaned jobs do not count: with the cap
    /// counting every job, more running jobs than the cap had each end
    /// forgotten as it was recorded, its outcome never seen.
    fn evict_over_cap(&self, jobs: &mut Vec<Job>) {
        let mut order: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].status().is_final()).collect();
        let mut excess = order.len().saturating_sub(self.max_jobs);
        if excess == 0 {
            return;
        }
        // Oldest end first: by its start, a long job that ended after the
        // cap's worth of short ones was forgotten by the write of its end.
        order.sort_by_key(|&i| jobs[i].ended_at().unwrap_or(jobs[i].started_at));
        let mut evict = vec![false; jobs.len()];
        // One pass over /proc for all candidates that need it, if any does:
        // a job whose supervisor saw everything below it end and left its
        // mark can have only what it recorded left (`Context::reach`), which
        // is read alone. After `kill --all` of 1,000 jobs every one is such,
        // and the pass read the 2,000 or more processes of the rest.
        let rows = std::cell::OnceCell::new();
        let table = std::cell::OnceCell::new();
        for i in order {
            if excess == 0 {
                break;
            }
            let job = &jobs[i];
            let dir = self.home.job_dir(&job.id);
            let recorded = crate::store::procset::load(&dir);
            let done = std::fs::symlink_metadata(dir.join(crate::model::protocol::SUPERVISOR_DONE_FILE)).is_ok_and(|m| m.is_file());
            let lives = if done {
                !crate::os::tree::job_recorded(crate::os::tree::Tree::of(job).with_recorded(&recorded)).0.is_empty()
            } else {
                let table = table.get_or_init(|| crate::os::tree::TableIndex::new(rows.get_or_init(procinfo::table)));
                crate::os::tree::has_live_processes(job, &recorded, table)
            };
            if !lives {
                evict[i] = true;
                excess -= 1;
            }
        }
        let mut index = 0;
        jobs.retain(|_| {
            index += 1;
            !evict[index - 1]
        });
    }
}

/// A registry entry whose job.json readers do not look at (`merged`): it
/// knows the job's outcome, or that it is lost.
fn settled_for_readers(job: &Job) -> bool {
    rank(job) >= rank_of(JobStatus::Lost)
}

/// How much a record knows about how its job ended.
const OUTCOME: u8 = 4;
fn rank(job: &Job) -> u8 {
    rank_of(job.status())
}

fn rank_of(status: JobStatus) -> u8 {
    match status {
        // A queued job's start is news to a registry that still has it queued.
        JobStatus::Queued => 0,
        JobStatus::Running | JobStatus::Paused => 1,
        JobStatus::Orphaned => 2,
        JobStatus::Lost => 3,
        JobStatus::Success | JobStatus::Failed | JobStatus::Killed | JobStatus::Timeout | JobStatus::Skipped => OUTCOME,
    }
}

/// Each job once, in the order first named, with the record that knows most:
/// an outcome over lost over orphaned over running, then the one that ended
/// later, then the later one in the file. Returns how many were dropped.
fn dedupe(jobs: Vec<Job>) -> (Vec<Job>, usize) {
    let mut kept: Vec<Job> = Vec::with_capacity(jobs.len());
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut dropped = 0;
    for job in jobs {
        match index.get(&job.id) {
            Some(&i) => {
                dropped += 1;
                if (rank(&job), job.ended_at()) >= (rank(&kept[i]), kept[i].ended_at()) {
                    kept[i] = job;
                }
            }
            None => {
                index.insert(job.id.clone(), kept.len());
                kept.push(job);
            }
        }
    }
    (kept, dropped)
}














/// Why the registry could not be read: only `Corrupt` means the file itself
/// is bad (and may be moved aside); an I/O error leaves it where it is.
enum ReadFailure {
    Io(std::io::Error),
    Corrupt(String),
    /// No registry file: a fresh home, or one deleted while jobs exist.
    Missing,
}

fn read_registry(path: &Path) -> std::result::Result<Vec<Job>, ReadFailure> {
    let bytes = match paths::read_file(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadFailure::Missing),
        Err(e) => return Err(ReadFailure::Io(e)),
    };
    let file: RegistryFile = serde_json::from_slice(&bytes).map_err(|e| ReadFailure::Corrupt(e.to_string()))?;
    if file.version > FORMAT_VERSION {
        return Err(ReadFailure::Io(std::io::Error::other(format!(
            "written by a newer proc-manager (format {}; this one reads {FORMAT_VERSION})",
            file.version
        ))));
    }
    Ok(file.jobs)
}







fn write_atomically(path: &Path, file: &RegistryFile) -> Result<()> {
    write_json_file(path, file, true)
}

/// Queued and skipped jobs are kept in their own job.json only, never in
/// jobs.json: a registry naming a status an older version does not know is
/// unreadable to it (it would move the file aside, and a supervisor of that
/// version could not record its job's end there). Readers adopt them from
/// their job directories, as any job not in jobs.json.
fn kept_in_job_file_only(job: &Job) -> bool {
    matches!(job.status(), JobStatus::Queued | JobStatus::Skipped)
}
