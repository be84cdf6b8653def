//! Starts a job's main process so that its pid is known at once and the
//! outcome of its exec only when asked. The supervisor records the job in the
//! registry (a locked, fsynced write) while the child is still exec'ing, so
//! that write and the exec overlap instead of adding up on the path a caller
//! of `runBackground` waits on. std's `Command::spawn` cannot do this: it
//! returns only once the exec has succeeded or failed.
//!
//! The child does only async-signal-safe work between fork and exec: every
//! string, pointer array and file descriptor is prepared before the fork.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What to run and where; the environment is the supervisor's own, minus
/// `remove`, plus `set`.
pub struct LaunchSpec<'a> {
    pub argv: &'a [String],
    pub cwd: &'a Path,
    pub set: Vec<(OsString, OsString)>,
    pub remove: &'a [&'a str],
    /// Becomes the child's stdout and stderr.
    pub output: RawFd,
}

/// A forked child whose exec may still be under way.
pub struct Launched {
    pub pid: libc::pid_t,
    program: String,
    cwd: PathBuf,
    /// Closed by the exec (close-on-exec); carries `[step, errno]` if a step failed.
    report: OwnedFd,
}

/// Which step of the child's set-up failed, as sent over the report pipe.
const STEP_STDIO: u8 = 1;
const STEP_CWD: u8 = 2;
const STEP_EXEC: u8 = 3;
const REPORT_LEN: usize = 1 + std::mem::size_of::<libc::c_int>();

/// Everything the child needs, built before the fork. The pointer arrays
/// point into the strings' heap buffers, which stay put while `strings` lives.
struct Prepared {
    program: CString,
    cwd: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// `/bin/sh <program> <args>`: what execvp runs for a file without a
    /// `#!` line (ENOEXEC), kept so such scripts still run.
    sh_argv: Vec<*const libc::c_char>,
    _strings: Vec<CString>,
}

fn c_string(bytes: impl Into<Vec<u8>>, what: &str) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| format!("{what} contains a NUL byte"))
}

fn null_terminated<'a>(strings: impl Iterator<Item = &'a CString>) -> Vec<*const libc::c_char> {
    strings
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The environment the child gets, as `KEY=VALUE` strings.
fn child_environment(spec: &LaunchSpec) -> Result<(Vec<CString>, Option<OsString>), String> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(key, _)| {
            !spec.remove.iter().any(|r| key.as_bytes() == r.as_bytes())
                && !spec.set.iter().any(|(k, _)| k == key)
        })
        .collect();
    vars.extend(spec.set.iter().cloned());
    let path = vars
        .iter()
        .find(|(k, _)| k.as_bytes() == b"PATH")
        .map(|(_, v)| v.clone());
    let envp = vars
        .into_iter()
        .map(|(key, value)| {
            let mut entry = key.into_vec();
            entry.push(b'=');
            entry.extend(value.into_vec());
            c_string(entry, "an environment variable")
        })
        .collect::<Result<_, _>>()?;
    Ok((envp, path))
}

/// Finds `program` as execvp would, but in the child's PATH and relative to
/// its working directory; a name with a slash is left for the exec to judge.
fn resolve_program(program: &str, path: Option<&OsStr>, cwd: &Path) -> std::io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    // glibc's default search path when PATH is unset.
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    let mut denied = false;
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = cwd.join(dir).join(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Ok(c_path) = CString::new(candidate.as_os_str().as_bytes()) else {
            continue;
        };
        if unsafe { libc::access(c_path.as_ptr(), libc::X_OK) } == 0 {
            return Ok(candidate);
        }
        denied = true;
    }
    Err(std::io::Error::from(if denied {
        std::io::ErrorKind::PermissionDenied
    } else {
        std::io::ErrorKind::NotFound
    }))
}

pub fn describe_spawn_error(program: &str, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound if program.contains('/') => {
            format!("cannot start `{program}`: no such file")
        }
        std::io::ErrorKind::NotFound => {
            format!("cannot start `{program}`: command not found in PATH")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("cannot start `{program}`: permission denied (is it executable?)")
        }
        _ => format!("cannot start `{program}`: {error}"),
    }
}

fn prepare(spec: &LaunchSpec) -> Result<Prepared, String> {
    let name = spec.argv.first().ok_or("no program to run")?;
    let (envp_strings, path) = child_environment(spec)?;
    let envp = &envp_strings;
    let program = resolve_program(name, path.as_deref(), spec.cwd)
        .map_err(|e| describe_spawn_error(name, &e))?;
    let program = c_string(program.into_os_string().into_vec(), "the program's path")?;
    let args = spec
        .argv
        .iter()
        .map(|a| c_string(a.as_bytes(), "an argument"))
        .collect::<Result<Vec<_>, _>>()?;
    let sh = c"/bin/sh".to_owned();
    let cwd = c_string(spec.cwd.as_os_str().as_bytes(), "the working directory")?;
    let argv = null_terminated(args.iter());
    let sh_argv = null_terminated([&sh, &program].into_iter().chain(&args[1..]));
    let envp = null_terminated(envp.iter());
    let mut strings = args;
    strings.extend(envp_strings);
    strings.push(sh);
    Ok(Prepared {
        program,
        cwd,
        argv,
        envp,
        sh_argv,
        _strings: strings,
    })
}

/// Makes `fd` the child's `target` descriptor, open across the exec.
unsafe fn install_fd(fd: RawFd, target: RawFd) -> bool {
    if fd == target {
        // dup2 onto itself would keep close-on-exec set.
        return libc::fcntl(fd, libc::F_SETFD, 0) == 0;
    }
    libc::dup2(fd, target) == target
}

