//! Starting run-bg processes: a supervisor for a job (the hand-off of its
//! spec and the wait for its ready line), and the detached errands.

use crate::model::error::HandOffError;
use crate::store::paths::Home;
use crate::os::sys::{without_sigpipe, OpenOptionsExt};
use crate::model::protocol::{parse_ready_line, JOB_COOKIE, SUPERVISE, SUPERVISOR_MARK};
use crate::supervise::start::SupervisorSpec;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Hands a queued job to a fresh supervisor, in the environment its
/// submitter had (`environ`, from its spec.json); returns the main pid.
pub(crate) fn launch_queued(
    home: &Home,
    spec: &SupervisorSpec,
    exe: &Path,
    environ: &[(std::ffi::OsString, std::ffi::OsString)],
) -> std::result::Result<u32, HandOffError> {
    run_supervisor(home, spec, exe, Some(environ))
}

/// `environ`: the supervisor's whole environment (a queued job's
/// submitter's); `None`: ours.
pub(crate) fn run_supervisor(
    home: &Home,
    spec: &SupervisorSpec,
    exe: &Path,
    environ: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) -> std::result::Result<u32, HandOffError> {
    let job_dir = home.job_dir(&spec.job.id);
    let stderr = crate::store::paths::options_nofollow()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(job_dir.join("supervisor.log"))
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null());
    let payload = serde_json::to_vec(spec).map_err(|e| HandOffError::Encode(e.to_string()))?;
    let (stdin, prefilled) = match prefill(&payload) {
        Some((stdin, ours)) => (stdin, Some(ours)),
        None => (Stdio::piped(), None),
    };
    let mut command = Command::new(exe);
    if let Some(environ) = environ {
        command.env_clear().envs(environ.iter().map(|(k, v)| (k, v)));
    }
    command
        .arg(SUPERVISE)
        .arg(&spec.job.id)
        // Started from inside another job, the supervisor is not part of it.
        .env_remove(JOB_COOKIE)
        .env(SUPERVISOR_MARK, &spec.job.id)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(stderr);
    let mut child = crate::os::sys::spawn_detached(&mut command)
        .map_err(|source| HandOffError::CannotStart { exe: exe.to_path_buf(), source })?;
    // While the supervisor starts up; it makes the pipe itself if this fails
    // or comes later.
    let _ = crate::supervise::outpipe::make(&job_dir);
    // A supervisor that died before reading (a binary that cannot run here)
    // must not take the caller down with SIGPIPE: the write fails instead.
    let write_result = match prefilled {
        Some(_) => None,
        None => child.stdin.take().map(|mut stdin| without_sigpipe(|| stdin.write_all(&payload))),
    };
    // One line: the supervisor's answer. On Unix the pipe ends with it (the
    // supervisor lets go of it); on Windows the supervisor keeps its stdout.
    let mut ready = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready);
    }
    if ready.is_empty() {
        // No answer: the supervisor ended; how, if the hand-off failed too.
        let status = child.wait();
        let unread = match write_result {
            Some(Err(e)) => Some(e),
            // The request still in its stdin: it ended before reading, as a
            // failed write says when we write after the spawn.
            _ if prefilled.as_ref().is_some_and(Prefilled::unread) => Some(std::io::ErrorKind::BrokenPipe.into()),
            _ => None,
        };
        if let Some(e) = unread {
            let log = job_dir.join("supervisor.log");
            return Err(HandOffError::CannotHandOver(exited_unread(e, status, &log, &home.shown(&log))));
        }
    } else if !spec.stay_child {
        let _ = crate::os::sys::after_hand_off(child);
    }
    // With `stay_child` the supervisor goes on as our child: we exit without
    // waiting and it passes to init (or the nearest subreaper), as the
    // process its fork would have left does.
    parse_ready_line(ready.lines().next().unwrap_or(""))
}

/// Our own read end of a supervisor's prefilled stdin (see `prefill`), to
/// tell whether it read its request.
#[cfg(target_os = "linux")]
struct Prefilled(std::os::fd::OwnedFd);

/// Never made where `prefill` is not.
#[cfg(not(target_os = "linux"))]
struct Prefilled;

