//! The per-job supervisor, the same on every platform: the `run-bg`
//! binary in its hidden `__supervise` mode. It starts the main process, is
//! the only writer of the job's log, performs kills and the timeout, runs
//! restarts, readiness and `--notify-on`, and records the outcome in the
//! registry. It idles in one wait (for its bells, the job's output, the
//! main and the tied process), so it costs no CPU while the job runs.
//!
//! What differs per platform is behind `os::supervision` (Unix: a forked
//! child, signal handlers, SIGTERM then SIGKILL to the tree, an adopting
//! subreaper; Windows: a Job Object, named events, CTRL_BREAK then the Job
//! Object ended) and the job's output (`JobOutput`: Unix copies a named
//! pipe itself, by `splice(2)` where it can; Windows's threads copy each
//! run's pipe). This module holds the loop; its start is in `start.rs`,
//! its end (the outcome recorded) in `outcome.rs`, its phases in
//! `phase.rs`, what the shared machines ask of it in
//! `supervisor/machine_hooks.rs`, and what it gives back of its memory in
//! `memory.rs`.

use crate::model::job::Job;
use crate::model::protocol::KillRequest;
use crate::now_ms;
use crate::os::supervision::{self, Host, Scope};
use crate::store::config::Config;
use crate::store::paths::{HeldHome, Home};
use crate::store::registry::Registry;
use crate::supervise::kill::{self, KillReason};
use crate::supervise::memory::CodePages;
use crate::supervise::pause::{self, Clocks, Paused, Pausing};
use crate::supervise::phase::Phase;
use crate::supervise::ready::{self, Watching};
use crate::supervise::restart::{self, BetweenRuns};
use crate::supervise::{notify, outpipe, stdin, tie, JobOutput, Piece};
use std::path::Path;
use std::time::{Duration, Instant};

mod machine_hooks;

/// A kill under way (supervise/kill.rs), with what the platform keeps of
/// who was asked to stop.
pub(super) type KillInProgress = kill::Kill<supervision::Asked>;

/// A step that moved less than this left the pipe empty with the job
/// writing slower than we copy: the loop pauses for `GATHER_PAUSE` before
/// looking again (see `let_output_gather`). A quarter of the job's pipe.
const GATHER_BELOW: usize = 256 * 1024;
const GATHER_PAUSE: Duration = Duration::from_micros(200);

/// After the force, how long to wait for the tree to vanish before recording
/// anyway (a process stuck in uninterruptible sleep cannot be hurried).
const AFTER_SIGKILL_PATIENCE: Duration = Duration::from_secs(2);

/// Between two looks while an ended run's output is copied to its end
/// before a restart's separator (Windows: its copying thread ends with the
/// run's last process); past `OUTPUT_END_WAIT` the separator goes anyway.
const CLEANING_LOOK: Duration = Duration::from_millis(20);
const OUTPUT_END_WAIT: Duration = Duration::from_secs(2);

pub(super) struct Supervisor {
    pub(super) job: Job,
    pub(super) registry: Registry,
    /// Reached through our working directory on Unix: the home opened and
    /// checked at the start (`held`), so a rename of it never redirects a write.
    pub(super) home: Home,
    pub(super) held: HeldHome,
    pub(super) config: Config,
    /// The job's end when it could not be written (a read-only or full
    /// disk): kept here, shown to readers, and written once it can be.
    pub(super) unrecorded: Option<crate::supervise::unrecorded::Unrecorded>,
    /// The job's output, copied into its log.
    pub(super) output: JobOutput,
    /// The platform's half: the main process, the bells, the tree's hold.
    pub(super) host: Host,
    pub(super) phase: Phase,
    /// Cleared once the deadline has been acted on.
    pub(super) timeout_at: Option<Instant>,
    pub(super) kill: Option<KillInProgress>,
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
    /// Registers the job's wake rule with the interrupt service (`--wake`)
    /// while the job runs; joined before the end is recorded, so the end
    /// event goes after the rule (and a notifier forks single-threaded).
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
    /// Errands on threads (where none forks): joined before we exit, so
    /// each notification is sent.
    pub(super) errands: Vec<std::thread::JoinHandle<()>>,
}

/// Where a job that restarts is between two runs (supervise/restart.rs):
/// while it ends what the ended run left, when that was found gone.
pub(super) type Runs = restart::Runs<Option<Instant>>;

