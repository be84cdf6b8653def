//! The registry's side of each job's own job.json: writing it (padded, in
//! place when no new file can be had), and the directories whose record
//! cannot be read, looked at and removed under the registry's lock.

use super::{Patience, Registry};
use crate::model::ids::validate_job_id;
use crate::model::job::Job;
use crate::store::atomic::write_file_atomically;
use crate::store::job_file::{corrupt_record, job_file_bytes, overwrite_in_place, padded, read_job_file, CorruptRecord};
use crate::store::paths;
use crate::{Error, Result};
use std::collections::HashSet;
use std::path::PathBuf;

impl Registry {
    /// The copy refreshed along with the registry is best effort: the
    /// registry was just written.
    pub(super) fn write_job_copy(&self, job: &Job) {
        let dir = self.home.job_dir(&job.id);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            let _ = self.write_job_file(job, false);
        }
    }

    /// Writes the job's own `jobs/<id>/job.json`, no lock needed. The file is
    /// padded with spaces to at least `JOB_FILE_SLACK` more than the record,
    /// in whole blocks; when the atomic replacement cannot be written (a full
    /// disk, a directory we may not create in), the record is written over the
    /// old file in place instead, into blocks it already holds. An outcome is
    /// a few hundred bytes more than the record written at the start, so it
    /// fits. (On a copy-on-write filesystem an overwrite needs new blocks too.)
    pub fn write_job_file(&self, job: &Job, durable: bool) -> Result<()> {
        let path = self.home.job_dir(&job.id).join("job.json");
        let (bytes, reserved) = job_file_bytes(job).map_err(|e| Error::Other(e.to_string()))?;
        match write_file_atomically(&path, &padded(&bytes, reserved), durable) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(self.home.explain(Error::io("write", path, e))),
            Err(e) => overwrite_in_place(&path, &bytes, durable).map_err(|_| self.home.explain(Error::io("write", path, e))),
        }
    }

    /// Writes job.json into `spare`, a file of the job's own that is no
    /// longer needed (its supervisor's released lock), and swaps the two
    /// names in one step: job.json is replaced atomically, as by
    /// `write_job_file`, but no inode is allocated and none freed. On ext4
    /// without a journal each new inode is found by skipping every one freed
    /// in the last minutes, which with many files just deleted was a quarter
    /// of what a supervisor spent recording a kill. `spare` then holds the
    /// old record. An error (a system without an atomic exchange, no spare,
    /// a full disk) changes nothing that matters: the caller writes the
    /// usual way.
    pub fn write_job_file_through(&self, job: &Job, durable: bool, spare: &std::path::Path) -> std::io::Result<()> {
        use std::io::{Seek, Write};
        let path = self.home.job_dir(&job.id).join("job.json");
        let (bytes, reserved) = job_file_bytes(job).map_err(std::io::Error::other)?;
        let mut file = paths::open_write(spare)?;
        let meta = file.metadata()?;
        // A name with another link (planted, or a file of ours linked there)
        // is never written through.
        if !meta.is_file() || crate::os::sys::MetadataExt::nlink(&meta) != 1 {
            return Err(std::io::Error::other("the spare is not a file of its own"));
        }
        file.seek(std::io::SeekFrom::Start(0))?;
        file.write_all(&padded(&bytes, reserved))?;
        file.set_len(reserved as u64)?;
        if durable {
            file.sync_all()?;
        }
        crate::os::sys::exchange_names(spare, &path)
    }

    /// Job directories that no job in the registry names and whose job.json
    /// cannot be read as a record of that job (a queued job lives in its
    /// job.json alone: unreadable, it would vanish with its spec.json, the
    /// submitter's whole environment, left behind). A directory without a
    /// job.json is a job being created (its spec.json comes first).
    pub fn corrupt_records(&self) -> Result<Vec<CorruptRecord>> {
        let known: HashSet<String> = self.load()?.into_iter().map(|j| j.id).collect();
        Ok(self.corrupt_records_besides(&known))
    }

    /// `corrupt_records` of the directories `known` does not name (the ids a
    /// registry read gave; none when it cannot be read: then every directory
    /// whose job.json cannot be read, which a kill of everything still ends,
    /// and nothing is removed without the registry's word, see `remove_corrupt`).
    pub fn corrupt_records_besides(&self, known: &HashSet<String>) -> Vec<CorruptRecord> {
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.home.jobs_dir()) else { return found };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str() else { continue };
            if known.contains(id) || validate_job_id(id).is_err() || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            found.extend(corrupt_record(&self.home, id));
        }
        found.sort_by(|a, b| (a.modified_ms, &a.id).cmp(&(b.modified_ms, &b.id)));
        found
    }

    /// The corrupt record of job `id` (see `corrupt_records`), if that is what it has.
    pub fn corrupt_record(&self, id: &str) -> Option<CorruptRecord> {
        validate_job_id(id).ok()?;
        let record = corrupt_record(&self.home, id)?;
        // A job the registry knows is that job, whatever its job.json says;
        // with a registry that cannot be read, the record is all there is
        // (a kill then still ends what of the job runs).
        match self.get(id) {
            Ok(_) => None,
            Err(_) => Some(record),
        }
    }

    /// Deletes the directory of job `id` (its spec.json with it) if its
    /// record is still corrupt and still no job of the registry's, looked at
    /// under the lock so that a job being recorded is never taken. True when
    /// it was removed.
    pub fn remove_corrupt(&self, id: &str) -> Result<bool> {
        validate_job_id(id)?;
        let action = format!("remove the corrupt record of {id}");
        let aside = self.update_with(Patience::Full, &action, |jobs| {
            if jobs.iter().any(|j| j.id == id) || !corrupt_record(&self.home, id).is_some_and(|r| r.removable) {
                return Ok(None);
            }
            // Said, never taken for "not corrupt": a caller would look again forever.
            let dir = self.home.job_dir(id);
            self.set_aside(id).map(Some).ok_or_else(|| Error::Other(format!("cannot move {} aside to remove it", dir.display())))
        })??;
        let Some((_, to)) = aside else { return Ok(false) };
        std::fs::remove_dir_all(&to).map_err(|e| Error::io("remove", to, e))?;
        Ok(true)
    }

    /// Renames a job's directory to a hidden name that no reader takes for a job.
    pub(super) fn set_aside(&self, id: &str) -> Option<(PathBuf, PathBuf)> {
        let from = self.home.job_dir(id);
        let to = self.home.jobs_dir().join(format!(".gone-{}-{}-{id}", std::process::id(), paths::random_hex(4).ok()?));
        std::fs::rename(&from, &to).ok().map(|()| (from, to))
    }

    /// A job's own job.json, as its supervisor last wrote it.
    pub fn job_file(&self, id: &str) -> Option<Job> {
        read_job_file(&self.home, id)
    }
}
