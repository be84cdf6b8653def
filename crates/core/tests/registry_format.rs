//! The registry written by today's proc-manager must stay readable: homes
//! outlive upgrades, and a record that no longer loads loses the jobs it
//! names (and with them, what `kill` and `orphans` could still find).
//!
//! `fixtures/jobs-format-1.json` is a real `jobs.json` (format 1), taken from
//! a run of `run-bg` with jobs of every outcome: success with owner, context
//! and env; exit 3 with a failed `--on-exit` hook; death by SIGKILL; a start
//! that failed (no main process); a `--timeout` with `--no-notify`; a `kill`;
//! an orphaned job; a lost one; a notification still pending after a refused
//! connection. Only the temp paths were replaced by stable ones.
//!
//! The state is an enum with data in memory (`JobState`) but is written as
//! format 1's flat fields, so the format did not change with it.
//!
//! If the record changes (a field renamed, removed or re-typed), this test fails. Then bump
//! `FORMAT_VERSION` in `src/store/registry.rs`, add a migration from format 1
//! there, keep this fixture as it is, and make this test check that the
//! migrated records say the same things; add a fixture of the new format
//! beside it.

use proc_manager_core::model::job::{DeliveryState, Exit, Job, JobState, JobStatus, ProcessIdentity};
use proc_manager_core::store::paths::Home;
use proc_manager_core::store::registry::Registry;
use std::path::Path;

const FIXTURE: &str = include_str!("fixtures/jobs-format-1.json");
const MAX_JOBS: usize = 1000;

/// A private home whose `jobs.json` is the fixture, and its registry.
fn registry_from_fixture() -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home")).unwrap();
    std::fs::write(home.registry_path(), FIXTURE).unwrap();
    (dir, Registry::new(&home, MAX_JOBS))
}

fn find<'a>(jobs: &'a [Job], id: &str) -> &'a Job {
    jobs.iter().find(|j| j.id == id).unwrap_or_else(|| panic!("job {id} missing from the loaded registry"))
}

fn identity(pid: u32, start_ticks: u64, pidfs_ino: u64) -> ProcessIdentity {
    ProcessIdentity { pid, start_ticks, pidfs_ino: Some(pidfs_ino), boot: Some(5133173320832599505) }
}

#[test]
fn a_format_1_registry_loads_with_every_job_in_order() {
    let (_dir, registry) = registry_from_fixture();
    let jobs = registry.load().unwrap();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "ok-05ee0c",
            "three-f3c703",
            "sig-8a04db",
            "nostart-2cc365",
            "slow-aecd04",
            "victim-16a3ef",
            "orphan-267816",
            "gone-175e45",
            "late-6e752f"
        ]
    );
    let statuses: Vec<JobStatus> = jobs.iter().map(|j| j.status()).collect();
    use JobStatus::*;
    assert_eq!(statuses, [Success, Failed, Failed, Failed, Timeout, Killed, Orphaned, Lost, Failed]);
}

#[test]
fn a_format_1_registry_reads_as_the_state_of_each_job() {
    let (_dir, registry) = registry_from_fixture();
    let jobs = registry.load().unwrap();
    let states: Vec<(&str, &JobState)> = jobs.iter().map(|j| (j.id.as_str(), &j.state)).collect();
    let signal = |name: &str| Some(Exit::Signal(name.into()));
    assert_eq!(
        states,
        [
            ("ok-05ee0c", &JobState::Exited { code: 0, ended_at: 1795434940498 }),
            ("three-f3c703", &JobState::Exited { code: 3, ended_at: 1795434940516 }),
            ("sig-8a04db", &JobState::Signalled { signal: "SIGKILL".into(), ended_at: 1795434940527 }),
            (
                "nostart-2cc365",
                &JobState::FailedToStart {
                    error: "cannot start `/nonexistent/prog`: no such file".into(),
                    ended_at: 1795434940539
                }
            ),
            ("slow-aecd04", &JobState::TimedOut { exit: signal("SIGTERM"), ended_at: 1795434941550 }),
            ("victim-16a3ef", &JobState::Killed { exit: signal("SIGTERM"), ended_at: 1795434945881 }),
            ("orphan-267816", &JobState::Orphaned),
            (
                "gone-175e45",
                &JobState::Lost {
                    reason: Some("the supervisor and the job's processes are gone and no exit status was recorded".into()),
                    ended_at: 1795434948763
                }
            ),
            ("late-6e752f", &JobState::Exited { code: 1, ended_at: 1795434949075 }),
        ]
    );
}

