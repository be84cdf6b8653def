//! Unix's half of the supervisor (the loop, the kill's course, restarts,
//! readiness and the recording are supervise/supervisor.rs's, the same on
//! every platform): the job's main process is our forked child, reaped with
//! `wait`; signal handlers ring a self-pipe the loop polls; a kill is
//! SIGTERM then SIGKILL to the job's tree and to what we adopted as a child
//! subreaper; a pause is SIGSTOP to the same (os/kill_unix.rs, pause_unix.rs).

use crate::model::error::LaunchError;
use crate::model::job::{Job, ProcessIdentity};
use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use crate::os::kill_unix::{self, Reach, Termed};
use crate::os::launch::{self, new_pipe, LaunchSpec};
use crate::os::procinfo;
use crate::os::tree::{self, Tree};
use crate::os::wait::{Bells, MainEnd, Reaped, Woken};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a kill keeps of who was asked to stop: every process sent SIGTERM,
/// so a newcomer gets it once.
pub type Asked = Termed;

/// A sweeping caller (`KillRequest::caller_sweeps`) passes over the table
/// itself and may narrow our looks to our own subtree: we adopt every orphan.
pub const CALLER_SWEEPS: bool = true;

/// Forks run ordinary Rust code in a child (a launch, a notifier): the
/// supervisor's other threads are joined first.
pub const FORKS: bool = true;

/// The supervisor keeps, beside the job, what readers judge its tree by:
/// the processes it saw below it (looked for now and then), the lock held
/// while it lives, and the done mark it leaves.
pub const KEEPS_TREE_RECORD: bool = true;

/// What the job is, as a kill or a pause reaches it: its tree (group,
/// cookie, the processes recorded for it); `below_only`: our subtree alone.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub job: &'a Job,
    pub recorded: &'a [ProcessIdentity],
    pub below_only: bool,
}

/// The signals the loop waits on, as signal-hook's handlers leave them: a
/// flag per kind, set before the handler writes a byte into `wake`, which is
/// what `poll` watches. A full pipe drops the byte, which is harmless: one
/// pending byte is enough to wake the loop, and the flags say what came.
struct Signals {
    /// The read end of the self-pipe; its write end is the handlers' for
    /// the life of the process.
    wake: OwnedFd,
    /// SIGCHLD: a child (the main process, an adopted descendant, the notifier) may be reapable.
    child: Arc<AtomicBool>,
    /// SIGUSR1: `kill`, `pause`, `resume` or `send --eof` may have left a request.
    request: Arc<AtomicBool>,
    /// SIGTERM, SIGINT or SIGHUP: someone wants the job gone.
    stop: Arc<AtomicBool>,
}

