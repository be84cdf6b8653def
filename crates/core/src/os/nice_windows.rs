//! `--nice` on Windows: a niceness (-20..19, as on Unix) maps onto one of
//! Windows's priority classes, which the job's main process gets before it
//! first runs, and every process that joins its Job Object after it
//! (`os/job_watch_windows.rs`): Windows hands a child its parent's class
//! only when that is idle or below normal.
//!
//! | niceness  | priority class          | Node's `os.getPriority()` reads |
//! |-----------|-------------------------|---------------------------------|
//! | 19        | `IDLE_PRIORITY_CLASS`         | 19  |
//! | 1..18     | `BELOW_NORMAL_PRIORITY_CLASS` | 10  |
//! | 0         | `NORMAL_PRIORITY_CLASS`       | 0   |
//! | -1..-9    | `ABOVE_NORMAL_PRIORITY_CLASS` | -7  |
//! | -10..-20  | `HIGH_PRIORITY_CLASS`         | -14 |
//!
//! Every niceness above 0 lowers the job and every one below raises it, as
//! on Unix (libuv's mapping for `os.setPriority` leaves 1..9 at normal).
//! `REALTIME_PRIORITY_CLASS` is never used: it outranks the system's own
//! input and disk threads, and without the privilege for it Windows gives
//! `HIGH` silently. Raising the class needs no privilege on Windows, so a
//! negative niceness is taken where Unix would refuse it to a user.

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Threading::{
    OpenProcess, SetPriorityClass, ABOVE_NORMAL_PRIORITY_CLASS, BELOW_NORMAL_PRIORITY_CLASS, HIGH_PRIORITY_CLASS, IDLE_PRIORITY_CLASS,
    NORMAL_PRIORITY_CLASS, PROCESS_SET_INFORMATION,
};

/// The priority class for `nice` (-20..19; outside it, the nearest end).
pub fn priority_class(nice: i32) -> u32 {
    match nice {
        19.. => IDLE_PRIORITY_CLASS,
        1..=18 => BELOW_NORMAL_PRIORITY_CLASS,
        0 => NORMAL_PRIORITY_CLASS,
        -9..=-1 => ABOVE_NORMAL_PRIORITY_CLASS,
        _ => HIGH_PRIORITY_CLASS,
    }
}

/// The class's name, as Windows's documentation spells it.
pub fn class_name(class: u32) -> &'static str {
    match class {
        IDLE_PRIORITY_CLASS => "IDLE_PRIORITY_CLASS",
        BELOW_NORMAL_PRIORITY_CLASS => "BELOW_NORMAL_PRIORITY_CLASS",
        NORMAL_PRIORITY_CLASS => "NORMAL_PRIORITY_CLASS",
        ABOVE_NORMAL_PRIORITY_CLASS => "ABOVE_NORMAL_PRIORITY_CLASS",
        HIGH_PRIORITY_CLASS => "HIGH_PRIORITY_CLASS",
        _ => "another priority class",
    }
}

/// Gives the process behind `process` the priority class `class`.
pub fn set_class(process: &impl AsRawHandle, class: u32) -> std::io::Result<()> {
    // SAFETY: a live process handle with PROCESS_SET_INFORMATION (a
    // child's handle from std has every right); plain values otherwise.
    if unsafe { SetPriorityClass(process.as_raw_handle() as HANDLE, class) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Gives the process `pid` the priority class `class`.
pub fn set_class_of(pid: u32, class: u32) -> std::io::Result<()> {
    // SAFETY: plain values in; a null result is an error, read at once.
    let handle = unsafe { OpenProcess(PROCESS_SET_INFORMATION, 0, pid) };
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns or closes.
    let handle = unsafe { OwnedHandle::from_raw_handle(handle) };
    set_class(&handle, class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_niceness_maps_to_a_class_in_its_direction() {
        assert_eq!(priority_class(19), IDLE_PRIORITY_CLASS);
        assert_eq!(priority_class(1), BELOW_NORMAL_PRIORITY_CLASS);
        assert_eq!(priority_class(18), BELOW_NORMAL_PRIORITY_CLASS);
        assert_eq!(priority_class(0), NORMAL_PRIORITY_CLASS);
        assert_eq!(priority_class(-1), ABOVE_NORMAL_PRIORITY_CLASS);
        assert_eq!(priority_class(-9), ABOVE_NORMAL_PRIORITY_CLASS);
        assert_eq!(priority_class(-10), HIGH_PRIORITY_CLASS);
        assert_eq!(priority_class(-20), HIGH_PRIORITY_CLASS);
    }
}
