//! Restart on failure (`--restart on-failure|always`): when the main process
//! ends, whether to start it again and after how long, and the separator
//! line the log gets at each restart. The supervisor's loop does the rest
//! (killing what is left of the ended run's tree, launching again); this is
//! the part that needs no process to test.
//!
//! The schedule: the first restart waits `delay`, each further one in a row
//! twice as long as the one before, up to `cap(delay)` (30 s, or `delay`
//! itself when that is longer). A run that lasted `healthy_after(delay)`
//! (10 s, or 10 × `delay` when that is longer) was healthy: the next
//! restart starts the schedule over, and `max_restarts` counts the restarts
//! in a row again from 0, so a server that crashes once a day restarts for
//! ever, and one that crashes at start gives up after `max_restarts`.

use crate::model::job::{Exit, Job, Restart, RestartPolicy};
use crate::store::config::NotifyConfig;
use crate::supervise::notify;
use std::time::Duration;

/// The longest a restart ever waits, unless the first delay is longer.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A run at least this long (or 10 × the delay) resets the backoff.
pub const HEALTHY_RUN: Duration = Duration::from_secs(10);

pub fn cap(delay: Duration) -> Duration {
    delay.max(BACKOFF_CAP)
}

pub fn healthy_after(delay: Duration) -> Duration {
    (delay.saturating_mul(10)).max(HEALTHY_RUN)
}

/// The wait before the `in_a_row`-th restart in a row (1 = the first).
pub fn backoff(delay: Duration, in_a_row: u32) -> Duration {
    let doublings = in_a_row.saturating_sub(1).min(32);
    delay.saturating_mul(1u32 << doublings.min(31)).min(cap(delay))
}

/// What to do once a run has ended by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start again after `delay`; this is restart number `number` (1-based, of all).
    Restart { number: u32, delay: Duration },
    /// The policy does not restart after this end (an exit 0 under `on-failure`).
    Done,
    /// `max_restarts` restarts in a row were not enough.
    GiveUp,
}

/// The supervisor's state of a job's restarts between runs.
#[derive(Debug, Clone)]
pub struct Restarter {
    pub policy: RestartPolicy,
    pub max_restarts: u32,
    pub delay: Duration,
    /// Restarts since the last healthy run.
    in_a_row: u32,
}

impl Restarter {
    pub fn new(restart: &Restart) -> Restarter {
        Restarter {
            policy: restart.policy,
            max_restarts: restart.max_restarts,
            delay: Duration::from_millis(restart.delay_ms),
            in_a_row: 0,
        }
    }

    /// A run that lasted `ran_for` ended with `exit`; `restarts_so_far` of
    /// the job's whole life. Counts the restart when it decides one.
    pub fn after_run(&mut self, exit: &Exit, ran_for: Duration, restarts_so_far: u32) -> Decision {
        let clean = *exit == Exit::Code(0);
        if clean && self.policy == RestartPolicy::OnFailure {
            return Decision::Done;
        }
        if ran_for >= healthy_after(self.delay) {
            self.in_a_row = 0;
        }
        if self.in_a_row >= self.max_restarts {
            return Decision::GiveUp;
        }
        self.in_a_row += 1;
        Decision::Restart { number: restarts_so_far + 1, delay: backoff(self.delay, self.in_a_row) }
    }
}

/// `exit 1`, `signal SIGSEGV`: how a run ended, for the record and the log.
/// Records a restart (its count, why) or a new run (its main process,
/// readiness): in job.json first, then in the registry if its lock comes
/// soon (else the next write takes job.json's record in). The error is
/// job.json's, for the supervisor to log in its own way.
pub fn save_run(registry: &crate::store::registry::Registry, job: &Job) -> crate::Result<()> {
    let written = registry.write_job_file(job, false);
    let (restart, main, ready_at) = (job.restart.clone(), job.main, job.ready_at);
    let _ = registry.modify_with(crate::store::registry::Patience::Brief, &job.id, |job| {
        job.restart = restart;
        job.main = main;
        job.ready_at = ready_at;
    });
    written
}

pub fn reason(exit: &Exit) -> String {
    match exit {
        Exit::Code(code) => format!("exit {code}"),
        Exit::Signal(signal) => format!("signal {signal}"),
    }
}

/// The line the log gets between two runs (with its newline).
pub fn separator(number: u32, reason: &str, delay: Duration) -> String {
    format!("--- run-bg: restart {number} after {reason} (delay {}) ---\n", crate::model::duration::format_duration_ms(delay.as_millis() as u64))
}

