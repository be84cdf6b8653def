//! The per-job supervisor: the `run-bg` binary in its hidden `__supervise`
//! mode. It starts the main process, is the only writer of the job's log,
//! reaps every descendant (as a child subreaper on Linux), performs kills and
//! the timeout, and records the outcome in the registry.
//!
//! It idles in `poll(2)` on two pipes (the job's output and a self-pipe fed by
//! signal handlers), so it costs no CPU while the job runs.
//!
//! This module holds the supervisor and its loop; its start is in
//! `start.rs`, its end (the outcome recorded) in `outcome.rs`, the copy of
//! the output into the log in `output_copy.rs`, its phases in `phase.rs`,
//! its signal handlers in `signals.rs`, and what it gives back of its memory
//! in `memory.rs`.

use crate::store::config::Config;
use crate::model::job::{Job, ProcessIdentity};
use crate::store::logs::RotatingWriter;
use crate::store::paths::{HeldHome, Home};
use crate::os::procinfo;
use crate::supervise::tie;
use crate::model::protocol::{KillRequest, SUPERVISOR_MARK};
use crate::store::registry::Registry;
use crate::os::tree::{self, Tree};
use crate::{supervise::notify, now_ms, supervise::outpipe};
use crate::supervise::memory::CodePages;
use crate::supervise::output_copy::{copy_once, new_splicer, Copied, Splicer};
use crate::supervise::phase::{MainExit, Phase};
use crate::supervise::pause::{self, Clocks, Paused, Pausing};
use crate::supervise::ready::{self, Watching};
use crate::supervise::signals::{Signals, HANDLED};
use crate::supervise::restart::{self, BetweenRuns};
use crate::supervise::stdin;
use crate::supervise::kill::{self, KillReason};
use crate::os::kill_unix::{self, Termed};
use crate::os::wait_unix;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod machine_hooks;

/// A kill under way (supervise/kill.rs), with who was sent SIGTERM.
pub(super) type KillInProgress = kill::Kill<Termed>;

/// A step that moved less than this left the pipe empty with the job
/// writing slower than we copy: the loop pauses for `GATHER_PAUSE` before
/// looking again (see `let_output_gather`). A quarter of the job's pipe.
const GATHER_BELOW: usize = 256 * 1024;
const GATHER_PAUSE: Duration = Duration::from_micros(200);

/// After SIGKILL, how long to wait for the tree to vanish before recording
/// anyway (a process stuck in uninterruptible sleep cannot be hurried).
const AFTER_SIGKILL_PATIENCE: Duration = Duration::from_secs(2);

