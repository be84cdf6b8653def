//! A job's output pipe: a named pipe (FIFO), `pipes/<id>.output`, so
//! that the job outlives its supervisor.
//!
//! The job's stdout and stderr are the FIFO opened read-write. The job thus
//! holds a reader of its own output pipe: when its supervisor dies (SIGKILL,
//! the OOM killer), its writes never raise SIGPIPE or EPIPE; once the pipe is
//! full they block, as they would behind a slow reader. The supervisor reads
//! the FIFO through a read-only descriptor of its own; end of file still means
//! "every process of the job has closed its output", since a read-write
//! descriptor counts as a writer. Because the pipe has a name, the orphan
//! watcher (`run-bg __watch`) can reopen it after the supervisor is gone and
//! take up what waited in it, and what follows, into the job's log.
//!
//! What waits in the pipe lives only as long as some process holds it open:
//! if every process of an orphaned job ends before a watcher attaches, what
//! they wrote after the supervisor died goes with them.

use crate::store::config::LogsConfig;
use crate::model::job::ProcessIdentity;
use crate::store::logs::RotatingWriter;
use crate::store::pipes;
use rustix::event::{PollFd, PollFlags};
use rustix::fs::{FileType, Mode, OFlags};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The FIFO's name in `pipes::PIPES_DIR`, after the job's id and a dot.
const FIFO_NAME: &str = pipes::OUTPUT;

/// Where jobs started before the pipes had a directory keep their FIFO: still
/// looked for, so that a watcher can take up such a job's output.
const EARLIER_PATH: &str = "output.pipe";

/// Where a new job's FIFO is made.
pub fn fifo_path(job_dir: &Path) -> PathBuf {
    pipes::pipe_path(job_dir, FIFO_NAME)
}

/// The job's FIFO where it is: for a job started by an earlier version, its
/// old place (the new one when none exists).
fn existing_fifo_path(job_dir: &Path) -> PathBuf {
    pipes::existing_pipe(job_dir, FIFO_NAME, EARLIER_PATH)
}

/// What the pipe holds while nothing reads it: Linux's default
/// `/proc/sys/fs/pipe-max-size`. The pages are allocated only as output
/// waits in them, so an idle job costs no more than with the default 64 KiB.
const PIPE_BYTES: usize = 1 << 20;

/// Both ends of a new job's output pipe.
pub struct JobOutput {
    /// The supervisor's end: read-only and non-blocking.
    pub reader: OwnedFd,
    /// Becomes the job's stdout and stderr; also a reader of the pipe, so the
    /// job's writes never fail for want of one.
    pub child_end: OwnedFd,
    /// Why there is no FIFO, when the job's directory cannot hold one: the
    /// job then writes into an anonymous pipe, which no watcher can reopen
    /// (on Linux still read-write through /proc, so it never gets SIGPIPE).
    pub unnamed_because: Option<String>,
}

/// How a read from the output pipe went.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// This many bytes are at the start of the buffer.
    Data(usize),
    /// Nothing to read now; the writers are still there.
    Empty,
    /// Every writer has closed it (or it failed): nothing more will come.
    Closed,
}

/// Makes the FIFO in a new job's directory. The caller does it while the
/// supervisor process starts, so that on a busy disk the inode's creation
/// (up to a millisecond) is not one more step on the way to the job's start.
pub fn make(job_dir: &Path) -> std::io::Result<()> {
    pipes::make_pipes_dir(job_dir)?;
    crate::os::platform::make_fifo(&fifo_path(job_dir))
}

/// Opens the job's output pipe in `job_dir`, making it if the caller has
/// not. Call only while single-threaded before forking the job (the
/// descriptors are close-on-exec until `launch` installs the child's end as
/// its stdout and stderr).
pub fn create(job_dir: &Path) -> std::io::Result<JobOutput> {
    let path = fifo_path(job_dir);
    // Not blocking: no writer exists yet, and a blocking open would wait for one.
    let reader = match open(&path, OFlags::RDONLY | OFlags::NONBLOCK) {
        Ok(reader) => reader,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match make(job_dir) {
                Ok(()) => {}
                // The caller made it meanwhile: the two run side by side.
                Err(why) if why.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(why) => return anonymous(format!("cannot make {}: {why}", path.display())),
            }
            open(&path, OFlags::RDONLY | OFlags::NONBLOCK)?
        }
        Err(e) => return Err(e),
    };
    ensure_fifo(&reader, &path)?;
    let child_end = open(&path, OFlags::RDWR)?;
    enlarge(&reader);
    Ok(JobOutput { reader, child_end, unnamed_because: None })
}

