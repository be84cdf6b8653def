//! The core as each call reaches it: the `Context` loaded (with the run-bg
//! binary as its runner), the core's errors as JS errors and its results as
//! JS values.

use crate::binary::supervisor_exe;
use napi::bindgen_prelude::*;
use proc_manager_core::model::text::visible;
use proc_manager_core::verbs::context::Context;
use serde::Serialize;

/// A call's failure on its way to JS. The core's error keeps its kind until
/// `api` makes the JS error, whose `code` says that kind: a caller tells an
/// unknown job from a bad option by `code`, not by parsing the message.
pub(crate) enum Failure {
    Core(proc_manager_core::Error),
    Napi(napi::Error),
}

impl From<proc_manager_core::Error> for Failure {
    fn from(error: proc_manager_core::Error) -> Failure {
        Failure::Core(error)
    }
}

impl From<napi::Error> for Failure {
    fn from(error: napi::Error) -> Failure {
        Failure::Napi(error)
    }
}

/// What the calls' bodies return: `?` takes the core's errors and napi's alike.
pub(crate) type Outcome<T> = std::result::Result<T, Failure>;

/// The body of an exported call, its failure made the JS error it throws
/// (or, in `rejecting`, rejects with).
pub(crate) fn api<T>(env: &Env, body: impl FnOnce() -> Outcome<T>) -> Result<T> {
    body().map_err(|failure| failure.into_js(env))
}

/// The `code` of the JS error for each kind of the core's errors (documented
/// in docs/js-api.md and index.d.ts's `ProcManagerError`).
fn error_code(error: &proc_manager_core::Error) -> &'static str {
    use proc_manager_core::Error;
    match error {
        Error::Usage(_) => "ERR_USAGE",
        Error::UnknownJob(_) => "ERR_UNKNOWN_JOB",
        Error::StartFailed { .. } => "ERR_START_FAILED",
        Error::Skipped { .. } => "ERR_SKIPPED",
        Error::Config { .. } => "ERR_CONFIG",
        Error::Io { .. } => "ERR_IO",
        Error::DiskFull { .. } => "ERR_DISK_FULL",
        Error::Busy(_) => "ERR_BUSY",
        Error::Other(_) => "ERR_FAILED",
    }
}

/// napi's own refusals of an argument's type, and ours (js_args.rs,
/// js_serde.rs: `InvalidArg`), are the caller's mistake: `ERR_USAGE`.
fn is_usage(status: Status) -> bool {
    matches!(
        status,
        Status::InvalidArg
            | Status::ObjectExpected
            | Status::StringExpected
            | Status::NameExpected
            | Status::FunctionExpected
            | Status::NumberExpected
            | Status::BooleanExpected
            | Status::ArrayExpected
            | Status::BigintExpected
            | Status::DateExpected
    )
}

impl Failure {
    /// The JS error: an `Error` with the message, `code` and, where the
    /// failure is about one job, its `jobId`. A napi error that is not about
    /// an argument (made in JS already, as an `AbortError` is) goes as it is.
    pub(crate) fn into_js(self, env: &Env) -> napi::Error {
        match self {
            Failure::Core(error) => Said::of(&error).into_js(env),
            Failure::Napi(error) if is_usage(error.status) => coded_error(env, "ERR_USAGE", &error.reason, None),
            Failure::Napi(error) => error,
        }
    }

    /// The message alone, for a failure said inside another one.
    pub(crate) fn message(&self) -> String {
        match self {
            Failure::Core(error) => Said::of(error).message,
            Failure::Napi(error) => error.reason.clone(),
        }
    }
}

/// What a JS error says of one of the core's errors: kept as data where the
/// error is made later, on the JS thread (a stream's failed `next()`).
#[derive(Clone)]
pub struct Said {
    pub code: &'static str,
    pub message: String,
    pub job_id: Option<String>,
}

impl Said {
    pub(crate) fn of(error: &proc_manager_core::Error) -> Said {
        use proc_manager_core::Error;
        let job_id = match error {
            Error::UnknownJob(id) => Some(id.clone()),
            Error::StartFailed { job_id, .. } | Error::Skipped { job_id, .. } => Some(job_id.clone()),
            _ => None,
        };
        let message = match error {
            Error::StartFailed { job_id, message } => format!("{message} (recorded as failed job {job_id})"),
            // Only a usage error names options, and only there is every
            // `--flag` the core writes one.
            Error::Usage(message) => in_js_words(message),
            other => other.to_string(),
        };
        let message = js_calls(&message);
        // Error messages quote user input (a path, an id, a label): written
        // out so that whoever prints them prints no control characters.
        Said { code: error_code(error), message: visible(&message).into_owned(), job_id }
    }

    pub(crate) fn into_js(self, env: &Env) -> napi::Error {
        coded_error(env, self.code, &self.message, self.job_id.as_deref())
    }
}

