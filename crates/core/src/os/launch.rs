//! Starts a job's main process so that its pid is known at once and the
//! outcome of its exec only when asked. The supervisor records the job while
//! the program starts up (on Linux once the exec is done, elsewhere while it
//! is still under way: see `start_child`), so that the write and the job's
//! start overlap instead of adding up on the path a caller waits on. std's
//! `Command::spawn` cannot do this: it returns only once it knows whether
//! the exec succeeded, and reports the failure its own way.
//!
//! The child does only async-signal-safe work between fork and exec: every
//! string, pointer array and file descriptor is prepared before the fork.

use crate::model::error::LaunchError;
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What to run and where; the environment is the supervisor's own, minus
/// `remove`, plus `set` (a later entry wins over an earlier one).
pub struct LaunchSpec<'a> {
    pub argv: &'a [OsString],
    pub cwd: &'a Path,
    pub set: Vec<(OsString, OsString)>,
    pub remove: &'a [&'a str],
    /// Becomes the child's stdout and stderr.
    pub output: RawFd,
    /// Becomes the child's stdin (`--stdin pipe`); /dev/null when `None`.
    pub stdin: Option<RawFd>,
    /// Set before the exec, so that every process of the job inherits it.
    pub nice: Option<i32>,
}

/// A forked child whose exec may still be under way.
pub struct Launched {
    pub pid: libc::pid_t,
    program: String,
    cwd: PathBuf,
    nice: Option<i32>,
    /// Closed by the exec (close-on-exec); carries `[step, errno]` if a step failed.
    report: OwnedFd,
}

/// Which step of the child's set-up failed, as sent over the report pipe.
const STEP_STDIO: u8 = 1;
const STEP_CWD: u8 = 2;
const STEP_EXEC: u8 = 3;
const STEP_GROUP: u8 = 4;
const STEP_SIGNALS: u8 = 5;
const STEP_NICE: u8 = 6;
const REPORT_LEN: usize = 1 + std::mem::size_of::<libc::c_int>();

/// Everything the child needs, built before the fork. The pointer arrays
/// point into the strings' heap buffers, which stay put while `_strings` lives.
struct Prepared {
    cwd: CString,
    /// Where to look for the program, in order: the name itself when it has a
    /// slash, else each `PATH` entry joined with it, as execvp tries them.
    candidates: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// `/bin/sh <candidate> <args>`: what execvp runs for a file without a
    /// `#!` line (ENOEXEC); slot 1 is filled in by the child.
    sh_argv: Vec<*const libc::c_char>,
    _strings: Vec<CString>,
}

fn c_string(bytes: impl Into<Vec<u8>>, what: &str) -> Result<CString, LaunchError> {
    CString::new(bytes).map_err(|_| LaunchError::BadRequest(format!("{what} contains a NUL byte")))
}

fn null_terminated<'a>(strings: impl Iterator<Item = &'a CString>) -> Vec<*const libc::c_char> {
    strings.map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// The child's environment, and its `PATH`.
fn child_environment(spec: &LaunchSpec) -> (Vec<(OsString, OsString)>, Option<OsString>) {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(key, _)| !spec.remove.iter().any(|r| key.as_encoded_bytes() == r.as_bytes()))
        .collect();
    for (key, value) in &spec.set {
        // One entry per name: getenv takes the first, so a duplicate would hide the value set here.
        vars.retain(|(k, _)| k != key);
        vars.push((key.clone(), value.clone()));
    }
    let path = vars.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone());
    (vars, path)
}

/// The paths execvp would try for `program`, in order. Relative ones are
/// tried after the child's chdir, so they resolve against the job's cwd.
fn candidates(program: &[u8], path: Option<OsString>) -> Vec<Vec<u8>> {
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    // glibc's search path when PATH is unset.
    let path = path.map(OsString::into_vec).unwrap_or_else(|| b"/bin:/usr/bin".to_vec());
    path.split(|&b| b == b':')
        .map(|dir| {
            let mut candidate = if dir.is_empty() { Vec::new() } else { [dir, b"/"].concat() };
            candidate.extend_from_slice(program);
            candidate
        })
        .collect()
}

