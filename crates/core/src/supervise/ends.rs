//! Job ends as they happen, for an in-process consumer (the addon's
//! `watchJobs`): inotify on the home tells when a job's `job.json` or the
//! registry was written, by whichever process of the user; each end not seen
//! before is handed over with the same `data` as the POST to the interrupt
//! service. Between writes the thread sleeps in `poll`, at no CPU cost.

use crate::model::job::JobStatus;
use crate::store::config::Config;
use crate::store::paths::Home;
use crate::store::registry::Registry;
use crate::supervise::notify;
use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A status worth telling: the job ended, or its supervisor is gone.
fn is_end(status: JobStatus) -> bool {
    status.is_final() || status == JobStatus::Orphaned
}

struct Inotify(OwnedFd);

impl Inotify {
    fn new() -> std::io::Result<Inotify> {
        // SAFETY: no pointers; the result is checked before it is owned.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened by us and is owned by nothing else.
        Ok(Inotify(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `dir` for files written or renamed into it, and directories made in it.
    fn watch(&self, dir: &Path) {
        let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else { return };
        let mask = libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO | libc::IN_CREATE | libc::IN_ONLYDIR | libc::IN_DONT_FOLLOW;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        // A failure (the directory went away) leaves it unwatched; the next
        // scan of the registry still sees what it held.
        unsafe { libc::inotify_add_watch(self.0.as_raw_fd(), path.as_ptr(), mask) };
    }

    /// Reads every pending event; the names created (new job directories).
    fn drain(&self) -> Vec<std::ffi::OsString> {
        let mut names = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is writable for its whole length.
            let n = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return names;
            }
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n as usize {
                // SAFETY: the kernel wrote whole events; read_unaligned copes
                // with the byte buffer's alignment.
                let event: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name = &buf[at + header..(at + header + event.len as usize).min(n as usize)];
                let name = name.split(|&b| b == 0).next().unwrap_or_default();
                if event.mask & libc::IN_CREATE != 0 && event.mask & libc::IN_ISDIR != 0 && !name.is_empty() {
                    names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
                }
                at += header + event.len as usize;
            }
        }
    }
}

/// Hands each job end from now on (of `owner`'s jobs, when given) to `emit`
/// until `emit` returns false or `stop` becomes readable; ends recorded
/// before the call are not handed over.
pub fn watch(home: &Home, config: &Config, owner: Option<&str>, stop: impl AsFd, mut emit: impl FnMut(serde_json::Value) -> bool) -> crate::Result<()> {
    let inotify = Inotify::new().map_err(|e| crate::Error::io("watch", home.root.clone(), e))?;
    let jobs_dir = home.jobs_dir();
    let _ = std::fs::create_dir_all(&jobs_dir);
    inotify.watch(&home.root);
    inotify.watch(&jobs_dir);
    if let Ok(dir) = std::fs::read_dir(&jobs_dir) {
        for entry in dir.flatten() {
            inotify.watch(&entry.path());
        }
    }
    let registry = Registry::for_config(home, config);
    let mut told: HashSet<String> = HashSet::new();
    let scan = |told: &mut HashSet<String>, emit_new: bool, emit: &mut dyn FnMut(serde_json::Value) -> bool| -> bool {
        for job in registry.load().unwrap_or_default() {
            if !is_end(job.status()) || owner.is_some_and(|o| job.owner.as_deref() != Some(o)) {
                continue;
            }
            if told.insert(notify::event_id(&job)) && emit_new && !emit(notify::event_body(&config.notify, &job)["data"].take()) {
                return false;
            }
        }
        true
    };
    scan(&mut told, false, &mut emit);
    loop {
        let mut fds = [
            rustix::event::PollFd::new(&inotify.0, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(&stop, rustix::event::PollFlags::IN),
        ];
        // EINTR: look again.
        let _ = rustix::event::poll(&mut fds, None);
        if !fds[1].revents().is_empty() {
            return Ok(());
        }
        for name in inotify.drain() {
            inotify.watch(&jobs_dir.join(name));
        }
        if !scan(&mut told, true, &mut emit) {
            return Ok(());
        }
    }
}
