//! The output copy: what the job writes goes from its pipe into its log by
//! `splice(2)` inside the kernel where it can (through a stage pipe of the
//! supervisor's own), else by read and write.

use crate::store::logs::RotatingWriter;
use crate::supervise::outpipe;
use crate::Error;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A pipe of the supervisor's own that the job's output passes through on
/// its way into the log by `splice(2)`. Splicing the job's pipe straight
/// into the file would hold that pipe's lock for the whole copy into the
/// page cache, and the job's writes would wait on it: the job and the
/// supervisor then take turns instead of running side by side (1 GiB of
/// `/dev/zero` took 1.7× as long as through `cat`). A splice from pipe to
/// pipe copies nothing (it hands over page references) and holds the job's
/// pipe only for that; the copy into the log then holds only this one.
pub(super) struct Stage {
    read: OwnedFd,
    write: OwnedFd,
    /// What one move can take: what the pipe holds.
    capacity: usize,
}

impl Stage {
    /// Empty, as large as a job's pipe (else the default 64 KiB: more moves).
    pub fn new() -> std::io::Result<Stage> {
        let (read, write) = crate::os::launch::new_pipe(libc::O_NONBLOCK)?;
        outpipe::enlarge(&read);
        let capacity = crate::os::platform::pipe_size(read.as_fd())?;
        Ok(Stage { read, write, capacity })
    }

    /// Moves up to `len` bytes (at most what the stage holds) from the job's
    /// `pipe` into the stage, which must be empty, without waiting: `Data(n)`
    /// is what the stage now holds. An error means nothing was moved.
    pub fn take(&self, pipe: std::os::fd::BorrowedFd<'_>, len: usize) -> std::io::Result<outpipe::Read> {
        let len = len.min(self.capacity);
        match crate::os::platform::splice_pipes(pipe, self.write.as_fd(), len) {
            Ok(0) => Ok(outpipe::Read::Closed),
            Ok(n) => Ok(outpipe::Read::Data(n)),
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Ok(outpipe::Read::Empty),
            Err(e) => Err(e.into()),
        }
    }

    /// The end the staged bytes leave by.
    pub fn output(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.read)
    }
}

/// `None` where the kernel has no `splice(2)`, or no pipe is left for the
/// stage (the output is then read and written, as it was before splice).
pub(super) fn new_splicer() -> Option<Splicer> {
    if !crate::os::platform::can_splice() {
        return None;
    }
    Stage::new().ok()
}

/// What one step of moving the job's output into its log did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Copied {
    /// This many bytes went from the pipe into the log inside the kernel.
    Spliced(usize),
    /// This many bytes were read into the buffer, then written.
    Read(usize),
    /// Nothing to take now; the job still holds the pipe.
    Empty,
    /// Every writer has closed the pipe: nothing more will come.
    Closed,
}

impl Copied {
    pub(super) fn bytes(self) -> usize {
        match self {
            Copied::Spliced(n) | Copied::Read(n) => n,
            Copied::Empty | Copied::Closed => 0,
        }
    }
}

/// How the output is spliced into the log (see `copy_once`). Without
/// `splice(2)` there is none (see `new_splicer`): the output is always read
/// and written.
pub(super) type Splicer = Stage;

/// One step of moving the job's output into its log: spliced inside the
/// kernel while `splice` is there (one copy, into the page cache, where read
/// and write make two), else read into `buffer` and written. The last
/// `buffer.len()` bytes before each rotation are always read: `write_all`
/// must see them to cut the file at a line end, as without splice. `splice`
/// is dropped for good when the kernel refuses to splice into this log (a
/// filesystem without it, a file opened for appending); any other refusal
/// (a full disk) sends this one step through read and write, which reports
/// the error. A failed write is returned with what was taken from the pipe:
/// those bytes are lost, since the job must never block on its log.
pub(super) fn copy_once(output: BorrowedFd<'_>, log: &mut RotatingWriter, buffer: &mut [u8], splice: &mut Option<Splicer>) -> (Copied, Option<Error>) {
    if let Some(stage) = splice.as_ref() {
        let (done, refused_for_good) = splice_once(output, stage, log, buffer);
        if refused_for_good {
            *splice = None;
        }
        if let Some(done) = done {
            return done;
        }
    }
    match outpipe::read_once(output, buffer) {
        outpipe::Read::Data(n) => (Copied::Read(n), log.write_all(&buffer[..n]).err()),
        outpipe::Read::Empty => (Copied::Empty, None),
        outpipe::Read::Closed => (Copied::Closed, None),
    }
}

