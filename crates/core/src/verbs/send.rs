//! `run-bg send <id> <text>` / `sendInput(id, text)`: writes to the stdin of
//! a job started with `--stdin pipe`: its FIFO on Unix (see
//! supervise/stdin.rs), the named pipe its supervisor serves on Windows
//! (os/stdin_pipe_windows.rs). The checks and the answers are the same.

use crate::model::job::{Job, JobStatus};
use crate::verbs::context::Context;
use crate::{Error, Result};
#[cfg(unix)]
use crate::{
    os::procinfo::{self, SignalOutcome},
    os::tree,
    supervise::stdin,
};
#[cfg(unix)]
use rustix::event::{PollFd, PollFlags};
#[cfg(unix)]
use rustix::fs::{Mode, OFlags};
use std::time::Duration;
#[cfg(unix)]
use std::time::Instant;

/// How long a write may wait for a job that does not read its stdin (the
/// pipe holds 64 KiB): past it the send fails, saying how much went in.
pub const SEND_PATIENCE: Duration = Duration::from_secs(5);

/// The most one send takes: more is a file to pass some other way.
pub const MAX_SEND_BYTES: usize = 1024 * 1024;

/// What a send did.
#[derive(Debug, Clone)]
pub struct Sent {
    pub job_id: String,
    /// Bytes written to the job's stdin (the newline included).
    pub bytes: usize,
    /// Whether the supervisor was asked to close the job's stdin.
    pub closed: bool,
}

impl Context {
    /// Writes `data` to the job's stdin; then, with `eof`, has its supervisor
    /// let go of the pipe, so the job reads end-of-file once the input is read.
    pub fn send_input(&self, id: &str, data: &[u8], eof: bool) -> Result<Sent> {
        let job = self.job(id)?;
        if !job.stdin_pipe {
            return Err(Error::Usage(format!(
                "{} was not started with `--stdin pipe` (JS: `stdin: 'pipe'`): its stdin is /dev/null, so nothing can be sent to it",
                job.id
            )));
        }
        if data.len() > MAX_SEND_BYTES {
            return Err(Error::Usage(format!(
                "too much input for one send ({} bytes); at most {MAX_SEND_BYTES} bytes (1 MiB)",
                data.len()
            )));
        }
        if job.status().is_final() || job.status() == JobStatus::Orphaned {
            return Err(match job.status() {
                JobStatus::Orphaned => Error::Other(format!("{} is orphaned (its supervisor is gone): its stdin pipe is closed", job.id)),
                _ => ended(&job),
            });
        }
        if job.status() == JobStatus::Queued {
            // Its supervisor, which makes the pipe, does not exist yet.
            return Err(Error::Other(format!(
                "{} is queued: it has not started yet, so nothing reads its stdin; send once it runs (run-bg check {})",
                job.id, job.id
            )));
        }
        self.deliver(&job, data, eof)?;
        Ok(Sent { job_id: job.id, bytes: data.len(), closed: eof })
    }

