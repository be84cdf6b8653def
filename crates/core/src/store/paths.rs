//! The home and every path inside it, the checks that keep it ours (owner,
//! mode, no symlinks), and the file helpers that never follow one.

use crate::os::procinfo::euid;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Read;
use crate::os::sys::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The state directory: `$PROC_MANAGER_HOME`, else (Windows)
/// `%LOCALAPPDATA%\proc-manager`, else `$XDG_STATE_HOME/proc-manager`, else
/// `~/.local/state/proc-manager`.
#[derive(Debug, Clone)]
pub struct Home {
    /// The home as it was named: what records, messages and other processes
    /// are given.
    pub root: PathBuf,
    /// How this process reaches it: `root`, except in a supervisor, which
    /// works in the home it opened and checked at its start (see `hold`).
    base: PathBuf,
    /// Why jobs must not be started here, when the home's parents are not
    /// safe (see `check_parents`) and it was opened only to look at and stop
    /// jobs (`for_looking`): what the refusal says after "refusing to …:".
    unsafe_parents: Option<String>,
}

/// What a home is opened for: starting jobs (or supervising one) needs its
/// parents safe; looking at jobs and stopping them does not, so that jobs an
/// older version started in such a home can still be cleaned up.
#[derive(Clone, Copy, PartialEq)]
enum Purpose {
    Launch,
    Look,
}

impl Home {
    pub fn resolve() -> Result<Home> {
        Home::for_looking(Home::resolve_root()?)
    }

