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
use std::fs::File;
use std::io::Write;
use crate::os::sys::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FORMAT_VERSION: u32 = 1;

/// A job's job.json is written at least this much larger than its record and
/// padded with spaces (valid JSON), so that recording the outcome later can
/// overwrite it in place when no new block can be had (see `write_job_file`).
const JOB_FILE_SLACK: usize = 1024;
const JOB_FILE_BLOCK: usize = 4096;

/// How long a best-effort write (from a read, or a supervisor's first
/// registration) waits for the lock in all; what it would record is then
/// left to the next write, which merges it in from job.json.
pub const BRIEF_WAIT: Duration = Duration::from_millis(100);

/// The lock file holds `<pid> <acquired at, ms> <action>`, padded to this
/// size and rewritten in place, so that naming the holder needs no new block.
const HOLDER_RECORD_BYTES: usize = 256;

/// Temp files of a dead writer are removed once this old; any temp file once
/// `TEMP_ABANDONED` old (its pid may have been reused).
const TEMP_GRACE: Duration = Duration::from_secs(10);
const TEMP_ABANDONED: Duration = Duration::from_secs(3600);

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


/// Held while the registry is read-modified-written; closing the file unlocks it.
struct LockGuard(#[allow(dead_code)] File);

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
        match std::fs::remove_dir_all(&folder) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", folder, e)),
            _ => Ok(()),
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

    /// The copy refreshed along with the registry is best effort: the
    /// registry was just written.
    fn write_job_copy(&self, job: &Job) {
        let dir = self.home.job_dir(&job.id);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            let _ = self.write_job_file(job, false);
        }
    }

    /// Writes the job's own `jobs/<id>/job.json`, no lock needed. The file is
    /// padded with spaces to at least `JOB_FILE_SLACK` more than the record,
    /// in whole blocks; when the atomic replacement cannot be written (a full
    /// disk, a directory we may not create in), the record is written over the
    /// old file in place instead, into blocks it already holds. An outcome is
    /// a few hundred bytes more than the record written at the start, so it
    /// fits. (On a copy-on-write filesystem an overwrite needs new blocks too.)
    pub fn write_job_file(&self, job: &Job, durable: bool) -> Result<()> {
        let path = self.home.job_dir(&job.id).join("job.json");
        let mut bytes = serde_json::to_vec_pretty(job).map_err(|e| Error::Other(e.to_string()))?;
        bytes.push(b'\n');
        let reserved = (bytes.len() + JOB_FILE_SLACK).div_ceil(JOB_FILE_BLOCK) * JOB_FILE_BLOCK;
        match write_file_atomically(&path, &padded(&bytes, reserved), durable) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(self.home.explain(Error::io("write", path, e))),
            Err(e) => overwrite_in_place(&path, &bytes, durable).map_err(|_| self.home.explain(Error::io("write", path, e))),
        }
    }

    /// Takes the lock, writing who holds it and why into the lock file. While
    /// it is held by someone else, waits as `patience` says; the error then
    /// names the holder, its state and command.
    fn lock(&self, patience: Patience, action: &str) -> Result<LockGuard> {
        let path = self.home.lock_path();
        let file = open_lock(&path).map_err(|e| self.home.explain(Error::io("open registry lock", &path, e)))?;
        let started = Instant::now();
        let mut holder: Option<Holder> = None;
        let mut holder_since = started;
        let mut next_look = started;
        let mut pause = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => {
                    write_holder(&file, action);
                    return Ok(LockGuard(file));
                }
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(self.home.explain(Error::io("lock registry", &path, e)));
                }
            }
            let now = Instant::now();
            let held_for = match patience {
                Patience::Immediate => Some(now - started),
                Patience::Brief if now - started >= BRIEF_WAIT => Some(now - started),
                Patience::Brief => None,
                Patience::Full => {
                    // A queue of short holders is progress; one holder that
                    // keeps the lock for the whole timeout is not.
                    if now >= next_look {
                        // The record each holder writes on taking the lock,
                        // not /proc/locks: reading that takes the kernel's
                        // file-lock rwsem for writing, which stalls every
                        // flock on the machine; 1,000 supervisors ending at
                        // once (a kill --all) each reading it every 50 ms
                        // held a 2-core host at load 2,000 for 40 minutes.
                        let seen = Holder::record_of(&file);
                        if seen != holder {
                            holder = seen;
                            holder_since = now;
                        }
                        next_look = now + Duration::from_millis(50);
                    }
                    (now - holder_since >= self.lock_timeout).then(|| now - holder_since)
                }
            };
            if let Some(held_for) = held_for {
                return Err(Error::Busy(self.busy_message(&file, &path, held_for, patience)));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    fn busy_message(&self, file: &File, path: &Path, waited: Duration, patience: Patience) -> String {
        let seconds = format!("{:.1} s", waited.as_secs_f64());
        // Only a caller that waited is told who by /proc/locks: reading it
        // stalls every flock on the machine, and many callers that try once
        // (1,000 notifiers folding their records) would each read it.
        let holder = match patience {
            Patience::Immediate => Holder::record_of(file),
            Patience::Full | Patience::Brief => Holder::read(file, path),
        };
        let who = holder.as_ref().map_or_else(|| "another process".to_string(), Holder::describe);
        let pid = holder.and_then(|h| h.pid()).map_or_else(|| "<pid>".to_string(), |p| p.to_string());
        let setting = match patience {
            Patience::Full => format!(
                "; the wait is registry.lock_timeout_ms ({} ms) in config.json",
                self.lock_timeout.as_millis()
            ),
            Patience::Brief | Patience::Immediate => String::new(),
        };
        format!(
            "the job registry is locked: {who}, has held {} for {seconds} while we waited; every prune and \
             recorded change waits for it. If it is stuck, resume it (kill -CONT {pid}) or end it{setting}",
            path.display()
        )
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
        let mut merge = Merge { duplicates, adopted: 0, stamps: index::OwnStamps::new() };
        let below = if writing { OUTCOME } else { rank_of(JobStatus::Lost) };
        for job in jobs.iter_mut().filter(|j| rank(j) < below) {
            let read = read_job_file_stamped(&self.home, &job.id);
            merge.stamps.insert(job.id.clone(), read.as_ref().map(|(_, stamp)| *stamp));
            if let Some((mut own, _)) = read {
                // A version that does not know `waits` wrote this entry without it.
                if job.waits.is_none() {
                    job.waits = own.waits.clone();
                }
                if rank(&own) > rank(job) {
                    own.seen_at = own.seen_at.or(job.seen_at);
                    *job = own;
                } else {
                    // Its supervisor records readiness in job.json, without the lock.
                    if job.ready_at.is_none() {
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

    /// Job directories that no job in the registry names and whose job.json
    /// cannot be read as a record of that job (a queued job lives in its
    /// job.json alone: unreadable, it would vanish with its spec.json, the
    /// submitter's whole environment, left behind). A directory without a
    /// job.json is a job being created (its spec.json comes first).
    pub fn corrupt_records(&self) -> Result<Vec<CorruptRecord>> {
        let known: HashSet<String> = self.load()?.into_iter().map(|j| j.id).collect();
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.home.jobs_dir()) else { return Ok(found) };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str() else { continue };
            if known.contains(id) || validate_job_id(id).is_err() || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            found.extend(corrupt_record(&self.home, id));
        }
        found.sort_by(|a, b| (a.modified_ms, &a.id).cmp(&(b.modified_ms, &b.id)));
        Ok(found)
    }

    /// The corrupt record of job `id` (see `corrupt_records`), if that is what it has.
    pub fn corrupt_record(&self, id: &str) -> Option<CorruptRecord> {
        validate_job_id(id).ok()?;
        let record = corrupt_record(&self.home, id)?;
        // A job the registry knows is that job, whatever its job.json says.
        match self.get(id) {
            Err(Error::UnknownJob(_)) => Some(record),
            _ => None,
        }
    }

    /// Deletes the directory of job `id` (its spec.json with it) if its
    /// record is still corrupt and still no job of the registry's, looked at
    /// under the lock so that a job being recorded is never taken. True when
    /// it was removed.
    pub fn remove_corrupt(&self, id: &str) -> Result<bool> {
        validate_job_id(id)?;
        let action = format!("remove the corrupt record of {id}");
        let aside = self.update_with(Patience::Full, &action, |jobs| {
            if jobs.iter().any(|j| j.id == id) || !corrupt_record(&self.home, id).is_some_and(|r| r.removable) {
                return Ok(None);
            }
            // Said, never taken for "not corrupt": a caller would look again forever.
            let dir = self.home.job_dir(id);
            self.set_aside(id).map(Some).ok_or_else(|| Error::Other(format!("cannot move {} aside to remove it", dir.display())))
        })??;
        let Some((_, to)) = aside else { return Ok(false) };
        std::fs::remove_dir_all(&to).map_err(|e| Error::io("remove", to, e))?;
        Ok(true)
    }

    /// Renames a job's directory to a hidden name that no reader takes for a job.
    fn set_aside(&self, id: &str) -> Option<(PathBuf, PathBuf)> {
        let from = self.home.job_dir(id);
        let to = self.home.jobs_dir().join(format!(".gone-{}-{}-{id}", std::process::id(), paths::random_hex(4).ok()?));
        std::fs::rename(&from, &to).ok().map(|()| (from, to))
    }

    /// Drops the oldest finished jobs beyond `max_jobs`. A job whose main process
    /// ended while some of its processes live on stays.
    fn evict_over_cap(&self, jobs: &mut Vec<Job>) {
        let mut excess = jobs.len().saturating_sub(self.max_jobs);
        if excess == 0 {
            return;
        }
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| jobs[i].started_at);
        order.retain(|&i| jobs[i].status().is_final());
        if order.is_empty() {
            return;
        }
        let mut evict = vec![false; jobs.len()];
        // One pass over /proc for all candidates.
        let rows = procinfo::table();
        let live = crate::os::tree::TableIndex::new(&rows);
        for i in order {
            if excess == 0 {
                break;
            }
            let job = &jobs[i];
            let recorded = crate::store::procset::load(&self.home.job_dir(&job.id));
            if !crate::os::tree::has_live_processes(job, &recorded, &live) {
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

/// A job directory whose job.json cannot be read as its job's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    pub id: String,
    /// The job.json that could not be read.
    pub file: PathBuf,
    /// Why: the parser's error, or the id it names instead.
    pub reason: String,
    /// When the file was last written (ms since the epoch): its age for `prune`.
    pub modified_ms: u64,
    /// It is garbage for sure (bytes that are no JSON, a record of another
    /// job, a file another user owns or a symlink), so `kill` and `prune`
    /// may delete its directory. Otherwise it may be a good record this
    /// version cannot read (a newer version's) or a read that failed for a
    /// moment (EMFILE, EIO): said, never deleted.
    pub removable: bool,
}

impl CorruptRecord {
    /// Said by `list`, `check` and every verb that names the job.
    pub fn describe(&self) -> String {
        if !self.removable {
            return format!(
                "job {} cannot be read: its record {} ({}); it is not run, and not removed: it may be a \
                 newer version's record or a read that failed for now; look at the file",
                self.id,
                self.file.display(),
                self.reason
            );
        }
        format!(
            "job {} is corrupt: its record {} cannot be read ({}); it is not run. \
             `run-bg kill {}` or `run-bg prune` removes its directory",
            self.id,
            self.file.display(),
            self.reason,
            self.id
        )
    }
}

/// Job `id`'s directory, if it holds a job.json that is not a record of `id`.
fn corrupt_record(home: &Home, id: &str) -> Option<CorruptRecord> {
    let dir = home.job_dir(id);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let file = dir.join("job.json");
    let bytes = match paths::read_file(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            // Another user's file (refused by `open_read`) or a symlink: not ours.
            let meta = std::fs::symlink_metadata(&file).ok();
            let foreign = e.kind() == std::io::ErrorKind::PermissionDenied
                && meta.as_ref().is_some_and(|m| crate::os::sys::MetadataExt::uid(m) != procinfo::euid());
            let symlink = meta.is_some_and(|m| m.file_type().is_symlink());
            return Some(corrupt(id, file, e.to_string(), foreign || symlink));
        }
    };
    let (reason, removable) = match serde_json::from_slice::<Job>(&bytes) {
        Ok(job) if job.id == id => return None,
        Ok(job) => (format!("it names job `{}`", crate::model::text::visible(&job.id)), true),
        Err(e) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Err(_) => (e.to_string(), true),
            // JSON this version does not read as a record: a newer one's, unless it names another job.
            Ok(value) => match value.get("id").and_then(|v| v.as_str()) {
                Some(other) if other != id => (format!("it names job `{}`", crate::model::text::visible(other)), true),
                _ => (e.to_string(), false),
            },
        },
    };
    Some(corrupt(id, file, reason, removable))
}

fn corrupt(id: &str, file: PathBuf, reason: String, removable: bool) -> CorruptRecord {
    let modified_ms = std::fs::symlink_metadata(&file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    CorruptRecord { id: id.to_string(), file, reason, modified_ms, removable }
}

/// A job's own record, if its directory holds one naming it. Never through a
/// symlink, for the directory or the file.
fn read_job_file(home: &Home, id: &str) -> Option<Job> {
    read_job_file_stamped(home, id).map(|(job, _)| job)
}

/// `read_job_file`, with the stamp of the file read (for the index).
fn read_job_file_stamped(home: &Home, id: &str) -> Option<(Job, index::Stamp)> {
    let dir = home.job_dir(id);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let path = dir.join("job.json");
    let read = paths::open_read(&path).and_then(|mut file| {
        use std::io::Read;
        let stamp = index::Stamp::of_metadata(&file.metadata()?);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok((bytes, stamp))
    });
    let (bytes, stamp) = match read {
        Ok(read) => read,
        Err(e) => {
            // Planted by someone else: said, never taken for a job (nor started, if queued).
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                tracing::warn!("ignoring job {id}: {}: {e}", home.shown(&path).display());
            }
            return None;
        }
    };
    let job: Job = serde_json::from_slice(&bytes).ok()?;
    (job.id == id).then_some((job, stamp))
}

/// `.gone-<pid>-<random>-<id>`: left by a removal whose process died before it finished.
fn gone_dir_abandoned(name: &str) -> bool {
    let pid = name.strip_prefix(".gone-").and_then(|rest| rest.split('-').next()).and_then(|p| p.parse::<u32>().ok());
    pid.is_none_or(|pid| !procinfo::pid_alive(pid))
}

fn open_lock(path: &Path) -> std::io::Result<File> {
    let open = |write: bool| {
        let mut options = paths::options_nofollow();
        options.read(true);
        if write {
            options.write(true).create(true).truncate(false).mode(0o600);
        }
        options.open(path).map_err(paths::no_symlinks)
    };
    match open(true) {
        // A read-only home: the lock still orders readers that recover; writes fail later, each with its own error.
        Err(e) if matches!(e.raw_os_error(), Some(crate::os::sys::errno::EROFS) | Some(crate::os::sys::errno::EACCES)) => open(false).map_err(|_| e),
        other => other,
    }
}

fn write_holder(file: &File, action: &str) {
    let mut record = format!("{} {} {}", std::process::id(), now_ms(), action.replace('\n', " "));
    if record.len() >= HOLDER_RECORD_BYTES {
        let mut cut = HOLDER_RECORD_BYTES - 1;
        while !record.is_char_boundary(cut) {
            cut -= 1;
        }
        record.truncate(cut);
    }
    let bytes = padded(record.as_bytes(), HOLDER_RECORD_BYTES);
    // Best effort: it only helps name the holder to whoever waits.
    let _ = file.write_all_at(&bytes, 0);
}

/// Who holds the lock: the pid from the kernel's lock table, and what it
/// wrote into the lock file when that record is its own.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    pid: Option<u32>,
    record: String,
}

impl Holder {
    /// The holder as the kernel and its record name it: for the message
    /// given once a wait is over.
    fn read(file: &File, path: &Path) -> Option<Holder> {
        let record = Holder::record_of(file).map(|h| h.record).unwrap_or_default();
        let pid = crate::os::platform::flock_holder(path);
        (pid.is_some() || !record.is_empty()).then_some(Holder { pid, record })
    }

    /// The holder as its record names it (each holder writes `<pid> <taken
    /// at, ms> <action>` on taking the lock, so a new holder is a new record).
    fn record_of(file: &File) -> Option<Holder> {
        let mut buf = [0u8; HOLDER_RECORD_BYTES];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        let record = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        (!record.is_empty()).then_some(Holder { pid: None, record })
    }

    fn written(&self) -> (Option<u32>, Option<&str>) {
        let mut fields = self.record.splitn(3, ' ');
        (fields.next().and_then(|p| p.parse::<u32>().ok()), fields.nth(1))
    }

    /// Without the kernel's word (not Linux), the record's pid is all there is.
    fn pid(&self) -> Option<u32> {
        self.pid.or(self.written().0)
    }

    /// `pid 4242 (run-bg prune), to update the registry, stopped (SIGSTOP or job control)`
    fn describe(&self) -> String {
        let Some(pid) = self.pid() else { return "another process".to_string() };
        let (written_pid, action) = self.written();
        let mut text = format!("pid {pid}");
        if let Some(command) = process_command(pid) {
            text.push_str(&format!(" ({command})"));
        }
        if let (Some(action), true) = (action, written_pid == Some(pid)) {
            text.push_str(&format!(", to {action}"));
        }
        if let Some(state) = process_state(pid) {
            text.push_str(&format!(", {state}"));
        }
        text
    }
}

fn process_command(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> =
        raw.split(|&b| b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    let line = words.join(" ");
    (!line.is_empty()).then(|| crate::model::text::cut(&line, 80))
}

fn process_state(pid: u32) -> Option<&'static str> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.get(stat.rfind(')')? + 2..)?.chars().next()?;
    Some(match state {
        'R' => "running",
        'S' | 'I' => "sleeping",
        'D' => "waiting on a disk or network filesystem",
        'T' => "stopped (SIGSTOP or job control)",
        't' => "stopped by a debugger",
        'Z' => "a zombie",
        _ => return None,
    })
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

/// `bytes` (ending in a newline) padded with spaces to `len`, newline last.
fn padded(bytes: &[u8], len: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if len > out.len() {
        out.resize(len - 1, b' ');
        out.push(b'\n');
    }
    out
}

/// Writes `bytes` over the start of an existing file without truncating it:
/// no new block is needed when it fits. The rest is blanked with spaces.
fn overwrite_in_place(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let file = paths::open_write(path)?;
    let len = file.metadata()?.len() as usize;
    if len < bytes.len() {
        return Err(std::io::Error::other("the record outgrew the room reserved for it"));
    }
    file.write_all_at(&padded(bytes, len), 0)?;
    if durable {
        file.sync_data()?;
    }
    Ok(())
}

/// Temp file in the same directory, written, optionally fsynced, renamed over `path`.
pub fn write_json_file<T: Serialize>(path: &Path, value: &T, durable: bool) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Other(e.to_string()))?;
    bytes.push(b'\n');
    write_file_atomically(path, &bytes, durable).map_err(|e| Error::io("write", path, e))
}

