//! What a job's supervisor wants of every process that joins its Job
//! Object, done as it joins: held suspended while the job is paused
//! (`os/pause_windows.rs`), and given the job's priority class (`--nice`,
//! `os/nice_windows.rs`). The Job Object's completion port tells a thread of
//! each process that joins (`JOB_OBJECT_MSG_NEW_PROCESS`, the pid in the
//! message); Unix needs none of this, as a stopped process forks no more and
//! a child inherits its parent's niceness.

use crate::os::pause_windows::JobPause;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::Arc;
use std::time::Instant;
use windows_sys::Win32::Foundation::{GetLastError, HANDLE, INVALID_HANDLE_VALUE, WAIT_TIMEOUT};
use windows_sys::Win32::System::JobObjects::{JobObjectAssociateCompletionPortInformation, SetInformationJobObject, JOBOBJECT_ASSOCIATE_COMPLETION_PORT};
use windows_sys::Win32::System::SystemServices::JOB_OBJECT_MSG_NEW_PROCESS;
use windows_sys::Win32::System::IO::{CreateIoCompletionPort, GetQueuedCompletionStatus, PostQueuedCompletionStatus, OVERLAPPED};

/// The completion key of the Job Object's messages, and of our own wake-up.
const JOB_KEY: usize = 1;
const LOOK_KEY: usize = 2;

/// The job's members as its supervisor keeps them: the pause, the priority
/// class, and the thread that applies both to each newcomer.
pub struct JobMembers {
    pause: Arc<JobPause>,
    /// The completion port the thread waits on, while it does.
    port: Option<Arc<OwnedHandle>>,
}

impl JobMembers {
    /// Starts watching `job` (the job `job_id`'s Job Object) for newcomers,
    /// each given `priority` (a priority class) if any. When the watch
    /// cannot start, a pause still holds every member it finds, and the
    /// error says what was lost.
    pub fn watch(job: &OwnedHandle, job_id: &str, priority: Option<u32>) -> (JobMembers, Option<std::io::Error>) {
        let pause = Arc::new(JobPause::new(job_id));
        match start_thread(job, &pause, priority) {
            Ok(port) => (JobMembers { pause, port: Some(port) }, None),
            Err(e) => (JobMembers { pause, port: None }, Some(e)),
        }
    }

    /// Suspends every member of `job` (the Job Object watched), and each
    /// newcomer from now on: how many the pause holds.
    pub fn pause(&self, job: &OwnedHandle) -> usize {
        let held = self.pause.pause(&|| crate::os::windows_job::process_ids(job));
        // The thread starts its looks for newcomers no notice announced.
        if let Some(port) = &self.port {
            // SAFETY: a live completion port handle; no OVERLAPPED is passed.
            unsafe { PostQueuedCompletionStatus(port.as_raw_handle() as HANDLE, 0, LOOK_KEY, std::ptr::null()) };
        }
        held
    }

    /// Resumes what the pause suspended: how many.
    pub fn resume(&self) -> usize {
        self.pause.resume()
    }

    pub fn is_paused(&self) -> bool {
        self.pause.is_paused()
    }
}

/// Associates a new completion port with `job` and starts the thread that
/// hears it; gives the port (to wake the thread).
fn start_thread(job: &OwnedHandle, pause: &Arc<JobPause>, priority: Option<u32>) -> std::io::Result<Arc<OwnedHandle>> {
    // The thread's own handle: it looks at the members on its own.
    let job = job.try_clone()?;
    // SAFETY: a new port, not tied to any file (INVALID_HANDLE_VALUE); one thread.
    let port = unsafe { CreateIoCompletionPort(INVALID_HANDLE_VALUE, std::ptr::null_mut(), 0, 1) };
    if port.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns or closes.
    let port = Arc::new(unsafe { OwnedHandle::from_raw_handle(port as _) });
    let association = JOBOBJECT_ASSOCIATE_COMPLETION_PORT { CompletionKey: JOB_KEY as *mut _, CompletionPort: port.as_raw_handle() as HANDLE };
    // SAFETY: a live Job Object handle with every right (we made it), and a
    // struct of the size passed, which the call only reads.
    let associated = unsafe {
        SetInformationJobObject(
            job.as_raw_handle() as HANDLE,
            JobObjectAssociateCompletionPortInformation,
            (&association as *const JOBOBJECT_ASSOCIATE_COMPLETION_PORT).cast(),
            std::mem::size_of::<JOBOBJECT_ASSOCIATE_COMPLETION_PORT>() as u32,
        )
    } != 0;
    if !associated {
        return Err(std::io::Error::last_os_error());
    }
    let (pause, heard) = (pause.clone(), port.clone());
    std::thread::Builder::new().name("job members".into()).spawn(move || hear(&heard, &job, &pause, priority))?;
    Ok(port)
}

