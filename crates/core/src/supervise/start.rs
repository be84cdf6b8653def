//! The supervisor's start: `run-bg __supervise` reads its start request,
//! leaves its caller behind, launches the job's main process (and each run
//! of a job that restarts), records it and tells the caller how it went.

use crate::model::error::LaunchError;
use crate::model::job::{Job, JobState, ProcessIdentity};
use crate::model::protocol::{JOB_COOKIE, READY_ERR, READY_OK, SUPERVISOR_MARK};
use crate::now_ms;
use crate::os::launch::{self, LaunchSpec};
use crate::os::procinfo;
use crate::store::logs::RotatingWriter;
use crate::store::paths::Home;
use crate::store::registry::{Patience, Registry};
use crate::supervise::memory::CodePages;
use crate::supervise::output_copy::new_splicer;
use crate::supervise::phase::Phase;
use crate::supervise::restart::Runs;
use crate::supervise::signals::install_signal_handlers;
use crate::supervise::supervisor::{ProcessRecord, Supervisor};
use crate::supervise::{outpipe, ready, stdin, tie};

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

pub use crate::supervise::spec::SupervisorSpec;

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

/// Orphaned descendants are re-parented to us, so we can reap them and see the
/// tree end. Without it the job still runs and is killed by its group; the
/// failure is reported so a lingering tree can be explained.
fn become_subreaper() {
    if let Err(e) = crate::os::platform::become_subreaper() {
        tracing::warn!("run-bg supervisor: cannot become a child subreaper: {e}");
    }
}

