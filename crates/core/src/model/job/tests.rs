//! Unit tests of the job record: statuses, states and their changes, how a job ended, the format-1 record, identities.

use super::*;

#[test]
fn every_status_has_one_name_that_parses_back_and_is_its_json() {
    for status in JobStatus::ALL {
        assert_eq!(JobStatus::parse(status.as_str()), Some(status));
        assert_eq!(status.to_string(), status.as_str());
        assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        assert_eq!(serde_json::from_value::<JobStatus>(status.as_str().into()).unwrap(), status);
    }
    assert_eq!(JobStatus::parse("Running"), None, "names are lowercase only");
    assert_eq!(JobStatus::parse(""), None);
}

#[test]
fn a_bad_status_is_refused_naming_every_accepted_one() {
    let error = JobStatus::parse_or_explain("done").unwrap_err();
    assert!(matches!(error, crate::Error::Usage(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "bad status `done`: expected one of running, paused, success, failed, killed, timeout, orphaned, lost, queued, skipped"
    );
    assert_eq!(JobStatus::parse_or_explain("lost").unwrap(), JobStatus::Lost);
}

#[test]
fn only_running_and_orphaned_jobs_are_unfinished() {
    let unfinished: Vec<JobStatus> = JobStatus::ALL.into_iter().filter(|s| !s.is_final()).collect();
    assert_eq!(unfinished, [JobStatus::Running, JobStatus::Paused, JobStatus::Orphaned, JobStatus::Queued]);
}

#[test]
fn the_ready_timeout_leaves_out_the_time_paused() {
    let mut job = sample_job(JobStatus::Running);
    job.started_at = 0;
    job.ready = Some(Readiness { log: Some("up".into()), port: None, url: None, timeout_ms: Some(3000) });
    job.paused_at = Some(1000);
    assert_eq!(job.not_ready_after(5000), None, "paused after 1 s of its 3: not judged while paused");
    job.end_pause(5000);
    assert_eq!((job.paused_at, job.paused_ms), (None, 4000));
    assert_eq!(job.not_ready_after(6900), None, "2.9 s of its own time");
    assert_eq!(job.not_ready_after(7000), Some(3000));
    job.paused_at = Some(7500);
    job.end_pause(7600);
    assert_eq!(job.paused_ms, 4100, "pauses add up");
}

#[test]
fn a_paused_job_is_recorded_running_with_its_time_and_shown_paused() {
    let mut job = sample_job(JobStatus::Running);
    job.paused_at = Some(1_700_000_000_000);
    assert_eq!((job.status(), job.shown_status()), (JobStatus::Running, JobStatus::Paused));
    let value = serde_json::to_value(&job).unwrap();
    // `running` on disk: a version without pause reads it as a running job.
    assert_eq!((value["status"].as_str(), value["paused_at"].as_u64()), (Some("running"), Some(1_700_000_000_000)));
    let back: Job = serde_json::from_value(value).unwrap();
    assert_eq!(back, job);
    job.state = JobState::Killed { exit: None, ended_at: 7 };
    assert_eq!(job.shown_status(), JobStatus::Killed, "only a running job is shown paused");
    let mut hand_edited = serde_json::to_value(sample_job(JobStatus::Running)).unwrap();
    hand_edited["status"] = "paused".into();
    assert_eq!(serde_json::from_value::<Job>(hand_edited).unwrap().state, JobState::Running);
}

#[test]
fn signal_names_and_numbers_map_both_ways() {
    assert_eq!(signal_name(crate::model::signals::SIGTERM), "SIGTERM");
    assert_eq!(signal_name(crate::model::signals::SIGKILL), "SIGKILL");
    assert_eq!(signal_number("SIGKILL"), Some(9));
    assert_eq!(signal_number("SIGTERM"), Some(15));
    for n in 1..32 {
        assert_eq!(signal_number(&signal_name(n)), Some(n), "signal {n} ({})", signal_name(n));
    }
    // Numbers without a name here are written as such and read back.
    assert_eq!(signal_name(64), "SIG64");
    assert_eq!(signal_number("SIG64"), None, "only 1..31 are read back");
    assert_eq!(signal_number("TERM"), None);
    assert_eq!(signal_number(""), None);
}

fn ended(state: JobState) -> Job {
    sample_in(state)
}

const T: u64 = 1_000;

#[test]
fn how_it_ended_says_the_exit_code_or_the_signal() {
    assert_eq!(how_it_ended(&ended(JobState::Exited { code: 3, ended_at: T })), "exit 3");
    assert_eq!(how_it_ended(&ended(JobState::Exited { code: 0, ended_at: T })), "exit 0");
    assert_eq!(how_it_ended(&ended(JobState::Signalled { signal: "SIGKILL".into(), ended_at: T })), "signal SIGKILL");
    let killed = |exit| ended(JobState::Killed { exit, ended_at: T });
    assert_eq!(how_it_ended(&killed(Some(Exit::Signal("SIGTERM".into())))), "signal SIGTERM");
    assert_eq!(how_it_ended(&killed(Some(Exit::Code(0)))), "exit 0", "it exited by itself while being killed");
    assert_eq!(how_it_ended(&killed(None)), "no exit status");
    let timed_out = ended(JobState::TimedOut { exit: Some(Exit::Signal("SIGKILL".into())), ended_at: T });
    assert_eq!(how_it_ended(&timed_out), "signal SIGKILL");
}

#[test]
fn how_it_ended_writes_out_control_characters_in_a_signal_name() {
    let job = ended(JobState::Signalled { signal: "SIGTERM\u{1b}[2J".into(), ended_at: T });
    assert_eq!(how_it_ended(&job), "signal SIGTERM\\x1b[2J");
}

#[test]
fn how_it_ended_says_could_not_start_only_for_a_start_failure_without_main_process() {
    let mut job = ended(JobState::FailedToStart { error: "command not found".into(), ended_at: T });
    job.main = None;
    assert_eq!(how_it_ended(&job), "could not start");
    let mut killed = ended(JobState::Killed { exit: None, ended_at: T });
    killed.main = None;
    assert_eq!(how_it_ended(&killed), "no exit status", "killed before its main process was recorded");
    let ran = ended(JobState::FailedToStart { error: "its supervisor died".into(), ended_at: T });
    assert_eq!(how_it_ended(&ran), "no exit status", "an error beside a main process is no start failure");
}

#[test]
fn how_it_ended_for_a_lost_job_names_its_supervisor_when_known() {
    let mut job = ended(JobState::Lost { reason: None, ended_at: T });
    assert_eq!(how_it_ended(&job), "supervisor pid 4241 gone, no exit status recorded");
    job.supervisor = None;
    assert_eq!(how_it_ended(&job), "supervisor gone, no exit status recorded");
    job.main = None;
    assert_eq!(how_it_ended(&job), "supervisor gone, no exit status recorded", "lost, not `could not start`");
}

#[test]
fn a_shell_reads_an_exit_code_a_signal_or_our_sigterm() {
    let code = |state: JobState| state.shell_exit_code();
    assert_eq!(code(JobState::Exited { code: 0, ended_at: T }), 0);
    assert_eq!(code(JobState::Exited { code: 3, ended_at: T }), 3);
    assert_eq!(code(JobState::Signalled { signal: "SIGKILL".into(), ended_at: T }), 137);
    assert_eq!(code(JobState::Signalled { signal: "SIG64".into(), ended_at: T }), 1, "a signal without a number here");
    assert_eq!(code(JobState::FailedToStart { error: "no such file".into(), ended_at: T }), 1);
    assert_eq!(code(JobState::Lost { reason: None, ended_at: T }), 1);
    for ours in [
        |exit| JobState::Killed { exit, ended_at: T },
        |exit| JobState::TimedOut { exit, ended_at: T },
    ] {
        assert_eq!(code(ours(None)), 143, "ended by us, its own end unseen: as SIGTERM");
        assert_eq!(code(ours(Some(Exit::Code(0)))), 143, "a clean exit under our SIGTERM is still our end");
        assert_eq!(code(ours(Some(Exit::Code(2)))), 2);
        assert_eq!(code(ours(Some(Exit::Signal("SIGKILL".into())))), 137);
        assert_eq!(code(ours(Some(Exit::Signal("SIG64".into())))), 143);
    }
}

#[test]
fn each_state_has_its_status_and_only_ended_ones_an_end_time() {
    let cases = [
        (JobState::Running, JobStatus::Running),
        (JobState::Orphaned, JobStatus::Orphaned),
        (JobState::Exited { code: 0, ended_at: T }, JobStatus::Success),
        (JobState::Exited { code: 1, ended_at: T }, JobStatus::Failed),
        (JobState::Signalled { signal: "SIGSEGV".into(), ended_at: T }, JobStatus::Failed),
        (JobState::FailedToStart { error: "x".into(), ended_at: T }, JobStatus::Failed),
        (JobState::Killed { exit: None, ended_at: T }, JobStatus::Killed),
        (JobState::TimedOut { exit: None, ended_at: T }, JobStatus::Timeout),
        (JobState::Lost { reason: None, ended_at: T }, JobStatus::Lost),
    ];
    for (state, status) in cases {
        assert_eq!(state.status(), status, "{state:?}");
        assert_eq!(state.ended_at().is_some(), status.is_final(), "{state:?}");
        assert_eq!(state.is_final(), status.is_final(), "{state:?}");
    }
}

#[test]
fn a_supervisor_records_the_end_of_a_kill_or_timeout_as_theirs_keeping_the_exit() {
    let exit = Some(Exit::Code(0));
    assert_eq!(JobState::ended(EndedBy::Itself, exit.clone(), T), JobState::Exited { code: 0, ended_at: T });
    assert_eq!(JobState::ended(EndedBy::Kill, exit.clone(), T), JobState::Killed { exit: exit.clone(), ended_at: T });
    assert_eq!(JobState::ended(EndedBy::Timeout, exit.clone(), T), JobState::TimedOut { exit, ended_at: T });
    let signalled = JobState::ended(EndedBy::Itself, Some(Exit::Signal("SIGSEGV".into())), T);
    assert_eq!(signalled, JobState::Signalled { signal: "SIGSEGV".into(), ended_at: T });
    assert_eq!(JobState::ended(EndedBy::Itself, None, T).status(), JobStatus::Lost, "no exit status: lost, not failed");
}

#[test]
fn an_ended_job_never_runs_again_and_keeps_how_it_ended() {
    let running = JobState::Running;
    let orphaned = JobState::Orphaned;
    let exited = JobState::Exited { code: 3, ended_at: T };
    let killed = JobState::Killed { exit: None, ended_at: T + 1 };
    let lost = JobState::Lost { reason: Some("gone".into()), ended_at: T };
    let others = [
        JobState::Signalled { signal: "SIGKILL".into(), ended_at: T },
        JobState::FailedToStart { error: "x".into(), ended_at: T },
        JobState::TimedOut { exit: None, ended_at: T },
        exited.clone(),
        killed.clone(),
    ];
    // A running job may become anything but running; an orphan only ends.
    for next in others.iter().chain([&orphaned, &lost]) {
        assert!(running.can_become(next), "running -> {next:?}");
    }
    assert!(!running.can_become(&running));
    assert!(!orphaned.can_become(&running) && !orphaned.can_become(&orphaned), "nothing brings a supervisor back");
    for next in others.iter().chain([&lost]) {
        assert!(orphaned.can_become(next), "orphaned -> {next:?}");
    }
    // An end stays; a job lost while we killed it is ours.
    for ended in others.iter().chain([&lost]) {
        for next in [&running, &orphaned, &exited, &lost] {
            assert!(!ended.can_become(next), "{ended:?} -> {next:?}");
        }
    }
    assert!(lost.can_become(&killed));
    for ended in &others {
        assert!(!ended.can_become(&killed), "a kill after {ended:?} keeps it");
    }

    let mut job = ended(exited.clone());
    assert!(!job.change_state(killed.clone()), "a kill recorded after the exit");
    assert_eq!((job.state.clone(), job.exit_code()), (exited, Some(3)), "keeps the exit");
    let mut job = ended(JobState::Running);
    assert!(job.change_state(killed.clone()));
    assert_eq!(job.state, killed);
    assert!(!job.change_state(JobState::Running));
    assert_eq!(job.ended_at(), Some(T + 1));
}

#[test]
fn an_announcement_claimed_for_orphaned_or_lost_describes_the_job_so() {
    let lost = ended(JobState::Lost { reason: Some("gone".into()), ended_at: T });
    assert_eq!(lost.clone().as_claimed(JobStatus::Orphaned).state, JobState::Orphaned);
    assert_eq!(lost.clone().as_claimed(JobStatus::Lost), lost, "as recorded");
    let killed = ended(JobState::Killed { exit: None, ended_at: T });
    assert_eq!(killed.clone().as_claimed(JobStatus::Lost).state, JobState::Lost { reason: None, ended_at: T });
    let exited = ended(JobState::Exited { code: 2, ended_at: T });
    assert_eq!(exited.clone().as_claimed(JobStatus::Success), exited, "an exit it cannot invent");
}

fn record(status: &str, exit_code: Option<i32>, signal: Option<&str>, ended_at: Option<u64>, error: Option<&str>) -> Job {
    let mut value = serde_json::to_value(sample_job(JobStatus::Running)).unwrap();
    value["status"] = status.into();
    value["exit_code"] = serde_json::json!(exit_code);
    value["signal"] = serde_json::json!(signal);
    value["ended_at"] = serde_json::json!(ended_at);
    if let Some(error) = error {
        value["error"] = error.into();
    }
    serde_json::from_value(value).unwrap()
}

#[test]
fn format_1_fields_read_as_the_state_they_describe_and_write_back_the_same() {
    let cases = [
        (("running", None, None, None, None), JobState::Running),
        (("orphaned", None, None, None, None), JobState::Orphaned),
        (("success", Some(0), None, Some(T), None), JobState::Exited { code: 0, ended_at: T }),
        (("failed", Some(3), None, Some(T), None), JobState::Exited { code: 3, ended_at: T }),
        (("failed", None, Some("SIGKILL"), Some(T), None), JobState::Signalled { signal: "SIGKILL".into(), ended_at: T }),
        (("failed", None, None, Some(T), Some("no such file")), JobState::FailedToStart { error: "no such file".into(), ended_at: T }),
        (("killed", None, Some("SIGTERM"), Some(T), None), JobState::Killed { exit: Some(Exit::Signal("SIGTERM".into())), ended_at: T }),
        (("killed", Some(0), None, Some(T), None), JobState::Killed { exit: Some(Exit::Code(0)), ended_at: T }),
        (("timeout", None, None, Some(T), None), JobState::TimedOut { exit: None, ended_at: T }),
        (("lost", None, None, Some(T), Some("gone")), JobState::Lost { reason: Some("gone".into()), ended_at: T }),
        (("lost", None, None, Some(T), None), JobState::Lost { reason: None, ended_at: T }),
        // Without any detail (no version writes this): read back the same.
        (("failed", None, None, Some(T), None), JobState::FailedToStart { error: String::new(), ended_at: T }),
    ];
    for ((status, code, signal, ended_at, error), state) in cases {
        let job = record(status, code, signal, ended_at, error);
        assert_eq!(job.state, state, "{status} {code:?} {signal:?} {error:?}");
        let written = serde_json::to_value(&job).unwrap();
        assert_eq!(written["status"], status);
        assert_eq!(written["exit_code"], serde_json::json!(code));
        assert_eq!(written["signal"], serde_json::json!(signal));
        assert_eq!(written["ended_at"], serde_json::json!(ended_at));
        assert_eq!(written.get("error").and_then(|e| e.as_str()), error, "{status}");
    }
}

#[test]
fn an_error_beside_a_state_without_one_is_kept_as_a_note() {
    let killed = record("killed", None, Some("SIGTERM"), Some(T), Some("edited by hand"));
    assert_eq!(killed.state, JobState::Killed { exit: Some(Exit::Signal("SIGTERM".into())), ended_at: T });
    assert_eq!((killed.note.as_deref(), killed.error()), (Some("edited by hand"), Some("edited by hand")));
    assert_eq!(serde_json::to_value(&killed).unwrap()["error"], "edited by hand", "written back as it was");
    let lost = record("lost", None, None, Some(T), Some("gone"));
    assert_eq!((lost.note.as_deref(), lost.error()), (None, Some("gone")), "a lost job's reason is its state's");
}

#[test]
fn queued_and_skipped_records_read_back_with_what_they_wait_for() {
    let mut job = sample_in(JobState::Queued);
    job.waits = Some(Waits { queue: Some("heavy".into()), priority: 3, after: vec!["a-1".into()], after_any: true, queued_at: 7, ..Waits::default() });
    let written = serde_json::to_value(&job).unwrap();
    assert_eq!(written["status"], "queued");
    assert_eq!(written["waits"], serde_json::json!({"queue": "heavy", "priority": 3, "after": ["a-1"], "after_any": true, "queued_at": 7}));
    assert_eq!(serde_json::from_value::<Job>(written).unwrap(), job);
    let skipped = record("skipped", None, None, Some(T), Some("skipped: a-1 failed (exit 1)"));
    assert_eq!(skipped.state, JobState::Skipped { reason: "skipped: a-1 failed (exit 1)".into(), ended_at: T });
    assert_eq!(skipped.error(), Some("skipped: a-1 failed (exit 1)"));
    assert_eq!(how_it_ended(&skipped), "never started (a-1 failed (exit 1))");
    assert_eq!(skipped.state.shell_exit_code(), 1, "never a success");
    assert!(serde_json::to_value(sample_job(JobStatus::Running)).unwrap().get("waits").is_none(), "absent unless it waited");
    let mut killed_queued = sample_in(JobState::Killed { exit: None, ended_at: T });
    (killed_queued.main, killed_queued.waits) = (None, Some(Waits { queued_at: 7, ..Waits::default() }));
    assert_eq!(how_it_ended(&killed_queued), "while queued, never started");
}

#[test]
fn a_queued_job_starts_once_or_ends_without_running() {
    let queued = JobState::Queued;
    assert!(queued.can_become(&JobState::Running));
    assert!(queued.can_become(&JobState::Killed { exit: None, ended_at: T }));
    assert!(queued.can_become(&JobState::Skipped { reason: "x".into(), ended_at: T }));
    assert!(queued.can_become(&JobState::FailedToStart { error: "x".into(), ended_at: T }));
    assert!(!queued.can_become(&JobState::Lost { reason: None, ended_at: T }), "no process to lose");
    assert!(!queued.can_become(&JobState::Orphaned) && !queued.can_become(&JobState::Queued));
    assert!(!JobState::Running.can_become(&JobState::Queued), "nothing goes back to the queue");
    assert!(!JobState::Skipped { reason: "x".into(), ended_at: T }.can_become(&JobState::Running));
}

#[test]
fn a_record_whose_fields_contradict_its_status_reads_by_its_status() {
    let running = record("running", Some(5), Some("SIGTERM"), Some(T), None);
    assert_eq!(running.state, JobState::Running, "no running job has an exit code");
    let written = serde_json::to_value(&running).unwrap();
    assert_eq!((&written["exit_code"], &written["ended_at"]), (&serde_json::Value::Null, &serde_json::Value::Null));
    let lost = record("lost", Some(2), None, None, None);
    assert_eq!(lost.state, JobState::Lost { reason: None, ended_at: lost.started_at }, "ended when it started");
    assert_eq!(record("failed", Some(0), None, Some(T), None).status(), JobStatus::Success);
}

#[test]
fn identities_match_on_pid_and_start_time_and_on_inode_and_boot_where_both_know_them() {
    let scanned = ProcessIdentity::from_stat(500, 7);
    let opened = ProcessIdentity { pid: 500, start_ticks: 7, pidfs_ino: Some(11), boot: Some(3) };
    assert!(scanned.matches(&opened) && opened.matches(&scanned), "unknown inode and boot do not disagree");
    assert!(opened.matches(&opened));
    assert!(!opened.matches(&ProcessIdentity { pidfs_ino: Some(12), ..opened }), "pid reused within one tick");
    assert!(!opened.matches(&ProcessIdentity { boot: Some(4), ..opened }), "another boot");
    assert!(!scanned.matches(&ProcessIdentity::from_stat(500, 8)), "pid reused");
    assert!(!scanned.matches(&ProcessIdentity::from_stat(501, 7)));
}

#[test]
fn no_job_process_can_be_pid_0_or_1_or_past_i32_max() {
    let possible = |pid| ProcessIdentity::from_stat(pid, 1).is_possible_job_process();
    assert!(!possible(0) && !possible(1));
    assert!(possible(2) && possible(i32::MAX as u32));
    assert!(!possible(i32::MAX as u32 + 1) && !possible(u32::MAX));

    let mut job = sample_job(JobStatus::Running);
    assert_eq!(job.impossible_identity(), None);
    job.supervisor = Some(ProcessIdentity::from_stat(1, 1));
    let why = job.impossible_identity().unwrap();
    assert!(why.contains("pid 1 as the job's supervisor") && why.contains("nothing was signalled"), "{why}");
    job.main = Some(ProcessIdentity::from_stat(0, 1));
    assert!(job.impossible_identity().unwrap().contains("pid 0 as the job's main process"), "main is named first");
}

#[test]
fn a_job_lasts_until_it_ended_or_until_now() {
    let mut job = sample_job(JobStatus::Running);
    job.started_at = 1_000;
    assert_eq!(job.duration_ms(1_500), 500);
    job.state = JobState::Exited { code: 0, ended_at: 1_200 };
    assert_eq!(job.duration_ms(9_999), 200);
    job.state = JobState::Running;
    assert_eq!(job.duration_ms(900), 0, "a clock set back gives no negative runtime");
    assert_eq!(job.pid(), Some(4242));
}
