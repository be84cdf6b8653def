//! The job log: one writer (the supervisor) that rotates by rename, and a
//! tail reader that walks backwards from the end across rotated files.

use crate::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use crate::os::sys::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Lines longer than this are returned in pieces by the tail reader, so that
/// output without newlines (`head -c 1G /dev/zero`) costs no more to tail than
/// ordinary lines.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

const TAIL_BLOCK: usize = 64 * 1024;

/// Test-only hook: called with a point's name before each file-system step of
/// the writer, its deleter and the follower, so that a test can pause those
/// steps or interleave them in an exact order.
#[cfg(test)]
pub(crate) type Seam = std::sync::Arc<dyn Fn(&'static str) + Send + Sync>;

/// Where a `Seam` is kept: nothing at all outside tests.
#[derive(Clone, Default)]
struct Seams(#[cfg(test)] Option<Seam>);

impl Seams {
    #[inline]
    fn at(&self, _point: &'static str) {
        #[cfg(test)]
        if let Some(seam) = &self.0 {
            seam(_point);
        }
    }
}

/// `output.log`, then `output.log.1` … `output.log.<keep>` (oldest last).
pub fn rotated_path(log: &Path, index: u32) -> PathBuf {
    if index == 0 {
        return log.to_path_buf();
    }
    let mut name = log.as_os_str().to_owned();
    name.push(format!(".{index}"));
    PathBuf::from(name)
}

fn open_log(path: &Path, truncate: bool) -> Result<File> {
    // Never through a symlink planted in the job's directory.
    let mut options = crate::store::paths::options_nofollow();
    options.write(true).create(true).mode(0o600);
    if truncate {
        options.truncate(true);
    } else {
        options.append(true);
    }
    options.open(path).map_err(|e| Error::io("open log", path, e))
}

/// Writes a job's output, keeping disk use under `max_bytes × (keep + 1)`.
pub struct RotatingWriter {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: File,
    written: u64,
    /// Where the current file starts in everything ever written to the log:
    /// the bytes of the files before it, dropped ones included.
    base: u64,
    /// `.output.log.start`, which says that (see `StartRecord`).
    record: Option<File>,
    dropped: u64,
    /// The unlink of the last dropped file, running aside (see `drop_oldest`).
    deleter: Option<std::thread::JoinHandle<()>>,
    seams: Seams,
}

impl Drop for RotatingWriter {
    /// A dropped file is gone from disk before the writer is.
    fn drop(&mut self) {
        self.wait_for_deleter();
    }
}

impl RotatingWriter {
    pub fn create(path: &Path, max_bytes: u64, keep: u32) -> Result<Self> {
        Self::open(path, max_bytes, keep, true)
    }

    /// Appends to the log another writer left (a job's orphan watcher takes
    /// over from its dead supervisor), counting what is already there.
    pub fn resume(path: &Path, max_bytes: u64, keep: u32) -> Result<Self> {
        Self::open(path, max_bytes, keep, false)
    }

    fn open(path: &Path, max_bytes: u64, keep: u32, truncate: bool) -> Result<Self> {
        let file = open_log(path, truncate)?;
        let max_bytes = max_bytes.max(1);
        // A file already past the limit (the limit was lowered since) rotates at the first write.
        let written = if truncate { 0 } else { file.metadata().map_err(|e| Error::io("open log", path, e))?.len() };
        let written = written.min(max_bytes);
        // Resumed: the current file goes on from where the reader places it.
        let (base, record) = if truncate {
            (0, StartRecord::open(path, true))
        } else {
            let id = file_id(&file);
            let files = LogFiles::open(path);
            let base = files.files.iter().find(|f| Some(f.id) == id).map_or(0, |f| f.start);
            // Where the log stands is unknown: a record written now would
            // place it wrongly and hide that, so the corrupt one stays, said.
            let record = if files.record_problem.is_some() { None } else { StartRecord::open(path, false) };
            (base, record)
        };
        let mut writer = RotatingWriter {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            file,
            written,
            base,
            record,
            dropped: 0,
            deleter: None,
            seams: Seams::default(),
        };
        writer.record_start();
        Ok(writer)
    }

    /// Says where the current file starts. A reader that cannot read it (a
    /// full disk) places the oldest file kept at 0: cursors then shift, but
    /// nothing is lost or repeated within one read.
    fn record_start(&mut self) {
        let Some(record) = &self.record else { return };
        if let Some(id) = file_id(&self.file) {
            StartRecord::write(record, id, self.base);
        }
    }

    #[cfg(test)]
    pub(crate) fn set_seam(&mut self, seam: Seam) {
        self.seams = Seams(Some(seam));
    }

    pub fn write_all(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let room = self.max_bytes - self.written;
            if room == 0 {
                self.rotate()?;
                continue;
            }
            if data.len() as u64 <= room {
                self.write_raw(data)?;
                break;
            }
            // It does not fit: cut at the last line end within reach when there
            // is one, so that each file starts on a line.
            let take = match data[..room as usize].iter().rposition(|&b| b == b'\n') {
                Some(nl) => nl + 1,
                // No line end in reach: start the chunk in a fresh file instead,
                // unless this file is empty (a line longer than max_bytes).
                None if self.written > 0 => {
                    self.rotate()?;
                    continue;
                }
                None => room as usize,
            };
            self.write_raw(&data[..take])?;
            data = &data[take..];
            self.rotate()?;
        }
        Ok(())
    }

    /// Writes a line of our own into the job's output (the separator a
    /// restart leaves): whole, with its newline, on a line of its own even
    /// when the job's last line had none yet, so no reader takes it for part
    /// of the job's line. It is counted like any output, so cursors stay
    /// positions in everything written.
    pub fn write_separator(&mut self, line: &str) -> Result<()> {
        let mut text = Vec::with_capacity(line.len() + 1);
        if !self.ends_a_line() {
            text.push(b'\n');
        }
        text.extend_from_slice(line.as_bytes());
        self.write_all(&text)
    }

    /// Whether the current file is empty or ends with a newline. Spliced
    /// bytes never pass through us, so the file itself is read; a file that
    /// cannot be read counts as ending a line (at worst one line is joined).
    fn ends_a_line(&self) -> bool {
        use crate::os::sys::FileExt;
        if self.written == 0 {
            return true;
        }
        let mut last = [0u8];
        crate::store::paths::options_nofollow()
            .read(true)
            .open(&self.path)
            .and_then(|file| file.read_exact_at(&mut last, self.written - 1))
            .map_or(true, |()| last[0] == b'\n')
    }

    /// How many bytes the current file takes before it is rotated.
    pub fn room(&self) -> u64 {
        self.max_bytes - self.written
    }

    /// Moves up to `len` bytes from `pipe` into the current file inside the
    /// kernel (`splice(2)`: they never pass through user space), never past
    /// `max_bytes`; it does not rotate, so it moves nothing once the file is
    /// full. Whatever the result, nothing is lost: an error (`EINVAL` for a
    /// file opened for appending or a filesystem that cannot splice, or the
    /// write's own, `ENOSPC`) leaves the bytes in the pipe.
    #[cfg(unix)]
    pub fn splice_in(&mut self, pipe: std::os::fd::BorrowedFd<'_>, len: usize) -> std::io::Result<usize> {
        use std::os::fd::AsFd;
        let len = (len as u64).min(self.room()) as usize;
        if len == 0 {
            return Ok(0);
        }
        self.seams.at("write");
        let n = crate::os::platform::splice_to_file(pipe, self.file.as_fd(), len)?;
        self.written += n as u64;
        Ok(n)
    }

    fn write_raw(&mut self, data: &[u8]) -> Result<()> {
        self.seams.at("write");
        self.file.write_all(data).map_err(|e| Error::io("write log", &self.path, e))?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Renames output.log → .1 → .2 …, dropping what goes past `keep`. The
    /// writer is the log's only writer, so no line is lost between rename and reopen.
    ///
    /// The oldest file is unlinked first so that no rename ever replaces an
    /// existing file, and the new file is created rather than truncated: on
    /// ext4 both a rename over a file and a truncate to zero force the data to
    /// disk (auto_da_alloc), which made rotation cost a disk flush per file.
    fn rotate(&mut self) -> Result<()> {
        let renamed = self.shift_files();
        // If the files cannot be shifted (the job's directory was deleted
        // under it), start the current file over rather than grow without bound.
        self.seams.at("create");
        let reopened = open_log(&self.path, true);
        // Rotated or started over, what the file held now lies behind the new start.
        self.base += self.written;
        self.written = 0;
        let outcome = self.finish_rotation(renamed, reopened);
        self.seams.at("record start");
        self.record_start();
        outcome
    }

    fn finish_rotation(&mut self, renamed: Result<()>, reopened: Result<File>) -> Result<()> {
        match (renamed, reopened) {
            (Ok(()), Ok(file)) => {
                self.file = file;
                Ok(())
            }
            (shift, reopened) => {
                if let Ok(file) = reopened {
                    self.file = file;
                } else {
                    let _ = self.file.set_len(0);
                    let _ = self.file.seek(SeekFrom::Start(0));
                }
                shift.and(Err(Error::Other(format!("cannot reopen {}", self.path.display()))))
            }
        }
    }

    fn shift_files(&mut self) -> Result<()> {
        self.drop_oldest()?;
        for index in (1..self.keep).rev() {
            let from = rotated_path(&self.path, index);
            let to = rotated_path(&self.path, index + 1);
            self.seams.at("shift");
            match std::fs::rename(&from, &to) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("rotate log", from, e)),
            }
        }
        if self.keep > 0 {
            let first = rotated_path(&self.path, 1);
            self.seams.at("shift current");
            std::fs::rename(&self.path, &first).map_err(|e| Error::io("rotate log", &self.path, e))?;
        }
        Ok(())
    }

    /// Takes the file past `keep` out of the way. Freeing a large file's
    /// blocks takes tens of milliseconds on ext4, so it is renamed to a hidden
    /// name (instant, and never over an existing file) and unlinked on a
    /// thread while the job's output keeps flowing into the next file; for
    /// those milliseconds the disk holds one file more than `keep + 1`.
    ///
    /// Only one unlink is ever in flight: on a busy disk an unlink can take
    /// longer than filling a file, and unlinks left to pile up let the disk
    /// use grow without bound (18.9 MB for a 3 MiB bound was seen). If the
    /// last one has not finished, the writer waits for it here; the job's
    /// output then waits in the pipe.
    fn drop_oldest(&mut self) -> Result<()> {
        self.wait_for_deleter();
        let oldest = rotated_path(&self.path, self.keep);
        let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("output.log");
        let doomed = self.path.with_file_name(format!(".{name}.dropped-{}", self.dropped));
        self.dropped += 1;
        self.seams.at("drop");
        match std::fs::rename(&oldest, &doomed) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("remove old log", oldest, e)),
        }
        let seams = self.seams.clone();
        match std::thread::Builder::new().name("log-drop".into()).spawn({
            let doomed = doomed.clone();
            move || {
                seams.at("unlink");
                let _ = std::fs::remove_file(doomed);
            }
        }) {
            Ok(deleter) => self.deleter = Some(deleter),
            Err(_) => {
                let _ = std::fs::remove_file(&doomed);
            }
        }
        Ok(())
    }

    /// Joins the thread unlinking a dropped file, if one runs: after this the
    /// writer has no thread of its own (the supervisor forks on that).
    pub(crate) fn join_deleter(&mut self) {
        self.wait_for_deleter();
    }

    fn wait_for_deleter(&mut self) {
        if let Some(deleter) = self.deleter.take() {
            if !deleter.is_finished() {
                self.seams.at("wait for unlink");
            }
            let _ = deleter.join();
        }
    }
}