impl Supervisor {
    pub(super) fn run(&mut self) {
        // A tied process gone before the watch began has nothing to wake
        // the wait below: act on it now, or an idle job would outlive it.
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
            if matches!(self.phase, Phase::Recorded { children: true }) && !self.output.is_open() && self.host.only_deliverer_left(notify::DELIVERER_MARK) {
                self.phase = self.phase.no_children();
            }
            // Once the end is recorded and every writer has closed the output,
            // nothing of the job writes any more and no watcher will need the
            // pipes: they go now, not when we exit (our notifier may still be
            // retrying for a minute).
            if matches!(self.phase, Phase::Recorded { .. }) && !self.output.is_open() && !self.pipes_removed {
                self.pipes_removed = true;
                outpipe::remove(&self.home.job_dir(&self.job.id));
                if self.job.stdin_pipe {
                    stdin::remove(&self.home.job_dir(&self.job.id));
                }
            }
            self.phase = self.phase.settle(self.output.is_open());
            // An end not written yet keeps us: it would be lost with us.
            if self.phase == Phase::Done && self.unrecorded.is_none() {
                self.finish();
                return;
            }
            let woken = {
                let tie = self.tie.as_ref().and_then(tie::Watch::fd);
                self.host.wait(self.output.waitable(), tie, self.poll_timeout())
            };
            if woken.failed {
                // A handle went bad (the tie's, most likely): stop watching
                // it, and never spin on a failing wait.
                tracing::warn!("run-bg supervisor {}: a wait failed: {}", self.job.id, std::io::Error::last_os_error());
                if cfg!(windows) {
                    self.tie = None;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let tie_ended = self.tie.as_ref().is_some_and(|w| w.ended(woken.tie));
            // Windows's wait resets only the event that ended it: the
            // output's, set beside a bell, wakes the next wait at once.
            if woken.output {
                let moved = self.read_output_once();
                if (1..GATHER_BELOW).contains(&moved) {
                    self.let_output_gather();
                }
            }
            if woken.doorbell || woken.main_ended {
                self.on_bells(&woken);
            }
            if tie_ended {
                self.tie_ended();
            }
            self.advance_timers();
        }
    }

    /// Done: the deleter and the errands joined, the done mark left.
    fn finish(&mut self) {
        self.output.with_log(crate::store::logs::RotatingWriter::join_deleter);
        for errand in std::mem::take(&mut self.errands) {
            let _ = errand.join();
        }
        self.leave_done_mark();
    }

    /// Says to readers that everything below us ended after our last look
    /// (`SUPERVISOR_DONE_FILE`): they then look only at what we recorded.
    /// Best effort: without it they read the whole process table, as for a
    /// supervisor that died. Never recreates a directory removed meanwhile.
    fn leave_done_mark(&self) {
        use crate::os::sys::OpenOptionsExt;
        if !supervision::KEEPS_TREE_RECORD {
            return;
        }
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
            self.begin_kill(KillReason::Tie, self.default_kill());
        }
    }

    /// A kill with the configured grace period.
    pub(super) fn default_kill(&self) -> KillRequest {
        KillRequest { grace_ms: self.config.kill.grace_ms, force: false, caller_sweeps: false, caller_signalled_since: None }
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
        match &self.runs.between {
            Some(restart::Between::Waiting { until }) if !self.is_paused() => consider(*until),
            // An ended run's output being copied to its end.
            Some(restart::Between::Cleaning { .. }) if self.kill.is_none() => consider(now + CLEANING_LOOK),
            _ => {}
        }
        // The registration thread announces no end: looked at now and then.
        if !self.deferred_matches.is_empty() {
            consider(now + Duration::from_millis(50));
        }
        // A tree found gone needs neither deadline: the force's deadline, once
        // past, would wake us every millisecond while our notifier runs.
        if let Some(kill) = self.kill.as_ref().filter(|k| !k.tree_gone) {
            if !kill.forced() {
                consider(kill.hard_deadline);
            }
            consider(kill.next_look);
        }
        if supervision::KEEPS_TREE_RECORD {
            consider(self.procset.next_look);
        }
        if let Some(unrecorded) = &self.unrecorded {
            consider(unrecorded.next_try);
        }
        if let Some(at) = self.code_pages.due() {
            consider(at);
        }
        // A millisecond more so we wake after the deadline, not a hair before it.
        wait.map(|d| d + Duration::from_millis(1))
    }

