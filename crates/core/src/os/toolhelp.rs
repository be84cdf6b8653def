//! The Windows process table read directly: one Toolhelp32 snapshot for
//! every pid, parent and executable name, then per process one handle with
//! the least rights there are (`PROCESS_QUERY_LIMITED_INFORMATION`, which
//! other users' and elevated processes grant too) for its creation time (its
//! identity, to the 100 ns), its working set and, when asked, its command
//! line (`ProcessCommandLineInformation`: no read of the process's memory;
//! where the kernel lacks it, as wine 8 does, from the process's PEB).

use std::ffi::c_void;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::OnceLock;
use windows_sys::Wdk::System::Threading::{NtQueryInformationProcess, ProcessBasicInformation, ProcessCommandLineInformation};
use windows_sys::Win32::Foundation::{
    LocalFree, FILETIME, HANDLE, INVALID_HANDLE_VALUE, NTSTATUS, STATUS_INVALID_INFO_CLASS, STATUS_NOT_IMPLEMENTED, UNICODE_STRING,
};
use windows_sys::Win32::System::Diagnostics::Debug::ReadProcessMemory;
use windows_sys::Win32::System::Diagnostics::ToolHelp::{CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS};
use windows_sys::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetProcessTimes, OpenProcess, PEB, PROCESS_BASIC_INFORMATION, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_VM_READ, RTL_USER_PROCESS_PARAMETERS,
};
use windows_sys::Win32::UI::Shell::CommandLineToArgvW;

/// One process as the table has it.
#[derive(Debug, Clone)]
pub struct ProcessEntry {
    pub pid: u32,
    /// The pid Windows recorded as the parent when the process started (it
    /// may have ended and its pid been reused since).
    pub ppid: u32,
    /// The executable's file name (`node.exe`).
    pub name: String,
    /// Milliseconds since the epoch; `None` when the process could not be
    /// opened (the idle and system processes, protected ones).
    pub started_ms: Option<u64>,
    pub working_set_bytes: u64,
    /// argv, split as the C runtime splits it (`CommandLineToArgvW`); empty
    /// when not asked for or not readable.
    pub argv: Vec<String>,
}

/// 100 ns ticks between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

/// Every running process (those whose last thread has ended, kept only by
/// a handle someone holds, are left out: they run nothing).
pub fn processes(with_argv: bool) -> Vec<ProcessEntry> {
    // SAFETY: plain values in; the result is checked before use.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) };
    if raw == INVALID_HANDLE_VALUE || raw.is_null() {
        return Vec::new();
    }
    // SAFETY: a fresh handle that nothing else owns or closes.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    let snapshot_handle = snapshot.as_raw_handle() as HANDLE;
    // SAFETY: PROCESSENTRY32W is plain data; all zeros is a valid value.
    let mut entry: PROCESSENTRY32W = unsafe { std::mem::zeroed() };
    entry.dwSize = size_of::<PROCESSENTRY32W>() as u32;
    let mut found = Vec::new();
    // SAFETY: a live snapshot handle and an entry whose dwSize is set, as
    // Process32FirstW/NextW require.
    let mut more = unsafe { Process32FirstW(snapshot_handle, &mut entry) } != 0;
    while more {
        if entry.cntThreads > 0 {
            found.push(read_entry(&entry, with_argv));
        }
        // SAFETY: as above.
        more = unsafe { Process32NextW(snapshot_handle, &mut entry) } != 0;
    }
    found
}

fn read_entry(entry: &PROCESSENTRY32W, with_argv: bool) -> ProcessEntry {
    let name_len = entry.szExeFile.iter().position(|&c| c == 0).unwrap_or(entry.szExeFile.len());
    let mut process = ProcessEntry {
        pid: entry.th32ProcessID,
        ppid: entry.th32ParentProcessID,
        name: String::from_utf16_lossy(&entry.szExeFile[..name_len]),
        started_ms: None,
        working_set_bytes: 0,
        argv: Vec::new(),
    };
    if process.pid == 0 {
        return process;
    }
    let Some(handle) = rights(with_argv).into_iter().find_map(|rights| open(process.pid, rights)) else { return process };
    let handle = handle.as_raw_handle() as HANDLE;
    process.started_ms = creation_ms(handle);
    process.working_set_bytes = working_set(handle);
    if with_argv {
        process.argv = argv(handle);
    }
    process
}