    /// Where the home is (see `resolve`), not yet checked nor made.
    pub fn resolve_root() -> Result<PathBuf> {
        let from_env = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from);
        let root = if let Some(home) = from_env("PROC_MANAGER_HOME") {
            home
        } else if let Some(dir) = crate::os::sys::platform_state_dir() {
            dir
        } else if let Some(state) = from_env("XDG_STATE_HOME") {
            state.join("proc-manager")
        } else if let Some(user_home) = from_env("HOME") {
            user_home.join(".local/state/proc-manager")
        } else {
            return Err(Error::Usage(
                "cannot find a state directory: set PROC_MANAGER_HOME (or XDG_STATE_HOME or HOME; LOCALAPPDATA on Windows)".into(),
            ));
        };
        Ok(root)
    }

    /// Uses `root`, creating it (and `jobs/`) with mode 0700 if needed. A home
    /// that someone else could write into is refused (see `check_private`):
    /// its settings run hooks and its records steer kills.
    pub fn at(root: PathBuf) -> Result<Home> {
        Home::open(root, Purpose::Launch)
    }

    /// `at`, for verbs that look at jobs or stop them: a home whose parents
    /// are not safe is used all the same, with a warning naming the directory
    /// and the fix; starting a job there is refused (`require_safe_parents`).
    pub fn for_looking(root: PathBuf) -> Result<Home> {
        Home::open(root, Purpose::Look)
    }

    fn open(root: PathBuf, purpose: Purpose) -> Result<Home> {
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?.join(root)
        };
        let mut home = Home { base: root.clone(), root, unsafe_parents: None };
        let existed = std::fs::symlink_metadata(&home.root).is_ok();
        let judge_parents = |home: &mut Home| -> Result<()> {
            let Some(problem) = check_parents(&home.root)? else { return Ok(()) };
            // A home not made before holds no job to clean up: it is refused.
            if purpose == Purpose::Launch || !existed {
                return Err(Error::Usage(format!("refusing to use {} as the proc-manager home: {problem}", home.root.display())));
            }
            tracing::warn!(
                "the proc-manager home {} is not safe to start jobs in: {problem} Jobs there can still be listed, \
                 checked and killed; starting one is refused until it is fixed.",
                home.root.display()
            );
            home.unsafe_parents = Some(problem);
            Ok(())
        };
        // Judged before anything is made there, where the parent exists already.
        let parent_existed = home.root.parent().is_some_and(Path::is_dir);
        if parent_existed {
            judge_parents(&mut home)?;
        }
        if std::fs::symlink_metadata(&home.root).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            create_private_dir_all(&home.root)?;
        }
        check_private(&home.root, &home.root, Link::AcceptOurs)?;
        if !parent_existed {
            judge_parents(&mut home)?;
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
        Home { base: root.clone(), root, unsafe_parents: None }
    }

    /// For what starts a job (`start`, a queued job's hand-off): refused in a
    /// home opened `for_looking` whose parents are not safe, as `at` refuses it.
    pub fn require_safe_parents(&self) -> Result<()> {
        match &self.unsafe_parents {
            Some(problem) => Err(Error::Usage(format!(
                "refusing to start a job in the proc-manager home {}: {problem}",
                self.root.display()
            ))),
            None => Ok(()),
        }
    }

    /// Whether `require_safe_parents` refuses.
    pub fn parents_are_unsafe(&self) -> bool {
        self.unsafe_parents.is_some()
    }

    /// Uses `root` as `at` does, and from now on reaches it through this
    /// process's working directory, set to the directory opened and checked
    /// here: a home renamed away under us is followed, and one planted at its
    /// name is never written into (see `HeldHome`). For a supervisor, which
    /// lives as long as its job; its paths are then relative, never recorded
    /// (`root` is) and shown through `shown`.
    pub fn hold(root: PathBuf) -> Result<(Home, HeldHome)> {
        Home::hold_for(root, Purpose::Launch)
    }

    /// `hold`, for the long-lived errands (`__watch`, `__announce`,
    /// `__deliver`): they write logs and run hooks as a supervisor does, so
    /// they hold their home too; they start no job, so a home whose parents
    /// are not safe is held as `for_looking` takes it.
    pub fn hold_for_errand(root: PathBuf) -> Result<(Home, HeldHome)> {
        Home::hold_for(root, Purpose::Look)
    }

    fn hold_for(root: PathBuf, purpose: Purpose) -> Result<(Home, HeldHome)> {
        let home = Home::open(root, purpose)?;
        let held = HeldHome::open(&home)?;
        Ok((Home { root: home.root, base: PathBuf::from("."), unsafe_parents: home.unsafe_parents }, held))
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
    /// Events not delivered yet, and the wake rules' looks (`spool/wake/`).
    pub fn spool_dir(&self) -> PathBuf {
        self.base.join("spool")
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

    /// Where this process reads or writes the log a job's record names
    /// (`recorded`, under `root`): through `dir()`, so that a supervisor or
    /// an errand holding its home never follows the home's name into a
    /// directory put in its place. A log recorded elsewhere (no run-bg puts
    /// one there) is taken as recorded.
    pub fn job_log(&self, id: &str, recorded: &Path) -> PathBuf {
        let held = self.log_path(id);
        if self.shown(&held) == recorded {
            held
        } else {
            recorded.to_path_buf()
        }
    }

    /// Says plainly that the disk is full when a write into the home failed
    /// for want of space, or that it is read-only; paths are shown as the
    /// user knows them (`shown`); other errors pass unchanged.
    pub fn explain(&self, error: Error) -> Error {
        match error {
            Error::Io { action, path, source }
                if matches!(source.raw_os_error(), Some(crate::os::sys::errno::ENOSPC) | Some(crate::os::sys::errno::EDQUOT)) =>
            {
                Error::DiskFull { home: self.root.clone(), action, path: self.shown(&path), source }
            }
            Error::Io { action, path, source } if source.raw_os_error() == Some(crate::os::sys::errno::EROFS) => Error::Io {
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
    /// Kept open to ask whether it still has a name (`removed`).
    dir: File,
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
        let identity = crate::os::sys::file_identity(&dir);
        let named = crate::os::sys::metadata_identity(&checked).or_else(|| crate::os::sys::path_identity(&path));
        if identity.is_none() || identity != named {
            return refuse(format!("{} was replaced while it was being checked", path.display()));
        }
        if opened.uid() != euid() || opened.mode() & 0o022 != 0 {
            return refuse(format!("{} changed owner or mode while it was being checked", path.display()));
        }
        crate::os::sys::enter_directory(&dir, &path).map_err(|e| Error::io("enter", &path, e))?;
        let (dev, ino) = identity.unwrap_or_default();
        Ok(HeldHome { path, dir, dev, ino })
    }

    /// Whether the home was removed (`rm -rf`): a removed directory has no
    /// links left, and nothing written into it can ever be read.
    pub fn removed(&self) -> bool {
        self.dir.metadata().is_ok_and(|meta| meta.nlink() == 0)
    }

    /// Opens the home by its path again and works through that if it is still
    /// the same directory: the same files, but seen through whatever is
    /// mounted there now (a read-only remount shows, and so does its undoing).
    /// A different directory (the home renamed away and another put in its
    /// place) is ignored: we stay in ours. Whether it was still there.
    pub fn refresh(&self) -> bool {
        let Ok(dir) = open_dir_nofollow(&self.path) else { return false };
        match dir.metadata() {
            Ok(_) if crate::os::sys::file_identity(&dir) == Some((self.dev, self.ino)) => crate::os::sys::enter_directory(&dir, &self.path).is_ok(),
            _ => false,
        }
    }
}

fn open_dir_nofollow(path: &Path) -> std::io::Result<File> {
    crate::os::sys::open_directory_no_follow(path)
}

/// Judges a home's parent directories as OpenSSH's StrictModes judges those
/// of `~/.ssh`: whoever can rename the home away can put their own in its
/// place, with settings whose hooks run as us and queued jobs we would start.
/// Each parent must be owned by us or root and writable by no one else,
/// unless it is sticky (as /tmp, 1777): there others cannot rename what they
/// do not own. Two exceptions, as Debian's OpenSSH makes them: write by a
/// group that is ours alone (our primary group, with no other member: the
/// user private groups of Debian and Ubuntu, where umask 002 makes 775
/// directories), and, inside a user namespace (bubblewrap, `unshare -r`,
/// rootless containers), the overflow uid files of owners outside it show as
/// (there `/` and `/tmp` are the host root's). A symbolic link on the way
/// must be ours or root's, or its owner could point it elsewhere.
/// `Some(what is wrong and how to fix it)` when they are not safe.
fn check_parents(home: &Path) -> Result<Option<String>> {
    let problem = |dir: &Path, problem: String, fix: String| {
        Ok(Some(format!(
            "its parent directory {} {problem}, so another user could rename the home away and put their own in its \
             place (settings, hooks and queued jobs run as you). {fix}",
            dir.display()
        )))
    };
    let elsewhere = "or set PROC_MANAGER_HOME to a directory inside one of your own";
    let outside_owner = crate::os::platform::foreign_owner_uid();
    // Root's, or in a user namespace someone's outside it (the host's root).
    let trusted_owner = |uid: u32| uid == euid() || uid == 0 || Some(uid) == outside_owner;
    // Symlinks on the way as named (their targets are judged below, resolved).
    let mut named = PathBuf::new();
    for part in home.parent().unwrap_or(home).components() {
        named.push(part);
        if let Ok(meta) = std::fs::symlink_metadata(&named) {
            if meta.file_type().is_symlink() && !trusted_owner(meta.uid()) {
                return problem(
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
    // The two chains share their ancestors unless the home is a symlink
    // leading elsewhere: each directory is judged once.
    let mut judged: Vec<&Path> = Vec::new();
    for dir in chains.iter().flat_map(|chain| chain.ancestors()) {
        if judged.contains(&dir) {
            continue;
        }
        judged.push(dir);
        let meta = std::fs::metadata(dir).map_err(|e| Error::io("inspect", dir, e))?;
        if !trusted_owner(meta.uid()) {
            return problem(
                dir,
                format!("is owned by uid {}, not by you (uid {}) or root", meta.uid(), euid()),
                format!("Fix it with: chown {} {} ({elsewhere})", euid(), dir.display()),
            );
        }
        let sticky = meta.mode() & 0o1000 != 0;
        let others_write = meta.mode() & 0o002 != 0;
        // A sticky directory (/tmp) is safe whoever writes into it: the user
        // and group databases are read only for one that is not.
        let stranger_group_writes = || meta.mode() & 0o020 != 0 && !group_is_ours_alone(crate::os::sys::group_of(&meta));
        if !sticky && (others_write || stranger_group_writes()) {
            return problem(
                dir,
                format!("is writable by its group or others (mode {:o}) and not sticky", meta.mode() & 0o7777),
                format!("Fix it with: chmod go-w {} (or chmod +t {0}, as /tmp is) ({elsewhere})", dir.display()),
            );
        }
    }
    Ok(None)
}

/// Whether the group `gid` is our user private group, as read from
/// /etc/passwd and /etc/group (a user known only to a directory service is
/// not found, and the group is judged shared).
fn group_is_ours_alone(gid: u32) -> bool {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    group_is_private_to(gid, euid(), &read("/etc/passwd"), &read("/etc/group"))
}

/// Debian OpenSSH's "user-group-modes" rule: the group is `uid`'s primary
/// group, no one else is a member of it, and no other user has it as theirs.
fn group_is_private_to(gid: u32, uid: u32, passwd: &str, group: &str) -> bool {
    // name:password:id:gid (passwd), name:password:gid:members (group).
    let parse = |field: &str| field.parse::<u32>().ok();
    let passwd: Vec<Vec<&str>> = passwd.lines().map(|line| line.split(':').collect::<Vec<_>>()).filter(|f| f.len() >= 4).collect();
    let group: Vec<Vec<&str>> = group.lines().map(|line| line.split(':').collect::<Vec<_>>()).filter(|f| f.len() >= 4).collect();
    let Some(user) = passwd.iter().find(|f| parse(f[2]) == Some(uid)) else { return false };
    if parse(user[3]) != Some(gid) {
        return false;
    }
    let Some(entry) = group.iter().find(|f| parse(f[2]) == Some(gid)) else { return false };
    let members_ours = entry[3].split(',').map(str::trim).filter(|m| !m.is_empty()).all(|m| m == user[0]);
    let shared_as_primary = passwd.iter().any(|f| parse(f[2]) != Some(uid) && parse(f[3]) == Some(gid));
    members_ours && !shared_as_primary
}

/// A file in the home must be ours: one another user made (they could write
/// into the home once, or it was planted in a home swapped under us) is
/// never trusted, as a record, a launch spec or settings. Checked on the
/// opened file, so it is the file read.
fn refuse_foreign(file: File) -> std::io::Result<File> {
    refuse_foreign_with_metadata(file).map(|(file, _)| file)
}

fn not_a_plain_file() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "it is not a plain file (a FIFO, a device or a directory); proc-manager reads and writes only plain files in \
         its home: remove it",
    )
}

/// `no_symlinks`, and what opening a FIFO to write without waiting says
/// when nobody reads it (ENXIO, "no such device or address"): that it is no
/// plain file.
fn no_symlinks_nor_fifos(error: std::io::Error) -> std::io::Error {
    if error.raw_os_error() == Some(crate::os::sys::errno::ENXIO) {
        return not_a_plain_file();
    }
    no_symlinks(error)
}

/// `refuse_foreign`, giving the metadata it read: callers that need the
/// size or the time of change ask once, not again.
fn refuse_foreign_with_metadata(file: File) -> std::io::Result<(File, std::fs::Metadata)> {
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        // A FIFO would block its reader, a device or a directory is no record.
        return Err(not_a_plain_file());
    }
    let owner = metadata.uid();
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
    Ok((file, metadata))
}

enum Link {
    /// A symlink of ours (or root's) is judged by where it leads.
    AcceptOurs,
    Refuse,
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
    let _ = crate::os::sys::set_mode(path, 0o700);
    Ok(())
}

/// Open options for a file inside the home: a symlink in its place is never
/// followed (the open fails with a clear error instead; see `no_symlinks`).
pub fn options_nofollow() -> OpenOptions {
    let mut options = OpenOptions::new();
    crate::os::sys::no_follow(&mut options);
    options
}

/// How the home's own files open: never through a symlink, and never
/// waiting (a FIFO in a file's place is refused by `refuse_foreign`).
fn home_file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    crate::os::sys::no_follow_no_wait(&mut options);
    options
}

/// Opens a file inside the home for reading, never through a symlink, and
/// only if it is a plain file of ours (`refuse_foreign`).
pub fn open_read(path: &Path) -> std::io::Result<File> {
    home_file_options().read(true).open(path).map_err(no_symlinks).and_then(refuse_foreign)
}

/// `open_read`, with the file's metadata (read once, for the check).
pub fn open_read_with_metadata(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    home_file_options().read(true).open(path).map_err(no_symlinks).and_then(refuse_foreign_with_metadata)
}

/// Reads `file` to its end into a buffer sized from `metadata` (taken from
/// it as opened): std's `read_to_end` of a `File` asks the size again (a
/// statx and an lseek), which for the small files read in thousands (a
/// kill of 1,000 jobs reads each job.json, request and record) is a third
/// of the system calls. A file that grew meanwhile is still read whole.
pub fn read_opened(file: &File, metadata: &std::fs::Metadata) -> std::io::Result<Vec<u8>> {
    // One byte more than the size: the read that finds the end needs no growth.
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0).saturating_add(1).min(1 << 24));
    // Through `take`, which std does not size by asking the file again.
    std::io::Read::take(file, u64::MAX).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens a file inside the home for writing in place, as `open_read` does.
pub fn open_write(path: &Path) -> std::io::Result<File> {
    home_file_options().write(true).open(path).map_err(no_symlinks_nor_fifos).and_then(refuse_foreign)
}

/// How long ago `path` (not what a symlink there names) was last written;
/// `None` when it cannot be told (gone, a clock set back).
pub fn age(path: &Path) -> Option<std::time::Duration> {
    std::fs::symlink_metadata(path).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok())
}

/// Reads a whole file inside the home, never through a symlink.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let (file, metadata) = open_read_with_metadata(path)?;
    read_opened(&file, &metadata)
}

