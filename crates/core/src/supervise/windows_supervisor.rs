//! The supervisor on Windows: `run-bg __supervise` reads its start request,
//! starts the job's main process suspended, puts it in the job's Job Object
//! (so every process it starts is held there too), lets it run, copies its
//! output (stdout and stderr, one pipe) into the rotating log, and waits on
//! handles: the main process, the kill doorbell (a named event `kill` sets
//! after writing its request), the output's news (an event its copying
//! thread sets), a tied process. A kill or a timeout asks the job's console
//! process group to stop (CTRL_BREAK_EVENT), waits the grace period, then
//! ends the whole Job Object. The end is recorded as on Unix: job.json
//! first, then the registry, then the notification.
//!
//! Readiness (`--ready-*`) and `--notify-on` run the shared `ready::Watch`:
//! the copying thread hands it what it wrote into the log while it needs
//! lines, and the wait's timeout is its next probe. `--restart` runs each
//! run as a fresh process in the same Job Object, with a pipe of its own;
//! between two runs the Job Object is emptied (what the ended run left) and
//! that run's output copied to its end before the separator line goes into
//! the log, so the log reads in order.
//!
//! `pause` suspends every process of the Job Object and each that joins it
//! while paused (os/pause_windows.rs, os/job_watch_windows.rs), with the
//! timeout clock stopped as on Unix; `--stdin pipe` is a pipe whose write
//! end a thread of ours holds and fills from `send`'s named pipe
//! (os/stdin_pipe_windows.rs); `--nice` is a priority class
//! (os/nice_windows.rs); `--wake` registers its rule on a thread, as Unix's
//! supervisor does.

use crate::model::job::{EndedBy, Job, JobState};
use crate::model::protocol::{KillRequest, READY_ERR, READY_OK};
use crate::now_ms;
use crate::os::job_watch_windows::JobMembers;
use crate::os::windows_job;
use crate::os::{launch_windows, platform, procinfo};
use crate::store::logs::RotatingWriter;
use crate::store::paths::Home;
use crate::store::registry::{Patience, Registry};
use crate::supervise::matchers::{self, MatchEvent};
use crate::supervise::restart::{self, BetweenRuns};
use crate::supervise::pause::{self, Clocks, Paused, Pausing};
use crate::supervise::kill::KillReason;
use crate::supervise::phase::{MainExit, Phase};
use crate::supervise::unrecorded::{self, Unrecorded};
use crate::supervise::{ending, notify, ready};
use crate::os::{kill_windows, output_copy_windows, wait_windows};
use std::os::windows::io::{AsHandle, OwnedHandle};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::supervise::spec::SupervisorSpec;

/// How long the main process has to end after the Job Object was ended
/// before the supervisor stops waiting for it.
const TERMINATE_WAIT: Duration = Duration::from_secs(5);
/// Between two looks at the Job Object while what an ended run left is
/// being ended before a restart: the Job Object says how many processes it
/// holds, but signals nothing when that reaches 0.
const CLEANING_LOOK: Duration = Duration::from_millis(20);
/// How long an ended run's output may take to end once its processes are
/// gone (its pipe's writers all were in the Job Object): past it, the
/// separator goes into the log anyway.
const OUTPUT_END_WAIT: Duration = Duration::from_secs(2);

// Tells the waiting caller how the start went, on the one line it reads.
use crate::supervise::spec::write_ready_line as report_ready;

/// Entry point of `run-bg __supervise`.
pub fn supervise_main() -> i32 {
    // The job is started with std's own copies of what it is given; our
    // stdin, stdout (the caller's answer pipe) and stderr must not reach it,
    // or a caller reading our answer would wait for the job's whole tree.
    crate::os::sys::keep_own_stdio_private();
    windows_job::ignore_console_events();
    let spec = match SupervisorSpec::read_from_stdin() {
        Ok(spec) => spec,
        Err(e) => {
            report_ready(&format!("{READY_ERR}supervisor received a bad start request: {e}"));
            return 1;
        }
    };
    match Supervisor::start(spec) {
        Ok(mut supervisor) => {
            supervisor.run();
            0
        }
        Err(message) => {
            report_ready(&format!("{READY_ERR}{message}"));
            1
        }
    }
}

