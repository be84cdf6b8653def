//! Running one notification hook (`notify.hooks`): a shell command with the
//! event on stdin, bounded by a timeout, its output kept beside the job.

use crate::model::duration::format_duration_ms;
use crate::model::job::{HookRun, Job};
use crate::store::paths::Home;
use std::io::Write;
use crate::os::sys::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Runs one hook with `/bin/sh -c`: the event JSON on stdin, `RUN_BG_*` in
/// its environment, output appended to `hooks.log` in the job's directory,
/// reached through the home this process holds (never by the home's name,
/// which may lead elsewhere by now). Killed (its whole group) after
/// `timeout`; its failure is recorded, not fatal.
pub fn run_hook(home: &Home, command: &str, event: &[u8], job: &Job, message: &str, timeout: Duration) -> HookRun {
    let started = Instant::now();
    let finish = |exit_code: Option<i32>, error: Option<String>| HookRun {
        command: command.to_string(),
        exit_code,
        error,
        duration_ms: started.elapsed().as_millis() as u64,
        event_id: Some(job.event_id()),
    };
    let log_dir = home.job_dir(&job.id);
    let output = crate::store::paths::options_nofollow()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log_dir.join("hooks.log"))
        .ok();
    let (stdout, stderr) = match output.as_ref().and_then(|f| Some((f.try_clone().ok()?, f.try_clone().ok()?))) {
        Some((a, b)) => (Stdio::from(a), Stdio::from(b)),
        None => (Stdio::null(), Stdio::null()),
    };
    let cwd = if Path::new(&job.cwd).is_dir() { PathBuf::from(&job.cwd) } else { std::env::temp_dir() };
    let spawned = crate::os::sys::hook_command(command)
        .current_dir(cwd)
        .env("RUN_BG_JOB_ID", &job.id)
        .env("RUN_BG_LABEL", &job.label)
        .env("RUN_BG_STATUS", job.status().as_str())
        .env("RUN_BG_EXIT_CODE", job.exit_code().map(|c| c.to_string()).unwrap_or_default())
        .env("RUN_BG_LOG", &job.log_path)
        .env("RUN_BG_MESSAGE", message)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return finish(None, Some(format!("could not start {}: {e}", crate::os::sys::HOOK_SHELL))),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let event = event.to_vec();
        // A hook that never reads its stdin must not block us: write from a thread.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&event);
        });
    }
    let deadline = started + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return match (status.code(), crate::os::sys::exit_signal(&status)) {
                    (Some(0), _) => finish(Some(0), None),
                    (Some(code), _) => finish(Some(code), Some(format!("exited {code}"))),
                    (None, Some(signal)) => {
                        finish(None, Some(format!("died of {}", crate::model::job::signal_name(signal))))
                    }
                    _ => finish(None, Some("ended without a status".into())),
                };
            }
            Ok(None) if Instant::now() >= deadline => {
                crate::os::sys::kill_hook(&mut child);
                let _ = child.wait();
                return finish(None, Some(format!("timed out after {}", format_duration_ms(timeout.as_millis() as u64))));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return finish(None, Some(format!("cannot wait for it: {e}"))),
        }
    }
}
