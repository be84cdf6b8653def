//! What is kept on disk: the home, its config, the registry of jobs, and the logs.

pub mod atomic;
pub mod config;
pub mod deliveries;
pub mod index;
pub mod job_file;
pub mod log_read;
pub mod logs;
pub mod paths;
/// Named pipes are Unix's; Windows's are in the kernel's pipe namespace.
#[cfg(unix)]
pub mod pipes;
pub mod procset;
pub mod registry;
pub mod schedule;
pub mod sessions;