/// The event announcing restart `number` when `notify.on_restart` asks for
/// it: the data of the end's event, with `status: "restarted"`, its own
/// `eventId` (`<jobId>:restart-<n>`), the ended run's exit code, and what
/// happens next in `outcome` and `message`. At the level of a failure.
pub fn restart_event(home: &crate::store::paths::Home, config: &NotifyConfig, job: &Job, number: u32, exit: &Exit, delay: Duration) -> serde_json::Value {
    let mut body = notify::event_body(home, config, job);
    body["level"] = config.level_for("failed").into();
    let why = reason(exit);
    let command = crate::model::text::cut(&crate::model::text::visible(&job.command).replace('\n', " "), 80);
    let next = crate::model::duration::format_duration_ms(delay.as_millis() as u64);
    let data = &mut body["data"];
    data["eventId"] = format!("{}:restart-{number}", job.id).into();
    data["status"] = "restarted".into();
    data["exitCode"] = match exit {
        Exit::Code(code) => *code,
        Exit::Signal(name) => crate::model::job::signal_number(name).map_or(-1, |n| 128 + n),
    }
    .into();
    data["signal"] = match exit {
        Exit::Signal(name) => name.clone(),
        Exit::Code(_) => String::new(),
    }
    .into();
    data["outcome"] = format!("restart {number} after {why}").into();
    data["message"] = notify::defuse_templates(&format!(
        "run-bg: {} ({command}) restarted after {why} (restart {number}, next run in {next}); run-bg check {}",
        job.id, job.id
    ))
    .into();
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn restarter(policy: RestartPolicy, max_restarts: u32, delay_ms: u64) -> Restarter {
        Restarter::new(&Restart { policy, max_restarts, delay_ms, count: 0, last_reason: None, last_at: None })
    }

    #[test]
    fn the_delay_doubles_from_the_first_up_to_the_cap() {
        let waits: Vec<u64> = (1..=8).map(|n| backoff(S, n).as_millis() as u64).collect();
        assert_eq!(waits, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        let short: Vec<u64> = (1..=4).map(|n| backoff(Duration::from_millis(100), n).as_millis() as u64).collect();
        assert_eq!(short, [100, 200, 400, 800]);
        assert_eq!(backoff(Duration::from_secs(60), 1), Duration::from_secs(60), "a first delay over the cap is kept");
        assert_eq!(backoff(Duration::from_secs(60), 5), Duration::from_secs(60), "and never grows");
        assert_eq!(backoff(Duration::ZERO, 9), Duration::ZERO);
        assert_eq!(backoff(S, u32::MAX), BACKOFF_CAP, "no overflow after many restarts");
    }

    #[test]
    fn a_healthy_run_is_ten_seconds_or_ten_delays() {
        assert_eq!(healthy_after(S), Duration::from_secs(10));
        assert_eq!(healthy_after(Duration::from_millis(100)), Duration::from_secs(10));
        assert_eq!(healthy_after(Duration::from_secs(3)), Duration::from_secs(30));
    }

    #[test]
    fn restarts_in_a_row_back_off_then_give_up() {
        let mut r = restarter(RestartPolicy::OnFailure, 3, 500);
        let quick = Duration::from_millis(50);
        let fail = Exit::Code(1);
        assert_eq!(r.after_run(&fail, quick, 0), Decision::Restart { number: 1, delay: Duration::from_millis(500) });
        assert_eq!(r.after_run(&fail, quick, 1), Decision::Restart { number: 2, delay: Duration::from_millis(1000) });
        assert_eq!(r.after_run(&Exit::Signal("SIGSEGV".into()), quick, 2), Decision::Restart { number: 3, delay: Duration::from_millis(2000) });
        assert_eq!(r.after_run(&fail, quick, 3), Decision::GiveUp);
    }

    #[test]
    fn a_healthy_run_starts_the_schedule_and_the_count_in_a_row_over() {
        let mut r = restarter(RestartPolicy::OnFailure, 2, 1000);
        let fail = Exit::Code(1);
        let quick = Duration::from_millis(10);
        r.after_run(&fail, quick, 0);
        assert_eq!(r.after_run(&fail, quick, 1), Decision::Restart { number: 2, delay: 2 * S });
        // Ran 10 s: healthy. The next crash restarts after the first delay again.
        assert_eq!(r.after_run(&fail, Duration::from_secs(10), 2), Decision::Restart { number: 3, delay: S });
        assert_eq!(r.after_run(&fail, quick, 3), Decision::Restart { number: 4, delay: 2 * S });
        assert_eq!(r.after_run(&fail, quick, 4), Decision::GiveUp);
    }

    #[test]
    fn on_failure_stops_at_exit_0_and_always_does_not() {
        let mut on_failure = restarter(RestartPolicy::OnFailure, 5, 100);
        assert_eq!(on_failure.after_run(&Exit::Code(0), Duration::ZERO, 0), Decision::Done);
        let mut always = restarter(RestartPolicy::Always, 5, 100);
        assert_eq!(always.after_run(&Exit::Code(0), Duration::ZERO, 0), Decision::Restart { number: 1, delay: Duration::from_millis(100) });
        let mut never = restarter(RestartPolicy::Always, 0, 100);
        assert_eq!(never.after_run(&Exit::Code(0), Duration::ZERO, 0), Decision::GiveUp, "--max-restarts 0 never restarts");
    }

    #[test]
    fn the_separator_is_one_line_saying_which_restart_why_and_how_long() {
        assert_eq!(separator(2, "exit 1", 2 * S), "--- run-bg: restart 2 after exit 1 (delay 2.0s) ---\n");
    }
}
