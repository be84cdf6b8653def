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
use crate::supervise::supervisor::{Paused, Supervisor};
use std::time::Instant;

/// SIGSTOP passes at most: each pass after the first finds only what was
/// forked between the previous pass's look and its signal.
const STOP_PASSES: usize = 5;

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
        // paused: its end comes next, and the caller sees that instead.
        let ending = self.kill.is_some() || (!self.phase.main_running() && self.between.is_none());
        if !ending {
            self.pause();
        }
    }

    fn pause(&mut self) {
        let mut stopped = std::collections::HashSet::new();
        for _ in 0..STOP_PASSES {
            let before = stopped.len();
            stopped.extend(self.signal_everything(libc::SIGSTOP).into_iter().map(|(who, _)| (who.pid, who.start_ticks)));
            if stopped.len() == before {
                break;
            }
        }
        if self.paused.is_none() {
            let timeout_left = self.timeout_at.take().map(|at| at.saturating_duration_since(Instant::now()));
            self.paused = Some(Paused { timeout_left });
            self.job.paused_at = Some(now_ms());
        }
        self.save_pause();
    }

    fn resume(&mut self) {
        self.signal_everything(libc::SIGCONT);
        if let Some(paused) = self.paused.take() {
            // The clock goes on from where the pause stopped it.
            self.timeout_at = paused.timeout_left.map(|left| Instant::now() + left);
        }
        self.job.paused_at = None;
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
        let paused_at = self.job.paused_at;
        let _ = self.registry.modify_with(Patience::Immediate, &self.job.id, |job| job.paused_at = paused_at);
    }
}
