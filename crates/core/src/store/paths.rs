use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state directory: `$PROC_MANAGER_HOME`, else `$XDG_STATE_HOME/proc-manager`,
/// else `~/.local/state/proc-manager`.
#[derive(Debug, Clone)]
pub struct Home {
    /// The home as it was named: what records, messages and other processes
    /// are given.
    pub root: PathBuf,
    /// How this process reaches it: `root`, except in a supervisor, which
    /// works in the home it opened and checked at its start (see `hold`).
    base: PathBuf,
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
        let home = Home { base: root.clone(), root };
        // Judged before anything is made there, where the parent exists already.
        let parent_existed = home.root.parent().is_some_and(Path::is_dir);
        if parent_existed {
            check_parents(&home.root)?;
        }
        if std::fs::symlink_metadata(&home.root).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            create_private_dir_all(&home.root)?;
        }
        check_private(&home.root, &home.root, Link::AcceptOurs)?;
        if !parent_existed {
            check_parents(&home.root)?;
        }
        let jobs = home.jobs_dir();
        if std::fs::symlink_metadata(&jobs).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            create_private_dir_all(&jobs)?;
        }
        check_private(&home.root, &jobs, Link::Refuse)?;
        Ok(home)
    }

    /// A home taken as it is, unchecked: for tests that build one by hand.
    pub fn unchecked(root: PathBuf) -> Home {
        Home { base: root.clone(), root }
    }

    /// Uses `root` as `at` does, and from now on reaches it through this
    /// process's working directory, set to the directory opened and checked
    /// here: a home renamed away under us is followed, and one planted at its
    /// name is never written into (see `HeldHome`). For a supervisor, which
    /// lives as long as its job; its paths are then relative, never recorded
    /// (`root` is) and shown through `shown`.
    pub fn hold(root: PathBuf) -> Result<(Home, HeldHome)> {
        let home = Home::at(root)?;
        let held = HeldHome::open(&home)?;
        Ok((Home { root: home.root, base: PathBuf::from(".") }, held))
    }

    /// Where this process reaches the home (see `base`): for file access,
    /// never for records or messages.
    pub fn dir(&self) -> &Path {
        &self.base
    }

    /// `path`, reached through `dir()`, as the user knows it (under `root`).
    pub fn shown(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.base) {
            Ok(rest) if self.base != self.root => self.root.join(rest),
            _ => path.to_path_buf(),
        }
    }

    pub fn registry_path(&self) -> PathBuf {
        self.base.join("jobs.json")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.base.join("jobs.lock")
    }
    pub fn config_path(&self) -> PathBuf {
        self.base.join("config.json")
    }
    pub fn jobs_dir(&self) -> PathBuf {
        self.base.join("jobs")
    }
    /// Only call with a validated id.
    pub fn job_dir(&self, id: &str) -> PathBuf {
        self.jobs_dir().join(id)
    }
    pub fn log_path(&self, id: &str) -> PathBuf {
        self.job_dir(id).join("output.log")
    }

    /// Says plainly that the disk is full when a write into the home failed
    /// for want of space, or that it is read-only; paths are shown as the
    /// user knows them (`shown`); other errors pass unchanged.
    pub fn explain(&self, error: Error) -> Error {
        match error {
            Error::Io { action, path, source }
                if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) =>
            {
                Error::DiskFull { home: self.root.clone(), action, path: self.shown(&path), source }
            }
            Error::Io { action, path, source } if source.raw_os_error() == Some(libc::EROFS) => Error::Io {
                action,
                path: self.shown(&path),
                source: std::io::Error::new(
                    source.kind(),
                    format!("{source}: the filesystem holding {} is mounted read-only", self.root.display()),
                ),
            },
            Error::Io { action, path, source } => Error::Io { action, path: self.shown(&path), source },
            Error::DiskFull { home, action, path, source } => Error::DiskFull { home, action, path: self.shown(&path), source },
            other => other,
        }
    }
}

