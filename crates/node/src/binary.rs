//! Where the `run-bg` binary is, which every job's supervisor runs:
//! `$PROC_MANAGER_BINARY_PATH`, else next to this addon file (found with
//! dladdr, or GetModuleHandleExW on Windows).

use std::env::consts::EXE_SUFFIX as EXE;
use std::path::{Path, PathBuf};

/// The supervisor is the `run-bg` binary: `$PROC_MANAGER_BINARY_PATH`, else
/// next to this addon (native/run-bg in a checkout and in a platform package).
pub(crate) fn supervisor_exe() -> proc_manager_core::Result<PathBuf> {
    if let Some(explicit) = std::env::var_os("PROC_MANAGER_BINARY_PATH").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(explicit));
    }
    // The older override. Every supervisor and helper carries this name as its
    // mark (a job id or "helper"), which on-exit hooks inherit: only an
    // absolute path names a binary.
    if let Some(explicit) = std::env::var_os("PROC_MANAGER_SUPERVISOR").filter(|v| Path::new(v).is_absolute()) {
        return Ok(PathBuf::from(explicit));
    }
    let addon = addon_path().ok_or_else(|| proc_manager_core::Error::Other("cannot locate the proc-manager addon file".into()))?;
    let dir = addon.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join(format!("native/run-bg{EXE}")),
        dir.join(format!("target/release/run-bg{EXE}")),
        dir.join(format!("target/{}/release/run-bg{EXE}", env!("PROC_MANAGER_TARGET"))),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        proc_manager_core::Error::Other(format!(
            "cannot find the run-bg executable (looked for {}); in a checkout run `npm run build`, else reinstall this platform's package (`npm install proc-manager-<platform>`), or set PROC_MANAGER_BINARY_PATH",
            candidates[0].display()
        ))
    })
}

fn addon_path() -> Option<PathBuf> {
    proc_manager_core::os::sys::library_path_of(addon_path as *const () as usize)
}
