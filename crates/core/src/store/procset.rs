//! The processes a job's supervisor has seen below itself, kept by identity
//! (pid, start time, boot) in the job's directory as they appear. A daemon
//! that double-forks, leaves the session and overwrites its environment
//! (redis, postgres) can no longer be told by its cookie, and once the
//! supervisor is gone nothing runs below anyone of ours: this record is then
//! what still says the daemon is the job's. A line is only a claim: a
//! reader counts it only while a live process has the same pid and start
//! time (see `os::tree`), so a reused pid never counts.
//!
//! One line per process, `<pid> <start_ticks> <boot tag in hex or ->`,
//! appended by the supervisor only. Bounded: past `MAX_LINES` the file is
//! rewritten with the identities still alive (a build that runs thousands
//! of short compilers must not grow it for ever).

use crate::model::job::ProcessIdentity;
use crate::os::procinfo;
use crate::store::paths;
use std::collections::HashSet;
use std::io::Write;
use crate::os::sys::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The file in the job's directory.
pub const PROCS_FILE: &str = "procs";

/// Past this many lines the record is compacted to the live identities.
pub const MAX_LINES: usize = 4096;

/// A larger file is not ours (or is corrupt): only its first bytes are read.
const MAX_BYTES: usize = 1 << 20;

/// One line of the record.
pub fn line(who: &ProcessIdentity) -> String {
    let boot = who.boot.map_or_else(|| "-".to_string(), |b| format!("{b:x}"));
    format!("{} {} {boot}\n", who.pid, who.start_ticks)
}

/// The identities in a record's text; lines that do not parse (a write cut
/// short by a full disk, a hand edit) are skipped.
pub fn parse(text: &[u8]) -> Vec<ProcessIdentity> {
    let text = String::from_utf8_lossy(&text[..text.len().min(MAX_BYTES)]);
    let mut seen = HashSet::new();
    text.lines()
        .filter_map(|l| {
            let mut fields = l.split_ascii_whitespace();
            let pid = fields.next()?.parse().ok()?;
            let start_ticks = fields.next()?.parse().ok()?;
            let boot = match fields.next()? {
                "-" => None,
                hex => Some(u64::from_str_radix(hex, 16).ok()?),
            };
            fields.next().is_none().then_some(ProcessIdentity { pid, start_ticks, pidfs_ino: None, boot })
        })
        .filter(|who| seen.insert((who.pid, who.start_ticks)))
        .collect()
}

/// What the job's supervisor recorded, from the job's directory (empty when
/// nothing was, or the file cannot be read).
pub fn load(job_dir: &Path) -> Vec<ProcessIdentity> {
    paths::read_file(&job_dir.join(PROCS_FILE)).map(|b| parse(&b)).unwrap_or_default()
}

/// The supervisor's writer of the record.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    /// (pid, start ticks) of every identity in `ids`.
    known: HashSet<(u32, u64)>,
    /// Every identity recorded (kept here even when the file could not take it).
    ids: Vec<ProcessIdentity>,
    lines: usize,
    /// Set after a failed write, so that it is reported once.
    pub failed: bool,
}

impl Recorder {
    pub fn new(job_dir: &Path) -> Recorder {
        let existing = load(job_dir);
        Recorder {
            path: job_dir.join(PROCS_FILE),
            known: existing.iter().map(|w| (w.pid, w.start_ticks)).collect(),
            lines: existing.len(),
            ids: existing,
            failed: false,
        }
    }

    pub fn recorded(&self) -> &[ProcessIdentity] {
        &self.ids
    }