#[test]
fn a_format_1_registry_keeps_every_field_of_every_record() {
    let (_dir, registry) = registry_from_fixture();
    let jobs = registry.load().unwrap();

    let ok = find(&jobs, "ok-05ee0c");
    assert_eq!(ok.label, "ok");
    assert_eq!(ok.argv, ["sh", "-c", "echo hello; exit 0"]);
    assert_eq!(ok.command, "sh -c 'echo hello; exit 0'");
    assert_eq!(ok.cwd, std::path::Path::new("/home/user/project"));
    assert_eq!(ok.env.get("FOO").and_then(|v| v.to_str()), Some("bar"));
    assert_eq!(ok.owner.as_deref(), Some("agent-a"));
    assert_eq!(ok.context, Some(serde_json::json!({ "ticket": 42 })));
    assert_eq!((ok.exit_code(), ok.signal().as_deref()), (Some(0), None));
    assert_eq!(ok.main, Some(identity(26502, 457981, 512758)));
    assert_eq!(ok.supervisor, Some(identity(26501, 457981, 512757)));
    assert_eq!((ok.started_at, ok.ended_at()), (1795434940495, Some(1795434940498)));
    assert!(ok.notify);
    assert_eq!(ok.log_path, Path::new("/home/user/.local/state/proc-manager/jobs/ok-05ee0c/output.log"));
    let note = ok.notification.as_ref().expect("notification");
    assert_eq!(note.event_id, "ok-05ee0c:success");
    assert_eq!((note.state, note.attempts, note.delivered_at), (DeliveryState::Delivered, 1, Some(1795434940522)));
    assert_eq!(note.last_error, None);
    assert_eq!(ok.peak_rss_kb, Some(1540));
    assert_eq!(ok.seen_at, Some(1795434940506));
    assert_eq!((ok.timeout_ms, ok.on_exit.as_deref(), ok.error()), (None, None, None));
    assert!(ok.hooks.is_empty());

    let three = find(&jobs, "three-f3c703");
    assert_eq!(three.exit_code(), Some(3));
    assert_eq!(three.on_exit.as_deref(), Some("exit 5"));
    assert_eq!(three.hooks.len(), 1);
    let hook = &three.hooks[0];
    assert_eq!((hook.command.as_str(), hook.exit_code, hook.error.as_deref()), ("exit 5", Some(5), Some("exited 5")));
    assert_eq!(hook.duration_ms, 10);
    assert!(three.env.is_empty() && three.owner.is_none() && three.context.is_none());

    let sig = find(&jobs, "sig-8a04db");
    assert_eq!((sig.exit_code(), sig.signal().as_deref()), (None, Some("SIGKILL")));

    let nostart = find(&jobs, "nostart-2cc365");
    assert_eq!(nostart.main, None, "a start that failed has no main process");
    assert_eq!(nostart.supervisor.map(|s| s.pid), Some(26533));
    assert_eq!(nostart.error(), Some("cannot start `/nonexistent/prog`: no such file"));
    assert_eq!(nostart.notification, None);

    let slow = find(&jobs, "slow-aecd04");
    assert_eq!(slow.timeout_ms, Some(1000));
    assert!(!slow.notify, "--no-notify is kept");
    assert_eq!(slow.signal().as_deref(), Some("SIGTERM"));

    let victim = find(&jobs, "victim-16a3ef");
    assert_eq!((victim.status(), victim.signal().as_deref()), (JobStatus::Killed, Some("SIGTERM")));
    assert_eq!(victim.seen_at, None);

    let orphan = find(&jobs, "orphan-267816");
    assert_eq!((orphan.ended_at(), orphan.owner.as_deref()), (None, Some("agent-b")));
    assert_eq!(orphan.main.map(|m| m.pid), Some(26949));
    assert_eq!(orphan.notification.as_ref().map(|n| n.event_id.as_str()), Some("orphan-267816:orphaned"));

    let gone = find(&jobs, "gone-175e45");
    assert_eq!(gone.ended_at(), Some(1795434948763));
    assert_eq!(gone.error(), Some("the supervisor and the job's processes are gone and no exit status was recorded"));

    let late = find(&jobs, "late-6e752f");
    let note = late.notification.as_ref().expect("notification");
    assert_eq!((note.state, note.attempts, note.delivered_at), (DeliveryState::Pending, 1, None));
    assert_eq!(note.last_error.as_deref(), Some("nothing listens at http://127.0.0.1:41687/trigger (connection refused)"));
}