/// Every signal the supervisor handles; a forked errand puts them back to default.
pub const HANDLED: [i32; 5] = [libc::SIGCHLD, libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

fn install_signal_handlers() -> std::io::Result<Signals> {
    let (wake, write) = new_pipe(libc::O_NONBLOCK)?;
    let signals = Signals {
        wake,
        child: Arc::new(AtomicBool::new(false)),
        request: Arc::new(AtomicBool::new(false)),
        stop: Arc::new(AtomicBool::new(false)),
    };
    // Owned by the handlers from now on, so it stays open while they may run.
    let write = write.into_raw_fd();
    for signal in HANDLED {
        let flag = match signal {
            libc::SIGCHLD => &signals.child,
            libc::SIGUSR1 => &signals.request,
            _ => &signals.stop,
        };
        // The flag first: signal-hook runs a signal's actions in the order
        // they were registered, so the loop never wakes to a flag not yet set.
        signal_hook::flag::register(signal, Arc::clone(flag))?;
        signal_hook::low_level::pipe::register_raw(signal, write)?;
    }
    Ok(signals)
}

/// The job's pipes as a run gets them: its stdout and stderr, its stdin.
pub struct RunEnds {
    pub output: OwnedFd,
    pub stdin: Option<OwnedFd>,
}

/// Unix's state of a supervision.
pub struct Host {
    signals: Signals,
    main: Option<rustix::process::Pid>,
    /// The forked child that announces the end; not part of the job.
    notifier: Option<libc::pid_t>,
    /// Each new run's stdout and stderr and its stdin: kept only while a
    /// restart may come, so the output pipe never reads as ended between runs.
    run_ends: Option<RunEnds>,
    /// `--stdin pipe`: our write end, which keeps the job from reading EOF
    /// until it ends (or `send --eof`).
    stdin_writer: Option<OwnedFd>,
}

/// What a new run hands the output: nothing on Unix, whose runs share one pipe.
pub type NewRun = ();

impl Host {
    /// Set up before the first run: the signal handlers.
    pub fn prepare() -> Result<Host, String> {
        let signals = install_signal_handlers().map_err(|e| format!("cannot set up signal handling: {e}"))?;
        Ok(Host { signals, main: None, notifier: None, run_ends: None, stdin_writer: None })
    }

    /// The pipes the runs get: kept for the next run only when one may come
    /// (`restarts`); our end of the stdin pipe kept for the job's life.
    pub fn keep_pipes(&mut self, ends: RunEnds, stdin_writer: Option<OwnedFd>, restarts: bool) {
        self.run_ends = restarts.then_some(ends);
        self.stdin_writer = stdin_writer;
    }

    /// Starts a run of the job's main process: its argv, cwd and environment
    /// plus the cookie, `output` as its stdout and stderr, `stdin` or /dev/null.
    pub fn launch_with(job: &Job, output: RawFd, stdin: Option<RawFd>) -> Result<launch::Launched, LaunchError> {
        launch::launch(&LaunchSpec {
            argv: &job.argv,
            cwd: Path::new(&job.cwd),
            set: job.env.iter().map(|(k, v)| (k.into(), v.into())).chain([(JOB_COOKIE.into(), job.id.clone().into())]).collect(),
            remove: &[SUPERVISOR_MARK],
            output,
            stdin,
            nice: job.nice,
        })
    }

    /// The first run's main process, launched by the start: ours to reap.
    pub fn launched(&mut self, pid: libc::pid_t) -> Option<ProcessIdentity> {
        self.main = Some(rustix::process::Pid::from_raw(pid)?);
        // Our unreaped child: its pid cannot have been reused yet.
        Some(procinfo::identify_exactly(pid as u32).unwrap_or(ProcessIdentity::from_stat(pid as u32, 0)))
    }

    /// Starts another run (`--restart`) on the pipes kept for it.
    pub fn launch_run(&mut self, job: &Job) -> Result<(ProcessIdentity, NewRun), String> {
        let Some(ends) = &self.run_ends else { return Err("the job's pipes were let go of".into()) };
        let launched = Host::launch_with(job, ends.output.as_raw_fd(), ends.stdin.as_ref().map(AsRawFd::as_raw_fd)).map_err(|e| e.to_string())?;
        let pid = launched.pid;
        launched.exec_outcome().map_err(|e| e.to_string())?;
        let identity = self.launched(pid).ok_or_else(|| format!("the launch reported pid {pid}"))?;
        Ok((identity, ()))
    }

    /// The job ends for good: the pipes kept for another run go, so its
    /// output can end, and its stdin reads EOF.
    pub fn let_go(&mut self) {
        self.run_ends = None;
        self.stdin_writer = None;
    }

    /// `send --eof`: our write end goes, and the job reads EOF once no
    /// `send` has the pipe open either.
    pub fn close_stdin(&mut self) {
        self.stdin_writer = None;
    }

    /// Sleeps until a signal came, the output has something, the tied
    /// process ended, or `limit` passed (`None`: until woken).
    pub fn wait(&self, output: Option<BorrowedFd>, tie: Option<&crate::os::sys::PinnedProcess>, limit: Option<Duration>) -> Woken {
        crate::os::wait_unix::wait(self.signals.wake.as_fd(), output, tie.map(AsFd::as_fd), limit)
    }

    /// Runs `in_child` in a forked child of ours, which then `_exit`s; the
    /// child's pid. The caller has joined its other threads.
    pub fn fork(in_child: impl FnOnce()) -> std::io::Result<u32> {
        crate::os::fork::fork_errand(in_child).map(|pid| pid as u32)
    }

    /// The forked child that announces the end: not the job's, never signalled.
    pub fn notifier_started(&mut self, pid: u32) {
        self.notifier = Some(pid as libc::pid_t);
    }

    /// Which bells rang: the self-pipe emptied before the flags are read,
    /// so a signal that comes after this writes a new byte and wakes the
    /// loop again.
    pub fn bells(&self, _woken: &Woken) -> Bells {
        let mut bytes = [0u8; 64];
        while matches!(rustix::io::read(&self.signals.wake, &mut bytes), Ok(n) if n > 0) {}
        Bells {
            children: self.signals.child.swap(false, Ordering::Relaxed),
            requests: self.signals.request.swap(false, Ordering::Relaxed),
            stop: self.signals.stop.swap(false, Ordering::Relaxed),
        }
    }

    /// Waits up to `limit` for a signal alone (a pause that a signal ends).
    pub fn pause_unless_rung(&self, limit: Duration) {
        crate::os::wait_unix::doorbell_or(self.signals.wake.as_fd(), limit);
    }

    /// Reaps every exited child: the main process and any adopted descendant.
    pub fn reap(&mut self) -> Reaped {
        let mut reaped = Reaped::default();
        loop {
            // wait(), not waitpid(None, ..): that is waitpid(0), which waits
            // only for children in our own process group, and the job has its own.
            match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if Some(pid) == self.main {
                        if let Some(end) = MainEnd::from_wait(status.exit_status(), status.terminating_signal()) {
                            reaped.main = Some(end);
                        }
                    }
                }
                Err(rustix::io::Errno::CHILD) => {
                    reaped.none_left = true;
                    return reaped;
                }
                Err(rustix::io::Errno::INTR) => {}
                // None: children left, none has exited. Any other error
                // cannot be for these arguments; the next SIGCHLD tries again.
                Ok(None) | Err(_) => return reaped,
            }
        }
    }

    fn reach<'a>(&self, scope: Scope<'a>) -> Reach<'a> {
        Reach { tree: Tree::of(scope.job).with_recorded(scope.recorded), below_only: scope.below_only, notifier: self.notifier }
    }

    /// SIGTERM to the whole tree, noting who got it.
    pub fn ask_to_stop(&mut self, scope: Scope, asked: &mut Asked) -> Result<(), String> {
        kill_unix::ask_to_stop(&self.reach(scope), asked);
        Ok(())
    }

    /// A look during a kill: SIGKILL to everything once `force`, else
    /// SIGTERM to what started since `since` and was not asked yet. Whether
    /// anything of the job is left.
    pub fn look(&mut self, scope: Scope, asked: &mut Asked, since: u64, force: bool) -> bool {
        let reach = self.reach(scope);
        if force {
            !kill_unix::signal_everything(&reach, libc::SIGKILL).is_empty()
        } else {
            kill_unix::signal_newcomers(&reach, asked, since)
        }
    }

    /// Whether any process of the job is left.
    pub fn anything_left(&self, scope: Scope) -> bool {
        kill_unix::anything_left(Tree::of(scope.job).with_recorded(scope.recorded), self.notifier)
    }

    /// `pause`: SIGSTOP to the tree, none left running.
    pub fn hold_tree(&mut self, scope: Scope) {
        let reach = self.reach(scope);
        crate::os::pause_unix::stop_tree(
            |signal| kill_unix::signal_everything(&reach, signal).into_iter().map(|(who, _)| who).collect(),
            || kill_unix::adopted_children(self.notifier),
        );
    }

    /// `resume`: SIGCONT to the same.
    pub fn release_tree(&mut self, scope: Scope) {
        kill_unix::signal_everything(&self.reach(scope), libc::SIGCONT);
    }

    /// A kill of a paused tree: just sent SIGTERM (`signalled`), it gets
    /// SIGCONT so it can act on it (a stopped process only takes SIGKILL).
    pub fn release_for_kill(&mut self, scope: Scope, was_paused: bool, signalled: bool) -> bool {
        if was_paused && signalled {
            self.release_tree(scope);
        }
        was_paused
    }

    /// The job's live processes, as a kill finds them.
    pub fn pids(&self, scope: Scope) -> Vec<u32> {
        let tree = Tree::of(scope.job).with_recorded(scope.recorded);
        let mut pids: Vec<u32> = tree::job_tree(tree).0.iter().map(|p| p.identity.pid).collect();
        pids.extend(kill_unix::adopted_children(self.notifier).iter().map(|p| p.pid));
        pids
    }

    /// Every process below us (we adopt the job's orphans), and with `full`
    /// the job's group and cookie carriers in the whole table.
    pub fn processes(&self, scope: Scope, full: bool) -> Vec<ProcessIdentity> {
        let mut found = tree::descendants(std::process::id());
        if full {
            let boot = crate::os::pidfd::boot_tag();
            let tree = Tree::of(scope.job).with_recorded(scope.recorded);
            found.extend(tree::job_tree(tree).0.iter().map(|p| ProcessIdentity { boot: p.identity.boot.or(boot), ..p.identity }));
        }
        found
    }

    /// With no child of ours left, nothing of the job is below us: known
    /// without a look at /proc where we are a child subreaper.
    pub fn reaps_every_orphan(&self) -> bool {
        crate::os::snapshot::CHILD_SUBREAPERS && crate::os::snapshot::is_child_subreaper()
    }

    /// The notification deliverer our notifier started is re-parented to us
    /// (a subreaper) and may keep at it for a day, for every job of the home:
    /// not ours to wait for. Whether it is all that is left.
    pub fn only_deliverer_left(&self, deliverer_mark: &str) -> bool {
        let children = procinfo::live_children(std::process::id());
        !children.is_empty()
            && children.iter().all(|&pid| {
                Some(pid as libc::pid_t) != self.notifier && procinfo::environ_value(pid, SUPERVISOR_MARK).as_deref() == Some(deliverer_mark)
            })
    }

    /// In a forked errand: the signals back to default, and none of the
    /// job's pipes held open.
    pub fn in_errand(&mut self) -> Vec<String> {
        self.let_go();
        HANDLED.iter().filter_map(|&signal| crate::os::fork::restore_default(signal).err().map(|e| format!("cannot restore signal {signal}: {e}"))).collect()
    }
}

