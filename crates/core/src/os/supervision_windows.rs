//! Windows's half of the supervisor (the loop, the kill's course, restarts,
//! readiness and the recording are supervise/supervisor.rs's, the same on
//! every platform): each run's main process starts suspended in the job's
//! Job Object, so every process it starts is held there too; `kill`,
//! `pause` and `resume` ring a named event (the doorbell) after leaving
//! their request, a stop rings another (the stop bell, Unix's SIGTERM); a
//! kill is CTRL_BREAK to the run's console process group, then the Job
//! Object ended (os/kill_windows.rs); a pause suspends its members
//! (os/pause_windows.rs, job_watch_windows.rs).

use crate::model::job::{Job, ProcessIdentity};
use crate::os::job_watch_windows::JobMembers;
use crate::os::stdin_pipe_windows::JobStdin;
use crate::os::wait::{Bells, MainEnd, Reaped, Woken};
use crate::os::{kill_windows, launch_windows, windows_job};
use std::os::windows::io::{AsHandle, BorrowedHandle, OwnedHandle};
use std::path::Path;
use std::time::Duration;

/// Windows asks nothing of who was sent the break: it goes to the whole
/// console group.
pub type Asked = ();

/// Windows's supervisor looks at its Job Object alone: no caller sweeps for it.
pub const CALLER_SWEEPS: bool = false;

/// Errands are threads: nothing to join before one starts.
pub const FORKS: bool = false;

/// Readers ask the Job Object, which holds the whole tree: no record of
/// processes, no alive lock, no done mark beside the job.
pub const KEEPS_TREE_RECORD: bool = false;

/// What a kill or a pause reaches: the Job Object holds the whole tree, so
/// only the scope's shape is shared with Unix.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub job: &'a Job,
    pub recorded: &'a [ProcessIdentity],
    pub below_only: bool,
}

/// What a new run hands the output: the read end of its own pipe.
pub type NewRun = std::io::PipeReader;

/// Windows's state of a supervision.
pub struct Host {
    /// The current run's main process; none once it has been reaped.
    main: Option<std::process::Child>,
    /// The console process group of the current (or the last) run: its
    /// main process's pid, which what that run left still belongs to.
    group: u32,
    job_object: OwnedHandle,
    /// Rung after a request is left beside the job (`kill`, `pause`, `resume`).
    doorbell: OwnedHandle,
    /// Rung for a stop (Unix's SIGTERM to the supervisor: os/windows.rs).
    stop_bell: OwnedHandle,
    /// The Job Object's members: held while paused, given `--nice`'s class.
    members: JobMembers,
    /// `--stdin pipe`: the read end each run gets (a thread of ours holds the write end).
    stdin: Option<JobStdin>,
}

impl Host {
    /// Set up before the first run: the Job Object, the two bells, the
    /// watch of the Job Object's members, the stdin pipe.
    pub fn prepare(home: &Path, job: &Job, supervisor: &ProcessIdentity) -> Result<Host, String> {
        let job_object = windows_job::create_job(&windows_job::object_name(home, &job.id, "tree")).map_err(|e| format!("cannot create the job's Job Object: {e}"))?;
        let doorbell = windows_job::create_event(&windows_job::doorbell_name(supervisor)).map_err(|e| format!("cannot create the kill doorbell: {e}"))?;
        let stop_bell = windows_job::create_manual_event(&windows_job::stop_bell_name(supervisor)).map_err(|e| format!("cannot create the stop bell: {e}"))?;
        // Before the run starts: every process that joins is heard of.
        let (members, unwatched) = JobMembers::watch(&job_object, &job.id, job.nice.map(crate::os::nice_windows::priority_class));
        if let Some(e) = unwatched {
            tracing::warn!("run-bg supervisor {}: cannot watch the Job Object for new processes ({e}); a pause catches them by looking", job.id);
        }
        let stdin = match job.stdin_pipe {
            true => Some(crate::os::stdin_pipe_windows::serve(home, &job.id).map_err(|e| format!("cannot create the stdin pipe: {e}"))?),
            false => None,
        };
        Ok(Host { main: None, group: 0, job_object, doorbell, stop_bell, members, stdin })
    }

    /// Starts a run of the job's main process in the Job Object.
    pub fn launch_run(&mut self, job: &Job) -> Result<(ProcessIdentity, NewRun), String> {
        let (main, identity, reader) = launch_windows::launch_run(job, &self.job_object, self.stdin.as_ref().map(|s| &s.child_end))?;
        self.group = main.id();
        self.main = Some(main);
        Ok((identity, reader))
    }

    /// A start that cannot be recorded: what it started goes.
    pub fn stop_unrecorded(&mut self) -> std::io::Result<()> {
        windows_job::terminate_job(&self.job_object, 1)
    }

    /// The job ends for good; its stdin's thread goes with us.
    pub fn let_go(&mut self) {}

    /// `send --eof` goes through the stdin pipe's own thread.
    pub fn close_stdin(&mut self) {}

    /// Sleeps until a bell rang, the output has news, the main or the tied
    /// process ended, or `limit` passed (`None`: an hour, then again).
    pub fn wait(&self, output: Option<BorrowedHandle>, tie: Option<&crate::os::sys::PinnedProcess>, limit: Option<Duration>) -> Woken {
        let doorbells = [self.doorbell.as_handle(), self.stop_bell.as_handle()];
        let limit = limit.unwrap_or(Duration::from_secs(3600));
        crate::os::wait_windows::wait(doorbells, output, self.main.as_ref().map(AsHandle::as_handle), tie.map(AsHandle::as_handle), limit)
    }

