//! Windows's ways to what `os` needs: the process table from sysinfo (which
//! reads each process's command line and environment from its PEB), process
//! handles for identity, waits and termination. `linux.rs` and `macos.rs`
//! have the same functions; what has no meaning here (pipes' sizes, splice,
//! subreapers, FIFOs) is not asked for: the Windows supervisor does not use it.
//!
//! A process's start time from sysinfo has a resolution of one second, so the
//! identity check tells apart any pid reuse but one within that second; an
//! open process handle (`pidfd_open`) pins the process exactly.

use crate::model::job::ProcessIdentity;
use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use crate::os::procinfo::{Row, SignalOutcome};
use crate::model::signals as sig;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use sysinfo::{Process, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};
use windows_sys::Win32::Foundation::{HANDLE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, TerminateProcess, WaitForSingleObject, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE,
    PROCESS_TERMINATE,
};

/// One process, read with what `reads` asks beyond its pid, parent and
/// start time (each extra is a read of the process's memory).
fn with_process<T>(pid: u32, reads: ProcessRefreshKind, f: impl FnOnce(&Process) -> T) -> Option<T> {
    let mut system = System::new().ok()?;
    let target = sysinfo::Pid::from_u32(pid);
    system.refresh_processes_specifics(ProcessesToUpdate::Some(&[target]), true, reads);
    system.process(target).map(f)
}

fn identity_of(pid: u32, p: &Process) -> Option<ProcessIdentity> {
    (p.status() != ProcessStatus::Zombie && pid != 0).then_some(ProcessIdentity::from_stat(pid, p.start_time()))
}

fn env_value(p: &Process, key: &str) -> Option<String> {
    p.environ().iter().find_map(|entry| {
        let entry = entry.to_string_lossy();
        // Windows keeps the case it was given; names compare without it.
        let (name, value) = entry.split_once('=')?;
        name.eq_ignore_ascii_case(key).then(|| value.to_string())
    })
}

/// argv joined with spaces, or the name in brackets when there is none.
pub fn command(p: &Process) -> String {
    if p.cmd().is_empty() {
        format!("[{}]", p.name().to_string_lossy())
    } else {
        p.cmd().iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }
}

/// Every process, read with what `reads` asks (as `with_process`): the
/// table of jobs' processes needs environments (the cookie) and memory, a
/// look for children nothing but parents.
fn all_processes(reads: ProcessRefreshKind) -> Option<System> {
    let mut system = System::new().ok()?;
    system.refresh_processes_specifics(ProcessesToUpdate::All, true, reads);
    Some(system)
}

/// `pid`'s identity and the parent pid Windows recorded for it.
pub fn identify_with_parent(pid: u32) -> Option<(ProcessIdentity, u32)> {
    Some((identify(pid)?, parent_of(pid)))
}

pub fn identify(pid: u32) -> Option<ProcessIdentity> {
    with_process(pid, ProcessRefreshKind::nothing(), |p| identity_of(pid, p)).flatten()
}

/// Windows has no stopped state a job's process can be in.
pub fn is_stopped(_pid: u32) -> bool {
    false
}

pub fn live_children(pid: u32) -> Vec<u32> {
    let Some(system) = all_processes(ProcessRefreshKind::nothing()) else { return Vec::new() };
    let parent = system.process(sysinfo::Pid::from_u32(pid)).map(|p| p.start_time());
    system
        .processes()
        .values()
        // A parent pid outlives its process here and is reused: a child is
        // one only if it started after the parent did.
        .filter(|p| p.parent().map(|pp| pp.as_u32()) == Some(pid) && parent.is_some_and(|started| p.start_time() >= started))
        .map(|p| p.pid().as_u32())
        .collect()
}

/// The parent pid Windows recorded for `pid` (0 when gone).
pub fn parent_of(pid: u32) -> u32 {
    with_process(pid, ProcessRefreshKind::nothing(), |p| p.parent().map_or(0, |pp| pp.as_u32())).unwrap_or(0)
}

pub fn environ_value(pid: u32, key: &str) -> Option<String> {
    with_process(pid, ProcessRefreshKind::nothing().with_environ(UpdateKind::Always), |p| env_value(p, key)).flatten()
}

pub fn command_line(pid: u32) -> String {
    with_process(pid, ProcessRefreshKind::nothing().with_cmd(UpdateKind::Always), command).unwrap_or_default()
}

