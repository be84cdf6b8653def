//! Jobs tied to a process (`run-bg --tie`, `runBackground(cmd, {tie: true})`):
//! the supervisor holds a pidfd of that process in its poll set (on Windows
//! a process handle among the handles it waits on), and when it becomes
//! readable (the process ended) the job's tree is killed. No polling: the
//! kernel wakes the supervisor. Where neither exists (macOS, Linux before
//! 5.3) a tie is refused when the job starts, never silently dropped.

use crate::model::job::Tie;
use crate::os::{pidfd, procinfo};
use crate::{Error, Result};
use crate::os::sys::PinnedProcess;

/// The tie for a job started now, to `pid`; refused with the reason when
/// that process cannot be watched.
pub fn tie_to(pid: u32, caller: bool) -> Result<Tie> {
    if pid <= 1 || pid > i32::MAX as u32 {
        return Err(Error::Usage(format!(
            "bad tie pid {pid}: give the pid of a live process other than init (pid > 1)"
        )));
    }
    match pidfd::open_checked(pid) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(crate::os::sys::errno::ESRCH) => {
            return Err(Error::Usage(format!("cannot tie the job to pid {pid}: no such process")))
        }
        Err(e) => {
            return Err(Error::Usage(format!(
                "cannot tie the job to pid {pid}: this system cannot watch a process with a pidfd ({e}); \
                 --tie needs Linux 5.3 or later, or Windows"
            )))
        }
    }
    let to = procinfo::identify_exactly(pid)
        .ok_or_else(|| Error::Usage(format!("cannot tie the job to pid {pid}: no such process")))?;
    Ok(Tie { to, fired_at: None, caller })
}

/// The supervisor's watch of the tied process.
pub struct Watch {
    /// None: the process was gone before the watch began.
    fd: Option<PinnedProcess>,
}

impl Watch {
    /// Starts watching the job's tie, if it has one that has not fired.
    pub fn open(tie: Option<&Tie>) -> Option<Watch> {
        let tie = tie.filter(|t| t.fired_at.is_none())?;
        // The fd first, then the identity check: the fd then pins the very
        // process recorded, or that process is already gone (its pid may
        // be someone else's now, which must not keep the job alive).
        let fd = pidfd::open(tie.to.pid).filter(|_| procinfo::is_same_process_alive(&tie.to));
        Some(Watch { fd })
    }

    /// What the supervisor's poll watches; None: fire at once.
    pub fn fd(&self) -> Option<&PinnedProcess> {
        self.fd.as_ref()
    }

    /// Whether the tied process has ended, given the poll's answer for `fd()`.
    pub fn ended(&self, readable: bool) -> bool {
        self.fd.is_none() || readable
    }
}

/// Records that the tie fired now.
pub fn fire(tie: &mut Option<Tie>) -> Option<String> {
    let tie = tie.as_mut()?;
    tie.fired_at.get_or_insert_with(crate::now_ms);
    Some(tie.reason())
}

/// The identity the caller's parent has, for `run-bg --tie`: the process
/// that ran run-bg (usually the agent's shell). When run-bg runs under the
/// npm shim (`bin/run-bg.js`, a Node process that exits with us), the shim
/// names its own parent in `PROC_MANAGER_TIE_PARENT` as `<shim pid>:<pid>`;
/// that is used only when the shim is indeed our parent.
pub fn caller_pid() -> u32 {
    let parent = crate::os::sys::parent_pid();
    let via_shim = std::env::var("PROC_MANAGER_TIE_PARENT").ok().and_then(|v| {
        let (shim, caller) = v.split_once(':')?;
        (shim.parse::<u32>().ok()? == parent).then(|| caller.parse::<u32>().ok()).flatten()
    });
    via_shim.unwrap_or(parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::ProcessIdentity;

    #[test]
    fn a_tie_to_no_process_or_to_init_is_refused_with_the_reason() {
        assert!(tie_to(1, false).unwrap_err().to_string().contains("other than init"));
        assert!(tie_to(0, false).is_err());
        let mut child = crate::os::sys::quick_command().spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: nothing lives at that pid (barring a reuse within this instant).
        if procinfo::identify(pid).is_none() {
            assert!(tie_to(pid, false).unwrap_err().to_string().contains("no such process"));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_watch_fires_when_the_tied_process_ends() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let tie = tie_to(child.id(), true).unwrap();
        let watch = Watch::open(Some(&tie)).unwrap();
        let readable = |w: &Watch| {
            let mut fds = [rustix::event::PollFd::new(w.fd().unwrap(), rustix::event::PollFlags::IN)];
            let limit = rustix::event::Timespec { tv_sec: 5, tv_nsec: 0 };
            rustix::event::poll(&mut fds, Some(&limit)).unwrap() > 0
        };
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(watch.ended(readable(&watch)));
        let mut recorded = Some(tie);
        assert_eq!(fire(&mut recorded).unwrap(), format!("its caller (pid {}) exited", child.id()));
        assert!(Watch::open(recorded.as_ref()).is_none(), "a fired tie is not watched again");
    }

    #[test]
    fn identity_of_a_gone_process_starts_a_watch_that_fires_at_once() {
        let gone = ProcessIdentity::from_stat(std::process::id(), 1);
        let watch = Watch::open(Some(&Tie { to: gone, fired_at: None, caller: true })).unwrap();
        assert!(watch.ended(false));
    }
}
