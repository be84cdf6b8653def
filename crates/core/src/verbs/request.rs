//! A start as the faces ask for it (`StartRequest`), its checks that need
//! nothing but the request, and what a start answers (`Started`).

use crate::model::text::visible;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use crate::model::os_text::{bytes_of, from_bytes};
use std::path::{Path, PathBuf};

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
    /// A job of `after` with a readiness check counts once ready (a stack's
    /// `after`; no flag of its own).
    pub after_ready: bool,
    /// Kill the job's tree when this process ends (`--tie`, `--tie-pid`).
    pub tie_pid: Option<u32>,
    /// `tie_pid` is the caller itself (`--tie`, `tie: true`), not a process
    /// named by pid: what the recorded reason calls it.
    pub tie_to_caller: bool,
    /// `--nice`: the niceness its main process starts at.
    pub nice: Option<i32>,
    /// `rerun`: the job this one starts again.
    pub rerun_of: Option<String>,
    /// `--session`: given, or none; else found at the start (`sessions::detect`).
    pub session: Option<crate::store::sessions::SessionChoice>,
    /// `--outlive-session`.
    pub outlive_session: bool,
    /// The caller exits once this start has answered and does not wait for
    /// the supervisor (the CLI's `run-bg -- …` without `--yield`): the
    /// supervisor then skips the fork that keeps a long-lived caller from
    /// holding a zombie, and stays its child (see `SupervisorSpec::stay_child`):
    /// the job runs one process hand-over sooner (on 2 loaded cores a CLI
    /// start reached the job's command about 3 ms sooner, medians of 100).
    /// Never for a caller that lives on (the addon's).
    pub caller_exits: bool,
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
    /// `command` run by the system's shell (`/bin/sh -c`; `cmd.exe /d /s /c`
    /// on Windows), as the JS API does without `args`.
    pub fn shell(command: &str) -> StartRequest {
        StartRequest {
            argv: crate::os::sys::shell_argv(command),
            display: Some(command.to_string()),
            notify: true,
            ..Default::default()
        }
    }

    pub fn program(argv: Vec<OsString>) -> StartRequest {
        StartRequest { argv, notify: true, ..Default::default() }
    }

    /// A command as the JS API and MCP give it: with `args`, the program
    /// and its argv (JS strings are text; the core takes any bytes); without,
    /// a shell line, which must say something.
    pub fn command_line(command: String, args: Option<Vec<String>>) -> crate::Result<StartRequest> {
        match args {
            Some(args) => Ok(StartRequest::program(std::iter::once(command).chain(args).map(OsString::from).collect())),
            None if command.trim().is_empty() => {
                Err(crate::Error::Usage("empty command: give the command line to run".into()))
            }
            None => Ok(StartRequest::shell(&command)),
        }
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
    pub queued: Option<QueuedPlace>,
}

/// Where a job that did not start at once waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPlace {
    /// 1: the next to start in its queue (or among jobs without a queue).
    pub position: usize,
    pub queue: Option<String>,
    /// The jobs it still waits for.
    pub after: Vec<String>,
}

/// Quotes an argv for display the way a shell user would type it; an
/// argument that is no UTF-8 as bash's `$'caf\xe9'`, which types its bytes.
pub fn display_argv(argv: &[OsString]) -> String {
    argv.iter()
        .map(|arg| {
            let Some(arg) = arg.to_str() else { return ansi_c_quoted(bytes_of(arg)) };
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

pub(crate) fn default_label(request: &StartRequest) -> String {
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
    let bytes = bytes_of(assignment);
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
            Ok((key.to_string(), from_bytes(value.to_vec())))
        }
        _ => Err(Error::Usage(format!("bad --env `{}`: expected KEY=VALUE, e.g. --env NODE_ENV=test", shown()))),
    }
}

/// A label or owner: a name shown on one line, so no control characters
/// (an escape code in it would act on every terminal that lists the job).
pub(crate) fn validate_name(what: &str, value: &str) -> Result<()> {
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

pub(crate) fn validate(request: &StartRequest) -> Result<()> {
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
    if request.argv.iter().any(|a| bytes_of(a).contains(&0)) {
        return Err(Error::Usage("the command contains a NUL byte".into()));
    }
    for (key, value) in &request.env {
        validate_env_key(key)?;
        if bytes_of(value).contains(&0) {
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

    // Unix arguments and values are bytes; Windows's are UTF-16 text.
    #[cfg(unix)]
    #[test]
    fn an_argument_that_is_no_utf8_is_shown_as_bash_would_type_its_bytes() {
        let latin1 = from_bytes(b"caf\xe9 d'it\\".to_vec());
        assert_eq!(display_argv(&[OsString::from("ls"), latin1]), r"ls $'caf\xe9 d\'it\\'");
        let label = default_label(&StartRequest::program(vec![from_bytes(b"/bin/caf\xe9".to_vec())]));
        assert_eq!(label, r"caf\xe9");
    }

    #[test]
    fn no_argv_shows_as_nothing() {
        assert_eq!(display_argv(&[]), "");
    }

    // Unix arguments and values are bytes; Windows's are UTF-16 text.
    #[cfg(unix)]
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
        let bytes = |b: &[u8]| from_bytes(b.to_vec());
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
