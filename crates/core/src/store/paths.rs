use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state directory: `$PROC_MANAGER_HOME`, else `$XDG_STATE_HOME/proc-manager`,
/// else `~/.local/state/proc-manager`.
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

impl Home {
    pub fn resolve() -> Result<Home> {
        let from_env = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from);
        let root = if let Some(home) = from_env("PROC_MANAGER_HOME") {
            home
        } else if let Some(state) = from_env("XDG_STATE_HOME") {
            state.join("proc-manager")
        } else if let Some(user_home) = from_env("HOME") {
            user_home.join(".local/state/proc-manager")
        } else {
            return Err(Error::Usage(
                "cannot find a state directory: set PROC_MANAGER_HOME (or XDG_STATE_HOME or HOME)".into(),
            ));
        };
        Home::at(root)
    }

    /// Uses `root`, creating it (and `jobs/`) with mode 0700 if needed. A home
    /// that someone else could write into is refused (see `check_private`):
    /// its settings run hooks and its records steer kills.
    pub fn at(root: PathBuf) -> Result<Home> {
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?.join(root)
        };
        let home = Home { root };
        if std::fs::symlink_metadata(&home.root).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            create_private_dir_all(&home.root)?;
        }
        check_private(&home.root, &home.root, Link::AcceptOurs)?;
        let jobs = home.jobs_dir();
        if std::fs::symlink_metadata(&jobs).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            create_private_dir_all(&jobs)?;
        }
        check_private(&home.root, &jobs, Link::Refuse)?;
        Ok(home)
    }

    pub fn registry_path(&self) -> PathBuf {
        self.root.join("jobs.json")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("jobs.lock")
    }
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.json")
    }
    pub fn jobs_dir(&self) -> PathBuf {
        self.root.join("jobs")
    }
    /// Only call with a validated id.
    pub fn job_dir(&self, id: &str) -> PathBuf {
        self.jobs_dir().join(id)
    }
    pub fn log_path(&self, id: &str) -> PathBuf {
        self.job_dir(id).join("output.log")
    }

    /// Says plainly that the disk is full when a write into the home failed
    /// for want of space; other errors pass unchanged.
    pub fn explain(&self, error: Error) -> Error {
        match error {
            Error::Io { action, path, source }
                if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) =>
            {
                Error::DiskFull { home: self.root.clone(), action, path, source }
            }
            other => other,
        }
    }
}

enum Link {
    /// A symlink of ours (or root's) is judged by where it leads.
    AcceptOurs,
    Refuse,
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Refuses a directory another user owns or may write into, as ssh refuses
/// such a `~/.ssh`: whoever can write there can plant a `config.json` whose
/// `notify.command` runs as us, records whose pids `kill --all` signals, or
/// symlinks where we write. Readable by others is allowed (the user's choice).
fn check_private(home: &Path, path: &Path, link: Link) -> Result<()> {
    let subject = if path == home { String::new() } else { format!("{}: ", path.display()) };
    let refuse = |problem: String, fix: String| {
        Err(Error::Usage(format!(
            "refusing to use {} as the proc-manager home: {subject}{problem}. {fix}",
            home.display()
        )))
    };
    const RISK: &str = "; another user could plant settings, hooks and job records there";
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io("inspect", path, e))?;
    let (meta, shown) = if meta.file_type().is_symlink() {
        if matches!(link, Link::Refuse) {
            return refuse(
                "it is a symbolic link, and proc-manager never follows symbolic links inside its home".into(),
                format!("Remove it (rm {}); it is made again as a directory.", path.display()),
            );
        }
        if meta.uid() != euid() && meta.uid() != 0 {
            return refuse(
                format!("it is a symbolic link owned by uid {}, who can point it elsewhere at any time{RISK}", meta.uid()),
                "Use a directory of your own (set PROC_MANAGER_HOME).".into(),
            );
        }
        let target = std::fs::canonicalize(path).map_err(|e| Error::io("follow the symbolic link", path, e))?;
        let meta = std::fs::metadata(&target).map_err(|e| Error::io("inspect", &target, e))?;
        (meta, target)
    } else {
        (meta, path.to_path_buf())
    };
    let leads = if shown.as_path() == path { String::new() } else { format!("it leads to {}, which ", shown.display()) };
    let is = if leads.is_empty() { "it is" } else { "is" };
    if !meta.is_dir() {
        return refuse(format!("{leads}{is} not a directory"), "Give a directory (set PROC_MANAGER_HOME).".into());
    }
    if meta.uid() != euid() {
        return refuse(
            format!("{leads}{is} owned by uid {}, not by you (uid {}){RISK}", meta.uid(), euid()),
            format!(
                "Use a directory of your own (set PROC_MANAGER_HOME), or if it is yours: chown {} {}",
                euid(),
                shown.display()
            ),
        );
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(
            format!("{leads}{is} writable by its group or others (mode {:o}){RISK}", meta.mode() & 0o7777),
            format!("Fix it with: chmod 700 {}", shown.display()),
        );
    }
    Ok(())
}

