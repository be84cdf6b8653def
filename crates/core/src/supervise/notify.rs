//! Telling the agent that a job ended: a POST to the interrupt service and
//! command hooks. Each event is claimed once (under the registry lock, with the
//! status change that causes it), retried with backoff for about a minute,
//! then kept in a spool that any later `run-bg` invocation drains.
//!
//! What is recorded is what the service answered, not only its HTTP status:
//! OpenClaw's interrupt service answers 200 both when it queued an event for
//! the agent (`{"status":"queued","matched":N}`) and when it dropped it
//! (`{"status":"ignored",…}`, an `info` event no rule matched); a 4xx will be
//! answered the same way again, so it is not retried; a 5xx may come after
//! the service queued the event (it does not de-duplicate), so it is retried
//! only a few times.

use crate::store::config::{Config, NotifyConfig};
use crate::supervise::pace::{self, Pace, Slot};
use crate::supervise::service::{post, Answer, Failure};
use crate::supervise::wake;
use crate::model::error::PostError;
use crate::model::job::{DeliveryState, HookRun, Job, Notification};
use crate::store::deliveries::Recorder;
use crate::store::paths::Home;
use crate::store::registry::{Registry, FOLD_PATIENCE};
use crate::os::sys::OpenOptionsExt;
use crate::now_ms;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Created (once) in the home by the first `no-listener`: that one says how to
/// set up or turn off notifications, later ones only that none was sent.
const NO_LISTENER_SEEN: &str = "notify-no-listener.seen";
/// The `reason` of a notification held back by the pace.
const HELD: &str = "held back under the interrupt service's rate limit, to go with the next batch";
/// A 5xx may come after the service queued the event, and it does not
/// de-duplicate: each retry can be one more wake-up of the agent.
pub const MAX_SERVER_ERRORS: u32 = 3;
/// A wake rule's removal where no `notify.timeout_ms` is at hand.
const WAKE_REMOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The notification to claim when a job reaches `job.status()`, if any is due.
pub fn claim(config: &NotifyConfig, job: &Job) -> Option<Notification> {
    (job.notify && config.url.is_some()).then(|| Notification {
        event_id: job.event_id(),
        level: Some(config.level_for(job.status().as_str()).to_string()),
        ..Default::default()
    })
}

/// Hooks to run for this job's current status: `notify.command` (unless the
/// job opted out of notifications) and the job's own `--on-exit`.
fn hooks_for(config: &NotifyConfig, job: &Job) -> Vec<String> {
    if !job.status().is_final() {
        return Vec::new();
    }
    let global = config.command.clone().filter(|_| job.notify);
    global.into_iter().chain(job.on_exit.clone()).collect()
}

pub fn has_work(config: &NotifyConfig, job: &Job) -> bool {
    claim(config, job).is_some() || !hooks_for(config, job).is_empty()
}

mod hook;
mod message;
mod spool;
pub use hook::run_hook;
pub use message::*;
pub use spool::*;

/// Announces `job` (already recorded with its new status and, when a POST is
/// due, a pending `notification`): POST at once, then hooks, then retries with
/// backoff for `notify.retry_for_ms`; what still fails goes to the spool.
/// Blocking; the supervisor runs it in a forked child.
pub fn announce(home: &Home, config: &Config, job: &Job) {
    let registry = Registry::for_config(home, config);
    let mut tries = Tries::first(home, &config.notify, job);
    announce_event(home, config, &registry, job, &mut tries);
    registry.fold_deliveries(tries.recorder.written(), FOLD_PATIENCE);
}