fn open(pid: u32, rights: u32) -> Option<OwnedHandle> {
    // SAFETY: OpenProcess takes plain values; a null result is an error.
    let handle = unsafe { OpenProcess(rights, 0, pid) };
    // SAFETY: a fresh handle that nothing else owns or closes.
    (!handle.is_null()).then(|| unsafe { OwnedHandle::from_raw_handle(handle) })
}

/// When the process behind `handle` was created, in ms since the epoch.
fn creation_ms(handle: HANDLE) -> Option<u64> {
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: a live handle with PROCESS_QUERY_LIMITED_INFORMATION and four
    // correctly typed out-parameters.
    if unsafe { GetProcessTimes(handle, &mut created, &mut exited, &mut kernel, &mut user) } == 0 {
        return None;
    }
    let ticks = (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime);
    ticks.checked_sub(FILETIME_UNIX_EPOCH).map(|since_epoch| since_epoch / 10_000)
}

fn working_set(handle: HANDLE) -> u64 {
    // SAFETY: PROCESS_MEMORY_COUNTERS is plain data; all zeros is valid.
    let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    counters.cb = size;
    // SAFETY: a live handle with PROCESS_QUERY_LIMITED_INFORMATION and a
    // buffer of the size passed.
    match unsafe { K32GetProcessMemoryInfo(handle, &mut counters, size) } {
        0 => 0,
        _ => counters.WorkingSetSize as u64,
    }
}

/// Whether the kernel answers `ProcessCommandLineInformation` (Windows 8.1
/// and later; not wine 8), asked once of this process.
fn kernel_keeps_command_lines() -> bool {
    static KEEPS: OnceLock<bool> = OnceLock::new();
    *KEEPS.get_or_init(|| {
        // SAFETY: no arguments; the pseudo-handle needs no closing.
        let me = unsafe { GetCurrentProcess() };
        !matches!(command_line_kept_by_kernel(me), Err(STATUS_INVALID_INFO_CLASS | STATUS_NOT_IMPLEMENTED))
    })
}

/// The rights `read_entry` asks for, the most first: reading the command
/// line from the process's memory also needs PROCESS_VM_READ, which not
/// every process grants.
fn rights(with_argv: bool) -> [u32; 2] {
    match with_argv && !kernel_keeps_command_lines() {
        true => [PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_VM_READ, PROCESS_QUERY_LIMITED_INFORMATION],
        false => [PROCESS_QUERY_LIMITED_INFORMATION; 2],
    }
}

/// The process's command line split into argv; empty when it cannot be read.
fn argv(handle: HANDLE) -> Vec<String> {
    let line = match kernel_keeps_command_lines() {
        true => command_line_kept_by_kernel(handle).ok(),
        false => command_line_from_peb(handle),
    };
    line.map(|line| split_command_line(&line)).unwrap_or_default()
}

/// The copy of the command line the kernel keeps: no read of the
/// process's memory, and only PROCESS_QUERY_LIMITED_INFORMATION needed.
fn command_line_kept_by_kernel(handle: HANDLE) -> Result<Vec<u16>, NTSTATUS> {
    let mut needed = 0u32;
    // SAFETY: a null buffer of length 0 asks only for the size needed,
    // written to `needed`.
    let status = unsafe { NtQueryInformationProcess(handle, ProcessCommandLineInformation, std::ptr::null_mut(), 0, &mut needed) };
    if (needed as usize) < size_of::<UNICODE_STRING>() {
        return Err(status);
    }
    // u64s: a UNICODE_STRING (which holds a pointer) at the start must be aligned.
    let mut buffer = vec![0u64; (needed as usize).div_ceil(8)];
    let bytes = buffer.len() * 8;
    // SAFETY: a writable buffer of `bytes` bytes, aligned for UNICODE_STRING.
    let status = unsafe { NtQueryInformationProcess(handle, ProcessCommandLineInformation, buffer.as_mut_ptr().cast(), bytes as u32, &mut needed) };
    if status < 0 {
        return Err(status);
    }
    // SAFETY: on success the buffer starts with a UNICODE_STRING.
    let header = unsafe { std::ptr::read(buffer.as_ptr().cast::<UNICODE_STRING>()) };
    // The text follows the header inside our buffer; anywhere else is not
    // ours to read.
    let start = buffer.as_ptr() as usize;
    let text = header.Buffer as usize;
    let len = usize::from(header.Length) / 2;
    if len == 0 || text < start || text + len * 2 > start + bytes || !text.is_multiple_of(2) {
        return Ok(Vec::new());
    }
    // SAFETY: `len` u16s at an aligned address inside `buffer`, checked above.
    Ok(unsafe { std::slice::from_raw_parts(header.Buffer.cast_const(), len) }.to_vec())
}

