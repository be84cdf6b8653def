//! `jobs.json`: every update holds an exclusive lock on `jobs.lock` and replaces
//! the file atomically (temp file, fsync, rename), so readers never see half a
//! write and concurrent supervisors never lose each other's updates.

use super::job::Job;
use super::paths::Home;
use super::procinfo;
use super::{now_ms, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct RegistryFile {
    version: u32,
    jobs: Vec<Job>,
}

pub struct Registry {
    home: Home,
    max_jobs: usize,
}

/// Held while the registry is read-modified-written; unlocks on drop.
struct LockGuard(File);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = fs2::FileExt::unlock(&self.0);
    }
}

impl Registry {
    pub fn new(home: &Home, max_jobs: usize) -> Registry {
        Registry { home: home.clone(), max_jobs }
    }

    /// A consistent snapshot without taking the lock (each write is one rename).
    pub fn load(&self) -> Result<Vec<Job>> {
        let path = self.home.registry_path();
        match read_registry(&path) {
            Ok(jobs) => Ok(jobs),
            Err(ReadFailure::Io(e)) => Err(Error::io("read registry", path, e)),
            Err(ReadFailure::Missing) if !self.any_job_record() => Ok(Vec::new()),
            // Recovery rewrites the file, so it must happen under the lock.
            Err(ReadFailure::Corrupt(_) | ReadFailure::Missing) => self.update(|_| ()).and_then(|_| match read_registry(&path) {
                Ok(jobs) => Ok(jobs),
                Err(ReadFailure::Io(e)) => Err(Error::io("read registry", path.clone(), e)),
                Err(ReadFailure::Corrupt(why)) => Err(Error::Other(format!("registry still unreadable: {why}"))),
                Err(ReadFailure::Missing) => Ok(Vec::new()),
            }),
        }
    }

    pub fn get(&self, id: &str) -> Result<Job> {
        self.load()?.into_iter().find(|j| j.id == id).ok_or_else(|| Error::UnknownJob(id.to_string()))
    }

    /// Read-modify-write under the lock. `change` sees every job, oldest first.
    pub fn update<T>(&self, change: impl FnOnce(&mut Vec<Job>) -> T) -> Result<T> {
        let _guard = self.lock()?;
        let path = self.home.registry_path();
        let mut jobs = match read_registry(&path) {
            Ok(jobs) => jobs,
            Err(ReadFailure::Io(e)) => return Err(Error::io("read registry", path, e)),
            Err(ReadFailure::Corrupt(reason)) => self.recover_corrupt(&path, &reason)?,
            Err(ReadFailure::Missing) => self.recover_missing(&path),
        };
        let result = change(&mut jobs);
        let evicted = self.evict_over_cap(&mut jobs);
        write_atomically(&path, &RegistryFile { version: FORMAT_VERSION, jobs })?;
        for id in evicted {
            let _ = std::fs::remove_dir_all(self.home.job_dir(&id));
        }
        Ok(result)
    }

    /// Inserts or replaces `job`, and refreshes its copy in `jobs/<id>/job.json`.
    pub fn upsert(&self, job: &Job) -> Result<()> {
        // The copy is written under the lock too: its temp name is per process.
        self.update(|jobs| {
            match jobs.iter_mut().find(|j| j.id == job.id) {
                Some(slot) => *slot = job.clone(),
                None => jobs.push(job.clone()),
            }
            self.write_job_copy(job);
        })
    }

    /// Applies `change` to one job if it exists; returns the job as stored.
    pub fn modify(&self, id: &str, change: impl FnOnce(&mut Job)) -> Result<Job> {
        let updated = self.update(|jobs| {
            jobs.iter_mut().find(|j| j.id == id).map(|job| {
                change(job);
                self.write_job_copy(job);
                job.clone()
            })
        })?;
        updated.ok_or_else(|| Error::UnknownJob(id.to_string()))
    }

    /// The per-job copy is what a corrupt registry is rebuilt from. It is best
    /// effort: the registry itself stays the record.
    fn write_job_copy(&self, job: &Job) {
        let dir = self.home.job_dir(&job.id);
        if dir.is_dir() {
            let _ = write_json_file(&dir.join("job.json"), job, false);
        }
    }

