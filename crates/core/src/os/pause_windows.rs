//! `pause` and `resume` on Windows, which has no SIGSTOP: every process of
//! the job's Job Object is suspended (`NtSuspendProcess`, which suspends all
//! of a process's threads in one call into the kernel), and exactly the
//! processes suspended are resumed later (`NtResumeProcess`, each through
//! the handle kept since, which also pins its pid).
//!
//! A process started while the job is paused must not run either. Passes
//! over the Job Object's members repeat until one finds nothing new: a
//! member caught in the middle of a `CreateProcess` finishes that call
//! before its suspension takes hold, and its child is in the job by the
//! next pass. (Windows's CreateProcess is documented to make the child's
//! first thread suspended and resume it on its way out of the call, which a
//! suspended parent never reaches; that was not seen here, and a child
//! that does run is held all the same.) The Job Object's completion port
//! (`os/job_watch_windows.rs`) reports every process that joins the job,
//! and `on_new_member` suspends it while the pause holds; a look over the
//! members every `PAUSED_LOOK` catches one whose notice never came
//! (Windows does not promise to deliver them).
//!
//! What is not the job's stays running, as on Unix: a run-bg supervisor
//! started from inside the job (it carries `SUPERVISOR_MARK`) and the
//! processes of such a nested job (their cookie names another job), which
//! Windows keeps in our Job Object too, as a job can only be left where the
//! Job Object allows it and ours does not.

use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use windows_sys::Win32::Foundation::{HANDLE, NTSTATUS};
use windows_sys::Win32::System::Threading::{OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SUSPEND_RESUME};

#[link(name = "ntdll")]
extern "system" {
    fn NtSuspendProcess(process: HANDLE) -> NTSTATUS;
    fn NtResumeProcess(process: HANDLE) -> NTSTATUS;
}

/// How long a pause keeps passing over the members while each pass finds
/// new ones (a tree that starts processes faster than a pass takes).
const PAUSE_PATIENCE: Duration = Duration::from_secs(2);

/// Between two passes: long enough for a `CreateProcess` under way in a
/// member just suspended to finish and put its child in the job.
const BETWEEN_PASSES: Duration = Duration::from_millis(5);

/// While paused, how often the members are looked over for one that joined
/// without a notice on the completion port.
pub const PAUSED_LOOK: Duration = Duration::from_millis(100);