/// The home a supervisor works in: its working directory, opened without
/// following a symlink and checked (ours, private, the very directory
/// `check_private` and `check_parents` judged). The kernel resolves every
/// relative path through the working directory's inode, not its name, so
/// a rename of the home (or of a parent) cannot redirect a write. Chosen
/// over `openat` at each call site (dozens, through std::fs) and over
/// `/proc/self/fd/<n>` paths (Linux only): fchdir is in every Unix, and the
/// forked notifier inherits it.
pub struct HeldHome {
    /// The path it was opened by (symlinks resolved), and what it was.
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl HeldHome {
    fn open(home: &Home) -> Result<HeldHome> {
        let path = std::fs::canonicalize(&home.root).map_err(|e| Error::io("resolve", &home.root, e))?;
        let checked = std::fs::symlink_metadata(&path).map_err(|e| Error::io("inspect", &path, e))?;
        let dir = open_dir_nofollow(&path).map_err(|e| Error::io("open", &path, e))?;
        let opened = dir.metadata().map_err(|e| Error::io("inspect", &path, e))?;
        let refuse = |why: String| Err(Error::Usage(format!("refusing to use {} as the proc-manager home: {why}", home.root.display())));
        if (opened.dev(), opened.ino()) != (checked.dev(), checked.ino()) {
            return refuse(format!("{} was replaced while it was being checked", path.display()));
        }
        if opened.uid() != euid() || opened.mode() & 0o022 != 0 {
            return refuse(format!("{} changed owner or mode while it was being checked", path.display()));
        }
        rustix::process::fchdir(&dir).map_err(|e| Error::io("enter", &path, e.into()))?;
        Ok(HeldHome { path, dev: opened.dev(), ino: opened.ino() })
    }

    /// Opens the home by its path again and works through that if it is still
    /// the same directory: the same files, but seen through whatever is
    /// mounted there now (a read-only remount shows, and so does its undoing).
    /// A different directory (the home renamed away and another put in its
    /// place) is ignored: we stay in ours. Whether it was still there.
    pub fn refresh(&self) -> bool {
        let Ok(dir) = open_dir_nofollow(&self.path) else { return false };
        match dir.metadata() {
            Ok(meta) if (meta.dev(), meta.ino()) == (self.dev, self.ino) => rustix::process::fchdir(&dir).is_ok(),
            _ => false,
        }
    }
}

fn open_dir_nofollow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(path)
}

/// Refuses a home whose parent directories another user could change, as
/// OpenSSH's StrictModes refuses such a `~/.ssh`: whoever can rename the
/// home away can put their own in its place, with settings whose hooks run
/// as us and queued jobs we would start. Each parent must be owned by us or
/// root and writable by no one else, unless it is sticky (as /tmp, 1777):
/// there others cannot rename what they do not own. A symbolic link on the
/// way must be ours or root's, or its owner could point it elsewhere.
fn check_parents(home: &Path) -> Result<()> {
    let refuse = |dir: &Path, problem: String, fix: String| {
        Err(Error::Usage(format!(
            "refusing to use {} as the proc-manager home: its parent directory {} {problem}, so another user \
             could rename the home away and put their own in its place (settings, hooks and queued jobs run as you). {fix}",
            home.display(),
            dir.display()
        )))
    };
    let elsewhere = "or set PROC_MANAGER_HOME to a directory inside one of your own";
    // Symlinks on the way as named (their targets are judged below, resolved).
    let mut named = PathBuf::new();
    for part in home.parent().unwrap_or(home).components() {
        named.push(part);
        if let Ok(meta) = std::fs::symlink_metadata(&named) {
            if meta.file_type().is_symlink() && meta.uid() != euid() && meta.uid() != 0 {
                return refuse(
                    &named,
                    format!("is a symbolic link owned by uid {}, who can point it elsewhere", meta.uid()),
                    format!("Use a path without it, {elsewhere}."),
                );
            }
        }
    }
    // The parents as named, and those of where a symlinked home leads.
    let parent = home.parent().unwrap_or(home);
    let mut chains = vec![std::fs::canonicalize(parent).map_err(|e| Error::io("resolve", parent, e))?];
    if let Ok(target) = std::fs::canonicalize(home) {
        chains.extend(target.parent().map(Path::to_path_buf));
    }
    for dir in chains.iter().flat_map(|chain| chain.ancestors()) {
        let meta = std::fs::metadata(dir).map_err(|e| Error::io("inspect", dir, e))?;
        if meta.uid() != euid() && meta.uid() != 0 {
            return refuse(
                dir,
                format!("is owned by uid {}, not by you (uid {}) or root", meta.uid(), euid()),
                format!("Fix it with: chown {} {} ({elsewhere})", euid(), dir.display()),
            );
        }
        let sticky = meta.mode() & 0o1000 != 0;
        if meta.mode() & 0o022 != 0 && !sticky {
            return refuse(
                dir,
                format!("is writable by its group or others (mode {:o}) and not sticky", meta.mode() & 0o7777),
                format!("Fix it with: chmod go-w {} (or chmod +t {0}, as /tmp is) ({elsewhere})", dir.display()),
            );
        }
    }
    Ok(())
}

