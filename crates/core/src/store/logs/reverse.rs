//! The tail reader: a log's lines read backwards from its end across its
//! rotated files, and the tail a follower goes on from.

use super::follow::{Held, LogFollower};
use super::stream::{LogFiles, TAIL_BLOCK};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Lines longer than this are returned in pieces by the tail reader, so that
/// output without newlines (`head -c 1G /dev/zero`) costs no more to tail than
/// ordinary lines.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

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
