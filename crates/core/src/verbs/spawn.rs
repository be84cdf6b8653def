//! The caller's side of starting a job: validate, allocate an id, hand the
//! job to a fresh supervisor and wait for its ready line.

use crate::model::ids::{id_prefix_from_label, random_suffix};
use crate::model::error::HandOffError;
use crate::model::job::{Job, JobState};
use crate::verbs::ops::Context;
use crate::store::registry::Patience;
use crate::os::launch::without_sigpipe;
use crate::model::protocol::{parse_ready_line, JOB_COOKIE, SUPERVISE, SUPERVISOR_MARK};
use crate::supervise::start::SupervisorSpec;
use crate::model::text::visible;
use crate::{now_ms, Error, Result};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    /// The argv to execute; `argv[0]` is looked up in PATH. Any bytes but NUL.
    pub argv: Vec<OsString>,
    /// How the command is shown (the shell line for shell commands).
    pub display: Option<String>,
    pub label: Option<String>,
    pub cwd: Option<PathBuf>,
    /// Names are text; values any bytes but NUL.
    pub env: BTreeMap<String, OsString>,
    pub owner: Option<String>,
    pub context: Option<serde_json::Value>,
    pub timeout_ms: Option<u64>,
    pub notify: bool,
    pub on_exit: Option<String>,
    /// Readiness check (`--ready-log/-port/-url/-timeout`) and `--notify-on` patterns.
    pub ready: Option<crate::model::job::Readiness>,
    pub notify_on: Vec<String>,
    /// `--restart`: restart the main process when it ends (see `Restart`).
    pub restart: Option<RestartRequest>,
    /// `--stdin pipe`: a pipe `send` writes to, instead of /dev/null.
    pub stdin_pipe: bool,
    /// `--wake`: a one-off rule for this job, registered with the interrupt service at its start.
    pub wake: Option<crate::model::job::Wake>,
    /// Start later: in this queue (`--queue`; else the `default` queue when
    /// configured), by `priority`, after these jobs (`--after`, `--after-any`).
    pub queue: Option<String>,
    pub priority: i64,
    pub after: Vec<String>,
    pub after_any: bool,
    /// Kill the job's tree when this process ends (`--tie`, `--tie-pid`).
    pub tie_pid: Option<u32>,
    /// `tie_pid` is the caller itself (`--tie`, `tie: true`), not a process
    /// named by pid: what the recorded reason calls it.
    pub tie_to_caller: bool,
    /// `--nice`: the niceness its main process starts at.
    pub nice: Option<i32>,
}

/// `--restart <policy> [--max-restarts N] [--restart-delay <dur>]`.
#[derive(Debug, Clone, Copy)]
pub struct RestartRequest {
    pub policy: crate::model::job::RestartPolicy,
    /// Default `DEFAULT_MAX_RESTARTS`.
    pub max_restarts: Option<u32>,
    /// Default `DEFAULT_RESTART_DELAY_MS`.
    pub delay_ms: Option<u64>,
}

/// Restarts in a row before a job gives up, unless `--max-restarts` says.
pub const DEFAULT_MAX_RESTARTS: u32 = 10;
/// The first restart's delay, unless `--restart-delay` says.
pub const DEFAULT_RESTART_DELAY_MS: u64 = 1000;

impl StartRequest {
    /// `command` run by `/bin/sh -c`, as the JS API does without `args`.
    pub fn shell(command: &str) -> StartRequest {
        StartRequest {
            argv: vec!["/bin/sh".into(), "-c".into(), command.into()],
            display: Some(command.to_string()),
            notify: true,
            ..Default::default()
        }
    }

    pub fn program(argv: Vec<OsString>) -> StartRequest {
        StartRequest { argv, notify: true, ..Default::default() }
    }
}

#[derive(Debug, Clone)]
pub struct Started {
    pub job_id: String,
    /// `None` while the job waits in its queue.
    pub pid: Option<u32>,
    pub log_path: PathBuf,
    pub label: String,
    pub command: String,
    /// Said about the request without refusing it (a wake template's unknown keys).
    pub warnings: Vec<String>,
    /// Where it waits, when it did not start at once.
    pub queued: Option<crate::verbs::queue::QueuedPlace>,
}