impl Prefilled {
    /// Whether the request is still (partly) in the pipe.
    fn unread(&self) -> bool {
        #[cfg(target_os = "linux")]
        return rustix::io::ioctl_fionread(&self.0).is_ok_and(|left| left > 0);
        #[cfg(not(target_os = "linux"))]
        false
    }
}

/// The supervisor's stdin with the whole start request already in it, and
/// closed behind it, when one pipe holds it all (Linux, whose pipes say how
/// much they hold): the supervisor reads it the moment it starts, instead of
/// waiting for this process to run again and write it, which on busy cores
/// took a wait for a CPU on the way to the job's start. `None`: write it
/// after the spawn, as for a request bigger than the pipe.
#[cfg(target_os = "linux")]
fn prefill(payload: &[u8]) -> Option<(Stdio, Prefilled)> {
    let (reader, writer) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
    if rustix::pipe::fcntl_getpipe_size(&writer).ok()? < payload.len() {
        return None;
    }
    let ours = rustix::io::fcntl_dupfd_cloexec(&reader, 0).ok()?;
    // Into an empty pipe that holds it all the write does not block, and our
    // read end is open (no SIGPIPE). The writer closes here: end of request.
    std::fs::File::from(writer).write_all(payload).ok()?;
    Some((Stdio::from(reader), Prefilled(ours)))
}

#[cfg(not(target_os = "linux"))]
fn prefill(_payload: &[u8]) -> Option<(Stdio, Prefilled)> {
    None
}

/// A hand-off write that failed because the supervisor was gone (EPIPE):
/// says so, how it ended, and what it wrote on its way out, rather than
/// "Broken pipe".
/// `log` is read as this process reaches it; `shown` is how the user knows it
/// (a supervisor handing a queued job on reaches its home by a relative path).
fn exited_unread(error: std::io::Error, status: std::io::Result<std::process::ExitStatus>, log: &Path, shown: &Path) -> std::io::Error {
    if error.kind() != std::io::ErrorKind::BrokenPipe {
        return error;
    }
    let how = status.map_or_else(|e| format!("cannot tell how: {e}"), |s| s.to_string());
    let said = std::fs::read_to_string(log)
        .ok()
        .and_then(|text| text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| format!("; it said: {}", l.trim())))
        .unwrap_or_default();
    std::io::Error::new(
        error.kind(),
        format!("it exited before reading the job ({how}){said}; its errors go to {}", shown.display()),
    )
}

/// Runs `run-bg <args>` in the background with the given home; the program
/// detaches itself at once (`os::fork::detach`), so the wait here is short
/// and leaves no zombie behind.
pub fn spawn_detached(runner: &Path, home: &Home, args: &[String]) -> std::io::Result<()> {
    crate::os::sys::after_hand_off(start_detached_with_stdin(runner, home, args, Stdio::null())?)
}

/// As `spawn_detached`, handing the program `stdin` (an orphan's watcher gets
/// the job's output pipe, so what waits in it outlives the job's processes)
/// and leaving the wait for it to detach (a `wait` on the child returned) to
/// the caller: a look that starts a watcher for each of 1,000 orphans waits
/// for them together, so they start up side by side.
pub fn start_detached_with_stdin(
    runner: &Path,
    home: &Home,
    args: &[String],
    stdin: Stdio,
) -> std::io::Result<std::process::Child> {
    crate::os::sys::spawn_detached(
        Command::new(runner)
            .args(args)
            .env("PROC_MANAGER_HOME", &home.root)
            .env_remove(JOB_COOKIE)
            .env(SUPERVISOR_MARK, "helper")
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
}

/// Programs started by `start_detached_with_stdin` and not yet detached:
/// each is waited for when this goes, on every way out of the caller, so
/// that none is left a zombie in a long-lived caller (the addon's).
#[derive(Default)]
pub struct Detaching(Vec<std::process::Child>);

impl Detaching {
    pub fn add(&mut self, started: Option<std::process::Child>) {
        self.0.extend(started);
    }
}

impl Drop for Detaching {
    fn drop(&mut self) {
        for child in self.0.drain(..) {
            let _ = crate::os::sys::after_hand_off(child);
        }
    }
}
