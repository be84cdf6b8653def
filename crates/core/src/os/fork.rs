//! Forks of our own process that run no new program: a supervisor leaving
//! its caller behind (`detach`), and the errands it runs in a child of its
//! own that then `_exit`s (`fork_errand`).

/// Leaves the caller behind: a new session (no terminal's hang-up or Ctrl-C
/// reaches us), then one more fork so the caller reaps the intermediate at
/// once and never holds a zombie; we are then nobody's child. Call only while
/// single-threaded.
pub fn detach() -> std::io::Result<()> {
    // EPERM: we lead a process group, so a terminal's signals could still
    // reach us; the core never starts us that way.
    rustix::process::setsid()?;
    leave_parent()
}

/// `detach` without the new session, which the caller makes later (a
/// supervisor, once its job runs: see `supervise::start`): the fork only,
/// so that the caller reaps the intermediate at once. Call only while
/// single-threaded.
pub fn leave_parent() -> std::io::Result<()> {
    // SAFETY: the caller guarantees we are single-threaded, so the child
    // inherits no lock held by another thread.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(()),
        // SAFETY: _exit runs no destructors or atexit handlers, so nothing
        // shared with the child (buffers, files) is flushed or removed twice.
        _ => unsafe { libc::_exit(0) },
    }
}

/// Runs `in_child` in a forked child of ours, which then `_exit`s: the
/// child's pid, or the fork's error. Call only while single-threaded: the
/// child runs ordinary Rust code.
pub fn fork_errand(in_child: impl FnOnce()) -> std::io::Result<libc::pid_t> {
    // SAFETY: the caller guarantees we are single-threaded (the supervisor
    // joins its other threads first), so the child inherits no lock another
    // thread holds and may run ordinary Rust code.
    match unsafe { libc::fork() } {
        0 => {
            in_child();
            // SAFETY: _exit skips destructors and atexit handlers, so the
            // parent's registry lock, temp files and buffers stay its own.
            unsafe { libc::_exit(0) }
        }
        -1 => Err(std::io::Error::last_os_error()),
        pid => Ok(pid),
    }
}

/// Puts `signal` back to its default disposition (in a forked errand, whose
/// copies of the parent's handlers would only set the copy's flags).
pub fn restore_default(signal: i32) -> std::io::Result<()> {
    // SAFETY: restoring the default disposition installs no code of ours;
    // signal-hook's handler it replaces would only set this copy's flags and
    // write to the self-pipe.
    if unsafe { libc::signal(signal, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
