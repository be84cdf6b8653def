//! A log's files: their names (`output.log`, `.1` … `.<keep>`) and what
//! each is whatever its name is now (device and inode).

use std::fs::File;
use std::path::{Path, PathBuf};

/// `output.log`, then `output.log.1` … `output.log.<keep>` (oldest last).
pub fn rotated_path(log: &Path, index: u32) -> PathBuf {
    if index == 0 {
        return log.to_path_buf();
    }
    let mut name = log.as_os_str().to_owned();
    name.push(format!(".{index}"));
    PathBuf::from(name)
}

/// `output.log` (if present) then `output.log.1`, `.2` … up to the first
/// two missing names in a row. A rotation renames from the oldest file down,
/// one name at a time, so while it runs one name in the middle is missing
/// (`.2` moved to `.3`, `.1` not yet to `.2`): the files past it are still
/// the log's, in order.
pub fn log_files_newest_first(log: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut missing = 0;
    for index in 0..=MAX_KEEP + 1 {
        let path = rotated_path(log, index);
        if path.exists() {
            files.push(path);
            missing = 0;
        } else if index > 0 {
            missing += 1;
            if missing == 2 {
                break;
            }
        }
    }
    files
}

/// The most rotated files a log can have (`logs.keep`); the follower looks
/// for rotated files up to this index, whatever `keep` was when the job started.
pub const MAX_KEEP: u32 = 100;

/// (device, inode): what a file is, whatever its name is now.
pub(super) type FileId = (u64, u64);

pub(super) fn file_id(file: &File) -> Option<FileId> {
    crate::os::sys::file_identity(file)
}

pub(super) fn id_at(path: &Path) -> Option<FileId> {
    crate::os::sys::path_identity(path)
}
