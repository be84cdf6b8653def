//! `--stdin pipe`: the job's stdin is a named pipe, `pipes/<id>.stdin`
//! (beside the output's, see `store::pipes`), that `run-bg send` /
//! `sendInput` open and write.
//!
//! The supervisor holds a write end for as long as the job runs, so the job
//! never reads end-of-file between two sends (a REPL would exit); `send
//! --eof` asks the supervisor to let go of it (a request file beside the job
//! and SIGUSR1, as `kill` does), and the job then reads EOF once no `send`
//! has it open either.

use rustix::fs::{Mode, OFlags};
use std::os::fd::OwnedFd;
use crate::store::pipes;
use std::path::{Path, PathBuf};

/// The FIFO's name in `pipes::PIPES_DIR`, after the job's id and a dot.
const FIFO_NAME: &str = pipes::STDIN;

/// Where jobs started before the pipes had a directory keep it.
const EARLIER_PATH: &str = "stdin.pipe";

/// The job's stdin pipe where it is: for a job started by an earlier
/// version, its old place (the new one when neither exists).
pub fn fifo_path(job_dir: &Path) -> PathBuf {
    pipes::existing_pipe(job_dir, FIFO_NAME, EARLIER_PATH)
}


/// Left beside the job by `send --eof` before it sends SIGUSR1.
pub const CLOSE_REQUEST: &str = "stdin-close";

/// Left beside the job by a `send --eof` its supervisor was rung for: later
/// sends are refused at once (the job's own processes may still hold the
/// pipe, and a write into it went nowhere, or waited for a reader that had
/// read its end-of-file).
pub const CLOSED_MARK: &str = "stdin-closed";

/// The two ends of a job's stdin pipe the supervisor opens.
pub struct JobStdin {
    /// The job's stdin: read-only and blocking, as a terminal's is.
    pub child_end: OwnedFd,
    /// Ours: while it is open the job never reads end-of-file.
    pub writer: OwnedFd,
}

/// Makes the FIFO (mode 0600) and opens both ends; close-on-exec until the
/// launch installs the child's end as its stdin.
pub fn create(job_dir: &Path) -> std::io::Result<JobStdin> {
    pipes::make_pipes_dir(job_dir)?;
    let path = pipes::pipe_path(job_dir, FIFO_NAME);
    crate::os::platform::make_fifo(&path)?;
    let open = |flags: OFlags| rustix::fs::open(&path, flags | OFlags::CLOEXEC | OFlags::NOFOLLOW, Mode::empty());
    // Non-blocking: an open for reading would otherwise wait for a writer.
    let child_end = open(OFlags::RDONLY | OFlags::NONBLOCK)?;
    let writer = open(OFlags::WRONLY | OFlags::NONBLOCK)?;
    // The flag belongs to the open file, which the job shares: a job's read
    // must wait for input, not fail with EAGAIN.
    rustix::fs::fcntl_setfl(&child_end, OFlags::empty())?;
    Ok(JobStdin { child_end, writer })
}

/// Removes the FIFO and any request left for it, once the job has ended.
pub fn remove(job_dir: &Path) {
    pipes::remove_pipe(job_dir, FIFO_NAME, EARLIER_PATH);
    let _ = std::fs::remove_file(job_dir.join(CLOSE_REQUEST));
    let _ = std::fs::remove_file(job_dir.join(CLOSED_MARK));
}