/// Reopens the FIFO of a job whose supervisor is gone, for reading. `None`
/// when the job has none (it ended cleanly, or was started without one).
pub fn reopen(job_dir: &Path) -> std::io::Result<Option<OwnedFd>> {
    let path = existing_fifo_path(job_dir);
    let fd = match open(&path, OFlags::RDONLY | OFlags::NONBLOCK) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    ensure_fifo(&fd, &path)?;
    Ok(Some(fd))
}

/// Takes the job's pipe from our stdin, where the look that found the job
/// orphaned put it (see `reconcile` (`Context::start_watcher`)), leaving /dev/null in
/// its place. `None` unless stdin is that very FIFO (same device and inode).
pub fn take_inherited(job_dir: &Path) -> Option<OwnedFd> {
    let stdin = std::io::stdin();
    let ours = rustix::fs::fstat(stdin.as_fd()).ok()?;
    if FileType::from_raw_mode(ours.st_mode) != FileType::Fifo {
        return None;
    }
    let named = std::fs::symlink_metadata(existing_fifo_path(job_dir)).ok()?;
    if std::os::unix::fs::MetadataExt::dev(&named) != ours.st_dev as u64
        || std::os::unix::fs::MetadataExt::ino(&named) != ours.st_ino as u64
    {
        return None;
    }
    let fd = rustix::io::fcntl_dupfd_cloexec(stdin.as_fd(), 3).ok()?;
    // Else fd 0 keeps the pipe open too, which only delays the end of the
    // output the watcher waits for until the watcher exits.
    let nulled = std::fs::File::open("/dev/null").and_then(|null| Ok(rustix::stdio::dup2_stdin(&null)?));
    if let Err(e) = nulled {
        tracing::warn!("cannot point stdin at /dev/null after taking the job's pipe: {e}");
    }
    Some(fd)
}

/// Removes the FIFO once nothing of the job can write to it any more.
pub fn remove(job_dir: &Path) {
    pipes::remove_pipe(job_dir, FIFO_NAME, EARLIER_PATH);
}

/// One read from a non-blocking pipe into `buffer`.
pub fn read_once(fd: impl AsFd, buffer: &mut [u8]) -> Read {
    match rustix::io::read(fd, buffer) {
        Ok(0) => Read::Closed,
        Ok(n) => Read::Data(n),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Read::Empty,
        Err(_) => Read::Closed,
    }
}

fn open(path: &Path, flags: OFlags) -> std::io::Result<OwnedFd> {
    // The flags ask for no file creation, so the mode is not read.
    Ok(rustix::fs::open(path, flags | OFlags::CLOEXEC | OFlags::NOFOLLOW, Mode::empty())?)
}

/// Refuses anything but a FIFO under that name: a regular file there would
/// make a watcher pour it into the log, or a start (or `send`) write into it.
pub fn ensure_fifo(fd: &OwnedFd, path: &Path) -> std::io::Result<()> {
    if FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode) != FileType::Fifo {
        return Err(std::io::Error::other(format!("{} is not a named pipe", path.display())));
    }
    Ok(())
}

/// Best effort: a user over `/proc/sys/fs/pipe-user-pages-soft` (EPERM) or
/// a lowered `pipe-max-size` keeps the default size, which only costs
/// wake-ups; the pipe works the same.
pub(super) fn enlarge(fd: &OwnedFd) {
    if let Err(e) = crate::os::platform::set_pipe_size(fd.as_fd(), PIPE_BYTES) {
        tracing::debug!("the job's output pipe keeps its default size: {e}");
    }
}

/// The fallback where no FIFO can be made (a filesystem without them, no
/// inode left): an anonymous pipe. On Linux its write end is reopened
/// read-write through /proc, so the job still never gets SIGPIPE.
fn anonymous(why: String) -> std::io::Result<JobOutput> {
    let (reader, writer) = crate::os::launch::new_pipe(0)?;
    // Our own read end only: the job's end is another open file description
    // and stays blocking.
    rustix::fs::fcntl_setfl(&reader, rustix::fs::fcntl_getfl(&reader)? | OFlags::NONBLOCK)?;
    enlarge(&reader);
    // Failing that, the job gets the write-only end (and SIGPIPE if we die).
    let child_end = crate::os::platform::reopen_read_write(&writer).unwrap_or(writer);
    Ok(JobOutput { reader, child_end, unnamed_because: Some(why) })
}