/// Takes `SUPERVISOR_LOCK_FILE` in the job's directory (opened close-on-exec:
/// the job's processes never hold it). A reader holds it shared for a moment
/// only, so a few tries get it; without it readers look the full way.
fn hold_alive_lock(dir: &Path) -> Option<std::fs::File> {
    use crate::os::sys::OpenOptionsExt;
    let file = crate::store::paths::options_nofollow()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(dir.join(crate::model::protocol::SUPERVISOR_LOCK_FILE))
        .ok()?;
    for _ in 0..20 {
        if file.try_lock().is_ok() {
            return Some(file);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

/// Kills and reaps the job's main process we just started and could not
/// record.
fn stop_unrecorded(main: rustix::process::Pid) -> rustix::io::Result<()> {
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
}

/// Entry point of `run-bg __supervise`. Never returns to the CLI's parser.
pub fn supervise_main() -> i32 {
    // First: what a supervisor holds for its job's life must not depend on
    // how big a registry it read on the way.
    procinfo::keep_large_blocks_mapped();
    let spec = match SupervisorSpec::read_from_stdin() {
        Ok(spec) => spec,
        Err(e) => {
            report_ready(&format!("{READY_ERR}supervisor received a bad start request: {e}"));
            return 1;
        }
    };

    let detached = match spec.stay_child {
        // Our caller exits without waiting for us (see `SupervisorSpec::stay_child`).
        true => rustix::process::setsid().map(drop).map_err(std::io::Error::from),
        false => crate::os::fork::detach(),
    };
    if let Err(e) = detached {
        report_ready(&format!("{READY_ERR}cannot detach the supervisor: {e}"));
        return 1;
    }
    redirect_to_dev_null(Stdio::In);
    become_subreaper();
    match Supervisor::start(spec) {
        Ok(mut supervisor) => {
            supervisor.run();
            supervisor.exit()
        }
        Err(failure) => {
            report_ready(&format!("{READY_ERR}{}", failure.message));
            // The caller has its answer; the failed job is in its job.json and
            // joins the registry now if the lock can be had.
            if let Some((registry, job)) = failure.record.map(|boxed| *boxed) {
                let _ = registry.register(&job, Patience::Full);
            }
            1
        }
    }
}

/// Why a start failed, and the failed job (kept in its job.json) to add to
/// the registry once the caller has been told.
struct StartFailure {
    message: String,
    /// Boxed: a failed start is rare and the record large.
    record: Option<Box<(Registry, Job)>>,
}

impl From<String> for StartFailure {
    fn from(message: String) -> StartFailure {
        StartFailure { message, record: None }
    }
}

/// Tells the waiting caller how the start went, then lets go of its pipe.
fn report_ready(line: &str) {
    crate::supervise::spec::write_ready_line(line);
    redirect_to_dev_null(Stdio::Out);
}

/// Starts a run of the job's main process: its argv, cwd and environment
/// plus the cookie, `output` as its stdout and stderr, `stdin` or /dev/null.
fn launch_main(job: &Job, output: std::os::fd::RawFd, stdin: Option<std::os::fd::RawFd>) -> std::result::Result<launch::Launched, LaunchError> {
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

impl Supervisor {
    fn start(spec: SupervisorSpec) -> std::result::Result<Supervisor, StartFailure> {
        // Refused, nothing is recorded: a home we will not use is not written into.
        let (home, held) = Home::hold(spec.home.clone()).map_err(|e| e.to_string())?;
        let registry = Registry::for_config(&home, &spec.config);
        let mut job = spec.job;
        job.supervisor = procinfo::identify_exactly(std::process::id());

        // The failed job goes to its job.json, and to the registry too if the
        // lock is free now; else once the caller has its answer.
        let fail = |mut job: Job, message: String| -> StartFailure {
            outpipe::remove(&home.job_dir(&job.id));
            stdin::remove(&home.job_dir(&job.id));
            job.state = JobState::FailedToStart { error: message.clone(), ended_at: now_ms() };
            match registry.write_job_file(&job, true) {
                Ok(()) if registry.register(&job, Patience::Immediate).is_ok() => message.into(),
                Ok(()) => StartFailure { message, record: Some(Box::new((registry.clone(), job))) },
                Err(e) => format!("{message} (and could not record the job: {e})").into(),
            }
        };

        if let Err(e) = crate::supervise::spec::check_cwd(Path::new(&job.cwd)) {
            return Err(fail(job, e.to_string()));
        }
        let signals = install_signal_handlers().map_err(|e| format!("cannot set up signal handling: {e}"))?;
        // A named pipe the job holds read-write: our death never ends the job
        // (see outpipe); a bigger pipe also means fewer wake-ups for chatty jobs.
        let output = match outpipe::create(&home.job_dir(&job.id)) {
            Ok(output) => output,
            Err(e) => return Err(fail(job, format!("cannot create the output pipe: {e}"))),
        };
        let job_stdin = match job.stdin_pipe {
            true => match stdin::create(&home.job_dir(&job.id)) {
                Ok(pipe) => Some(pipe),
                Err(e) => return Err(fail(job, format!("cannot create the stdin pipe: {e}"))),
            },
            false => None,
        };
        let launched = launch_main(&job, output.child_end.as_raw_fd(), job_stdin.as_ref().map(|s| s.child_end.as_raw_fd()));
        // Our copy of the job's end: EOF then means "every process of the job
        // closed it". A job that restarts keeps it for its next run until it
        // ends for good.
        let restarts = job.restart.is_some();
        let output_child_end = restarts.then_some(output.child_end);
        let (stdin_writer, stdin_child_end) = match job_stdin {
            Some(pipe) => (Some(pipe.writer), restarts.then_some(pipe.child_end)),
            None => (None, None),
        };
        let output_read = output.reader;
        let launched = match launched {
            Ok(launched) => launched,
            Err(e) => return Err(fail(job, e.to_string())),
        };
        let main_pid = launched.pid;
        let Some(main) = rustix::process::Pid::from_raw(main_pid) else {
            return Err(fail(job, format!("the launch reported pid {main_pid}")));
        };
        job.main = Some(
            // Our unreaped child: its pid cannot have been reused yet.
            procinfo::identify_exactly(main_pid as u32).unwrap_or(ProcessIdentity::from_stat(main_pid as u32, 0)),
        );
        job.state = JobState::Running;
        // Before the record that says the job runs: a reader that finds it
        // running finds the lock held. Taken after the launch, not before:
        // the file's creation (an inode, up to a millisecond on a busy disk)
        // then overlaps the job's start instead of delaying it; nothing of
        // the job can hold it (close-on-exec, opened after the launch).
        let alive_lock = hold_alive_lock(&home.job_dir(&job.id));
        // The log too (always in the job's directory, as the record is):
        // made while the job starts up, for the same reason. It takes what the
        // job writes from the pipe only once we read it, and a job whose log
        // cannot be made is stopped before it is recorded as running, as one
        // that cannot be recorded is.
        let log_path = home.job_log(&job.id, Path::new(&job.log_path));
        let log = match RotatingWriter::create(&log_path, spec.config.logs.max_bytes, spec.config.logs.keep) {
            Ok(log) => log,
            Err(e) => {
                let message = home.explain(e).to_string();
                if let Err(kill) = stop_unrecorded(main) {
                    return Err(format!("{message} (and its process {main_pid} could not be stopped: {kill})").into());
                }
                job.main = None;
                return Err(fail(job, message));
            }
        };
        // Recorded while the job starts up (the write and its start overlap), in
        // the job's own job.json: it needs no lock, so a registry held by
        // another process delays neither the caller nor the job, and it
        // reserves the room the outcome needs. A job that cannot be recorded
        // (a full disk) is not started: its end could not be kept.
        if let Err(e) = registry.write_job_file(&job, false) {
            if let Err(kill) = stop_unrecorded(main) {
                return Err(format!("cannot record the job: {e} (and its process {main_pid} could not be stopped: {kill})").into());
            }
            outpipe::remove(&home.job_dir(&job.id));
            stdin::remove(&home.job_dir(&job.id));
            return Err(format!("cannot record the job: {e}").into());
        }
        // Not in jobs.json: readers list the job from its job.json, and the
        // next full registry write (this job's end at the latest) takes it
        // in. Registering here read and rewrote the whole registry before the
        // answer: a start into a home of 1,000 running jobs took 40–56 ms
        // where it takes 10 at 10 jobs, and each supervisor kept that parse's
        // heap.
        if let Err(e) = launched.exec_outcome() {
            job.main = None;
            return Err(fail(job, e.to_string()));
        }
        report_ready(&format!("{READY_OK}{main_pid}"));
        if let Some(why) = output.unnamed_because {
            tracing::warn!("run-bg supervisor {}: {why}; the job's output cannot be taken up if this supervisor dies", job.id);
        }
        // What start-up parsed (the spec, the config) is given back with the
        // first release of code pages (`CodePages::new`), once the job runs.

        let timeout_at = job.timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let watch = ready::Watch::new(&job, &spec.config);
        let splice = if watch.as_ref().is_some_and(ready::Watch::needs_lines) { None } else { new_splicer() };
        // After the ready line: the job's start waits for no service.
        let wake_thread = crate::supervise::wake::spawn_registration(&registry, &spec.config.notify, &job);
        let tie = tie::Watch::open(job.tie.as_ref());
        let home_for_record = home.job_dir(&job.id);
        let runs = Runs::new(&job);
        Ok(Supervisor {
            job,
            registry,
            home,
            held,
            unrecorded: None,
            log,
            output: Some(output_read),
            signals,
            main_pid: main,
            phase: Phase::Running,
            timeout_at,
            log_failed: false,
            kill: None,
            notifier: None,
            config: spec.config,
            buffer: vec![0u8; 256 * 1024],
            splice,
            pipes_removed: false,
            watch,
            runs,
            main_ended_at: None,
            output_child_end,
            stdin_writer,
            stdin_child_end,
            wake_thread,
            deferred_matches: Vec::new(),
            tie,
            procset: ProcessRecord::new(&home_for_record),
            code_pages: CodePages::new(),
            alive_lock,
            paused: None,
        })
    }

    /// Starts the next run; `false` (the job ends) when it cannot start.
    pub(super) fn relaunch(&mut self) -> bool {
        self.runs.between = None;
        let Some(output) = self.output_child_end.as_ref().map(|fd| fd.as_raw_fd()) else { return false };
        // launch() forks: no thread of ours may hold a lock then.
        self.single_threaded();
        let stdin = self.stdin_child_end.as_ref().map(|fd| fd.as_raw_fd());
        let started = launch_main(&self.job, output, stdin).and_then(|launched| {
            let pid = launched.pid;
            launched.exec_outcome().map(|()| pid)
        });
        let pid = match started.map(|pid| (pid, rustix::process::Pid::from_raw(pid))) {
            Ok((pid, Some(main))) => {
                self.main_pid = main;
                pid
            }
            Ok((pid, None)) => return self.restart_failed(&format!("the launch reported pid {pid}")),
            Err(e) => return self.restart_failed(&e.to_string()),
        };
        // Our unreaped child: its pid cannot have been reused yet.
        self.job.main = Some(procinfo::identify_exactly(pid as u32).unwrap_or(ProcessIdentity::from_stat(pid as u32, 0)));
        self.phase = self.phase.restarted();
        self.runs.run_started();
        if ready::new_run(&mut self.job, &self.config, &mut self.watch) && self.watch.as_ref().is_some_and(ready::Watch::needs_lines) {
            self.splice = None;
        }
        self.save_run();
        true
    }

    fn restart_failed(&mut self, why: &str) -> bool {
        crate::supervise::restart::failed_to_start(self, why)
    }
}