pub fn describe_spawn_error(program: &str, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound if program.contains('/') => format!("cannot start `{program}`: no such file"),
        std::io::ErrorKind::NotFound => format!("cannot start `{program}`: command not found in PATH"),
        std::io::ErrorKind::PermissionDenied => {
            format!("cannot start `{program}`: permission denied (a directory, or a file without execute permission)")
        }
        _ => format!("cannot start `{program}`: {error}"),
    }
}

fn prepare(spec: &LaunchSpec) -> Result<Prepared, LaunchError> {
    let name = spec.argv.first().ok_or_else(|| LaunchError::BadRequest("no program to run".into()))?;
    let (vars, path) = child_environment(spec);
    let env = vars
        .into_iter()
        .map(|(key, value)| {
            let mut entry = key.into_vec();
            entry.push(b'=');
            entry.extend(value.into_vec());
            c_string(entry, "an environment variable")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let candidates = candidates(name.as_bytes(), path)
        .into_iter()
        .map(|c| c_string(c, "the program's name"))
        .collect::<Result<Vec<_>, _>>()?;
    let args = spec.argv.iter().map(|a| c_string(a.as_bytes(), "an argument")).collect::<Result<Vec<_>, _>>()?;
    let sh = c"/bin/sh".to_owned();
    let cwd = c_string(spec.cwd.as_os_str().as_encoded_bytes(), "the working directory")?;
    let argv = null_terminated(args.iter());
    // Slot 1 (the script) is a placeholder until the child knows which candidate it is.
    let sh_argv = null_terminated([&sh, &sh].into_iter().chain(&args[1..]));
    let envp = null_terminated(env.iter());
    let mut strings = args;
    strings.extend(env);
    strings.push(sh);
    Ok(Prepared { cwd, candidates, argv, envp, sh_argv, _strings: strings })
}

/// Makes `fd` the child's `target` descriptor, open across the exec.
///
/// # Safety
/// Only in the forked child before exec: it overwrites `target` whatever owns
/// it, and only async-signal-safe calls are made.
unsafe fn install_fd(fd: RawFd, target: RawFd) -> bool {
    if fd == target {
        // dup2 onto itself would keep close-on-exec set.
        return libc::fcntl(fd, libc::F_SETFD, 0) == 0;
    }
    libc::dup2(fd, target) == target
}

fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The child's side: set up and exec, or report which step failed and exit.
/// Entered with every signal blocked (see `launch`).
///
/// # Safety
/// Only in the child just forked from a single-threaded process: it calls
/// only async-signal-safe functions, replaces fds 0-2 and never returns.
unsafe fn exec_child(p: &mut Prepared, nice: Option<i32>, stdin: RawFd, output: RawFd, report: RawFd) -> ! {
    let fail = |step: u8, errno: libc::c_int| -> ! {
        let mut message = [0u8; REPORT_LEN];
        message[0] = step;
        message[1..].copy_from_slice(&errno.to_ne_bytes());
        libc::write(report, message.as_ptr() as *const libc::c_void, REPORT_LEN);
        libc::_exit(127)
    };
    // The supervisor's handlers must not run here (they would feed its
    // self-pipe), and dispositions its caller left ignored must not reach
    // the job: every signal starts at its default, as libuv's children do.
    // Refused only for SIGKILL and SIGSTOP, whose disposition cannot change.
    for signal in 1..32 {
        if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR && signal != libc::SIGKILL && signal != libc::SIGSTOP {
            fail(STEP_SIGNALS, errno());
        }
    }
    // A job started with every signal blocked would ignore our SIGTERM: a
    // failure here (only bad inputs make one) ends the start instead.
    let mut none: libc::sigset_t = std::mem::zeroed();
    if libc::sigemptyset(&mut none) != 0 || libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
        fail(STEP_SIGNALS, errno());
    }
    // Its own process group, so a kill can signal the whole group at once;
    // without it a kill would miss the tree, so the start fails instead. In
    // a session of its own too: a group in its parent's session becomes
    // orphaned when that parent dies, and the kernel then sends SIGHUP and
    // SIGCONT to it if a member is stopped, so a paused job whose supervisor
    // died was killed or ran again. Outside its parent's session, the group
    // is orphaned from the start and the supervisor's death changes nothing.
    if libc::setsid() == -1 {
        fail(STEP_GROUP, errno());
    }
    // A job asked to run at a niceness it may not take does not run at
    // another: its start fails, saying why.
    if let Some(nice) = nice {
        if libc::setpriority(libc::PRIO_PROCESS as _, 0, nice) != 0 {
            fail(STEP_NICE, errno());
        }
    }
    if !(install_fd(stdin, 0) && install_fd(output, 1) && install_fd(output, 2)) {
        fail(STEP_STDIO, errno());
    }
    if libc::chdir(p.cwd.as_ptr()) != 0 {
        fail(STEP_CWD, errno());
    }
    // execvp's search: go on past a missing or unusable entry, remember a
    // permission problem, stop at any other error.
    let mut denied = false;
    let mut last = libc::ENOENT;
    for candidate in &p.candidates {
        libc::execve(candidate.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        last = errno();
        if last == libc::ENOEXEC {
            p.sh_argv[1] = candidate.as_ptr();
            libc::execve(p.sh_argv[0], p.sh_argv.as_ptr(), p.envp.as_ptr());
            last = errno();
        }
        match last {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => fail(STEP_EXEC, last),
        }
    }
    fail(STEP_EXEC, if denied { libc::EACCES } else { last })
}

/// What `exec_child` is called with, in the child.
struct ChildArgs<'a> {
    p: &'a mut Prepared,
    nice: Option<i32>,
    stdin: RawFd,
    output: RawFd,
    report: RawFd,
}

/// Starts the child; its pid, or -1 with errno set. Entered with every
/// signal blocked and only while single-threaded (see `launch`).
///
/// Linux: the child shares our memory and we sleep until its exec (or its
/// `_exit`), as posix_spawn does: no copy of our page tables to make and
/// tear down, and the job execs before we go on. Forked, it waited for a CPU
/// while we wrote its record on the other, and on 2 loaded cores its exec
/// came 3 ms (median) after the fork; our writes now follow its exec and
/// overlap the program's own start-up instead.
#[cfg(target_os = "linux")]
fn start_child(args: &mut ChildArgs) -> libc::pid_t {
    extern "C" fn entry(args: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `args` is the ChildArgs that `start_child` passed, alive
        // (its caller is suspended until we exec or exit) and touched by no
        // one else meanwhile.
        let args = unsafe { &mut *args.cast::<ChildArgs>() };
        // SAFETY: we are the child of a single-threaded process, with every
        // signal blocked; `exec_child` calls only async-signal-safe
        // functions, allocates nothing and ends in execve or _exit. What it
        // writes in the memory we share with our parent (errno, the spare
        // slot of `sh_argv`) is not read by the parent in a way that
        // matters: it sleeps until then and reads errno only if the clone
        // failed.
        unsafe { exec_child(args.p, args.nice, args.stdin, args.output, args.report) }
    }
    // The child's own stack (it shares our memory, so not ours): ample for
    // exec_child's few frames; never read before it is written.
    const STACK_BYTES: usize = 64 * 1024;
    let mut stack: Vec<u8> = Vec::with_capacity(STACK_BYTES);
    // The stack grows down from its (16-byte aligned) top.
    let top = (stack.as_mut_ptr() as usize + STACK_BYTES) & !15;
    // SAFETY: `entry` runs on `stack`, which outlives the call (we are
    // suspended until the child has exec'd or exited, after which nothing
    // of it runs on that stack); CLONE_VM without CLONE_SIGHAND leaves our
    // signal handlers ours while the child resets its own; `args` lives
    // across the call.
    unsafe {
        libc::clone(
            entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (args as *mut ChildArgs).cast::<libc::c_void>(),
        )
    }
}

/// Elsewhere a fork: the child runs while we go on.
#[cfg(not(target_os = "linux"))]
fn start_child(args: &mut ChildArgs) -> libc::pid_t {
    // SAFETY: the caller guarantees we are single-threaded, so the child
    // inherits no lock held by another thread; it only execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: we are that freshly forked child of a single-threaded
        // process; `args.p` holds every C string and array it needs, built
        // before the fork so the child allocates nothing.
        unsafe { exec_child(args.p, args.nice, args.stdin, args.output, args.report) }
    }
    pid
}