    /// Moves what the output holds into the log once, handing the watch
    /// what it needs; gives how many bytes (0: nothing was there).
    fn read_output_once(&mut self) -> usize {
        let mut events = Vec::new();
        let watch = &mut self.watch;
        let moved = self.output.copy(&mut |piece| {
            if let Some(watch) = watch.as_mut() {
                match piece {
                    Piece::Bytes(bytes) => watch.feed(bytes, &mut events),
                    Piece::Ended => watch.output_ended(&mut events),
                }
            }
        });
        if let Some(e) = self.output.take_failure() {
            self.note_error(&e.to_string());
        }
        if !events.is_empty() {
            self.on_watch_events(events);
        }
        moved
    }

    /// Gives a job that writes in small pieces a moment to write more before
    /// the loop looks again; a signal ends the pause at once. Without it,
    /// once the copy is faster than the job (as with splice), every write
    /// into the emptied pipe wakes the loop for a few KiB: `yes | head -c 1G`
    /// made ~210k context switches and took 1.07× the time through `cat`;
    /// with the pause, ~155k and 0.87× (medians of 8, 2 cores at load 2).
    /// The log is behind by at most the pause.
    fn let_output_gather(&self) {
        self.host.pause_unless_rung(GATHER_PAUSE);
    }

    /// Takes whatever the main process wrote before it exited, without waiting
    /// for descendants that may keep the pipe open (the pipe does not block).
    fn drain_output_nonblocking(&mut self) {
        while self.read_output_once() > 0 {}
    }

    /// What rang: a child's end, a request left beside the job, a stop.
    fn on_bells(&mut self, woken: &crate::os::wait::Woken) {
        let bells = self.host.bells(woken);
        // A kill request taken on this wake: read once. One written after
        // the bells were taken comes with a ring of its own, heard on the
        // next wake (in a kill of 1,000 jobs both bells ring together, and
        // each supervisor read its request twice).
        let mut kill_taken = false;
        if bells.children {
            // A kill whose caller signals the job itself may end the main
            // process before our doorbell is heard: its request, written
            // before any signal, is taken before that death is reaped, so
            // that the end is recorded as the kill it is.
            if self.kill.is_none() && self.phase.main_running() {
                if let Some(request) = self.read_kill_request().filter(|r| r.caller_signalled_since.is_some()) {
                    self.begin_kill(KillReason::Requested, request);
                    kill_taken = true;
                }
            }
            self.reap();
            // A child's end is when a daemon's parent exits and leaves it to us.
            self.procset.look_soon();
        }
        if bells.requests {
            self.held.refresh();
            // `send --eof` rings the same bell.
            let close = self.home.job_dir(&self.job.id).join(stdin::CLOSE_REQUEST);
            if std::fs::remove_file(&close).is_ok() {
                self.host.close_stdin();
            }
            // Only a request left by `kill` counts: a job may well send SIGUSR1
            // to its parent (a readiness signal) without meaning to be killed.
            if let Some(request) = (!kill_taken).then(|| self.read_kill_request()).flatten() {
                self.begin_kill(KillReason::Requested, request);
            }
            // `pause` and `resume` ring it too.
            if let Some(request) = pause::take_request(&self.home, &self.job.id) {
                pause::act_on(self, request);
            }
        }
        if bells.stop {
            // Nothing left to stop: only an end we could not write keeps us.
            if self.unrecorded.is_some() && matches!(self.phase, Phase::Recorded { .. } | Phase::Done) {
                crate::supervise::unrecorded::give_up(self, "asked to stop (SIGTERM, SIGINT, SIGHUP or the stop bell)");
                return;
            }
            self.begin_kill(KillReason::Requested, self.default_kill());
        }
    }

    /// The request `kill` left in the job's directory, if any.
    fn read_kill_request(&self) -> Option<KillRequest> {
        let request = crate::supervise::requests::kill_request(&self.home, &self.job.id)?;
        if supervision::CALLER_SWEEPS {
            return Some(request);
        }
        Some(KillRequest { caller_sweeps: false, caller_signalled_since: None, ..request })
    }

