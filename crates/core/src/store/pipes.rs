//! Where a job's named pipes live: one directory every job shares, and the
//! places earlier versions made them, still looked for and cleaned up. The
//! pipes themselves are made and opened by supervise/outpipe.rs and
//! supervise/stdin.rs; the registry removes a forgotten job's here.

use std::path::{Path, PathBuf};

/// A job's named pipes (its output's and `--stdin pipe`'s) are in one
/// directory shared by every job, `<home>/pipes/`, as `<id>.output` and
/// `<id>.stdin`, which nothing watches. Whatever watches the job's directory
/// (`run-bg wait` and `wait_job` do, for its record) would otherwise cost
/// every write the job makes a visit from the kernel's fsnotify to that
/// watch: with `run-bg wait` beside it, `yes | head -c 1G` took 1.25× the
/// time through `cat` with the FIFO in the job's directory, 1.17× outside it
/// (medians of 10). Shared rather than one directory a job: removing a
/// job's own directory at its end frees that directory's block, and on a
/// filesystem mounted with `discard` (ext4 here) the `rmdir` waits for the
/// discard, ~1.9 ms a job, the largest single cost of a supervisor's end
/// under `kill --all`; a FIFO's unlink frees only an inode (~40 µs).
pub const PIPES_DIR: &str = "pipes";

/// The output pipe's name there, after the job's id and a dot (supervise/outpipe.rs).
pub const OUTPUT: &str = "output";

/// `--stdin pipe`'s (supervise/stdin.rs).
pub const STDIN: &str = "stdin";

/// The shared `PIPES_DIR`, beside `jobs/`: `job_dir` is `<home>/jobs/<id>`.
pub(crate) fn shared_dir(job_dir: &Path) -> PathBuf {
    let jobs = job_dir.parent().unwrap_or(Path::new("."));
    jobs.parent().unwrap_or(Path::new(".")).join(PIPES_DIR)
}

/// Where a new job's pipe `name` is made (this FIFO, or `--stdin pipe`'s):
/// `<home>/pipes/<id>.<name>`.
pub fn pipe_path(job_dir: &Path, name: &str) -> PathBuf {
    let mut file = job_dir.file_name().unwrap_or_default().to_os_string();
    file.push(".");
    file.push(name);
    shared_dir(job_dir).join(file)
}

/// Where a job started by the previous version has its pipe `name`: in a
/// directory of its own, `jobs/<id>/pipes/<name>`.
fn per_job_path(job_dir: &Path, name: &str) -> PathBuf {
    job_dir.join(PIPES_DIR).join(name)
}

/// The job's pipe `name` in the shared `PIPES_DIR`; for a job started by an
/// earlier version (still running under its old supervisor, or orphaned),
/// where that version made it: `jobs/<id>/pipes/<name>`, or before that
/// `earlier` in the job's directory.
pub fn existing_pipe(job_dir: &Path, name: &str, earlier: &str) -> PathBuf {
    let path = pipe_path(job_dir, name);
    if std::fs::symlink_metadata(&path).is_ok() {
        return path;
    }
    for old in [per_job_path(job_dir, name), job_dir.join(earlier)] {
        if std::fs::symlink_metadata(&old).is_ok() {
            return old;
        }
    }
    path
}

/// Makes the shared `PIPES_DIR` (private, as the jobs' directories are)
/// unless it exists. Not its parents: a home that is gone stays gone.
pub fn make_pipes_dir(job_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = shared_dir(job_dir);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // A link there would send the pipes elsewhere: only a directory is used.
            if !std::fs::symlink_metadata(&dir)?.is_dir() {
                return Err(std::io::Error::other(format!("{} is not a directory", dir.display())));
            }
            Ok(())
        }
        other => other,
    }
}

/// Removes the job's pipes from the shared `PIPES_DIR` (when the job is
/// forgotten: a supervisor killed before its job's end leaves them there).
pub fn remove_shared(job_dir: &Path) {
    for name in [OUTPUT, STDIN] {
        let _ = std::fs::remove_file(pipe_path(job_dir, name));
    }
}

/// Removes the pipe `name` of the job, wherever its version made it, and the
/// previous version's per-job directory once it is empty (not before: its
/// other pipe may still be in use).
pub fn remove_pipe(job_dir: &Path, name: &str, earlier: &str) {
    // A job has its pipes in one place: found in the new one, the old
    // places are not probed (two failing unlinks at every job's end).
    if std::fs::remove_file(pipe_path(job_dir, name)).is_ok() {
        return;
    }
    let per_job = per_job_path(job_dir, name);
    if std::fs::remove_file(&per_job).is_ok() {
        let _ = std::fs::remove_dir(job_dir.join(PIPES_DIR));
    }
    let _ = std::fs::remove_file(job_dir.join(earlier));
}