/// Every process but this one. There are no process groups here: `pgid` is
/// 0, which no job's group is, and a job's members are told by its cookie,
/// its Job Object and their parents.
pub fn table() -> Vec<Row> {
    let me = std::process::id();
    let Some(system) = all_processes(ProcessRefreshKind::nothing().with_memory().with_environ(UpdateKind::Always)) else { return Vec::new() };
    system
        .processes()
        .values()
        .filter_map(|p| {
            let pid = p.pid().as_u32();
            let identity = identity_of(pid, p).filter(|_| pid != me)?;
            let mark = env_value(p, SUPERVISOR_MARK);
            Some(Row {
                identity,
                ppid: p.parent().map_or(0, |pp| pp.as_u32()),
                pgid: 0,
                cookie: env_value(p, JOB_COOKIE),
                mark,
                rss_kb: p.memory() / 1024,
            })
        })
        .collect()
}

/// `table`'s rows for these pids only: here from the whole table.
pub fn rows(pids: &[u32]) -> Vec<Row> {
    let wanted: std::collections::HashSet<u32> = pids.iter().copied().collect();
    let me = std::process::id();
    let mut found: Vec<Row> = table().into_iter().filter(|r| wanted.contains(&r.identity.pid)).collect();
    if wanted.contains(&me) {
        if let Some(identity) = identify(me) {
            let mark = std::env::var_os(SUPERVISOR_MARK).map(|v| v.to_string_lossy().into_owned());
            let cookie = std::env::var(JOB_COOKIE).ok();
            let ppid = parent_of(me);
            found.push(Row { identity, ppid, pgid: 0, cookie, mark, rss_kb: 0 });
        }
    }
    found
}

/// The CPU time and start of each of `pids` still alive (start to the second).
pub fn cpu_times(pids: &[u32]) -> std::collections::HashMap<u32, crate::os::procinfo::CpuTime> {
    let wanted: Vec<sysinfo::Pid> = pids.iter().map(|&pid| sysinfo::Pid::from_u32(pid)).collect();
    let Ok(mut system) = System::new() else { return std::collections::HashMap::new() };
    system.refresh_processes_specifics(ProcessesToUpdate::Some(&wanted), true, ProcessRefreshKind::nothing().with_cpu());
    wanted
        .iter()
        .filter_map(|pid| {
            let p = system.process(*pid)?;
            let cpu = crate::os::procinfo::CpuTime { cpu_ms: p.accumulated_cpu_time(), started_at_ms: p.start_time().saturating_mul(1000) };
            Some((pid.as_u32(), cpu))
        })
        .collect()
}

/// Nothing to set here: the system heap maps large blocks on its own.
pub fn keep_large_blocks_mapped() {}

/// Nothing to give back here.
pub fn release_free_heap() {}