    /// Reaps every exited child: the main process and any adopted descendant.
    fn reap(&mut self) {
        let reaped = self.host.reap();
        if let Some(exit) = reaped.main {
            if self.phase.main_running() {
                self.main_ended_at = Some(now_ms());
            }
            self.phase = self.phase.main_reaped(exit);
        }
        if reaped.none_left {
            self.phase = self.phase.no_children();
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
                    let scope = Scope { job: &self.job, recorded: self.procset.recorder.recorded(), below_only: request.caller_sweeps };
                    if let Err(e) = self.host.ask_to_stop(scope, &mut kill.asked) {
                        tracing::warn!("run-bg supervisor {}: {e}; ending it now", self.job.id);
                        kill.hard_deadline = now;
                    }
                }
                self.kill = Some(kill);
                self.end_pause_for_kill(!request.force);
            }
        }
        self.advance_timers();
    }

    /// What a kill or a pause reaches (`below_only`: see `KillRequest::caller_sweeps`).
    pub(super) fn scope(&self) -> Scope<'_> {
        Scope { job: &self.job, recorded: self.procset.recorder.recorded(), below_only: self.kill_looks_below_only() }
    }

    /// The platform's half, and `scope` beside it (borrowed apart, for a
    /// call that changes the host: a pause, its release).
    pub(super) fn host_and_scope(&mut self) -> (&mut Host, Scope<'_>) {
        let below_only = self.kill_looks_below_only();
        (&mut self.host, Scope { job: &self.job, recorded: self.procset.recorder.recorded(), below_only })
    }

    /// A kill whose caller sweeps the rest of the table (see `KillRequest::caller_sweeps`).
    pub(super) fn kill_looks_below_only(&self) -> bool {
        self.kill.as_ref().is_some_and(|k| k.caller_sweeps)
    }

    fn anything_left(&self) -> bool {
        self.host.anything_left(Scope { below_only: false, ..self.scope() })
    }

    fn advance_timers(&mut self) {
        self.flush_deferred_matches();
        crate::supervise::unrecorded::retry(self);
        let now = Instant::now();
        if supervision::KEEPS_TREE_RECORD && now >= self.procset.next_look {
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
                    self.begin_kill(KillReason::Timeout, self.default_kill());
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
            // After the deadline the force is repeated each look: a process
            // may fork between one pass over /proc and the signal.
            let scope = Scope { job: &self.job, recorded: self.procset.recorder.recorded(), below_only: self.kill_looks_below_only() };
            if let Some(kill) = &mut self.kill {
                let hard_due = kill.force_due(now);
                // What started before the caller's pass had its SIGTERM from it.
                let since = kill.caller_signalled_since.unwrap_or(0);
                let remaining = self.host.look(scope, &mut kill.asked, since, hard_due);
                kill.looked(now, hard_due, remaining);
            }
        }
        // Children may have exited without our bell being seen yet.
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

    /// A kill is settled when the whole tree is gone (or the force had its chance).
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
            && self.host.reaps_every_orphan()
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
    /// are let go of, so its output can end, and its stdin reads EOF.
    fn let_go_of_the_job(&mut self) {
        self.alive_lock = None;
        self.runs.end();
        self.host.let_go();
        self.output.no_more_runs();
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
        if supervision::FORKS {
            self.output.with_log(crate::store::logs::RotatingWriter::join_deleter);
            self.join_wake_registration();
        }
    }

    /// Runs `errand` beside the loop (a notification the loop must not wait
    /// for): in a forked child of ours where the platform forks (its pid is
    /// returned), else on a thread joined before we exit (`None`, as when it
    /// could not start: noted). A forked errand is an ordinary process: a
    /// signal ends it and never reaches the supervisor's flags, and it holds
    /// none of the job's pipes open.
    pub(super) fn errand(&mut self, name: &str, errand: impl FnOnce() + Send + 'static) -> Option<u32> {
        if !supervision::FORKS {
            self.errands.retain(|running| !running.is_finished());
            return match std::thread::Builder::new().name(name.into()).spawn(errand) {
                Ok(running) => {
                    self.errands.push(running);
                    None
                }
                Err(e) => {
                    self.note_error(&format!("cannot start the {name}: {e}"));
                    None
                }
            };
        }
        self.single_threaded();
        let forked = Host::fork(|| {
            for error in self.host.in_errand() {
                self.note_error(&format!("{name}: {error}"));
            }
            self.output.close();
            self.alive_lock = None;
            errand();
        });
        match forked {
            Ok(pid) => {
                self.phase = self.phase.child_started();
                Some(pid)
            }
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
        let found = self.host.processes(Scope { below_only: false, ..self.scope() }, full);
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
