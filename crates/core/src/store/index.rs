//! The registry's compact index, `jobs.index` beside `jobs.json`: every job
//! as readers last merged it (the registry's entry with what its own
//! `job.json` added), each with the stamp of the `job.json` it took in, and
//! the stamp of the `jobs.json` it was made from.
//!
//! Why: a start writes only its job's `job.json`, so a reader merges every
//! job's file into the registry. At 1,000 running jobs that was 1,000 files
//! opened, read and parsed per `list` (twice, with the look for corrupt
//! records), where pueue answers from a daemon's memory. With the index a
//! reader parses one file and only stats each job's `job.json`: a job whose
//! file has the stamp the index holds is taken as the index has it. Anything
//! else (another `jobs.json`, a `job.json` replaced, a job gone, a job the
//! index does not know it can take in from its file) is read as before, and
//! the index written again.
//!
//! It is only a cache: never the one copy of anything, read only when every
//! stamp it names still holds, so a stale, corrupt, missing or hand-edited
//! index costs one full read, never a wrong answer. Registry writes write it
//! under the registry lock with the registry; a reader that had to read
//! everything writes it if the lock is free at once. A stamp is taken before
//! its file is read, so a file replaced during the read is read again next
//! time rather than trusted.

use crate::model::ids::validate_job_id;
use crate::model::job::Job;
use crate::store::paths::{self, Home};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::Path;

const INDEX_VERSION: u32 = 1;
pub const INDEX_FILE: &str = "jobs.index";

/// Which version of a file: inode, size and time of change (ns). A
/// `job.json` or `jobs.json` is replaced by a rename (a new inode) or, on a
/// full disk, overwritten in place (a new time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    ino: u64,
    size: u64,
    mtime_ns: u128,
}

impl Stamp {
    pub fn of_metadata(meta: &std::fs::Metadata) -> Stamp {
        use crate::os::sys::MetadataExt;
        let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        Stamp { ino: meta.ino(), size: meta.len(), mtime_ns }
    }

    /// The stamp of `path` itself (never what a symlink names); `None` when absent.
    pub fn of(path: &Path) -> Option<Stamp> {
        std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| Stamp::of_metadata(&m))
    }
}

/// One job as the index holds it.
#[derive(Serialize, Deserialize)]
pub struct Entry {
    pub job: Job,
    /// Whether its `job.json` was looked at (not for a registry entry that
    /// knows the job's outcome), and its stamp then (`None`: there was none).
    pub looked: bool,
    pub own: Option<Stamp>,
    /// Known from its `job.json` alone (not in `jobs.json`).
    pub adopted: bool,
}

#[derive(Serialize, Deserialize)]
struct IndexFile {
    version: u32,
    /// `jobs.json` as it was read; `None`: there was none.
    registry: Option<Stamp>,
    entries: Vec<Entry>,
}

pub fn path(home: &Home) -> std::path::PathBuf {
    home.dir().join(INDEX_FILE)
}

/// The index's bytes, for the registry to write (atomically, not fsynced: a
/// lost index is rebuilt by the next read).
pub fn encode(registry: Option<Stamp>, entries: Vec<Entry>) -> Option<Vec<u8>> {
    serde_json::to_vec(&IndexFile { version: INDEX_VERSION, registry, entries }).ok()
}

/// Removes the index: the next read rebuilds it.
pub fn forget(home: &Home) {
    let _ = std::fs::remove_file(path(home));
}

/// The merged jobs, oldest first, if the index still tells them: `jobs.json`
/// has `registry_now`'s stamp, every `job.json` it took in is unchanged, and
/// no job it knows from its file alone has lost it. Jobs whose directory it
/// does not know are read from their `job.json` (by `read_job`) and added.
/// `None`: read everything.
pub fn load(home: &Home, registry_now: Option<Stamp>, read_job: impl Fn(&str) -> Option<Job>) -> Option<Vec<Job>> {
    // A FIFO planted there is refused, not waited on (`paths::read_file`).
    let bytes = paths::read_file(&path(home)).ok()?;
    let index: IndexFile = serde_json::from_slice(&bytes).ok()?;
    if index.version != INDEX_VERSION || index.registry != registry_now {
        return None;
    }
    let dirs = job_dirs(home)?;
    let mut known: HashSet<String> = HashSet::with_capacity(index.entries.len());
    for entry in &index.entries {
        known.insert(entry.job.id.clone());
        let file = home.job_dir(&entry.job.id).join("job.json");
        // Looked at: that very file (or still none) must be there.
        if entry.looked && Stamp::of(&file) != entry.own {
            return None;
        }
    }
    let mut jobs: Vec<Job> = index.entries.into_iter().map(|e| e.job).collect();
    let new: Vec<&String> = dirs.iter().filter(|id| !known.contains(id.as_str())).collect();
    if !new.is_empty() {
        // Jobs started since (or whose file could not be read then).
        let mut added = 0;
        for id in new {
            if let Some(job) = read_job(id) {
                jobs.push(job);
                added += 1;
            }
        }
        if added > 0 {
            jobs.sort_by_key(|j| j.started_at);
        }
    }
    Some(jobs)
}

/// The names in `jobs/` that may be jobs (as `Registry::merged` reads them).
fn job_dirs(home: &Home) -> Option<Vec<String>> {
    let entries = std::fs::read_dir(home.jobs_dir()).ok()?;
    let mut ids = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(".gone-") || validate_job_id(name).is_err() || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        ids.push(name.to_string());
    }
    Some(ids)
}

/// The `job.json`s a merge looked at, by job id, with their stamps (`None`: absent).
pub type OwnStamps = HashMap<String, Option<Stamp>>;