    /// Writes into the job's FIFO, then asks its supervisor to let go of it.
    #[cfg(unix)]
    fn deliver(&self, job: &Job, data: &[u8], eof: bool) -> Result<()> {
        // Windows's supervisor says so itself (`SendRefused::Closed`).
        if self.home.job_dir(&job.id).join(stdin::CLOSED_MARK).exists() {
            return Err(Error::Other(format!(
                "{}: its stdin was closed by an earlier `send --eof`; nothing more can be sent to it",
                job.id
            )));
        }
        let path = stdin::fifo_path(&self.home.job_dir(&job.id));
        if !data.is_empty() {
            // Non-blocking: an open with no reader fails (ENXIO) instead of waiting.
            let fd = match rustix::fs::open(&path, OFlags::WRONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOFOLLOW, Mode::empty()) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NXIO) => return Err(ended(job)),
                Err(e) => return Err(Error::io("open the stdin pipe", path, e.into())),
            };
            crate::supervise::outpipe::ensure_fifo(&fd, &path).map_err(|e| Error::Other(format!("{e}; not writing to it")))?;
            crate::os::launch::without_sigpipe(|| write_all(&fd, data)).map_err(|(written, why)| {
                Error::Other(format!("{}: {written} of {} bytes sent to its stdin: {why}", job.id, data.len()))
            })?;
        }
        if eof {
            self.close_stdin(job)?;
        }
        Ok(())
    }

    /// Hands the bytes (and the close) to the supervisor serving the job's stdin.
    #[cfg(windows)]
    fn deliver(&self, job: &Job, data: &[u8], eof: bool) -> Result<()> {
        use crate::os::stdin_pipe_windows::{send, SendRefused};
        if data.is_empty() && !eof {
            return Ok(());
        }
        send(&self.home.root, &job.id, data, eof, SEND_PATIENCE).map_err(|refused| match refused {
            SendRefused::NoReader => ended(job),
            SendRefused::Full { written } => Error::Other(format!(
                "{}: {written} of {} bytes sent to its stdin: the job did not read its stdin for {}s (the pipe is full)",
                job.id,
                data.len(),
                SEND_PATIENCE.as_secs()
            )),
            SendRefused::Closed => Error::Other(format!("{}: its stdin was closed by an earlier `send --eof`; nothing more can be sent to it", job.id)),
            SendRefused::Failed { written, why } => Error::Other(format!("{}: {written} of {} bytes sent to its stdin: {why}", job.id, data.len())),
        })
    }

    #[cfg(unix)]
    fn close_stdin(&self, job: &Job) -> Result<()> {
        let Some(supervisor) = tree::live_supervisor(job) else {
            return Err(Error::Other(format!("{} has no live supervisor to close its stdin", job.id)));
        };
        let request = self.home.job_dir(&job.id).join(stdin::CLOSE_REQUEST);
        crate::store::registry::write_json_file(&request, &true, false)?;
        match procinfo::signal_process(&supervisor, crate::model::signals::SIGUSR1) {
            SignalOutcome::Sent => {
                let _ = crate::store::registry::write_json_file(&self.home.job_dir(&job.id).join(stdin::CLOSED_MARK), &true, false);
                Ok(())
            }
            SignalOutcome::Gone | SignalOutcome::Replaced => {
                let _ = std::fs::remove_file(&request);
                Err(Error::Other(format!("{} has ended; its stdin is closed", job.id)))
            }
            SignalOutcome::Failed(why) => {
                let _ = std::fs::remove_file(&request);
                Err(Error::Other(format!("cannot ask the supervisor of {} (pid {}) to close its stdin: {why}", job.id, supervisor.pid)))
            }
        }
    }
}

fn ended(job: &Job) -> Error {
    Error::Other(format!("{} has ended ({}); nothing reads its stdin any more", job.id, job.status()))
}

/// Writes everything, waiting while the pipe is full, at most
/// `SEND_PATIENCE` in all; on failure, how much went in and why.
#[cfg(unix)]
fn write_all(fd: &std::os::fd::OwnedFd, mut data: &[u8]) -> std::result::Result<(), (usize, String)> {
    let total = data.len();
    let deadline = Instant::now() + SEND_PATIENCE;
    while !data.is_empty() {
        match rustix::io::write(fd, data) {
            Ok(n) => data = &data[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err((
                        total - data.len(),
                        format!("the job did not read its stdin for {}s (the pipe is full)", SEND_PATIENCE.as_secs()),
                    ));
                }
                let mut fds = [PollFd::new(fd, PollFlags::OUT)];
                let wait = rustix::event::Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as _ };
                let _ = rustix::event::poll(&mut fds, Some(&wait));
            }
            Err(rustix::io::Errno::PIPE) => return Err((total - data.len(), "the job closed its stdin".into())),
            Err(e) => return Err((total - data.len(), e.to_string())),
        }
    }
    Ok(())
}