/// Starts the child (see `start_child`) and returns without waiting for the
/// exec's outcome; call only while single-threaded.
pub fn launch(spec: &LaunchSpec) -> Result<Launched, LaunchError> {
    let mut prepared = prepare(spec)?;
    let null = match spec.stdin {
        Some(_) => None,
        None => Some(std::fs::File::open("/dev/null").map_err(|e| LaunchError::system("cannot open /dev/null", e))?),
    };
    let stdin = spec.stdin.or(null.as_ref().map(|null| null.as_raw_fd())).unwrap_or(-1);
    let (report_read, report_write) = new_pipe(0).map_err(|e| LaunchError::system("cannot create a pipe", e))?;
    // Blocked across the fork: a signal meant for the new job waits until
    // the child has reset its handlers, then acts on it (or on its program).
    // SAFETY: sigset_t is a plain C type for which all-zero is valid (and
    // sigfillset overwrites it).
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; sigprocmask writes the old mask into it.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are live locals of the right type.
    let blocked = unsafe {
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, &mut previous)
    };
    if blocked != 0 {
        return Err(LaunchError::system("cannot block signals across the fork", std::io::Error::last_os_error()));
    }
    let pid = start_child(&mut ChildArgs { p: &mut prepared, nice: spec.nice, stdin, output: spec.output, report: report_write.as_raw_fd() });
    let fork_error = std::io::Error::last_os_error();
    // SAFETY: `previous` is the mask sigprocmask filled in above. Restoring
    // it cannot fail (same inputs that just succeeded).
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    if pid < 0 {
        return Err(LaunchError::system("cannot fork", fork_error));
    }
    // No setpgid here as the child's twin: it would make the child a group
    // leader before its setsid, which then fails. Until the child has made
    // its session, a group signal finds no group and the tree's members are
    // signalled one by one (tree::signal_found), the child among them.
    let program = crate::model::os_text::escaped(&spec.argv[0]).into_owned();
    Ok(Launched { pid, program, cwd: spec.cwd.to_path_buf(), nice: spec.nice, report: report_read })
}