struct Supervisor {
    home: Home,
    registry: Registry,
    config: crate::store::config::Config,
    job: Job,
    /// The current run's main process; none between two runs (`--restart`).
    main: Option<std::process::Child>,
    /// Where the job is in its life: its main process running, ended (and
    /// how), its end recorded (supervise/phase.rs).
    phase: Phase,
    /// The console process group of the current (or the last) run: its main
    /// process's pid, which what that run left still belongs to.
    group: u32,
    job_object: OwnedHandle,
    /// Rung after a request is left beside the job (`kill`, `pause`, `resume`).
    doorbell: OwnedHandle,
    /// Rung for a stop (Unix's SIGTERM to the supervisor: os/windows.rs).
    stop_bell: OwnedHandle,
    tie: Tied,
    output: Output,
    timeout_at: Option<Instant>,
    /// A kill (or a timeout, or a fired tie) under way (supervise/kill.rs).
    kill: Option<Kill>,
    /// The job's readiness check and `--notify-on` patterns (supervise/ready.rs).
    watch: Option<ready::Watch>,
    /// `--restart`: the schedule, where the job is between two runs, and
    /// when the current run started (supervise/restart.rs).
    runs: restart::Runs<Cleanup>,
    /// When the main process ended (ms since the epoch): the job's `endedAt`;
    /// cleared when a restart follows (an end between runs is when it happens).
    main_ended_at: Option<u64>,
    /// Threads that send a notification the job's end need not wait for (a
    /// match, a restart): joined before we exit, so each is sent.
    errands: Vec<JoinHandle<()>>,
    /// Held for the job's life: the home this supervisor checked.
    held: crate::store::paths::HeldHome,
    /// The job's end when it could not be written (a read-only or full
    /// disk): kept here, shown to readers, and written once it can be.
    unrecorded: Option<Unrecorded>,
    /// The Job Object's members: held while paused, given `--nice`'s class.
    members: JobMembers,
    /// `pause`: what was left of the `--timeout` when it began (supervise/pause.rs).
    paused: Option<Paused>,
    /// `--stdin pipe`: the read end each run gets (a thread of ours holds the write end).
    stdin: Option<crate::os::stdin_pipe_windows::JobStdin>,
    /// `--wake`: the rule's registration, joined before the end is recorded.
    wake_thread: Option<JoinHandle<Option<crate::model::job::Wake>>>,
}

type Kill = crate::supervise::kill::Kill;

/// The process the job is tied to (`--tie`).
enum Tied {
    No,
    Watching(OwnedHandle),
    /// Gone before the watch began: the tie fires at once.
    Gone,
}

/// Where a job that restarts is between two runs (supervise/restart.rs).
type Between = restart::Between<Cleanup>;

/// What the ended run left in the Job Object, being ended before a restart:
/// asked by CTRL_BREAK, the Job Object ended at `terminate_at`; gone at
/// `gone_at`, its output then copied to its end.
struct Cleanup {
    terminate_at: Instant,
    gone_at: Option<Instant>,
}

/// The job's output, copied into its log (os/output_copy_windows.rs).
type Output = output_copy_windows::Output<RotatingWriter>;

impl output_copy_windows::Sink for RotatingWriter {
    fn take(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.write_all(bytes).map_err(|e| e.to_string())
    }
}

