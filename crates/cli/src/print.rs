//! What every verb writes to stdout: a line (`outln!`) or a JSON value
//! (`print_json`). Once nobody reads them any more (a closed pipe, or a
//! closed socketpair as Node's child stdio is), the CLI ends quietly the way
//! `seq 1 1000000 | head -1` ends `seq`, instead of panicking.

use std::io::Write;

/// `println!` for the CLI's results, ending quietly once the reader is gone.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::print::emit_line(format_args!($($arg)*)) };
}

pub fn emit_line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.write_all(b"\n")) {
        stdout_failed(e);
    }
}

/// A value as one line of JSON.
pub fn print_json<T: serde::Serialize>(value: &T) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = serde_json::to_writer(&mut out, value).map_err(std::io::Error::from).and_then(|_| out.write_all(b"\n")) {
        stdout_failed(e);
    }
}

/// EPIPE from a pipe, ECONNRESET from a socketpair: nobody reads stdout any more.
pub fn reader_gone(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset)
}

/// A failed write to stdout: the reader is gone, or stdout itself is broken.
pub fn stdout_failed(error: std::io::Error) -> ! {
    if reader_gone(&error) {
        // Die of SIGPIPE (default disposition in the CLI), as on a closed
        // pipe; should that return, the exit below ends the process instead.
        proc_manager_core::os::sys::die_of_sigpipe();
    }
    eprintln!("run-bg: cannot write to stdout: {error}");
    std::process::exit(1)
}