/// `O_NOFOLLOW` reports a symlink as ELOOP ("too many levels of symbolic
/// links"); say what it means here.
pub fn no_symlinks(error: std::io::Error) -> std::io::Error {
    if error.raw_os_error() == Some(crate::os::sys::errno::ELOOP) {
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
    if crate::os::platform::fill_random(buf)? == buf.len() {
        return Ok(());
    }
    File::open("/dev/urandom")?.read_exact(buf)
}

/// A FIFO planted at `path`, as a hostile or mistaken tool would leave one
/// where a home file belongs, for the tests that it is refused, not waited on.
#[cfg(all(test, unix))]
pub(crate) mod planted_fifo {
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    pub(crate) fn plant(path: &Path) {
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    }

    /// Lets a reader or writer stuck on the FIFO go (the other end opened,
    /// without waiting), so that a failing test fails instead of hanging.
    pub(crate) fn release(path: &Path) {
        let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path);
        let _ = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path);
    }
}

// Owners, modes and symlinks: Unix's home checks.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn is_root() -> bool {
        euid() == 0
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
        std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
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
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
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
        // Group write by a group of ours alone is allowed (see the user-group
        // test below): as root the group is made one that is not.
        let modes: &[u32] = if is_root() { &[0o777, 0o775, 0o757] } else { &[0o777, 0o757] };
        if is_root() {
            std::os::unix::fs::chown(&open, None, Some(65534)).unwrap();
        }
        for &mode in modes {
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = Home::at(open.join("home")).expect_err(&format!("a parent of mode {mode:o}")).to_string();
            assert!(err.contains(&format!("parent directory {} is writable", open.display())), "{mode:o}: {err}");
            assert!(err.contains(&format!("chmod go-w {}", open.display())), "{mode:o}: {err}");
        }
        // Sticky, as /tmp: others cannot rename what they do not own.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        Home::at(open.join("home")).expect("a sticky parent is fine");
    }

    /// Debian's user private groups (umask 002, 775 directories): group
    /// write by a group that is the user's alone is no one else's write.
    #[test]
    fn group_write_is_allowed_only_by_a_group_of_the_user_alone() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      ann:x:1000:1000:Ann:/home/ann:/bin/bash\n\
                      bob:x:1001:1001:Bob:/home/bob:/bin/bash\n\
                      eve:x:1002:100:Eve:/home/eve:/bin/bash\n\
                      kim:x:1003:100:Kim:/home/kim:/bin/bash\n";
        let group = "root:x:0:\nusers:x:100:\nann:x:1000:\nbob:x:1001:bob\nstaff:x:50:ann,bob\nshared:x:1004:ann,eve\n";
        assert!(group_is_private_to(1000, 1000, passwd, group), "ann's own group, no members");
        assert!(group_is_private_to(1001, 1001, passwd, group), "bob's own group, bob its only member");
        assert!(group_is_private_to(0, 0, passwd, group), "root's group, no one else's");
        assert!(!group_is_private_to(1001, 1000, passwd, group), "another user's private group");
        assert!(!group_is_private_to(50, 1000, passwd, group), "not ann's primary group");
        assert!(!group_is_private_to(100, 1002, passwd, group), "eve's primary group is kim's too");
        let with_member = group.replace("ann:x:1000:", "ann:x:1000:eve");
        assert!(!group_is_private_to(1000, 1000, passwd, &with_member), "another user is a member");
        assert!(!group_is_private_to(1000, 1000, passwd, "users:x:100:\n"), "a group /etc/group does not know");
        assert!(!group_is_private_to(1000, 1005, passwd, group), "a user /etc/passwd does not know");
    }

    /// Verbs that only look at or stop jobs work in a home whose parents are
    /// not safe (so jobs an older version started there can be cleaned up);
    /// starting one is refused.
    #[test]
    fn a_home_with_unsafe_parents_can_be_looked_at_but_not_started_in() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let home = open.join("home");
        Home::at(home.clone()).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(Home::at(home.clone()).is_err(), "refused for starting");
        let looked = Home::for_looking(home.clone()).expect("usable for looking");
        let err = looked.require_safe_parents().expect_err("no start there").to_string();
        assert!(err.contains(&format!("parent directory {} is writable", open.display())), "{err}");
        assert!(err.contains(&format!("chmod go-w {}", open.display())), "{err}");
        // Nothing is made in such a place to look at.
        let err = Home::for_looking(open.join("new")).expect_err("a home not made yet").to_string();
        assert!(err.contains("refusing to use"), "{err}");
        assert!(!open.join("new").exists());
    }

    /// A FIFO planted where a home file belongs (a job's job.json, the
    /// registry, a request) made every reader wait for a writer that never
    /// comes: `list` hung. It is refused at once, saying what it is.
    #[test]
    fn a_fifo_in_place_of_a_home_file_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("job.json");
        planted_fifo::plant(&fifo);
        let (sender, answers) = std::sync::mpsc::channel();
        let planted = fifo.clone();
        std::thread::spawn(move || {
            let _ = sender.send((read_file(&planted).map(|_| ()), open_write(&planted).map(|_| ())));
        });
        let answered = answers.recv_timeout(std::time::Duration::from_secs(10));
        if answered.is_err() {
            planted_fifo::release(&fifo);
        }
        let (read, write) = answered.expect("a FIFO is refused at once, not waited on");
        for err in [read.unwrap_err(), write.unwrap_err()] {
            assert!(err.to_string().contains("not a plain file"), "{err}");
        }
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
