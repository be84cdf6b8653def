//! An end its supervisor could not write, shown to readers on Windows: a
//! named section of memory (a file mapping backed by the paging file) that
//! the supervisor holds, where Linux holds a memory file read through
//! `/proc/<pid>/fd`. Named by the supervisor's pid; readers check the job
//! and the supervisor's identity after reading (`verbs::reconcile`). The
//! name is in the session's own namespace (`Local\`), and the section's
//! default security admits the user that made it, SYSTEM and
//! administrators: no other user can place or read one. Gone when the
//! supervisor lets go of it or exits.

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::{GetLastError, ERROR_ALREADY_EXISTS, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Memory::{
    CreateFileMappingW, MapViewOfFile, OpenFileMappingW, UnmapViewOfFile, VirtualQuery, FILE_MAP_READ, FILE_MAP_WRITE, MEMORY_BASIC_INFORMATION,
    MEMORY_MAPPED_VIEW_ADDRESS, PAGE_READWRITE,
};

/// What `publish_unrecorded` holds: the section, there while it is open.
pub type UnrecordedShown = OwnedHandle;

/// The section's length before its bytes (little-endian).
const HEADER: usize = 8;

fn section_name(pid: u32) -> Vec<u16> {
    format!("Local\\proc-manager-unrecorded-end-{pid}").encode_utf16().chain(std::iter::once(0)).collect()
}

/// A view of a section, unmapped when dropped.
struct View(MEMORY_MAPPED_VIEW_ADDRESS);

impl View {
    fn of(section: &OwnedHandle, access: u32) -> std::io::Result<View> {
        // SAFETY: a live section handle of ours; offset 0 and length 0 map all of it.
        let view = unsafe { MapViewOfFile(section.as_raw_handle() as HANDLE, access, 0, 0, 0) };
        if view.Value.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(View(view))
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: a view MapViewOfFile returned, unmapped once, here.
        unsafe { UnmapViewOfFile(self.0) };
    }
}

/// Puts `bytes` (a job's end its supervisor could not write) where readers
/// of the same user find it without the disk (`read_unrecorded`).
pub fn publish_unrecorded(bytes: &[u8]) -> std::io::Result<Option<UnrecordedShown>> {
    let size = HEADER + bytes.len();
    let size64 = size as u64;
    let name = section_name(std::process::id());
    // SAFETY: a NUL-terminated name that lives across the call; default
    // security; backed by the paging file (no file handle).
    let raw = unsafe { CreateFileMappingW(INVALID_HANDLE_VALUE, std::ptr::null(), PAGE_READWRITE, (size64 >> 32) as u32, size64 as u32, name.as_ptr()) };
    if raw.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // Read at once: the next call may change it.
    // SAFETY: no argument; this thread's last error, set by the call above.
    let existed = unsafe { GetLastError() } == ERROR_ALREADY_EXISTS;
    // SAFETY: a fresh handle from CreateFileMappingW, owned by nothing else.
    let section = unsafe { OwnedHandle::from_raw_handle(raw) };
    if existed {
        // Another's (a process of ours that had this pid, or a forgery): never written into.
        return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a section of that name is already there"));
    }
    let view = View::of(&section, FILE_MAP_WRITE)?;
    // SAFETY: the view is `size` bytes long at least (the section's size),
    // writable, and ours alone until this returns.
    unsafe {
        let at = view.0.Value.cast::<u8>();
        std::ptr::copy_nonoverlapping((bytes.len() as u64).to_le_bytes().as_ptr(), at, HEADER);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(HEADER), bytes.len());
    }
    Ok(Some(section))
}

/// What `publish_unrecorded` holds in process `pid`, if anything.
pub fn read_unrecorded(pid: u32) -> Option<Vec<u8>> {
    let name = section_name(pid);
    // SAFETY: a NUL-terminated name that lives across the call.
    let raw = unsafe { OpenFileMappingW(FILE_MAP_READ, 0, name.as_ptr()) };
    if raw.is_null() {
        return None;
    }
    // SAFETY: a fresh handle from OpenFileMappingW, owned by nothing else.
    let section = unsafe { OwnedHandle::from_raw_handle(raw) };
    let view = View::of(&section, FILE_MAP_READ).ok()?;
    // How far the view reaches (whole pages): no length read from the
    // section may take a read past it.
    // SAFETY: zeroes are a valid MEMORY_BASIC_INFORMATION (integers and a pointer).
    let mut info: MEMORY_BASIC_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable and as large as said; the address is our view's.
    let known = unsafe { VirtualQuery(view.0.Value, &mut info, std::mem::size_of::<MEMORY_BASIC_INFORMATION>()) };
    if known == 0 || info.RegionSize < HEADER {
        return None;
    }
    let mut header = [0u8; HEADER];
    // SAFETY: the view is readable for `info.RegionSize` bytes, HEADER of them at least.
    unsafe { std::ptr::copy_nonoverlapping(view.0.Value.cast::<u8>(), header.as_mut_ptr(), HEADER) };
    let len = usize::try_from(u64::from_le_bytes(header)).ok().filter(|&len| len <= info.RegionSize - HEADER)?;
    let mut bytes = vec![0u8; len];
    // SAFETY: HEADER + len bytes of the view are readable (checked above).
    unsafe { std::ptr::copy_nonoverlapping(view.0.Value.cast::<u8>().add(HEADER), bytes.as_mut_ptr(), len) };
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_shown_is_read_back_by_the_pid_and_gone_once_let_go_of() {
        let end = br#"{"job":"kept","error":"read-only"}"#;
        let shown = publish_unrecorded(end).expect("published").expect("a section");
        assert_eq!(read_unrecorded(std::process::id()).as_deref(), Some(&end[..]));
        assert!(publish_unrecorded(b"again").is_err(), "a second section of the same name is refused");
        drop(shown);
        assert_eq!(read_unrecorded(std::process::id()), None);
    }
}
