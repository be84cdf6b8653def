//! A job's tree on Windows: a Job Object holds the main process and every
//! process it starts (a child cannot leave it: breakaway is not allowed), so
//! `TerminateJobObject` ends the whole tree at once, as a kill of the
//! process group and the pass over its strays does on Unix. A console
//! control event (`CTRL_BREAK_EVENT`) to the job's process group is the
//! grace period's polite request, as SIGTERM is there.
//!
//! The Job Object is named after the home and the job, so `kill` and
//! `check` reach it by name while its supervisor lives. A named object's
//! name goes with its last handle: after the supervisor dies the tree is
//! found by its recorded processes and their descendants instead (see
//! `verbs::kill`), which is what a dead supervisor leaves on Unix too.

use std::os::windows::io::{AsHandle, AsRawHandle, BorrowedHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{GetLastError, HANDLE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Console::{GenerateConsoleCtrlEvent, CTRL_BREAK_EVENT};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, OpenJobObjectW, QueryInformationJobObject, TerminateJobObject,
    JobObjectBasicAccountingInformation, JobObjectBasicProcessIdList, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
};
use windows_sys::Win32::System::SystemServices::{JOB_OBJECT_QUERY, JOB_OBJECT_TERMINATE};
use windows_sys::Win32::System::Threading::{CreateEventW, OpenEventW, ResetEvent, SetEvent, WaitForMultipleObjects, EVENT_MODIFY_STATE};

fn wide(text: &str) -> Vec<u16> {
    text.encode_utf16().chain(std::iter::once(0)).collect()
}

/// A name for `what` of job `job_id` under the home at `home`, unique per
/// home (two homes may hold the same job id) and valid as an object name
/// (no backslash but the namespace's).
pub fn object_name(home: &std::path::Path, job_id: &str, what: &str) -> String {
    format!("Local\\{}-{what}", object_key(home, job_id))
}

/// `proc-manager-<hash of the home>-<job>`: what names every object of one
/// job of one home (a Job Object, a named pipe), unique per home.
pub fn object_key(home: &std::path::Path, job_id: &str) -> String {
    // FNV-1a: stable across runs and builds, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in home.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let job: String = job_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("proc-manager-{hash:016x}-{job}")
}

fn owned(handle: HANDLE) -> std::io::Result<OwnedHandle> {
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle from a create/open call, owned by nothing else.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

/// A new Job Object named `name`. An object of that name already there (a
/// forged or stale one) is refused rather than joined.
pub fn create_job(name: &str) -> std::io::Result<OwnedHandle> {
    let name = wide(name);
    // SAFETY: a NUL-terminated name that lives across the call; default security.
    let handle = owned(unsafe { CreateJobObjectW(std::ptr::null(), name.as_ptr()) })?;
    // SAFETY: reads this thread's last error, set by the call above.
    if unsafe { GetLastError() } == 183 {
        // ERROR_ALREADY_EXISTS
        return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a Job Object of this job's name already exists"));
    }
    Ok(handle)
}

/// The job's Job Object, if its supervisor still holds it.
pub fn open_job(name: &str) -> Option<OwnedHandle> {
    let name = wide(name);
    // SAFETY: a NUL-terminated name that lives across the call.
    owned(unsafe { OpenJobObjectW(JOB_OBJECT_TERMINATE | JOB_OBJECT_QUERY, 0, name.as_ptr()) }).ok()
}

pub fn assign(job: &OwnedHandle, process: &impl AsRawHandle) -> std::io::Result<()> {
    // SAFETY: two live handles; the call touches no memory of ours.
    if unsafe { AssignProcessToJobObject(job.as_raw_handle() as HANDLE, process.as_raw_handle() as HANDLE) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Ends every process in the job, each with `exit_code`.
pub fn terminate_job(job: &OwnedHandle, exit_code: u32) -> std::io::Result<()> {
    // SAFETY: a live handle with JOB_OBJECT_TERMINATE.
    if unsafe { TerminateJobObject(job.as_raw_handle() as HANDLE, exit_code) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// How many processes run in the job now.
pub fn active_processes(job: &OwnedHandle) -> Option<u32> {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a live handle with JOB_OBJECT_QUERY, and an out-parameter of the
    // size passed.
    let ok = unsafe {
        QueryInformationJobObject(
            job.as_raw_handle() as HANDLE,
            JobObjectBasicAccountingInformation,
            (&mut info as *mut JOBOBJECT_BASIC_ACCOUNTING_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
            std::ptr::null_mut(),
        )
    } != 0;
    ok.then_some(info.ActiveProcesses)
}

/// The pids of the processes in the job now (a port probe's "is it the
/// job's?"): the Job Object knows its members, wherever they came from.
pub fn process_ids(job: &OwnedHandle) -> Vec<u32> {
    // The list's header (two u32s), then one usize per process; room for
    // 1,024 processes, asked again with more when there are more.
    let mut room = 1024usize;
    loop {
        let mut buffer = vec![0usize; 1 + room];
        let bytes = (buffer.len() * std::mem::size_of::<usize>()) as u32;
        // SAFETY: a live handle with JOB_OBJECT_QUERY, and a buffer of
        // `bytes` bytes, aligned for JOBOBJECT_BASIC_PROCESS_ID_LIST (whose
        // header is two u32s, the size of the one usize before the list).
        let ok = unsafe {
            QueryInformationJobObject(job.as_raw_handle() as HANDLE, JobObjectBasicProcessIdList, buffer.as_mut_ptr().cast(), bytes, std::ptr::null_mut())
        } != 0;
        // SAFETY: the header's two u32s, written by the call (or zeroes).
        let (assigned, listed) = unsafe {
            let header = buffer.as_ptr().cast::<u32>();
            (*header as usize, *header.add(1) as usize)
        };
        if ok || assigned <= room || room >= 1 << 20 {
            return buffer[1..1 + listed.min(room)].iter().map(|&pid| pid as u32).collect();
        }
        room = assigned + 64;
    }
}

/// Asks the console process group led by `group` to stop (CTRL_BREAK_EVENT,
/// which console programs, Node and cmd take as Ctrl+Break). Only a process
/// on the same console can send it: the job's supervisor.
pub fn break_group(group: u32) -> std::io::Result<()> {
    // SAFETY: integer arguments only.
    if unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// An auto-reset event named `name`, made by the supervisor: `kill` sets it
/// to ask for the kill it wrote down in the job's kill request.
pub fn create_event(name: &str) -> std::io::Result<OwnedHandle> {
    let name = wide(name);
    // SAFETY: a NUL-terminated name that lives across the call; default security.
    owned(unsafe { CreateEventW(std::ptr::null(), 0, 0, name.as_ptr()) })
}

/// A manual-reset event named `name`: a wait that wakes on it among others
/// leaves it set, so the waiter can tell it was this one (`take`).
pub fn create_manual_event(name: &str) -> std::io::Result<OwnedHandle> {
    let name = wide(name);
    // SAFETY: a NUL-terminated name that lives across the call; default security.
    owned(unsafe { CreateEventW(std::ptr::null(), 1, 0, name.as_ptr()) })
}

/// An auto-reset event of this process's own, unnamed: a thread of ours
/// sets it (`set`) to wake a wait on it.
pub fn create_private_event() -> std::io::Result<OwnedHandle> {
    // SAFETY: default security, no name.
    owned(unsafe { CreateEventW(std::ptr::null(), 0, 0, std::ptr::null()) })
}

/// Sets an event this process holds.
pub fn set(event: &OwnedHandle) {
    // SAFETY: a live event handle of ours (created with every access).
    unsafe { SetEvent(event.as_raw_handle() as HANDLE) };
}

/// Sets the event named `name`: whether someone (the supervisor) holds it.
pub fn set_event(name: &str) -> bool {
    let name = wide(name);
    // SAFETY: a NUL-terminated name that lives across the call.
    let Ok(event) = owned(unsafe { OpenEventW(EVENT_MODIFY_STATE, 0, name.as_ptr()) }) else { return false };
    // SAFETY: a live event handle with EVENT_MODIFY_STATE.
    unsafe { SetEvent(event.as_raw_handle() as HANDLE) != 0 }
}

/// What ended a wait on several handles.
pub enum Woken {
    /// The handle at this index was signalled.
    Handle(usize),
    TimedOut,
    /// The wait itself failed (a handle no longer valid).
    Failed,
}

pub fn wait_any(handles: &[BorrowedHandle<'_>], limit: std::time::Duration) -> Woken {
    let raw: Vec<HANDLE> = handles.iter().map(|h| h.as_raw_handle() as HANDLE).collect();
    let ms = limit.as_millis().min(u32::MAX as u128 - 1) as u32;
    // SAFETY: `raw` holds live handles and outlives the call.
    let rc = unsafe { WaitForMultipleObjects(raw.len() as u32, raw.as_ptr(), 0, ms) };
    let index = rc.wrapping_sub(WAIT_OBJECT_0) as usize;
    if index < raw.len() {
        Woken::Handle(index)
    } else if rc == windows_sys::Win32::Foundation::WAIT_TIMEOUT {
        Woken::TimedOut
    } else {
        Woken::Failed
    }
}

/// Resumes every thread of `pid`, started suspended (one thread: its main).
pub fn resume(pid: u32) -> std::io::Result<()> {
    use windows_sys::Win32::System::Diagnostics::ToolHelp::{CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32};
    use windows_sys::Win32::System::Threading::{OpenThread, ResumeThread, THREAD_SUSPEND_RESUME};
    // SAFETY: plain arguments; the result is checked below.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE {
        return Err(std::io::Error::last_os_error());
    }
    let snapshot = owned(snapshot)?;
    // SAFETY: all-zero is a valid value of this plain C struct; dwSize is set next.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: a live snapshot handle and an entry with its size set.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle() as HANDLE, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: plain arguments; a null result is skipped.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if let Ok(thread) = owned(thread) {
                // SAFETY: a live thread handle with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(thread.as_raw_handle() as HANDLE) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle() as HANDLE, &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(std::io::Error::other(format!("no thread of process {pid} could be resumed")));
    }
    Ok(())
}

/// The name of the doorbell a supervisor rings for its kill request: keyed
/// by the supervisor's identity, which `kill` knows from the record.
pub fn doorbell_name(supervisor: &crate::model::job::ProcessIdentity) -> String {
    format!("Local\\proc-manager-supervisor-{}-{}-kill", supervisor.pid, supervisor.start_ticks)
}

/// The name of a supervisor's stop bell, Unix's SIGTERM to it: a kill with
/// the configured grace, or, once the job's end is recorded, giving up an
/// end that cannot be written. Rung by `signal_pinned` for SIGTERM, SIGINT
/// and SIGHUP, so that `kill`, when it could not write its request, rings
/// it as it signals a Unix supervisor (`sys::DOORBELL_FALLBACK`).
pub fn stop_bell_name(supervisor: &crate::model::job::ProcessIdentity) -> String {
    format!("Local\\proc-manager-supervisor-{}-{}-stop", supervisor.pid, supervisor.start_ticks)
}

/// Whether `event` (manual-reset, ours: `create_manual_event`) is set,
/// resetting it: how a wait that woke on one of several events tells that
/// it was this one (a wait resets the auto-reset event that woke it).
pub fn take(event: &OwnedHandle) -> bool {
    if !matches!(wait_any(&[event.as_handle()], std::time::Duration::ZERO), Woken::Handle(0)) {
        return false;
    }
    // SAFETY: a live event handle of ours (created with every access).
    unsafe { ResetEvent(event.as_raw_handle() as HANDLE) };
    true
}

/// Keeps console control events (Ctrl+C, Ctrl+Break, a console's close)
/// from ending this process: the supervisor sends CTRL_BREAK_EVENT to its
/// job's group on the console they share, and must outlive it. Handlers are
/// not inherited: the job's processes keep the default.
pub fn ignore_console_events() {
    unsafe extern "system" fn ignore(_event: u32) -> i32 {
        1
    }
    // SAFETY: `ignore` is a valid handler for the life of the process (a
    // plain function that touches nothing).
    unsafe { windows_sys::Win32::System::Console::SetConsoleCtrlHandler(Some(ignore), 1) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_object_lists_the_processes_put_in_it_and_ends_them() {
        let name = object_name(&std::env::temp_dir(), &format!("list-{}", std::process::id()), "tree");
        let job = create_job(&name).unwrap();
        assert_eq!(process_ids(&job), Vec::<u32>::new());
        let mut child = std::process::Command::new("ping").args(["-n", "30", "127.0.0.1"]).stdout(std::process::Stdio::null()).spawn().unwrap();
        assign(&job, &child).unwrap();
        assert_eq!(process_ids(&job), vec![child.id()]);
        assert_eq!(active_processes(&job), Some(1));
        terminate_job(&job, 1).unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(1));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while active_processes(&job) != Some(0) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(active_processes(&job), Some(0));
        assert_eq!(process_ids(&job), Vec::<u32>::new());
    }

    /// A supervisor's two bells: SIGUSR1 rings the doorbell and SIGTERM the
    /// stop bell (`signal_pinned`), and a wait woken by either can tell the
    /// stop bell rang. Before the stop bell, SIGTERM ended the process: here,
    /// the test's own.
    #[test]
    fn a_stop_is_told_apart_from_a_ring_of_the_doorbell() {
        use crate::model::signals::{SIGTERM, SIGUSR1};
        use crate::os::procinfo::SignalOutcome;
        use std::time::Duration;
        let me = crate::os::platform::identify(std::process::id()).expect("our own identity");
        let doorbell = create_event(&doorbell_name(&me)).unwrap();
        let stop = create_manual_event(&stop_bell_name(&me)).unwrap();
        let bells = [doorbell.as_handle(), stop.as_handle()];
        assert!(matches!(crate::os::platform::signal_pinned(&me, SIGUSR1), Some(SignalOutcome::Sent)));
        assert!(matches!(wait_any(&bells, Duration::from_secs(5)), Woken::Handle(0)));
        assert!(!take(&stop), "a ring of the doorbell is no stop");
        assert!(matches!(crate::os::platform::signal_pinned(&me, SIGTERM), Some(SignalOutcome::Sent)), "SIGTERM rings the stop bell");
        assert!(matches!(wait_any(&bells, Duration::from_secs(5)), Woken::Handle(1)));
        assert!(take(&stop), "the wait left the stop bell set, for the waiter to see");
        assert!(!take(&stop), "taken once");
        assert!(matches!(wait_any(&bells, Duration::ZERO), Woken::TimedOut));
    }
}