/// Opens `pid` with the rights a wait, a look and a termination need. The
/// handle pins the process: its pid is not reused while the handle is open.
pub fn open_process(pid: u32) -> std::io::Result<OwnedHandle> {
    // SAFETY: OpenProcess takes plain values; a null result is an error.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_SYNCHRONIZE | PROCESS_TERMINATE, 0, pid) };
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns or closes.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

/// STILL_ACTIVE: what GetExitCodeProcess says of a process that runs.
const STILL_ACTIVE: u32 = 259;

/// Whether the process behind `handle` still runs.
pub fn handle_running(handle: &OwnedHandle) -> bool {
    let mut code = 0u32;
    // SAFETY: a live handle and a correctly typed out-parameter.
    let ok = unsafe { GetExitCodeProcess(handle.as_raw_handle() as HANDLE, &mut code) } != 0;
    // A process that returned 259 itself reads as running; the wait below
    // tells them apart.
    ok && code == STILL_ACTIVE && !wait_handle(handle, std::time::Duration::ZERO)
}

/// Waits until the process behind `handle` ends or `limit` passes: whether it ended.
pub fn wait_handle(handle: &OwnedHandle, limit: std::time::Duration) -> bool {
    let ms = limit.as_millis().min(u32::MAX as u128 - 1) as u32;
    // SAFETY: a live handle; the wait touches no memory of ours.
    unsafe { WaitForSingleObject(handle.as_raw_handle() as HANDLE, ms) == WAIT_OBJECT_0 }
}

/// Signals the recorded process through a handle opened first and an
/// identity checked after, so a reused pid is never hit. Windows has no
/// signals: a check (0) is a check, SIGUSR1 rings a supervisor's doorbell
/// and SIGTERM, SIGINT and SIGHUP its stop bell,
/// SIGSTOP and SIGCONT suspend and resume the process (`resume` of a job
/// paused when its supervisor died), and everything else ends the process,
/// as only a console's control events (sent to a job's group by its
/// supervisor) let a process end itself.
pub fn signal_pinned(who: &ProcessIdentity, signal: i32) -> Option<SignalOutcome> {
    let handle = match open_process(who.pid) {
        Ok(handle) => handle,
        Err(e) if e.raw_os_error() == Some(87) => return Some(SignalOutcome::Gone), // ERROR_INVALID_PARAMETER: no such pid
        Err(e) => return Some(SignalOutcome::Failed(e.to_string())),
    };
    if !handle_running(&handle) {
        return Some(SignalOutcome::Gone);
    }
    match identify(who.pid) {
        None => return Some(SignalOutcome::Gone),
        Some(now) if now.start_ticks != who.start_ticks => return Some(SignalOutcome::Replaced),
        Some(_) => {}
    }
    if signal == 0 {
        return Some(SignalOutcome::Sent);
    }
    // The kill doorbell: a supervisor's named event (it reads its kill
    // request then); a process that has none is not a supervisor.
    if signal == sig::SIGUSR1 {
        return Some(match crate::os::windows_job::set_event(&crate::os::windows_job::doorbell_name(who)) {
            true => SignalOutcome::Sent,
            false => SignalOutcome::Failed("it has no kill doorbell (not a run-bg supervisor)".into()),
        });
    }
    // A supervisor's stop bell, where Unix would send it SIGTERM; any other
    // process has none and is ended below.
    let stops = [sig::SIGTERM, sig::SIGINT, sig::SIGHUP].contains(&signal);
    if stops && crate::os::windows_job::set_event(&crate::os::windows_job::stop_bell_name(who)) {
        return Some(SignalOutcome::Sent);
    }
    if signal == sig::SIGSTOP || signal == sig::SIGCONT {
        let done = match signal == sig::SIGSTOP {
            true => crate::os::pause_windows::suspend_pid(who.pid),
            false => crate::os::pause_windows::resume_pid(who.pid),
        };
        return Some(match done {
            Ok(()) => SignalOutcome::Sent,
            Err(e) => SignalOutcome::Failed(e.to_string()),
        });
    }
    Some(terminate(&handle, exit_code_for(signal)))
}

/// The exit code a process ended by `signal` gets: 128 + the number, as a
/// shell reports a signalled process, so `check` shows which it was.
pub fn exit_code_for(signal: i32) -> u32 {
    128 + signal.clamp(0, 127) as u32
}

pub fn terminate(handle: &OwnedHandle, code: u32) -> SignalOutcome {
    // SAFETY: a live handle opened with PROCESS_TERMINATE.
    if unsafe { TerminateProcess(handle.as_raw_handle() as HANDLE, code) } != 0 {
        return SignalOutcome::Sent;
    }
    let error = std::io::Error::last_os_error();
    if !handle_running(handle) {
        return SignalOutcome::Gone;
    }
    SignalOutcome::Failed(error.to_string())
}

/// Sends `signal` to `pid` without an identity to check (a process group's
/// leader on Unix): refused here, there are no groups to address.
pub fn signal_unchecked(_pid: u32, _signal: i32) -> SignalOutcome {
    SignalOutcome::Failed("Windows has no process groups to signal".into())
}

pub fn pid_alive(pid: u32) -> bool {
    open_process(pid).is_ok_and(|h| handle_running(&h))
}

/// A process handle is Windows's pidfd: it pins the process.
pub fn pidfd_open(pid: u32) -> std::io::Result<OwnedHandle> {
    open_process(pid)
}

pub fn pidfd_inode(_handle: &OwnedHandle) -> Option<u64> {
    None
}

pub use crate::os::unrecorded_windows::{publish_unrecorded, read_unrecorded, UnrecordedShown};

pub use crate::os::timed_dir_watch::DirWatcher;

/// No user namespaces here: every owner is who it shows as.
pub fn foreign_owner_uid() -> Option<u32> {
    None
}

/// No uid here; files under the user's profile are the user's.
pub fn euid() -> u32 {
    0
}

/// The peak memory of reaped children is not kept by Windows.
pub fn children_peak_rss_kb() -> Option<u64> {
    None
}

/// No getrandom here: nothing filled, the caller uses its fallback.
pub fn fill_random(_buf: &mut [u8]) -> std::io::Result<usize> {
    Ok(0)
}

/// Linux's `boot_ticks_now`: here a kill's caller leaves the signals to
/// each supervisor, so there is no time to give.
pub fn boot_ticks_now() -> Option<u64> {
    None
}

/// The supervisor gives back no code pages here: its working set is the
/// system's to trim.
pub fn release_code_pages() {}
