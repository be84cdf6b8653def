//! `pause` and `resume` as the supervisor performs them: SIGSTOP or SIGCONT
//! to every process a kill would signal, the timeout clock stopped and
//! started again, and `paused_at` recorded in job.json, which the caller
//! waits for. The request comes as a kill's does (a file beside the job and
//! SIGUSR1), so the one process that owns the timeout clock and the job's
//! record is the one that acts: a caller that stopped the tree itself would
//! still have to tell the supervisor, and a supervisor that only watched
//! for stopped processes could not tell a pause from a job stopping itself.

use crate::model::protocol::{PauseRequest, PAUSE_REQUEST_FILE};
use crate::now_ms;
use crate::store::registry::Patience;
use crate::supervise::supervisor::{KillReason, Paused, Supervisor};
use crate::model::job::ProcessIdentity;
use crate::model::protocol::SUPERVISOR_MARK;
use crate::os::procinfo::{self, SignalOutcome};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// How long a pause may take to stop its tree: a process in uninterruptible
/// sleep (D) stops only once it leaves it, and is not waited for past this.
const STOP_PATIENCE: Duration = Duration::from_secs(2);

impl Supervisor {
    /// Acts on a pause or resume request left beside the job, if any.
    pub(super) fn take_pause_request(&mut self) {
        let path = self.home.job_dir(&self.job.id).join(PAUSE_REQUEST_FILE);
        let Ok(bytes) = crate::store::paths::read_file(&path) else { return };
        let _ = std::fs::remove_file(&path);
        let Ok(request) = serde_json::from_slice::<PauseRequest>(&bytes) else { return };
        if !request.pause {
            self.resume();
            return;
        }
        // A job being killed, or whose main process ended for good, is not
        // paused: its end comes next, and the caller sees that instead. One
        // between two runs is paused: the next run waits for the resume.
        let killed = self.kill.as_ref().is_some_and(|k| !matches!(k.reason, KillReason::Restart));
        let ending = killed || (!self.phase.main_running() && self.between.is_none());
        if !ending {
            self.pause();
        }
    }

    fn pause(&mut self) {
        self.stop_tree();
        if self.paused.is_none() {
            let now = Instant::now();
            let timeout_left = self.timeout_at.take().map(|at| at.saturating_duration_since(now));
            if let Some(watch) = &mut self.watch {
                watch.pause(now);
            }
            self.paused = Some(Paused { timeout_left });
            self.job.paused_at = Some(now_ms());
        }
        self.save_pause();
    }

    /// SIGSTOP to every process of the job, none left running. Passes over
    /// the process table alone never catch up with a tree that forks faster
    /// than a pass takes (a chain of processes each starting the next in a
    /// new session: 300 stopped, hundreds more running a second later).
    /// So each process found is stopped, and only once it has stopped are
    /// its children looked at: a stopped process forks no more, and a fork
    /// it was in when the signal came has either made its child, listed by
    /// then, or is undone. Then what we adopted meanwhile (children of a
    /// process that exited before it was found) and a last pass over the
    /// table, until neither finds anything new.
    fn stop_tree(&self) {
        let deadline = Instant::now() + STOP_PATIENCE;
        let mut known: HashSet<(u32, u64)> = HashSet::new();
        let mut queue: Vec<ProcessIdentity> = Vec::new();
        let mut note = |who: ProcessIdentity, queue: &mut Vec<ProcessIdentity>| {
            if known.insert((who.pid, who.start_ticks)) {
                queue.push(who);
            }
        };
        for (who, _) in self.signal_everything(libc::SIGSTOP) {
            note(who, &mut queue);
        }
        loop {
            while let Some(who) = queue.pop() {
                wait_until_stopped(&who, deadline);
                for child in procinfo::live_children(who.pid) {
                    if let Some(child) = stop_unless_helper(child) {
                        note(child, &mut queue);
                    }
                }
            }
            for child in self.adopted_children() {
                if procinfo::signal_process(&child, libc::SIGSTOP) == SignalOutcome::Sent {
                    note(child, &mut queue);
                }
            }
            if queue.is_empty() {
                for (who, _) in self.signal_everything(libc::SIGSTOP) {
                    note(who, &mut queue);
                }
            }
            if queue.is_empty() || Instant::now() >= deadline {
                return;
            }
        }
    }

    fn resume(&mut self) {
        self.signal_everything(libc::SIGCONT);
        if let Some(paused) = self.paused.take() {
            // The clocks go on from where the pause stopped them.
            let now = Instant::now();
            self.timeout_at = paused.timeout_left.map(|left| now + left);
            if let Some(watch) = &mut self.watch {
                watch.resume(now);
            }
        }
        self.job.end_pause(now_ms());
        self.save_pause();
    }

    /// A kill of a paused job: its tree, just sent SIGTERM (`signalled`),
    /// gets SIGCONT so it can act on it (a stopped process only takes
    /// SIGKILL); the pause is over, and the kill's end is recorded without it.
    pub(super) fn end_pause_for_kill(&mut self, signalled: bool) {
        if self.paused.take().is_none() {
            return;
        }
        if signalled {
            self.signal_everything(libc::SIGCONT);
        }
        self.job.paused_at = None;
    }

    /// Whether a pause holds the job (a restart waits for the resume).
    pub(super) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    /// In job.json at once (no lock), which the caller waits for and every
    /// reader merges in; in the registry too if its lock is free now (the
    /// caller writes it there otherwise).
    fn save_pause(&mut self) {
        self.held.refresh();
        if let Err(e) = self.registry.write_job_file(&self.job, false) {
            self.note_error(&format!("cannot record the pause or resume in its job.json: {e}"));
        }
        let (paused_at, paused_ms) = (self.job.paused_at, self.job.paused_ms);
        let _ = self.registry.modify_with(Patience::Immediate, &self.job.id, |job| {
            job.paused_at = paused_at;
            job.paused_ms = paused_ms;
        });
    }
}

/// Stops `pid`, a child of a process of the job, unless it is one of
/// proc-manager's helpers (another job's supervisor started from inside this
/// one, our notifier), which are not this job's. Who was stopped, if anyone.
fn stop_unless_helper(pid: u32) -> Option<ProcessIdentity> {
    let who = procinfo::identify(pid)?;
    if procinfo::environ_value(pid, SUPERVISOR_MARK).is_some() {
        return None;
    }
    (procinfo::signal_process(&who, libc::SIGSTOP) == SignalOutcome::Sent).then_some(who)
}

/// Waits (until `deadline` at most) for a process just sent SIGSTOP to stop,
/// or to be gone: a signal is acted on when its target next runs.
fn wait_until_stopped(who: &ProcessIdentity, deadline: Instant) {
    let mut nap = Duration::from_micros(50);
    while !procinfo::is_stopped(who.pid) && procinfo::is_same_process_alive(who) && Instant::now() < deadline {
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(2));
    }
}