/// The entries for `jobs` as merged, `registry_ids` being those `jobs.json`
/// names. `settled`: a job whose `job.json` a reader does not look at (the
/// registry knows its outcome). `None` when some other job's file was not
/// looked at in the merge (a job a registry write added or replaced): an
/// index without its stamp could answer for it from a file it never read.
pub fn entries(jobs: &[Job], stamps: &OwnStamps, registry_ids: &HashSet<String>, settled: impl Fn(&Job) -> bool) -> Option<Vec<Entry>> {
    jobs.iter()
        .map(|job| {
            let adopted = !registry_ids.contains(&job.id);
            match stamps.get(&job.id) {
                Some(own) => Some(Entry { job: job.clone(), looked: true, own: *own, adopted }),
                None if !adopted && settled(job) => Some(Entry { job: job.clone(), looked: false, own: None, adopted }),
                None => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{sample_job, JobState, JobStatus};
    use crate::store::registry::Registry;

    fn home() -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home")).unwrap();
        (dir, home)
    }

    fn job(id: &str, status: JobStatus, started_at: u64) -> Job {
        let mut job = sample_job(status);
        (job.id, job.started_at, job.main, job.supervisor) = (id.into(), started_at, None, None);
        job
    }

    /// A job that its supervisor wrote into its own directory only, as a start does.
    fn started(home: &Home, registry: &Registry, id: &str, at: u64) -> Job {
        let job = job(id, JobStatus::Running, at);
        crate::store::paths::create_private_dir_all(&home.job_dir(id)).unwrap();
        registry.write_job_file(&job, false).unwrap();
        job
    }

    fn ids(jobs: &[Job]) -> Vec<(String, JobStatus)> {
        jobs.iter().map(|j| (j.id.clone(), j.status())).collect()
    }

    fn indexed(home: &Home) -> Option<Vec<Job>> {
        let registry = Registry::new(home, 200);
        load(home, Stamp::of(&home.registry_path()), |id| registry.own_record(id))
    }

    #[test]
    fn a_read_writes_the_index_and_the_next_read_is_answered_by_it_alike() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 200);
        registry.upsert(&job("done", JobStatus::Success, 1)).unwrap();
        started(&home, &registry, "run-a", 2);
        started(&home, &registry, "run-b", 3);
        let full = registry.load().unwrap();
        let cached = indexed(&home).expect("the read wrote an index that holds");
        assert_eq!(ids(&cached), ids(&full));
        assert_eq!(cached, full);
        assert_eq!(registry.load().unwrap(), full);
    }

    #[test]
    fn a_job_json_replaced_a_registry_written_or_a_new_job_is_never_answered_stale() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 200);
        let mut a = started(&home, &registry, "run-a", 2);
        registry.load().unwrap();
        assert!(indexed(&home).is_some());
        // Its supervisor records the end in job.json alone.
        a.state = JobState::Exited { code: 0, ended_at: 9 };
        registry.write_job_file(&a, false).unwrap();
        assert!(indexed(&home).is_none(), "its job.json changed: not from the index");
        assert_eq!(ids(&registry.load().unwrap()), vec![("run-a".to_string(), JobStatus::Success)]);
        // A job started since is read from its file and added.
        started(&home, &registry, "run-b", 3);
        let cached = indexed(&home).expect("only a job added");
        assert_eq!(ids(&cached), vec![("run-a".into(), JobStatus::Success), ("run-b".into(), JobStatus::Running)]);
        // A registry write names a new jobs.json.
        registry.upsert(&job("c", JobStatus::Failed, 4)).unwrap();
        let after = registry.load().unwrap();
        assert_eq!(after.len(), 3);
        assert_eq!(indexed(&home).expect("the write wrote it"), after);
    }

    #[test]
    fn a_corrupt_or_foreign_index_costs_a_full_read_never_a_wrong_answer() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 200);
        started(&home, &registry, "run-a", 2);
        let full = registry.load().unwrap();
        std::fs::write(home.dir().join(INDEX_FILE), b"{not json").unwrap();
        assert!(indexed(&home).is_none());
        assert_eq!(registry.load().unwrap(), full);
        // An index made for another jobs.json (a hand-edited one, or an old one put back).
        let ghost = Entry { job: job("ghost", JobStatus::Running, 1), looked: false, own: None, adopted: false };
        std::fs::write(path(&home), encode(Some(Stamp { ino: 1, size: 2, mtime_ns: 3 }), vec![ghost]).unwrap()).unwrap();
        assert_eq!(registry.load().unwrap(), full, "the ghost is not listed");
    }
}

#[cfg(all(test, unix))]
mod hostile {
    use super::*;
    use crate::store::registry::Registry;

    /// A FIFO planted at `jobs.index` (by hand, or a tool that made one by
    /// mistake): opening it for reading waits for a writer that never comes,
    /// and every reader of the registry hung on it.
    #[test]
    fn a_fifo_at_the_index_is_no_index_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home")).unwrap();
        let registry = Registry::new(&home, 200);
        let mut job = crate::model::job::sample_job(crate::model::job::JobStatus::Success);
        (job.id, job.main, job.supervisor) = ("done".into(), None, None);
        registry.upsert(&job).unwrap();
        forget(&home);
        let fifo = path(&home);
        crate::store::paths::planted_fifo::plant(&fifo);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(registry.load().map(|jobs| jobs.len())).unwrap());
        let read = rx.recv_timeout(std::time::Duration::from_secs(10));
        if read.is_err() {
            crate::store::paths::planted_fifo::release(&fifo);
        }
        assert_eq!(read.expect("load returned").unwrap(), 1);
    }
}