    fn lock(&self) -> Result<LockGuard> {
        let path = self.home.lock_path();
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io("open registry lock", &path, e))?;
        fs2::FileExt::lock_exclusive(&file).map_err(|e| Error::io("lock registry", &path, e))?;
        Ok(LockGuard(file))
    }

    /// Moves the unreadable file aside (never overwriting it) and rebuilds the
    /// job list from each job directory's `job.json`, so no running job is forgotten.
    fn recover_corrupt(&self, path: &Path, reason: &str) -> Result<Vec<Job>> {
        let aside = path.with_file_name(format!("jobs.json.corrupt-{}", now_ms()));
        std::fs::rename(path, &aside).map_err(|e| Error::io("move aside corrupt registry", path, e))?;
        let jobs = self.jobs_from_job_dirs();
        eprintln!(
            "run-bg: warning: {} could not be read ({reason}); moved it to {} and rebuilt {} job(s) from the job directories",
            path.display(),
            aside.display(),
            jobs.len()
        );
        Ok(jobs)
    }

    /// No registry: rebuilt the same way when it was deleted while jobs exist;
    /// empty in a fresh home (the first job's directory is made before its
    /// record, so it finds none).
    fn recover_missing(&self, path: &Path) -> Vec<Job> {
        let jobs = self.jobs_from_job_dirs();
        if !jobs.is_empty() {
            eprintln!(
                "run-bg: warning: {} was missing; rebuilt {} job(s) from the job directories",
                path.display(),
                jobs.len()
            );
        }
        jobs
    }

    /// Whether any job directory holds its record (a registry can then be rebuilt).
    fn any_job_record(&self) -> bool {
        std::fs::read_dir(self.home.jobs_dir())
            .is_ok_and(|mut dirs| dirs.any(|d| d.is_ok_and(|d| d.path().join("job.json").exists())))
    }

    /// Every job recorded in `jobs/<id>/job.json`, oldest first.
    fn jobs_from_job_dirs(&self) -> Vec<Job> {
        let mut jobs: Vec<Job> = Vec::new();
        if let Ok(entries) = std::fs::read_dir(self.home.jobs_dir()) {
            for entry in entries.flatten() {
                let copy = entry.path().join("job.json");
                if let Ok(job) = std::fs::read(&copy).map_err(|e| e.to_string()).and_then(|bytes| {
                    serde_json::from_slice::<Job>(&bytes).map_err(|e| e.to_string())
                }) {
                    jobs.push(job);
                }
            }
        }
        jobs.sort_by(|a, b| a.started_at.cmp(&b.started_at).then_with(|| a.id.cmp(&b.id)));
        jobs
    }

    /// Drops the oldest finished jobs beyond `max_jobs`. A job whose main process
    /// ended while some of its processes live on stays.
    fn evict_over_cap(&self, jobs: &mut Vec<Job>) -> Vec<String> {
        let mut excess = jobs.len().saturating_sub(self.max_jobs);
        if excess == 0 {
            return Vec::new();
        }
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| jobs[i].started_at);
        let mut evict = vec![false; jobs.len()];
        // One pass over /proc for all candidates, taken only when needed.
        let mut live: Option<std::collections::HashSet<String>> = None;
        for i in order {
            if excess == 0 {
                break;
            }
            let job = &jobs[i];
            if !job.status.is_final() {
                continue;
            }
            let live = live.get_or_insert_with(procinfo::jobs_with_live_processes);
            if !super::kill::has_live_processes(job, live) {
                evict[i] = true;
                excess -= 1;
            }
        }
        let mut evicted = Vec::new();
        let mut index = 0;
        jobs.retain(|job| {
            let gone = evict[index];
            index += 1;
            if gone {
                evicted.push(job.id.clone());
            }
            !gone
        });
        evicted
    }
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
    let bytes = match std::fs::read(path) {
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

/// Temp file in the same directory, written, optionally fsynced, renamed over `path`.
pub fn write_json_file<T: Serialize>(path: &Path, value: &T, durable: bool) -> Result<()> {
    // Unique per process and per call: two threads of one process (the JS
    // API's kills) may write the same file at once.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Other(e.to_string()))?;
    let write = || -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        file.write_all(&bytes)?;
        file.write_all(b"\n")?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("write", path, e)
    })
}

fn write_atomically(path: &Path, file: &RegistryFile) -> Result<()> {
    write_json_file(path, file, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobStatus, ProcessIdentity};

    fn job(id: &str, status: JobStatus, started_at: u64) -> Job {
        Job {
            id: id.into(),
            label: id.into(),
            argv: vec!["true".into()],
            command: "true".into(),
            cwd: "/".into(),
            env: Default::default(),
            owner: None,
            context: None,
            status,
            exit_code: None,
            signal: None,
            main: None,
            supervisor: None,
            started_at,
            ended_at: None,
            timeout_ms: None,
            notify: true,
            on_exit: None,
            error: None,
            log_path: String::new(),
            notification: None,
            hooks: Vec::new(),
            peak_rss_kb: None,
            seen_at: None,
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
        let mut daemon = std::process::Command::new("sleep")
            .arg("30")
            .env(crate::procinfo::JOB_COOKIE, "lingering")
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !procinfo::jobs_with_live_processes().contains("lingering") && std::time::Instant::now() < deadline {
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
        assert!(matches!(registry.modify("b", |j| j.status = JobStatus::Killed), Err(Error::UnknownJob(_))));
        assert_eq!(registry.load().unwrap().len(), 1);
        assert_eq!(std::fs::read(home.registry_path()).unwrap().len(), before.len());
    }
}
