//! The job log: one writer (the supervisor) that rotates by rename, and a
//! tail reader that walks backwards from the end across rotated files.

use super::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Lines longer than this are returned in pieces by the tail reader, so that
/// output without newlines (`head -c 1G /dev/zero`) costs no more to tail than
/// ordinary lines.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

const TAIL_BLOCK: usize = 64 * 1024;

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
    let mut options = super::paths::options_nofollow();
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
    dropped: u64,
    /// Unlinks of dropped files, running aside (see `drop_oldest`).
    deleters: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for RotatingWriter {
    /// A dropped file is gone from disk before the writer is.
    fn drop(&mut self) {
        for deleter in self.deleters.drain(..) {
            let _ = deleter.join();
        }
    }
}

impl RotatingWriter {
    pub fn create(path: &Path, max_bytes: u64, keep: u32) -> Result<Self> {
        let file = open_log(path, true)?;
        Ok(RotatingWriter {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(1),
            keep,
            file,
            written: 0,
            dropped: 0,
            deleters: Vec::new(),
        })
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

    fn write_raw(&mut self, data: &[u8]) -> Result<()> {
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
        let reopened = open_log(&self.path, true);
        self.written = 0;
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
            match std::fs::rename(&from, &to) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("rotate log", from, e)),
            }
        }
        if self.keep > 0 {
            let first = rotated_path(&self.path, 1);
            std::fs::rename(&self.path, &first).map_err(|e| Error::io("rotate log", &self.path, e))?;
        }
        Ok(())
    }

    /// Takes the file past `keep` out of the way. Freeing a large file's
    /// blocks takes tens of milliseconds on ext4, so it is renamed to a hidden
    /// name (instant, and never over an existing file) and unlinked on a
    /// thread while the job's output keeps flowing; for those milliseconds the
    /// disk holds one file more than `keep + 1`.
    fn drop_oldest(&mut self) -> Result<()> {
        let oldest = rotated_path(&self.path, self.keep);
        let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("output.log");
        let doomed = self.path.with_file_name(format!(".{name}.dropped-{}", self.dropped));
        self.dropped += 1;
        match std::fs::rename(&oldest, &doomed) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("remove old log", oldest, e)),
        }
        self.deleters.retain(|d| !d.is_finished());
        match std::thread::Builder::new().name("log-drop".into()).spawn({
            let doomed = doomed.clone();
            move || {
                let _ = std::fs::remove_file(doomed);
            }
        }) {
            Ok(deleter) => self.deleters.push(deleter),
            Err(_) => {
                let _ = std::fs::remove_file(&doomed);
            }
        }
        Ok(())
    }
}

/// Reads lines backwards over `output.log`, `.1`, `.2` … as one stream.
pub struct ReverseLines {
    /// Opened newest first, each file once (a rotation during the opening
    /// makes `.1` the file already opened as `output.log`: it is skipped).
    files: Vec<File>,
    next_file: usize,
    current: Option<(File, u64)>,
    /// Unconsumed bytes that precede everything already returned.
    pending: Vec<u8>,
    started: bool,
    exhausted: bool,
}

impl ReverseLines {
    /// `log` is the path of `output.log`; rotated siblings are found by probing.
    pub fn open(log: &Path) -> ReverseLines {
        use std::os::unix::fs::MetadataExt;
        let mut seen = std::collections::HashSet::new();
        let files = log_files_newest_first(log)
            .iter()
            .filter_map(|path| super::paths::open_read(path).ok())
            .filter(|file| file.metadata().map(|m| seen.insert((m.dev(), m.ino()))).unwrap_or(false))
            .collect();
        ReverseLines {
            files,
            next_file: 0,
            current: None,
            pending: Vec::new(),
            started: false,
            exhausted: false,
        }
    }

    /// Prepends the block that precedes `pending`; false at the start of the oldest file.
    fn fill(&mut self) -> bool {
        loop {
            if self.current.is_none() {
                if self.next_file >= self.files.len() {
                    return false;
                }
                let Ok(file) = self.files[self.next_file].try_clone() else { return false };
                self.next_file += 1;
                let len = file.metadata().map(|m| m.len()).unwrap_or(0);
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

/// `output.log` (if present) then `output.log.1`, `.2` … up to the first gap.
pub fn log_files_newest_first(log: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if log.exists() {
        files.push(log.to_path_buf());
    }
    for index in 1.. {
        let rotated = rotated_path(log, index);
        if !rotated.exists() {
            break;
        }
        files.push(rotated);
    }
    files
}

/// The whole log, oldest first, streamed to `sink`.
pub fn copy_all(log: &Path, sink: &mut dyn Write) -> std::io::Result<()> {
    for path in log_files_newest_first(log).iter().rev() {
        match super::paths::open_read(path) {
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
    fn missing_or_empty_log_gives_no_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        assert!(tail_lines(&log, 5, |_| true).is_empty());
        std::fs::write(&log, b"").unwrap();
        assert!(tail_lines(&log, 5, |_| true).is_empty());
    }
}
