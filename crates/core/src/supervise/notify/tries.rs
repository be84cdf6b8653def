//! The attempts made at one event, by whichever process makes them (the
//! supervisor's notifier or the deliverer), and what each answer does to the
//! job's `notification`.

use super::due::claim;
use super::event::SpoolEntry;
use crate::store::config::NotifyConfig;
use crate::supervise::service::{Answer, Failure};
use crate::supervise::wake;
use crate::model::error::PostError;
use crate::model::job::{DeliveryState, Job, Notification};
use crate::store::deliveries::Recorder;
use crate::store::paths::Home;
use crate::store::registry::Registry;
use crate::os::sys::OpenOptionsExt;
use crate::now_ms;
use std::time::Duration;

/// Created (once) in the home by the first `no-listener`: that one says how to
/// set up or turn off notifications, later ones only that none was sent.
const NO_LISTENER_SEEN: &str = "notify-no-listener.seen";
/// A 5xx may come after the service queued the event, and it does not
/// de-duplicate: each retry can be one more wake-up of the agent.
pub const MAX_SERVER_ERRORS: u32 = 3;
/// A wake rule's removal where no `notify.timeout_ms` is at hand.
pub(super) const WAKE_REMOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The attempts made at one event, by whichever process makes them.
#[derive(Debug)]
pub(super) struct Tries {
    pub(super) attempts: u32,
    pub(super) server_errors: u32,
    /// Every attempt so far met a refused connection: nothing listens.
    pub(super) all_refused: bool,
    /// The event went merged with others' (`data.jobs`): no job's wake rule matches it.
    pub(super) merged: bool,
    /// Its answer queued it through the job's wake rule: a look at the rule is scheduled for the deliverer.
    pub(super) wake_queued: bool,
    /// The job has a wake rule to settle; without one the registry is not read.
    pub(super) has_wake: bool,
    pub(super) recorder: Recorder,
}

impl Tries {
    /// The first attempts, by the job's notifier.
    pub(super) fn first(home: &Home, notify: &NotifyConfig, job: &Job) -> Tries {
        let recorder = Recorder::new(home, &job.id, &job.event_id(), claim(notify, job));
        Tries { attempts: 0, server_errors: 0, all_refused: true, merged: false, wake_queued: false, has_wake: job.wake.is_some(), recorder }
    }

    /// The deliverer's, going on from where the spooled `entry` left off.
    pub(super) fn spooled(home: &Home, entry: &SpoolEntry, merged: bool) -> Tries {
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

    pub(super) fn job_id(&self) -> &str {
        &self.recorder.record.job_id
    }

    pub(super) fn event_id(&self) -> &str {
        &self.recorder.record.event_id
    }

    /// The notification as it stands, for the spool to carry on from.
    pub(super) fn notification(&self) -> Option<Notification> {
        self.recorder.record.notification.clone()
    }

    /// Settles the job's wake rule (if it has one) now that `outcome` is final.
    pub(super) fn settle(&mut self, home: &Home, registry: &Registry, timeout: Duration, outcome: wake::EventOutcome) {
        if self.has_wake {
            let (job_id, event_id) = (self.job_id().to_string(), self.event_id().to_string());
            self.wake_queued = wake::settle(home, registry, timeout, &job_id, &event_id, outcome);
        }
    }

    /// Nothing listened at the built-in address for the whole retry period.
    pub(super) fn no_listener(&mut self, home: &Home, registry: &Registry) {
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
    pub(super) fn attempt(&mut self, home: &Home, registry: &Registry, result: Result<Answer, Failure>, timeout: Duration) -> Option<String> {
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
pub(super) type Update = Box<dyn Fn(&mut Notification)>;

pub(super) fn failed(failure: &Failure, why: Option<String>) -> Update {
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

pub(super) fn pending(error: String) -> Update {
    Box::new(move |n: &mut Notification| {
        n.state = DeliveryState::Pending;
        n.last_error = Some(error.clone());
    })
}