pub(super) struct Supervisor {
    pub(super) job: Job,
    pub(super) registry: Registry,
    /// Reached through our working directory: the home opened and checked
    /// at the start (`held`), so a rename of it never redirects a write.
    pub(super) home: Home,
    pub(super) held: HeldHome,
    /// The job's end when it could not be written (a read-only or full
    /// disk): kept here, shown to readers, and written once it can be.
    pub(super) unrecorded: Option<crate::supervise::unrecorded::Unrecorded>,
    pub(super) log: RotatingWriter,
    pub(super) output: Option<OwnedFd>,
    pub(super) signals: Signals,
    pub(super) main_pid: rustix::process::Pid,
    pub(super) phase: Phase,
    /// Cleared once the deadline has been acted on.
    pub(super) timeout_at: Option<Instant>,
    pub(super) log_failed: bool,
    pub(super) kill: Option<KillInProgress>,
    pub(super) config: Config,
    /// The forked child that announces the end; not part of the job.
    pub(super) notifier: Option<libc::pid_t>,
    pub(super) buffer: Vec<u8>,
    /// There while the output goes into the log by `splice(2)`, never seen
    /// by us (see `copy_once`); gone once the kernel refused it for this log.
    /// A feature that must see the output's lines (issue 15's `--ready-log`
    /// and `--notify-on`) leaves it out while it scans them: read and write
    /// then hand it every byte.
    pub(super) splice: Option<Splicer>,
    /// The job's named pipes are gone (see `run`).
    pub(super) pipes_removed: bool,
    /// The job's readiness check and `--notify-on` patterns (supervise/ready.rs).
    pub(super) watch: Option<ready::Watch>,
    /// `--restart`: the schedule, where the job is between two runs, and
    /// when the current run started (supervise/restart.rs).
    pub(super) runs: Runs,
    /// When the main process was reaped (ms since the epoch): the job's
    /// `endedAt`, whatever the recording waits for after it (a wake rule's
    /// registration, a kill of what it left).
    pub(super) main_ended_at: Option<u64>,
    /// Each new run's stdout and stderr: kept only while a restart may come,
    /// so the output pipe then never reads as ended between runs.
    pub(super) output_child_end: Option<OwnedFd>,
    /// `--stdin pipe`: our write end, which keeps the job from reading EOF
    /// until it ends (or `send --eof`), and the read end kept for a restart.
    pub(super) stdin_writer: Option<OwnedFd>,
    pub(super) stdin_child_end: Option<OwnedFd>,
    /// Registers the job's wake rule with the interrupt service (`--wake`)
    /// while the job runs; joined before the end is recorded, so the end
    /// event goes after the rule (and the notifier forks single-threaded).
    pub(super) wake_thread: Option<std::thread::JoinHandle<Option<crate::model::job::Wake>>>,
    /// `--notify-on` matches seen while that registration ran: sent once it
    /// has finished (see `spawn_match_notifier`).
    pub(super) deferred_matches: Vec<crate::supervise::matchers::MatchEvent>,
    /// `--tie`: the watch of the process whose end kills the job (see `tie`).
    pub(super) tie: Option<tie::Watch>,
    /// Every process seen below us, by identity, kept in the job's directory
    /// (see `record_processes`).
    pub(super) procset: ProcessRecord,
    /// Gives back the code pages each look brings in (supervise/memory.rs).
    pub(super) code_pages: CodePages,
    /// `pause`: the tree is stopped and the timeout clock with it (supervise/pause.rs).
    pub(super) paused: Option<Paused>,
    /// `SUPERVISOR_LOCK_FILE`, held until the end is recorded (let go with
    /// the job); a forked errand closes its copy, which keeps the lock ours.
    pub(super) alive_lock: Option<std::fs::File>,
}

/// Where a job that restarts is between two runs (supervise/restart.rs):
/// a kill in progress ends what the ended run left, so nothing is kept.
pub(super) type Runs = restart::Runs<()>;

impl Supervisor {
    pub(super) fn run(&mut self) {
        // A tied process gone before the watch began has no pidfd to wake
        // the poll below: act on it now, or an idle job would outlive it.
        if self.tie.as_ref().is_some_and(|w| w.ended(false)) {
            self.tie_ended();
        }
        loop {
            if self.phase.main_exit().is_some() && self.kill_settled() && !self.restart_step() {
                self.let_go_of_the_job();
                self.drain_output_nonblocking();
                self.record_end();
            }
            // The deliverer our notifier starts becomes our child (we are a
            // subreaper) and may retry for a day: it is not the job's, so it
            // is not waited for.
            if matches!(self.phase, Phase::Recorded { children: true })
                && self.output.is_none()
                && self.only_deliverer_left()
            {
                self.phase = self.phase.no_children();
            }
            // Once the end is recorded and every writer has closed the output,
            // nothing of the job writes any more and no watcher will need the
            // pipes: they go now, not when we exit (our notifier may still be
            // retrying for a minute).
            if matches!(self.phase, Phase::Recorded { .. }) && self.output.is_none() && !self.pipes_removed {
                self.pipes_removed = true;
                outpipe::remove(&self.home.job_dir(&self.job.id));
                if self.job.stdin_pipe {
                    stdin::remove(&self.home.job_dir(&self.job.id));
                }
            }
            self.phase = self.phase.settle(self.output.is_some());
            // An end not written yet keeps us: it would be lost with us.
            if self.phase == Phase::Done && self.unrecorded.is_none() {
                self.leave_done_mark();
                return;
            }
            let woken = {
                let tie_fd = self.tie.as_ref().and_then(tie::Watch::fd);
                let output = self.output.as_ref().map(AsFd::as_fd);
                wait_unix::wait(self.signals.wake.as_fd(), output, tie_fd.map(AsFd::as_fd), self.poll_timeout())
            };
            if woken.failed {
                // Should not happen; avoid a busy loop if it does.
                std::thread::sleep(Duration::from_millis(50));
            }
            let (signalled, output_ready) = (woken.doorbell, woken.output && self.output.is_some());
            let tie_ended = self.tie.as_ref().is_some_and(|w| w.ended(woken.tie));
            if output_ready {
                let moved = self.read_output_once();
                if (1..GATHER_BELOW).contains(&moved) {
                    self.let_output_gather();
                }
            }
            if signalled {
                self.handle_signals();
            }
            if tie_ended {
                self.tie_ended();
            }
            self.advance_timers();
        }
    }

