//! A log's files read forward as one stream with positions (cursors): the
//! files opened together, placed by the start record, read from a position.

use super::files::{file_id, id_at, log_files_newest_first, FileId};
use super::seam::Seams;
use super::start_record::{Record, StartRecord};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

/// How much a reader reads at a time when it walks a file backwards.
pub(super) const TAIL_BLOCK: usize = 64 * 1024;

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

/// How often a reader looks again at a log caught halfway through a
/// rotation before it takes what it sees (the writer died there): about
/// 150 ms, most of it asleep.
const OPEN_ATTEMPTS: u32 = 200;

/// One file of a log as a reader took it: opened, with its length then and
/// where it starts in everything written to the log.
pub struct LogFile {
    pub(super) file: File,
    pub(super) id: FileId,
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

    pub(super) fn open_seamed(log: &Path, seams: &Seams) -> LogFiles {
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
