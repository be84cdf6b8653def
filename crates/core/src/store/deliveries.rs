//! What a job's notifier and the home's deliverer learn about an end event
//! (each attempt's outcome, the hooks run), recorded in `<home>/deliveries/`
//! beside the registry, without taking its lock. Readers see a record at once
//! (`Registry::load` lays them over the registry); the next registry write
//! folds them in and removes them.
//!
//! Why not the registry itself: a `kill --all` of 1,000 jobs ends 1,000
//! events together, each retried for a minute. Recorded through the registry,
//! every attempt rewrote every job's entry under the one lock: 12,000 full
//! rewrites of a 1,000-job registry, 1,000 processes polling for the lock,
//! both cores busy for minutes. A record is one small file; folding takes in
//! whatever has gathered in one write.
//!
//! Each record holds its writer's whole knowledge of the event (the
//! notification as it stands, every hook run so far), so a writer replaces
//! its previous record with the next and a record may be folded twice
//! without harm. The writers of one event come one after another (the
//! notifier, then the deliverer it hands the event to), so the order of the
//! records' names, which begin with the time of writing, is their order.

use crate::model::job::{HookRun, Job, Notification};
use crate::store::paths::{self, create_private_dir_all, Home};
use serde::{Deserialize, Serialize};
use std::io::Write;
use crate::os::sys::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What one writer knows of one event's delivery.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryRecord {
    pub job_id: String,
    pub event_id: String,
    /// The notification as it stands; `None` when no POST was due (hooks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<Notification>,
    /// Every hook run for this event so far; empty leaves the job's hooks as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
}

pub fn dir(home: &Home) -> PathBuf {
    home.dir().join("deliveries")
}

/// Records what one writer learns of an event, each time replacing the
/// record it wrote before.
#[derive(Debug)]
pub struct Recorder {
    home: Home,
    pub record: DeliveryRecord,
    written: Option<PathBuf>,
}

impl Recorder {
    pub fn new(home: &Home, job_id: &str, event_id: &str, notification: Option<Notification>) -> Recorder {
        let record = DeliveryRecord { job_id: job_id.to_string(), event_id: event_id.to_string(), notification, hooks: Vec::new() };
        Recorder { home: home.clone(), record, written: None }
    }

    /// The record written last, until a registry write folds it in.
    pub fn written(&self) -> Option<&Path> {
        self.written.as_deref()
    }

    /// Changes the notification (if there is one) and records it.
    pub fn change(&mut self, change: impl FnOnce(&mut Notification)) {
        if let Some(notification) = self.record.notification.as_mut() {
            change(notification);
        }
        self.save();
    }

    /// Hooks run for this event (each naming it in `event_id`).
    pub fn add_hooks(&mut self, hooks: Vec<HookRun>) {
        self.record.hooks.extend(hooks);
        self.save();
    }

    /// Best effort, as the registry writes it replaces were: a home that
    /// cannot be written loses the delivery's progress, never the job.
    fn save(&mut self) {
        match write_record(&dir(&self.home), &self.record) {
            Ok(path) => {
                if let Some(before) = self.written.replace(path) {
                    let _ = std::fs::remove_file(before);
                }
            }
            Err(e) => tracing::warn!("run-bg: cannot record the delivery of {}: {e}", self.record.event_id),
        }
    }
}

/// Written under a dot name and renamed, so that a reader never sees half a
/// record; not fsynced: a record lost in a crash leaves the event as the
/// registry last had it, and the spool (which is fsynced) still holds
/// whatever is left to send.
fn write_record(dir: &Path, record: &DeliveryRecord) -> crate::Result<PathBuf> {
    create_private_dir_all(dir)?;
    let written_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!("{written_at:020}-{}-{}.json", std::process::id(), paths::random_hex(4).map_err(|e| crate::Error::io("name", dir, e))?);
    let path = dir.join(&name);
    let temp = dir.join(format!(".{name}"));
    let bytes = serde_json::to_vec(record).map_err(|e| crate::Error::Other(e.to_string()))?;
    let written = paths::options_nofollow()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut file| file.write_all(&bytes))
        .and_then(|()| std::fs::rename(&temp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(crate::Error::io("write", &temp, e));
    }
    Ok(path)
}

/// Every record now in `<home>/deliveries/`, oldest first (a file that
/// cannot be read as one comes with `None`), and the temp files of writers
/// that may have died: one listing of the directory for both.
fn listing(home: &Home) -> (Vec<(PathBuf, Option<DeliveryRecord>)>, Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir(home)) else { return (Vec::new(), Vec::new()) };
    let mut records = Vec::new();
    let mut temps = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            temps.push(entry.path());
        } else if name.ends_with(".json") {
            let path = entry.path();
            let record = paths::read_file(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
            records.push((path, record));
        }
    }
    records.sort_by(|a, b| a.0.file_name().cmp(&b.0.file_name()));
    (records, temps)
}

/// Lays `record` over the job it names; true when the record has nothing
/// more to give (applied, or about a job or an event that is gone).
fn apply(jobs: &mut [Job], record: &DeliveryRecord) -> bool {
    let Some(job) = jobs.iter_mut().find(|j| j.id == record.job_id) else { return true };
    if let Some(notification) = &record.notification {
        match &job.notification {
            Some(stored) if stored.event_id == record.event_id => job.notification = Some(notification.clone()),
            // The registry has not taken in the end that caused the event
            // yet (its job.json could not be read): kept for a later write.
            _ if !job.status().is_final() => return false,
            _ => {}
        }
    }
    if !record.hooks.is_empty() {
        job.hooks.retain(|h| h.event_id.as_deref() != Some(record.event_id.as_str()));
        job.hooks.extend(record.hooks.iter().cloned());
    }
    true
}

