//! The supervisor's start, the same on every platform: `run-bg __supervise`
//! reads its start request, leaves its caller behind, launches the job's
//! main process, records it and tells the caller how it went. How the first
//! run is launched and its output taken is each platform's (`first_run`).

use crate::model::job::{Job, JobState};
use crate::model::protocol::{READY_ERR, READY_OK};
use crate::now_ms;
use crate::os::procinfo;
use crate::os::supervision::{self, Host};
use crate::store::config::Config;
use crate::store::logs::RotatingWriter;
use crate::store::paths::Home;
use crate::store::registry::{Patience, Registry};
use crate::supervise::memory::CodePages;
use crate::supervise::phase::Phase;
use crate::supervise::restart::Runs;
use crate::supervise::supervisor::{ProcessRecord, Supervisor};
use crate::supervise::{outpipe, ready, stdin, tie, JobOutput};
use std::path::Path;
use std::time::{Duration, Instant};

pub use crate::supervise::spec::SupervisorSpec;

/// Entry point of `run-bg __supervise`. Never returns to the CLI's parser.
pub fn supervise_main() -> i32 {
    supervision::before_start();
    let spec = match SupervisorSpec::read_from_stdin() {
        Ok(spec) => spec,
        Err(e) => {
            report_ready(&format!("{READY_ERR}supervisor received a bad start request: {e}"));
            return 1;
        }
    };
    if let Err(e) = supervision::detach(spec.stay_child) {
        report_ready(&format!("{READY_ERR}cannot detach the supervisor: {e}"));
        return 1;
    }
    match Supervisor::start(spec) {
        Ok(mut supervisor) => {
            supervisor.run();
            supervisor.exit()
        }
        Err(failure) => {
            report_ready(&format!("{READY_ERR}{}", failure.message));
            // Refused (we lead a session already) once the launch was tried.
            let _ = supervision::leave_callers_session();
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
pub(super) struct StartFailure {
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
    supervision::answered();
}

/// The first run, launched: the platform's half, the output going into the
/// log, the alive lock (Unix), and the main process's pid. The job's
/// `main` is set. `launched_pending`: Unix's exec outcome, read once the
/// record is written (the write and the job's start overlap).
struct FirstRun {
    host: Host,
    output: JobOutput,
    alive_lock: Option<std::fs::File>,
    pid: u32,
    exec_outcome: Option<supervision::Pending>,
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
        // Before the run starts: a ready line it prints at once is seen.
        let watch = ready::Watch::new(&job, &spec.config);
        let lines_wanted = watch.as_ref().is_some_and(ready::Watch::needs_lines);
        let mut first = match first_run(&home, &spec.config, &mut job, lines_wanted) {
            Ok(first) => first,
            Err(Failed::Unrecorded(message)) => return Err(message.into()),
            Err(Failed::Recorded(message)) => {
                job.main = None;
                return Err(fail(job, message));
            }
        };
        job.state = JobState::Running;
        // Recorded while the job starts up (the write and its start overlap), in
        // the job's own job.json: it needs no lock, so a registry held by
        // another process delays neither the caller nor the job, and it
        // reserves the room the outcome needs. A job that cannot be recorded
        // (a full disk) is not started: its end could not be kept.
        if let Err(e) = registry.write_job_file(&job, false) {
            if let Err(kill) = first.host.stop_unrecorded() {
                return Err(format!("cannot record the job: {e} (and its process {} could not be stopped: {kill})", first.pid).into());
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
        if let Some(Err(e)) = first.exec_outcome.take().map(supervision::Pending::exec_outcome) {
            job.main = None;
            return Err(fail(job, e.to_string()));
        }
        report_ready(&format!("{READY_OK}{}", first.pid));
        // What start-up parsed (the spec, the config) is given back with the
        // first release of code pages (`CodePages::new`), once the job runs.

        let timeout_at = job.timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        // After the ready line: the job's start waits for no service.
        let wake_thread = crate::supervise::wake::spawn_registration(&registry, &spec.config.notify, &job);
        let tie = tie::Watch::open(job.tie.as_ref());
        let procset = ProcessRecord::new(&home.job_dir(&job.id));
        let runs = Runs::new(&job);
        Ok(Supervisor {
            job,
            registry,
            home,
            held,
            config: spec.config,
            unrecorded: None,
            output: first.output,
            host: first.host,
            phase: Phase::Running,
            timeout_at,
            kill: None,
            pipes_removed: false,
            watch,
            runs,
            main_ended_at: None,
            wake_thread,
            deferred_matches: Vec::new(),
            tie,
            procset,
            code_pages: CodePages::new(),
            paused: None,
            alive_lock: first.alive_lock,
            errands: Vec::new(),
        })
    }

    /// Starts the next run; `false` (the job ends) when it cannot start.
    pub(super) fn relaunch(&mut self) -> bool {
        self.runs.between = None;
        // A launch forks on Unix: no thread of ours may hold a lock then.
        self.single_threaded();
        // Wanted from its first byte: a ready line it prints at once is seen.
        if self.job.ready.is_some() {
            self.output.want_lines(true);
        }
        let (identity, run) = match self.host.launch_run(&self.job) {
            Ok(launched) => launched,
            Err(why) => return crate::supervise::restart::failed_to_start(self, &why),
        };
        self.output.new_run(run);
        self.job.main = Some(identity);
        if let Some(restart) = &mut self.job.restart {
            restart.next_run_at = None;
        }
        self.phase = self.phase.restarted();
        self.runs.run_started();
        if ready::new_run(&mut self.job, &self.config, &mut self.watch) {
            self.output.want_lines(self.watch.as_ref().is_some_and(ready::Watch::needs_lines));
        }
        self.save_run();
        true
    }
}

/// Why the first run did not start: with the job to record as failed, or
/// (the job's process could not be stopped) only said.
enum Failed {
    Recorded(String),
    /// Windows ends what it started with its Job Object: always recorded.
    #[cfg_attr(windows, allow(dead_code))]
    Unrecorded(String),
}

/// Takes `SUPERVISOR_LOCK_FILE` in the job's directory (opened close-on-exec:
/// the job's processes never hold it). A reader holds it shared for a moment
/// only, so a few tries get it; without it readers look the full way.
#[cfg(unix)]
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

/// Unix: the output a named pipe the job holds read-write (our death never
/// ends the job, see outpipe; a bigger pipe also means fewer wake-ups for
/// chatty jobs), `--stdin pipe` a FIFO; the job launched first, then the
/// lock and the log made while it starts up (an inode each, up to a
/// millisecond on a busy disk, overlapping the job's start instead of
/// delaying it; nothing of the job can hold them, opened close-on-exec
/// after the launch).
#[cfg(unix)]
fn first_run(home: &Home, config: &Config, job: &mut Job, lines_wanted: bool) -> Result<FirstRun, Failed> {
    use std::os::fd::AsRawFd;
    let mut host = Host::prepare().map_err(Failed::Unrecorded)?;
    let output = outpipe::create(&home.job_dir(&job.id)).map_err(|e| Failed::Recorded(format!("cannot create the output pipe: {e}")))?;
    let job_stdin = match job.stdin_pipe {
        true => Some(stdin::create(&home.job_dir(&job.id)).map_err(|e| Failed::Recorded(format!("cannot create the stdin pipe: {e}")))?),
        false => None,
    };
    let launched = Host::launch_with(job, output.child_end.as_raw_fd(), job_stdin.as_ref().map(|s| s.child_end.as_raw_fd()));
    if let Err(e) = supervision::leave_callers_session() {
        tracing::warn!("run-bg supervisor: cannot leave its caller's session: {e}");
    }
    // Our copy of the job's end: EOF then means "every process of the job
    // closed it". A job that restarts keeps it for its next run until it
    // ends for good.
    let (stdin_child_end, stdin_writer) = job_stdin.map(|pipe| (pipe.child_end, pipe.writer)).unzip();
    let ends = supervision::RunEnds { output: output.child_end, stdin: stdin_child_end };
    host.keep_pipes(ends, stdin_writer, job.restart.is_some());
    let launched = launched.map_err(|e| Failed::Recorded(e.to_string()))?;
    let pid = launched.pid;
    job.main = Some(host.launched(pid).ok_or_else(|| Failed::Recorded(format!("the launch reported pid {pid}")))?);
    // Before the record that says the job runs: a reader that finds it
    // running finds the lock held.
    let alive_lock = hold_alive_lock(&home.job_dir(&job.id));
    // The log too (always in the job's directory, as the record is). It
    // takes what the job writes from the pipe only once we read it, and a
    // job whose log cannot be made is stopped before it is recorded as
    // running, as one that cannot be recorded is.
    let log_path = home.job_log(&job.id, Path::new(&job.log_path));
    let log = match RotatingWriter::create(&log_path, config.logs.max_bytes, config.logs.keep) {
        Ok(log) => log,
        Err(e) => {
            let message = home.explain(e).to_string();
            if let Err(kill) = host.stop_unrecorded() {
                return Err(Failed::Unrecorded(format!("{message} (and its process {pid} could not be stopped: {kill})")));
            }
            return Err(Failed::Recorded(message));
        }
    };
    if let Some(why) = &output.unnamed_because {
        tracing::warn!("run-bg supervisor {}: {why}; the job's output cannot be taken up if this supervisor dies", job.id);
    }
    let output = JobOutput::new(output.reader, log, lines_wanted);
    Ok(FirstRun { host, output, alive_lock, pid: pid as u32, exec_outcome: Some(launched) })
}

/// Windows: the Job Object, the bells and the stdin pipe first, the log,
/// then the run, whose pipe a thread copies into the log.
#[cfg(windows)]
fn first_run(home: &Home, config: &Config, job: &mut Job, lines_wanted: bool) -> Result<FirstRun, Failed> {
    let log_path = home.job_log(&job.id, Path::new(&job.log_path));
    let log = RotatingWriter::create(&log_path, config.logs.max_bytes, config.logs.keep).map_err(|e| Failed::Recorded(home.explain(e).to_string()))?;
    let Some(supervisor) = job.supervisor else { return Err(Failed::Recorded("cannot read this supervisor's own identity".into())) };
    let mut host = Host::prepare(&home.root, job, &supervisor).map_err(Failed::Recorded)?;
    let mut output = JobOutput::new(log).map_err(|e| Failed::Recorded(format!("cannot create the output's wake-up event: {e}")))?;
    output.want_lines(lines_wanted);
    let (identity, run) = host.launch_run(job).map_err(Failed::Recorded)?;
    output.new_run(run);
    let pid = identity.pid;
    job.main = Some(identity);
    Ok(FirstRun { host, output, alive_lock: None, pid, exec_outcome: None })
}
