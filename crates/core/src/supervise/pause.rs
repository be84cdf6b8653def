//! `pause` and `resume` as a supervisor performs them, on every platform:
//! the job's processes held (SIGSTOP on Unix, os/pause_unix.rs; the Job
//! Object's members suspended on Windows, os/pause_windows.rs), the timeout
//! clock and the readiness deadline stopped and started again, and
//! `paused_at` recorded in job.json, which the caller waits for. The
//! request comes as a kill's does (a file beside the job, then SIGUSR1 or
//! the doorbell), so the one process that owns the timeout clock and the
//! job's record is the one that acts: a caller that stopped the tree itself
//! would still have to tell the supervisor, and a supervisor that only
//! watched for stopped processes could not tell a pause from a job stopping
//! itself.

use crate::model::job::Job;
use crate::model::protocol::{PauseRequest, PAUSE_REQUEST_FILE};
use crate::now_ms;
use crate::store::paths::Home;
use crate::store::registry::{Patience, Registry};
use crate::supervise::ready;
use std::time::{Duration, Instant};

/// A pause in force: what was left of the `--timeout` when it began, to go
/// on from at the resume.
pub struct Paused {
    timeout_left: Option<Duration>,
}

/// What a pause stops and a resume starts again: the supervisor's own
/// fields, borrowed together.
pub struct Clocks<'a> {
    pub paused: &'a mut Option<Paused>,
    /// Cleared while paused; set again from what was left at the resume.
    pub timeout_at: &'a mut Option<Instant>,
    pub watch: Option<&'a mut ready::Watch>,
    pub job: &'a mut Job,
}

/// What a supervisor does for `pause` and `resume` its own way, for
/// `act_on`: each platform's supervisor implements it.
pub trait Pausing {
    fn clocks(&mut self) -> Clocks<'_>;
    /// A job being killed, or whose main process ended for good, is not
    /// paused: its end comes next, and the caller sees that instead. One
    /// between two runs is paused: the next run waits for the resume.
    fn ending(&self) -> bool;
    /// Holds every process of the job (and, where the platform can, each
    /// that joins it while paused).
    fn hold_tree(&mut self);
    /// Lets every process held go on.
    fn release_tree(&mut self);
    /// The registry and the job, to record the pause in (Unix refreshes its
    /// hold of the home first).
    fn record(&mut self) -> (&Registry, &Job);
    fn note_error(&self, message: &str);
}

/// The pause or resume request left beside the job, if any (taken away).
pub fn take_request(home: &Home, job_id: &str) -> Option<PauseRequest> {
    let path = home.job_dir(job_id).join(PAUSE_REQUEST_FILE);
    let bytes = crate::store::paths::read_file(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    serde_json::from_slice(&bytes).ok()
}

/// Acts on a pause or resume request.
pub fn act_on<S: Pausing + ?Sized>(s: &mut S, request: PauseRequest) {
    if !request.pause {
        resume(s);
    } else if !s.ending() {
        pause(s);
    }
}

fn pause<S: Pausing + ?Sized>(s: &mut S) {
    s.hold_tree();
    let clocks = s.clocks();
    if clocks.paused.is_none() {
        let now = Instant::now();
        let timeout_left = clocks.timeout_at.take().map(|at| at.saturating_duration_since(now));
        if let Some(watch) = clocks.watch {
            watch.pause(now);
        }
        *clocks.paused = Some(Paused { timeout_left });
        clocks.job.paused_at = Some(now_ms());
    }
    save(s);
}

fn resume<S: Pausing + ?Sized>(s: &mut S) {
    s.release_tree();
    let clocks = s.clocks();
    if let Some(paused) = clocks.paused.take() {
        // The clocks go on from where the pause stopped them.
        let now = Instant::now();
        *clocks.timeout_at = paused.timeout_left.map(|left| now + left);
        if let Some(watch) = clocks.watch {
            watch.resume(now);
        }
    }
    clocks.job.end_pause(now_ms());
    save(s);
}

/// In job.json at once (no lock), which the caller waits for and every
/// reader merges in; in the registry too if its lock is free now (the
/// caller writes it there otherwise).
fn save<S: Pausing + ?Sized>(s: &mut S) {
    let (registry, job) = s.record();
    let written = registry.write_job_file(job, false);
    let (paused_at, paused_ms) = (job.paused_at, job.paused_ms);
    let _ = registry.modify_with(Patience::Immediate, &job.id, |job| {
        job.paused_at = paused_at;
        job.paused_ms = paused_ms;
    });
    if let Err(e) = written {
        s.note_error(&format!("cannot record the pause or resume in its job.json: {e}"));
    }
}
