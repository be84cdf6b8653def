//! A kill's course, the same on every platform: why it began, the grace
//! period's end, when the force went, whether it has settled. A later
//! request can only bring the end forward, and a kill or the timeout during
//! a restart's clean-up ends the job. How the job is asked to stop, forced,
//! and looked at for what is left is each platform's (os/kill_unix.rs:
//! SIGTERM then SIGKILL to the tree; os/kill_windows.rs: CTRL_BREAK to the
//! console group, then the Job Object ended).

use crate::model::job::EndedBy;
use crate::model::protocol::KillRequest;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    Requested,
    Timeout,
    /// Asked for after the main process had exited: its exit decides the status.
    AfterExit,
    /// What is left of an ended run's tree, before a restart (`--restart`).
    Restart,
    /// The process the job is tied to ended (`--tie`).
    Tie,
}

impl KillReason {
    /// Who the job's end is recorded as ended by, when this kill ended it.
    pub fn ended_by(self) -> EndedBy {
        match self {
            KillReason::Timeout => EndedBy::Timeout,
            KillReason::Requested | KillReason::Tie => EndedBy::Kill,
            KillReason::AfterExit | KillReason::Restart => EndedBy::Itself,
        }
    }
}

/// A kill (or a timeout, or a fired tie, or a restart's clean-up) under
/// way. `Asked` is what the platform keeps of who was asked to stop (Unix:
/// every process sent SIGTERM, so a newcomer gets it once; Windows: nothing,
/// the break goes to the whole console group).
pub struct Kill<Asked = ()> {
    pub reason: KillReason,
    pub started: Instant,
    /// The grace period's end: then the force goes to whatever is left.
    pub hard_deadline: Instant,
    /// When the force first went, if it has.
    pub forced_at: Option<Instant>,
    /// Nothing of the job was left at the last look.
    pub tree_gone: bool,
    /// When to look at what is left next: each look is a pass over the
    /// process table, so it is paced by time, not by how often the loop wakes.
    pub next_look: Instant,
    /// See `KillRequest::caller_sweeps`: looks cover our subtree only.
    pub caller_sweeps: bool,
    /// See `KillRequest::caller_signalled_since`: the caller asked what
    /// started before then to stop, so only what started since is asked.
    pub caller_signalled_since: Option<u64>,
    pub asked: Asked,
}

impl<Asked: Default> Kill<Asked> {
    /// A kill that begins now: forced at once (`force`, or no grace), else
    /// after the grace period.
    pub fn begin(reason: KillReason, request: &KillRequest, now: Instant) -> Kill<Asked> {
        Kill {
            reason,
            started: now,
            hard_deadline: deadline(request, now),
            forced_at: None,
            tree_gone: false,
            // A caller that signalled leaves us nothing to look for at once.
            next_look: if request.caller_signalled_since.is_some() { now + Duration::from_millis(5) } else { now },
            caller_sweeps: request.caller_sweeps,
            caller_signalled_since: request.caller_signalled_since,
            asked: Asked::default(),
        }
    }
}

impl<Asked> Kill<Asked> {
    /// Another request while this one runs: it can only make the kill
    /// sooner; a kill or the timeout during a restart's clean-up takes its
    /// reason (returns `true` then: the clean-up now ends the job). Only a
    /// sweeping caller may narrow the looks; any other kill (a timeout, a
    /// plain SIGTERM) widens them again.
    pub fn again(&mut self, reason: KillReason, request: &KillRequest, now: Instant) -> bool {
        self.hard_deadline = self.hard_deadline.min(deadline(request, now));
        let now_ends_the_job = self.reason == KillReason::Restart && reason != KillReason::Restart;
        if self.reason == KillReason::Restart {
            self.reason = reason;
        }
        self.caller_sweeps &= request.caller_sweeps;
        self.caller_signalled_since = self.caller_signalled_since.and(request.caller_signalled_since);
        now_ends_the_job
    }

    /// The grace period is over: the force is due (again, at each look).
    pub fn force_due(&self, now: Instant) -> bool {
        now >= self.hard_deadline
    }

    pub fn forced(&self) -> bool {
        self.forced_at.is_some()
    }

    /// Whether to look at what is left now: often at first, so a kill ends
    /// as soon as the tree is gone, then less often; at once when the force
    /// first falls due.
    pub fn look_due(&self, now: Instant) -> bool {
        !self.tree_gone && (now >= self.next_look || (self.force_due(now) && !self.forced()))
    }

    /// After a look: whether the force went with it, and whether anything
    /// of the job is left.
    pub fn looked(&mut self, now: Instant, forced: bool, anything_left: bool) {
        if forced {
            self.forced_at.get_or_insert(now);
        }
        self.tree_gone = !anything_left;
        let tick = (now - self.started).div_f32(4.0).clamp(Duration::from_millis(5), Duration::from_millis(100));
        self.next_look = now + tick;
    }

    /// Settled: the whole tree is gone, or the force had `patience` to work
    /// (a process stuck in uninterruptible sleep cannot be hurried).
    pub fn settled(&self, patience: Duration) -> bool {
        self.tree_gone || (self.forced() && self.hard_deadline.elapsed() > patience)
    }

    /// A kill that ends the job (not a restart's clean-up).
    pub fn ends_the_job(&self) -> bool {
        self.reason != KillReason::Restart
    }
}

fn deadline(request: &KillRequest, now: Instant) -> Instant {
    if request.force {
        now
    } else {
        now + Duration::from_millis(request.grace_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(grace_ms: u64, force: bool) -> KillRequest {
        KillRequest { grace_ms, force, caller_sweeps: false, caller_signalled_since: None }
    }

    #[test]
    fn a_later_request_only_brings_the_end_forward() {
        let now = Instant::now();
        let mut kill: Kill = Kill::begin(KillReason::Requested, &request(5000, false), now);
        assert!(!kill.force_due(now));
        assert!(!kill.again(KillReason::Timeout, &request(60_000, false), now));
        assert_eq!(kill.hard_deadline, now + Duration::from_millis(5000), "a longer grace changes nothing");
        assert_eq!(kill.reason, KillReason::Requested, "the first reason stands");
        kill.again(KillReason::Requested, &request(5000, true), now);
        assert!(kill.force_due(now), "--force ends the grace period now");
    }

    #[test]
    fn a_kill_during_a_restart_clean_up_ends_the_job() {
        let now = Instant::now();
        let mut kill: Kill = Kill::begin(KillReason::Restart, &request(5000, false), now);
        assert!(!kill.ends_the_job());
        assert!(!kill.again(KillReason::Restart, &request(5000, false), now));
        assert!(kill.again(KillReason::Timeout, &request(5000, false), now));
        assert!(kill.ends_the_job());
        assert_eq!(kill.reason.ended_by(), EndedBy::Timeout);
    }

    #[test]
    fn a_kill_settles_once_nothing_is_left_or_the_force_had_its_chance() {
        let start = Instant::now();
        let mut kill: Kill = Kill::begin(KillReason::Tie, &request(0, false), start);
        assert!(kill.force_due(start) && kill.look_due(start), "no grace: forced at the first look");
        kill.looked(start, true, true);
        assert!(kill.forced() && !kill.settled(Duration::from_secs(60)));
        kill.looked(start + Duration::from_millis(1), true, false);
        assert!(kill.settled(Duration::from_secs(60)) && !kill.look_due(Instant::now()));
        assert_eq!(kill.reason.ended_by(), EndedBy::Kill);
        assert_eq!(KillReason::AfterExit.ended_by(), EndedBy::Itself);
    }
}