    /// Says to readers that everything below us ended after our last look
    /// (`SUPERVISOR_DONE_FILE`): they then look only at what we recorded.
    /// Best effort: without it they read the whole process table, as for a
    /// supervisor that died. Never recreates a directory removed meanwhile.
    fn leave_done_mark(&self) {
        use crate::os::sys::OpenOptionsExt;
        let dir = self.home.job_dir(&self.job.id);
        // The lock let go of (holding the old record, see `write_end_record`)
        // is renamed into the mark: a new file costs an inode.
        let lock = dir.join(crate::model::protocol::SUPERVISOR_LOCK_FILE);
        if self.alive_lock.is_none() && std::fs::rename(lock, dir.join(crate::model::protocol::SUPERVISOR_DONE_FILE)).is_ok() {
            return;
        }
        let _ = crate::store::paths::options_nofollow()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(crate::model::protocol::SUPERVISOR_DONE_FILE));
    }

    /// The process the job is tied to ended: the tree goes, as on `kill`.
    fn tie_ended(&mut self) {
        self.tie = None;
        if let Some(reason) = tie::fire(&mut self.job.tie) {
            tracing::info!("run-bg supervisor {}: killing the job: {reason}", self.job.id);
            let request = KillRequest { grace_ms: self.config.kill.grace_ms, force: false, caller_sweeps: false, caller_signalled_since: None };
            self.begin_kill(KillReason::Tie, request);
        }
    }

    /// How long the loop may sleep before a deadline needs it; `None`: until woken.
    fn poll_timeout(&self) -> Option<Duration> {
        let now = Instant::now();
        let mut wait: Option<Duration> = None;
        let mut consider = |at: Instant| {
            let d = at.saturating_duration_since(now);
            wait = Some(wait.map_or(d, |w| w.min(d)));
        };
        if let (Some(at), None) = (self.timeout_at, &self.kill) {
            consider(at);
        }
        if let Some(at) = self.watch.as_ref().and_then(ready::Watch::next_wake) {
            consider(at);
        }
        if let Some(until) = self.runs.waiting_until().filter(|_| !self.is_paused()) {
            consider(until);
        }
        // The registration thread announces no end: looked at now and then.
        if !self.deferred_matches.is_empty() {
            consider(now + Duration::from_millis(50));
        }
        // A tree found gone needs neither deadline: the SIGKILL deadline, once
        // past, would wake us every millisecond while our notifier runs.
        if let Some(kill) = self.kill.as_ref().filter(|k| !k.tree_gone) {
            if !kill.forced() {
                consider(kill.hard_deadline);
            }
            consider(kill.next_look);
        }
        consider(self.procset.next_look);
        if let Some(unrecorded) = &self.unrecorded {
            consider(unrecorded.next_try);
        }
        if let Some(at) = self.code_pages.due() {
            consider(at);
        }
        // A millisecond more so we wake after the deadline, not a hair before it.
        wait.map(|d| d + Duration::from_millis(1))
    }

    /// Moves what the output pipe holds into the log once; gives how many bytes (0: nothing was there).
    fn read_output_once(&mut self) -> usize {
        let Some(output) = &self.output else { return 0 };
        let (copied, error) = copy_once(output.as_fd(), &mut self.log, &mut self.buffer, &mut self.splice);
        if let Some(e) = error {
            // Once is enough: the same failure would repeat for every chunk.
            if !self.log_failed {
                self.log_failed = true;
                self.note_error(&e.to_string());
            }
        }
        if copied == Copied::Closed {
            self.output = None;
        }
        if let Some(watch) = &mut self.watch {
            let mut events = Vec::new();
            match copied {
                Copied::Read(n) => watch.feed(&self.buffer[..n], &mut events),
                Copied::Closed => watch.output_ended(&mut events),
                Copied::Spliced(_) | Copied::Empty => {}
            }
            self.on_watch_events(events);
        }
        copied.bytes()
    }

    /// Gives a job that writes in small pieces a moment to write more before
    /// the loop looks again; a signal ends the pause at once. Without it,
    /// once the copy is faster than the job (as with splice), every write
    /// into the emptied pipe wakes the loop for a few KiB: `yes | head -c 1G`
    /// made ~210k context switches and took 1.07× the time through `cat`;
    /// with the pause, ~155k and 0.87× (medians of 8, 2 cores at load 2).
    /// The log is behind by at most the pause.
    fn let_output_gather(&self) {
        // Whatever it returns, the pause is over, and the loop then polls
        // the signal pipe itself.
        wait_unix::doorbell_or(self.signals.wake.as_fd(), GATHER_PAUSE);
    }

    /// Takes whatever the main process wrote before it exited, without waiting
    /// for descendants that may keep the pipe open (the pipe does not block).
    fn drain_output_nonblocking(&mut self) {
        while self.read_output_once() > 0 {}
    }

    fn handle_signals(&mut self) {
        // Emptied before the flags are read: a signal that comes after this
        // writes a new byte, so it wakes the loop again.
        let mut bytes = [0u8; 64];
        while matches!(rustix::io::read(&self.signals.wake, &mut bytes), Ok(n) if n > 0) {}
        if self.signals.child.swap(false, Ordering::Relaxed) {
            // A kill whose caller signals the job itself may end the main
            // process before our doorbell is heard: its request, written
            // before any signal, is taken before that death is reaped, so
            // that the end is recorded as the kill it is.
            if self.kill.is_none() && self.phase.main_running() {
                if let Some(request) = self.read_kill_request().filter(|r| r.caller_signalled_since.is_some()) {
                    self.begin_kill(KillReason::Requested, request);
                }
            }
            self.reap();
            // A child's end is when a daemon's parent exits and leaves it to us.
            self.procset.look_soon();
        }
        if self.signals.kill_request.swap(false, Ordering::Relaxed) {
            self.held.refresh();
            // `send --eof` rings the same bell.
            let close = self.home.job_dir(&self.job.id).join(stdin::CLOSE_REQUEST);
            if std::fs::remove_file(&close).is_ok() {
                self.stdin_writer = None;
            }
            // Only a request left by `kill` counts: a job may well send SIGUSR1
            // to its parent (a readiness signal) without meaning to be killed.
            if let Some(request) = self.read_kill_request() {
                self.begin_kill(KillReason::Requested, request);
            }
            // `pause` and `resume` ring it too.
            if let Some(request) = pause::take_request(&self.home, &self.job.id) {
                pause::act_on(self, request);
            }
        }
        if self.signals.stop.swap(false, Ordering::Relaxed) {
            // Nothing left to stop: only an end we could not write keeps us.
            if self.unrecorded.is_some() && matches!(self.phase, Phase::Recorded { .. } | Phase::Done) {
                crate::supervise::unrecorded::give_up(self, "asked to stop (SIGTERM, SIGINT or SIGHUP)");
                return;
            }
            let request = KillRequest { grace_ms: self.config.kill.grace_ms, force: false, caller_sweeps: false, caller_signalled_since: None };
            self.begin_kill(KillReason::Requested, request);
        }
    }

    /// The request `kill` left in the job's directory, if any.
    fn read_kill_request(&self) -> Option<KillRequest> {
        crate::supervise::requests::kill_request(&self.home, &self.job.id)
    }

    /// Reaps every exited child: the main process and any adopted descendant.
    fn reap(&mut self) {
        loop {
            // wait(), not waitpid(None, ..): that is waitpid(0), which waits
            // only for children in our own process group, and the job has its own.
            match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if pid == self.main_pid {
                        if let Some(exit) = MainExit::from_wait(status.exit_status(), status.terminating_signal()) {
                            if self.phase.main_running() {
                                self.main_ended_at = Some(now_ms());
                            }
                            self.phase = self.phase.main_reaped(exit);
                        }
                    }
                }
                Err(rustix::io::Errno::CHILD) => {
                    self.phase = self.phase.no_children();
                    return;
                }
                Err(rustix::io::Errno::INTR) => {}
                // None: children left, none has exited. Any other error
                // cannot be for these arguments; the next SIGCHLD tries again.
                Ok(None) | Err(_) => return,
            }
        }
    }

    fn begin_kill(&mut self, reason: KillReason, request: KillRequest) {
        let now = Instant::now();
        match &mut self.kill {
            Some(kill) => {
                // Paused while the ended run's leftovers were being cleaned:
                // they had their SIGTERM, and now the kill ends the pause.
                if kill.again(reason, &request, now) {
                    self.end_pause_for_kill(true);
                }
            }
            None => {
                // The main process's own exit, if it came first, decides the
                // outcome; a job that restarts runs on after an exit, so a
                // kill then is a kill.
                let reason = if self.phase.main_running() || self.runs.restarter.is_some() { reason } else { KillReason::AfterExit };
                let mut kill = KillInProgress::begin(reason, &request, now);
                // A caller that signalled the tree itself has made the first pass.
                if !request.force && request.caller_signalled_since.is_none() {
                    kill_unix::ask_to_stop(&self.reach(request.caller_sweeps), &mut kill.asked);
                }
                self.kill = Some(kill);
                self.end_pause_for_kill(!request.force);
            }
        }
        self.advance_timers();
    }

    /// What a kill reaches (os/kill_unix.rs); `below_only`: see `KillRequest::caller_sweeps`.
    fn reach(&self, below_only: bool) -> kill_unix::Reach<'_> {
        let tree = Tree::of(&self.job).with_recorded(self.procset.recorder.recorded());
        kill_unix::Reach { tree, below_only, notifier: self.notifier }
    }

    /// `kill_unix::signal_everything`, as far as the kill in progress looks.
    pub(super) fn signal_everything(&self, signal: i32) -> Vec<(ProcessIdentity, String)> {
        kill_unix::signal_everything(&self.reach(self.kill_looks_below_only()), signal)
    }

    /// A kill whose caller sweeps the rest of the table (see `KillRequest::caller_sweeps`).
    pub(super) fn kill_looks_below_only(&self) -> bool {
        self.kill.as_ref().is_some_and(|k| k.caller_sweeps)
    }

    /// The notification deliverer our notifier started is re-parented to us
    /// (a subreaper) and may keep at it for a day, for every job of the home:
    /// not ours to wait for. Once it is all that is left, we are done, and
    /// whoever adopts it next (init, or a subreaper above us) reaps it.
    fn only_deliverer_left(&self) -> bool {
        let children = procinfo::live_children(std::process::id());
        !children.is_empty()
            && children.iter().all(|&pid| {
                Some(pid as libc::pid_t) != self.notifier
                    && procinfo::environ_value(pid, SUPERVISOR_MARK).as_deref() == Some(notify::DELIVERER_MARK)
            })
    }

    pub(super) fn adopted_children(&self) -> Vec<ProcessIdentity> {
        kill_unix::adopted_children(self.notifier)
    }

    fn anything_left(&self) -> bool {
        kill_unix::anything_left(Tree::of(&self.job).with_recorded(self.procset.recorder.recorded()), self.notifier)
    }

    fn advance_timers(&mut self) {
        self.flush_deferred_matches();
        crate::supervise::unrecorded::retry(self);
        let now = Instant::now();
        if now >= self.procset.next_look {
            self.record_processes(false);
            self.code_pages.owe();
        }
        if self.kill.as_ref().is_some_and(KillInProgress::ends_the_job) {
            self.code_pages.hold();
        }
        self.code_pages.release_if_due(now);
        if let Some(at) = self.timeout_at {
            if now >= at {
                self.timeout_at = None;
                // At the deadline the tree goes, even what outlived the main
                // process; a job between two runs ends too.
                let cleaning = self.kill.as_ref().is_some_and(|k| !k.ends_the_job());
                if (self.kill.is_none() || cleaning) && (self.phase.main_running() || self.runs.between.is_some() || self.anything_left()) {
                    let grace_ms = self.config.kill.grace_ms;
                    self.begin_kill(KillReason::Timeout, KillRequest { grace_ms, force: false, caller_sweeps: false, caller_signalled_since: None });
                    return;
                }
            }
        }
        if self.nothing_left_below() {
            if let Some(kill) = &mut self.kill {
                kill.tree_gone = true;
            }
        }
        if self.kill.as_ref().is_some_and(|kill| kill.look_due(now)) {
            // After the deadline SIGKILL is repeated each look: a process
            // may fork between one pass over /proc and the signal.
            let below_only = self.kill_looks_below_only();
            let tree = Tree::of(&self.job).with_recorded(self.procset.recorder.recorded());
            let reach = kill_unix::Reach { tree, below_only, notifier: self.notifier };
            if let Some(kill) = &mut self.kill {
                let hard_due = kill.force_due(now);
                let remaining = if hard_due {
                    !kill_unix::signal_everything(&reach, libc::SIGKILL).is_empty()
                } else {
                    // What started before the caller's pass had its SIGTERM from it.
                    let since = kill.caller_signalled_since.unwrap_or(0);
                    kill_unix::signal_newcomers(&reach, &mut kill.asked, since)
                };
                kill.looked(now, hard_due, remaining);
            }
        }
        // Children may have exited without our SIGCHLD byte being seen yet.
        if self.kill.is_some() {
            self.reap();
        }
        if let Some(mut watch) = self.watch.take() {
            let mut events = Vec::new();
            watch.tick(self.phase.main_running(), &|| self.job_pids(), &mut events);
            self.watch = Some(watch);
            self.on_watch_events(events);
        }
    }

    /// A kill is settled when the whole tree is gone (or SIGKILL had its chance).
    fn kill_settled(&self) -> bool {
        match &self.kill {
            None => true,
            Some(kill) => kill.settled(AFTER_SIGKILL_PATIENCE) || self.nothing_left_below(),
        }
    }

    /// A sweeping caller's kill (what lies outside our subtree is the
    /// caller's), we are a child subreaper (every descendant that outlives
    /// its parent is re-parented to us), and no child of ours is left: so
    /// nothing of the job is left below us, known without a look at /proc.
    fn nothing_left_below(&self) -> bool {
        self.kill.as_ref().is_some_and(|k| k.caller_sweeps)
            && matches!(self.phase, Phase::MainExited { children: false, .. })
            && crate::os::snapshot::CHILD_SUBREAPERS
            && crate::os::snapshot::is_child_subreaper()
    }

    /// After a run of a job started with `--restart` has ended (and any kill
    /// has settled): whether the job goes on, between runs or in a new run
    /// (`restart::step`). `false`: the job ends now and its end is to be
    /// recorded (no policy, a kill, its tie, the timeout, an exit the policy
    /// does not restart after, too many restarts in a row, a run that could
    /// not start).
    fn restart_step(&mut self) -> bool {
        let Some(exit) = self.phase.main_exit() else { return false };
        if self.runs.restarter.is_none() {
            return false;
        }
        if self.kill.as_ref().is_some_and(KillInProgress::ends_the_job) {
            return false;
        }
        restart::step(self, exit.recorded())
    }

    /// `restart::save_run`, with the home's hold refreshed first.
    pub(super) fn save_run(&mut self) {
        self.held.refresh();
        if let Err(e) = restart::save_run(&self.registry, &self.job) {
            self.note_error(&format!("cannot record the restart in its job.json: {e}"));
        }
    }

    /// The job ends for good: the ends of its pipes kept for another run
    /// are let go, so its output can end, and its stdin reads EOF.
    fn let_go_of_the_job(&mut self) {
        self.alive_lock = None;
        self.runs.end();
        self.output_child_end = None;
        self.stdin_child_end = None;
        self.stdin_writer = None;
    }

    /// Waits for the wake rule's registration, if it still runs: bounded by
    /// notify.timeout_ms (and a brief registry wait).
    pub(super) fn join_wake_registration(&mut self) {
        crate::supervise::wake::join_registration(&mut self.wake_thread, &mut self.job);
    }

    /// Before any fork whose child runs ordinary Rust code (a launch, a
    /// notifier, the restart announcer): the supervisor's other threads (the
    /// log's deleter, the wake rule's registration) are joined, so the child
    /// inherits no lock one of them held. The registration is bounded by
    /// notify.timeout_ms.
    pub(super) fn single_threaded(&mut self) {
        self.log.join_deleter();
        self.join_wake_registration();
    }

    /// Runs `errand` in a forked child of ours, which then `_exit`s: the
    /// child's pid, or `None` when the fork failed (noted). An errand is an
    /// ordinary process: a signal ends it and never reaches the supervisor's
    /// flags, and it holds none of the job's pipes open.
    pub(super) fn fork_errand(&mut self, name: &str, errand: impl FnOnce(&mut Supervisor)) -> Option<libc::pid_t> {
        self.single_threaded();
        let forked = crate::os::fork::fork_errand(|| {
            for signal in HANDLED {
                if let Err(e) = crate::os::fork::restore_default(signal) {
                    self.note_error(&format!("{name}: cannot restore signal {signal}: {e}"));
                }
            }
            self.output = None;
            self.let_go_of_the_job();
            errand(self);
        });
        match forked {
            Ok(pid) => Some(pid),
            Err(e) => {
                self.note_error(&format!("cannot fork the {name}: {e}"));
                None
            }
        }
    }

    /// Records every process below us that is not recorded yet: as a child
    /// subreaper we adopt every orphan among the job's descendants, so a
    /// daemon that double-forks, leaves the session and scrubs its
    /// environment is seen here before or after it detaches. `full` adds a
    /// pass over the whole table for the job's group and cookie carriers
    /// (at the end of the main process, where a pass is worth its cost).
    pub(super) fn record_processes(&mut self, full: bool) {
        let mut found = tree::descendants(std::process::id());
        if full {
            let tree = Tree::of(&self.job).with_recorded(self.procset.recorder.recorded());
            let boot = crate::os::pidfd::boot_tag();
            found.extend(tree::job_tree(tree).0.iter().map(|p| ProcessIdentity { boot: p.identity.boot.or(boot), ..p.identity }));
        }
        let (_, written) = self.procset.recorder.add(&found);
        if let Err(e) = written {
            // Said once, after the end is recorded (`report_record_failure`):
            // on a full disk writing to our log may fail too, and nothing
            // said about this record may come before the job's outcome.
            if !std::mem::replace(&mut self.procset.recorder.failed, true) {
                self.procset.unreported = Some(format!("cannot record the job's processes: {e}"));
            }
        }
        if matches!(self.phase, Phase::Recorded { .. } | Phase::Done) {
            self.report_record_failure();
        }
        self.procset.looked();
    }

    pub(super) fn report_record_failure(&mut self) {
        if let Some(message) = self.procset.unreported.take() {
            self.note_error(&message);
        }
    }

    pub(super) fn note_error(&self, message: &str) {
        tracing::error!("run-bg supervisor {}: {message}", self.job.id);
    }
}


