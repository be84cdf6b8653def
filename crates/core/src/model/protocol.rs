//! What the processes of proc-manager tell each other: the environment marks
//! that identify a job's processes and its supervisor, the kill request left
//! beside a job, and the supervisor's first answer to its starter.

use crate::model::error::HandOffError;
use serde::{Deserialize, Serialize};

/// Environment variable every process of a job inherits; its value is the job id.
pub const JOB_COOKIE: &str = "PROC_MANAGER_JOB";

/// What a killer writes to `jobs/<id>/kill-request.json` before sending SIGUSR1.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct KillRequest {
    pub grace_ms: u64,
    pub force: bool,
    /// Set by `kill`: the caller passes over the whole process table itself
    /// (once for every job it kills), signals what of the job lies outside
    /// the supervisor's subtree, and records the ends in the registry, once
    /// for them all. The supervisor then looks only at its own descendants
    /// and recorded processes, and records the end in job.json alone: with
    /// N jobs killed at once, N passes over a table of N jobs' processes and
    /// N registry rewrites made a kill of N jobs cost N² (issue 25).
    #[serde(default)]
    pub caller_sweeps: bool,
    /// Set by `kill` (Linux) when it sent SIGTERM itself to every process of
    /// the job it found in a pass over the table begun at this time (clock
    /// ticks since boot, as a process's start time): the supervisor then
    /// sends none of its own but to what started since (what a TERM trap
    /// forks), and SIGKILL at the end of the grace period as always. Its
    /// own pass over its subtree, the reads of each process's environment
    /// and command line, was the most of what a supervisor spent on a kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_signalled_since: Option<u64>,
}

pub const KILL_REQUEST_FILE: &str = "kill-request.json";
/// Left in a job's directory by its supervisor as it exits having seen
/// every process below it end (it is a child subreaper, so that is every
/// descendant of the job) after its last look over the whole table, which
/// recorded what else carried the job's cookie: from then on what it
/// recorded is all of the job that can still run, and readers look only
/// at that, not at every process of the machine.
pub const SUPERVISOR_DONE_FILE: &str = "supervisor.done";
/// Locked (flock, exclusive) by a job's supervisor from before the job's
/// launch until it records the job's end: while it is held the job has its
/// supervisor, which a reader learns with one `flock` on a file of the job's
/// own, where the full look (the process's identity through a pidfd, its
/// environment for the supervisor mark) reads /proc twice. A lock not held
/// says nothing: the reader then looks the full way.
pub const SUPERVISOR_LOCK_FILE: &str = "supervisor.lock";

/// What `pause` and `resume` write to `jobs/<id>/pause-request.json` before
/// ringing the supervisor's doorbell (SIGUSR1), as `kill` does: the
/// supervisor stops (SIGSTOP) or continues (SIGCONT) the job's tree and its
/// timeout clock, then records `paused_at` in job.json, which the caller
/// waits for. The supervisor removes the request once it has acted on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRequest {
    /// `true`: pause; `false`: resume.
    pub pause: bool,
}

pub const PAUSE_REQUEST_FILE: &str = "pause-request.json";

/// Held (flock) by the one `pause` or `resume` of a job that asks its
/// supervisor at a time: the request file holds one request, so two at once
/// (a pause and a resume) overwrote each other and one waited in vain.
pub const PAUSE_LOCK_FILE: &str = "pause.lock";

/// Set in every supervisor's environment (value: its job id), so that a job's
/// supervisor can tell another job's supervisor among the processes it adopts.
pub const SUPERVISOR_MARK: &str = "PROC_MANAGER_SUPERVISOR";

/// The first line the supervisor writes on its stdout pipe: `ok <pid>` or `err <message>`.
pub const READY_OK: &str = "ok ";
pub const READY_ERR: &str = "err ";

/// Reads the supervisor's ready line from its stdout pipe.
pub fn parse_ready_line(line: &str) -> Result<u32, HandOffError> {
    let line = line.trim_end();
    if let Some(pid) = line.strip_prefix(READY_OK) {
        return pid.trim().parse().map_err(|_| HandOffError::Garbled(line.to_string()));
    }
    if let Some(message) = line.strip_prefix(READY_ERR) {
        return Err(HandOffError::Refused(message.to_string()));
    }
    Err(if line.is_empty() { HandOffError::NoAnswer } else { HandOffError::Garbled(line.to_string()) })
}

