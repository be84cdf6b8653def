//! The operating system: the process table, process identities and signals (pidfd), fork/exec, and a job's tree of processes.

pub mod launch;
pub mod pidfd;
pub mod procinfo;
pub mod tree;