/// The first look for new processes comes this soon after the start, then
/// ever less often, up to `RECORD_LONGEST_PAUSE`; a child's end (when a
/// daemon's parent exits and leaves it to us) brings one look this soon too.
/// An idle job costs one short walk of its own children every 5 s.
const RECORD_FIRST_PAUSE: Duration = Duration::from_millis(50);
const RECORD_LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// The supervisor's record of the job's processes and when to look next.
pub(super) struct ProcessRecord {
    pub(super) recorder: crate::store::procset::Recorder,
    pub(super) next_look: Instant,
    pub(super) pause: Duration,
    /// A failure to write the record, to report once the end is recorded.
    pub(super) unreported: Option<String>,
}

impl ProcessRecord {
    pub(super) fn new(job_dir: &Path) -> ProcessRecord {
        ProcessRecord {
            recorder: crate::store::procset::Recorder::new(job_dir),
            next_look: Instant::now() + RECORD_FIRST_PAUSE,
            pause: RECORD_FIRST_PAUSE,
            unreported: None,
        }
    }

    /// Each look waits twice as long for the next, whatever it found: a
    /// build that starts compilers all the time must not keep us walking its
    /// tree every 50 ms.
    fn looked(&mut self) {
        self.pause = (self.pause * 2).min(RECORD_LONGEST_PAUSE);
        self.next_look = Instant::now() + self.pause;
    }

    /// One look soon, without changing the pace after it.
    fn look_soon(&mut self) {
        self.next_look = self.next_look.min(Instant::now() + RECORD_FIRST_PAUSE);
    }
}
