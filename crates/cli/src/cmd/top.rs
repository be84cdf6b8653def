//! `run-bg top`: runs `run-bg-top`, the live full-screen view, found beside
//! this binary (the platform packages ship both). The view is a binary of its
//! own so that `run-bg`, which is every job's supervisor, carries no
//! terminal UI: neither its size nor its start grows with it.

use proc_manager_core::{Error, Result};
use std::ffi::OsString;

pub fn run(args: Vec<OsString>) -> Result<i32> {
    let me = std::env::current_exe().map_err(|e| Error::io("find own executable", "/proc/self/exe", e))?;
    let viewer = me.with_file_name(format!("run-bg-top{}", std::env::consts::EXE_SUFFIX));
    if !viewer.is_file() {
        return Err(Error::Other(format!(
            "`run-bg top` runs {}, which is missing: it ships beside run-bg in the platform package (reinstall it), or in a checkout `npm run build` builds it",
            viewer.display()
        )));
    }
    // It hands background work (watchers, announcements) to this run-bg.
    let status = std::process::Command::new(&viewer)
        .arg("--runner")
        .arg(&me)
        .args(args)
        .status()
        .map_err(|e| Error::io("start the live view", viewer.clone(), e))?;
    Ok(status.code().unwrap_or(1))
}