impl Supervisor {
    fn start(spec: SupervisorSpec) -> Result<Supervisor, String> {
        let (home, held) = Home::hold(spec.home.clone()).map_err(|e| e.to_string())?;
        let registry = Registry::for_config(&home, &spec.config);
        let mut job = spec.job;
        job.supervisor = procinfo::identify_exactly(std::process::id());
        let fail = |mut job: Job, message: String| -> String {
            job.state = JobState::FailedToStart { error: message.clone(), ended_at: now_ms() };
            if let Err(e) = registry.write_job_file(&job, true).and_then(|()| registry.register(&job, Patience::Full)) {
                return format!("{message} (and could not record the job: {e})");
            }
            message
        };
        let log_path = home.job_log(&job.id, Path::new(&job.log_path));
        let log = match RotatingWriter::create(&log_path, spec.config.logs.max_bytes, spec.config.logs.keep) {
            Ok(log) => log,
            Err(e) => return Err(fail(job, home.explain(e).to_string())),
        };
        if let Err(e) = crate::supervise::spec::check_cwd(&job.cwd) {
            return Err(fail(job, e.to_string()));
        }
        let Some(supervisor) = job.supervisor else { return Err(fail(job, "cannot read this supervisor's own identity".into())) };
        let job_object = match windows_job::create_job(&windows_job::object_name(&home.root, &job.id, "tree")) {
            Ok(handle) => handle,
            Err(e) => return Err(fail(job, format!("cannot create the job's Job Object: {e}"))),
        };
        let doorbell = match windows_job::create_event(&windows_job::doorbell_name(&supervisor)) {
            Ok(handle) => handle,
            Err(e) => return Err(fail(job, format!("cannot create the kill doorbell: {e}"))),
        };
        let stop_bell = match windows_job::create_manual_event(&windows_job::stop_bell_name(&supervisor)) {
            Ok(handle) => handle,
            Err(e) => return Err(fail(job, format!("cannot create the stop bell: {e}"))),
        };
        let mut output = match Output::new(log) {
            Ok(output) => output,
            Err(e) => return Err(fail(job, format!("cannot create the output's wake-up event: {e}"))),
        };
        // Before the run starts: every process that joins is heard of.
        let (members, unwatched) = JobMembers::watch(&job_object, &job.id, job.nice.map(crate::os::nice_windows::priority_class));
        if let Some(e) = unwatched {
            tracing::warn!("run-bg supervisor {}: cannot watch the Job Object for new processes ({e}); a pause catches them by looking", job.id);
        }
        let stdin = match job.stdin_pipe {
            true => match crate::os::stdin_pipe_windows::serve(&home.root, &job.id) {
                Ok(stdin) => Some(stdin),
                Err(e) => return Err(fail(job, format!("cannot create the stdin pipe: {e}"))),
            },
            false => None,
        };
        // Before the run starts: a ready line it prints at once is seen.
        let watch = ready::Watch::new(&job, &spec.config);
        output.want_lines(watch.as_ref().is_some_and(ready::Watch::needs_lines));
        let (main, identity) = match launch_windows::launch_run(&job, &job_object, stdin.as_ref().map(|s| &s.child_end)) {
            Ok((main, identity, reader)) => {
                output.copy(reader);
                (main, identity)
            }
            Err(message) => return Err(fail(job, message)),
        };
        job.main = Some(identity);
        job.state = JobState::Running;
        if let Err(e) = registry.write_job_file(&job, false) {
            let _ = windows_job::terminate_job(&job_object, 1);
            return Err(format!("cannot record the job: {e}"));
        }
        report_ready(&format!("{READY_OK}{}", main.id()));
        // The handle first, then the identity check: the handle then pins
        // the very process recorded, or that process is already gone.
        let tie = match job.tie.as_ref().filter(|t| t.fired_at.is_none()) {
            None => Tied::No,
            Some(t) => match platform::open_process(t.to.pid) {
                Ok(handle) if procinfo::is_same_process_alive(&t.to) => Tied::Watching(handle),
                _ => Tied::Gone,
            },
        };
        let timeout_at = job.timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let runs = restart::Runs::new(&job);
        // After the ready line: the job's start waits for no service.
        let wake_thread = crate::supervise::wake::spawn_registration(&registry, &spec.config.notify, &job);
        Ok(Supervisor {
            home,
            registry,
            config: spec.config,
            job,
            group: main.id(),
            main: Some(main),
            job_object,
            doorbell,
            stop_bell,
            tie,
            output,
            timeout_at,
            kill: None,
            watch,
            runs,
            phase: Phase::Running,
            main_ended_at: None,
            errands: Vec::new(),
            held,
            unrecorded: None,
            members,
            paused: None,
            stdin,
            wake_thread,
        })
    }

