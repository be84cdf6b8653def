//! The registry's tests (`store/registry.rs` and its rooms).

use super::*;
use crate::store::job_file::*;
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
    // A cap of 2 ended jobs: the running one neither goes nor counts.
    let registry = Registry::new(&home, 2);
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

/// A job whose supervisor left its done mark is judged by what it recorded,
/// without a pass over the table: one recorded process alive keeps it.
#[test]
fn finished_job_with_its_done_mark_is_kept_while_a_recorded_process_lives() {
    let (_dir, home) = home();
    let registry = Registry::new(&home, 1);
    let mut daemon = crate::os::sys::waiting_command()
        .env(crate::model::protocol::JOB_COOKIE, "marked")
        .spawn()
        .unwrap();
    let who = procinfo::identify(daemon.id()).unwrap();
    for id in ["marked", "gone"] {
        std::fs::create_dir_all(home.job_dir(id)).unwrap();
        std::fs::write(home.job_dir(id).join(crate::model::protocol::SUPERVISOR_DONE_FILE), b"").unwrap();
    }
    let _ = crate::store::procset::Recorder::new(&home.job_dir("marked")).add(&[who]);
    // Recorded, and gone: its pid now names another process.
    let stale = ProcessIdentity::from_stat(who.pid, who.start_ticks + 1);
    let _ = crate::store::procset::Recorder::new(&home.job_dir("gone")).add(&[stale]);
    registry.upsert(&job("marked", JobStatus::Success, 1)).unwrap();
    registry.upsert(&job("gone", JobStatus::Success, 2)).unwrap();
    registry.upsert(&job("newer", JobStatus::Success, 3)).unwrap();
    let ids: Vec<String> = registry.load().unwrap().into_iter().map(|j| j.id).collect();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(ids, vec!["marked"]);
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
    while crate::os::lock_holder::flock_holder(&lock) != Some(pid) && Instant::now() < deadline {
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

/// Many jobs forgotten by one write (a `kill --all` over the cap) leave
/// readers' sight at once, in one hidden folder that a sweeper deletes off
/// the writer's path; a few are deleted by the write itself, and a sweeper
/// is given nothing but such a folder.
#[test]
fn jobs_forgotten_in_bulk_go_to_a_sweeper_and_a_few_are_deleted_at_once() {
    let (_dir, home) = home();
    let handed: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let seen = handed.clone();
    let registry = Registry::new(&home, 1).with_sweeper(std::sync::Arc::new(move |name: &str| {
        seen.lock().unwrap().push(name.to_string());
        true
    }));
    let many = FORGET_INLINE + 4;
    let mut file = RegistryFile { version: FORMAT_VERSION, jobs: Vec::new() };
    for i in 0..many + 1 {
        let id = format!("ended-{i}");
        std::fs::create_dir_all(home.job_dir(&id)).unwrap();
        std::fs::write(home.job_dir(&id).join("output.log"), b"x").unwrap();
        file.jobs.push(job(&id, JobStatus::Success, i as u64 + 1));
    }
    std::fs::write(home.registry_path(), serde_json::to_vec(&file).unwrap()).unwrap();
    registry.take_in(Patience::Full, "trim").unwrap();
    let ids: Vec<String> = registry.load().unwrap().into_iter().map(|j| j.id).collect();
    assert_eq!(ids, [format!("ended-{many}")], "the newest kept");
    let names = handed.lock().unwrap().clone();
    assert_eq!(names.len(), 1, "one folder for the whole write: {names:?}");
    let folder = home.jobs_dir().join(&names[0]);
    assert!(names[0].starts_with(".gone-") && folder.join("ended-0").join("output.log").exists(), "{names:?}");
    assert!(!home.job_dir("ended-0").exists(), "out of readers' sight");
    registry.sweep_forgotten(&names[0]).unwrap();
    assert!(!folder.exists());
    for bad in ["ended-1", "../home", ".gone-1/../..", ""] {
        assert!(registry.sweep_forgotten(bad).is_err(), "{bad:?} is no folder of forgotten jobs");
    }
    // A few are deleted by the write itself.
    for i in 0..2 {
        std::fs::create_dir_all(home.job_dir(&format!("few-{i}"))).unwrap();
        registry.upsert(&job(&format!("few-{i}"), JobStatus::Success, 100 + i)).unwrap();
    }
    assert_eq!(handed.lock().unwrap().len(), 1, "no sweeper for a few");
    let left: Vec<String> = std::fs::read_dir(home.jobs_dir()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, ["few-1"], "nothing set aside is left behind");
}

/// A sweeper killed midway leaves its `.gone-*` folder: the next sweep
/// deletes it once it has sat untouched for an hour, and leaves a recent
/// one (another sweeper's, still at work) alone. Unix only: Windows opens
/// no directory as a file to set its time.
#[cfg(unix)]
#[test]
fn a_sweep_deletes_what_a_killed_sweeper_left_and_not_a_live_one() {
    let (_dir, home) = home();
    let registry = Registry::new(&home, 1);
    let folder = |name: &str| {
        let dir = home.jobs_dir().join(name);
        std::fs::create_dir_all(dir.join("ended-0")).unwrap();
        std::fs::write(dir.join("ended-0").join("output.log"), b"x").unwrap();
        dir
    };
    let left = folder(".gone-7-00aa11bb");
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::open(&left).unwrap().set_modified(two_hours_ago).unwrap();
    let live = folder(".gone-8-00cc22dd");
    let mine = folder(".gone-9-00ee33ff");
    registry.sweep_forgotten(".gone-9-00ee33ff").unwrap();
    assert!(!mine.exists(), "its own folder");
    assert!(!left.exists(), "the one a killed sweeper left, untouched for two hours");
    assert!(live.join("ended-0").join("output.log").exists(), "a recent one is another sweeper's: left alone");
    assert!(home.jobs_dir().exists());
}

/// A write that forgets a job (over the cap) moves its directory out of
/// sight before it writes jobs.json. A reader that read the jobs.json before
/// it, which names the job still running (its end was in its job.json
/// alone), then finds no job.json: it must not list the job as running, an
/// end already recorded. Seen under load: `list` showed ended jobs running
/// just before they were forgotten.
#[test]
fn a_reader_never_lists_running_a_job_that_a_write_is_forgetting() {
    let (_dir, home) = home();
    let registry = Registry::new(&home, 200);
    let mut ended = job("ended", JobStatus::Running, 1);
    let before = vec![ended.clone(), job("other", JobStatus::Running, 3)];
    write_atomically(&home.registry_path(), &RegistryFile { version: FORMAT_VERSION, jobs: before }).unwrap();
    crate::store::paths::create_private_dir_all(&home.job_dir("ended")).unwrap();
    ended.state = JobState::Exited { code: 0, ended_at: 2 };
    registry.write_job_file(&ended, false).unwrap();
    assert_eq!(registry.load().unwrap()[0].status(), JobStatus::Success, "its job.json tells its end");
    crate::store::index::forget(&home);
    // The writer, midway: it holds the lock and has moved the directory aside.
    let guard = registry.lock(Patience::Full, "forget ended").unwrap();
    let aside = home.jobs_dir().join(".gone-1-test");
    crate::store::paths::create_private_dir_all(&aside).unwrap();
    std::fs::rename(home.job_dir("ended"), aside.join("ended")).unwrap();
    let writer = {
        let home = home.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let kept = RegistryFile { version: FORMAT_VERSION, jobs: vec![job("other", JobStatus::Running, 3)] };
            // Under wine, replacing a file while another thread asks its
            // metadata (the reader polls it every 2 ms) can be refused
            // ("Access denied"); Windows's own rename replaces it.
            let busy_until = std::time::Instant::now() + Duration::from_secs(2);
            loop {
                match write_atomically(&home.registry_path(), &kept) {
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::PermissionDenied && std::time::Instant::now() < busy_until =>
                    {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    written => break written.unwrap(),
                }
            }
            drop(guard);
        })
    };
    let jobs = registry.load().unwrap();
    writer.join().unwrap();
    let running: Vec<&str> = jobs.iter().filter(|j| j.status() == JobStatus::Running).map(|j| j.id.as_str()).collect();
    assert_eq!(running, vec!["other"], "the ended job, being forgotten, is not listed running");
}