/// Reads lines backwards over `output.log`, `.1`, `.2` … as one stream.
pub struct ReverseLines {
    /// Newest first, each with its length when opened: the lines end there.
    files: Vec<(File, u64)>,
    next_file: usize,
    current: Option<(File, u64)>,
    /// Unconsumed bytes that precede everything already returned.
    pending: Vec<u8>,
    /// The newest file and its length when the reader opened it: where
    /// the lines end, and where a follower goes on (see `tail_then_follow`).
    newest: Option<(File, u64)>,
    /// The same files as a stream with positions (see `end_of_lines`).
    stream: LogFiles,
    started: bool,
    exhausted: bool,
    /// The last item was the end of an overlong line: the next one is more of it.
    piece: bool,
}

impl ReverseLines {
    /// `log` is the path of `output.log`; rotated siblings are found by probing.
    pub fn open(log: &Path) -> ReverseLines {
        let stream = LogFiles::open(log);
        let files: Vec<(File, u64)> =
            stream.files.iter().rev().filter_map(|f| f.file.try_clone().ok().map(|file| (file, f.len))).collect();
        let newest = files.first().and_then(|(file, len)| file.try_clone().ok().map(|f| (f, *len)));
        ReverseLines {
            files,
            next_file: 0,
            current: None,
            pending: Vec::new(),
            newest,
            stream,
            started: false,
            exhausted: false,
            piece: false,
        }
    }

    /// The cursor for what this reader reads: where its last complete line
    /// ends in everything ever written to the log, or its very end when
    /// `whole` (the writer is gone: an unfinished last line is all there is).
    pub fn cursor(&self, whole: bool) -> u64 {
        if whole { self.stream.end() } else { self.stream.end_of_lines() }
    }

    /// Why the cursor cannot be trusted (see `LogFiles::record_problem`).
    pub fn record_problem(&self) -> Option<&str> {
        self.stream.record_problem.as_deref()
    }

    /// True when the item just returned is a piece cut off the end of a line
    /// longer than `MAX_LINE_BYTES`: the next item is the part before it.
    pub fn cut_a_line(&self) -> bool {
        self.piece
    }

    /// Prepends the block that precedes `pending`; false at the start of the oldest file.
    fn fill(&mut self) -> bool {
        loop {
            if self.current.is_none() {
                if self.next_file >= self.files.len() {
                    return false;
                }
                let Ok(file) = self.files[self.next_file].0.try_clone() else { return false };
                let len = self.files[self.next_file].1;
                self.next_file += 1;
                self.current = Some((file, len));
                continue;
            }
            let (file, pos) = self.current.as_mut().unwrap();
            if *pos == 0 {
                self.current = None;
                continue;
            }
            let size = (*pos).min(TAIL_BLOCK as u64) as usize;
            let start = *pos - size as u64;
            let mut block = vec![0u8; size];
            let ok = file.seek(SeekFrom::Start(start)).is_ok() && file.read_exact(&mut block).is_ok();
            if !ok {
                // The file shrank under us (keep 0 truncates in place): what
                // it held is gone, so the stream starts here.
                self.current = None;
                self.next_file = self.files.len();
                return false;
            }
            *pos = start;
            block.extend_from_slice(&self.pending);
            self.pending = block;
            return true;
        }
    }
}

impl Iterator for ReverseLines {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        self.piece = false;
        if self.exhausted {
            return None;
        }
        if !self.started {
            self.started = true;
            while self.pending.is_empty() {
                if !self.fill() {
                    self.exhausted = true;
                    return None;
                }
            }
            // The stream's final newline ends the last line; it does not start an empty one.
            if self.pending.last() == Some(&b'\n') {
                self.pending.pop();
            }
        }
        loop {
            if let Some(nl) = self.pending.iter().rposition(|&b| b == b'\n') {
                let line = self.pending[nl + 1..].to_vec();
                if line.len() <= MAX_LINE_BYTES {
                    self.pending.truncate(nl);
                    return Some(line);
                }
            }
            if self.pending.len() > MAX_LINE_BYTES {
                let cut = self.pending.len() - MAX_LINE_BYTES;
                let piece = self.pending.split_off(cut);
                self.piece = true;
                return Some(piece);
            }
            if !self.fill() {
                // What is left is the stream's first line (possibly empty).
                self.exhausted = true;
                return Some(std::mem::take(&mut self.pending));
            }
        }
    }
}

/// The last `n` lines of a job's log (oldest first), optionally only those for
/// which `keep` is true. Cost grows with the lines read, not the log's size.
pub fn tail_lines(log: &Path, n: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    if n == 0 {
        return Vec::new();
    }
    let mut lines: Vec<Vec<u8>> = ReverseLines::open(log).filter(|l| keep(l)).take(n).collect();
    lines.reverse();
    lines
}

/// The last `n` lines of a job's log (oldest first), and a follower that
/// goes on right after them: no line written meanwhile is missed or repeated.
/// A last line still being written (no newline yet) is left to the follower,
/// which prints it whole, rather than cut in two.
pub fn tail_then_follow(log: &Path, n: usize) -> (Vec<Vec<u8>>, LogFollower) {
    use crate::os::sys::FileExt;
    let mut reader = ReverseLines::open(log);
    // One line at least, to know where the last one starts.
    let mut lines: Vec<Vec<u8>> = reader.by_ref().take(n.max(1)).collect();
    lines.reverse();
    let held = reader.newest.take().and_then(|(file, len)| {
        let mut start = len;
        let mut last_byte = [0u8];
        let unfinished = len > 0 && file.read_at(&mut last_byte, len - 1).is_ok_and(|read| read == 1 && last_byte[0] != b'\n');
        // Only when it lies in the newest file: else it began in a rotated one.
        if let Some(last) = lines.last().filter(|last| unfinished && last.len() as u64 <= len) {
            start = len - last.len() as u64;
            lines.pop();
        }
        Held::new(file, start)
    });
    if lines.len() > n {
        lines.drain(..lines.len() - n);
    }
    (lines, LogFollower::new(log, held))
}

