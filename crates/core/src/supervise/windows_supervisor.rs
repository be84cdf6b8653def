//! The supervisor on Windows: `run-bg __supervise` reads its start request,
//! starts the job's main process suspended, puts it in the job's Job Object
//! (so every process it starts is held there too), lets it run, copies its
//! output (stdout and stderr, one pipe) into the rotating log, and waits on
//! handles: the main process, the kill doorbell (a named event `kill` sets
//! after writing its request), a tied process. A kill or a timeout asks the
//! job's console process group to stop (CTRL_BREAK_EVENT), waits the grace
//! period, then ends the whole Job Object. The end is recorded as on Unix:
//! job.json first, then the registry, then the notification.
//!
//! What Unix's supervisor does that has no counterpart here is refused when
//! the job starts, with the reason (`unsupported`): nothing silently does less.

use crate::model::job::{EndedBy, Exit, Job, JobState};
use crate::model::protocol::{KillRequest, JOB_COOKIE, KILL_REQUEST_FILE, READY_ERR, READY_OK, SUPERVISOR_MARK};
use crate::now_ms;
use crate::os::windows_job::{self, Woken};
use crate::os::{platform, procinfo};
use crate::store::logs::RotatingWriter;
use crate::store::paths::Home;
use crate::store::registry::{Patience, Registry};
use crate::supervise::spec::AFTER_END;
use crate::supervise::{notify, ready};
use std::io::Read;
use std::os::windows::io::OwnedHandle;
use std::os::windows::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub use crate::supervise::spec::SupervisorSpec;

/// CREATE_SUSPENDED: the main process runs only once it is in the Job Object.
const CREATE_SUSPENDED: u32 = 0x0000_0004;
/// CREATE_NEW_PROCESS_GROUP: the main process leads a console process group,
/// the target of the kill's CTRL_BREAK_EVENT.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

/// How long the main process has to end after the Job Object was ended
/// before the supervisor stops waiting for it.
const TERMINATE_WAIT: Duration = Duration::from_secs(5);

/// What this supervisor does not do on Windows, if the job asks for it.
fn unsupported(job: &Job) -> Option<&'static str> {
    if job.stdin_pipe {
        return Some("--stdin pipe is Unix-only (the job's stdin is a named FIFO there); on Windows a job's stdin is empty");
    }
    if job.restart.is_some() {
        return Some("--restart is not available on Windows yet");
    }
    if job.ready.is_some() {
        return Some("--ready-log/--ready-port/--ready-url are not available on Windows yet");
    }
    if job.nice.is_some() {
        return Some("--nice is Unix-only");
    }
    if job.wake.is_some() {
        return Some("--wake is not available on Windows yet");
    }
    if !job.notify_on.is_empty() {
        return Some("--notify-on is not available on Windows yet");
    }
    None
}

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
    main: std::process::Child,
    job_object: OwnedHandle,
    doorbell: OwnedHandle,
    tie: Tied,
    output: Option<std::thread::JoinHandle<()>>,
    timeout_at: Option<Instant>,
    kill: Option<Kill>,
    /// Held for the job's life: the home this supervisor checked.
    _held: crate::store::paths::HeldHome,
}

/// A kill (or a timeout, or a fired tie) under way.
#[derive(Clone, Copy)]
enum Kill {
    /// The job was asked (CTRL_BREAK) and has until then to end.
    Grace { by: EndedBy, until: Instant },
    /// The Job Object was ended then: past TERMINATE_WAIT with the main
    /// process still there, it is ended again, itself too.
    Ended { by: EndedBy, at: Instant },
}

impl Kill {
    fn by(self) -> EndedBy {
        match self {
            Kill::Grace { by, .. } | Kill::Ended { by, .. } => by,
        }
    }
}

