//! `rerun`: a job started again as a new job (new id, `rerun_of` the old
//! one), with the command, working directory, environment additions and
//! start options its record keeps: what `pueue restart` does, where the
//! old task stays as it ended.

use crate::model::job::{Job, Wake};
use crate::verbs::context::Context;
use crate::verbs::request::{RestartRequest, StartRequest, Started};
use crate::verbs::start_options::Face;
use crate::{Error, Result};
use std::path::Path;

impl Context {
    /// The request that starts `id` again as it was started. A job that
    /// still runs (or waits, or is paused or orphaned) is refused: a second
    /// copy beside it would fight it for its ports and files; it is killed
    /// first. `face` gives the caller a `--tie` ties the rerun to.
    pub fn rerun_request(&self, id: &str, face: &dyn Face) -> Result<StartRequest> {
        let job = self.job(id)?;
        if !job.status().is_final() {
            return Err(Error::Other(format!(
                "{id} is {}: a rerun starts a new job beside it; end it first (`run-bg kill {id}`), then rerun it",
                job.shown_status()
            )));
        }
        request_for(&job, face)
    }

    /// Starts `id` again as a new job (see `rerun_request`).
    pub fn rerun(&self, id: &str, face: &dyn Face, supervisor_exe: &Path) -> Result<Started> {
        let request = self.rerun_request(id, face)?;
        crate::verbs::start::start_job(self, request, supervisor_exe)
    }
}

/// The start `job` was: everything its record keeps of how it was asked for.
fn request_for(job: &Job, face: &dyn Face) -> Result<StartRequest> {
    let missing = |what: &str| {
        Error::Other(format!(
            "cannot rerun {}: its record keeps no {what} (written by an older version, or edited); start it anew instead",
            job.id
        ))
    };
    if job.argv.is_empty() || job.argv[0].is_empty() {
        return Err(missing("command"));
    }
    if job.cwd.as_os_str().is_empty() {
        return Err(missing("working directory"));
    }
    let tie_pid = match &job.tie {
        None => None,
        // `--tie`: tied to whoever asks for the rerun, as the start was to its caller.
        Some(tie) if tie.caller => Some(face.caller_pid()),
        // `--tie-pid`: the same process, if it still runs.
        Some(tie) if crate::os::procinfo::is_same_process_alive(&tie.to) => Some(tie.to.pid),
        Some(tie) => {
            return Err(Error::Usage(format!(
                "cannot rerun {}: it was tied to pid {}, which has exited; start it anew with a tie of its own",
                job.id, tie.to.pid
            )))
        }
    };
    let waits = job.waits.clone().unwrap_or_default();
    Ok(StartRequest {
        argv: job.argv.clone(),
        display: Some(job.command.clone()),
        label: Some(job.label.clone()),
        cwd: Some(job.cwd.clone()),
        env: job.env.clone(),
        owner: job.owner.clone(),
        context: job.context.clone(),
        timeout_ms: job.timeout_ms,
        notify: job.notify,
        on_exit: job.on_exit.clone(),
        ready: job.ready.clone(),
        notify_on: job.notify_on.clone(),
        restart: job.restart.as_ref().map(|r| RestartRequest {
            policy: r.policy,
            max_restarts: Some(r.max_restarts),
            delay_ms: Some(r.delay_ms),
        }),
        stdin_pipe: job.stdin_pipe,
        // The rule as asked; where the old one stood at the service is the old job's.
        wake: job.wake.as_ref().map(|w| Wake {
            message: w.message.clone(),
            instruction: w.instruction.clone(),
            action: w.action,
            ..Wake::default()
        }),
        queue: waits.queue,
        priority: waits.priority,
        after: waits.after,
        after_any: waits.after_any,
        after_ready: waits.after_ready,
        tie_pid,
        tie_to_caller: job.tie.as_ref().is_some_and(|t| t.caller),
        nice: job.nice,
        rerun_of: Some(job.id.clone()),
        // Found anew: the rerun belongs to whoever starts it.
        session: None,
        outlive_session: job.outlive_session,
        // `run-bg rerun` waits for its answer like any start; the caller decides.
        caller_exits: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{sample_job, JobStatus};

    struct Caller;
    impl Face for Caller {
        fn name(&self, option: &str) -> String {
            option.to_string()
        }
        fn caller_pid(&self) -> u32 {
            4242
        }
    }

    #[test]
    fn a_rerun_asks_for_what_the_job_was_started_with() {
        let mut job = sample_job(JobStatus::Failed);
        job.env.insert("MODE".into(), "ci".into());
        job.timeout_ms = Some(2000);
        job.owner = Some("agent".into());
        job.nice = Some(5);
        let request = request_for(&job, &Caller).unwrap();
        assert_eq!(request.argv, job.argv);
        assert_eq!(request.display.as_deref(), Some("make -j2"));
        assert_eq!(request.label.as_deref(), Some("build"));
        assert_eq!(request.cwd.as_deref(), Some(Path::new("/src")));
        assert_eq!(request.env.get("MODE").map(|v| v.to_str().unwrap()), Some("ci"));
        assert_eq!((request.timeout_ms, request.nice, request.owner.as_deref()), (Some(2000), Some(5), Some("agent")));
        assert_eq!(request.rerun_of.as_deref(), Some("build-3f2a1c"));
    }

    #[test]
    fn a_record_without_a_command_or_directory_cannot_be_rerun() {
        let mut job = sample_job(JobStatus::Success);
        job.argv.clear();
        assert!(request_for(&job, &Caller).unwrap_err().to_string().contains("keeps no command"));
        let mut job = sample_job(JobStatus::Success);
        job.cwd = "".into();
        assert!(request_for(&job, &Caller).unwrap_err().to_string().contains("keeps no working directory"));
    }
}