/// Nothing in the file is dropped or changed on the way in: each record
/// written back out is the record read. A field the `Job` struct no longer
/// knows, or writes differently, shows here even where the test above does
/// not look.
#[test]
fn a_format_1_record_written_back_is_the_record_read() {
    let file: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
    assert_eq!(file["version"], 1);
    let (_dir, registry) = registry_from_fixture();
    let jobs = registry.load().unwrap();
    let records = file["jobs"].as_array().unwrap();
    assert_eq!(records.len(), jobs.len());
    for (record, job) in records.iter().zip(&jobs) {
        assert_eq!(&serde_json::to_value(job).unwrap(), record, "job {}", job.id);
    }
}

/// The registry's own write path takes format-1 records in and writes them
/// out loadable: the next version reads what this one rewrote.
#[test]
fn a_format_1_registry_survives_a_registry_write() {
    let (dir, registry) = registry_from_fixture();
    let before = registry.load().unwrap();
    registry.update(|_| ()).unwrap();
    let rewritten: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(dir.path()).join("home/jobs.json")).unwrap()).unwrap();
    assert_eq!(rewritten["version"], 1);
    assert_eq!(registry.load().unwrap(), before);
}

/// What the interrupt service answered is kept beside format 1's notification
/// fields, each optional: an old record (`delivered`, no answer) loads with
/// none of them, and a new one keeps them through a write and a read.
#[cfg(unix)]
#[test]
fn a_notification_keeps_the_services_answer_and_old_ones_load_without_it() {
    let (_dir, registry) = registry_from_fixture();
    let jobs = registry.load().unwrap();
    let old = find(&jobs, "ok-05ee0c").notification.clone().expect("notification");
    assert_eq!((old.state, old.matched, old.reason.as_deref(), old.level.as_deref(), old.hint), (DeliveryState::Delivered, None, None, None, false));

    let mut job = find(&jobs, "three-f3c703").clone();
    let mut note = old.clone();
    (note.state, note.matched, note.level) = (DeliveryState::Queued, Some(2), Some("alert".to_string()));
    job.notification = Some(note.clone());
    let written = serde_json::to_value(&job).unwrap();
    assert_eq!(written["notification"]["state"], "queued");
    assert_eq!(written["notification"]["matched"], 2);
    assert_eq!(serde_json::from_value::<Job>(written).unwrap().notification, Some(note.clone()));

    for (state, word) in [(DeliveryState::Ignored, "ignored"), (DeliveryState::NoListener, "no-listener"), (DeliveryState::Failed, "failed")] {
        note.state = state;
        assert_eq!(serde_json::to_value(&note).unwrap()["state"], word);
        assert_eq!(state.as_str(), word);
    }
}

/// A job whose arguments, working directory, environment values and log
/// path are no UTF-8 (Unix's are bytes), as the registry has it.
#[cfg(unix)]
fn job_with_bytes(registry: &Registry) -> Job {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let mut job = find(&registry.load().unwrap(), "ok-05ee0c").clone();
    job.id = "latin1-000001".into();
    job.argv = vec!["ls".into(), OsString::from_vec(b"caf\xe9".to_vec())];
    job.cwd = OsString::from_vec(b"/tmp/caf\xe9".to_vec()).into();
    job.env.insert("NAME".into(), OsString::from_vec(b"\xff".to_vec()));
    job.log_path = OsString::from_vec(b"/home/\xe9/jobs/latin1-000001/output.log".to_vec()).into();
    job
}