/// The command line from the process's own memory (its PEB's parameters),
/// where the kernel keeps no copy; needs PROCESS_VM_READ.
fn command_line_from_peb(handle: HANDLE) -> Option<Vec<u16>> {
    // SAFETY: PROCESS_BASIC_INFORMATION is plain data; all zeros is valid.
    let mut basic: PROCESS_BASIC_INFORMATION = unsafe { std::mem::zeroed() };
    let size = size_of::<PROCESS_BASIC_INFORMATION>() as u32;
    // SAFETY: a live handle and a writable buffer of the size passed.
    let status = unsafe { NtQueryInformationProcess(handle, ProcessBasicInformation, (&raw mut basic).cast(), size, std::ptr::null_mut()) };
    if status < 0 || basic.PebBaseAddress.is_null() {
        return None;
    }
    let parameters_at = basic.PebBaseAddress as usize + std::mem::offset_of!(PEB, ProcessParameters);
    let parameters: *mut RTL_USER_PROCESS_PARAMETERS = read_remote(handle, parameters_at)?;
    let parameters: RTL_USER_PROCESS_PARAMETERS = read_remote(handle, parameters as usize)?;
    let line = parameters.CommandLine;
    let mut text = vec![0u16; usize::from(line.Length) / 2];
    let mut read = 0usize;
    // SAFETY: a live handle with PROCESS_VM_READ and a writable buffer of
    // the size passed; the source is the other process's, checked by the kernel.
    let ok = unsafe { ReadProcessMemory(handle, line.Buffer.cast_const().cast(), text.as_mut_ptr().cast(), text.len() * 2, &mut read) };
    (ok != 0 && read == text.len() * 2).then_some(text)
}

/// A `T` read from another process's memory at `address`. Only for types
/// any bytes are a valid value of (integers, raw pointers, structs of them).
fn read_remote<T: Copy>(handle: HANDLE, address: usize) -> Option<T> {
    let mut value = std::mem::MaybeUninit::<T>::uninit();
    let mut read = 0usize;
    // SAFETY: a live handle with PROCESS_VM_READ and a writable buffer of
    // size_of::<T>() bytes; the source is checked by the kernel.
    let ok = unsafe { ReadProcessMemory(handle, address as *const c_void, value.as_mut_ptr().cast(), size_of::<T>(), &mut read) };
    // SAFETY: every byte was written, and any bytes are a valid T (above).
    (ok != 0 && read == size_of::<T>()).then(|| unsafe { value.assume_init() })
}

/// argv as the C runtime makes it from a command line.
fn split_command_line(line: &[u16]) -> Vec<String> {
    if line.is_empty() {
        return Vec::new();
    }
    let terminated: Vec<u16> = line.iter().copied().chain([0]).collect();
    let mut count = 0i32;
    // SAFETY: a NUL-terminated UTF-16 string (not empty: an empty one
    // would give this program's own path) and an out-parameter.
    let list = unsafe { CommandLineToArgvW(terminated.as_ptr(), &mut count) };
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: CommandLineToArgvW returned `count` NUL-terminated strings.
    let args = unsafe { std::slice::from_raw_parts(list, count.max(0) as usize) };
    let argv = args
        .iter()
        .map(|&arg| {
            // SAFETY: each is NUL-terminated, inside the block it allocated.
            let len = (0..).take_while(|&i| unsafe { *arg.add(i) } != 0).count();
            // SAFETY: `len` u16s before that NUL.
            String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(arg, len) })
        })
        .collect();
    // SAFETY: one block from CommandLineToArgvW, freed once, not used after.
    unsafe { LocalFree(list.cast()) };
    argv
}