/// A job's end its live supervisor could not write (a read-only home),
/// which it keeps and shows to readers until it can (see
/// `os::platform::publish_unrecorded`): the job as it ended, and why it is
/// not on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnrecordedEnd {
    pub job: crate::model::job::Job,
    pub error: String,
}

/// The word that makes the `run-bg` binary a job's supervisor.
pub const SUPERVISE: &str = "__supervise";

/// Work the core hands to the `run-bg` binary in the background, as its
/// hidden modes: the core writes these arguments, the CLI reads them back,
/// and both go through here so that the two cannot disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Errand {
    /// `__announce <id> <status>`: announce a job's end (or it being orphaned
    /// or lost) as `claimed`, the status changed under the lock, even if the
    /// job has moved on by the time the announcer runs.
    Announce { job_id: String, claimed: Option<crate::model::job::JobStatus> },
    /// `__deliver`: deliver what waits in the notification spool.
    Deliver,
    /// `__watch <id>`: stay with an orphaned job until its processes end.
    Watch { job_id: String },
    /// `__sweep <folder>`: delete a folder of job directories a registry
    /// write forgot (`jobs/.gone-<pid>-<hex>`), off that writer's path.
    Sweep { folder: String },
    /// `__take-in`: fold into the registry the ends that jobs' job.json
    /// files hold, off the path of the `kill --all` that waited for them.
    TakeIn,
}

const ANNOUNCE: &str = "__announce";
const DELIVER: &str = "__deliver";
const WATCH: &str = "__watch";
const SWEEP: &str = "__sweep";
const TAKE_IN: &str = "__take-in";

impl Errand {
    /// The arguments to give `run-bg` for this errand.
    pub fn args(&self) -> Vec<String> {
        match self {
            Errand::Announce { job_id, claimed } => {
                let mut args = vec![ANNOUNCE.to_string(), job_id.clone()];
                args.extend(claimed.map(|s| s.as_str().to_string()));
                args
            }
            Errand::Deliver => vec![DELIVER.to_string()],
            Errand::Watch { job_id } => vec![WATCH.to_string(), job_id.clone()],
            Errand::Sweep { folder } => vec![SWEEP.to_string(), folder.clone()],
            Errand::TakeIn => vec![TAKE_IN.to_string()],
        }
    }

    /// Reads `run-bg`'s arguments (without the program name): `None` when
    /// they name no errand, `Some(Err(why))` when they name one badly (an
    /// errand's arguments come from the core, never from users). A claimed
    /// status that is no status is left out: the announcer then says the
    /// status recorded.
    pub fn parse(args: &[String]) -> Option<crate::Result<Errand>> {
        let job_id = |what: &str| args.get(1).cloned().ok_or_else(|| crate::Error::Usage(format!("{what} needs a job id")));
        Some(match args.first()?.as_str() {
            ANNOUNCE => job_id(ANNOUNCE).map(|job_id| Errand::Announce {
                job_id,
                claimed: args.get(2).and_then(|s| crate::model::job::JobStatus::parse(s)),
            }),
            DELIVER => Ok(Errand::Deliver),
            TAKE_IN => Ok(Errand::TakeIn),
            WATCH => job_id(WATCH)
                .and_then(|job_id| crate::model::ids::validate_job_id(&job_id).map(|()| Errand::Watch { job_id })),
            SWEEP => match args.get(1) {
                Some(folder) if folder.starts_with(".gone-") && !folder.contains(['/', '\\']) => Ok(Errand::Sweep { folder: folder.clone() }),
                _ => Err(crate::Error::Usage(format!("{SWEEP} needs a folder named .gone-<pid>-<hex>"))),
            },
            _ => return None,
        })
    }
}

/// What the core may start the `run-bg` binary as, read from its arguments
/// (without the program name): a job's supervisor, or an errand. `None`:
/// an ordinary command line, for the CLI to parse.
#[derive(Debug)]
pub enum HiddenMode {
    Supervise,
    Errand(crate::Result<Errand>),
}