/// The process the job is tied to (`--tie`).
enum Tied {
    No,
    Watching(OwnedHandle),
    /// Gone before the watch began: the tie fires at once.
    Gone,
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
        if let Some(why) = unsupported(&job) {
            return Err(fail(job, why.to_string()));
        }
        let log_path = home.job_log(&job.id, Path::new(&job.log_path));
        let mut log = match RotatingWriter::create(&log_path, spec.config.logs.max_bytes, spec.config.logs.keep) {
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
        let (reader, writer) = match std::io::pipe() {
            Ok(pair) => pair,
            Err(e) => return Err(fail(job, format!("cannot create the output pipe: {e}"))),
        };
        let Some((program, args)) = job.argv.split_first().map(|(p, a)| (p.clone(), a.to_vec())) else {
            return Err(fail(job, "no command to run".into()));
        };
        let mut command = std::process::Command::new(&program);
        match crate::os::sys::shell_command_line(&job.argv) {
            Some(line) => command.raw_arg(line),
            None => command.args(args),
        };
        command
            .current_dir(&job.cwd)
            .envs(job.env.iter())
            .env(JOB_COOKIE, &job.id)
            .env_remove(SUPERVISOR_MARK)
            .stdin(std::process::Stdio::null())
            .creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP);
        match writer.try_clone() {
            Ok(second) => command.stdout(writer).stderr(second),
            Err(e) => return Err(fail(job, format!("cannot share the output pipe: {e}"))),
        };
        // The job holds the pipe's read end too (inherited, then ours made
        // private again): should this supervisor die, the job's writes go on
        // into the pipe instead of failing, as Unix's named pipe the job
        // holds keeps them (a job that fills it then waits, still killable).
        let shared = crate::os::sys::set_inheritable(&reader, true);
        let main = command.spawn();
        if shared.is_ok() {
            let _ = crate::os::sys::set_inheritable(&reader, false);
        }
        // Our copies of the pipe's write end go with the command: the pipe
        // ends when the job's last process closes it.
        drop(command);
        let mut main = match main {
            Ok(main) => main,
            Err(e) => return Err(fail(job, crate::model::text::visible(&format!("cannot start {}: {e}", program.to_string_lossy())).into_owned())),
        };
        if let Err(e) = windows_job::assign(&job_object, &main).and_then(|()| windows_job::resume(main.id())) {
            let _ = windows_job::terminate_job(&job_object, 1);
            let _ = main.kill();
            return Err(fail(job, format!("cannot put the job's process in its Job Object: {e}")));
        }
        // Our suspended child: its pid cannot have been reused yet, so its
        // identity is read now or the start fails (a made-up one would
        // never match, and the job would look ended while it runs).
        job.main = procinfo::identify_exactly(main.id());
        if job.main.is_none() {
            let _ = windows_job::terminate_job(&job_object, 1);
            return Err(fail(job, format!("cannot read the identity of the job's process {}", main.id())));
        }
        job.state = JobState::Running;
        if let Err(e) = registry.write_job_file(&job, false) {
            let _ = windows_job::terminate_job(&job_object, 1);
            return Err(format!("cannot record the job: {e}"));
        }
        report_ready(&format!("{READY_OK}{}", main.id()));
        let output = std::thread::Builder::new()
            .name("output".into())
            .spawn(move || copy_output(reader, &mut log))
            .map_err(|e| tracing::warn!("run-bg supervisor: cannot start copying the job's output: {e}"))
            .ok();
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
        Ok(Supervisor {
            home,
            registry,
            config: spec.config,
            job,
            main,
            job_object,
            doorbell,
            tie,
            output,
            timeout_at,
            kill: None,
            _held: held,
        })
    }

    fn run(&mut self) {
        // The child's own handle (a copy): no pid to open again.
        let main_handle: OwnedHandle = match std::os::windows::io::AsHandle::as_handle(&self.main).try_clone_to_owned() {
            Ok(handle) => handle,
            Err(e) => {
                tracing::error!("run-bg supervisor {}: cannot wait for the job's process ({e}); ending it", self.job.id);
                let _ = windows_job::terminate_job(&self.job_object, 1);
                let _ = self.main.kill();
                let code = self.main.wait().ok().and_then(|s| s.code());
                self.kill = Some(Kill::Ended { by: EndedBy::Kill, at: Instant::now() });
                self.record_end(code, now_ms());
                return;
            }
        };
        if matches!(self.tie, Tied::Gone) {
            self.fire_tie();
        }
        let exit = loop {
            let now = Instant::now();
            match self.kill {
                None if self.timeout_at.is_some_and(|at| now >= at) => {
                    self.begin_kill(EndedBy::Timeout, Duration::from_millis(self.config.kill.grace_ms), false);
                    continue;
                }
                Some(Kill::Grace { by, until }) if now >= until => self.terminate(by, crate::model::signals::SIGKILL),
                Some(Kill::Ended { by, at }) if now >= at + TERMINATE_WAIT => {
                    // Still there after the Job Object was ended: again, and the main process itself.
                    let _ = self.main.kill();
                    self.terminate(by, crate::model::signals::SIGKILL);
                }
                _ => {}
            }
            let next = match self.kill {
                Some(Kill::Grace { until, .. }) => Some(until),
                // Ended: the main process goes within moments.
                Some(Kill::Ended { at, .. }) => Some(at + TERMINATE_WAIT),
                None => self.timeout_at,
            }
            .map_or(Duration::from_secs(3600), |at| at.saturating_duration_since(now));
            let mut handles = vec![&main_handle, &self.doorbell];
            if let Tied::Watching(tie) = &self.tie {
                handles.push(tie);
            }
            match windows_job::wait_any(&handles, next) {
                Woken::Handle(0) => break self.main.wait().ok().and_then(|s| s.code()),
                Woken::Handle(1) => self.on_doorbell(),
                Woken::Handle(_) => self.fire_tie(),
                Woken::TimedOut => {}
                Woken::Failed => {
                    // A handle went bad (the tie's, most likely): stop
                    // watching it, and never spin on a failing wait.
                    tracing::warn!("run-bg supervisor {}: a wait failed: {}", self.job.id, std::io::Error::last_os_error());
                    self.tie = Tied::No;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        let ended_at = now_ms();
        // What the main process left in the Job Object goes when a kill or
        // a timeout ended the job; a job that ended itself may leave a
        // daemon running, as on Unix, still in the Job Object for a kill.
        if self.kill.is_some() {
            let _ = windows_job::terminate_job(&self.job_object, 1);
        }
        self.record_end(exit, ended_at);
        // The output ends when the last process holding the pipe does.
        if let Some(output) = self.output.take() {
            let _ = output.join();
        }
    }

    fn fire_tie(&mut self) {
        self.tie = Tied::No;
        if let Some(tie) = &mut self.job.tie {
            tie.fired_at.get_or_insert_with(now_ms);
        }
        self.begin_kill(EndedBy::Kill, Duration::from_millis(self.config.kill.grace_ms), false);
    }

    /// Ends the whole Job Object now.
    fn terminate(&mut self, by: EndedBy, signal: i32) {
        if let Err(e) = windows_job::terminate_job(&self.job_object, platform::exit_code_for(signal)) {
            tracing::warn!("run-bg supervisor {}: cannot end the job's Job Object ({e}); ending its process", self.job.id);
            let _ = self.main.kill();
        }
        self.kill = Some(Kill::Ended { by, at: Instant::now() });
    }

    fn on_doorbell(&mut self) {
        let path = self.home.job_dir(&self.job.id).join(KILL_REQUEST_FILE);
        let request: Option<KillRequest> = std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let grace = request.as_ref().map_or(Duration::from_millis(self.config.kill.grace_ms), |r| Duration::from_millis(r.grace_ms));
        let force = request.as_ref().is_some_and(|r| r.force);
        self.begin_kill(EndedBy::Kill, grace, force);
    }

    /// A kill's start; a later request can only bring the end forward (a
    /// `kill --force` during the grace period ends the job now).
    fn begin_kill(&mut self, by: EndedBy, grace: Duration, force: bool) {
        let now = Instant::now();
        match self.kill {
            Some(Kill::Ended { .. }) => return,
            Some(Kill::Grace { by: first, until }) => {
                if force || grace.is_zero() {
                    self.terminate(first, crate::model::signals::SIGKILL);
                } else {
                    self.kill = Some(Kill::Grace { by: first, until: until.min(now + grace) });
                }
                return;
            }
            None => {}
        }
        if force || grace.is_zero() {
            self.terminate(by, crate::model::signals::SIGKILL);
            return;
        }
        if let Err(e) = windows_job::break_group(self.main.id()) {
            tracing::warn!("run-bg supervisor {}: cannot send CTRL_BREAK to the job ({e}); ending it now", self.job.id);
            self.terminate(by, crate::model::signals::SIGTERM);
            return;
        }
        self.kill = Some(Kill::Grace { by, until: now + grace });
    }

    fn record_end(&mut self, code: Option<i32>, ended_at: u64) {
        let by = self.kill.map_or(EndedBy::Itself, Kill::by);
        let exit = code.map(Exit::Code);
        let state = ready::judge_end(&self.job, JobState::ended(by, exit, ended_at));
        // An end recorded by someone else first (a kill that acted without us) stands.
        if let Some(stored) = self.registry.own_record(&self.job.id).filter(|j| j.status().is_final()) {
            self.job = stored;
            let _ = std::fs::remove_file(self.home.job_dir(&self.job.id).join(KILL_REQUEST_FILE));
            return;
        }
        self.job.state = state.clone();
        self.job.notification = notify::claim(&self.config.notify, &self.job);
        let kept = self.registry.write_job_file(&self.job, true);
        if let Err(e) = &kept {
            tracing::error!("run-bg supervisor {}: cannot record the job's end in its job.json: {e}", self.job.id);
        }
        let _ = std::fs::remove_file(self.home.job_dir(&self.job.id).join(KILL_REQUEST_FILE));
        if let Some(hook) = AFTER_END.get() {
            hook(&self.home, &self.config);
        }
        let job = self.job.clone();
        let result = match self.registry.modify(&job.id, |stored| {
            if stored.state != state {
                *stored = Job { seen_at: stored.seen_at, ..job.clone() };
            }
        }) {
            Err(crate::Error::UnknownJob(_)) => self.registry.upsert(&job),
            other => other.map(|_| ()),
        };
        if let Err(e) = result {
            tracing::error!("run-bg supervisor {}: cannot record the job's end in the registry: {e}; it is kept in its job.json", job.id);
        }
        if notify::has_work(&self.config.notify, &self.job) {
            notify::announce(&self.home, &self.config, &self.job);
        }
    }
}

/// Copies the job's output into its log until every process holding the
/// pipe has closed it.
fn copy_output(mut reader: std::io::PipeReader, log: &mut RotatingWriter) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Err(e) = log.write_all(&buffer[..n]) {
                    tracing::warn!("run-bg supervisor: cannot write the job's log: {e}");
                }
            }
        }
    }
    log.join_deleter();
}
