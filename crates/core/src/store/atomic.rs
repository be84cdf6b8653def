//! Files replaced whole: a temp file beside the target, created exclusively
//! and never through a symlink, written, optionally fsynced, renamed over it;
//! the temp files of writers that died are cleaned.

use crate::store::paths;
use crate::os::procinfo;
use crate::{Error, Result};
use crate::os::sys::OpenOptionsExt;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Temp files of a dead writer are removed once this old; any temp file once
/// `TEMP_ABANDONED` old (its pid may have been reused).
const TEMP_GRACE: Duration = Duration::from_secs(10);

const TEMP_ABANDONED: Duration = Duration::from_secs(3600);

/// Temp file in the same directory, written, optionally fsynced, renamed over `path`.
pub fn write_json_file<T: Serialize>(path: &Path, value: &T, durable: bool) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Other(e.to_string()))?;
    bytes.push(b'\n');
    write_file_atomically(path, &bytes, durable).map_err(|e| Error::io("write", path, e))
}

/// The temp file gets an unpredictable name and is created exclusively, never
/// through a symlink (`O_CREAT|O_EXCL|O_NOFOLLOW`), so nothing planted at a
/// name we might use is ever written through. The rename replaces a symlink
/// at `path` itself, not what it points to. Temp files that writers which
/// died left behind are removed.
pub(crate) fn write_file_atomically(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let prefix = format!(".{name}.tmp-");
    let tmp = dir.join(format!("{prefix}{}-{}", std::process::id(), paths::random_hex(8)?));
    let mut file = paths::options_nofollow().write(true).create_new(true).mode(0o600).open(&tmp)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| if durable { file.sync_all() } else { Ok(()) })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    } else {
        remove_stale_temps(dir, &prefix);
    }
    written
}

/// A new file of `bytes` beside `path`, named as `write_file_atomically`'s
/// temp files are (so that it is cleaned the same way should we die), and
/// left there for the caller to link elsewhere and remove: one file whose
/// links stand for many, where each new file costs an inode.
pub fn write_temp_beside(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), paths::random_hex(8)?));
    let mut file = paths::options_nofollow().write(true).create_new(true).mode(0o600).open(&tmp)?;
    if let Err(e) = file.write_all(bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// `<prefix><pid>-<suffix>` files whose writer is gone (or that are very old).
fn remove_stale_temps(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else { continue };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let age = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        let writer_gone = pid.is_none_or(|pid| !procinfo::pid_alive(pid));
        if age >= TEMP_ABANDONED || (age >= TEMP_GRACE && writer_gone) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