    fn run(&mut self) {
        if matches!(self.tie, Tied::Gone) {
            self.fire_tie();
        }
        loop {
            self.take_output_news();
            // A run has ended: the job ends with it, or runs again (`--restart`).
            if !self.phase.main_running() && (self.kill.is_some() || !self.restart_step()) {
                break;
            }
            let now = Instant::now();
            match self.kill.as_ref().map(|kill| (kill.forced_at, kill.force_due(now))) {
                None if self.timeout_at.is_some_and(|at| now >= at) => {
                    self.begin_kill(KillReason::Timeout, self.default_kill());
                    continue;
                }
                Some((None, true)) => self.terminate(crate::model::signals::SIGKILL),
                Some((Some(at), _)) if now >= at + TERMINATE_WAIT => {
                    // Still there after the Job Object was ended: again, and the main process itself.
                    if let Some(main) = &mut self.main {
                        let _ = main.kill();
                    }
                    self.terminate(crate::model::signals::SIGKILL);
                }
                _ => {}
            }
            let deadline = match &self.kill {
                Some(Kill { forced_at: None, hard_deadline, .. }) => Some(*hard_deadline),
                // Ended: the main process goes within moments.
                Some(Kill { forced_at: Some(at), .. }) => Some(*at + TERMINATE_WAIT),
                None => self.timeout_at,
            };
            let between = match &self.runs.between {
                Some(Between::Cleaning { .. }) => Some(now + CLEANING_LOOK),
                // Paused, the next run waits for the resume (a doorbell).
                Some(Between::Waiting { until }) if self.paused.is_none() => Some(*until),
                Some(Between::Waiting { .. } | Between::Held { .. }) | None => None,
            };
            let watch = self.watch.as_ref().and_then(ready::Watch::next_wake);
            let next = [deadline, between, watch].into_iter().flatten().min();
            // A millisecond more so we wake after a deadline, not a hair before it.
            let limit = next.map_or(Duration::from_secs(3600), |at| at.saturating_duration_since(now) + Duration::from_millis(1));
            let woken = wait_windows::wait(
                self.doorbells(),
                self.output.wake.as_handle(),
                self.main.as_ref().map(AsHandle::as_handle),
                match &self.tie {
                    Tied::Watching(tie) => Some(tie.as_handle()),
                    Tied::No | Tied::Gone => None,
                },
                limit,
            );
            // Output's news are taken at the top of the loop; a timer is looked at there too.
            if woken.doorbell {
                self.on_doorbell();
            } else if woken.main_ended {
                self.main_ended();
            } else if woken.tie {
                self.fire_tie();
            } else if woken.failed {
                // A handle went bad (the tie's, most likely): stop
                // watching it, and never spin on a failing wait.
                tracing::warn!("run-bg supervisor {}: a wait failed: {}", self.job.id, std::io::Error::last_os_error());
                self.tie = Tied::No;
                std::thread::sleep(Duration::from_millis(100));
            }
            self.tick_watch();
        }
        let ended_at = self.main_ended_at.unwrap_or_else(now_ms);
        // What the main process left in the Job Object goes when a kill or
        // a timeout ended the job; a job that ended itself may leave a
        // daemon running, as on Unix, still in the Job Object for a kill.
        if self.kill.is_some() {
            let _ = kill_windows::force(&self.job_object, None, crate::model::signals::SIGKILL);
        }
        self.take_output_news();
        crate::supervise::wake::join_registration(&mut self.wake_thread, &mut self.job);
        let end = ending::End { by: self.kill.as_ref().map_or(EndedBy::Itself, |kill| kill.reason.ended_by()), exit: self.phase.main_exit().and_then(MainExit::recorded), ended_at, caller_records: false };
        self.phase = self.phase.recorded();
        if let ending::Recorded::Nowhere(error) = ending::record_end(self, end) {
            unrecorded::keep(self, error);
        }
        self.keep_trying_unrecorded();
        // The output ends when the last process holding the pipe does.
        self.output.join();
        self.take_output_news();
        if let Some(watch) = &mut self.watch {
            let mut events = Vec::new();
            watch.output_ended(&mut events);
            self.on_watch_events(events);
        }
        self.output.with_sink(RotatingWriter::join_deleter);
        // Nothing of the job writes any more, and no child of ours is left.
        self.phase = self.phase.settle(false);
        for errand in std::mem::take(&mut self.errands) {
            let _ = errand.join();
        }
    }

