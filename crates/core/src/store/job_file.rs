//! Each job's own record, `jobs/<id>/job.json`, as a file: read (never
//! through a symlink), padded so that an outcome fits in place on a full
//! disk; and the job directories whose record cannot be read
//! (`CorruptRecord`). The registry writes and merges them
//! (`store::registry`).

use crate::model::job::Job;
use crate::os::procinfo;
use crate::store::index;
use crate::store::paths::{self, Home};
use crate::os::sys::FileExt;
use std::path::{Path, PathBuf};

/// A job's job.json is written at least this much larger than its record and
/// padded with spaces (valid JSON), so that recording the outcome later can
/// overwrite it in place when no new block can be had (see `write_job_file`).
pub(crate) const JOB_FILE_SLACK: usize = 1024;
pub(crate) const JOB_FILE_BLOCK: usize = 4096;


/// A job directory whose job.json cannot be read as its job's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    pub id: String,
    /// The job.json that could not be read.
    pub file: PathBuf,
    /// Why: the parser's error, or the id it names instead.
    pub reason: String,
    /// When the file was last written (ms since the epoch): its age for `prune`.
    pub modified_ms: u64,
    /// It is garbage for sure (bytes that are no JSON, a record of another
    /// job, a file another user owns or a symlink), so `kill` and `prune`
    /// may delete its directory. Otherwise it may be a good record this
    /// version cannot read (a newer version's) or a read that failed for a
    /// moment (EMFILE, EIO): said, never deleted.
    pub removable: bool,
}

impl CorruptRecord {
    /// Said by `list`, `check` and every verb that names the job.
    pub fn describe(&self) -> String {
        if !self.removable {
            return format!(
                "job {} cannot be read: its record {} ({}); not removed: it may be a newer version's record or a \
                 read that failed for now; look at the file (`run-bg kill {}` ends whatever of it still runs)",
                self.id,
                self.file.display(),
                self.reason,
                self.id
            );
        }
        format!(
            "job {} is corrupt: its record {} cannot be read ({}). `run-bg kill {}` ends whatever of it still runs \
             and removes its directory; `run-bg prune` removes it once nothing of it runs",
            self.id,
            self.file.display(),
            self.reason,
            self.id
        )
    }
}

/// Job `id`'s directory, if it holds a job.json that is not a record of `id`.
pub(crate) fn corrupt_record(home: &Home, id: &str) -> Option<CorruptRecord> {
    let dir = home.job_dir(id);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let file = dir.join("job.json");
    let bytes = match paths::read_file(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            // Another user's file (refused by `open_read`) or a symlink: not ours.
            let meta = std::fs::symlink_metadata(&file).ok();
            let foreign = e.kind() == std::io::ErrorKind::PermissionDenied
                && meta.as_ref().is_some_and(|m| crate::os::sys::MetadataExt::uid(m) != procinfo::euid());
            let symlink = meta.is_some_and(|m| m.file_type().is_symlink());
            return Some(corrupt(id, file, e.to_string(), foreign || symlink));
        }
    };
    let (reason, removable) = match serde_json::from_slice::<Job>(&bytes) {
        Ok(job) if job.id == id => return None,
        Ok(job) => (format!("it names job `{}`", crate::model::text::visible(&job.id)), true),
        Err(e) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Err(_) => (e.to_string(), true),
            // JSON this version does not read as a record: a newer one's, unless it names another job.
            Ok(value) => match value.get("id").and_then(|v| v.as_str()) {
                Some(other) if other != id => (format!("it names job `{}`", crate::model::text::visible(other)), true),
                _ => (e.to_string(), false),
            },
        },
    };
    Some(corrupt(id, file, reason, removable))
}

pub(crate) fn corrupt(id: &str, file: PathBuf, reason: String, removable: bool) -> CorruptRecord {
    let modified_ms = std::fs::symlink_metadata(&file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    CorruptRecord { id: id.to_string(), file, reason, modified_ms, removable }
}

/// A job's own record, if its directory holds one naming it. Never through a
/// symlink, for the directory or the file.
pub(crate) fn read_job_file(home: &Home, id: &str) -> Option<Job> {
    read_job_file_stamped(home, id).map(|(job, _)| job)
}

/// `read_job_file`, with the stamp of the file read (for the index).
pub(crate) fn read_job_file_stamped(home: &Home, id: &str) -> Option<(Job, index::Stamp)> {
    let dir = home.job_dir(id);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let path = dir.join("job.json");
    let read = paths::open_read_with_metadata(&path).and_then(|(file, metadata)| {
        let stamp = index::Stamp::of_metadata(&metadata);
        Ok((paths::read_opened(&file, &metadata)?, stamp))
    });
    let (bytes, stamp) = match read {
        Ok(read) => read,
        Err(e) => {
            // Planted by someone else: said, never taken for a job (nor started, if queued).
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                tracing::warn!("ignoring job {id}: {}: {e}", home.shown(&path).display());
            }
            return None;
        }
    };
    let job: Job = serde_json::from_slice(&bytes).ok()?;
    (job.id == id).then_some((job, stamp))
}

/// `.gone-<pid>-<random>-<id>`: left by a removal whose process died before it finished.
pub(crate) fn gone_dir_abandoned(name: &str) -> bool {
    let pid = name.strip_prefix(".gone-").and_then(|rest| rest.split('-').next()).and_then(|p| p.parse::<u32>().ok());
    pid.is_none_or(|pid| !procinfo::pid_alive(pid))
}

/// A job's job.json text (ending in a newline) and the size the file is
/// padded to: `JOB_FILE_SLACK` more than the text, in whole blocks, so an
/// outcome written later fits in the blocks it holds.
pub(crate) fn job_file_bytes(job: &Job) -> serde_json::Result<(Vec<u8>, usize)> {
    let mut bytes = serde_json::to_vec_pretty(job)?;
    bytes.push(b'\n');
    let reserved = (bytes.len() + JOB_FILE_SLACK).div_ceil(JOB_FILE_BLOCK) * JOB_FILE_BLOCK;
    Ok((bytes, reserved))
}

/// `bytes` (ending in a newline) padded with spaces to `len`, newline last.
pub(crate) fn padded(bytes: &[u8], len: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if len > out.len() {
        out.resize(len - 1, b' ');
        out.push(b'\n');
    }
    out
}

/// Writes `bytes` over the start of an existing file without truncating it:
/// no new block is needed when it fits. The rest is blanked with spaces.
pub(crate) fn overwrite_in_place(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let file = paths::open_write(path)?;
    let len = file.metadata()?.len() as usize;
    if len < bytes.len() {
        return Err(std::io::Error::other("the record outgrew the room reserved for it"));
    }
    file.write_all_at(&padded(bytes, len), 0)?;
    if durable {
        file.sync_data()?;
    }
    Ok(())
}