fn announce_event(home: &Home, config: &Config, registry: &Registry, job: &Job, tries: &mut Tries) {
    let notify = &config.notify;
    let event = event_body(home, notify, job);
    let body = serde_json::to_vec(&event).unwrap_or_default();
    let message = event_message(home, job);
    let url = claim(notify, job).and(notify.url.clone());
    let timeout = Duration::from_millis(notify.timeout_ms);
    let started = Instant::now();
    let event_id = job.event_id();

    let mut retry = None;
    let mut held_until = None;
    if let Some(url) = &url {
        let pace = Pace::for_level(notify, notify.level_for(job.status().as_str()));
        match pace::claim(home, &pace, now_ms()) {
            Slot::Now => retry = tries.attempt(home, registry, post(url, &body, timeout), timeout),
            Slot::At(at) => held_until = Some(at),
        }
    }

    let hooks: Vec<HookRun> = hooks_for(notify, job)
        .iter()
        .map(|command| run_hook(home, command, &body, job, &message, Duration::from_millis(notify.hook_timeout_ms)))
        .collect();
    if !hooks.is_empty() {
        tries.recorder.add_hooks(hooks);
    }

    let Some(url) = url else {
        tries.settle(home, registry, timeout, wake::EventOutcome::NotSent("no interrupt service is configured now"));
        return;
    };
    if let Some(at) = held_until {
        // Over the service's rate limit: the deliverer sends it at `at`,
        // together with whatever else is held by then.
        tries.recorder.change(|n| n.reason = Some(HELD.to_string()));
        let entry = SpoolEntry {
            event_id,
            job_id: job.id.clone(),
            url,
            body: event,
            attempts: 0,
            server_errors: 0,
            spooled_at: now_ms(),
            next_attempt_at: at,
            last_error: None,
            keep_trying: notify.url_explicit,
            spool_tries: 0,
            held: true,
            notification: tries.notification(),
            has_wake: tries.has_wake,
        };
        match spool_add(home, &entry) {
            Ok(()) => start_deliverer(home),
            Err(e) => tracing::warn!("run-bg: cannot spool notification {}: {e}", entry.event_id),
        }
        return;
    }
    let mut pause = Duration::from_millis(250);
    let retry_until = started + Duration::from_millis(notify.retry_for_ms);
    while retry.is_some() && Instant::now() + pause < retry_until {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(10));
        retry = tries.attempt(home, registry, post(&url, &body, timeout), timeout);
    }
    let Some(error) = retry else {
        if tries.wake_queued {
            // The look at the rule after the service's batch is the deliverer's.
            start_deliverer(home);
        }
        return;
    };
    if !notify.url_explicit && tries.all_refused {
        // The built-in address, and nothing listened there for the whole
        // retry period: no interrupt service is installed. Spooling would
        // only grow the spool and keep a process retrying for nobody.
        tries.no_listener(home, registry);
        return;
    }
    let entry = SpoolEntry {
        event_id,
        job_id: job.id.clone(),
        url,
        body: event,
        attempts: tries.attempts,
        server_errors: tries.server_errors,
        spooled_at: now_ms(),
        next_attempt_at: now_ms(),
        last_error: Some(error),
        keep_trying: notify.url_explicit,
        spool_tries: 0,
        held: false,
        notification: tries.notification(),
        has_wake: tries.has_wake,
    };
    if let Err(e) = spool_add(home, &entry) {
        tracing::warn!("run-bg: cannot spool notification {}: {e}", entry.event_id);
        return;
    }
    if entry.keep_trying {
        start_deliverer(home);
    }
}

/// The value of `SUPERVISOR_MARK` in the deliverer a notifier starts: a
/// supervisor (a subreaper) adopts it, and does not wait for it.
pub const DELIVERER_MARK: &str = "deliverer";

/// Starts `run-bg __deliver` in the background (it detaches itself at once);
/// if one already delivers for this home, the new one finds its lock taken
/// and leaves, and the running one takes the new event in on its next round.
fn start_deliverer(home: &Home) {
    let Ok(runner) = std::env::current_exe() else { return };
    use crate::model::protocol::{Errand, JOB_COOKIE, SUPERVISOR_MARK};
    let spawned = Command::new(runner)
        .args(Errand::Deliver.args())
        .env("PROC_MANAGER_HOME", &home.root)
        .env_remove(JOB_COOKIE)
        .env(SUPERVISOR_MARK, DELIVERER_MARK)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            let _ = child.wait();
        }
        Err(e) => tracing::warn!("run-bg: cannot start the notification deliverer: {e}"),
    }
}

/// The attempts made at one event, by whichever process makes them.
#[derive(Debug)]
struct Tries {
    attempts: u32,
    server_errors: u32,
    /// Every attempt so far met a refused connection: nothing listens.
    all_refused: bool,
    /// The event went merged with others' (`data.jobs`): no job's wake rule matches it.
    merged: bool,
    /// Its answer queued it through the job's wake rule: a look at the rule is scheduled for the deliverer.
    wake_queued: bool,
    /// The job has a wake rule to settle; without one the registry is not read.
    has_wake: bool,
    recorder: Recorder,
}

impl Tries {
    /// The first attempts, by the job's notifier.
    fn first(home: &Home, notify: &NotifyConfig, job: &Job) -> Tries {
        let recorder = Recorder::new(home, &job.id, &job.event_id(), claim(notify, job));
        Tries { attempts: 0, server_errors: 0, all_refused: true, merged: false, wake_queued: false, has_wake: job.wake.is_some(), recorder }
    }

    /// The deliverer's, going on from where the spooled `entry` left off.
    fn spooled(home: &Home, entry: &SpoolEntry, merged: bool) -> Tries {
        let notification = entry.notification.clone().unwrap_or_else(|| Notification {
            // Spooled by a version that did not keep it: as it would stand.
            event_id: entry.event_id.clone(),
            state: DeliveryState::Pending,
            attempts: entry.attempts,
            last_error: entry.last_error.clone(),
            level: entry.body.get("level").and_then(|l| l.as_str()).map(str::to_string),
            ..Default::default()
        });
        let recorder = Recorder::new(home, &entry.job_id, &entry.event_id, Some(notification));
        Tries {
            attempts: entry.attempts,
            server_errors: entry.server_errors,
            all_refused: false,
            merged,
            wake_queued: false,
            has_wake: entry.has_wake,
            recorder,
        }
    }