/// The orphan watcher's hold on a job's output: what the job writes while
/// its supervisor is gone goes on into its rotating log.
pub struct Reattached {
    fd: Option<OwnedFd>,
    log_path: PathBuf,
    logs: LogsConfig,
    /// Opened at the first output, so that a job with nothing to say leaves its log alone.
    log: Option<RotatingWriter>,
    log_failed: bool,
    buffer: Vec<u8>,
}

impl Reattached {
    /// Takes `inherited` (see `take_inherited`), else reopens the FIFO;
    /// `None` when the job has none.
    pub fn open(job_dir: &Path, inherited: Option<OwnedFd>, log_path: &Path, logs: &LogsConfig) -> Option<Reattached> {
        let fd = match inherited {
            Some(fd) => fd,
            None => reopen(job_dir).ok()??,
        };
        Some(Reattached {
            fd: Some(fd),
            log_path: log_path.to_path_buf(),
            logs: logs.clone(),
            log: None,
            log_failed: false,
            buffer: vec![0u8; 256 * 1024],
        })
    }

    /// Whether output may still come.
    pub fn is_open(&self) -> bool {
        self.fd.is_some()
    }

    /// Logs what the pipe holds now, without waiting. A pipe holds at most
    /// a mebibyte, read in milliseconds; the bound only stops a writer that
    /// is not the job's (it left the job's group and cookie) from holding the
    /// watcher here for ever.
    pub fn drain(&mut self) {
        self.drain_until(Instant::now() + Duration::from_secs(2));
    }

    /// Reads until the pipe is empty or closed, or `deadline` passes while
    /// the job writes as fast as we read.
    fn drain_until(&mut self, deadline: Instant) {
        while let Some(fd) = &self.fd {
            match read_once(fd, &mut self.buffer) {
                Read::Data(n) => self.write(n),
                Read::Empty => return,
                Read::Closed => self.fd = None,
            }
            if Instant::now() >= deadline {
                return;
            }
        }
    }

    /// Logs the output as it comes for up to `limit`; returns early once the
    /// output has ended, or `main` (when given) has exited.
    pub fn pump(&mut self, main: Option<&ProcessIdentity>, limit: Duration) {
        let deadline = Instant::now() + limit;
        let exit = main.and_then(pidfd);
        loop {
            self.drain_until(deadline);
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(fd) = &self.fd else { return };
            if left.is_zero() {
                return;
            }
            let mut fds = vec![PollFd::new(fd, PollFlags::IN)];
            if let Some(exit) = &exit {
                fds.push(PollFd::new(exit, PollFlags::IN));
            }
            let timeout = rustix::event::Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as _ };
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => std::thread::sleep(left.min(Duration::from_millis(100))),
            }
            let exited = fds.get(1).is_some_and(|exited| !exited.revents().is_empty());
            drop(fds);
            if exited {
                self.drain_until(deadline);
                return;
            }
        }
    }

    fn write(&mut self, n: usize) {
        if self.log.is_none() && !self.log_failed {
            match RotatingWriter::resume(&self.log_path, self.logs.max_bytes, self.logs.keep) {
                Ok(log) => self.log = Some(log),
                Err(e) => self.fail(&e.to_string()),
            }
        }
        // Output that cannot be logged is still taken from the pipe, so the job never blocks on it.
        if let Some(log) = &mut self.log {
            if let Err(e) = log.write_all(&self.buffer[..n]) {
                self.log = None;
                self.fail(&e.to_string());
            }
        }
    }

    fn fail(&mut self, message: &str) {
        if !self.log_failed {
            self.log_failed = true;
            tracing::warn!("run-bg watcher: cannot log the orphaned job's output: {message}");
        }
    }
}