/// Quotes an argv for display the way a shell user would type it; an
/// argument that is no UTF-8 as bash's `$'caf\xe9'`, which types its bytes.
pub fn display_argv(argv: &[OsString]) -> String {
    argv.iter()
        .map(|arg| {
            let Some(arg) = arg.to_str() else { return ansi_c_quoted(arg.as_bytes()) };
            let plain = !arg.is_empty()
                && arg.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
            if plain { arg.to_string() } else { format!("'{}'", arg.replace('\'', "'\\''")) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `$'…'`: UTF-8 characters as they are, other bytes as `\xNN`.
fn ansi_c_quoted(bytes: &[u8]) -> String {
    let mut out = String::from("$'");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' | '\'' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('\'');
    out
}

fn default_label(request: &StartRequest) -> String {
    let word = match &request.display {
        Some(line) => line.split_whitespace().next().unwrap_or("job").to_string(),
        None => crate::model::os_text::escaped(&request.argv[0]).into_owned(),
    };
    Path::new(&word).file_name().and_then(|n| n.to_str()).unwrap_or("job").to_string()
}

pub fn validate_env_key(key: &str) -> Result<()> {
    if key.is_empty() || key.contains('=') || key.contains('\0') {
        return Err(Error::Usage(format!(
            "bad environment variable name `{key}`: expected a non-empty name without `=` (KEY=VALUE)"
        )));
    }
    Ok(())
}

/// Parses one `--env KEY=VALUE`: the name is text, the value any bytes.
pub fn parse_env_assignment(assignment: &OsStr) -> Result<(String, OsString)> {
    let bytes = assignment.as_bytes();
    let shown = || crate::model::os_text::escaped(assignment);
    match bytes.iter().position(|&b| b == b'=') {
        Some(at) if at > 0 => {
            let key = std::str::from_utf8(&bytes[..at]).map_err(|_| {
                Error::Usage(format!(
                    "bad --env `{}`: the name is not UTF-8 text; names are text (the value may be any bytes)",
                    shown()
                ))
            })?;
            validate_env_key(key)?;
            let value = &bytes[at + 1..];
            if value.contains(&0) {
                return Err(Error::Usage(format!("bad --env `{key}`: the value contains a NUL byte")));
            }
            Ok((key.to_string(), OsString::from_vec(value.to_vec())))
        }
        _ => Err(Error::Usage(format!("bad --env `{}`: expected KEY=VALUE, e.g. --env NODE_ENV=test", shown()))),
    }
}

/// A label or owner: a name shown on one line, so no control characters
/// (an escape code in it would act on every terminal that lists the job).
fn validate_name(what: &str, value: &str) -> Result<()> {
    let shown = || {
        let cut: String = value.chars().take(60).collect();
        let more = if value.chars().count() > 60 { "…" } else { "" };
        format!("\"{}{more}\"", visible(&cut).replace('\n', "\\x0a"))
    };
    const ACCEPTED: &str = "give 1 to 200 printable characters on one line";
    if value.chars().any(char::is_control) {
        return Err(Error::Usage(format!("bad {what} {}: it contains control characters; {ACCEPTED}", shown())));
    }
    if value.trim().is_empty() || value.chars().count() > 200 {
        return Err(Error::Usage(format!("bad {what} {}: {ACCEPTED}", shown())));
    }
    Ok(())
}

fn validate(request: &StartRequest) -> Result<()> {
    match request.argv.first() {
        None => {
            return Err(Error::Usage(
                "no command given: put the program and its arguments after `--`, e.g. run-bg -- npm install".into(),
            ))
        }
        Some(program) if program.to_str().is_some_and(|p| p.trim().is_empty()) => {
            return Err(Error::Usage("empty program name: give the program to run after `--`".into()))
        }
        _ => {}
    }
    if request.argv.iter().any(|a| a.as_bytes().contains(&0)) {
        return Err(Error::Usage("the command contains a NUL byte".into()));
    }
    for (key, value) in &request.env {
        validate_env_key(key)?;
        if value.as_bytes().contains(&0) {
            return Err(Error::Usage(format!("bad env `{key}`: the value contains a NUL byte")));
        }
    }
    if let Some(label) = &request.label {
        validate_name("label", label)?;
    }
    if let Some(owner) = &request.owner {
        validate_name("owner", owner)?;
    }
    // Every registry write carries these: keep them small enough not to slow it.
    let env_bytes: usize = request.env.iter().map(|(k, v)| k.len() + v.len()).sum();
    if env_bytes > 64 * 1024 {
        return Err(Error::Usage(format!("too much extra environment ({env_bytes} bytes); at most 64 KiB")));
    }
    if let Some(context) = &request.context {
        let size = context.to_string().len();
        if size > 64 * 1024 {
            return Err(Error::Usage(format!("context too large ({size} bytes of JSON); at most 64 KiB")));
        }
    }
    if request.timeout_ms == Some(0) {
        return Err(Error::Usage("bad timeout: it must be greater than zero".into()));
    }
    crate::supervise::ready::validate(request.ready.as_ref(), &request.notify_on)?;
    Ok(())
}

/// Starts a job under its own supervisor and returns once its main process
/// runs, or with the reason it could not start (then recorded as `failed`).
pub fn start_job(context: &Context, request: StartRequest, supervisor_exe: &Path) -> Result<Started> {
    context.home.require_safe_parents()?;
    validate(&request)?;
    let warnings = validate_wake(context, &request)?;
    let cwd = match &request.cwd {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?.join(dir),
        None => std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?,
    };
    let tie = request.tie_pid.map(|pid| crate::supervise::tie::tie_to(pid, request.tie_to_caller)).transpose()?;
    let label = request.label.clone().unwrap_or_else(|| default_label(&request));
    let waits = crate::verbs::queue::waits_for_request(context, &request)?;
    let job_id = allocate_job_dir(context, &label)?;
    let log_path = context.home.log_path(&job_id);
    let command = request.display.clone().unwrap_or_else(|| display_argv(&request.argv));
    let job = Job {
        id: job_id.clone(),
        label: label.clone(),
        argv: request.argv,
        command: command.clone(),
        cwd,
        env: request.env,
        owner: request.owner,
        context: request.context,
        state: JobState::Running,
        note: None,
        main: None,
        supervisor: None,
        started_at: now_ms(),
        timeout_ms: request.timeout_ms,
        notify: request.notify,
        on_exit: request.on_exit,
        log_path,
        notification: None,
        hooks: Vec::new(),
        peak_rss_kb: None,
        seen_at: None,
        ready: request.ready,
        ready_at: None,
        ready_blocked: None,
        notify_on: request.notify_on,
        restart: request.restart.map(|r| crate::model::job::Restart {
            policy: r.policy,
            max_restarts: r.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS),
            delay_ms: r.delay_ms.unwrap_or(DEFAULT_RESTART_DELAY_MS),
            count: 0,
            last_reason: None,
            last_at: None,
        }),
        stdin_pipe: request.stdin_pipe,
        wake: request.wake,
        waits: None,
        tie,
        nice: request.nice,
    };
    if let Some(waits) = waits {
        return crate::verbs::queue::enqueue(context, job, waits, supervisor_exe).map(|started| Started { warnings, ..started });
    }
    let spec = SupervisorSpec {
        home: context.home.root.clone(),
        job: job.clone(),
        config: context.config.clone(),
    };
    match run_supervisor(context, &spec, supervisor_exe, None) {
        Ok(pid) => Ok(Started { job_id, pid: Some(pid), log_path: job.log_path, label, command, warnings, queued: None }),
        Err(error) => {
            let message = error.to_string();
            // The supervisor records its own start failures (in the job's
            // job.json at least); cover the case where it could not, or died
            // before it could.
            let registry = context.registry();
            if registry.get(&job_id).is_ok() {
                return Err(Error::StartFailed { job_id, message });
            }
            let mut failed = job;
            failed.state = JobState::FailedToStart { error: message.clone(), ended_at: now_ms() };
            match registry.write_job_file(&failed, false) {
                Ok(()) => {
                    let _ = registry.register(&failed, Patience::Brief);
                    Err(Error::StartFailed { job_id, message })
                }
                Err(e) => {
                    // Nothing could be kept (a full disk): leave nothing behind either.
                    let _ = std::fs::remove_dir_all(context.home.job_dir(&job_id));
                    // The supervisor's message says so already when recording was what failed.
                    let message = if message.contains("record the job") {
                        message
                    } else {
                        format!("{message}; the job was not recorded: {e}")
                    };
                    Err(Error::Other(message))
                }
            }
        }
    }
}

/// A wake rule is only of use with an exit notification to match it: without
/// one (`--no-notify`, or no interrupt service configured) it is refused, not
/// registered to wait for an event that never comes. Its template's unknown
/// keys are only warned about: the service leaves them as written.
fn validate_wake(context: &Context, request: &StartRequest) -> Result<Vec<String>> {
    let Some(wake) = &request.wake else { return Ok(Vec::new()) };
    if !request.notify {
        return Err(Error::Usage(
            "a wake rule (--wake, JS `wake`) is matched by the job's exit notification, which --no-notify (`notify: false`) turns off: drop one of them".into(),
        ));
    }
    if context.config.notify.url.is_none() {
        return Err(Error::Usage(
            "a wake rule (--wake, JS `wake`) is registered with the interrupt service, and none is configured: notify.url is null in config.json; set it to the service's /trigger address".into(),
        ));
    }
    if wake.message.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(Error::Usage("empty wake message: give the text to wake the agent with ({{jobId}}, {{status}}, … are filled in), or leave it out for the event's own message".into()));
    }
    Ok(wake.message.as_deref().and_then(crate::supervise::wake::template_warning).into_iter().collect())
}

fn allocate_job_dir(context: &Context, label: &str) -> Result<String> {
    let prefix = id_prefix_from_label(label);
    let mut last_error = None;
    for _ in 0..16 {
        let id = format!("{prefix}-{}", random_suffix());
        let dir = context.home.job_dir(&id);
        // Exclusive creation makes the id unique even among concurrent callers.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(id),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => last_error = Some(context.home.explain(Error::io("create job directory", dir, e))),
        }
    }
    Err(last_error.unwrap_or_else(|| Error::Other("could not find a free job id after 16 tries".into())))
}

/// Hands a queued job to a fresh supervisor, in the environment its
/// submitter had (`environ`, from its spec.json); returns the main pid.
pub(crate) fn launch_queued(
    context: &Context,
    spec: &SupervisorSpec,
    exe: &Path,
    environ: &[(std::ffi::OsString, std::ffi::OsString)],
) -> std::result::Result<u32, HandOffError> {
    run_supervisor(context, spec, exe, Some(environ))
}

/// `environ`: the supervisor's whole environment (a queued job's
/// submitter's); `None`: ours.
fn run_supervisor(
    context: &Context,
    spec: &SupervisorSpec,
    exe: &Path,
    environ: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) -> std::result::Result<u32, HandOffError> {
    let job_dir = context.home.job_dir(&spec.job.id);
    let stderr = crate::store::paths::options_nofollow()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(job_dir.join("supervisor.log"))
        .map(Stdio::from)
        .unwrap_or_else(|_| Stdio::null());
    let mut command = Command::new(exe);
    if let Some(environ) = environ {
        command.env_clear().envs(environ.iter().map(|(k, v)| (k, v)));
    }
    let mut child = command
        .arg(SUPERVISE)
        .arg(&spec.job.id)
        // Started from inside another job, the supervisor is not part of it.
        .env_remove(JOB_COOKIE)
        .env(SUPERVISOR_MARK, &spec.job.id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|source| HandOffError::CannotStart { exe: exe.to_path_buf(), source })?;
    // While the supervisor starts up; it makes the pipe itself if this fails.
    let _ = crate::supervise::outpipe::make(&job_dir);
    let payload = serde_json::to_vec(spec).map_err(|e| HandOffError::Encode(e.to_string()))?;
    // A supervisor that died before reading (a binary that cannot run here)
    // must not take the caller down with SIGPIPE: the write fails instead.
    let write_result = child.stdin.take().map(|mut stdin| without_sigpipe(|| stdin.write_all(&payload)));
    let mut ready = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut ready);
    }
    // The intermediate process exits right after forking the real supervisor.
    let status = child.wait();
    if let Some(Err(e)) = write_result {
        if ready.is_empty() {
            let log = job_dir.join("supervisor.log");
            return Err(HandOffError::CannotHandOver(exited_unread(e, status, &log, &context.home.shown(&log))));
        }
    }
    parse_ready_line(ready.lines().next().unwrap_or(""))
}