/// The core's usage errors name options as the CLI spells them (`--grep`,
/// `--after-any`, `--ready-port`); a JS caller gave them by their JS names
/// (`grep`, `afterAny`, `readyPort`), and is told those. Only outside
/// backticks: they quote the caller's own text and commands to run
/// (`run-bg list --all`, which `js_calls` turns into calls).
fn in_js_words(message: &str) -> String {
    let names = js_option_names();
    let mut said = String::with_capacity(message.len());
    for (i, part) in message.split('`').enumerate() {
        if i > 0 {
            said.push('`');
        }
        if i % 2 == 1 {
            said.push_str(part);
            continue;
        }
        let mut rest = part;
        while let Some(at) = rest.find("--") {
            // A flag starts a word (`give --after`, `(--grep`); a `--` inside
            // one (a path `a--b`) is no flag.
            let starts_word = rest[..at].chars().next_back().is_none_or(|c| c.is_whitespace() || c == '(');
            said.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let flag_len = after.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')).unwrap_or(after.len());
            match names.get(&after[..flag_len]).filter(|_| starts_word) {
                Some(name) => said.push_str(name),
                None => said.push_str(&rest[at..at + 2 + flag_len]),
            }
            rest = &after[flag_len..];
        }
        said.push_str(rest);
    }
    // With `args`, `command` is the program: there is no `--` to put it after.
    said.replace("to run after `--`", "to run as command")
}

/// The core's errors say what to run next as a shell user types it (`run
/// `run-bg list --all``, `` `run-bg kill <id>` ``); a JS caller is told the
/// call instead (`listJobs({ all: true })`, `killJob('<id>')`). A command
/// without a call of its own stays as it is.
fn js_calls(message: &str) -> String {
    let mut said = String::with_capacity(message.len());
    for (i, part) in message.split('`').enumerate() {
        if i > 0 {
            said.push('`');
        }
        let call = (i % 2 == 1).then(|| js_call(part)).flatten();
        match call {
            Some(call) => {
                // "run `…`" reads "call `…`".
                if said.ends_with("run `") {
                    said.truncate(said.len() - "run `".len());
                    said.push_str("call `");
                }
                said.push_str(&call);
            }
            None => said.push_str(part),
        }
    }
    said
}

/// The JS call for one CLI command, if it has one.
fn js_call(command: &str) -> Option<String> {
    let words: Vec<&str> = command.strip_prefix("run-bg ")?.split(' ').collect();
    let by_id = |function: &str| match words.as_slice() {
        [_, id] if !id.starts_with('-') => Some(format!("{function}('{id}')")),
        _ => None,
    };
    match words.as_slice() {
        ["list", "--all"] => Some("listJobs({ all: true })".to_string()),
        ["list"] => Some("listJobs()".to_string()),
        ["prune"] => Some("pruneJobs()".to_string()),
        ["reconcile"] => Some("reconcile()".to_string()),
        ["kill", ..] => by_id("killJob"),
        ["check", ..] => by_id("checkJob"),
        ["wait", ..] => by_id("waitJob"),
        ["pause", ..] => by_id("pauseJob"),
        ["resume", ..] => by_id("resumeJob"),
        ["rerun", ..] => by_id("rerunJob"),
        _ => None,
    }
}

/// Every option of the JS API by its CLI spelling without the dashes
/// (`after-any` → `afterAny`), from the core's schemas of the options.
fn js_option_names() -> &'static std::collections::HashMap<String, String> {
    static NAMES: std::sync::OnceLock<std::collections::HashMap<String, String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let start = proc_manager_core::verbs::start_options::schema();
        let verbs = proc_manager_core::verbs::verb_options::schema();
        let properties = std::iter::once(&start)
            .chain(verbs.as_object().into_iter().flat_map(|by_verb| by_verb.values()))
            .filter_map(|schema| schema.get("properties")?.as_object())
            .flat_map(|properties| properties.keys());
        properties.map(|name| (kebab(name), name.clone())).collect()
    })
}

/// `afterAny` → `after-any`, as clap spells a field's flag.
fn kebab(name: &str) -> String {
    let mut flag = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            flag.push('-');
            flag.push(c.to_ascii_lowercase());
        } else {
            flag.push(c);
        }
    }
    flag
}

/// A JS `Error` with `message`, `code` and `jobId` (when given). Should JS
/// refuse to make it, the refusal is thrown instead.
pub(crate) fn coded_error(env: &Env, code: &str, message: &str, job_id: Option<&str>) -> napi::Error {
    let made = env.create_error(napi::Error::from_reason(message)).and_then(|mut error| {
        error.set_named_property("code", code)?;
        if let Some(job_id) = job_id {
            error.set_named_property("jobId", job_id)?;
        }
        Ok(napi::Error::from(error.to_unknown()))
    });
    made.unwrap_or_else(|refused| refused)
}

pub(crate) fn context() -> Outcome<Context> {
    Ok(with_runner(Context::load()?))
}

/// See `Context::load_for_kill`: a broken config.json never blocks a kill.
pub(crate) fn context_for_kill() -> Outcome<Context> {
    Ok(with_runner(Context::load_for_kill()?))
}

fn with_runner(context: Context) -> Context {
    // Without the binary the API still reads jobs; starting one reports the problem.
    match supervisor_exe() {
        Ok(exe) => context.with_runner(exe),
        Err(_) => context,
    }
}

/// Every result reaches JS as the core's `present` shape, serialized once
/// (napi's serde-json support turns the value into JS objects): the same
/// fields, names and values `run-bg --json` prints. A field without a value
/// is left out, so it reads `undefined`.
pub(crate) fn shape<T: Serialize>(view: &T) -> Result<serde_json::Value> {
    serde_json::to_value(view).map_err(|e| napi::Error::from_reason(format!("cannot convert a result to JS: {e}")))
}

/// A conversion that failed on the worker thread, said as the core's errors are.
pub(crate) fn napi_to_core(e: napi::Error) -> proc_manager_core::Error {
    proc_manager_core::Error::Other(e.reason.clone())
}
