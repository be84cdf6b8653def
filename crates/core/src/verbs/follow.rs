//! Following a job's log: new output as it is written, through rotations,
//! until the job has ended and nothing can write to its log any more.

use crate::model::job::Job;
use crate::store::logs::LogFollower;
use crate::verbs::ops::Context;
use crate::Result;
use std::io::Write;
use std::time::Duration;

/// How often the log and the job's state are looked at while nothing new comes.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

impl Context {
    /// Streams `job`'s new output into `sink` from where `follower` stands,
    /// until the job has ended and its supervisor, the log's only writer, is
    /// gone (so that its last lines are not missed).
    pub fn follow_log(&self, job: &Job, follower: &mut LogFollower, sink: &mut dyn Write) -> Result<()> {
        follower.follow(sink, FOLLOW_POLL, || {
            let current = self.registry().get(&job.id)?;
            let supervised = crate::os::tree::live_supervisor(&current).is_some();
            Ok(current.status().is_final() && !supervised)
        })
    }
}