/// The splice half of `copy_once`: `None` when it took nothing from the job's
/// pipe (near a rotation, or refused), then the bytes are to be read; and
/// whether splicing into this log is refused for good.
fn splice_once(
    output: BorrowedFd<'_>,
    stage: &Splicer,
    log: &mut RotatingWriter,
    buffer: &mut [u8],
) -> (Option<(Copied, Option<Error>)>, bool) {
    let for_good = |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP));
    let cut_window = buffer.len() as u64;
    let room = log.room();
    if room <= cut_window {
        return (None, false);
    }
    // Never more than the file takes before its cut window: never past max_bytes.
    let len = (room - cut_window).min(usize::MAX as u64) as usize;
    let taken = match stage.take(output, len) {
        Ok(outpipe::Read::Data(n)) => n,
        Ok(outpipe::Read::Empty) => return (Some((Copied::Empty, None)), false),
        Ok(outpipe::Read::Closed) => return (Some((Copied::Closed, None)), false),
        Err(e) => return (None, for_good(&e)),
    };
    let mut left = taken;
    let mut refused = false;
    while left > 0 {
        match log.splice_in(stage.output(), left) {
            Ok(0) => break,
            Ok(n) => left -= n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) => {
                refused = for_good(&e);
                break;
            }
        }
    }
    if left == 0 {
        return (Some((Copied::Spliced(taken), None)), false);
    }
    // What the log would not take by splice waits in the stage: it is read
    // and written in order, leaving the stage empty for the next move.
    let mut error = None;
    while left > 0 {
        let chunk = left.min(buffer.len());
        match outpipe::read_once(stage.output(), &mut buffer[..chunk]) {
            outpipe::Read::Data(n) => {
                left -= n;
                if let Err(e) = log.write_all(&buffer[..n]) {
                    error.get_or_insert(e);
                }
            }
            // Cannot happen while we hold the stage's write end and it holds `left` bytes.
            outpipe::Read::Empty | outpipe::Read::Closed => break,
        }
    }
    (Some((Copied::Read(taken), error)), refused)
}