/// The temp file gets an unpredictable name and is created exclusively, never
/// through a symlink (`O_CREAT|O_EXCL|O_NOFOLLOW`), so nothing planted at a
/// name we might use is ever written through. The rename replaces a symlink
/// at `path` itself, not what it points to. Temp files that writers which
/// died left behind are removed.
fn write_file_atomically(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let prefix = format!(".{name}.tmp-");
    let tmp = dir.join(format!("{prefix}{}-{}", std::process::id(), paths::random_hex(8)?));
    let mut file = paths::options_nofollow().write(true).create_new(true).mode(0o600).open(&tmp)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| if durable { file.sync_all() } else { Ok(()) })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    } else {
        remove_stale_temps(dir, &prefix);
    }
    written
}

/// A new file of `bytes` beside `path`, named as `write_file_atomically`'s
/// temp files are (so that it is cleaned the same way should we die), and
/// left there for the caller to link elsewhere and remove: one file whose
/// links stand for many, where each new file costs an inode.
pub fn write_temp_beside(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), paths::random_hex(8)?));
    let mut file = paths::options_nofollow().write(true).create_new(true).mode(0o600).open(&tmp)?;
    if let Err(e) = file.write_all(bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// `<prefix><pid>-<suffix>` files whose writer is gone (or that are very old).
fn remove_stale_temps(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else { continue };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let age = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        let writer_gone = pid.is_none_or(|pid| !procinfo::pid_alive(pid));
        if age >= TEMP_ABANDONED || (age >= TEMP_GRACE && writer_gone) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn write_atomically(path: &Path, file: &RegistryFile) -> Result<()> {
    write_json_file(path, file, true)
}

impl Registry {
    /// A job's own job.json, as its supervisor last wrote it.
    pub fn job_file(&self, id: &str) -> Option<Job> {
        read_job_file(&self.home, id)
    }
}

/// Queued and skipped jobs are kept in their own job.json only, never in
/// jobs.json: a registry naming a status an older version does not know is
/// unreadable to it (it would move the file aside, and a supervisor of that
/// version could not record its job's end there). Readers adopt them from
/// their job directories, as any job not in jobs.json.
fn kept_in_job_file_only(job: &Job) -> bool {
    matches!(job.status(), JobStatus::Queued | JobStatus::Skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{JobState, JobStatus, ProcessIdentity};
    use crate::store::schedule::*;

    /// A job of `status` that started at `started_at` and, if it ended, ended then.
    fn job(id: &str, status: JobStatus, started_at: u64) -> Job {
        let mut job = crate::model::job::sample_job(status);
        (job.id, job.label, job.argv, job.command, job.cwd) = (id.into(), id.into(), vec!["true".into()], "true".into(), "/".into());
        (job.main, job.supervisor, job.started_at, job.log_path) = (None, None, started_at, Default::default());
        job.state = ended_at(job.state, started_at);
        job
    }

    /// `state` with its end (if it has one) at `at`.
    fn ended_at(state: JobState, at: u64) -> JobState {
        match state {
            JobState::Exited { code, .. } => JobState::Exited { code, ended_at: at },
            JobState::Killed { exit, .. } => JobState::Killed { exit, ended_at: at },
            JobState::TimedOut { exit, .. } => JobState::TimedOut { exit, ended_at: at },
            JobState::Lost { reason, .. } => JobState::Lost { reason, ended_at: at },
            JobState::Signalled { signal, .. } => JobState::Signalled { signal, ended_at: at },
            JobState::FailedToStart { error, .. } => JobState::FailedToStart { error, ended_at: at },
            unended => unended,
        }
    }

    fn home() -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home")).unwrap();
        (dir, home)
    }

    #[test]
    fn concurrent_updates_are_not_lost() {
        let (_dir, home) = home();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let home = home.clone();
                std::thread::spawn(move || {
                    let registry = Registry::new(&home, 1000);
                    for i in 0..10 {
                        registry.upsert(&job(&format!("t{t}-{i}"), JobStatus::Running, 1)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(Registry::new(&home, 1000).load().unwrap().len(), 80);
    }

    #[test]
    fn cap_evicts_oldest_finished_and_never_running() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 3);
        for (id, status, at) in [
            ("run-old", JobStatus::Running, 1),
            ("done-old", JobStatus::Success, 2),
            ("done-mid", JobStatus::Failed, 3),
            ("done-new", JobStatus::Success, 4),
        ] {
            std::fs::create_dir_all(home.job_dir(id)).unwrap();
            registry.upsert(&job(id, status, at)).unwrap();
        }
        let ids: Vec<String> = registry.load().unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(ids, vec!["run-old", "done-mid", "done-new"]);
        assert!(!home.job_dir("done-old").exists(), "evicted job's directory is deleted");
        assert!(home.job_dir("run-old").exists());
    }

    #[test]
    fn finished_job_whose_processes_live_on_is_kept() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 1);
        let mut daemon = crate::os::sys::waiting_command()
            .env(crate::model::protocol::JOB_COOKIE, "lingering")
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !procinfo::live_process_counts().contains_key("lingering") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        registry.upsert(&job("lingering", JobStatus::Success, 1)).unwrap();
        registry.upsert(&job("newer", JobStatus::Success, 2)).unwrap();
        let ids: Vec<String> = registry.load().unwrap().into_iter().map(|j| j.id).collect();
        let _ = daemon.kill();
        let _ = daemon.wait();
        assert_eq!(ids, vec!["lingering"]);
    }

    #[test]
    fn corrupt_registry_is_moved_aside_and_rebuilt_from_job_copies() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        let mut running = job("keep-me", JobStatus::Running, 5);
        running.main = Some(ProcessIdentity::from_stat(42, 7));
        std::fs::create_dir_all(home.job_dir("keep-me")).unwrap();
        registry.upsert(&running).unwrap();
        std::fs::write(home.registry_path(), b"{\"version\":1,\"jobs\":[{trunc").unwrap();

        let jobs = registry.load().unwrap();
        assert_eq!(jobs, vec![running]);
        let aside: Vec<_> = std::fs::read_dir(&home.root)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("jobs.json.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1);
        assert_eq!(std::fs::read(aside[0].path()).unwrap(), b"{\"version\":1,\"jobs\":[{trunc");
    }

    #[test]
    fn an_unreadable_job_file_of_a_job_the_registry_does_not_hold_is_a_corrupt_record_until_removed() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        let mut known = job("known-1", JobStatus::Running, 5);
        known.main = Some(ProcessIdentity::from_stat(42, 7));
        std::fs::create_dir_all(home.job_dir("known-1")).unwrap();
        registry.upsert(&known).unwrap();
        // The registry's entry stands for a job it holds, whatever its job.json says.
        std::fs::write(home.job_dir("known-1").join("job.json"), b"{trunc").unwrap();
        // Being created: its spec.json comes before its job.json.
        std::fs::create_dir_all(home.job_dir("new-2")).unwrap();
        std::fs::write(home.job_dir("new-2").join("spec.json"), b"{}").unwrap();
        for (id, content) in [("bad-3", &b"{\"id\": \"bad-3\", \"status\": \"queu"[..]), ("other-4", &b""[..])] {
            std::fs::create_dir_all(home.job_dir(id)).unwrap();
            std::fs::write(home.job_dir(id).join("spec.json"), b"{}").unwrap();
            std::fs::write(home.job_dir(id).join("job.json"), content).unwrap();
        }
        let found = registry.corrupt_records().unwrap();
        let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids.len(), 2, "{found:?}");
        assert!(ids.contains(&"bad-3") && ids.contains(&"other-4"), "{found:?}");
        let bad = registry.corrupt_record("bad-3").unwrap();
        assert_eq!(bad.file, home.job_dir("bad-3").join("job.json"));
        assert!(bad.describe().starts_with("job bad-3 is corrupt: its record "), "{}", bad.describe());
        assert_eq!(registry.corrupt_record("known-1"), None);
        assert_eq!(registry.corrupt_record("new-2"), None);
        assert!(registry.remove_corrupt("bad-3").unwrap());
        assert!(!home.job_dir("bad-3").exists(), "its directory, spec.json with it, is gone");
        assert!(!registry.remove_corrupt("known-1").unwrap(), "a job the registry holds is never taken");
        assert!(!registry.remove_corrupt("new-2").unwrap(), "nor one being created");
        assert!(home.job_dir("known-1").exists() && home.job_dir("new-2").exists());
    }

    #[test]
    fn a_job_file_that_is_json_but_no_record_this_version_reads_is_said_but_never_removed() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        let mut newer = serde_json::to_value(job("newer-5", JobStatus::Queued, 5)).unwrap();
        newer["status"] = "hibernating".into();
        let mut other = newer.clone();
        other["id"] = "someone-6".into();
        for (id, record) in [("newer-5", &newer), ("named-7", &other)] {
            std::fs::create_dir_all(home.job_dir(id)).unwrap();
            std::fs::write(home.job_dir(id).join("spec.json"), b"{}").unwrap();
            std::fs::write(home.job_dir(id).join("job.json"), serde_json::to_vec(record).unwrap()).unwrap();
        }
        // A newer version's record (or a read that failed for now) may be good: kept.
        let unknown = registry.corrupt_record("newer-5").expect("said");
        assert!(!unknown.removable);
        assert!(unknown.describe().contains("not removed"), "{}", unknown.describe());
        assert!(!registry.remove_corrupt("newer-5").unwrap());
        assert!(home.job_dir("newer-5").join("spec.json").exists());
        // One naming another job is not this job's, whatever else it holds.
        let named = registry.corrupt_record("named-7").expect("said");
        assert!(named.removable && named.reason.contains("someone-6"), "{named:?}");
        assert!(registry.remove_corrupt("named-7").unwrap());
    }

    #[test]
    fn a_deleted_registry_is_rebuilt_from_job_copies_but_a_fresh_home_starts_empty() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        std::fs::create_dir_all(home.job_dir("first")).unwrap();
        assert_eq!(registry.load().unwrap(), vec![], "a job directory without its record yet is no registry");
        let running = job("first", JobStatus::Running, 5);
        registry.upsert(&running).unwrap();
        std::fs::remove_file(home.registry_path()).unwrap();

        assert_eq!(registry.load().unwrap(), vec![running.clone()]);
        assert!(home.registry_path().exists(), "written back");
        assert_eq!(registry.get("first").unwrap(), running);
    }

    #[test]
    fn modify_unknown_job_is_an_error_and_changes_nothing() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        registry.upsert(&job("a", JobStatus::Running, 1)).unwrap();
        let before = std::fs::read(home.registry_path()).unwrap();
        assert!(matches!(registry.modify("b", |j| j.state = JobState::Killed { exit: None, ended_at: 1 }), Err(Error::UnknownJob(_))));
        assert_eq!(registry.load().unwrap().len(), 1);
        assert_eq!(std::fs::read(home.registry_path()).unwrap().len(), before.len());
    }

    /// What another user could plant before: symlinks at the predictable temp
    /// names `.jobs.json.tmp-<pid>-<n>` made every registry write go through
    /// them into a file of their choosing.
    #[cfg(unix)]
    #[test]
    fn symlinks_planted_at_temp_names_are_never_written_through() {
        let (dir, home) = home();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious\n").unwrap();
        for n in 0..3000 {
            let name = format!(".jobs.json.tmp-{}-{n}", std::process::id());
            std::os::unix::fs::symlink(&victim, home.root.join(name)).unwrap();
        }
        let registry = Registry::new(&home, 10);
        std::fs::create_dir_all(home.job_dir("a")).unwrap();
        registry.upsert(&job("a", JobStatus::Running, 1)).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
        assert!(!std::fs::symlink_metadata(home.registry_path()).unwrap().file_type().is_symlink());
        assert_eq!(registry.load().unwrap().len(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_planted_in_the_home_are_refused_not_followed() {
        let (dir, home) = home();
        let registry = Registry::new(&home, 10);
        // Records planted elsewhere are never read as ours.
        let planted = dir.path().join("planted.json");
        std::fs::write(&planted, serde_json::to_vec(&RegistryFile { version: 1, jobs: vec![job("planted", JobStatus::Running, 1)] }).unwrap()).unwrap();
        std::os::unix::fs::symlink(&planted, home.registry_path()).unwrap();
        let err = registry.load().expect_err("jobs.json as a symlink").to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let err = registry.upsert(&job("a", JobStatus::Running, 1)).expect_err("jobs.json as a symlink").to_string();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_file(home.registry_path()).unwrap();

        // The lock is never created or opened through a symlink either.
        let target = dir.path().join("created-through-the-lock");
        let _ = std::fs::remove_file(home.lock_path());
        std::os::unix::fs::symlink(&target, home.lock_path()).unwrap();
        let err = registry.upsert(&job("a", JobStatus::Running, 1)).expect_err("jobs.lock as a symlink").to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!target.exists());
        std::fs::remove_file(home.lock_path()).unwrap();

        // A job's record planted as a symlink is not taken into a rebuilt registry.
        std::fs::create_dir_all(home.job_dir("real")).unwrap();
        registry.upsert(&job("real", JobStatus::Success, 2)).unwrap();
        std::fs::create_dir_all(home.job_dir("planted")).unwrap();
        let planted_job = dir.path().join("planted-job.json");
        std::fs::write(&planted_job, serde_json::to_vec(&job("planted", JobStatus::Running, 3)).unwrap()).unwrap();
        std::os::unix::fs::symlink(&planted_job, home.job_dir("planted").join("job.json")).unwrap();
        std::fs::write(home.registry_path(), b"{broken").unwrap();
        let ids: Vec<String> = registry.load().unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(ids, vec!["real"]);
    }

    /// A hand-edited registry may name a job twice: it is listed once, with the
    /// record that knows most (an outcome over lost over orphaned over running,
    /// then the later end, then the later entry in the file).
    #[test]
    fn duplicate_ids_are_listed_once_keeping_the_record_that_knows_most() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        let running = job("dup", JobStatus::Running, 5);
        let mut failed = job("dup", JobStatus::Failed, 5);
        failed.state = JobState::Exited { code: 3, ended_at: 9 };
        let mut lost = job("dup", JobStatus::Lost, 5);
        lost.state = JobState::Lost { reason: None, ended_at: 10 };
        let mut first_end = job("twice", JobStatus::Success, 6);
        first_end.state = JobState::Exited { code: 0, ended_at: 7 };
        let mut later_end = first_end.clone();
        later_end.state = JobState::Exited { code: 0, ended_at: 8 };
        let file = RegistryFile {
            version: 1,
            jobs: vec![running, failed.clone(), lost, later_end.clone(), first_end, job("other", JobStatus::Running, 7)],
        };
        std::fs::write(home.registry_path(), serde_json::to_vec(&file).unwrap()).unwrap();
        let jobs = registry.load().unwrap();
        let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, vec!["dup", "twice", "other"]);
        assert_eq!(jobs[0], failed);
        assert_eq!(jobs[1], later_end);
        // The next write stores each job once.
        registry.modify("other", |j| j.owner = Some("me".into())).unwrap();
        let stored: RegistryFile = serde_json::from_slice(&std::fs::read(home.registry_path()).unwrap()).unwrap();
        assert_eq!(stored.jobs.len(), 3);
    }

    /// The state a supervisor killed while recording the end leaves: the job's
    /// own job.json holds the outcome, the registry still says running (or a
    /// later look made it lost), and a temp file of the dead writer remains.
    #[test]
    fn an_outcome_kept_in_job_json_wins_and_stale_temp_files_go() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        for (id, registry_status) in [("was-running", JobStatus::Running), ("was-lost", JobStatus::Lost)] {
            std::fs::create_dir_all(home.job_dir(id)).unwrap();
            let mut ended = job(id, JobStatus::Failed, 5);
            ended.state = JobState::Exited { code: 3, ended_at: 50 };
            registry.upsert(&ended).unwrap();
            let mut stale = ended.clone();
            stale.state = match registry_status {
                JobStatus::Lost => JobState::Lost { reason: None, ended_at: 60 },
                _ => JobState::Running,
            };
            // Only the registry loses it.
            let mut file: RegistryFile = serde_json::from_slice(&std::fs::read(home.registry_path()).unwrap()).unwrap();
            *file.jobs.iter_mut().find(|j| j.id == id).unwrap() = stale;
            std::fs::write(home.registry_path(), serde_json::to_vec(&file).unwrap()).unwrap();
        }
        let mut dead = crate::os::sys::quick_command().spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let stale_temp = home.root.join(format!(".jobs.json.tmp-{dead_pid}-0"));
        std::fs::write(&stale_temp, b"{\"version\":1,\"jo").unwrap();
        let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3700);
        std::fs::File::options().write(true).open(&stale_temp).unwrap().set_modified(an_hour_ago).unwrap();

        let running = registry.get("was-running").unwrap();
        assert_eq!((running.status(), running.exit_code(), running.ended_at()), (JobStatus::Failed, Some(3), Some(50)));
        // A lost one (only registries written before job.json came first have
        // it) is repaired by the next registry write.
        registry.upsert(&job("next", JobStatus::Running, 9)).unwrap();
        for job in registry.load().unwrap().into_iter().filter(|j| j.id.starts_with("was-")) {
            assert_eq!((job.status(), job.exit_code(), job.ended_at()), (JobStatus::Failed, Some(3), Some(50)), "{}", job.id);
        }
        let stored: RegistryFile = serde_json::from_slice(&std::fs::read(home.registry_path()).unwrap()).unwrap();
        assert!(stored.jobs.iter().filter(|j| j.id.starts_with("was-")).all(|j| j.exit_code() == Some(3)));
        assert!(!stale_temp.exists(), "the dead writer's temp file is cleaned");
    }

    /// A job whose supervisor wrote its job.json but could not add it to the
    /// registry (held lock, full disk) is listed and can be changed.
    #[test]
    fn a_job_only_in_its_job_json_is_listed_and_can_be_changed() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        std::fs::create_dir_all(home.job_dir("known")).unwrap();
        registry.upsert(&job("known", JobStatus::Running, 1)).unwrap();
        std::fs::create_dir_all(home.job_dir("pending")).unwrap();
        std::fs::write(home.job_dir("pending").join("job.json"), serde_json::to_vec(&job("pending", JobStatus::Running, 2)).unwrap()).unwrap();
        // A job directory without its record yet (a start under way) is not a job.
        std::fs::create_dir_all(home.job_dir("starting")).unwrap();

        let ids: Vec<String> = registry.load().unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(ids, vec!["known", "pending"]);
        let killed = registry.modify("pending", |j| j.state = JobState::Killed { exit: None, ended_at: 1 }).unwrap();
        assert_eq!(killed.status(), JobStatus::Killed);
        assert_eq!(registry.get("pending").unwrap().status(), JobStatus::Killed);
    }

    /// A process holding the lock the way we take it (flock(2)), stopped as a
    /// debugger or a frozen container leaves it: the wait ends after the
    /// timeout, naming the holder and its state; a brief wait ends sooner.
    #[cfg(unix)]
    #[test]
    fn a_stopped_lock_holder_is_named_when_the_wait_gives_up() {
        if std::process::Command::new("flock").arg("--version").output().is_err() {
            eprintln!("skipped: flock(1) from util-linux is needed to hold the lock from another process");
            return;
        }
        let (_dir, home) = home();
        let lock = home.lock_path();
        std::fs::write(&lock, b"").unwrap();
        let mut holder = std::process::Command::new("flock").arg("--exclusive").arg(&lock).args(["sleep", "600"]).spawn().unwrap();
        let pid = holder.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::os::platform::flock_holder(&lock) != Some(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        // Our child flock(1) and its child, both alive until we reap them below.
        let signal_all = |signal: rustix::process::Signal| {
            for p in std::iter::once(pid).chain(children.split_whitespace().filter_map(|c| c.parse().ok())) {
                if let Some(p) = rustix::process::Pid::from_raw(p as i32) {
                    let _ = rustix::process::kill_process(p, signal);
                }
            }
        };
        signal_all(rustix::process::Signal::STOP);

        let mut registry = Registry::new(&home, 10);
        registry.lock_timeout = Duration::from_millis(300);
        let outcome = std::thread::scope(|scope| {
            let waiter = scope.spawn(|| (registry.upsert(&job("a", JobStatus::Running, 1)), registry.modify_with(Patience::Brief, "a", |_| ())));
            let deadline = Instant::now() + Duration::from_secs(30);
            while !waiter.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !waiter.is_finished() {
                signal_all(rustix::process::Signal::CONT);
                signal_all(rustix::process::Signal::KILL);
            }
            waiter.join().unwrap()
        });
        signal_all(rustix::process::Signal::CONT);
        signal_all(rustix::process::Signal::KILL);
        let _ = holder.wait();

        let (full, brief) = outcome;
        let err = full.expect_err("no lock while the holder is stopped");
        assert!(matches!(err, Error::Busy(_)), "{err}");
        let text = err.to_string();
        assert!(text.contains(&format!("pid {pid} (flock")), "{text}");
        assert!(text.contains("stopped (SIGSTOP"), "{text}");
        assert!(text.contains("registry.lock_timeout_ms (300 ms)"), "{text}");
        assert!(matches!(brief, Err(Error::Busy(_))));
    }

    /// Where no new file can be written (a full disk), an outcome still fits
    /// in the room the start reserved, written over job.json in place.
    #[test]
    fn a_job_file_is_padded_and_can_be_overwritten_in_place() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 10);
        std::fs::create_dir_all(home.job_dir("a")).unwrap();
        let running = job("a", JobStatus::Running, 1);
        registry.write_job_file(&running, false).unwrap();
        let path = home.job_dir("a").join("job.json");
        let reserved = std::fs::metadata(&path).unwrap().len() as usize;
        assert_eq!(reserved % JOB_FILE_BLOCK, 0);
        let mut ended = running.clone();
        ended.state = JobState::FailedToStart { error: "x".repeat(300), ended_at: 99 };
        let mut bytes = serde_json::to_vec_pretty(&ended).unwrap();
        bytes.push(b'\n');
        overwrite_in_place(&path, &bytes, true).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, reserved);
        assert_eq!(read_job_file(&home, "a").unwrap(), ended);
        let too_big = vec![b' '; reserved + 1];
        assert!(overwrite_in_place(&path, &too_big, false).is_err());
        assert_eq!(read_job_file(&home, "a").unwrap(), ended, "left as it was");
    }

    fn queued(id: &str, queue: Option<&str>, priority: i64, queued_at: u64, after: &[&str]) -> Job {
        let mut job = crate::model::job::sample_in(crate::model::job::JobState::Queued);
        job.id = id.into();
        job.main = None;
        job.supervisor = None;
        job.waits = Some(crate::model::job::Waits {
            queue: queue.map(str::to_string),
            priority,
            after: after.iter().map(|a| a.to_string()).collect(),
            after_any: false,
            queued_at,
            ..Default::default()
        });
        job
    }

    fn in_queue(mut job: Job, queue: &str) -> Job {
        job.waits = Some(crate::model::job::Waits { queue: Some(queue.into()), ..Default::default() });
        job
    }

    fn limits(pairs: &[(&str, u32)]) -> std::collections::BTreeMap<String, crate::store::config::QueueConfig> {
        pairs.iter().map(|(n, m)| (n.to_string(), crate::store::config::QueueConfig { max_parallel: *m })).collect()
    }

    #[test]
    fn the_next_queued_job_is_the_oldest_of_the_highest_priority_with_a_free_slot() {
        let running = in_queue(crate::model::job::sample_job(JobStatus::Running), "q");
        let jobs = vec![
            running,
            queued("a-1", Some("q"), 0, 10, &[]),
            queued("b-1", Some("q"), 5, 30, &[]),
            queued("c-1", Some("q"), 5, 20, &[]),
            queued("d-1", Some("q"), -1, 5, &[]),
        ];
        let ids = |order: Vec<usize>| order.into_iter().map(|i| jobs[i].id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(queue_order(&jobs)), ["c-1", "b-1", "a-1", "d-1"]);
        assert_eq!(queue_position(&jobs, "a-1"), Some(3));
        assert_eq!(next_queue_step(&jobs, &limits(&[("q", 1)])), None, "the one slot is taken");
        assert_eq!(next_queue_step(&jobs, &limits(&[("q", 2)])), Some(QueueStep::Start(3)));
        assert_eq!(next_queue_step(&jobs, &limits(&[])), None, "a queue gone from config.json runs one at a time");
    }

    #[test]
    fn a_job_waits_for_what_it_runs_after_and_is_skipped_when_one_did_not_succeed() {
        let mut dep = crate::model::job::sample_job(JobStatus::Running);
        dep.id = "dep-1".into();
        let waiting = queued("w-1", None, 0, 1, &["dep-1"]);
        let free = queued("f-1", None, 0, 2, &[]);
        let mut jobs = vec![dep.clone(), waiting, free];
        assert_eq!(waiting_for(&jobs[1], &jobs), ["dep-1"]);
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Start(2)), "a later job without deps goes first");
        jobs[0] = crate::model::job::sample_ended(JobStatus::Failed, Some(1), None);
        jobs[0].id = "dep-1".into();
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Skip(1, "skipped: dep-1 failed (exit 1)".into())));
        jobs[1].waits.as_mut().unwrap().after_any = true;
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Start(1)), "--after-any");
        jobs[1].waits.as_mut().unwrap().after_any = false;
        jobs[0] = crate::model::job::sample_ended(JobStatus::Success, Some(0), None);
        jobs[0].id = "dep-1".into();
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Start(1)));
        jobs.remove(0);
        let Some(QueueStep::Skip(0, why)) = next_queue_step(&jobs, &limits(&[])) else { panic!("a pruned dep") };
        assert!(why.contains("dep-1 is no longer in the registry"), "{why}");
    }

    #[test]
    fn after_ready_a_job_starts_once_a_server_it_runs_after_is_ready() {
        let mut server = crate::model::job::sample_job(JobStatus::Running);
        (server.id, server.started_at) = ("db-1".into(), now_ms());
        server.ready = Some(crate::model::job::Readiness { port: Some(5432), timeout_ms: Some(60_000), ..Default::default() });
        let mut web = queued("web-1", None, 0, 1, &["db-1"]);
        web.waits.as_mut().unwrap().after_ready = true;
        let mut jobs = vec![server, web];
        assert_eq!(next_queue_step(&jobs, &limits(&[])), None, "not ready yet");
        jobs[0].ready_at = Some(now_ms());
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Start(1)), "ready");
        jobs[1].waits.as_mut().unwrap().after_ready = false;
        assert_eq!(next_queue_step(&jobs, &limits(&[])), None, "plain --after still waits for the end");
        jobs[1].waits.as_mut().unwrap().after_ready = true;
        // Never ready within its readiness timeout: what runs after it never starts.
        (jobs[0].ready_at, jobs[0].started_at) = (None, now_ms() - 61_000);
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Skip(1, "skipped: db-1 was not ready after 1m00s".into())));
        // A one-shot task (no readiness check) counts once it ended well, as with --after.
        jobs[0].ready = None;
        assert_eq!(next_queue_step(&jobs, &limits(&[])), None);
        jobs[0] = crate::model::job::sample_ended(JobStatus::Success, Some(0), None);
        jobs[0].id = "db-1".into();
        assert_eq!(next_queue_step(&jobs, &limits(&[])), Some(QueueStep::Start(1)));
    }

    #[test]
    fn a_queued_job_in_the_registry_gives_way_to_its_started_record() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::unchecked(dir.path().to_path_buf());
        std::fs::create_dir_all(home.job_dir("a-1")).unwrap();
        let registry = Registry::new(&home, 200);
        let waiting = queued("a-1", Some("q"), 0, 1, &[]);
        registry.upsert(&waiting).unwrap();
        // Older versions read jobs.json with the statuses they know: queued
        // and skipped jobs are only in their job.json, and readers adopt them.
        let raw = std::fs::read_to_string(home.registry_path()).unwrap();
        assert!(!raw.contains("\"queued\""), "{raw}");
        assert_eq!(registry.load().unwrap()[0].status(), JobStatus::Queued);
        let mut started = waiting.clone();
        started.state = crate::model::job::JobState::Running;
        registry.write_job_file(&started, false).unwrap();
        assert_eq!(registry.load().unwrap()[0].status(), JobStatus::Running, "so no one starts it twice");
        let skipped = crate::model::job::JobState::Skipped { reason: "skipped: x-1 failed (exit 1)".into(), ended_at: 5 };
        let mut evicted = Registry::new(&home, 1);
        evicted.max_jobs = 1;
        evicted.update(|jobs| {
            jobs[0].state = crate::model::job::JobState::Queued;
            let mut other = queued("b-1", None, 0, 2, &[]);
            other.state = skipped.clone();
            jobs.insert(0, other);
        }).unwrap();
        let kept: Vec<String> = evicted.load().unwrap().into_iter().map(|j| j.id).collect();
        assert_eq!(kept, ["a-1"], "the cap evicts the ended job, never the queued one");
    }
}