/// First in `run-bg __supervise`: what a supervisor holds for its job's
/// life must not depend on how big a registry it read on the way.
pub fn before_start() {
    procinfo::keep_large_blocks_mapped();
}

/// Leaves the caller behind: a detached grandchild (unless `stay_child`:
/// our caller exits without waiting for us); stdin at /dev/null; a child
/// subreaper, so orphaned descendants are re-parented to us and we see the
/// tree end. Our own session comes once the job runs
/// (`leave_callers_session`).
pub fn detach(stay_child: bool) -> std::io::Result<()> {
    if !stay_child {
        crate::os::fork::leave_parent()?;
    }
    redirect_to_dev_null(Stdio::In);
    // Without it the job still runs and is killed by its group; the failure
    // is reported so a lingering tree can be explained.
    if let Err(e) = crate::os::platform::become_subreaper() {
        tracing::warn!("run-bg supervisor: cannot become a child subreaper: {e}");
    }
    Ok(())
}

/// Our own session, made once the job's launch is done rather than before
/// it: on Linux setsid(2) also moves us into a new scheduling autogroup, and
/// the move lets other groups' tasks run first (up to 4 ms on 2 busy
/// cores), which before the launch delayed the job's start. Still before
/// the ready line: by the time the caller returns we are out of its session
/// and process group, so nothing it or its terminal does to them reaches
/// us. Until then a SIGINT or SIGHUP sent to them finds our handlers
/// (installed before the launch) and stops the job, as a kill does. Fails
/// only for a process group leader (we lead a session already).
pub fn leave_callers_session() -> std::io::Result<()> {
    rustix::process::setsid().map(drop).map_err(std::io::Error::from)
}