    fn main_ended(&mut self) {
        let Some(mut main) = self.main.take() else { return };
        let exit = MainExit::from_wait(main.wait().ok().and_then(|s| s.code()), None).unwrap_or(MainExit::Unread);
        // No child of ours to reap: what the run left is in the Job Object.
        self.phase = self.phase.main_reaped(exit).no_children();
        self.main_ended_at = Some(now_ms());
    }

    /// The process the job is tied to ended: the tree goes, as on `kill`.
    fn fire_tie(&mut self) {
        self.tie = Tied::No;
        if let Some(reason) = crate::supervise::tie::fire(&mut self.job.tie) {
            tracing::info!("run-bg supervisor {}: killing the job: {reason}", self.job.id);
            self.begin_kill(KillReason::Tie, self.default_kill());
        }
    }

    /// A kill with the configured grace period.
    fn default_kill(&self) -> KillRequest {
        KillRequest { grace_ms: self.config.kill.grace_ms, force: false, caller_sweeps: false, caller_signalled_since: None }
    }

    /// Ends the whole Job Object now.
    fn terminate(&mut self, signal: i32) {
        if let Err(e) = kill_windows::force(&self.job_object, self.main.as_mut(), signal) {
            tracing::warn!("run-bg supervisor {}: cannot end the job's Job Object ({e}); ended its main process", self.job.id);
        }
        if let Some(kill) = &mut self.kill {
            kill.forced_at = Some(Instant::now());
        }
    }

    /// Both doorbells (`wait_windows::wait`).
    fn doorbells(&self) -> [std::os::windows::io::BorrowedHandle<'_>; 2] {
        [self.doorbell.as_handle(), self.stop_bell.as_handle()]
    }

    /// `kill`, `pause` and `resume` ring the doorbell after leaving their
    /// request beside the job, and only a request left counts, as on Unix
    /// (a ring that finds none, one that came after its request was taken
    /// at an earlier ring, is nothing); the stop bell is a kill with the
    /// configured grace (`kill` rings it when it could not write its request).
    fn on_doorbell(&mut self) {
        self.held.refresh();
        if let Some(request) = crate::supervise::requests::kill_request(&self.home, &self.job.id) {
            // Windows's supervisor looks at its Job Object alone: no caller sweeps for it.
            self.begin_kill(KillReason::Requested, KillRequest { caller_sweeps: false, caller_signalled_since: None, ..request });
        }
        if let Some(request) = pause::take_request(&self.home, &self.job.id) {
            pause::act_on(self, request);
        }
        if windows_job::take(&self.stop_bell) {
            self.begin_kill(KillReason::Requested, self.default_kill());
        }
    }