#[cfg(unix)]
fn record_in_file(dir: &tempfile::TempDir, id: &str) -> serde_json::Value {
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(dir.path()).join("home/jobs.json")).unwrap()).unwrap();
    file["jobs"].as_array().unwrap().iter().find(|j| j["id"] == id).unwrap().clone()
}

/// Such values are kept exactly, and every field format 1 has stays a
/// string: a value that is no UTF-8 is written out there (`caf\xe9`), its
/// bytes in a side field beside it, which only this build reads.
#[cfg(unix)]
#[test]
fn bytes_that_are_no_utf8_survive_a_registry_write_and_read() {
    let (dir, registry) = registry_from_fixture();
    let job = job_with_bytes(&registry);
    registry.update(|jobs| jobs.push(job.clone())).unwrap();
    assert_eq!(find(&registry.load().unwrap(), "latin1-000001"), &job);
    let record = record_in_file(&dir, "latin1-000001");
    assert_eq!(record["argv"], serde_json::json!(["ls", "caf\\xe9"]));
    assert_eq!(record["argv_bytes"], serde_json::json!([null, [99, 97, 102, 233]]));
    assert_eq!(record["cwd"], "/tmp/caf\\xe9");
    assert_eq!(record["cwd_bytes"], serde_json::json!([47, 116, 109, 112, 47, 99, 97, 102, 233]));
    assert_eq!(record["env"]["NAME"], "\\xff");
    assert_eq!(record["env_bytes"], serde_json::json!({ "NAME": [255] }));
    assert_eq!(record["env"]["FOO"], "bar");
    assert_eq!(record["log_path"], "/home/\\xe9/jobs/latin1-000001/output.log");
    assert!(record["log_path_bytes"].is_array());
    // A UTF-8 job has none of the side fields: its record is format 1's, as before.
    let plain = record_in_file(&dir, "ok-05ee0c");
    for side in ["argv_bytes", "cwd_bytes", "env_bytes", "log_path_bytes"] {
        assert!(plain.get(side).is_none(), "{side} in a UTF-8 record");
    }
}

/// The record as the build before bytes were kept (b3bdddc) reads it: every
/// value a string, unknown fields ignored. Finding an array in one of them,
/// that build set the whole of jobs.json aside as corrupt and lost the job.
#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct EarlierRecord {
    id: String,
    label: String,
    argv: Vec<String>,
    command: String,
    cwd: String,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    status: JobStatus,
    started_at: u64,
    log_path: String,
}

#[derive(serde::Deserialize)]
#[cfg(unix)]
struct EarlierRegistry {
    version: u32,
    jobs: Vec<EarlierRecord>,
}

#[cfg(unix)]
#[test]
fn a_record_with_bytes_that_are_no_utf8_is_read_by_the_earlier_builds_record_shape() {
    let (dir, registry) = registry_from_fixture();
    let job = job_with_bytes(&registry);
    registry.update(|jobs| jobs.push(job.clone())).unwrap();
    let bytes = std::fs::read(Path::new(dir.path()).join("home/jobs.json")).unwrap();
    let earlier: EarlierRegistry = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("the earlier build cannot read it: {e}"));
    assert_eq!(earlier.version, 1);
    let record = earlier.jobs.iter().find(|j| j.id == "latin1-000001").expect("the job is there");
    assert_eq!(record.argv, ["ls", "caf\\xe9"]);
    assert_eq!(record.cwd, "/tmp/caf\\xe9");
    assert_eq!(record.env["NAME"], "\\xff");
    // The job's own job.json is read the same way.
    std::fs::create_dir_all(Path::new(dir.path()).join("home/jobs/latin1-000001")).unwrap();
    registry.write_job_file(&job, false).unwrap();
    let own = std::fs::read(Path::new(dir.path()).join("home/jobs/latin1-000001/job.json")).unwrap();
    let earlier: EarlierRecord = serde_json::from_slice(&own).unwrap_or_else(|e| panic!("the earlier build cannot read job.json: {e}"));
    assert_eq!(earlier.argv, ["ls", "caf\\xe9"]);
}
