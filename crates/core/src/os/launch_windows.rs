//! A run of a job's main process on Windows, as os/launch.rs forks and
//! execs one on Unix: CreateProcess suspended, the process put in the job's
//! Job Object (so every process it starts is held there too), given
//! `--nice`'s priority class, then resumed.

use crate::model::job::{Job, ProcessIdentity};
use crate::model::protocol::{JOB_COOKIE, SUPERVISOR_MARK};
use crate::os::{procinfo, windows_job};
use std::os::windows::io::OwnedHandle;
use std::os::windows::process::CommandExt;

/// CREATE_SUSPENDED: the main process runs only once it is in the Job Object.
const CREATE_SUSPENDED: u32 = 0x0000_0004;
/// CREATE_NEW_PROCESS_GROUP: the main process leads a console process group,
/// the target of the kill's CTRL_BREAK_EVENT.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

/// Starts one run of the job's main process: suspended, put in the Job
/// Object, given `--nice`'s priority class, resumed, its stdout and stderr a
/// pipe of its own copied into the log, its stdin `stdin` (`--stdin pipe`)
/// or empty. Gives the process, its identity and the read end of its
/// output's pipe (for the supervisor to copy into the log); on a failure, why.
pub fn launch_run(job: &Job, job_object: &OwnedHandle, stdin: Option<&OwnedHandle>) -> Result<(std::process::Child, ProcessIdentity, std::io::PipeReader), String> {
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot create the output pipe: {e}"))?;
    let Some((program, args)) = job.argv.split_first() else { return Err("no command to run".into()) };
    let mut command = std::process::Command::new(program);
    match crate::os::sys::shell_command_line(&job.argv) {
        Some(line) => command.raw_arg(line),
        None => command.args(args),
    };
    command
        .current_dir(&job.cwd)
        .envs(job.env.iter())
        .env(JOB_COOKIE, &job.id)
        .env_remove(SUPERVISOR_MARK)
        .creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP);
    match stdin {
        Some(pipe) => command.stdin(pipe.try_clone().map_err(|e| format!("cannot share the stdin pipe: {e}"))?),
        None => command.stdin(std::process::Stdio::null()),
    };
    let second = writer.try_clone().map_err(|e| format!("cannot share the output pipe: {e}"))?;
    command.stdout(writer).stderr(second);
    // The job holds the pipe's read end too (inherited, then ours made
    // private again): should this supervisor die, the job's writes go on
    // into the pipe instead of failing, as Unix's named pipe the job
    // holds keeps them (a job that fills it then waits, still killable).
    let shared = crate::os::sys::set_inheritable(&reader, true);
    let main = command.spawn();
    if shared.is_ok() {
        let _ = crate::os::sys::set_inheritable(&reader, false);
    }
    // Our copies of the pipe's write end go with the command: the pipe
    // ends when the run's last process closes it.
    drop(command);
    let mut main = main.map_err(|e| crate::model::text::visible(&format!("cannot start {}: {e}", program.to_string_lossy())).into_owned())?;
    if let Err(e) = windows_job::assign(job_object, &main) {
        let _ = windows_job::terminate_job(job_object, 1);
        let _ = main.kill();
        return Err(format!("cannot put the job's process in its Job Object: {e}"));
    }
    // Before it first runs; what it starts gets the class as it joins the Job Object.
    if let Some(nice) = job.nice {
        let class = crate::os::nice_windows::priority_class(nice);
        if let Err(e) = crate::os::nice_windows::set_class(&main, class) {
            let _ = windows_job::terminate_job(job_object, 1);
            return Err(format!("cannot give the job --nice {nice} ({}): {e}", crate::os::nice_windows::class_name(class)));
        }
    }
    if let Err(e) = windows_job::resume(main.id()) {
        let _ = windows_job::terminate_job(job_object, 1);
        let _ = main.kill();
        return Err(format!("cannot start the job's process in its Job Object: {e}"));
    }
    // Our suspended child: its pid cannot have been reused yet, so its
    // identity is read now or the start fails (a made-up one would
    // never match, and the job would look ended while it runs).
    let Some(identity) = procinfo::identify_exactly(main.id()) else {
        let _ = windows_job::terminate_job(job_object, 1);
        return Err(format!("cannot read the identity of the job's process {}", main.id()));
    };
    Ok((main, identity, reader))
}