/// A descriptor that becomes readable when `who` exits, if it still runs.
fn pidfd(who: &ProcessIdentity) -> Option<OwnedFd> {
    let fd = crate::os::pidfd::open(who.pid)?;
    // Checked after opening: the pidfd then cannot refer to a process that reused the pid.
    crate::os::procinfo::is_same_process_alive(who).then_some(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pipes::{existing_pipe, make_pipes_dir, pipe_path, remove_pipe, shared_dir, PIPES_DIR};
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    fn write(fd: &OwnedFd, data: &[u8]) -> isize {
        rustix::io::write(fd, data).map_or(-1, |n| n as isize)
    }

    fn read_all(fd: &OwnedFd) -> Vec<u8> {
        let mut buffer = vec![0u8; 4096];
        let mut got = Vec::new();
        while let Read::Data(n) = read_once(fd, &mut buffer) {
            got.extend_from_slice(&buffer[..n]);
        }
        got
    }

    /// `<home>/jobs/<id>` in a new temporary home, as a job's directory is.
    struct JobDir(tempfile::TempDir, PathBuf);

    impl JobDir {
        fn new() -> JobDir {
            let home = tempfile::tempdir().unwrap();
            let dir = home.path().join("jobs").join("job-1");
            std::fs::create_dir_all(&dir).unwrap();
            JobDir(home, dir)
        }
        fn path(&self) -> &Path {
            &self.1
        }
        fn home(&self) -> &Path {
            self.0.path()
        }
    }

    #[test]
    fn the_pipes_of_every_job_share_one_directory_beside_jobs() {
        let dir = JobDir::new();
        make(dir.path()).unwrap();
        stdin_like(dir.path());
        assert_eq!(fifo_path(dir.path()), dir.home().join("pipes").join("job-1.output"));
        assert!(std::fs::symlink_metadata(dir.home().join("pipes/job-1.output")).unwrap().file_type().is_fifo());
        assert!(!dir.path().join(PIPES_DIR).exists(), "no directory of the job's own");
        let mode = std::fs::metadata(dir.home().join("pipes")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        remove(dir.path());
        remove_pipe(dir.path(), "stdin", "stdin.pipe");
        assert!(dir.home().join("pipes").is_dir(), "the shared directory stays: removing it would free its block");
        assert_eq!(std::fs::read_dir(dir.home().join("pipes")).unwrap().count(), 0, "the job's pipes are gone");
    }

    fn stdin_like(job_dir: &Path) {
        crate::os::platform::make_fifo(&pipe_path(job_dir, "stdin")).unwrap();
    }

    #[test]
    fn the_pipes_of_a_job_started_by_the_previous_version_are_found_and_removed_with_their_directory() {
        let dir = JobDir::new();
        std::fs::create_dir(dir.path().join(PIPES_DIR)).unwrap();
        let old = dir.path().join(PIPES_DIR).join(FIFO_NAME);
        crate::os::platform::make_fifo(&old).unwrap();
        crate::os::platform::make_fifo(&dir.path().join(PIPES_DIR).join("stdin")).unwrap();
        let writer = open(&old, OFlags::RDWR).unwrap();
        assert_eq!(write(&writer, b"before the upgrade\n"), 19);
        let reopened = reopen(dir.path()).unwrap().expect("the FIFO in the previous version's place");
        assert_eq!(read_all(&reopened), b"before the upgrade\n");
        assert_eq!(existing_pipe(dir.path(), "stdin", "stdin.pipe"), dir.path().join("pipes/stdin"));
        remove(dir.path());
        assert!(!old.exists());
        assert!(dir.path().join(PIPES_DIR).is_dir(), "kept while the stdin pipe is in it");
        remove_pipe(dir.path(), "stdin", "stdin.pipe");
        assert!(!dir.path().join(PIPES_DIR).exists(), "the previous version's directory goes with its last pipe");
    }

    #[test]
    fn the_fifo_is_private_and_the_jobs_end_never_loses_its_reader() {
        let dir = JobDir::new();
        let output = create(dir.path()).unwrap();
        assert_eq!(output.unnamed_because, None);
        let meta = std::fs::symlink_metadata(fifo_path(dir.path())).unwrap();
        assert!(meta.file_type().is_fifo());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(write(&output.child_end, b"before\n"), 7);
        assert_eq!(read_all(&output.reader), b"before\n");
        // The supervisor dies: its read end is gone. The job's next write must
        // neither fail with EPIPE (nor, with its default disposition, raise SIGPIPE).
        drop(output.reader);
        assert_eq!(write(&output.child_end, b"orphaned\n"), 9, "{}", std::io::Error::last_os_error());
        // A watcher reopens it by name and finds what waited there.
        let reopened = reopen(dir.path()).unwrap().unwrap();
        assert_eq!(read_all(&reopened), b"orphaned\n");
        assert_eq!(read_once(&reopened, &mut [0u8; 16]), Read::Empty, "the job still holds it");
        drop(output.child_end);
        assert_eq!(read_once(&reopened, &mut [0u8; 16]), Read::Closed, "every writer is gone");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_pipe_holds_a_mebibyte_while_nothing_reads_it() {
        let dir = JobDir::new();
        let output = create(dir.path()).unwrap();
        let size = rustix::pipe::fcntl_getpipe_size(&output.reader).unwrap();
        let max: usize = std::fs::read_to_string("/proc/sys/fs/pipe-max-size").unwrap().trim().parse().unwrap();
        assert_eq!(size, PIPE_BYTES.min(max));
    }

    #[test]
    fn a_fifo_made_beforehand_is_used_and_anything_else_under_its_name_refused() {
        let dir = JobDir::new();
        make(dir.path()).unwrap();
        let output = create(dir.path()).unwrap();
        assert_eq!(output.unnamed_because, None);
        assert_eq!(write(&output.child_end, b"made before\n"), 12);
        assert_eq!(read_all(&output.reader), b"made before\n");
        let other = JobDir::new();
        make_pipes_dir(other.path()).unwrap();
        std::fs::write(fifo_path(other.path()), b"planted").unwrap();
        let refused = create(other.path()).err().expect("a regular file is not used as the pipe");
        assert!(refused.to_string().ends_with("is not a named pipe"), "{refused}");
        assert_eq!(std::fs::read(fifo_path(other.path())).unwrap(), b"planted");
    }

    #[test]
    fn the_fifo_of_a_job_started_by_an_earlier_version_is_still_taken_up() {
        let dir = JobDir::new();
        crate::os::platform::make_fifo(&dir.path().join(EARLIER_PATH)).unwrap();
        let writer = open(&dir.path().join(EARLIER_PATH), OFlags::RDWR).unwrap();
        assert_eq!(write(&writer, b"written before the upgrade\n"), 27);
        let reopened = reopen(dir.path()).unwrap().expect("the FIFO in its earlier place");
        assert_eq!(read_all(&reopened), b"written before the upgrade\n");
        remove(dir.path());
        assert!(!dir.path().join(EARLIER_PATH).exists());
    }

    #[test]
    fn a_link_in_place_of_the_pipes_directory_is_refused() {
        let dir = JobDir::new();
        let elsewhere = tempfile::TempDir::new().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), shared_dir(dir.path())).unwrap();
        let refused = make(dir.path()).unwrap_err();
        assert!(refused.to_string().ends_with("is not a directory"), "{refused}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0, "nothing made through the link");
    }

    #[test]
    fn only_a_fifo_is_reopened() {
        let dir = JobDir::new();
        assert!(reopen(dir.path()).unwrap().is_none(), "no FIFO: nothing to reopen");
        make_pipes_dir(dir.path()).unwrap();
        std::fs::write(fifo_path(dir.path()), b"planted").unwrap();
        let refused = reopen(dir.path()).unwrap_err();
        assert!(refused.to_string().ends_with("is not a named pipe"), "{refused}");
        std::fs::remove_file(fifo_path(dir.path())).unwrap();
        std::os::unix::fs::symlink("/dev/zero", fifo_path(dir.path())).unwrap();
        assert_eq!(reopen(dir.path()).unwrap_err().raw_os_error(), Some(libc::ELOOP), "a symlink is not followed");
    }

    #[test]
    fn where_no_fifo_can_be_made_an_anonymous_pipe_still_spares_the_job_sigpipe() {
        let dir = JobDir::new();
        let output = create(&dir.home().join("gone/jobs/job-1")).unwrap();
        let why = output.unnamed_because.as_deref().unwrap_or_default();
        assert!(why.starts_with("cannot make ") && why.ends_with("No such file or directory (os error 2)"), "{why}");
        assert_eq!(write(&output.child_end, b"read\n"), 5);
        assert_eq!(read_all(&output.reader), b"read\n");
        drop(output.reader);
        assert_eq!(write(&output.child_end, b"x"), 1, "{}", std::io::Error::last_os_error());
    }

    #[test]
    fn a_reattached_watcher_appends_to_the_log_and_stops_at_the_end_of_the_output() {
        let dir = JobDir::new();
        let log_path = dir.path().join("output.log");
        std::fs::write(&log_path, b"from the supervisor\n").unwrap();
        let output = create(dir.path()).unwrap();
        drop(output.reader);
        assert_eq!(write(&output.child_end, b"waited in the pipe\n"), 19);
        let logs = LogsConfig { max_bytes: 1 << 20, keep: 1 };
        let mut watcher = Reattached::open(dir.path(), None, &log_path, &logs).unwrap();
        watcher.drain();
        assert_eq!(write(&output.child_end, b"came later\n"), 11);
        drop(output.child_end);
        watcher.pump(None, Duration::from_secs(10));
        assert!(!watcher.is_open());
        drop(watcher);
        assert_eq!(std::fs::read_to_string(&log_path).unwrap(), "from the supervisor\nwaited in the pipe\ncame later\n");
    }
}
