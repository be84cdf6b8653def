//! Unit tests of the views: exit statuses handed on, field names, snapshots read back, waits.

use super::*;
use crate::model::job::{sample_ended as ended, sample_job, JobStatus};
use crate::verbs::wait::WaitOutcome;

#[test]
fn a_job_that_exited_hands_on_its_own_exit_code() {
    assert_eq!(shell_exit_code(&ended(JobStatus::Success, Some(0), None)), 0);
    assert_eq!(shell_exit_code(&ended(JobStatus::Failed, Some(3), None)), 3);
    assert_eq!(shell_exit_code(&ended(JobStatus::Failed, Some(255), None)), 255);
}

#[test]
fn a_job_that_died_of_a_signal_hands_on_128_plus_the_signal() {
    assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, Some("SIGKILL"))), 137);
    assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, Some("SIGSEGV"))), 139);
    assert_eq!(shell_exit_code(&ended(JobStatus::Killed, None, Some("SIGKILL"))), 137, "killed after the grace period");
    assert_eq!(shell_exit_code(&ended(JobStatus::Timeout, None, Some("SIGTERM"))), 143);
}

#[test]
fn a_job_ended_by_us_is_never_a_success() {
    // It caught SIGTERM and exited 0, or no status was recorded at all.
    assert_eq!(shell_exit_code(&ended(JobStatus::Killed, Some(0), None)), 143);
    assert_eq!(shell_exit_code(&ended(JobStatus::Timeout, Some(0), None)), 143);
    assert_eq!(shell_exit_code(&ended(JobStatus::Killed, None, None)), 143);
    assert_eq!(shell_exit_code(&ended(JobStatus::Timeout, None, None)), 143);
    // Its own non-zero code on the way out is handed on as it is.
    assert_eq!(shell_exit_code(&ended(JobStatus::Killed, Some(2), None)), 2);
}

#[test]
fn a_job_without_exit_status_or_known_signal_hands_on_1() {
    assert_eq!(shell_exit_code(&ended(JobStatus::Lost, None, None)), 1);
    assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, None)), 1, "could not start");
    assert_eq!(shell_exit_code(&ended(JobStatus::Failed, None, Some("SIG64"))), 1, "a signal name not read back");
    assert_eq!(shell_exit_code(&ended(JobStatus::Orphaned, None, None)), 1);
}

#[test]
fn memory_is_shown_in_mib_to_one_decimal() {
    assert_eq!(kb_to_mb(0), 0.0);
    assert_eq!(kb_to_mb(1024), 1.0);
    assert_eq!(kb_to_mb(1536), 1.5);
    assert_eq!(kb_to_mb(1540), 1.5);
    assert_eq!(kb_to_mb(1100), 1.1);
}

#[test]
fn a_job_view_has_the_fields_spec_names_in_camel_case_and_leaves_out_what_it_lacks() {
    let mut job = ended(JobStatus::Failed, Some(3), None);
    job.peak_rss_kb = Some(2048);
    job.owner = Some("agent-1".into());
    job.context = Some(serde_json::json!({ "ticket": null }));
    job.note = Some("boom".into());
    let value = serde_json::to_value(JobView::from(&job)).unwrap();
    let keys = |value: &serde_json::Value| {
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort_unstable();
        keys
    };
    assert_eq!(
        keys(&value),
        [
            "command", "context", "cwd", "durationMs", "endedAt", "error", "exitCode", "hooks", "jobId", "label",
            "logPath", "owner", "peakRssMb", "pid", "startedAt", "status"
        ]
    );
    assert_eq!(value["status"], "failed");
    assert_eq!(value["exitCode"], 3);
    assert_eq!(value["pid"], 4242);
    assert_eq!(value["peakRssMb"], 2.0);
    assert_eq!(value["context"], serde_json::json!({ "ticket": null }), "JSON data keeps its nulls");
    assert_eq!(value["durationMs"], 2 * 3_600_000 + 13 * 60_000);

    let running = serde_json::to_value(JobView::from(&sample_job(JobStatus::Running))).unwrap();
    for absent in ["exitCode", "signal", "endedAt", "notification", "peakRssMb"] {
        assert!(running.get(absent).is_none(), "{absent} is left out, not null: {running}");
    }
}

#[test]
fn a_snapshot_reads_back_what_it_wrote_even_with_its_times_as_floats() {
    let json = r#"{"timestamp": 1795440671592.0, "totalMemoryMb": 3,
        "processes": [{"pid": 7, "ppid": 1, "command": "sleep 1", "memoryMb": 1.5, "startTime": 1795440671000.0, "isMcp": false}]}"#;
    let snapshot: SnapshotView = serde_json::from_str(json).unwrap();
    assert_eq!((snapshot.timestamp, snapshot.processes[0].start_time), (1_795_440_671_592, 1_795_440_671_000));
    let back: SnapshotView = serde_json::from_value(serde_json::to_value(&snapshot).unwrap()).unwrap();
    assert_eq!(back.processes[0].start_time, 1_795_440_671_000);
    assert!(serde_json::from_str::<ProcessInfoView>(
        r#"{"pid": 7, "ppid": 1, "command": "x", "memoryMb": 1, "startTime": 1.5, "isMcp": false}"#
    )
    .is_err());
}

#[test]
fn each_job_of_a_wait_says_whether_the_wait_gave_up_on_it() {
    let running = sample_job(JobStatus::Running);
    let done = ended(JobStatus::Failed, Some(3), None);
    let view = WaitView::from(&WaitOutcome { jobs: vec![done, running], timed_out: true });
    assert_eq!((view.timed_out, view.shell_exit_code), (true, 124));
    let each: Vec<(bool, i32)> = view.jobs.iter().map(|j| (j.timed_out, j.shell_exit_code)).collect();
    assert_eq!(each, [(false, 3), (true, 124)]);
    let value = serde_json::to_value(&view.jobs[0]).unwrap();
    assert_eq!((value["jobId"].as_str(), value["timedOut"].as_bool()), (Some("build-3f2a1c"), Some(false)), "{value}");
}

#[test]
fn a_wait_exits_124_when_its_own_time_limit_passes_first() {
    let running = sample_job(JobStatus::Running);
    assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![running.clone()], timed_out: true }), 124);
    let done = ended(JobStatus::Success, Some(0), None);
    assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![done, running], timed_out: true }), 124);
}

#[test]
fn a_wait_for_one_job_exits_as_the_job_did() {
    for job in [
        ended(JobStatus::Success, Some(0), None),
        ended(JobStatus::Failed, Some(3), None),
        ended(JobStatus::Killed, Some(0), None),
        ended(JobStatus::Failed, None, Some("SIGKILL")),
        ended(JobStatus::Lost, None, None),
    ] {
        let code = shell_exit_code(&job);
        assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![job], timed_out: false }), code);
    }
}

#[test]
fn a_wait_for_several_jobs_exits_0_only_when_all_succeeded() {
    let ok = || ended(JobStatus::Success, Some(0), None);
    assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![ok(), ok()], timed_out: false }), 0);
    let failed = ended(JobStatus::Failed, Some(3), None);
    assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![ok(), failed], timed_out: false }), 1, "1, not the 3");
    let killed = ended(JobStatus::Killed, None, Some("SIGTERM"));
    assert_eq!(wait_exit_code(&WaitOutcome { jobs: vec![killed, ok()], timed_out: false }), 1);
}