    /// A kill's start; a later request can only bring the end forward (a
    /// `kill --force` during the grace period ends the job now).
    fn begin_kill(&mut self, reason: KillReason, request: KillRequest) {
        let now = Instant::now();
        if let Some(kill) = &mut self.kill {
            if !kill.forced() {
                kill.again(reason, &request, now);
                if kill.force_due(now) {
                    self.terminate(crate::model::signals::SIGKILL);
                }
            }
            return;
        }
        self.kill = Some(Kill::begin(reason, &request, now));
        // Between two runs no run is left to ask: the job ends now, and
        // what the ended run left (being ended before a restart) with it.
        if request.force || request.grace_ms == 0 || !self.phase.main_running() {
            self.terminate(crate::model::signals::SIGKILL);
            self.end_pause_for_kill();
            return;
        }
        // A suspended process cannot take the break: resumed first, as
        // Unix continues a paused tree after its SIGTERM.
        self.end_pause_for_kill();
        if let Err(e) = kill_windows::ask_to_stop(self.group) {
            tracing::warn!("run-bg supervisor {}: cannot send CTRL_BREAK to the job ({e}); ending it now", self.job.id);
            self.terminate(crate::model::signals::SIGTERM);
        }
    }

    /// Runs `errand` on a thread of its own (a notification the loop must
    /// not wait for), joined before we exit.
    fn errand(&mut self, name: &str, errand: impl FnOnce() + Send + 'static) {
        self.errands.retain(|running| !running.is_finished());
        match std::thread::Builder::new().name(name.into()).spawn(errand) {
            Ok(running) => self.errands.push(running),
            Err(e) => tracing::warn!("run-bg supervisor {}: cannot start the {name}: {e}", self.job.id),
        }
    }
}

/// Readiness and `--notify-on` (the checks are in supervise/ready.rs), as
/// Unix's supervisor records them.
impl Supervisor {
    /// Hands the watch what the copying threads wrote into the log.
    fn take_output_news(&mut self) {
        let mut events = Vec::new();
        while let Some(bytes) = self.output.news() {
            if let Some(watch) = &mut self.watch {
                watch.feed(&bytes, &mut events);
            }
        }
        self.on_watch_events(events);
    }

    /// Runs the watch's probes and timers that are due.
    fn tick_watch(&mut self) {
        let Some(mut watch) = self.watch.take() else { return };
        let mut events = Vec::new();
        let job_object = &self.job_object;
        watch.tick(self.phase.main_running(), &|| windows_job::process_ids(job_object), &mut events);
        self.watch = Some(watch);
        self.on_watch_events(events);
    }

    fn on_watch_events(&mut self, events: Vec<ready::Event>) {
        ready::on_events(self, events);
    }

    /// Sends a `matched` event from a thread, so a slow service never holds
    /// up the loop.
    fn announce_match(&mut self, matched: MatchEvent) {
        if self.config.notify.url.is_none() {
            return;
        }
        let (home, config, job) = (self.home.clone(), self.config.clone(), self.job.clone());
        self.errand("match notifier", move || matchers::announce_match(&home, &config, &job, &matched));
    }
}

/// What Windows does its own way when an end is recorded (ending::record_end).
impl ending::Ending for Supervisor {
    fn record(&mut self) -> (&Home, &crate::store::config::Config, &Registry, &mut Job) {
        (&self.home, &self.config, &self.registry, &mut self.job)
    }

    /// From a thread, joined before we exit.
    fn announce(&mut self) {
        let (home, config, job) = (self.home.clone(), self.config.clone(), self.job.clone());
        self.errand("notifier", move || notify::announce(&home, &config, &job));
    }

    fn note_error(&self, message: &str) {
        tracing::error!("run-bg supervisor {}: {message}", self.job.id);
    }
}