/// The thread: each newcomer given the class and held if paused; while
/// paused, a look over the members every `PAUSED_LOOK` too.
fn hear(port: &OwnedHandle, job: &OwnedHandle, pause: &JobPause, priority: Option<u32>) {
    let members = || crate::os::windows_job::process_ids(job);
    let mut look_at: Option<Instant> = None;
    loop {
        let wait = look_at.map_or(u32::MAX, |at| at.saturating_duration_since(Instant::now()).as_millis().min(u32::MAX as u128 - 1) as u32);
        let (mut message, mut key, mut overlapped) = (0u32, 0usize, std::ptr::null_mut::<OVERLAPPED>());
        // SAFETY: a live port handle and three out-parameters of the right types.
        let got = unsafe { GetQueuedCompletionStatus(port.as_raw_handle() as HANDLE, &mut message, &mut key, &mut overlapped, wait) } != 0;
        if got && key == JOB_KEY && message == JOB_OBJECT_MSG_NEW_PROCESS {
            // The message's "overlapped" is the pid of the process that joined.
            let pid = overlapped as usize as u32;
            if let Some(class) = priority {
                let _ = crate::os::nice_windows::set_class_of(pid, class);
            }
            pause.on_new_member(pid);
        } else if !got && overlapped.is_null() {
            // SAFETY: reads this thread's last error, set by the call above.
            if unsafe { GetLastError() } != WAIT_TIMEOUT {
                // The port is gone: nothing more will come.
                return;
            }
        }
        // Our own wake-up (a pause began), a timeout, or any message: a
        // look is due now or at its time.
        let now = Instant::now();
        if (got && key == LOOK_KEY) || look_at.is_some_and(|at| now >= at) {
            look_at = pause.look_again(&members).map(|after| now + after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use windows_sys::Win32::System::Threading::{GetPriorityClass, OpenProcess, IDLE_PRIORITY_CLASS, PROCESS_QUERY_LIMITED_INFORMATION};

    fn class_of(pid: u32) -> u32 {
        // SAFETY: plain values in; a null result is checked.
        let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if handle.is_null() {
            return 0;
        }
        // SAFETY: a fresh handle nothing else owns.
        let handle = unsafe { OwnedHandle::from_raw_handle(handle as _) };
        // SAFETY: a live handle with PROCESS_QUERY_LIMITED_INFORMATION.
        unsafe { GetPriorityClass(handle.as_raw_handle() as HANDLE) }
    }

    #[test]
    fn a_newcomer_gets_the_class_and_one_that_joins_while_paused_is_held() {
        let name = crate::os::windows_job::object_name(&std::env::temp_dir(), &format!("watch-{}", std::process::id()), "tree");
        let job = crate::os::windows_job::create_job(&name).unwrap();
        let (members, error) = JobMembers::watch(&job, "watch-test", Some(IDLE_PRIORITY_CLASS));
        assert!(error.is_none(), "{error:?}");
        // cmd starting one ping after another, each alive about a second.
        use std::os::windows::process::CommandExt;
        let mut cmd = std::process::Command::new("cmd")
            .raw_arg("/c for /L %i in (1,1,300) do @ping -n 2 127.0.0.1 >nul")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        crate::os::windows_job::assign(&job, &cmd).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let pings = || crate::os::windows_job::process_ids(&job).into_iter().filter(|&pid| pid != cmd.id()).collect::<Vec<_>>();
        let mut seen: Vec<(u32, u32)> = Vec::new();
        while !seen.iter().any(|&(_, class)| class == IDLE_PRIORITY_CLASS) && Instant::now() < deadline {
            seen.extend(pings().into_iter().map(|pid| (pid, class_of(pid))));
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(seen.iter().any(|&(_, class)| class == IDLE_PRIORITY_CLASS), "no newcomer got IDLE_PRIORITY_CLASS: {seen:?}");
        members.pause(&job);
        let held = crate::os::windows_job::process_ids(&job);
        std::thread::sleep(Duration::from_millis(2500));
        // cmd, held, starts no new ping: the members are what they were.
        let now = crate::os::windows_job::process_ids(&job);
        assert!(now.iter().all(|pid| held.contains(pid)), "a newcomer while paused: {now:?} (held {held:?})");
        // A process that joins while the job is paused is held as it joins:
        // a cmd printing a tick every second, started outside the job and
        // put in it now.
        let dir = std::env::temp_dir().join(format!("pm-watch-{}", std::process::id()));
        let (mut joiner, ticks) = crate::os::pause_windows::ticker(&dir);
        crate::os::pause_windows::wait_for("the joiner ticking", || ticks.load(std::sync::atomic::Ordering::SeqCst) >= 1);
        crate::os::windows_job::assign(&job, &joiner).unwrap();
        // Its notice reaches the thread within moments; a tick already on
        // its way may still come, nothing after it.
        std::thread::sleep(Duration::from_millis(300));
        let held_ticks = ticks.load(std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(ticks.load(std::sync::atomic::Ordering::SeqCst), held_ticks, "the process that joined while paused ran");
        assert!(members.resume() >= 2, "cmd and the joiner resumed");
        crate::os::pause_windows::wait_for("the joiner ticking again after the resume", || ticks.load(std::sync::atomic::Ordering::SeqCst) >= held_ticks + 2);
        crate::os::windows_job::terminate_job(&job, 1).unwrap();
        let _ = cmd.wait();
        let _ = joiner.wait();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