    /// Appends the identities not recorded yet; returns how many were new.
    /// What the file cannot take is still kept in memory (`recorded`).
    pub fn add(&mut self, found: &[ProcessIdentity]) -> (usize, std::io::Result<()>) {
        let mut new: Vec<ProcessIdentity> = Vec::new();
        for who in found {
            let key = (who.pid, who.start_ticks);
            if !self.known.contains(&key) && !new.iter().any(|n| (n.pid, n.start_ticks) == key) {
                new.push(*who);
            }
        }
        if new.is_empty() {
            return (0, Ok(()));
        }
        let compacted = if self.lines + new.len() > MAX_LINES { self.compact() } else { Ok(()) };
        self.known.extend(new.iter().map(|w| (w.pid, w.start_ticks)));
        self.ids.extend_from_slice(&new);
        (new.len(), compacted.and_then(|()| self.append(&new)))
    }

    fn append(&mut self, new: &[ProcessIdentity]) -> std::io::Result<()> {
        let text: String = new.iter().map(line).collect();
        let mut file = paths::options_nofollow().create(true).append(true).mode(0o600).open(&self.path)?;
        // One write: a reader sees whole lines, or a last one cut short that it skips.
        file.write_all(text.as_bytes())?;
        self.lines += new.len();
        Ok(())
    }

    /// Rewrites the record with the identities still alive, atomically.
    /// `ids` holds all the file does (it was loaded at the start and every
    /// line since went through `add`), so the file is not read again.
    fn compact(&mut self) -> std::io::Result<()> {
        let kept: Vec<ProcessIdentity> = self.ids.iter().copied().filter(procinfo::is_same_process_alive).collect();
        let temp = self.path.with_file_name(format!(".{PROCS_FILE}.{}", paths::random_hex(4)?));
        let mut file = paths::options_nofollow().create_new(true).write(true).mode(0o600).open(&temp)?;
        let written = file.write_all(kept.iter().map(line).collect::<String>().as_bytes()).and_then(|()| std::fs::rename(&temp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written?;
        self.lines = kept.len();
        // The dead are forgotten, so that a later process at a reused pid
        // with the same start tick (another boot's record aside, impossible)
        // is not skipped.
        self.ids = kept;
        self.known = self.ids.iter().map(|w| (w.pid, w.start_ticks)).collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_and_bad_ones_are_skipped() {
        let a = ProcessIdentity { pid: 42, start_ticks: 7, pidfs_ino: Some(9), boot: Some(0xabc) };
        let b = ProcessIdentity::from_stat(43, 8);
        let text = format!("{}{}{}garbage\n44 x -\n45 1 - extra\n46 2", line(&a), line(&b), line(&a));
        let read = parse(text.as_bytes());
        // The pidfs inode is not kept: the scan that checks a line has none to compare.
        assert_eq!(read, vec![ProcessIdentity { pidfs_ino: None, ..a }, b]);
    }

    #[test]
    fn the_record_is_appended_once_per_identity_and_compacted_to_the_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let me = procinfo::identify_exactly(std::process::id()).unwrap();
        let mut recorder = Recorder::new(dir.path());
        let add = |recorder: &mut Recorder, found: &[ProcessIdentity]| {
            let (new, written) = recorder.add(found);
            written.unwrap();
            new
        };
        assert_eq!(add(&mut recorder, &[me]), 1);
        assert_eq!(add(&mut recorder, &[me]), 0, "known already");
        assert_eq!(add(&mut Recorder::new(dir.path()), &[me]), 0, "known from the file too");
        // Identities of no live process fill it past its bound.
        let dead: Vec<ProcessIdentity> = (0..MAX_LINES as u64).map(|i| ProcessIdentity::from_stat(me.pid, me.start_ticks + 1 + i)).collect();
        add(&mut recorder, &dead[..MAX_LINES - 1]);
        assert_eq!(load(dir.path()).len(), MAX_LINES);
        add(&mut recorder, &dead[MAX_LINES - 1..]);
        assert_eq!(recorder.recorded().len(), 2);
        let kept = load(dir.path());
        assert_eq!(kept.len(), 2, "compacted to the live identity plus the new one");
        assert!(kept.iter().any(|w| w.matches(&me)));
    }
}