/// A hand-off write that failed because the supervisor was gone (EPIPE):
/// says so, how it ended, and what it wrote on its way out, rather than
/// "Broken pipe".
/// `log` is read as this process reaches it; `shown` is how the user knows it
/// (a supervisor handing a queued job on reaches its home by a relative path).
fn exited_unread(error: std::io::Error, status: std::io::Result<std::process::ExitStatus>, log: &Path, shown: &Path) -> std::io::Error {
    if error.kind() != std::io::ErrorKind::BrokenPipe {
        return error;
    }
    let how = status.map_or_else(|e| format!("cannot tell how: {e}"), |s| s.to_string());
    let said = std::fs::read_to_string(log)
        .ok()
        .and_then(|text| text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| format!("; it said: {}", l.trim())))
        .unwrap_or_default();
    std::io::Error::new(
        error.kind(),
        format!("it exited before reading the job ({how}){said}; its errors go to {}", shown.display()),
    )
}

/// Runs `run-bg <args>` in the background with the given home; the program
/// detaches itself at once (`os::fork::detach`), so the wait here is short
/// and leaves no zombie behind.
pub fn spawn_detached(runner: &Path, home: &crate::store::paths::Home, args: &[String]) -> std::io::Result<()> {
    spawn_detached_with_stdin(runner, home, args, Stdio::null())
}