/// For readers: `jobs` as the records say they stand now; true when there were any.
pub fn lay_over(home: &Home, jobs: &mut [Job]) -> bool {
    let (records, _) = listing(home);
    for record in records.iter().filter_map(|(_, r)| r.as_ref()) {
        apply(jobs, record);
    }
    !records.is_empty()
}

/// For a registry write (under its lock): lays every record over `jobs` and
/// gives the files to remove once the registry is written, and the jobs the
/// records named. An unreadable
/// file goes too once it is a minute old (a writer renames a record in whole,
/// so it is no record); a temp file whose writer died, after a minute.
pub fn fold(home: &Home, jobs: &mut [Job]) -> (Vec<PathBuf>, std::collections::HashSet<String>) {
    let (records, temps) = listing(home);
    let mut done = Vec::new();
    let mut named = std::collections::HashSet::new();
    for (path, record) in records {
        let finished = match record {
            Some(record) => {
                named.insert(record.job_id.clone());
                apply(jobs, &record)
            }
            None => older_than_a_minute(&path),
        };
        if finished {
            done.push(path);
        }
    }
    done.extend(temps.into_iter().filter(|p| older_than_a_minute(p)));
    (done, named)
}

fn older_than_a_minute(path: &Path) -> bool {
    paths::age(path).is_some_and(|age| age > std::time::Duration::from_secs(60))
}

/// True when some record waits to be folded: one failed `readdir` when none ever was.
pub fn any(home: &Home) -> bool {
    std::fs::read_dir(dir(home)).is_ok_and(|mut entries| entries.any(|e| e.is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.'))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{sample_job, DeliveryState, JobStatus};
    use crate::store::registry::{Patience, Registry};

    fn home() -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home")).unwrap();
        (dir, home)
    }

    fn ended(id: &str) -> Job {
        let mut job = sample_job(JobStatus::Failed);
        (job.id, job.main, job.supervisor) = (id.into(), None, None);
        job.notification = Some(Notification { event_id: format!("{id}:failed"), ..Default::default() });
        job
    }

    fn hook(event_id: &str, command: &str) -> HookRun {
        HookRun { command: command.into(), exit_code: Some(0), error: None, duration_ms: 1, event_id: Some(event_id.into()) }
    }

    #[test]
    fn the_last_record_of_an_event_is_what_readers_see_and_one_write_folds_them_all() {
        let (_dir, home) = home();
        let registry = Registry::new(&home, 100);
        registry.upsert(&ended("a")).unwrap();
        registry.upsert(&ended("b")).unwrap();
        let mut a = Recorder::new(&home, "a", "a:failed", ended("a").notification);
        for attempt in 1..=5 {
            a.change(|n| (n.attempts, n.state) = (attempt, DeliveryState::Pending));
        }
        a.change(|n| n.state = DeliveryState::NoListener);
        a.add_hooks(vec![hook("a:failed", "notify-me")]);
        let mut b = Recorder::new(&home, "b", "b:failed", ended("b").notification);
        b.change(|n| (n.attempts, n.state) = (1, DeliveryState::Queued));
        assert_eq!(listing(&home).0.len(), 2, "each writer keeps one record, its last");

        let seen = registry.load().unwrap();
        let a_seen = seen.iter().find(|j| j.id == "a").unwrap();
        assert_eq!(a_seen.notification.as_ref().map(|n| (n.state, n.attempts)), Some((DeliveryState::NoListener, 5)));
        assert_eq!(a_seen.hooks, vec![hook("a:failed", "notify-me")]);

        registry.take_in(Patience::Full, "test").unwrap();
        assert!(listing(&home).0.is_empty(), "folded records are removed");
        let file: serde_json::Value = serde_json::from_slice(&std::fs::read(home.registry_path()).unwrap()).unwrap();
        let stored: Vec<Job> = serde_json::from_value(file["jobs"].clone()).unwrap();
        assert_eq!(stored.iter().find(|j| j.id == "b").and_then(|j| j.notification.as_ref()).map(|n| n.state), Some(DeliveryState::Queued));
        assert_eq!(stored.iter().find(|j| j.id == "a").map(|j| j.hooks.len()), Some(1));
    }

    #[test]
    fn a_record_folded_twice_adds_no_hook_and_one_for_a_gone_job_or_event_is_dropped() {
        let mut jobs = vec![ended("a")];
        let record = DeliveryRecord {
            job_id: "a".into(),
            event_id: "a:failed".into(),
            notification: Some(Notification { event_id: "a:failed".into(), state: DeliveryState::Failed, ..Default::default() }),
            hooks: vec![hook("a:failed", "one"), hook("a:failed", "two")],
        };
        assert!(apply(&mut jobs, &record));
        assert!(apply(&mut jobs, &record));
        assert_eq!(jobs[0].hooks.len(), 2, "replaced by event, not appended again");

        let other_event = DeliveryRecord { event_id: "a:success".into(), notification: Some(Notification { event_id: "a:success".into(), ..Default::default() }), hooks: Vec::new(), ..record.clone() };
        assert!(apply(&mut jobs, &other_event), "about an event the job no longer has: dropped");
        assert_eq!(jobs[0].notification.as_ref().map(|n| n.state), Some(DeliveryState::Failed), "and changes nothing");
        assert!(apply(&mut jobs, &DeliveryRecord { job_id: "gone".into(), ..record.clone() }), "about a job that is gone: dropped");

        let mut running = vec![sample_job(JobStatus::Running)];
        running[0].id = "a".into();
        assert!(!apply(&mut running, &record), "its end not taken in yet: kept for a later write");
    }
}