/// `output.log` (if present) then `output.log.1`, `.2` … up to the first
/// two missing names in a row. A rotation renames from the oldest file down,
/// one name at a time, so while it runs one name in the middle is missing
/// (`.2` moved to `.3`, `.1` not yet to `.2`): the files past it are still
/// the log's, in order.
pub fn log_files_newest_first(log: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut missing = 0;
    for index in 0..=MAX_KEEP + 1 {
        let path = rotated_path(log, index);
        if path.exists() {
            files.push(path);
            missing = 0;
        } else if index > 0 {
            missing += 1;
            if missing == 2 {
                break;
            }
        }
    }
    files
}

/// The whole log, oldest first, streamed to `sink`.
pub fn copy_all(log: &Path, sink: &mut dyn Write) -> std::io::Result<()> {
    for path in log_files_newest_first(log).iter().rev() {
        match crate::store::paths::open_read(path) {
            Ok(mut file) => {
                std::io::copy(&mut file, sink)?;
            }
            // Rotated away between listing and opening: its lines moved to a later name.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `.output.log.start` beside the log: the (device, inode) of the file that
/// is `output.log` and where it starts in everything ever written to the log.
/// A position in that stream (a cursor) thus names the same byte whatever
/// rotations come after, and a reader tells how much was dropped before the
/// oldest file kept. Written in place, one fixed-size record with a checksum
/// (a rename per rotation would cost a disk flush on ext4); a torn read fails
/// the checksum and is read again.
///
/// The record is `pm1 <dev> <ino> <start> <sum1> mix=<sum2>\n`: the `pm1`
/// record of earlier versions, which they still read (their parser takes
/// the hex fields and drops the `mix=` one), followed by the stronger
/// checksum this version requires. Earlier versions wrote only the `pm1`
/// part (72 bytes), or for a while `pm2 <dev> <ino> <start> <sum2>\n`,
/// which readers of the versions before could not read; both still read.
struct StartRecord;

/// The record this version writes.
const RECORD_LEN: usize = 93;
/// A `pm1` record without `mix=`, or a `pm2` one (see `StartRecord`).
const EARLIER_RECORD_LEN: usize = 72;

impl StartRecord {
    fn path(log: &Path) -> PathBuf {
        let name = log.file_name().and_then(|n| n.to_str()).unwrap_or("output.log");
        log.with_file_name(format!(".{name}.start"))
    }

    /// `fresh`: a new log, so whatever a record file held before is dropped
    /// (a record is rewritten in place over its start, never truncated).
    fn open(log: &Path, fresh: bool) -> Option<File> {
        let mut options = crate::store::paths::options_nofollow();
        options.write(true).create(true).truncate(fresh).mode(0o600);
        options.open(Self::path(log)).ok()
    }

    /// The checksum of format `pm1`, still read (a supervisor of an earlier
    /// version may be writing the log). It misses some one-bit changes (the
    /// `| 1` hides bit 0 of the product): a flipped bit there went unseen.
    fn sum_v1(id: FileId, start: u64) -> u64 {
        (id.0 ^ id.1.rotate_left(21) ^ start.rotate_left(42)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }

    /// The checksum of format `pm2`: each field goes through a bijective
    /// mix (splitmix64's finaliser) before the next, so any change of one
    /// field changes the sum.
    fn sum_v2(id: FileId, start: u64) -> u64 {
        fn mix(mut z: u64) -> u64 {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        mix(mix(mix(0x9E37_79B9_7F4A_7C15 ^ id.0) ^ id.1) ^ start)
    }

    fn write(record: &File, id: FileId, start: u64) {
        use crate::os::sys::FileExt;
        let text = format!(
            "pm1 {:016x} {:016x} {:016x} {:016x} mix={:016x}\n",
            id.0,
            id.1,
            start,
            Self::sum_v1(id, start),
            Self::sum_v2(id, start)
        );
        debug_assert_eq!(text.len(), RECORD_LEN);
        if record.write_all_at(text.as_bytes(), 0).is_err() {
            return;
        }
        // Cut back after the record is written, never before: a reader sees
        // either the size it reported before or this record whole. A file
        // grown past the record (or an earlier, shorter one) heals here.
        if record.metadata().is_ok_and(|m| m.len() != RECORD_LEN as u64) {
            let _ = record.set_len(RECORD_LEN as u64);
        }
    }

    /// What the record says. A record is exactly `RECORD_LEN` bytes and only
    /// that much is ever read: a file of any other size is not one of ours.
    /// A torn read (the writer rewrites it in place) fails the checksum and
    /// is read again; one that stays wrong is corrupt, said so, never used.
    fn read(log: &Path) -> Record {
        let path = Self::path(log);
        let file = match crate::store::paths::open_read(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Record::Absent,
            Err(e) => return Record::Corrupt(format!("{} cannot be read: {e}", path.display())),
        };
        let mut problem = String::new();
        // Rewritten in place, never replaced: the file opened stays the record.
        for _ in 0..100 {
            let size = file.metadata().map_or(0, |m| m.len());
            if size == 0 {
                // Not written yet: a writer creates it empty, then writes it
                // (or could not, on a full disk). The oldest file then starts
                // at 0, which for a new log is true.
                return Record::Absent;
            }
            let mut text = [0u8; RECORD_LEN];
            let read = read_prefix(&file, &mut text);
            if size > RECORD_LEN as u64 {
                // The writer cuts it back at its next rotation (see `write`);
                // until then it is not one of ours.
                problem = format!("it is {size} bytes; a start record is {RECORD_LEN}");
            } else {
                match Self::parse(&text[..read]) {
                    Some(found) => return Record::Valid(found),
                    None if read != RECORD_LEN && read != EARLIER_RECORD_LEN => {
                        problem = format!("it is {read} bytes; a start record is {RECORD_LEN}")
                    }
                    None => problem = "its checksum does not match what it says".to_string(),
                }
            }
            std::thread::yield_now();
        }
        Record::Corrupt(format!(
            "the log's start record {} is corrupt ({problem}): where the kept lines lie in everything written is unknown, \
             so no cursor can be placed until the job's next log rotation rewrites it",
            path.display()
        ))
    }

    /// The whole file (at most `RECORD_LEN` bytes): one record, or an
    /// earlier version's shorter `pm1` record written over this version's,
    /// which leaves the `mix=` field's line behind it.
    fn parse(text: &[u8]) -> Option<(FileId, u64)> {
        let text = std::str::from_utf8(text).ok()?;
        let (line, after) = text.split_once('\n')?;
        let found = Self::parse_line(line)?;
        let left_behind = after.strip_prefix("mix=").and_then(|sum| sum.strip_suffix('\n')).is_some_and(|sum| hex_number(sum).is_some());
        let whole = after.is_empty() || (line.len() + 1 == EARLIER_RECORD_LEN && left_behind);
        whole.then_some(found)
    }

    fn parse_line(line: &str) -> Option<(FileId, u64)> {
        let (sum_of, fields): (fn(FileId, u64) -> u64, &str) = match line.split_at_checked(4)? {
            ("pm2 ", fields) => (Self::sum_v2, fields),
            ("pm1 ", fields) => (Self::sum_v1, fields),
            _ => return None,
        };
        let mut fields = fields.split(' ');
        let mut number = || fields.next().and_then(hex_number);
        let (dev, ino, start, sum) = (number()?, number()?, number()?, number()?);
        if sum_of((dev, ino), start) != sum {
            return None;
        }
        let strong = match fields.next() {
            None => true,
            // Required when there: the `pm1` sum misses some one-bit changes.
            Some(mix) if line.starts_with("pm1 ") => {
                mix.strip_prefix("mix=").and_then(hex_number).is_some_and(|sum| sum == Self::sum_v2((dev, ino), start))
            }
            Some(_) => false,
        };
        (strong && fields.next().is_none()).then_some(((dev, ino), start))
    }
}

/// A number of a start record: 16 hex digits (`from_str_radix` alone
/// would take a sign or fewer digits).
fn hex_number(field: &str) -> Option<u64> {
    let digits = field.len() == 16 && field.bytes().all(|b| b.is_ascii_hexdigit());
    digits.then(|| u64::from_str_radix(field, 16).ok()).flatten()
}

/// What a log's start record says.
enum Record {
    /// There is none: a log written before the record existed.
    Absent,
    Valid((FileId, u64)),
    /// Why it cannot be used.
    Corrupt(String),
}

impl Record {
    fn valid(&self) -> Option<(FileId, u64)> {
        match self {
            Record::Valid(found) => Some(*found),
            Record::Absent | Record::Corrupt(_) => None,
        }
    }
}

/// Reads up to `buf.len()` bytes from the start of `file`; how many it got.
fn read_prefix(file: &File, buf: &mut [u8]) -> usize {
    use crate::os::sys::FileExt;
    let mut read = 0;
    while read < buf.len() {
        match file.read_at(&mut buf[read..], read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    read
}

/// How often a reader looks again at a log caught halfway through a
/// rotation before it takes what it sees (the writer died there): about
/// 150 ms, most of it asleep.
const OPEN_ATTEMPTS: u32 = 200;

/// One file of a log as a reader took it: opened, with its length then and
/// where it starts in everything written to the log.
pub struct LogFile {
    file: File,
    id: FileId,
    /// Where its first byte lies in the stream of everything ever written.
    pub start: u64,
    /// Its length when the reader opened it; the reader reads no further.
    pub len: u64,
}

/// A log's files as one stream, oldest first, each with its place in it:
/// opened together, so a rotation meanwhile neither hides nor repeats bytes.
pub struct LogFiles {
    /// Oldest first.
    pub files: Vec<LogFile>,
    /// Why the start record could not be used (see `StartRecord::read`):
    /// the files are then placed as if the oldest started at 0, which is
    /// wrong by however much was rotated away, so positions (cursors) are
    /// not to be given or taken.
    pub record_problem: Option<String>,
}

impl LogFiles {
    pub fn open(log: &Path) -> LogFiles {
        Self::open_seamed(log, &Seams::default())
    }

    fn open_seamed(log: &Path, seams: &Seams) -> LogFiles {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let names = log_files_newest_first(log);
            let mut seen = std::collections::HashSet::new();
            let mut opened: Vec<(usize, LogFile)> = Vec::new();
            for (index, path) in names.iter().enumerate() {
                seams.at("open");
                let Ok(file) = crate::store::paths::open_read(path) else { continue };
                let Ok(meta) = file.metadata() else { continue };
                let Some(id) = file_id(&file) else { continue };
                // A rotation during the opening shows one file under two names.
                if seen.insert(id) {
                    opened.push((index, LogFile { file, id, start: 0, len: meta.len() }));
                }
            }
            seams.at("read record");
            let read = StartRecord::read(log);
            let record = read.valid();
            // The same files under the same names after the record was read:
            // no rotation came between. And the record names one of them:
            // with keep 0 a rotation takes `output.log` out of the listing
            // before the new file exists, and the new file is listed before
            // the record names it; placed then, the log would seem to end
            // before where it stood (a cursor just given would be refused).
            let record_kept = record.is_none_or(|(id, _)| opened.iter().any(|(_, f)| f.id == id));
            seams.at("look again");
            let settled = record_kept
                && log_files_newest_first(log) == names
                && opened.iter().all(|(index, f)| id_at(&names[*index]) == Some(f.id));
            if settled || attempt >= OPEN_ATTEMPTS {
                let mut files: Vec<LogFile> = opened.into_iter().map(|(_, f)| f).collect();
                place(&mut files, record);
                files.reverse();
                let record_problem = match read {
                    Record::Corrupt(problem) => Some(problem),
                    Record::Absent | Record::Valid(_) => None,
                };
                return LogFiles { files, record_problem };
            }
            seams.at("unsettled");
            // The writer is between two steps of a rotation: a few syscalls
            // away, unless it is not running (a loaded machine) or died there.
            if attempt < OPEN_ATTEMPTS / 4 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }

    /// Where the stream ends (as the files were when opened).
    pub fn end(&self) -> u64 {
        self.files.last().map_or(0, |f| f.start + f.len)
    }

    /// Where the oldest byte kept lies: everything before it was dropped.
    pub fn oldest(&self) -> u64 {
        self.files.first().map_or(0, |f| f.start)
    }

    /// Where the last complete line ends: the end, or the start of a last
    /// line still being written (looked for in the newest file only; a file
    /// starts on a line unless a line is longer than a file).
    pub fn end_of_lines(&self) -> u64 {
        use crate::os::sys::FileExt;
        let Some(newest) = self.files.last() else { return 0 };
        let mut pos = newest.len;
        let mut block = vec![0u8; TAIL_BLOCK];
        while pos > 0 {
            let size = pos.min(TAIL_BLOCK as u64) as usize;
            let from = pos - size as u64;
            if newest.file.read_exact_at(&mut block[..size], from).is_err() {
                break;
            }
            if let Some(nl) = block[..size].iter().rposition(|&b| b == b'\n') {
                return newest.start + from + nl as u64 + 1;
            }
            pos = from;
        }
        newest.start
    }

    /// The bytes from `pos` (clamped to what is kept) to the end.
    pub fn reader_from(self, pos: u64) -> StreamReader {
        let pos = pos.max(self.oldest()).min(self.end());
        StreamReader { files: self.files, pos }
    }
}

/// Gives each file its start: from the record's file on both sides, each
/// neighbour by the length of the older one of the pair (a rotated file is
/// complete); without the record, the oldest file kept starts at 0.
fn place(newest_first: &mut [LogFile], record: Option<(FileId, u64)>) {
    let known = record.and_then(|(id, start)| newest_first.iter().position(|f| f.id == id).map(|i| (i, start)));
    let (anchor, start) = known.unwrap_or((newest_first.len().saturating_sub(1), 0));
    if newest_first.is_empty() {
        return;
    }
    newest_first[anchor].start = start;
    for i in anchor + 1..newest_first.len() {
        newest_first[i].start = newest_first[i - 1].start.saturating_sub(newest_first[i].len);
    }
    for i in (0..anchor).rev() {
        newest_first[i].start = newest_first[i + 1].start + newest_first[i + 1].len;
    }
}

/// Reads a log's files as one stream from a position, each no further than
/// its length when they were opened.
pub struct StreamReader {
    files: Vec<LogFile>,
    pos: u64,
}

impl StreamReader {
    /// Where the next byte read lies in the stream.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

impl Read for StreamReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use crate::os::sys::FileExt;
        loop {
            let Some(file) = self.files.iter().find(|f| self.pos < f.start + f.len && self.pos >= f.start) else {
                // Between files (a file that shrank) or at the end.
                match self.files.iter().find(|f| f.start > self.pos) {
                    Some(next) => {
                        self.pos = next.start;
                        continue;
                    }
                    None => return Ok(0),
                }
            };
            let offset = self.pos - file.start;
            let want = ((file.len - offset) as usize).min(buf.len());
            let n = file.file.read_at(&mut buf[..want], offset)?;
            if n == 0 {
                // Shorter now than when opened (kept 0 starts a file over): what it held is gone.
                self.pos = file.start + file.len;
                continue;
            }
            self.pos += n as u64;
            return Ok(n);
        }
    }
}

/// The most rotated files a log can have (`logs.keep`); the follower looks
/// for rotated files up to this index, whatever `keep` was when the job started.
pub const MAX_KEEP: u32 = 100;

/// (device, inode): what a file is, whatever its name is now.
type FileId = (u64, u64);

fn file_id(file: &File) -> Option<FileId> {
    crate::os::sys::file_identity(file)
}

fn id_at(path: &Path) -> Option<FileId> {
    crate::os::sys::path_identity(path)
}

/// The file a follower reads and how far.
struct Held {
    file: File,
    id: FileId,
    pos: u64,
}

impl Held {
    fn new(mut file: File, pos: u64) -> Option<Held> {
        let id = file_id(&file)?;
        file.seek(SeekFrom::Start(pos)).ok()?;
        Some(Held { file, id, pos })
    }
}

/// Reads a log as it is written (`run-bg logs --follow`), across rotations.
///
/// It holds the file it reads open, so a rotation (a rename) never takes a
/// line from under it; once it has read its file to the end and that file is
/// no longer `output.log`, it moves to the file written next. Only a file
/// dropped past `keep` before the follower got to it is lost; the follower
/// then goes on with the oldest file still kept.
pub struct LogFollower {
    log: PathBuf,
    /// None until a log file exists: then the oldest one is read from its start.
    held: Option<Held>,
    buffer: Vec<u8>,
    seams: Seams,
}

impl LogFollower {
    fn new(log: &Path, held: Option<Held>) -> LogFollower {
        LogFollower {
            log: log.to_path_buf(),
            held,
            buffer: vec![0u8; 64 * 1024],
            seams: Seams::default(),
        }
    }

    /// Starts at the current end of `log`: only output written from now on.
    pub fn from_end(log: &Path) -> LogFollower {
        let held = File::open(log).ok().and_then(|file| {
            let len = file.metadata().ok()?.len();
            Held::new(file, len)
        });
        Self::new(log, held)
    }

    /// Starts at the beginning of the oldest file kept: the whole log, then
    /// what is written next.
    pub fn from_start(log: &Path) -> LogFollower {
        Self::new(log, None)
    }

    #[cfg(test)]
    pub(crate) fn set_seam(&mut self, seam: Seam) {
        self.seams = Seams(Some(seam));
    }

    /// Streams new output to `sink` until `ended` says the writer is gone and
    /// everything it wrote has been read. Errors come from `sink` or `ended`.
    pub fn follow(
        &mut self,
        sink: &mut dyn Write,
        poll: std::time::Duration,
        mut ended: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let mut read_new = |follower: &mut Self| {
            follower.read_new(sink).map_err(|e| Error::io("copy the output of", &follower.log, e))
        };
        loop {
            if read_new(self)? > 0 {
                continue;
            }
            self.seams.at("ended?");
            if ended()? {
                // Asked before a read, never after one: what the writer wrote
                // between that read and the question would be left unread.
                // The writer is gone now, so this read takes all it wrote.
                read_new(self)?;
                return Ok(());
            }
            std::thread::sleep(poll);
        }
    }

    /// Copies to `sink` everything written since the last call, following
    /// rotations, up to the end of the file that is `output.log` now; returns
    /// how many bytes. It stops short only while a rotation is halfway done
    /// (the next file has no name yet); a later call goes on from there.
    /// Errors are the sink's: a log file that cannot be read counts as read
    /// to its end for now.
    pub fn read_new(&mut self, sink: &mut dyn Write) -> std::io::Result<u64> {
        let mut copied = 0;
        loop {
            if self.held.is_none() {
                self.held = self.open_oldest();
                if self.held.is_none() {
                    break;
                }
            }
            copied += self.read_held(sink)?;
            let held_id = self.held.as_ref().map(|h| h.id);
            self.seams.at("stat log");
            if id_at(&self.log) == held_id {
                break;
            }
            // Rotated away: the writer wrote to it last before the rotation,
            // so it is complete now, and what came after the read above is
            // read now, before moving on.
            copied += self.read_held(sink)?;
            match self.successor() {
                Some(next) => self.held = Some(next),
                None => break,
            }
        }
        if copied > 0 {
            sink.flush()?;
        }
        Ok(copied)
    }

    fn read_held(&mut self, sink: &mut dyn Write) -> std::io::Result<u64> {
        self.seams.at("read");
        let Some(held) = self.held.as_mut() else { return Ok(0) };
        // The writer starts a file over in place when it cannot rotate.
        if held.file.metadata().is_ok_and(|m| m.len() < held.pos) && held.file.seek(SeekFrom::Start(0)).is_ok() {
            held.pos = 0;
        }
        let mut copied = 0;
        loop {
            match held.file.read(&mut self.buffer) {
                Ok(0) => break,
                Ok(n) => {
                    sink.write_all(&self.buffer[..n])?;
                    held.pos += n as u64;
                    copied += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        Ok(copied)
    }

    /// The file written after the held one, which has been rotated; None
    /// while a rotation is halfway done.
    ///
    /// The writer renames from the oldest file down to `output.log`, so while
    /// the held file stays at `.<i>`, the name `.<i-1>` (or `output.log`) is
    /// either free or taken by the file written after it. Finding the held
    /// file at the same index before and after opening that name proves
    /// that no rotation went past it in between.
    fn successor(&mut self) -> Option<Held> {
        let held = self.held.as_ref()?.id;
        loop {
            self.seams.at("find held");
            let Some(index) = (1..=MAX_KEEP).find(|&i| id_at(&rotated_path(&self.log, i)) == Some(held)) else {
                // Dropped past `keep` (renamed aside): the oldest file kept
                // comes next; whatever was dropped in between is gone.
                return self.open_oldest();
            };
            self.seams.at("open next");
            let next = File::open(rotated_path(&self.log, index - 1)).ok()?;
            self.seams.at("check held");
            if id_at(&rotated_path(&self.log, index)) == Some(held) {
                return Held::new(next, 0);
            }
        }
    }

    /// The oldest file kept, from its start: the highest-numbered one, checked
    /// after opening to still be the highest (a rotation may have moved it on).
    fn open_oldest(&self) -> Option<Held> {
        let highest = || (0..=MAX_KEEP).rev().find(|&i| rotated_path(&self.log, i).exists());
        loop {
            self.seams.at("find oldest");
            let index = highest()?;
            self.seams.at("open oldest");
            let file = match File::open(rotated_path(&self.log, index)) {
                Ok(file) => file,
                // Rotated on meanwhile: look again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => return None,
            };
            let held = Held::new(file, 0)?;
            self.seams.at("check oldest");
            if highest() == Some(index) && id_at(&rotated_path(&self.log, index)) == Some(held.id) {
                return Some(held);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total_size(log: &Path) -> u64 {
        (0..10).filter_map(|i| std::fs::metadata(rotated_path(log, i)).ok()).map(|m| m.len()).sum()
    }

    #[test]
    fn rotation_bounds_disk_use_and_keeps_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 4096, 2).unwrap();
        for i in 0..10_000 {
            writer.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        assert!(total_size(&log) <= 4096 * 3, "total {}", total_size(&log));
        assert!(rotated_path(&log, 2).exists());
        assert!(!rotated_path(&log, 3).exists());
        let tail = tail_lines(&log, 3, |_| true);
        assert_eq!(tail, vec![b"line 9997".to_vec(), b"line 9998".to_vec(), b"line 9999".to_vec()]);
        // Each rotated file starts on a line start because cuts go at newlines.
        let first = std::fs::read(rotated_path(&log, 1)).unwrap();
        assert!(first.starts_with(b"line "));
    }

    #[test]
    fn tail_crosses_rotated_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 4096, 3).unwrap();
        for i in 0..1000 {
            writer.write_all(format!("{i:05}\n").as_bytes()).unwrap();
        }
        // 6000 bytes: output.log.1 holds the first lines, output.log the rest.
        let all = tail_lines(&log, 5000, |_| true);
        assert_eq!(all.len(), 1000);
        for (i, line) in all.iter().enumerate() {
            assert_eq!(line, format!("{i:05}").as_bytes());
        }
    }

    #[test]
    fn a_rotation_during_a_tail_neither_repeats_nor_reorders_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 4096, 3).unwrap();
        for i in 0..1000 {
            writer.write_all(format!("{i:05}\n").as_bytes()).unwrap();
        }
        let reader = ReverseLines::open(&log);
        // Two rotations after the reader opened its files.
        for i in 1000..2400 {
            writer.write_all(format!("{i:05}\n").as_bytes()).unwrap();
        }
        let lines: Vec<Vec<u8>> = reader.collect();
        let numbers: Vec<u32> = lines.iter().rev().map(|l| std::str::from_utf8(l).unwrap().parse().unwrap()).collect();
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "consecutive, oldest first");
        // The file opened as output.log kept growing until it was rotated away:
        // the tail ends where that file ended, at or after where it began.
        assert!(*numbers.last().unwrap() >= 999);
    }

    /// A reader opening a keep-0 log at each step of the writer (rotations
    /// included) never finds it ending before where an earlier reader found
    /// it, nor past what was written.
    #[test]
    fn with_keep_0_the_end_of_the_log_never_goes_back() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::{mpsc, Arc, Mutex};
        enum Event {
            WriterAt(&'static str),
            WriterDone,
            ReaderUnsettled,
            ReaderDone(u64, u64),
        }
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let (events, event_rx) = mpsc::channel();
        let (permits, permit_rx) = mpsc::channel::<()>();
        let permit_rx = Mutex::new(permit_rx);
        let writer_events = Mutex::new(events.clone());
        let written = Arc::new(AtomicU64::new(0));
        let mut writer = RotatingWriter::create(&log, 64, 0).unwrap();
        // The writer stops at each of its steps until the test lets it go on.
        writer.set_seam(Arc::new(move |point| {
            if point != "unlink" {
                writer_events.lock().unwrap().send(Event::WriterAt(point)).unwrap();
                permit_rx.lock().unwrap().recv().unwrap();
            }
        }));
        let (writer_done, writer_written) = (events.clone(), written.clone());
        let writing = std::thread::spawn(move || {
            for i in 0..200 {
                let line = format!("{i:05}\n");
                writer_written.fetch_add(line.len() as u64, Ordering::SeqCst);
                writer.write_all(line.as_bytes()).unwrap();
            }
            drop(writer);
            writer_done.send(Event::WriterDone).unwrap();
        });
        // One reader at a time, started while the writer stands at a step; a
        // reader that finds the log unsettled lets the writer go on.
        let start_reader = |events: mpsc::Sender<Event>| {
            let log = log.clone();
            let written = written.clone();
            std::thread::spawn(move || {
                let unsettled = Mutex::new(events.clone());
                let seams = Seams(Some(Arc::new(move |point| {
                    if point == "unsettled" {
                        let _ = unsettled.lock().unwrap().send(Event::ReaderUnsettled);
                    }
                })));
                let end = LogFiles::open_seamed(&log, &seams).end();
                // Counted before each write: at most what was written by now.
                let upto = written.load(Ordering::SeqCst);
                events.send(Event::ReaderDone(end, upto)).unwrap();
            })
        };
        let (mut paused, mut reading, mut unsettled, mut writer_done) = (None, false, false, false);
        let mut highest = 0;
        let mut failures = Vec::new();
        let mut reads = 0;
        while !writer_done || reading {
            match event_rx.recv().unwrap() {
                Event::WriterAt(point) => {
                    paused = Some(point);
                    if !reading {
                        reading = true;
                        unsettled = false;
                        start_reader(events.clone());
                    } else if unsettled {
                        paused = None;
                        permits.send(()).unwrap();
                    }
                }
                Event::ReaderUnsettled => {
                    unsettled = true;
                    if paused.take().is_some() {
                        permits.send(()).unwrap();
                    }
                }
                Event::ReaderDone(end, upto) => {
                    reads += 1;
                    reading = false;
                    let at = paused.unwrap_or("(running)");
                    if end < highest {
                        failures.push(format!("at {at}: the log ends at {end}, an earlier read said {highest}"));
                    }
                    if end > upto {
                        failures.push(format!("at {at}: the log ends at {end}, {upto} bytes written"));
                    }
                    highest = highest.max(end);
                    if paused.take().is_some() {
                        permits.send(()).unwrap();
                    }
                }
                Event::WriterDone => writer_done = true,
            }
        }
        writing.join().unwrap();
        assert_eq!(LogFiles::open(&log).end(), 200 * 6);
        assert!(failures.is_empty(), "{} of {reads} reads went wrong; first: {}", failures.len(), failures[0]);
    }

    #[test]
    fn keep_zero_truncates_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 4096, 0).unwrap();
        writer.write_all(&vec![b'x'; 10_000]).unwrap();
        assert!(std::fs::metadata(&log).unwrap().len() <= 4096);
        assert!(!rotated_path(&log, 1).exists());
    }

    #[test]
    fn long_lines_come_back_in_bounded_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 1 << 30, 1).unwrap();
        writer.write_all(&vec![0u8; 5 * MAX_LINE_BYTES]).unwrap();
        writer.write_all(b"\nlast\n").unwrap();
        let tail = tail_lines(&log, 2, |_| true);
        assert_eq!(tail[1], b"last");
        assert_eq!(tail[0].len(), MAX_LINE_BYTES);
    }

    #[test]
    fn bytes_survive_and_filters_apply() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 1 << 20, 1).unwrap();
        writer.write_all(b"ok 1\n\xff\xfe error here\nok 2\nno newline at end").unwrap();
        let errors = tail_lines(&log, 10, |l| l.windows(5).any(|w| w == b"error"));
        assert_eq!(errors, vec![b"\xff\xfe error here".to_vec()]);
        let last = tail_lines(&log, 1, |_| true);
        assert_eq!(last, vec![b"no newline at end".to_vec()]);
    }

    #[test]
    fn a_separator_is_a_line_of_its_own_and_counts_as_output() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 1 << 20, 1).unwrap();
        writer.write_separator("--- first ---\n").unwrap();
        writer.write_all(b"done\n").unwrap();
        writer.write_separator("--- after a whole line ---\n").unwrap();
        writer.write_all(b"no newline").unwrap();
        writer.write_separator("--- after a cut line ---\n").unwrap();
        let text = std::fs::read(&log).unwrap();
        assert_eq!(text, b"--- first ---\ndone\n--- after a whole line ---\nno newline\n--- after a cut line ---\n");
        assert_eq!(LogFiles::open(&log).end(), text.len() as u64, "cursors count the separators");
        // Right after a rotation the file is empty: nothing to end.
        let rotating = dir.path().join("small.log");
        let mut writer = RotatingWriter::create(&rotating, 10, 3).unwrap();
        writer.write_all(b"0123456789").unwrap();
        writer.write_separator("--- s ---\n").unwrap();
        assert_eq!(std::fs::read(&rotating).unwrap(), b"--- s ---\n");
    }

    /// Bytes and entries in `dir`, hidden files (a dropped log) included,
    /// but for the start record: one fixed-size record, whatever is written.
    fn dir_usage(dir: &Path) -> (u64, usize) {
        let mut usage = (0, 0);
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() == ".output.log.start" {
                assert_eq!(entry.metadata().unwrap().len(), RECORD_LEN as u64);
                continue;
            }
            // A file being unlinked meanwhile no longer counts.
            if let Ok(meta) = entry.metadata() {
                usage.0 += meta.len();
                usage.1 += 1;
            }
        }
        usage
    }

    #[test]
    fn disk_use_stays_bounded_however_slow_deletion_is() {
        use std::sync::{mpsc, Arc, Mutex};
        const MAX: u64 = 100;
        const KEEP: u32 = 2;
        enum Event {
            WriterWaits,
            WriterDone,
        }
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let (events, event_rx) = mpsc::channel();
        let (permits, permit_rx) = mpsc::channel::<()>();
        let permit_rx = Mutex::new(permit_rx);
        let seam_events = Mutex::new(events.clone());
        let mut writer = RotatingWriter::create(&log, MAX, KEEP).unwrap();
        // A deletion lasts until the test hands out a permit, and the test hands
        // one out only when the writer says it cannot go on without it: every
        // deletion is as slow as it can be without stopping the writer for good.
        writer.set_seam(Arc::new(move |point| match point {
            "unlink" => {
                let _ = permit_rx.lock().unwrap().recv();
            }
            "wait for unlink" => {
                let _ = seam_events.lock().unwrap().send(Event::WriterWaits);
            }
            _ => {}
        }));
        let dir_path = dir.path().to_path_buf();
        let writing = std::thread::spawn(move || {
            // Disk use only grows by the writer's own steps, so its peak is seen
            // right after one of them: after each write.
            let mut peak = (0, 0);
            for i in 0..1000 {
                writer.write_all(format!("{i:09}\n").as_bytes()).unwrap();
                let (bytes, files) = dir_usage(&dir_path);
                peak = (bytes.max(peak.0), files.max(peak.1));
            }
            events.send(Event::WriterDone).unwrap();
            drop(writer);
            peak
        });
        while let Event::WriterWaits = event_rx.recv().unwrap() {
            permits.send(()).unwrap();
        }
        for _ in 0..1000 {
            let _ = permits.send(());
        }
        let (bytes, files) = writing.join().unwrap();
        let bound = MAX * (KEEP as u64 + 1) + MAX;
        assert!(bytes <= bound, "peak {bytes} bytes on disk, bound {bound} (max_bytes x (keep + 1) + one being deleted)");
        assert!(files <= KEEP as usize + 2, "peak {files} files, bound {} (keep + 1, + one being deleted)", KEEP + 2);
        assert_eq!(dir_usage(dir.path()).1, KEEP as usize + 1, "the writer gone, only the kept files remain");
    }

    /// Lets exactly one of two threads run between pause points; at each
    /// point a seeded coin decides whether the other one runs next. One seed
    /// is one exact interleaving of the two threads' file-system steps.
    struct Baton {
        state: std::sync::Mutex<BatonState>,
        turned: std::sync::Condvar,
    }

    struct BatonState {
        turn: usize,
        rng: u64,
        /// Hand over at a point with probability 1/odds: long runs of one side too.
        odds: u64,
        finished: [bool; 2],
    }

    impl Baton {
        fn new(seed: u64) -> std::sync::Arc<Baton> {
            std::sync::Arc::new(Baton {
                state: std::sync::Mutex::new(BatonState {
                    turn: 0,
                    rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                    odds: 1 + seed % 8,
                    finished: [false; 2],
                }),
                turned: std::sync::Condvar::new(),
            })
        }

        fn pause(&self, me: usize) {
            let mut s = self.state.lock().unwrap();
            while s.turn != me {
                s = self.turned.wait(s).unwrap();
            }
            s.rng ^= s.rng << 13;
            s.rng ^= s.rng >> 7;
            s.rng ^= s.rng << 17;
            if !s.finished[1 - me] && s.rng.is_multiple_of(s.odds) {
                s.turn = 1 - me;
                self.turned.notify_all();
                while s.turn != me {
                    s = self.turned.wait(s).unwrap();
                }
            }
        }

        fn finish(&self, me: usize) {
            let mut s = self.state.lock().unwrap();
            s.finished[me] = true;
            s.turn = 1 - me;
            self.turned.notify_all();
        }
    }

    /// One interleaving of a writer (lines `000000\n` …) and a follower
    /// started on its empty log; gives what the follower printed and what the
    /// log files held once the writer was gone.
    fn follow_one_interleaving(seed: u64, keep: u32, lines: usize) -> (Vec<u8>, Vec<u8>) {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        const WRITER: usize = 0;
        const FOLLOWER: usize = 1;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let baton = Baton::new(seed);
        let done = Arc::new(AtomicBool::new(false));
        let mut writer = RotatingWriter::create(&log, 64, keep).unwrap();
        let mut follower = LogFollower::from_end(&log);
        let b = baton.clone();
        // The deleter unlinks a file that has no name any more: nobody can see it.
        writer.set_seam(Arc::new(move |point| if point != "unlink" { b.pause(WRITER) }));
        let b = baton.clone();
        follower.set_seam(Arc::new(move |_| b.pause(FOLLOWER)));

        let (b, d) = (baton.clone(), done.clone());
        let writing = std::thread::spawn(move || {
            b.pause(WRITER);
            for i in 0..lines {
                writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
            }
            // As the supervisor: its last write, then it is gone.
            drop(writer);
            d.store(true, Ordering::SeqCst);
            b.finish(WRITER);
        });
        let b = baton.clone();
        let following = std::thread::spawn(move || {
            b.pause(FOLLOWER);
            let mut out = Vec::new();
            let mut polls = 0u64;
            let result = follower.follow(&mut out, std::time::Duration::ZERO, || {
                polls += 1;
                assert!(polls < 1_000_000, "seed {seed}: follow never ends");
                Ok(done.load(Ordering::SeqCst))
            });
            b.finish(FOLLOWER);
            result.unwrap();
            out
        });
        writing.join().unwrap();
        let out = following.join().unwrap();
        let mut on_disk = Vec::new();
        copy_all(&log, &mut on_disk).unwrap();
        (out, on_disk)
    }

    fn numbers(bytes: &[u8]) -> Vec<usize> {
        std::str::from_utf8(bytes).unwrap().lines().map(|l| l.parse().unwrap()).collect()
    }

    /// One interleaving of a writer (lines `000000\n` …, keep 1) and a slow
    /// reader by cursor that pauses at each step of its look at the files
    /// and reads at most 2 lines a time: it falls whole files behind. Each
    /// read must place its files exactly: the bytes it reads from a position
    /// are the line written there, and what lies between its cursor and
    /// that position (the bytes rotated away) is no more and no less than
    /// what was dropped. Returns what went wrong.
    fn cursor_reads_in_one_interleaving(seed: u64) -> Vec<String> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        const WRITER: usize = 0;
        const READER: usize = 1;
        const LINE: u64 = 7;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let baton = Baton::new(seed);
        let done = Arc::new(AtomicBool::new(false));
        let mut writer = RotatingWriter::create(&log, 64, 1).unwrap();
        let b = baton.clone();
        writer.set_seam(Arc::new(move |point| if point != "unlink" { b.pause(WRITER) }));
        let (b, d) = (baton.clone(), done.clone());
        let writing = std::thread::spawn(move || {
            b.pause(WRITER);
            for i in 0..120 {
                writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
            }
            drop(writer);
            d.store(true, Ordering::SeqCst);
            b.finish(WRITER);
        });
        let b = baton.clone();
        let reading = std::thread::spawn(move || {
            let seams = Seams(Some(Arc::new({
                let b = b.clone();
                move |_| b.pause(READER)
            })));
            let mut failures = Vec::new();
            let mut cursor = 0u64;
            loop {
                let last = done.load(Ordering::SeqCst);
                b.pause(READER);
                let files = LogFiles::open_seamed(&log, &seams);
                let (oldest, end) = (files.oldest(), files.end());
                if files.record_problem.is_some() || oldest % LINE != 0 || end % LINE != 0 || end < cursor {
                    failures.push(format!("seed {seed}: placed at {oldest}..{end} ({:?}) after cursor {cursor}", files.record_problem));
                    break;
                }
                let from = cursor.max(oldest);
                let mut reader = files.reader_from(from);
                let mut bytes = vec![0u8; (2 * LINE) as usize];
                let mut got = 0;
                while got < bytes.len() {
                    match reader.read(&mut bytes[got..]).unwrap() {
                        0 => break,
                        n => got += n,
                    }
                }
                // What the position says is there, and what is there.
                let lines = std::str::from_utf8(&bytes[..got]).unwrap();
                for (k, line) in lines.lines().enumerate() {
                    let at = from + k as u64 * LINE;
                    if line.parse::<u64>().ok() != Some(at / LINE) {
                        failures.push(format!("seed {seed}: byte {at} (cursor {cursor}, {} rotated away) holds line {line:?}", oldest.saturating_sub(cursor)));
                    }
                }
                cursor = from + got as u64;
                if last && cursor == end {
                    break;
                }
            }
            b.finish(READER);
            failures
        });
        writing.join().unwrap();
        reading.join().unwrap()
    }

    #[test]
    fn a_reader_by_cursor_that_falls_files_behind_is_told_exactly_what_rotation_took() {
        let failures: Vec<String> = (0..300).flat_map(cursor_reads_in_one_interleaving).collect();
        assert!(failures.is_empty(), "{} reads misplaced; first: {}", failures.len(), failures[0]);
    }

    #[test]
    fn follow_ends_only_after_reading_everything_written() {
        // keep 20 holds all 60 lines (7 rotations): nothing may be missing.
        let all: Vec<u8> = (0..60).flat_map(|i| format!("{i:06}\n").into_bytes()).collect();
        let failures: Vec<String> = (0..400)
            .filter_map(|seed| {
                let (out, _) = follow_one_interleaving(seed, 20, 60);
                let got = numbers(&out);
                let missing: Vec<usize> = (0..60).filter(|i| !got.contains(i)).collect();
                (out != all).then(|| format!("seed {seed}: printed {} of 60 lines, last {:?}; missing {missing:?}", got.len(), got.last()))
            })
            .collect();
        assert!(failures.is_empty(), "{} of 400 interleavings failed; first: {}", failures.len(), failures[0]);
    }

    #[test]
    fn follow_that_falls_behind_rotation_skips_only_dropped_files() {
        // keep 1: files are dropped while the follower is behind; it may lose
        // those, but prints the rest in order and everything still on disk.
        let failures: Vec<String> = (0..400)
            .filter_map(|seed| {
                let (out, on_disk) = follow_one_interleaving(seed, 1, 60);
                let got = numbers(&out);
                if !got.windows(2).all(|w| w[0] < w[1]) {
                    return Some(format!("seed {seed}: out of order or repeated: {got:?}"));
                }
                let unread: Vec<usize> = numbers(&on_disk).into_iter().filter(|l| !got.contains(l)).collect();
                if !unread.is_empty() || got.last() != Some(&59) {
                    return Some(format!("seed {seed}: lines still on disk never printed: {unread:?}; printed {got:?}"));
                }
                None
            })
            .collect();
        assert!(failures.is_empty(), "{} of 400 interleavings failed; first: {}", failures.len(), failures[0]);
    }

    #[test]
    fn a_follower_goes_on_where_the_tail_ends() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 64, 10).unwrap();
        let line = |i: usize| format!("{i:06}\n");
        for i in 0..20 {
            writer.write_all(line(i).as_bytes()).unwrap();
        }
        let (tail, mut follower) = tail_then_follow(&log, 3);
        let (none, mut from_now) = tail_then_follow(&log, 0);
        let mut from_end = LogFollower::from_end(&log);
        assert_eq!(tail, vec![b"000017".to_vec(), b"000018".to_vec(), b"000019".to_vec()]);
        assert!(none.is_empty());
        // Two rotations after the tail was taken.
        for i in 20..40 {
            writer.write_all(line(i).as_bytes()).unwrap();
        }
        let after: Vec<u8> = (20..40).flat_map(|i| line(i).into_bytes()).collect();
        for follower in [&mut follower, &mut from_now, &mut from_end] {
            let mut out = Vec::new();
            follower.read_new(&mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(after.clone()).unwrap());
        }
    }

    #[test]
    fn a_line_still_being_written_is_followed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 1 << 20, 1).unwrap();
        writer.write_all(b"one\ntwo\nthr").unwrap();
        for n in [0, 1, 2, 5] {
            let (tail, mut follower) = tail_then_follow(&log, n);
            // The unfinished line counts as the last of the `n`.
            let expected: &[&[u8]] = match n {
                0 | 1 => &[],
                2 => &[b"two"],
                _ => &[b"one", b"two"],
            };
            assert_eq!(tail, expected, "n {n}");
            let mut out = Vec::new();
            follower.read_new(&mut out).unwrap();
            assert_eq!(out, b"thr", "n {n}");
        }
        let (_, mut follower) = tail_then_follow(&log, 1);
        writer.write_all(b"ee\nfour\n").unwrap();
        let mut out = Vec::new();
        follower.read_new(&mut out).unwrap();
        assert_eq!(out, b"three\nfour\n");
    }

    #[test]
    fn a_follower_from_the_start_reads_the_rotated_files_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut follower = LogFollower::from_start(&log);
        let mut out = Vec::new();
        assert_eq!(follower.read_new(&mut out).unwrap(), 0, "no log yet");
        let mut writer = RotatingWriter::create(&log, 64, 10).unwrap();
        let all: Vec<u8> = (0..40).flat_map(|i| format!("{i:06}\n").into_bytes()).collect();
        writer.write_all(&all).unwrap();
        assert!(rotated_path(&log, 4).exists());
        follower.read_new(&mut out).unwrap();
        assert_eq!(out, all);
        let mut from_start = Vec::new();
        LogFollower::from_start(&log).read_new(&mut from_start).unwrap();
        assert_eq!(from_start, all);
    }

    /// Bytes this thread has read through read(2) and pread(2) so far.
    #[cfg(target_os = "linux")]
    fn bytes_read_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().parse().unwrap()
    }

    /// A log that rotated (its oldest kept byte is not 0): a wrong start
    /// record would shift every position in it.
    fn rotated_log(dir: &Path) -> PathBuf {
        let log = dir.join("output.log");
        let mut writer = RotatingWriter::create(&log, 64, 1).unwrap();
        for i in 0..40 {
            writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
        }
        assert!(LogFiles::open(&log).oldest() > 0, "the test needs dropped files");
        log
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_start_record_of_100_mb_is_read_no_further_than_a_record_and_said_to_be_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let log = rotated_log(dir.path());
        let record = StartRecord::path(&log);
        // Sparse: costs no disk, but reading it whole reads 100 MB of zeros.
        std::fs::OpenOptions::new().write(true).open(&record).unwrap().set_len(100 << 20).unwrap();
        let before = bytes_read_by_this_thread();
        let files = LogFiles::open(&log);
        let read = bytes_read_by_this_thread() - before;
        assert!(read < 64 * 1024, "{read} bytes read to place a log's files");
        let problem = files.record_problem.expect("reported");
        assert!(problem.contains("is corrupt (it is 104857600 bytes; a start record is 93)"), "{problem}");
        assert!(problem.contains(&record.display().to_string()), "{problem}");
    }

    #[test]
    fn a_start_record_with_a_byte_changed_is_said_to_be_corrupt_and_places_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = rotated_log(dir.path());
        let good = LogFiles::open(&log);
        assert_eq!((good.record_problem.as_deref(), good.end()), (None, 40 * 7));
        let record = StartRecord::path(&log);
        let original = std::fs::read(&record).unwrap();
        // Every bit of every number in the record in turn: one bit changed is
        // the likeliest fault, and the record still looks like one.
        for at in (4..RECORD_LEN - 1).filter(|&at| original[at].is_ascii_hexdigit()) {
            let value = (original[at] as char).to_digit(16).unwrap();
            for bit in 0..4 {
                let mut changed = original.clone();
                changed[at] = std::char::from_digit(value ^ (1 << bit), 16).unwrap() as u8;
                std::fs::write(&record, &changed).unwrap();
                let files = LogFiles::open(&log);
                let end = files.end();
                let shown = String::from_utf8_lossy(&changed).into_owned();
                let problem = files.record_problem.unwrap_or_else(|| panic!("{shown:?}: not reported; the log ends at {end}"));
                assert!(problem.contains("is corrupt (its checksum does not match"), "{shown:?}: {problem}");
            }
        }
        // Records an earlier version wrote still place the log.
        let ((dev, ino), start) = StartRecord::parse(&original).unwrap();
        let v1 = format!("pm1 {dev:016x} {ino:016x} {start:016x} {:016x}\n", StartRecord::sum_v1((dev, ino), start));
        let v2 = format!("pm2 {dev:016x} {ino:016x} {start:016x} {:016x}\n", StartRecord::sum_v2((dev, ino), start));
        for earlier in [v1, v2] {
            std::fs::write(&record, earlier).unwrap();
            let files = LogFiles::open(&log);
            assert_eq!((files.record_problem.as_deref(), files.end()), (None, 40 * 7));
        }
        // A writer taking over (an orphan's watcher) leaves it as it found it: still said.
        std::fs::write(&record, b"pm1 junk\n").unwrap();
        let mut writer = RotatingWriter::resume(&log, 64, 1).unwrap();
        writer.write_all(&b"000040\n".repeat(20)).unwrap();
        assert!(LogFiles::open(&log).record_problem.is_some());
        // A new log starts a new record.
        drop(writer);
        RotatingWriter::create(&log, 64, 1).unwrap().write_all(b"x\n").unwrap();
        let files = LogFiles::open(&log);
        assert_eq!((files.end(), files.record_problem), (2, None));
    }

    /// The parser of the versions before the start record was checked
    /// strictly (commit b3bdddc), copied as it was: a server or watcher still
    /// running that code after an upgrade reads the records this version
    /// writes, and must place the log where this version does. It reads the
    /// whole file, takes `pm1 ` and every whitespace-separated hex field and
    /// needs exactly four, the last the `pm1` checksum of the other three.
    fn parse_as_before_b3bdddc(text: &str) -> Option<(FileId, u64)> {
        let fields: Vec<u64> =
            text.strip_prefix("pm1 ").unwrap_or("").split_whitespace().filter_map(|f| u64::from_str_radix(f, 16).ok()).collect();
        if let [dev, ino, start, sum] = fields[..] {
            if StartRecord::sum_v1((dev, ino), start) == sum {
                return Some(((dev, ino), start));
            }
        }
        None
    }

    #[test]
    fn a_start_record_this_version_writes_places_the_log_for_a_reader_of_an_earlier_version_too() {
        let dir = tempfile::tempdir().unwrap();
        let log = rotated_log(dir.path());
        let files = LogFiles::open(&log);
        assert_eq!(files.record_problem, None);
        let current = files.files.last().unwrap();
        let record = StartRecord::path(&log);
        let text = std::fs::read_to_string(&record).unwrap();
        assert_eq!(parse_as_before_b3bdddc(&text), Some((current.id, current.start)), "{text:?}");
        // And the other way: a writer of an earlier version (an orphan's
        // watcher that outlived the upgrade) writes its shorter record over
        // this one's; the log is still placed, by what it wrote.
        let (id, start) = (current.id, current.start);
        let earlier = format!("pm1 {:016x} {:016x} {:016x} {:016x}\n", id.0, id.1, start, StartRecord::sum_v1(id, start));
        assert_eq!(earlier.len(), 72);
        std::fs::OpenOptions::new().write(true).open(&record).unwrap().write_all(earlier.as_bytes()).unwrap();
        let files = LogFiles::open(&log);
        assert_eq!((files.record_problem.as_deref(), files.end()), (None, 40 * 7));
    }

    #[test]
    fn an_oversized_start_record_heals_at_the_next_rotation_of_a_running_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 64, 1).unwrap();
        for i in 0..20 {
            writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
        }
        let record = StartRecord::path(&log);
        std::fs::OpenOptions::new().write(true).open(&record).unwrap().set_len(4096).unwrap();
        assert!(LogFiles::open(&log).record_problem.is_some(), "an oversized record is said");
        // 64-byte files of 7-byte lines: ten lines rotate at least once.
        for i in 20..30 {
            writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
        }
        let files = LogFiles::open(&log);
        assert_eq!((files.record_problem.as_deref(), files.end()), (None, 30 * 7));
        assert!(std::fs::metadata(&record).unwrap().len() < 4096);
    }

    #[test]
    fn missing_or_empty_log_gives_no_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        assert!(tail_lines(&log, 5, |_| true).is_empty());
        std::fs::write(&log, b"").unwrap();
        assert!(tail_lines(&log, 5, |_| true).is_empty());
    }
}
