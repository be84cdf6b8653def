//! The follower: a log read as it is written (`run-bg logs --follow`),
//! across rotations.

use super::files::{file_id, id_at, rotated_path, FileId, MAX_KEEP};
use super::seam::Seams;
#[cfg(test)]
use super::seam::Seam;
use crate::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The file a follower reads and how far.
pub(super) struct Held {
    file: File,
    id: FileId,
    pos: u64,
    /// Where its first byte lies in everything written to the log, when the
    /// log's files could be placed (see `LogFiles`): what a drop took from
    /// under a follower is then said in bytes.
    start: Option<u64>,
}

impl Held {
    pub(super) fn new(mut file: File, pos: u64) -> Option<Held> {
        let id = file_id(&file)?;
        file.seek(SeekFrom::Start(pos)).ok()?;
        Some(Held { file, id, pos, start: None })
    }

    /// With its place in the log, as the log's files place it now.
    fn placed(mut self, log: &Path) -> Held {
        let files = super::LogFiles::open(log);
        if files.record_problem.is_none() {
            self.start = files.files.iter().find(|f| f.id == self.id).map(|f| f.start);
        }
        self
    }
}

/// What files dropped past `keep` before the follower read them held.
enum Dropped {
    Bytes(u64),
    /// Some: the log's files could not be placed to say how much.
    Unknown,
}

/// Said in the followed output where files were dropped, so that a gap is
/// never silent: `--since` says the same of a cursor that fell behind.
fn gap_note(dropped: &Dropped) -> String {
    match dropped {
        Dropped::Bytes(bytes) => format!("[run-bg: {bytes} bytes rotated away before they were read]\n"),
        Dropped::Unknown => "[run-bg: output rotated away before it was read]\n".to_string(),
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
    /// The last byte given to the sink: a gap's note starts a line of its own.
    last_byte: Option<u8>,
}

impl LogFollower {
    pub(super) fn new(log: &Path, held: Option<Held>) -> LogFollower {
        let held = held.map(|held| held.placed(log));
        LogFollower {
            log: log.to_path_buf(),
            held,
            buffer: vec![0u8; 64 * 1024],
            seams: Seams::default(),
            last_byte: None,
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
                self.held = self.open_oldest().map(|held| held.placed(&self.log));
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
                Some((next, dropped)) => {
                    if let Some(dropped) = dropped {
                        copied += self.note_gap(sink, &dropped)?;
                    }
                    self.held = Some(next);
                }
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
                    self.last_byte = Some(self.buffer[n - 1]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        Ok(copied)
    }

    /// Writes the note of a gap on a line of its own.
    fn note_gap(&mut self, sink: &mut dyn Write, dropped: &Dropped) -> std::io::Result<u64> {
        let mut note = gap_note(dropped);
        if self.last_byte.is_some_and(|b| b != b'\n') {
            note.insert(0, '\n');
        }
        sink.write_all(note.as_bytes())?;
        self.last_byte = Some(b'\n');
        Ok(note.len() as u64)
    }

    /// The file written after the held one, which has been rotated, and what
    /// files dropped past `keep` in between held, if any were; None while a
    /// rotation is halfway done.
    ///
    /// The writer renames from the oldest file down to `output.log`, so while
    /// the held file stays at `.<i>`, the name `.<i-1>` (or `output.log`) is
    /// either free or taken by the file written after it. Finding the held
    /// file at the same index before and after opening that name proves
    /// that no rotation went past it in between.
    fn successor(&mut self) -> Option<(Held, Option<Dropped>)> {
        let (held, held_end) = self.held.as_ref().map(|h| (h.id, h.start.map(|start| start + h.pos)))?;
        loop {
            self.seams.at("find held");
            let Some(index) = (1..=MAX_KEEP).find(|&i| id_at(&rotated_path(&self.log, i)) == Some(held)) else {
                // Dropped past `keep` (renamed aside): the oldest file kept
                // comes next; whatever was dropped in between is gone, and
                // said to be: the oldest file placed after where we stopped.
                let oldest = self.open_oldest()?.placed(&self.log);
                let dropped = match (held_end, oldest.start) {
                    (Some(end), Some(start)) => (start > end).then_some(Dropped::Bytes(start - end)),
                    _ => Some(Dropped::Unknown),
                };
                return Some((oldest, dropped));
            };
            self.seams.at("open next");
            let next = File::open(rotated_path(&self.log, index - 1)).ok()?;
            self.seams.at("check held");
            if id_at(&rotated_path(&self.log, index)) == Some(held) {
                let next = Held::new(next, 0)?;
                return Some((Held { start: held_end, ..next }, None));
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
