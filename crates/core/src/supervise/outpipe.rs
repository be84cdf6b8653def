//! A job's output pipe: a named pipe (FIFO) in the job's directory, so that
//! the job outlives its supervisor.
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
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The FIFO's name in the job's directory.
pub const FIFO_NAME: &str = "output.pipe";

/// What the pipe holds while nothing reads it: Linux's default
/// `/proc/sys/fs/pipe-max-size`. The pages are allocated only as output
/// waits in them, so an idle job costs no more than with the default 64 KiB.
#[cfg(target_os = "linux")]
const PIPE_BYTES: libc::c_int = 1 << 20;

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
    let name = c_path(&job_dir.join(FIFO_NAME))?;
    // SAFETY: `name` is a NUL-terminated path that lives across the call.
    if unsafe { libc::mkfifo(name.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Opens the job's output pipe in `job_dir`, making it if the caller has
/// not. Call only while single-threaded before forking the job (the
/// descriptors are close-on-exec until `launch` installs the child's end as
/// its stdout and stderr).
pub fn create(job_dir: &Path) -> std::io::Result<JobOutput> {
    let path = job_dir.join(FIFO_NAME);
    let name = c_path(&path)?;
    // Not blocking: no writer exists yet, and a blocking open would wait for one.
    let reader = match open(&name, libc::O_RDONLY | libc::O_NONBLOCK) {
        Ok(reader) => reader,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Err(why) = make(job_dir) {
                return anonymous(format!("cannot make {}: {why}", path.display()));
            }
            open(&name, libc::O_RDONLY | libc::O_NONBLOCK)?
        }
        Err(e) => return Err(e),
    };
    ensure_fifo(&reader, &path)?;
    let child_end = open(&name, libc::O_RDWR)?;
    enlarge(&reader);
    Ok(JobOutput { reader, child_end, unnamed_because: None })
}

/// Reopens the FIFO of a job whose supervisor is gone, for reading. `None`
/// when the job has none (it ended cleanly, or was started without one).
pub fn reopen(job_dir: &Path) -> std::io::Result<Option<OwnedFd>> {
    let path = job_dir.join(FIFO_NAME);
    let fd = match open(&c_path(&path)?, libc::O_RDONLY | libc::O_NONBLOCK) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    ensure_fifo(&fd, &path)?;
    Ok(Some(fd))
}

/// Takes the job's pipe from our stdin, where the look that found the job
/// orphaned put it (see `ops::Context::start_watcher`), leaving /dev/null in
/// its place. `None` unless stdin is that very FIFO (same device and inode).
pub fn take_inherited(job_dir: &Path) -> Option<OwnedFd> {
    // SAFETY: an all-zero `stat` is a valid value for fstat to fill in.
    let mut ours: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd 0 is only inspected; `ours` is a valid, writable struct.
    if unsafe { libc::fstat(0, &mut ours) } != 0 || ours.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    let named = std::fs::symlink_metadata(job_dir.join(FIFO_NAME)).ok()?;
    if std::os::unix::fs::MetadataExt::dev(&named) != ours.st_dev as u64
        || std::os::unix::fs::MetadataExt::ino(&named) != ours.st_ino as u64
    {
        return None;
    }
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor for the same pipe, or fails with -1.
    let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just made by fcntl and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: /dev/null is opened read-only and dup2'd over fd 0; the temporary is closed.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::close(null);
        }
    }
    Some(fd)
}

/// Removes the FIFO once nothing of the job can write to it any more.
pub fn remove(job_dir: &Path) {
    let _ = std::fs::remove_file(job_dir.join(FIFO_NAME));
}

/// One read from a non-blocking pipe into `buffer`.
pub fn read_once(fd: RawFd, buffer: &mut [u8]) -> Read {
    // SAFETY: `buffer` is valid for writes of its length for the whole call.
    let n = unsafe { libc::read(fd, buffer.as_mut_ptr() as *mut libc::c_void, buffer.len()) };
    if n > 0 {
        return Read::Data(n as usize);
    }
    if n == 0 {
        return Read::Closed;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Read::Empty,
        _ => Read::Closed,
    }
}