/// As `spawn_detached`, handing the program `stdin` (an orphan's watcher gets
/// the job's output pipe, so what waits in it outlives the job's processes).
pub fn spawn_detached_with_stdin(
    runner: &Path,
    home: &crate::store::paths::Home,
    args: &[String],
    stdin: Stdio,
) -> std::io::Result<()> {
    let mut child = Command::new(runner)
        .args(args)
        .env("PROC_MANAGER_HOME", &home.root)
        .env_remove(JOB_COOKIE)
        .env(SUPERVISOR_MARK, "helper")
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    child.wait().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn plain_words_are_shown_as_they_are() {
        assert_eq!(display_argv(&argv(&["npm", "run", "build"])), "npm run build");
        assert_eq!(
            display_argv(&argv(&["./x.sh", "--out=/tmp/a_b", "user@host:22", "50%", "a+b,c"])),
            "./x.sh --out=/tmp/a_b user@host:22 50% a+b,c"
        );
    }

    #[test]
    fn words_a_shell_would_split_or_expand_are_quoted() {
        assert_eq!(display_argv(&argv(&["sh", "-c", "echo hi; exit 3"])), "sh -c 'echo hi; exit 3'");
        assert_eq!(display_argv(&argv(&["echo", "$HOME", "*", "a|b", "~"])), "echo '$HOME' '*' 'a|b' '~'");
        assert_eq!(display_argv(&argv(&["printf", ""])), "printf ''", "an empty argument stays visible");
        assert_eq!(display_argv(&argv(&["echo", "naïve"])), "echo 'naïve'");
    }

    #[test]
    fn a_single_quote_inside_a_word_is_closed_escaped_and_reopened() {
        assert_eq!(display_argv(&argv(&["echo", "it's"])), r"echo 'it'\''s'");
        assert_eq!(display_argv(&argv(&["'"])), r"''\'''");
    }

    #[test]
    fn an_argument_that_is_no_utf8_is_shown_as_bash_would_type_its_bytes() {
        let latin1 = OsString::from_vec(b"caf\xe9 d'it\\".to_vec());
        assert_eq!(display_argv(&[OsString::from("ls"), latin1]), r"ls $'caf\xe9 d\'it\\'");
        let label = default_label(&StartRequest::program(vec![OsString::from_vec(b"/bin/caf\xe9".to_vec())]));
        assert_eq!(label, r"caf\xe9");
    }

    #[test]
    fn no_argv_shows_as_nothing() {
        assert_eq!(display_argv(&[]), "");
    }

    #[test]
    fn env_assignments_split_at_the_first_equals_sign() {
        let parse = |text: &str| parse_env_assignment(OsStr::new(text));
        assert_eq!(parse("NODE_ENV=test").unwrap(), ("NODE_ENV".into(), "test".into()));
        assert_eq!(parse("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert_eq!(parse("EMPTY=").unwrap(), ("EMPTY".into(), OsString::new()));
        for bad in ["NOEQUALS", "=value", ""] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(error.contains("expected KEY=VALUE"), "{bad:?}: {error}");
        }
        assert!(parse("K=a\0b").unwrap_err().to_string().contains("NUL"));
        let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
        assert_eq!(parse_env_assignment(&bytes(b"K=caf\xe9")).unwrap(), ("K".into(), bytes(b"caf\xe9")));
        let error = parse_env_assignment(&bytes(b"K\xe9=v")).unwrap_err().to_string();
        assert!(error.contains(r"`K\xe9=v`") && error.contains("name is not UTF-8"), "{error}");
    }

    #[test]
    fn the_default_label_is_the_program_name_without_its_directory() {
        assert_eq!(default_label(&StartRequest::program(argv(&["/usr/bin/python3", "x.py"]))), "python3");
        assert_eq!(default_label(&StartRequest::shell("  npm test && echo ok")), "npm");
        assert_eq!(default_label(&StartRequest::shell("./scripts/build.sh --fast")), "build.sh");
        assert_eq!(default_label(&StartRequest::shell("   ")), "job");
    }
}
