//! Where the `run-bg` binary is, which every job's supervisor runs:
//! `$PROC_MANAGER_BINARY_PATH`, else next to this addon file (found with
//! dladdr).

use napi::bindgen_prelude::*;
use std::path::{Path, PathBuf};

/// The supervisor is the `run-bg` binary: `$PROC_MANAGER_BINARY_PATH`, else
/// next to this addon (native/run-bg in a checkout and in a platform package).
pub(crate) fn supervisor_exe() -> Result<PathBuf> {
    if let Some(explicit) = std::env::var_os("PROC_MANAGER_BINARY_PATH").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(explicit));
    }
    // The older override. Every supervisor and helper carries this name as its
    // mark (a job id or "helper"), which on-exit hooks inherit: only an
    // absolute path names a binary.
    if let Some(explicit) = std::env::var_os("PROC_MANAGER_SUPERVISOR").filter(|v| Path::new(v).is_absolute()) {
        return Ok(PathBuf::from(explicit));
    }
    let addon = addon_path().ok_or_else(|| napi::Error::from_reason("cannot locate the proc-manager addon file"))?;
    let dir = addon.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join("native/run-bg"),
        dir.join("target/release/run-bg"),
        dir.join(format!("target/{}/release/run-bg", env!("PROC_MANAGER_TARGET"))),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        napi::Error::from_reason(format!(
            "cannot find the run-bg executable (looked for {}); in a checkout run `npm run build`, else reinstall this platform's package (`npm install proc-manager-<platform>`), or set PROC_MANAGER_BINARY_PATH",
            candidates[0].display()
        ))
    })
}

fn addon_path() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: Dl_info is a plain C struct (pointers and ints) for which
    // all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address is a function of this library, mapped for as long
    // as the addon is loaded; `info` is a live out-parameter.
    let found = unsafe { libc::dladdr(addon_path as *const () as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded and dli_fname is non-null: a NUL-terminated
    // path owned by the loader, valid while the library stays loaded, and
    // copied out below before we return.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
}