/// The child's side: set up and exec, or report which step failed and exit.
unsafe fn exec_child(p: &Prepared, stdin: RawFd, output: RawFd, report: RawFd) -> ! {
    let fail = |step: u8| -> ! {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let mut message = [0u8; REPORT_LEN];
        message[0] = step;
        message[1..].copy_from_slice(&errno.to_ne_bytes());
        libc::write(report, message.as_ptr() as *const libc::c_void, REPORT_LEN);
        libc::_exit(127)
    };
    // Its own process group, so a kill can signal the whole group at once.
    libc::setpgid(0, 0);
    if !(install_fd(stdin, 0) && install_fd(output, 1) && install_fd(output, 2)) {
        fail(STEP_STDIO);
    }
    if libc::chdir(p.cwd.as_ptr()) != 0 {
        fail(STEP_CWD);
    }
    // Handlers reset on exec, but the signal mask and ignored signals are inherited.
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    libc::execve(p.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
    if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOEXEC) {
        libc::execve(p.sh_argv[0], p.sh_argv.as_ptr(), p.envp.as_ptr());
    }
    fail(STEP_EXEC)
}

/// Forks the child and returns at once; call only while single-threaded.
pub fn launch(spec: &LaunchSpec) -> Result<Launched, String> {
    let prepared = prepare(spec)?;
    let stdin =
        std::fs::File::open("/dev/null").map_err(|e| format!("cannot open /dev/null: {e}"))?;
    let (report_read, report_write) =
        super::supervisor::new_pipe(0).map_err(|e| format!("cannot create a pipe: {e}"))?;
    match unsafe { libc::fork() } {
        -1 => Err(format!("cannot fork: {}", std::io::Error::last_os_error())),
        0 => unsafe {
            exec_child(
                &prepared,
                stdin.as_raw_fd(),
                spec.output,
                report_write.as_raw_fd(),
            )
        },
        pid => {
            // The child does the same; whichever runs first wins, so a group
            // signal sent right after this reaches the child even before its exec.
            unsafe { libc::setpgid(pid, pid) };
            Ok(Launched {
                pid,
                program: spec.argv[0].clone(),
                cwd: spec.cwd.to_path_buf(),
                report: report_read,
            })
        }
    }
}

impl Launched {
    /// Waits until the exec has happened (`Ok`), or reaps the child and says
    /// why it could not start.
    pub fn exec_outcome(self) -> Result<(), String> {
        let mut message = [0u8; REPORT_LEN];
        let mut got = 0;
        while got < REPORT_LEN {
            let n = unsafe {
                libc::read(
                    self.report.as_raw_fd(),
                    message[got..].as_mut_ptr() as *mut libc::c_void,
                    REPORT_LEN - got,
                )
            };
            match n {
                0 => break,
                n if n > 0 => got += n as usize,
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                    continue
                }
                _ => break,
            }
        }
        if got == 0 {
            return Ok(());
        }
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
        let errno = libc::c_int::from_ne_bytes(message[1..].try_into().unwrap_or_default());
        let error = std::io::Error::from_raw_os_error(errno);
        Err(match message[0] {
            STEP_CWD => format!("working directory `{}`: {error}", self.cwd.display()),
            STEP_STDIO => format!("cannot set up the output of `{}`: {error}", self.program),
            _ => describe_spawn_error(&self.program, &error),
        })
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

    /// Launches and waits for the child's exit; returns the exec outcome and the exit code.
    fn run(argv: &[&str], cwd: &Path, set: &[(&str, &str)], remove: &[&str]) -> Result<i32, String> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
        let launched = launch(&LaunchSpec {
            argv: &argv,
            cwd,
            set: set.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            remove,
            output: null.as_raw_fd(),
        })?;
        let pid = launched.pid;
        launched.exec_outcome()?;
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        Ok(libc::WEXITSTATUS(status))
    }

    #[test]
    fn the_child_gets_its_cwd_environment_and_own_process_group() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("PROC_MANAGER_LAUNCH_TEST_DROP", "1");
        let code = run(
            &["sh", "-c", r#"echo "$PWD $ADDED ${PROC_MANAGER_LAUNCH_TEST_DROP:-dropped} $(ps -o pgid= -p $$ | tr -d ' ') $$" > seen"#],
            dir.path(),
            &[("ADDED", "yes")],
            &["PROC_MANAGER_LAUNCH_TEST_DROP"],
        );
        assert_eq!(code, Ok(0));
        let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
        let fields: Vec<&str> = seen.split_whitespace().collect();
        assert_eq!(fields[..3], [dir.path().to_str().unwrap(), "yes", "dropped"]);
        assert_eq!(fields[3], fields[4], "the child leads its own process group");
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
        assert_eq!(denied, "cannot start `./not-executable`: permission denied (is it executable?)");
        let path = dir.path().to_str().unwrap().to_string();
        let denied_in_path = run(&["not-executable"], dir.path(), &[("PATH", &path)], &[]).unwrap_err();
        assert_eq!(denied_in_path, "cannot start `not-executable`: permission denied (is it executable?)");
        let absent = run(&["/no/such/program"], dir.path(), &[], &[]).unwrap_err();
        assert_eq!(absent, "cannot start `/no/such/program`: no such file");
        let gone = dir.path().join("gone");
        let bad_cwd = run(&["true"], &gone, &[], &[]).unwrap_err();
        assert!(bad_cwd.starts_with(&format!("working directory `{}`: ", gone.display())), "{bad_cwd}");
    }
}