/// An end Windows could write nowhere is kept here (supervise/unrecorded.rs).
impl unrecorded::Keeping for Supervisor {
    fn kept(&mut self) -> &mut Option<Unrecorded> {
        &mut self.unrecorded
    }

    fn held(&self) -> &crate::store::paths::HeldHome {
        &self.held
    }
}

impl Supervisor {
    /// While an end could not be written, the supervisor stays, tries
    /// again now and then, and copies the job's output meanwhile: it exits
    /// once the end is written or can never be (supervise/unrecorded.rs).
    fn keep_trying_unrecorded(&mut self) {
        while let Some(next_try) = self.unrecorded.as_ref().map(|u| u.next_try) {
            let limit = next_try.saturating_duration_since(Instant::now()) + Duration::from_millis(1);
            // The doorbell is heard (a kill has nothing left to end), so a ring never spins the wait.
            let woken = wait_windows::wait(self.doorbells(), self.output.wake.as_handle(), None, None, limit);
            if woken.failed {
                std::thread::sleep(limit);
            }
            // Asked to stop: only this end keeps us, as on Unix.
            if woken.doorbell && windows_job::take(&self.stop_bell) {
                unrecorded::give_up(self, "asked to stop (its stop bell)");
                return;
            }
            self.take_output_news();
            unrecorded::retry(self);
        }
    }
}

/// What Windows does with readiness and `--notify-on` (ready::on_events).
impl ready::Watching for Supervisor {
    fn record(&mut self) -> (&Registry, &mut Job) {
        (&self.registry, &mut self.job)
    }

    fn matched(&mut self, matched: MatchEvent) {
        self.announce_match(matched);
    }

    fn release_lines(&mut self) -> bool {
        self.watch.as_mut().is_some_and(ready::Watch::release_lines)
    }

    /// The copying threads keep the output to themselves again.
    fn lines_released(&mut self) {
        self.output.want_lines(false);
    }

    fn ready_recorded(&mut self) {
        ending::hand_on_slot(&self.home, &self.config);
    }

    fn note_error(&self, message: &str) {
        tracing::error!("run-bg supervisor {}: {message}", self.job.id);
    }
}

/// Restart on failure (`--restart`; the schedule is in supervise/restart.rs).
/// Each run is a fresh process in the same Job Object: `kill` and `check`
/// find it by the one name the job has, and the Job Object says when what
/// an ended run left is gone (its count of processes is 0). A Job Object per
/// run would need a name per run, which `kill` would have to learn.
impl Supervisor {
    /// After a run of a job started with `--restart` has ended (and no kill
    /// is under way): whether the job goes on (`restart::step`).
    fn restart_step(&mut self) -> bool {
        if self.runs.restarter.is_none() {
            return false;
        }
        restart::step(self, self.phase.main_exit().and_then(MainExit::recorded))
    }

    /// Asks what the ended run left in the Job Object to stop (CTRL_BREAK to
    /// its console group, as a kill does): when to end it if it has not.
    fn ask_leftovers_to_stop(&self, now: Instant) -> Instant {
        if !kill_windows::anything_left(&self.job_object) {
            return now;
        }
        match kill_windows::ask_to_stop(self.group) {
            Ok(()) => now + Duration::from_millis(self.config.kill.grace_ms),
            Err(_) => now,
        }
    }

    /// Starts the next run; `false` (the job ends) when it cannot start.
    fn relaunch(&mut self) -> bool {
        // Wanted from its first byte: a ready line it prints at once is seen.
        if self.job.ready.is_some() {
            self.output.want_lines(true);
        }
        let (main, identity) = match launch_windows::launch_run(&self.job, &self.job_object, self.stdin.as_ref().map(|s| &s.child_end)) {
            Ok((main, identity, reader)) => {
                self.output.copy(reader);
                (main, identity)
            }
            Err(why) => return restart::failed_to_start(self, &why),
        };
        self.group = main.id();
        self.main = Some(main);
        self.phase = self.phase.restarted();
        self.job.main = Some(identity);
        self.runs.run_started();
        if ready::new_run(&mut self.job, &self.config, &mut self.watch) {
            self.output.want_lines(self.watch.as_ref().is_some_and(ready::Watch::needs_lines));
        }
        self.save_run();
        true
    }