    fn job_id(&self) -> &str {
        &self.recorder.record.job_id
    }

    fn event_id(&self) -> &str {
        &self.recorder.record.event_id
    }

    /// The notification as it stands, for the spool to carry on from.
    fn notification(&self) -> Option<Notification> {
        self.recorder.record.notification.clone()
    }

    /// Settles the job's wake rule (if it has one) now that `outcome` is final.
    fn settle(&mut self, home: &Home, registry: &Registry, timeout: Duration, outcome: wake::EventOutcome) {
        if self.has_wake {
            let (job_id, event_id) = (self.job_id().to_string(), self.event_id().to_string());
            self.wake_queued = wake::settle(home, registry, timeout, &job_id, &event_id, outcome);
        }
    }

    /// Nothing listened at the built-in address for the whole retry period.
    fn no_listener(&mut self, home: &Home, registry: &Registry) {
        // O_EXCL: of all the announcers of a home, exactly one creates it.
        let first = crate::store::paths::options_nofollow()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(home.dir().join(NO_LISTENER_SEEN))
            .is_ok();
        self.recorder.change(|n| {
            n.state = DeliveryState::NoListener;
            n.hint = first;
        });
        self.settle(home, registry, WAKE_REMOVE_TIMEOUT, wake::EventOutcome::NotSent("nothing listens"));
    }

    /// Records what one attempt came to in the job's `notification`;
    /// `Some(error)` when another attempt is worth making.
    fn attempt(&mut self, home: &Home, registry: &Registry, result: Result<Answer, Failure>, timeout: Duration) -> Option<String> {
        self.attempts += 1;
        let attempts = self.attempts;
        self.all_refused &= matches!(&result, Err(Failure::Unanswered(PostError::NothingListens { .. })));
        // Kept for the wake rule's settling once this answer is the last.
        let result_seen = result.clone();
        let (retry, update): (Option<String>, Update) = match result {
            Ok(answer) => (
                None,
                Box::new(move |n: &mut Notification| {
                    (n.state, n.matched, n.reason) = match &answer {
                        Answer::Queued { matched } => (DeliveryState::Queued, Some(*matched), None),
                        Answer::Ignored { reason } => (DeliveryState::Ignored, None, Some(reason.clone())),
                        Answer::Accepted => (DeliveryState::Delivered, None, None),
                    };
                    n.delivered_at = Some(now_ms());
                    n.last_error = None;
                }),
            ),
            Err(failure @ Failure::Refused { .. }) => (None, failed(&failure, None)),
            Err(failure @ Failure::ServerError { .. }) => {
                self.server_errors += 1;
                if self.server_errors >= MAX_SERVER_ERRORS {
                    let why = format!("not sent again after {} server errors: each may have queued it", self.server_errors);
                    (None, failed(&failure, Some(why)))
                } else {
                    (Some(failure.to_string()), pending(failure.to_string()))
                }
            }
            Err(failure @ Failure::Unanswered(_)) => (Some(failure.to_string()), pending(failure.to_string())),
        };
        self.recorder.change(|n| {
            n.attempts = attempts;
            update(n);
        });
        if retry.is_none() {
            let outcome = if self.merged { wake::EventOutcome::Merged } else { wake::EventOutcome::Answered(&result_seen) };
            self.settle(home, registry, timeout, outcome);
        }
        retry
    }
}

/// A change to a job's `notification`.
type Update = Box<dyn Fn(&mut Notification)>;

fn failed(failure: &Failure, why: Option<String>) -> Update {
    let (last_error, reason) = match failure {
        Failure::Refused { error, .. } | Failure::ServerError { error, .. } => {
            (failure.to_string(), why.or_else(|| (!error.is_empty()).then(|| error.clone())))
        }
        Failure::Unanswered(_) => (failure.to_string(), why),
    };
    Box::new(move |n: &mut Notification| {
        n.state = DeliveryState::Failed;
        n.last_error = Some(last_error.clone());
        n.reason = reason.clone();
    })
}

fn pending(error: String) -> Update {
    Box::new(move |n: &mut Notification| {
        n.state = DeliveryState::Pending;
        n.last_error = Some(error.clone());
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_braces_are_broken_up_however_many() {
        assert_eq!(defuse_templates("a {{jobId}} b"), "a { {jobId} } b");
        assert_eq!(defuse_templates("{{{x}}}"), "{ { {x} } }");
        assert_eq!(defuse_templates("{ plain }"), "{ plain }");
    }
}
