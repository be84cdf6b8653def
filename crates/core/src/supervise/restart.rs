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
use std::time::{Duration, Instant};

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

/// The restart that comes next: its number (of all the job's), the wait
/// before it, and how the run before it ended.
#[derive(Debug, Clone)]
pub struct Next {
    pub number: u32,
    pub delay: Duration,
    pub exit: Exit,
}

/// Where a job that restarts is between the end of one run and the next.
/// `C` is what the platform keeps while it ends what the ended run left
/// (nothing on Unix, where a kill in progress does it; the Job Object's
/// deadlines on Windows).
#[derive(Debug, Clone)]
pub enum Between<C> {
    /// The run ended while the job was paused (on Unix only SIGKILL ends a
    /// stopped process; on Windows something ended its suspended main
    /// process): the restart is decided, but what the run left stays held,
    /// and its clean-up and the next run wait for the resume, so a pause
    /// holds the whole job.
    Held { next: Next },
    /// What is left of the ended run is being ended; then the restart is recorded.
    Cleaning { next: Next, cleanup: C },
    /// The next run starts at `until`.
    Waiting { until: Instant },
}

/// A job's runs, as every platform's supervisor keeps them: the schedule
/// (none without `--restart`), where the job is between two runs, and when
/// the current run started.
#[derive(Debug)]
pub struct Runs<C> {
    pub restarter: Option<Restarter>,
    pub between: Option<Between<C>>,
    pub started: Instant,
}

impl<C> Runs<C> {
    /// The runs of `job`, its first run starting now.
    pub fn new(job: &Job) -> Runs<C> {
        Runs { restarter: job.restart.as_ref().map(Restarter::new), between: None, started: Instant::now() }
    }

    /// The job ends for good: no restart is scheduled or waited for.
    pub fn end(&mut self) {
        self.restarter = None;
        self.between = None;
    }

    /// The next run is under way.
    pub fn run_started(&mut self) {
        self.between = None;
        self.started = Instant::now();
    }

    /// When the next run starts, unless a pause holds it.
    pub fn waiting_until(&self) -> Option<Instant> {
        match self.between {
            Some(Between::Waiting { until }) => Some(until),
            _ => None,
        }
    }
}

/// What a supervisor does between two runs its own way, for `step`: each
/// platform's supervisor implements it; the schedule, the order of the
/// steps and what is recorded are `step`'s, the same on every platform.
pub trait BetweenRuns {
    /// What the platform keeps while it ends what the ended run left.
    type Cleanup;
    /// The job's runs (`Runs`: the schedule, where it is between two runs).
    fn runs(&mut self) -> &mut Runs<Self::Cleanup>;
    fn job_mut(&mut self) -> &mut Job;
    /// A pause holds the job: no clean-up, no new run until the resume.
    fn is_paused(&self) -> bool;
    /// The job goes on after its main process ended: an end between runs
    /// (a kill, the timeout) is when it happens, not that run's end.
    fn going_on(&mut self);
    /// Begins ending what the ended run left (as a kill would): what to
    /// keep meanwhile, and whether to wait before the first look.
    fn start_cleaning(&mut self, now: Instant) -> (Self::Cleanup, bool);
    /// Whether what the ended run left is gone and its output copied to
    /// its end, so that the separator goes after all of it.
    fn cleaned(&mut self, cleanup: &mut Self::Cleanup, now: Instant) -> bool;
    fn write_separator(&mut self, line: &str) -> crate::Result<()>;
    /// `save_run`, its error noted in the platform's way.
    fn save_run(&mut self);
    /// Sends `notify.on_restart`'s event without holding up the loop (a
    /// forked child on Unix, a thread on Windows).
    fn announce(&mut self, announcement: Announcement);
    fn note_error(&self, message: &str);
    /// The home, the config and the job, for the restart's announcement.
    fn context(&self) -> (&crate::store::paths::Home, &crate::store::config::Config, &Job);
    /// Starts the next run; `false` (the job ends) when it cannot start,
    /// after `failed_to_start`.
    fn relaunch(&mut self) -> bool;
}