// The tests drive splice(2), which only Linux has.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::store::logs::rotated_path;
    use crate::os::wait_unix::timespec;
    use rustix::event::{PollFd, PollFlags};
    use std::io::Write;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// What a job writes: numbered lines of varied lengths, with a stretch
    /// of NULs longer than a log file in the middle (a line that must be cut).
    fn job_output(bytes: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes + 4096);
        let mut i = 0u64;
        while out.len() < bytes {
            if i == 20_000 {
                out.extend(std::iter::repeat_n(0u8, 1_500_000));
                out.push(b'\n');
            }
            out.extend_from_slice(format!("{i:08} {}\n", "x".repeat((i * 7919 % 150) as usize)).as_bytes());
            i += 1;
        }
        out
    }

    /// Runs the supervisor's copy loop over a real output pipe (the FIFO a
    /// job gets, 1 MiB) while a thread writes `data` into it in uneven
    /// pieces, as a job does; returns the bytes spliced and the bytes read.
    /// After each step the file being written must hold at most `max` bytes.
    fn copy_through_a_pipe(data: &[u8], log: &mut RotatingWriter, path: &Path, max: u64, splice: &mut Option<Splicer>) -> (usize, usize) {
        let home = tempfile::tempdir().unwrap();
        // As a job's: the pipes are made beside `jobs/`, in the home.
        let job_dir = home.path().join("jobs").join("job-1");
        std::fs::create_dir_all(&job_dir).unwrap();
        let output = outpipe::create(&job_dir).unwrap();
        // Write-only, unlike the job's read-write end: if this test fails
        // half-way, its writer gets EPIPE instead of waiting for ever.
        drop(output.child_end);
        let mut end = std::fs::OpenOptions::new().write(true).open(outpipe::fifo_path(&job_dir)).unwrap();
        let writer = std::thread::spawn({
            let data = data.to_vec();
            move || {
                let mut rng = 0x2545_F491_4F6C_DD1Du64;
                let mut rest = &data[..];
                while !rest.is_empty() {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let n = (1 + rng % (96 * 1024)) as usize;
                    let (piece, after) = rest.split_at(n.min(rest.len()));
                    end.write_all(piece).unwrap();
                    rest = after;
                }
                // Dropping the last writer: the copy sees the end of the output.
            }
        });
        let mut buffer = vec![0u8; 256 * 1024];
        let (mut spliced, mut read) = (0, 0);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut fds = [PollFd::new(&output.reader, PollFlags::IN)];
            let ten_seconds = timespec(Duration::from_secs(10));
            assert!(matches!(rustix::event::poll(&mut fds, Some(&ten_seconds)), Ok(_) | Err(rustix::io::Errno::INTR)));
            let (copied, error) = copy_once(output.reader.as_fd(), log, &mut buffer, splice);
            assert!(error.is_none(), "{error:?}");
            let size = std::fs::metadata(path).unwrap().len();
            assert!(size <= max, "{size} bytes in the current file after {copied:?}: past max_bytes {max}");
            match copied {
                Copied::Spliced(n) => spliced += n,
                Copied::Read(n) => read += n,
                Copied::Empty => {}
                Copied::Closed => break,
            }
            assert!(Instant::now() < deadline, "the output never ended: {spliced} bytes spliced, {read} read");
        }
        // A writer still writing gets EPIPE now rather than wait for ever.
        drop(output.reader);
        assert!(writer.join().is_ok(), "the copy saw the output end before the writer was done ({spliced} bytes spliced, {read} read)");
        (spliced, read)
    }

    /// The log's files, oldest first.
    fn log_files(log: &Path) -> Vec<Vec<u8>> {
        (0..1000).rev().map(|i| rotated_path(log, i)).filter(|p| p.exists()).map(|p| std::fs::read(p).unwrap()).collect()
    }

    #[test]
    fn spliced_output_rotates_within_max_bytes_and_keeps_every_byte_in_order() {
        const MAX: u64 = 1024 * 1024 - 3;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        let data = job_output(12 * 1024 * 1024);
        // keep holds every file: what went in must all be there.
        let mut log = RotatingWriter::create(&path, MAX, 100).unwrap();
        let mut splice = new_splicer();
        assert!(splice.is_some(), "no pipe for the splice stage");
        let (spliced, read) = copy_through_a_pipe(&data, &mut log, &path, MAX, &mut splice);
        drop(log);
        assert!(splice.is_some(), "splice was refused on this filesystem");
        assert!(spliced >= data.len() / 2, "only {spliced} of {} bytes spliced ({read} read)", data.len());
        assert!(read > 0, "the last bytes before each rotation are read, to cut at a line end");
        let files = log_files(&path);
        let sizes: Vec<usize> = files.iter().map(Vec::len).collect();
        assert!(files.len() as u64 > data.len() as u64 / MAX, "rotated too rarely: {sizes:?}");
        assert!(sizes.iter().all(|&n| n as u64 <= MAX), "a file past max_bytes {MAX}: {sizes:?}");
        let logged = files.concat();
        let first_difference = logged.iter().zip(&data).position(|(a, b)| a != b);
        assert!(
            logged.len() == data.len() && first_difference.is_none(),
            "logged {} of {} bytes; first difference at {first_difference:?}; files {sizes:?}",
            logged.len(),
            data.len()
        );
    }

    #[test]
    fn where_the_log_refuses_splice_the_output_is_read_and_written() {
        const MAX: u64 = 1024 * 1024 - 3;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        std::fs::write(&path, b"left by a dead supervisor\n").unwrap();
        let data = job_output(4 * 1024 * 1024);
        // Opened for appending, as a watcher does: the kernel will not splice into it.
        let mut log = RotatingWriter::resume(&path, MAX, 100).unwrap();
        let mut splice = new_splicer();
        assert!(splice.is_some(), "no pipe for the splice stage");
        let (spliced, read) = copy_through_a_pipe(&data, &mut log, &path, MAX, &mut splice);
        drop(log);
        assert!(splice.is_none(), "splice into an O_APPEND file was accepted: this test needs another refusal");
        assert_eq!((spliced, read), (0, data.len()));
        let files = log_files(&path);
        assert!(files.iter().all(|f| f.len() as u64 <= MAX));
        assert!(files.concat() == [&b"left by a dead supervisor\n"[..], &data].concat(), "bytes lost or reordered");
    }
}


