//! Plain job records for unit tests anywhere in the crate.

use super::*;

/// A plain record for unit tests anywhere in the crate: a job that ran
/// `make -j2` for 2h13m as pid 4242 under supervisor 4241, ended now, in
/// the plainest state of `status` (`failed`: exit 1); tests set what they
/// look at.
pub(crate) fn sample_job(status: JobStatus) -> Job {
    let now = crate::now_ms();
    let state = match status {
        JobStatus::Running | JobStatus::Paused => JobState::Running,
        JobStatus::Orphaned => JobState::Orphaned,
        JobStatus::Success => JobState::Exited { code: 0, ended_at: now },
        JobStatus::Failed => JobState::Exited { code: 1, ended_at: now },
        JobStatus::Killed => JobState::Killed { exit: None, ended_at: now },
        JobStatus::Timeout => JobState::TimedOut { exit: None, ended_at: now },
        JobStatus::Lost => JobState::Lost { reason: None, ended_at: now },
        JobStatus::Queued => JobState::Queued,
        JobStatus::Skipped => JobState::Skipped { reason: "skipped: build-000000 failed (exit 1)".into(), ended_at: now },
    };
    let mut job = sample_in(state);
    if status == JobStatus::Paused {
        job.paused_at = Some(now);
    }
    job
}

/// The sample job in this state (for tests).
pub(crate) fn sample_in(state: JobState) -> Job {
    // The state's own end where it has a real one (`sample_job`'s): a second
    // clock read could fall a millisecond later and make the run 2h13m plus
    // a tick. A made-up end (7) is no time to count back from.
    let run_ms = 2 * 3_600_000 + 13 * 60_000;
    let now = state.ended_at().filter(|&end| end > run_ms).unwrap_or_else(crate::now_ms);
    Job {
        id: "build-3f2a1c".into(),
        label: "build".into(),
        argv: vec!["make".into(), "-j2".into()],
        command: "make -j2".into(),
        cwd: "/src".into(),
        env: Default::default(),
        owner: None,
        context: None,
        state,
        note: None,
        main: Some(ProcessIdentity::from_stat(4242, 100)),
        supervisor: Some(ProcessIdentity::from_stat(4241, 99)),
        started_at: now - run_ms,
        timeout_ms: None,
        notify: true,
        on_exit: None,
        log_path: "/tmp/x/output.log".into(),
        notification: None,
        hooks: Vec::new(),
        peak_rss_kb: None,
        seen_at: None,
        ready: None,
        ready_at: None,
        ready_blocked: None,
        notify_on: Vec::new(),
        restart: None,
        stdin_pipe: false,
        wake: None,
        waits: None,
        tie: None,
        nice: None,
        paused_at: None,
        paused_ms: 0,
        rerun_of: None,
        session: None,
        outlive_session: false,
    }
}

/// A sample job of `status` that ended with this exit code or signal, where
/// that status can have one (for tests).
pub(crate) fn sample_ended(status: JobStatus, exit_code: Option<i32>, signal: Option<&str>) -> Job {
    let mut job = sample_job(status);
    let ended_at = job.ended_at().unwrap_or_else(crate::now_ms);
    let exit = match (exit_code, signal) {
        (Some(code), _) => Some(Exit::Code(code)),
        (None, Some(signal)) => Some(Exit::Signal(signal.to_string())),
        (None, None) => None,
    };
    job.state = match (status, exit) {
        (JobStatus::Killed, exit) => JobState::Killed { exit, ended_at },
        (JobStatus::Timeout, exit) => JobState::TimedOut { exit, ended_at },
        (JobStatus::Success | JobStatus::Failed, Some(exit)) => JobState::ended(EndedBy::Itself, Some(exit), ended_at),
        (JobStatus::Failed, None) => JobState::FailedToStart { error: String::new(), ended_at },
        (_, _) => job.state,
    };
    assert_eq!(job.status(), status, "no {status} job ends with {exit_code:?} / {signal:?}");
    job
}
