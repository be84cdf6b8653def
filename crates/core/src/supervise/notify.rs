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

use crate::store::config::Config;
use crate::supervise::pace::{self, Pace, Slot};
use crate::supervise::service::post;
use crate::supervise::wake;
use crate::model::job::{HookRun, Job};
use crate::store::paths::Home;
use crate::store::registry::{Registry, FOLD_PATIENCE};
use crate::now_ms;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `reason` of a notification held back by the pace.
const HELD: &str = "held back under the interrupt service's rate limit, to go with the next batch";

mod due;
mod event;
mod hook;
mod message;
mod spool;
mod tries;
use due::hooks_for;
use tries::Tries;
pub use due::{claim, has_work};
pub use event::SpoolEntry;
pub use hook::run_hook;
pub use message::*;
pub use spool::{deliver, merged_body, spool_add, spool_due};
pub use tries::MAX_SERVER_ERRORS;

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