impl Launched {
    /// Waits until the exec has happened (`Ok`), or reaps the child and says
    /// why it could not start.
    pub fn exec_outcome(self) -> Result<(), LaunchError> {
        let mut message = [0u8; REPORT_LEN];
        let mut got = 0;
        let outcome = loop {
            // SAFETY: reads at most the unfilled tail of the live buffer
            // from the report pipe we own.
            let n = unsafe {
                libc::read(self.report.as_raw_fd(), message[got..].as_mut_ptr() as *mut libc::c_void, REPORT_LEN - got)
            };
            if n > 0 {
                got += n as usize;
                if got == REPORT_LEN {
                    break Err(LaunchError::NotStarted(self.describe_failure(&message)));
                }
            } else if n == 0 {
                break if got == 0 {
                    Ok(())
                } else {
                    Err(LaunchError::NotStarted(format!("cannot start `{}`: its set-up ended mid-report", self.program)))
                };
            } else if errno() != libc::EINTR {
                let error = std::io::Error::last_os_error();
                // Not knowing whether it started, do not leave it running unrecorded.
                // SAFETY: integer arguments only. `pid` is our unreaped child,
                // so it cannot be reused; ESRCH cannot happen, and any other
                // failure leaves the report below true.
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
                break Err(LaunchError::system(format!("cannot learn whether `{}` started", self.program), error));
            }
        };
        if outcome.is_err() {
            // SAFETY: a null status pointer is allowed. It reaps our own
            // child; ECHILD would mean it was reaped already, nothing to do.
            unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
        }
        outcome
    }