/// After a run of a job started with `--restart` has ended (and no kill of
/// the job is under way): whether the job goes on, between runs or in a new
/// run. `false`: the job ends now and its end is to be recorded (no policy,
/// an exit the policy does not restart after, too many restarts in a row, a
/// run that could not start). `exit`: how the run ended, when known.
pub fn step<S: BetweenRuns + ?Sized>(s: &mut S, exit: Option<Exit>) -> bool {
    let now = Instant::now();
    match s.runs().between.take() {
        None => {
            let Some(exit) = exit else { return false };
            let count = s.job_mut().restart.as_ref().map_or(0, |r| r.count);
            let ran_for = s.runs().started.elapsed();
            let decision = s.runs().restarter.as_mut().map_or(Decision::Done, |r| r.after_run(&exit, ran_for, count));
            let Decision::Restart { number, delay } = decision else { return false };
            // The ended run's readiness ended with it: between runs the job
            // is not ready (`wait --ready` waits for the next run's).
            if s.job_mut().ready_at.take().is_some() {
                s.save_run();
            }
            s.going_on();
            let next = Next { number, delay, exit };
            if s.is_paused() {
                s.runs().between = Some(Between::Held { next });
                return true;
            }
            clean(s, next, now)
        }
        Some(Between::Held { next }) if s.is_paused() => {
            s.runs().between = Some(Between::Held { next });
            true
        }
        Some(Between::Held { next }) => clean(s, next, now),
        Some(Between::Cleaning { next, mut cleanup }) => {
            if !s.cleaned(&mut cleanup, now) {
                s.runs().between = Some(Between::Cleaning { next, cleanup });
                return true;
            }
            record_restart(s, &next);
            s.runs().between = Some(Between::Waiting { until: Instant::now() + next.delay });
            step(s, None)
        }
        // A paused job starts no new run until it is resumed.
        Some(Between::Waiting { until }) if s.is_paused() || now < until => {
            s.runs().between = Some(Between::Waiting { until });
            true
        }
        Some(Between::Waiting { .. }) => s.relaunch(),
    }
}

/// What the ended run left goes first, as a kill takes it; then the restart.
fn clean<S: BetweenRuns + ?Sized>(s: &mut S, next: Next, now: Instant) -> bool {
    let (cleanup, wait) = s.start_cleaning(now);
    s.runs().between = Some(Between::Cleaning { next, cleanup });
    wait || step(s, None)
}

/// The restart in the log (its separator line), in the job's record, and
/// announced when `notify.on_restart` asks for it.
fn record_restart<S: BetweenRuns + ?Sized>(s: &mut S, next: &Next) {
    let Next { number, delay, exit } = next;
    let reason = reason(exit);
    if let Err(e) = s.write_separator(&separator(*number, &reason, *delay)) {
        s.note_error(&format!("cannot mark restart {number} in the log: {e}"));
    }
    if let Some(record) = &mut s.job_mut().restart {
        record.count = *number;
        record.last_reason = Some(reason);
        record.last_at = Some(crate::now_ms());
        record.next_run_at = Some(crate::now_ms() + delay.as_millis() as u64);
    }
    s.save_run();
    let (home, config, job) = s.context();
    if let Some(announcement) = Announcement::of(home, config, job, next) {
        s.announce(announcement);
    }
}

/// A run that could not start: said in the supervisor's log and the job's
/// (the separator line); the job then ends.
pub fn failed_to_start<S: BetweenRuns + ?Sized>(s: &mut S, why: &str) -> bool {
    let number = s.job_mut().restart.as_ref().map_or(0, |r| r.count);
    s.note_error(&format!("restart {number} could not start: {why}"));
    let _ = s.write_separator(&format!("--- run-bg: restart {number} could not start: {why} ---\n"));
    false
}

/// `notify.on_restart`'s one POST of a restart's event, never retried nor
/// spooled: the final end is the announcement that must arrive.
pub struct Announcement {
    url: String,
    body: String,
    timeout: Duration,
}

impl Announcement {
    /// The announcement of restart `next`, if the job and the config ask for one.
    pub fn of(home: &crate::store::paths::Home, config: &crate::store::config::Config, job: &Job, next: &Next) -> Option<Announcement> {
        if !config.notify.on_restart {
            return None;
        }
        let url = config.notify.url.clone().filter(|_| job.notify)?;
        let body = restart_event(home, &config.notify, job, next.number, &next.exit, next.delay).to_string();
        Some(Announcement { url, body, timeout: Duration::from_millis(config.notify.timeout_ms) })
    }

    pub fn send(self) {
        let _ = crate::supervise::service::post(&self.url, self.body.as_bytes(), self.timeout);
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
        Restarter::new(&Restart { policy, max_restarts, delay_ms, count: 0, last_reason: None, last_at: None, next_run_at: None })
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
