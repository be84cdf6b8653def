//! The registry's lock (`jobs.lock`): taken with a deadline, and a holder
//! that keeps it named to whoever gave up waiting: the pid and action it
//! wrote into the lock file, and what the system says of it
//! (`os::lock_holder`).

use crate::store::job_file::padded;
use super::{Patience, Registry, BRIEF_WAIT};
use crate::os::lock_holder;
use crate::store::index;
use crate::store::paths;
use crate::{now_ms, Error, Result};
use crate::os::sys::{FileExt, OpenOptionsExt};
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a reader waits for a write that forgets jobs to replace
/// `jobs.json` (see `registry_replaced_by_writer`): a write is a fsync.
const WRITER_WAIT: Duration = Duration::from_secs(2);

/// The lock file holds `<pid> <acquired at, ms> <action>`, padded to this
/// size and rewritten in place, so that naming the holder needs no new block.
const HOLDER_RECORD_BYTES: usize = 256;

/// Held while the registry is read-modified-written; closing the file unlocks it.
pub(super) struct LockGuard(#[allow(dead_code)] File);

impl Registry {
    /// Takes the lock, writing who holds it and why into the lock file. While
    /// it is held by someone else, waits as `patience` says; the error then
    /// names the holder, its state and command.
    pub(super) fn lock(&self, patience: Patience, action: &str) -> Result<LockGuard> {
        let path = self.home.lock_path();
        let file = open_lock(&path).map_err(|e| self.home.explain(Error::io("open registry lock", &path, e)))?;
        let started = Instant::now();
        let mut holder: Option<Holder> = None;
        let mut holder_since = started;
        let mut next_look = started;
        let mut pause = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => {
                    write_holder(&file, action);
                    return Ok(LockGuard(file));
                }
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(self.home.explain(Error::io("lock registry", &path, e)));
                }
            }
            let now = Instant::now();
            let held_for = match patience {
                Patience::Immediate => Some(now - started),
                Patience::Brief if now - started >= BRIEF_WAIT => Some(now - started),
                Patience::Brief => None,
                Patience::Full => {
                    // A queue of short holders is progress; one holder that
                    // keeps the lock for the whole timeout is not.
                    if now >= next_look {
                        // The record each holder writes on taking the lock,
                        // not /proc/locks: reading that takes the kernel's
                        // file-lock rwsem for writing, which stalls every
                        // flock on the machine; 1,000 supervisors ending at
                        // once (a kill --all) each reading it every 50 ms
                        // held a 2-core host at load 2,000 for 40 minutes.
                        let seen = Holder::record_of(&file);
                        if seen != holder {
                            holder = seen;
                            holder_since = now;
                        }
                        next_look = now + Duration::from_millis(50);
                    }
                    (now - holder_since >= self.lock_timeout).then(|| now - holder_since)
                }
            };
            if let Some(held_for) = held_for {
                return Err(Error::Busy(self.busy_message(&file, &path, held_for, patience)));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    /// Whether `jobs.json` (read with `stamp`) is replaced by the write that
    /// holds the lock now, if one does: waits, up to `WRITER_WAIT`, until the
    /// file changes or the lock is free.
    pub(super) fn registry_replaced_by_writer(&self, path: &Path, stamp: Option<index::Stamp>) -> bool {
        let deadline = Instant::now() + WRITER_WAIT;
        loop {
            if index::Stamp::of(path) != stamp {
                return true;
            }
            if self.lock_is_free() {
                // Taken and let go: any write that held it is over.
                return index::Stamp::of(path) != stamp;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Whether the lock is free at this moment (taken and let go at once,
    /// no holder named): cheap enough to ask again every few milliseconds.
    /// A lock that cannot even be opened (a read-only home without one) has
    /// no writer behind it to wait for.
    fn lock_is_free(&self) -> bool {
        open_lock(&self.home.lock_path()).map_or(true, |file| file.try_lock().is_ok())
    }

    fn busy_message(&self, file: &File, path: &Path, waited: Duration, patience: Patience) -> String {
        let seconds = format!("{:.1} s", waited.as_secs_f64());
        // Only a caller that waited is told who by /proc/locks: reading it
        // stalls every flock on the machine, and many callers that try once
        // (1,000 notifiers folding their records) would each read it.
        let holder = match patience {
            Patience::Immediate => Holder::record_of(file),
            Patience::Full | Patience::Brief => Holder::read(file, path),
        };
        let who = holder.as_ref().map_or_else(|| "another process".to_string(), Holder::describe);
        let pid = holder.and_then(|h| h.pid()).map_or_else(|| "<pid>".to_string(), |p| p.to_string());
        let setting = match patience {
            Patience::Full => format!(
                "; the wait is registry.lock_timeout_ms ({} ms) in config.json",
                self.lock_timeout.as_millis()
            ),
            Patience::Brief | Patience::Immediate => String::new(),
        };
        format!(
            "the job registry is locked: {who}, has held {} for {seconds} while we waited; every prune and \
             recorded change waits for it. If it is stuck, resume it (kill -CONT {pid}) or end it{setting}",
            path.display()
        )
    }
}

fn open_lock(path: &Path) -> std::io::Result<File> {
    let open = |write: bool| {
        let mut options = paths::options_nofollow();
        options.read(true);
        if write {
            options.write(true).create(true).truncate(false).mode(0o600);
        }
        options.open(path).map_err(paths::no_symlinks)
    };
    match open(true) {
        // A read-only home: the lock still orders readers that recover; writes fail later, each with its own error.
        Err(e) if matches!(e.raw_os_error(), Some(crate::os::sys::errno::EROFS) | Some(crate::os::sys::errno::EACCES)) => open(false).map_err(|_| e),
        other => other,
    }
}

fn write_holder(file: &File, action: &str) {
    let mut record = format!("{} {} {}", std::process::id(), now_ms(), action.replace('\n', " "));
    if record.len() >= HOLDER_RECORD_BYTES {
        let mut cut = HOLDER_RECORD_BYTES - 1;
        while !record.is_char_boundary(cut) {
            cut -= 1;
        }
        record.truncate(cut);
    }
    let bytes = padded(record.as_bytes(), HOLDER_RECORD_BYTES);
    // Best effort: it only helps name the holder to whoever waits.
    let _ = file.write_all_at(&bytes, 0);
}

/// Who holds the lock: the pid from the kernel's lock table, and what it
/// wrote into the lock file when that record is its own.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    pid: Option<u32>,
    record: String,
}

impl Holder {
    /// The holder as the kernel and its record name it: for the message
    /// given once a wait is over.
    fn read(file: &File, path: &Path) -> Option<Holder> {
        let record = Holder::record_of(file).map(|h| h.record).unwrap_or_default();
        let pid = lock_holder::flock_holder(path);
        (pid.is_some() || !record.is_empty()).then_some(Holder { pid, record })
    }

    /// The holder as its record names it (each holder writes `<pid> <taken
    /// at, ms> <action>` on taking the lock, so a new holder is a new record).
    fn record_of(file: &File) -> Option<Holder> {
        let mut buf = [0u8; HOLDER_RECORD_BYTES];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        let record = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        (!record.is_empty()).then_some(Holder { pid: None, record })
    }

    fn written(&self) -> (Option<u32>, Option<&str>) {
        let mut fields = self.record.splitn(3, ' ');
        (fields.next().and_then(|p| p.parse::<u32>().ok()), fields.nth(1))
    }

    /// Without the kernel's word (not Linux), the record's pid is all there is.
    fn pid(&self) -> Option<u32> {
        self.pid.or(self.written().0)
    }

    /// `pid 4242 (run-bg prune), to update the registry, stopped (SIGSTOP or job control)`
    fn describe(&self) -> String {
        let Some(pid) = self.pid() else { return "another process".to_string() };
        let (written_pid, action) = self.written();
        let mut text = format!("pid {pid}");
        let command = crate::os::procinfo::command_line(pid);
        if !command.is_empty() {
            text.push_str(&format!(" ({})", crate::model::text::cut(&command, 80)));
        }
        if let (Some(action), true) = (action, written_pid == Some(pid)) {
            text.push_str(&format!(", to {action}"));
        }
        if let Some(state) = lock_holder::run_state(pid) {
            text.push_str(&format!(", {state}"));
        }
        text
    }
}