    /// `restart::save_run`, its error logged.
    fn save_run(&mut self) {
        if let Err(e) = restart::save_run(&self.registry, &self.job) {
            tracing::error!("run-bg supervisor {}: cannot record the restart in its job.json: {e}", self.job.id);
        }
    }
}

/// Between two runs (`--restart`): what Windows does its own way.
impl BetweenRuns for Supervisor {
    type Cleanup = Cleanup;

    fn runs(&mut self) -> &mut restart::Runs<Cleanup> {
        &mut self.runs
    }

    fn job_mut(&mut self) -> &mut Job {
        &mut self.job
    }

    fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    fn going_on(&mut self) {
        self.main_ended_at = None;
    }

    fn start_cleaning(&mut self, now: Instant) -> (Cleanup, bool) {
        (Cleanup { terminate_at: self.ask_leftovers_to_stop(now), gone_at: None }, false)
    }

    fn cleaned(&mut self, cleanup: &mut Cleanup, now: Instant) -> bool {
        if kill_windows::anything_left(&self.job_object) {
            if now >= cleanup.terminate_at {
                let _ = kill_windows::force(&self.job_object, None, crate::model::signals::SIGKILL);
                cleanup.terminate_at = now + TERMINATE_WAIT;
            }
            return false;
        }
        // The run's processes held its pipe's only writers: its copy
        // ends now, and the separator goes after all of it.
        let gone_at = *cleanup.gone_at.get_or_insert(now);
        if !self.output.all_copied() && now < gone_at + OUTPUT_END_WAIT {
            return false;
        }
        self.take_output_news();
        true
    }

    fn write_separator(&mut self, line: &str) -> crate::Result<()> {
        self.output.with_sink(|log| log.write_separator(line))
    }

    fn save_run(&mut self) {
        Supervisor::save_run(self);
    }

    /// From a thread, joined before we exit.
    fn announce(&mut self, announcement: restart::Announcement) {
        self.errand("restart announcer", move || announcement.send());
    }

    fn note_error(&self, message: &str) {
        tracing::error!("run-bg supervisor {}: {message}", self.job.id);
    }

    fn context(&self) -> (&Home, &crate::store::config::Config, &Job) {
        (&self.home, &self.config, &self.job)
    }

    fn relaunch(&mut self) -> bool {
        Supervisor::relaunch(self)
    }
}

/// `pause` and `resume` (supervise/pause.rs): every member of the Job
/// Object suspended, and each that joins it while paused (os/pause_windows.rs).
impl Pausing for Supervisor {
    fn clocks(&mut self) -> Clocks<'_> {
        Clocks { paused: &mut self.paused, timeout_at: &mut self.timeout_at, watch: self.watch.as_mut(), job: &mut self.job }
    }

    fn ending(&self) -> bool {
        self.kill.is_some() || (!self.phase.main_running() && self.runs.between.is_none())
    }

    fn hold_tree(&mut self) {
        self.members.pause(&self.job_object);
    }

    fn release_tree(&mut self) {
        self.members.resume();
    }

    fn record(&mut self) -> (&Registry, &Job) {
        (&self.registry, &self.job)
    }

    fn note_error(&self, message: &str) {
        tracing::error!("run-bg supervisor {}: {message}", self.job.id);
    }
}

impl Supervisor {
    /// A kill of a paused job: its processes are resumed (to take the
    /// break, or already ended), and its end is recorded without the pause.
    fn end_pause_for_kill(&mut self) {
        if self.paused.take().is_some() || self.members.is_paused() {
            self.members.resume();
            self.job.paused_at = None;
        }
    }
}