pub fn create_private_dir_all(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::io("create directory", path, e))?;
    // The umask may have widened the mode; the home holds logs that can carry secrets.
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    Ok(())
}

/// Open options for a file inside the home: a symlink in its place is never
/// followed (the open fails with a clear error instead; see `no_symlinks`).
pub fn options_nofollow() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.custom_flags(libc::O_NOFOLLOW);
    options
}

/// Opens a file inside the home for reading, never through a symlink.
pub fn open_read(path: &Path) -> std::io::Result<File> {
    options_nofollow().read(true).open(path).map_err(no_symlinks)
}

/// Reads a whole file inside the home, never through a symlink.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_read(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `O_NOFOLLOW` reports a symlink as ELOOP ("too many levels of symbolic
/// links"); say what it means here.
pub fn no_symlinks(error: std::io::Error) -> std::io::Error {
    if error.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::other(
            "it is a symbolic link, and proc-manager never follows symbolic links inside its home: remove it",
        )
    } else {
        error
    }
}

/// `bytes` random bytes as hex, for names nobody can predict (temp files).
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; bytes];
    fill_random(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn fill_random(buf: &mut [u8]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let mut filled = 0;
        while filled < buf.len() {
            // The raw syscall, not glibc's wrapper: that one needs glibc 2.25,
            // and the prebuilt packages promise 2.17.
            // SAFETY: the pointer and length describe the unfilled tail of `buf`,
            // which getrandom writes at most that many bytes into.
            let n = unsafe {
                libc::syscall(libc::SYS_getrandom, buf[filled..].as_mut_ptr(), buf.len() - filled, 0 as libc::c_uint)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOSYS) => break, // very old kernel: /dev/urandom below
                    _ => return Err(e),
                }
            }
            filled += n as usize;
        }
        if filled == buf.len() {
            return Ok(());
        }
    }
    File::open("/dev/urandom")?.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    fn private_dir(path: &Path) {
        std::fs::create_dir(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn a_home_owned_by_another_user_is_refused() {
        if !is_root() {
            eprintln!("skipped: giving a directory to another user (uid 65534) needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        private_dir(&home);
        let c_path = CString::new(home.as_os_str().as_bytes()).unwrap();
        // SAFETY: c_path is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::chown(c_path.as_ptr(), 65534, 65534) }, 0);
        let err = Home::at(home.clone()).expect_err("a home owned by uid 65534 must be refused").to_string();
        assert!(err.contains("owned by uid 65534"), "{err}");
        assert!(err.contains("chown"), "says how to fix it: {err}");
    }

    #[test]
    fn a_home_others_can_write_is_refused() {
        for mode in [0o777, 0o770, 0o702, 0o1777] {
            let dir = tempfile::tempdir().unwrap();
            let home = dir.path().join("home");
            private_dir(&home);
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = Home::at(home.clone()).expect_err(&format!("mode {mode:o} must be refused")).to_string();
            assert!(err.contains("writable"), "{mode:o}: {err}");
            assert!(err.contains(&format!("chmod 700 {}", home.display())), "{mode:o}: {err}");
        }
        // Readable by others is the user's choice (as ssh allows it for ~/.ssh).
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        private_dir(&home);
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        Home::at(home).unwrap();
    }

    #[test]
    fn a_symlink_is_judged_by_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        private_dir(&open);
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let to_open = dir.path().join("to-open");
        std::os::unix::fs::symlink(&open, &to_open).unwrap();
        let err = Home::at(to_open.clone()).expect_err("a symlink to a world-writable directory").to_string();
        assert!(err.contains(&open.display().to_string()) && err.contains("writable"), "{err}");

        let private = dir.path().join("private");
        private_dir(&private);
        let to_private = dir.path().join("to-private");
        std::os::unix::fs::symlink(&private, &to_private).unwrap();
        let home = Home::at(to_private.clone()).expect("a symlink of ours to a private directory of ours is fine");
        assert_eq!(home.root, to_private);
    }

    #[test]
    fn a_symlink_planted_for_the_jobs_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        private_dir(&home);
        let elsewhere = dir.path().join("elsewhere");
        private_dir(&elsewhere);
        std::os::unix::fs::symlink(&elsewhere, home.join("jobs")).unwrap();
        let err = Home::at(home).expect_err("jobs/ as a symlink").to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