/// Opens `pid` with the right to suspend and resume it; the handle pins it.
fn open_for_suspension(pid: u32) -> std::io::Result<OwnedHandle> {
    // SAFETY: plain values in; a null result is an error, read at once.
    let handle = unsafe { OpenProcess(PROCESS_SUSPEND_RESUME | PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns or closes.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

fn status_to_result(status: NTSTATUS, what: &str) -> std::io::Result<()> {
    if status < 0 {
        return Err(std::io::Error::other(format!("{what} failed (NTSTATUS {:#010x})", status as u32)));
    }
    Ok(())
}

/// Suspends every thread of the process behind `handle` (one more suspension).
pub fn suspend(handle: &OwnedHandle) -> std::io::Result<()> {
    // SAFETY: a live process handle with PROCESS_SUSPEND_RESUME.
    status_to_result(unsafe { NtSuspendProcess(handle.as_raw_handle() as HANDLE) }, "NtSuspendProcess")
}

/// Takes back one suspension of every thread of the process behind `handle`.
pub fn resume(handle: &OwnedHandle) -> std::io::Result<()> {
    // SAFETY: a live process handle with PROCESS_SUSPEND_RESUME.
    status_to_result(unsafe { NtResumeProcess(handle.as_raw_handle() as HANDLE) }, "NtResumeProcess")
}

/// Suspends the process `pid` (SIGSTOP's counterpart for one process).
pub fn suspend_pid(pid: u32) -> std::io::Result<()> {
    suspend(&open_for_suspension(pid)?)
}

/// Resumes the process `pid` once (SIGCONT's counterpart: a process whose
/// supervisor died while it was paused is resumed so).
pub fn resume_pid(pid: u32) -> std::io::Result<()> {
    resume(&open_for_suspension(pid)?)
}

/// The pause of one job: whether it holds, and the processes it suspended.
/// Shared between the supervisor's loop (pause, resume) and the thread that
/// hears of new members (`on_new_member`, `look_again`).
pub struct JobPause {
    job_id: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    paused: bool,
    /// Each suspended process: its pid and the handle that pins it.
    held: Vec<(u32, OwnedHandle)>,
}

impl State {
    fn holds(&self, pid: u32) -> bool {
        self.held.iter().any(|(held, _)| *held == pid)
    }

    /// Suspends `pid` unless it is held already or not the job's: whether it was.
    fn take(&mut self, pid: u32, job_id: &str) -> bool {
        if self.holds(pid) || !is_the_jobs(pid, job_id) {
            return false;
        }
        match open_for_suspension(pid).and_then(|handle| suspend(&handle).map(|()| handle)) {
            Ok(handle) => {
                self.held.push((pid, handle));
                true
            }
            // Gone meanwhile, or not ours to suspend: nothing of it runs for the job.
            Err(_) => false,
        }
    }
}

/// Whether a member of the Job Object is the job's own: not a run-bg
/// supervisor started from inside it, nor a process of that nested job.
/// A process whose environment cannot be read (just starting, or gone) is
/// taken as the job's: it is in the job's Job Object.
fn is_the_jobs(pid: u32, job_id: &str) -> bool {
    if crate::os::platform::environ_value(pid, SUPERVISOR_MARK).is_some() {
        return false;
    }
    crate::os::platform::environ_value(pid, JOB_COOKIE).is_none_or(|cookie| cookie == job_id)
}

impl JobPause {
    pub fn new(job_id: &str) -> JobPause {
        JobPause { job_id: job_id.to_string(), state: Mutex::new(State::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn is_paused(&self) -> bool {
        self.state().paused
    }

    /// Suspends every process `members` lists (the Job Object's), pass after
    /// pass until one finds nothing new twice running (or `PAUSE_PATIENCE`
    /// is over). From here on, `on_new_member` suspends each newcomer.
    /// Gives how many processes the pause holds.
    pub fn pause(&self, members: &dyn Fn() -> Vec<u32>) -> usize {
        let mut state = self.state();
        state.paused = true;
        let deadline = Instant::now() + PAUSE_PATIENCE;
        let mut quiet = 0;
        while quiet < 2 && Instant::now() < deadline {
            let mut found = false;
            for pid in members() {
                found |= state.take(pid, &self.job_id);
            }
            quiet = if found { 0 } else { quiet + 1 };
            std::thread::sleep(BETWEEN_PASSES);
        }
        state.held.len()
    }

    /// Resumes every process the pause suspended, and ends the pause: how many.
    pub fn resume(&self) -> usize {
        let mut state = self.state();
        state.paused = false;
        let held = std::mem::take(&mut state.held);
        for (_, handle) in &held {
            let _ = resume(handle);
        }
        held.len()
    }

    /// A process that joined the Job Object: suspended at once while the
    /// pause holds.
    pub fn on_new_member(&self, pid: u32) {
        let mut state = self.state();
        if state.paused {
            state.take(pid, &self.job_id);
        }
    }

    /// While the pause holds: one pass over the members, for one that
    /// joined without a notice. Gives when to look again (never when not paused).
    pub fn look_again(&self, members: &dyn Fn() -> Vec<u32>) -> Option<Duration> {
        let mut state = self.state();
        if !state.paused {
            return None;
        }
        for pid in members() {
            state.take(pid, &self.job_id);
        }
        Some(PAUSED_LOOK)
    }
}

/// A ticking process for the tests: cmd running a batch file that prints
/// `t<n>` about every second (a new ping as its timer each time), and the
/// count of ticks read from it so far. (A batch file: wine's cmd runs only
/// the first command of an inline `for … do a & b` in the loop.)
#[cfg(test)]
pub(crate) fn ticker(dir: &std::path::Path) -> (std::process::Child, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::BufRead;
    std::fs::create_dir_all(dir).unwrap();
    let script = dir.join("ticker.bat");
    std::fs::write(&script, "@echo off\r\nset n=0\r\n:loop\r\nset /a n+=1\r\necho t%n%\r\nping -n 2 127.0.0.1 >nul\r\nif %n% lss 300 goto loop\r\n").unwrap();
    let mut child = std::process::Command::new("cmd").arg("/c").arg(&script).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = ticks.clone();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for _ in std::io::BufReader::new(out).lines() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    (child, ticks)
}

/// Waits (20 s at most) for `check`.
#[cfg(test)]
pub(crate) fn wait_for(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_paused_job_object_prints_nothing_until_resumed() {
        let dir = std::env::temp_dir().join(format!("pm-pause-{}", std::process::id()));
        let job = crate::os::windows_job::create_job(&crate::os::windows_job::object_name(&dir, "pause-test", "tree")).unwrap();
        let (mut child, ticks) = ticker(&dir);
        crate::os::windows_job::assign(&job, &child).unwrap();
        wait_for("the first ticks", || ticks.load(Ordering::SeqCst) >= 2);
        let pause = JobPause::new("pause-test");
        let members = || crate::os::windows_job::process_ids(&job);
        assert!(pause.pause(&members) >= 1);
        assert!(pause.is_paused());
        let held = ticks.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(ticks.load(Ordering::SeqCst), held, "a tick while paused");
        assert!(pause.look_again(&members).is_some());
        assert!(pause.resume() >= 1);
        assert!(!pause.is_paused());
        assert!(pause.look_again(&members).is_none());
        wait_for("ticks after the resume", || ticks.load(Ordering::SeqCst) >= held + 2);
        crate::os::windows_job::terminate_job(&job, 1).unwrap();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