    /// Nothing forks here: errands are threads (`FORKS`).
    pub fn fork(_in_child: impl FnOnce()) -> std::io::Result<u32> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    /// Notifiers are threads: no child to keep out of the job.
    pub fn notifier_started(&mut self, _pid: u32) {}

    /// Nothing to put back in an errand: none is forked.
    pub fn in_errand(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Which bells rang: the doorbell (auto-reset, taken by the wait) is a
    /// request to look for; the stop bell stays set until taken.
    pub fn bells(&self, woken: &Woken) -> Bells {
        Bells { children: woken.main_ended, requests: woken.doorbell, stop: woken.doorbell && windows_job::take(&self.stop_bell) }
    }

    /// The output's copying threads write on their own: nothing to gather.
    pub fn pause_unless_rung(&self, _limit: Duration) {}

    /// The main process, if it has ended. No child of ours is left then:
    /// what the run left is in the Job Object.
    pub fn reap(&mut self) -> Reaped {
        let Some(main) = &mut self.main else { return Reaped { main: None, none_left: true } };
        match main.try_wait() {
            Ok(Some(status)) => {
                self.main = None;
                let end = MainEnd::from_wait(status.code(), None).unwrap_or(MainEnd::Unread);
                Reaped { main: Some(end), none_left: true }
            }
            // Not ended, or its handle cannot say: the wait on it says when.
            Ok(None) | Err(_) => Reaped::default(),
        }
    }

    /// CTRL_BREAK to the run's console group. A suspended process cannot
    /// take the break: a paused tree is resumed first (Unix sends SIGCONT
    /// after its SIGTERM instead). A group that cannot take it is ended now,
    /// as a termination (the exit code SIGTERM gives on Unix).
    pub fn ask_to_stop(&mut self, _scope: Scope, _asked: &mut Asked) -> Result<(), String> {
        if self.members.is_paused() {
            self.members.resume();
        }
        let Err(e) = kill_windows::ask_to_stop(self.group) else { return Ok(()) };
        tracing::warn!("run-bg supervisor: cannot send CTRL_BREAK to the job ({e}); ending it now");
        kill_windows::force(&self.job_object, self.main.as_mut(), crate::model::signals::SIGTERM)
            .map_err(|e| format!("cannot end the job's Job Object either ({e})"))
    }

    /// A look during a kill: the Job Object ended once `force` (again at
    /// each look, and the main process with it: a process may join between
    /// two). Whether anything of the job is left.
    pub fn look(&mut self, _scope: Scope, _asked: &mut Asked, _since: u64, force: bool) -> bool {
        if force {
            if let Err(e) = kill_windows::force(&self.job_object, self.main.as_mut(), crate::model::signals::SIGKILL) {
                tracing::warn!("run-bg supervisor: cannot end the job's Job Object ({e}); ended its main process");
            }
            // A paused tree forced is ended suspended; what is held goes now.
            if self.members.is_paused() {
                self.members.resume();
            }
        }
        kill_windows::anything_left(&self.job_object)
    }

    /// Whether any process is left in the Job Object.
    pub fn anything_left(&self, _scope: Scope) -> bool {
        kill_windows::anything_left(&self.job_object)
    }

    /// `pause`: every member suspended, and each that joins while paused.
    pub fn hold_tree(&mut self, _scope: Scope) {
        self.members.pause(&self.job_object);
    }

    pub fn release_tree(&mut self, _scope: Scope) {
        self.members.resume();
    }

    /// A kill of a paused job: its processes are resumed (to take the
    /// break, or already ended); whether a pause was over.
    /// Forced (not `signalled`), it stays suspended until the Job Object
    /// is ended (`look`): nothing of it runs again first.
    pub fn release_for_kill(&mut self, _scope: Scope, was_paused: bool, signalled: bool) -> bool {
        let paused = was_paused || self.members.is_paused();
        if paused && signalled {
            self.members.resume();
        }
        paused
    }

    /// The Job Object's live processes.
    pub fn pids(&self, _scope: Scope) -> Vec<u32> {
        windows_job::process_ids(&self.job_object)
    }

    /// Nothing to record: the Job Object holds every process of the job,
    /// and readers find them through it.
    pub fn processes(&self, _scope: Scope, _full: bool) -> Vec<ProcessIdentity> {
        Vec::new()
    }

    /// No child of ours outlives the main process: none is adopted.
    pub fn reaps_every_orphan(&self) -> bool {
        false
    }

    /// No deliverer is ours to wait for: notifications are threads.
    pub fn only_deliverer_left(&self, _deliverer_mark: &str) -> bool {
        false
    }
}

/// First in `run-bg __supervise`: the job is started with std's own copies
/// of what it is given; our stdin, stdout (the caller's answer pipe) and
/// stderr must not reach it, or a caller reading our answer would wait for
/// the job's whole tree. A console event sent to the job is not ours.
pub fn before_start() {
    crate::os::sys::keep_own_stdio_private();
    windows_job::ignore_console_events();
}

/// The caller started us detached already.
pub fn detach(_stay_child: bool) -> std::io::Result<()> {
    Ok(())
}

/// A console session is not a Unix one: nothing to leave.
pub fn leave_callers_session() -> std::io::Result<()> {
    Ok(())
}

/// Our stdout was kept from the job: nothing to let go of.
pub fn answered() {}

/// CreateProcess says at once whether the run started: nothing is pending.
pub struct Pending(std::convert::Infallible);

impl Pending {
    pub fn exec_outcome(self) -> Result<(), String> {
        match self.0 {}
    }
}

/// Ends the process: its caller has joined its errands and written everything.
pub fn exit_now() -> ! {
    std::process::exit(0)
}