/// A pipe of the supervisor's own that the job's output passes through on
/// its way into the log by `splice(2)`. Splicing the job's pipe straight
/// into the file would hold that pipe's lock for the whole copy into the
/// page cache, and the job's writes would wait on it: the job and the
/// supervisor then take turns instead of running side by side (1 GiB of
/// `/dev/zero` took 1.7× as long as through `cat`). A splice from pipe to
/// pipe copies nothing (it hands over page references) and holds the job's
/// pipe only for that; the copy into the log then holds only this one.
#[cfg(target_os = "linux")]
pub struct Stage {
    read: OwnedFd,
    write: OwnedFd,
    /// What one move can take: what the pipe holds.
    capacity: usize,
}

#[cfg(target_os = "linux")]
impl Stage {
    /// Empty, as large as a job's pipe (else the default 64 KiB: more moves).
    pub fn new() -> std::io::Result<Stage> {
        let (read, write) = crate::os::launch::new_pipe(libc::O_NONBLOCK)?;
        enlarge(&read);
        // SAFETY: F_GETPIPE_SZ only reads the pipe's capacity.
        let capacity = unsafe { libc::fcntl(read.as_raw_fd(), libc::F_GETPIPE_SZ) };
        if capacity <= 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Stage { read, write, capacity: capacity as usize })
    }

    /// Moves up to `len` bytes (at most what the stage holds) from the job's
    /// `pipe` into the stage, which must be empty, without waiting: `Data(n)`
    /// is what the stage now holds. An error means nothing was moved.
    pub fn take(&self, pipe: std::os::fd::BorrowedFd<'_>, len: usize) -> std::io::Result<Read> {
        let len = len.min(self.capacity);
        // SAFETY: both descriptors are open for the call (`pipe` is borrowed,
        // the stage's end is ours); pipes take no offsets, so none is passed.
        let n = unsafe {
            libc::splice(
                pipe.as_raw_fd(),
                std::ptr::null_mut(),
                self.write.as_raw_fd(),
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        match n {
            0 => Ok(Read::Closed),
            n if n > 0 => Ok(Read::Data(n as usize)),
            _ => {
                let error = std::io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(Read::Empty),
                    _ => Err(error),
                }
            }
        }
    }

    /// The end the staged bytes leave by.
    pub fn output(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.read)
    }
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn open(name: &CString, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; the flags ask for no file creation, so no mode is read.
    let fd = unsafe { libc::open(name.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Refuses anything but a FIFO under that name: a regular file there would
/// make a watcher pour it into the log, or a start write into it.
fn ensure_fifo(fd: &OwnedFd, path: &Path) -> std::io::Result<()> {
    // SAFETY: an all-zero `stat` is a valid value for fstat to fill in.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `stat` is a valid, writable struct.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if stat.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return Err(std::io::Error::other(format!("{} is not a named pipe", path.display())));
    }
    Ok(())
}

/// Best effort: a user over `/proc/sys/fs/pipe-user-pages-soft` keeps the default size.
fn enlarge(_fd: &OwnedFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: F_SETPIPE_SZ takes an int and changes nothing but the pipe's capacity.
    unsafe {
        libc::fcntl(_fd.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES);
    }
}

/// The fallback where no FIFO can be made (a filesystem without them, no
/// inode left): an anonymous pipe. On Linux its write end is reopened
/// read-write through /proc, so the job still never gets SIGPIPE.
fn anonymous(why: String) -> std::io::Result<JobOutput> {
    let (reader, writer) = crate::os::launch::new_pipe(0)?;
    // SAFETY: file status flags of our own read end only; the job's end is
    // another open file description and stays blocking.
    let flags = unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    enlarge(&reader);
    #[cfg(target_os = "linux")]
    let child_end = {
        // Not `open`: O_NOFOLLOW refuses /proc's fd links, which must be followed here.
        let name = format!("/proc/self/fd/{}\0", writer.as_raw_fd());
        // SAFETY: `name` is NUL-terminated and lives across the call; no file is created.
        let fd = unsafe { libc::open(name.as_ptr() as *const libc::c_char, libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            writer
        } else {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            unsafe { OwnedFd::from_raw_fd(fd) }
        }
    };
    #[cfg(not(target_os = "linux"))]
    let child_end = writer;
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
            match read_once(fd.as_raw_fd(), &mut self.buffer) {
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
            let watch = |fd: RawFd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            let mut fds = [watch(fd.as_raw_fd()), watch(exit.as_ref().map_or(-1, |f| f.as_raw_fd()))];
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: `fds` is a valid array of two pollfds; poll ignores negative fds.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
            if ready < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
            if fds[1].revents != 0 {
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
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    fn write(fd: &OwnedFd, data: &[u8]) -> isize {
        // SAFETY: `data` is valid for reads of its length.
        unsafe { libc::write(fd.as_raw_fd(), data.as_ptr() as *const libc::c_void, data.len()) }
    }

    fn read_all(fd: &OwnedFd) -> Vec<u8> {
        let mut buffer = vec![0u8; 4096];
        let mut got = Vec::new();
        while let Read::Data(n) = read_once(fd.as_raw_fd(), &mut buffer) {
            got.extend_from_slice(&buffer[..n]);
        }
        got
    }

    #[test]
    fn the_fifo_is_private_and_the_jobs_end_never_loses_its_reader() {
        let dir = tempfile::tempdir().unwrap();
        let output = create(dir.path()).unwrap();
        assert_eq!(output.unnamed_because, None);
        let meta = std::fs::symlink_metadata(dir.path().join(FIFO_NAME)).unwrap();
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
        assert_eq!(read_once(reopened.as_raw_fd(), &mut [0u8; 16]), Read::Empty, "the job still holds it");
        drop(output.child_end);
        assert_eq!(read_once(reopened.as_raw_fd(), &mut [0u8; 16]), Read::Closed, "every writer is gone");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_pipe_holds_a_mebibyte_while_nothing_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let output = create(dir.path()).unwrap();
        // SAFETY: F_GETPIPE_SZ only reads the capacity.
        let size = unsafe { libc::fcntl(output.reader.as_raw_fd(), libc::F_GETPIPE_SZ) };
        let max: i32 = std::fs::read_to_string("/proc/sys/fs/pipe-max-size").unwrap().trim().parse().unwrap();
        assert_eq!(size, PIPE_BYTES.min(max));
    }

    #[test]
    fn a_fifo_made_beforehand_is_used_and_anything_else_under_its_name_refused() {
        let dir = tempfile::tempdir().unwrap();
        make(dir.path()).unwrap();
        let output = create(dir.path()).unwrap();
        assert_eq!(output.unnamed_because, None);
        assert_eq!(write(&output.child_end, b"made before\n"), 12);
        assert_eq!(read_all(&output.reader), b"made before\n");
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join(FIFO_NAME), b"planted").unwrap();
        let refused = create(other.path()).err().expect("a regular file is not used as the pipe");
        assert!(refused.to_string().ends_with("is not a named pipe"), "{refused}");
        assert_eq!(std::fs::read(other.path().join(FIFO_NAME)).unwrap(), b"planted");
    }

    #[test]
    fn only_a_fifo_is_reopened() {
        let dir = tempfile::tempdir().unwrap();
        assert!(reopen(dir.path()).unwrap().is_none(), "no FIFO: nothing to reopen");
        std::fs::write(dir.path().join(FIFO_NAME), b"planted").unwrap();
        let refused = reopen(dir.path()).unwrap_err();
        assert!(refused.to_string().ends_with("is not a named pipe"), "{refused}");
        std::fs::remove_file(dir.path().join(FIFO_NAME)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(FIFO_NAME)).unwrap();
        assert_eq!(reopen(dir.path()).unwrap_err().raw_os_error(), Some(libc::ELOOP), "a symlink is not followed");
    }

    #[test]
    fn where_no_fifo_can_be_made_an_anonymous_pipe_still_spares_the_job_sigpipe() {
        let dir = tempfile::tempdir().unwrap();
        let output = create(&dir.path().join("gone")).unwrap();
        let why = output.unnamed_because.as_deref().unwrap_or_default();
        assert!(why.starts_with("cannot make ") && why.ends_with("No such file or directory (os error 2)"), "{why}");
        assert_eq!(write(&output.child_end, b"read\n"), 5);
        assert_eq!(read_all(&output.reader), b"read\n");
        drop(output.reader);
        assert_eq!(write(&output.child_end, b"x"), 1, "{}", std::io::Error::last_os_error());
    }

    #[test]
    fn a_reattached_watcher_appends_to_the_log_and_stops_at_the_end_of_the_output() {
        let dir = tempfile::tempdir().unwrap();
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