/// A file in the home must be ours: one another user made (they could write
/// into the home once, or it was planted in a home swapped under us) is
/// never trusted, as a record, a launch spec or settings. Checked on the
/// opened file, so it is the file read.
fn refuse_foreign(file: File) -> std::io::Result<File> {
    let owner = file.metadata()?.uid();
    if owner != euid() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "it is owned by uid {owner}, not by you (uid {}); proc-manager never trusts a file in its home that \
                 another user could have planted: remove it",
                euid()
            ),
        ));
    }
    Ok(file)
}

enum Link {
    /// A symlink of ours (or root's) is judged by where it leads.
    AcceptOurs,
    Refuse,
}

pub(crate) fn euid() -> u32 {
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

/// Opens a file inside the home for reading, never through a symlink, and
/// only if it is ours (`refuse_foreign`).
pub fn open_read(path: &Path) -> std::io::Result<File> {
    options_nofollow().read(true).open(path).map_err(no_symlinks).and_then(refuse_foreign)
}

/// Opens a file inside the home for writing in place, as `open_read` does.
pub fn open_write(path: &Path) -> std::io::Result<File> {
    options_nofollow().write(true).open(path).map_err(no_symlinks).and_then(refuse_foreign)
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

    fn chown_to_nobody(path: &Path) {
        let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: c_path is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::chown(c_path.as_ptr(), 65534, 65534) }, 0);
    }

    /// As OpenSSH's StrictModes: whoever owns a parent can rename the home
    /// away and put their own in its place.
    #[test]
    fn a_home_whose_parent_another_user_owns_is_refused() {
        if !is_root() {
            eprintln!("skipped: giving a directory to another user (uid 65534) needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        chown_to_nobody(&theirs);
        let err = Home::at(theirs.join("home")).expect_err("a parent owned by uid 65534").to_string();
        assert!(err.contains(&format!("parent directory {} is owned by uid 65534", theirs.display())), "{err}");
        assert!(err.contains(&format!("chown 0 {}", theirs.display())), "says how to fix it: {err}");
    }

    #[test]
    fn a_parent_others_may_write_is_refused_unless_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        for mode in [0o777, 0o775, 0o757] {
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = Home::at(open.join("home")).expect_err(&format!("a parent of mode {mode:o}")).to_string();
            assert!(err.contains(&format!("parent directory {} is writable", open.display())), "{mode:o}: {err}");
            assert!(err.contains(&format!("chmod go-w {}", open.display())), "{mode:o}: {err}");
        }
        // Sticky, as /tmp: others cannot rename what they do not own.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Home::at(open.join("home")).expect("a sticky parent is fine");
    }

    #[test]
    fn a_file_another_user_owns_is_never_read_nor_written() {
        if !is_root() {
            eprintln!("skipped: giving a file to another user (uid 65534) needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join("spec.json");
        std::fs::write(&planted, b"{}").unwrap();
        assert_eq!(read_file(&planted).unwrap(), b"{}");
        chown_to_nobody(&planted);
        for err in [read_file(&planted).unwrap_err(), open_write(&planted).unwrap_err()] {
            assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(err.to_string().contains("owned by uid 65534, not by you (uid 0)"), "{err}");
        }
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