    fn describe_failure(&self, message: &[u8; REPORT_LEN]) -> String {
        let errno = libc::c_int::from_ne_bytes(message[1..].try_into().unwrap_or_default());
        let error = std::io::Error::from_raw_os_error(errno);
        match message[0] {
            STEP_CWD => format!("working directory `{}`: {error}", crate::model::os_text::escaped(self.cwd.as_os_str())),
            STEP_STDIO => format!("cannot set up the output of `{}`: {error}", self.program),
            STEP_GROUP => format!("cannot give `{}` its own session and process group: {error}", self.program),
            STEP_SIGNALS => format!("cannot reset the signals of `{}`: {error}", self.program),
            STEP_NICE => format!(
                "cannot run `{}` at niceness {}: {error}; a niceness below the current one needs root, CAP_SYS_NICE or an RLIMIT_NICE that allows it",
                self.program,
                self.nice.unwrap_or_default()
            ),
            _ => describe_spawn_error(&self.program, &error),
        }
    }
}

/// A pipe, both ends close-on-exec, with `flags` (`O_NONBLOCK`) on both.
pub fn new_pipe(flags: libc::c_int) -> std::io::Result<(OwnedFd, OwnedFd)> {
    crate::os::platform::pipe(flags)
}

/// Runs `f` with SIGPIPE blocked for this thread, discarding one it raised,
/// so that a write to a pipe whose reader is gone (a supervisor that died
/// before reading its start request) fails with EPIPE instead of killing the
/// caller: the CLI keeps SIGPIPE at its default so that `run-bg list | head`
/// ends quietly. A write's SIGPIPE is sent to the writing thread, so blocking
/// it here is enough.
pub fn without_sigpipe<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: the sigset_t values are plain data initialised by sigemptyset /
    // sigaddset / sigpending before use; pthread_sigmask and sigtimedwait only
    // read and write the sets we pass and change this thread's mask alone.
    unsafe {
        let mut pipe_only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe_only);
        libc::sigaddset(&mut pipe_only, libc::SIGPIPE);
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pending);
        libc::sigpending(&mut pending);
        let already_pending = libc::sigismember(&pending, libc::SIGPIPE) == 1;
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe_only, &mut previous);
        let out = f();
        if !already_pending {
            crate::os::platform::discard_pending_sigpipe(&pipe_only);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write_script(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Launches and waits for the child's exit; returns the exec outcome (as
    /// its text) and the exit code.
    fn run(argv: &[&str], cwd: &Path, set: &[(&str, &str)], remove: &[&str]) -> Result<i32, String> {
        run_into(Path::new("/dev/null"), argv, cwd, set, remove)
    }

    fn run_into(output: &Path, argv: &[&str], cwd: &Path, set: &[(&str, &str)], remove: &[&str]) -> Result<i32, String> {
        // A script a test just wrote can be "busy" (ETXTBSY) for a moment:
        // another test's fork copied our write descriptor, and its child
        // holds it until its own exec. That is the test harness's threads,
        // not the launch, so it is waited out (bounded).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let outcome = try_run_into(output, argv, cwd, set, remove).map_err(|e| e.to_string());
            match &outcome {
                Err(why) if why.to_lowercase().contains("text file busy") && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                _ => return outcome,
            }
        }
    }

    fn try_run_into(output: &Path, argv: &[&str], cwd: &Path, set: &[(&str, &str)], remove: &[&str]) -> Result<i32, LaunchError> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let output = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(output).unwrap();
        let launched = launch(&LaunchSpec {
            argv: &argv,
            cwd,
            set: set.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            remove,
            output: output.as_raw_fd(),
            stdin: None,
            nice: None,
        })?;
        let pid = launched.pid;
        launched.exec_outcome()?;
        let mut status = 0;
        // SAFETY: `status` is a live local; `pid` is our own unreaped child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        Ok(libc::WEXITSTATUS(status))
    }

    #[test]
    fn a_request_exec_cannot_take_is_refused_before_the_fork_and_a_missing_program_after() {
        let dir = tempfile::tempdir().unwrap();
        let nul = try_run_into(Path::new("/dev/null"), &["echo", "a\0b"], dir.path(), &[], &[]);
        assert!(matches!(&nul, Err(LaunchError::BadRequest(why)) if why == "an argument contains a NUL byte"), "{nul:?}");
        let none = try_run_into(Path::new("/dev/null"), &[], dir.path(), &[], &[]);
        assert!(matches!(&none, Err(LaunchError::BadRequest(why)) if why == "no program to run"), "{none:?}");
        let missing = try_run_into(Path::new("/dev/null"), &["/nonexistent/prog"], dir.path(), &[], &[]);
        assert!(matches!(&missing, Err(LaunchError::NotStarted(why)) if why == "cannot start `/nonexistent/prog`: no such file"), "{missing:?}");
    }

    #[test]
    fn the_child_gets_its_cwd_environment_and_own_session_and_process_group() {
        let dir = tempfile::tempdir().unwrap();
        // `cargo test` runs the test binary with it set; the child must not see it.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let code = run(
            &["sh", "-c", r#"echo "$PWD $ADDED ${CARGO_MANIFEST_DIR:-dropped} $(ps -o pgid= -p $$ | tr -d ' ') $$ $(ps -o sid= -p $$ | tr -d ' ')" > seen; env > env.txt"#],
            dir.path(),
            &[("ADDED", "first"), ("ADDED", "yes")],
            &["CARGO_MANIFEST_DIR"],
        );
        assert_eq!(code, Ok(0));
        let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
        let fields: Vec<&str> = seen.split_whitespace().collect();
        assert_eq!(fields[..3], [dir.path().to_str().unwrap(), "yes", "dropped"]);
        assert_eq!(fields[3], fields[4], "the child leads its own process group");
        // Its own session: a paused job's group is never orphaned later by
        // its supervisor's death, which would bring SIGHUP and SIGCONT.
        assert_eq!(fields[5], fields[4], "the child leads its own session");
        let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
        assert_eq!(env.lines().filter(|l| l.starts_with("ADDED=")).count(), 1, "a name set twice appears once");
    }

    #[test]
    fn the_program_is_found_in_the_childs_path_and_relative_to_its_cwd() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tools")).unwrap();
        write_script(&dir.path().join("tools/only-here"), "#!/bin/sh\nexit 7\n", 0o755);
        let path = format!("tools:{}", std::env::var("PATH").unwrap_or_default());
        assert_eq!(run(&["only-here"], dir.path(), &[("PATH", &path)], &[]), Ok(7));
        assert_eq!(run(&["./tools/only-here"], dir.path(), &[], &[]), Ok(7));
        let missing = run(&["only-here"], dir.path(), &[], &[]).unwrap_err();
        assert_eq!(missing, "cannot start `only-here`: command not found in PATH");
    }

    #[test]
    fn a_script_without_a_shebang_runs_with_sh_as_execvp_would() {
        let dir = tempfile::tempdir().unwrap();
        write_script(&dir.path().join("plain"), "echo ran > ran.txt\nexit 3\n", 0o755);
        assert_eq!(run(&["./plain", "arg"], dir.path(), &[], &[]), Ok(3));
        assert_eq!(std::fs::read_to_string(dir.path().join("ran.txt")).unwrap(), "ran\n");
    }

    #[test]
    fn failures_say_which_step_failed_and_why() {
        let dir = tempfile::tempdir().unwrap();
        write_script(&dir.path().join("not-executable"), "#!/bin/sh\n", 0o644);
        let denied = run(&["./not-executable"], dir.path(), &[], &[]).unwrap_err();
        assert_eq!(denied, "cannot start `./not-executable`: permission denied (a directory, or a file without execute permission)");
        let path = dir.path().to_str().unwrap().to_string();
        let denied_in_path = run(&["not-executable"], dir.path(), &[("PATH", &path)], &[]).unwrap_err();
        assert_eq!(denied_in_path, "cannot start `not-executable`: permission denied (a directory, or a file without execute permission)");
        let absent = run(&["/no/such/program"], dir.path(), &[], &[]).unwrap_err();
        assert_eq!(absent, "cannot start `/no/such/program`: no such file");
        let gone = dir.path().join("gone");
        let bad_cwd = run(&["true"], &gone, &[], &[]).unwrap_err();
        assert!(bad_cwd.starts_with(&format!("working directory `{}`: ", gone.display())), "{bad_cwd}");
    }

    #[test]
    fn the_search_goes_on_past_an_entry_that_cannot_be_executed_as_execvp_does() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["a", "b", "c"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        // a: its interpreter is missing (ENOENT); b: a directory (EACCES); c: the real one.
        write_script(&dir.path().join("a/tool"), "#!/no/such/interpreter\n", 0o755);
        std::fs::create_dir(dir.path().join("b/tool")).unwrap();
        write_script(&dir.path().join("c/tool"), "#!/bin/sh\nexit 5\n", 0o755);
        let path = format!("a:b:c:{}", std::env::var("PATH").unwrap_or_default());
        assert_eq!(run(&["tool"], dir.path(), &[("PATH", &path)], &[]), Ok(5));
        let without_c = run(&["tool"], dir.path(), &[("PATH", "a:b")], &[]).unwrap_err();
        assert_eq!(without_c, "cannot start `tool`: permission denied (a directory, or a file without execute permission)");
    }

    #[test]
    fn signals_the_supervisor_ignores_start_at_their_default_in_the_job() {
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("status");
        // SAFETY: SIG_IGN installs no code of ours; nothing in the test
        // binary sends SIGUSR2, so ignoring it for a moment affects no test.
        let previous = unsafe { libc::signal(libc::SIGUSR2, libc::SIG_IGN) };
        let code = run_into(&status, &["cat", "/proc/self/status"], dir.path(), &[], &[]);
        // SAFETY: puts back the disposition signal() returned above.
        unsafe { libc::signal(libc::SIGUSR2, previous) };
        assert_eq!(code, Ok(0));
        let status = std::fs::read_to_string(&status).unwrap();
        let field = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
        };
        assert_eq!(field("SigIgn:") & (1 << (libc::SIGUSR2 - 1)), 0, "SIGUSR2 is not ignored in the job");
        assert_eq!(field("SigBlk:"), 0, "nothing is blocked in the job");
    }

    #[test]
    fn a_write_to_a_pipe_without_reader_fails_instead_of_killing_the_writer() {
        // In a child with SIGPIPE at its default, as the CLI has it; only
        // async-signal-safe calls there.
        // SAFETY: the child calls only async-signal-safe functions and _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the forked child: signal, pipe, close, write, the
            // signal-mask calls and _exit are all async-signal-safe.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                let mut fds = [0; 2];
                libc::pipe(fds.as_mut_ptr());
                libc::close(fds[0]);
                let failed = without_sigpipe(|| libc::write(fds[1], b"x".as_ptr().cast(), 1) < 0);
                libc::_exit(if failed { 0 } else { 3 });
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "the writer was killed (signal {})", libc::WTERMSIG(status));
        assert_eq!(libc::WEXITSTATUS(status), 0, "the write reported EPIPE");
    }
}