/// The caller has its answer: its pipe, our stdout, is let go of.
pub fn answered() {
    redirect_to_dev_null(Stdio::Out);
}

/// Points our stdin or stdout at /dev/null. A failure leaves it where it was
/// (the caller's pipe), which only matters to a caller still reading it, so
/// it is reported, not fatal.
fn redirect_to_dev_null(which: Stdio) {
    let redirected = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").and_then(|null| {
        match which {
            Stdio::In => rustix::stdio::dup2_stdin(&null),
            Stdio::Out => rustix::stdio::dup2_stdout(&null),
        }
        .map_err(std::io::Error::from)
    });
    if let Err(e) = redirected {
        tracing::warn!("run-bg supervisor: cannot point {which:?} at /dev/null: {e}");
    }
}

#[derive(Debug, Clone, Copy)]
enum Stdio {
    In,
    Out,
}

impl Host {
    /// Kills and reaps the job's main process we just started and could not
    /// record.
    pub fn stop_unrecorded(&mut self) -> std::io::Result<()> {
        let Some(main) = self.main else { return Ok(()) };
        // Our own child, just started in its own session and process group
        // (pgid == its pid) and not yet reaped, so the pid cannot have been
        // reused; no group yet (ESRCH) while it has not made its session, and
        // then nothing but the child to kill.
        rustix::process::kill_process_group(main, rustix::process::Signal::KILL)
            .or_else(|e| match e {
                rustix::io::Errno::SRCH => rustix::process::kill_process(main, rustix::process::Signal::KILL),
                e => Err(e),
            })
            .and_then(|()| rustix::process::waitpid(Some(main), rustix::process::WaitOptions::empty()).map(drop))
            .map_err(std::io::Error::from)
    }
}

/// A launch whose exec is not confirmed yet (os/launch.rs): read once the
/// job's record is written, so the write and the job's start overlap.
pub type Pending = launch::Launched;

/// Ends the process at once, without unwinding: its caller has nothing
/// buffered and no other thread.
pub fn exit_now() -> ! {
    // SAFETY: _exit ends the process at once; no Rust object is used after
    // it, and the caller has written and joined everything (`finish`).
    unsafe { libc::_exit(0) }
}
