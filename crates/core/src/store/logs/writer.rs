//! The writing side of a job's log: its one writer (the supervisor, or the
//! orphan watcher after it), which counts what it writes and rotates the file
//! at `max_bytes` (see `rotation`).

mod rotation;

use super::files::file_id;
use super::seam::Seams;
#[cfg(test)]
use super::seam::Seam;
use super::start_record::StartRecord;
use super::stream::LogFiles;
use crate::os::sys::OpenOptionsExt;
use crate::{Error, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

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
    /// No record yet, and none needed until the first rotation: a log whose
    /// record is absent starts at 0, which a new log's first file does. Not
    /// making it at the start saves creating a file (an inode) on the way to
    /// the job's exec; `rotate` makes it before the first file moves.
    record_later: bool,
    dropped: u64,
    /// The unlink of the last dropped file, running aside (see `drop_oldest`).
    deleter: Option<std::thread::JoinHandle<()>>,
    seams: Seams,
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
        let (base, record, record_later) = if truncate {
            // A record left from an earlier log under this name is emptied
            // (read as absent: start at 0); none is made.
            match StartRecord::open_existing_emptied(path) {
                Some(record) => (0, Some(record), false),
                None => (0, None, true),
            }
        } else {
            let id = file_id(&file);
            let files = LogFiles::open(path);
            let base = files.files.iter().find(|f| Some(f.id) == id).map_or(0, |f| f.start);
            // Where the log stands is unknown: a record written now would
            // place it wrongly and hide that, so the corrupt one stays, said.
            let record = if files.record_problem.is_some() { None } else { StartRecord::open(path, false) };
            (base, record, false)
        };
        let mut writer = RotatingWriter {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            file,
            written,
            base,
            record,
            record_later,
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
}

/// Windows's output threads write into the log (os/output_copy_windows.rs).
#[cfg(windows)]
impl crate::os::output_copy_windows::Sink for RotatingWriter {
    fn take(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.write_all(bytes).map_err(|e| e.to_string())
    }
}