/// A piece of what the job wrote, as the loop is handed it while a watch
/// needs the lines (`--ready-log`, `--notify-on`), or its end.
pub(super) enum Piece<'a> {
    Bytes(&'a [u8]),
    Ended,
}

/// The job's output on Unix: one named pipe every run writes into, copied
/// into the log by the loop itself (os/output_copy_windows.rs is Windows's,
/// with the same face).
pub(super) struct JobOutput {
    /// The pipe's read end; gone once every writer closed it.
    pipe: Option<OwnedFd>,
    log: RotatingWriter,
    buffer: Vec<u8>,
    /// There while the output goes into the log by `splice(2)`, never seen
    /// by us (see `copy_once`); gone once the kernel refused it for this log.
    /// A feature that must see the output's lines (issue 15's `--ready-log`
    /// and `--notify-on`) leaves it out while it scans them: read and write
    /// then hand it every byte.
    splice: Option<Splicer>,
    /// A failure to write the log, not said yet (said once: the same
    /// failure would repeat for every chunk).
    failure: Option<Error>,
    failed: bool,
}

impl JobOutput {
    pub(super) fn new(pipe: OwnedFd, log: RotatingWriter, lines_wanted: bool) -> JobOutput {
        JobOutput { pipe: Some(pipe), log, buffer: vec![0u8; 256 * 1024], splice: if lines_wanted { None } else { new_splicer() }, failure: None, failed: false }
    }

    /// What the loop's wait watches; `None` once the output has ended.
    pub(super) fn waitable(&self) -> Option<BorrowedFd<'_>> {
        self.pipe.as_ref().map(AsFd::as_fd)
    }

    pub(super) fn is_open(&self) -> bool {
        self.pipe.is_some()
    }

    /// Moves what the pipe holds into the log once, handing `seen` what it
    /// read (while the lines are wanted) or the end; how many bytes moved.
    pub(super) fn copy(&mut self, seen: &mut dyn FnMut(Piece)) -> usize {
        let Some(pipe) = &self.pipe else { return 0 };
        let (copied, error) = copy_once(pipe.as_fd(), &mut self.log, &mut self.buffer, &mut self.splice);
        if let Some(e) = error.filter(|_| !std::mem::replace(&mut self.failed, true)) {
            self.failure = Some(e);
        }
        match copied {
            Copied::Read(n) => seen(Piece::Bytes(&self.buffer[..n])),
            Copied::Closed => {
                self.pipe = None;
                seen(Piece::Ended);
            }
            Copied::Spliced(_) | Copied::Empty => {}
        }
        copied.bytes()
    }

    /// A failure to write the log, once.
    pub(super) fn take_failure(&mut self) -> Option<Error> {
        self.failure.take()
    }

    /// Whether the loop is handed what the job writes; the output is spliced otherwise.
    pub(super) fn want_lines(&mut self, wanted: bool) {
        if wanted {
            self.splice = None;
        } else if self.splice.is_none() {
            self.splice = new_splicer();
        }
    }

    /// A new run writes into the same pipe.
    pub(super) fn new_run(&mut self, _run: ()) {}

    /// Everything the ended runs wrote is in the log: on Unix what is in
    /// the pipe is taken by a drain, without waiting for its writers.
    pub(super) fn runs_copied(&self) -> bool {
        true
    }

    /// Our read end goes (a forked errand must not hold it open).
    pub(super) fn close(&mut self) {
        self.pipe = None;
    }

    pub(super) fn with_log<R>(&mut self, f: impl FnOnce(&mut RotatingWriter) -> R) -> R {
        f(&mut self.log)
    }

    /// No run comes after the current one: the pipe ends once its last
    /// writer closes it (the ends kept for a restart are let go of).
    pub(super) fn no_more_runs(&mut self) {}
}
