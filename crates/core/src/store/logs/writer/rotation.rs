//! Rotation and retention: the writer's files renamed down (`output.log` →
//! `.1` → `.2` …) and the oldest past `keep` dropped, its unlink aside.

use super::{open_log, RotatingWriter};
use crate::store::logs::files::rotated_path;
use crate::store::logs::start_record::StartRecord;
use crate::{Error, Result};
use std::fs::File;
use std::io::{Seek, SeekFrom};

impl Drop for RotatingWriter {
    /// A dropped file is gone from disk before the writer is.
    fn drop(&mut self) {
        self.wait_for_deleter();
    }
}

impl RotatingWriter {
    /// Renames output.log → .1 → .2 …, dropping what goes past `keep`. The
    /// writer is the log's only writer, so no line is lost between rename and reopen.
    ///
    /// The oldest file is unlinked first so that no rename ever replaces an
    /// existing file, and the new file is created rather than truncated: on
    /// ext4 both a rename over a file and a truncate to zero force the data to
    /// disk (auto_da_alloc), which made rotation cost a disk flush per file.
    pub(super) fn rotate(&mut self) -> Result<()> {
        if self.record_later {
            // The first rotation: the record is made now, naming the file
            // about to move, so that a reader never places the files after
            // it by an absent record (which says "nothing dropped"; with
            // `keep` 0 this rotation drops the first file).
            self.record_later = false;
            self.record = StartRecord::open(&self.path, true);
            self.record_start();
        }
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