impl HiddenMode {
    pub fn parse(args: &[String]) -> Option<HiddenMode> {
        if args.first().map(String::as_str) == Some(SUPERVISE) {
            return Some(HiddenMode::Supervise);
        }
        Errand::parse(args).map(HiddenMode::Errand)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::JobStatus;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn every_errand_reads_back_as_written() {
        for errand in [
            Errand::Announce { job_id: "build-3f2a1c".into(), claimed: Some(JobStatus::Orphaned) },
            Errand::Announce { job_id: "build-3f2a1c".into(), claimed: None },
            Errand::Deliver,
            Errand::Watch { job_id: "build-3f2a1c".into() },
            Errand::Sweep { folder: ".gone-4242-0a1b2c3d".into() },
            Errand::TakeIn,
        ] {
            assert_eq!(Errand::parse(&errand.args()).map(Result::unwrap), Some(errand.clone()), "{:?}", errand.args());
        }
        assert_eq!(
            Errand::Announce { job_id: "x-1".into(), claimed: Some(JobStatus::Lost) }.args(),
            ["__announce", "x-1", "lost"]
        );
        assert_eq!(Errand::Watch { job_id: "x-1".into() }.args(), ["__watch", "x-1"]);
    }

    #[test]
    fn the_supervisor_and_errands_are_hidden_modes_and_nothing_else_is() {
        assert!(matches!(HiddenMode::parse(&words(&["__supervise"])), Some(HiddenMode::Supervise)));
        assert!(matches!(HiddenMode::parse(&words(&["__deliver"])), Some(HiddenMode::Errand(Ok(Errand::Deliver)))));
        assert!(matches!(HiddenMode::parse(&words(&["__watch"])), Some(HiddenMode::Errand(Err(_)))));
        for args in [&[][..], &["list"], &["--", "__supervise"]] {
            assert!(HiddenMode::parse(&words(args)).is_none(), "{args:?}");
        }
    }

    #[test]
    fn other_arguments_are_no_errand() {
        for args in [&[][..], &["list"], &["--", "__watch"], &["__supervise", "x-1"], &["__bogus"]] {
            assert!(Errand::parse(&words(args)).is_none(), "{args:?}");
        }
    }

    #[test]
    fn an_errand_named_badly_says_what_is_wrong() {
        let refused = |args: &[&str]| Errand::parse(&words(args)).unwrap().unwrap_err().to_string();
        assert_eq!(refused(&["__announce"]), "__announce needs a job id");
        assert_eq!(refused(&["__watch"]), "__watch needs a job id");
        assert!(Errand::parse(&words(&["__watch", "../etc"])).unwrap().is_err(), "a watcher's id names a directory");
        for folder in [&["__sweep"][..], &["__sweep", "../jobs"], &["__sweep", ".gone-1/../.."], &["__sweep", "f1-0a1b2c"]] {
            assert!(Errand::parse(&words(folder)).unwrap().is_err(), "{folder:?}: a sweeper deletes only a folder of forgotten jobs");
        }
        assert_eq!(
            Errand::parse(&words(&["__announce", "x-1", "done"])).map(Result::unwrap),
            Some(Errand::Announce { job_id: "x-1".into(), claimed: None }),
            "an unknown claimed status falls back to the recorded one"
        );
        assert_eq!(Errand::parse(&words(&["__deliver", "extra"])).map(Result::unwrap), Some(Errand::Deliver));
    }

    #[test]
    fn a_ready_line_gives_the_pid_or_says_what_went_wrong() {
        assert_eq!(parse_ready_line("ok 4242\n").unwrap(), 4242);
        let refused = parse_ready_line("err cannot start `x`: no such file");
        assert!(matches!(&refused, Err(HandOffError::Refused(why)) if why == "cannot start `x`: no such file"), "{refused:?}");
        assert!(matches!(parse_ready_line(""), Err(HandOffError::NoAnswer)));
        assert!(matches!(parse_ready_line("ok many"), Err(HandOffError::Garbled(line)) if line == "ok many"));
        assert_eq!(parse_ready_line("hello").unwrap_err().to_string(), "supervisor sent a bad ready line: hello");
        assert_eq!(parse_ready_line("").unwrap_err().to_string(), "the supervisor exited before starting the job");
        assert_eq!(HandOffError::Refused("why".into()).to_string(), "why");
    }
}
