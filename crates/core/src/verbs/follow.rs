//! Following a job's log: new output as it is written, through rotations,
//! until the job has ended and nothing can write to its log any more, or
//! until the follower is cancelled.

use crate::model::job::{Job, JobStatus};
use crate::store::logs::LogFollower;
use crate::verbs::cancel::Cancel;
use crate::verbs::context::Context;
use crate::{Error, Result};
use std::io::Write;
use std::time::{Duration, Instant};

/// How often the log and the job's state are looked at while nothing new comes.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// How often, while nothing new comes, the job is also reconciled with the OS
/// (is its supervisor still there?), as `wait` does.
const RECONCILE_EVERY: Duration = Duration::from_secs(1);

/// How a follow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// The job ended and everything it wrote has been passed on.
    Ended,
    /// `cancel` was thrown; the job may still run.
    Cancelled,
}

impl Context {
    /// Streams `job`'s new output into `sink` from where `follower` stands,
    /// until the job has ended and its supervisor, the log's only writer, is
    /// gone (so that its last lines are not missed), or until `cancel` is
    /// thrown (noticed at once while waiting for output, and between reads).
    pub fn follow_log(&self, job: &Job, follower: &mut LogFollower, sink: &mut dyn Write, cancel: &Cancel) -> Result<Followed> {
        let log = job.log_path.clone();
        let read_new = |follower: &mut LogFollower, sink: &mut dyn Write| {
            follower.read_new(sink).map_err(|e| Error::io("copy the output of", &log, e))
        };
        let mut reconciled = Instant::now();
        loop {
            if cancel.is_cancelled() {
                return Ok(Followed::Cancelled);
            }
            if read_new(follower, sink)? > 0 {
                continue;
            }
            let mut current = self.registry().get(&job.id)?;
            // A supervisor that died writes nothing that says so: the follower
            // looks, as any reader does, and that look starts the watcher that
            // takes up the job's output. Without it, what the job writes waits
            // in the pipe, the follow never ends, and the output is lost with
            // the job's end unless another call happens to look first.
            // Only a job whose supervisor was last known alive: an orphaned
            // one has its watcher (which records its end), and a queued one
            // no supervisor yet.
            let supervised = matches!(current.status(), JobStatus::Running | JobStatus::Paused);
            if supervised && reconciled.elapsed() >= RECONCILE_EVERY {
                reconciled = Instant::now();
                if let Some(looked) = self.reconcile_jobs(vec![current.clone()])?.pop() {
                    current = looked;
                }
            }
            if crate::verbs::check::log_has_no_writer(&current) {
                // Asked before a read, never after one: what the writer wrote
                // between that read and the question would be left unread.
                // The writer is gone now, so this read takes all it wrote.
                read_new(follower, sink)?;
                return Ok(Followed::Ended);
            }
            if cancel.pause(FOLLOW_POLL) {
                return Ok(Followed::Cancelled);
            }
        }
    }
}
