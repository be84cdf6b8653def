//! Signal numbers: the system's own on Unix; on Windows, which has no
//! signals, Linux's numbering, so that a record and a message read the same
//! there as here (`os/windows.rs` maps each onto what Windows has). The one
//! place above `os` that knows the platform: how a job ended is part of
//! its record.

#[cfg(unix)]
pub use libc::{
    SIGABRT, SIGALRM, SIGBUS, SIGCHLD, SIGCONT, SIGFPE, SIGHUP, SIGILL, SIGINT, SIGKILL, SIGPIPE, SIGQUIT, SIGSEGV, SIGSTOP, SIGTERM,
    SIGTRAP, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ,
};

#[cfg(windows)]
mod windows_numbers {
    pub const SIGHUP: i32 = 1;
    pub const SIGINT: i32 = 2;
    pub const SIGQUIT: i32 = 3;
    pub const SIGILL: i32 = 4;
    pub const SIGTRAP: i32 = 5;
    pub const SIGABRT: i32 = 6;
    pub const SIGBUS: i32 = 7;
    pub const SIGFPE: i32 = 8;
    pub const SIGKILL: i32 = 9;
    pub const SIGUSR1: i32 = 10;
    pub const SIGSEGV: i32 = 11;
    pub const SIGUSR2: i32 = 12;
    pub const SIGPIPE: i32 = 13;
    pub const SIGALRM: i32 = 14;
    pub const SIGTERM: i32 = 15;
    pub const SIGCHLD: i32 = 17;
    pub const SIGCONT: i32 = 18;
    pub const SIGSTOP: i32 = 19;
    pub const SIGXCPU: i32 = 24;
    pub const SIGXFSZ: i32 = 25;
}
#[cfg(windows)]
pub use windows_numbers::*;
