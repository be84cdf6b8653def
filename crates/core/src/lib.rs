//! The pure-Rust core shared by the napi addon (crates/node) and the `run-bg` CLI (crates/cli).
//! Nothing in here names a napi or clap type; the faces convert.

pub mod config;
pub mod digest;
pub mod duration;
pub mod format;
pub mod error;
pub mod ids;
pub mod job;
pub mod launch;
pub mod tree;
pub mod logs;
pub mod ops;
pub mod paths;
pub mod pidfd;
pub mod procinfo;
pub mod procs;
pub mod protocol;
pub mod registry;
pub mod spawn;
pub mod notify;
pub mod outpipe;
pub mod supervisor;
pub mod text;
pub mod view;

pub use error::{Error, Result};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
