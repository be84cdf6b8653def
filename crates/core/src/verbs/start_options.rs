//! The options of starting a job, defined once for every face: the CLI's
//! flags (clap derives them, feature `cli`), the JS options (serde reads
//! them), the MCP tool's input (the JSON Schema exported from this type,
//! feature `schema`) and index.d.ts's `RunOptions` (generated from that
//! schema). The rules between options are checked here, once, in `validate`.
//!
//! Each field carries its doc (the JSON faces': index.d.ts and the schema's
//! `description`), its CLI flag and help line, and its MCP line (`x-mcp`,
//! at most 80 characters) or why MCP leaves it out (`x-mcp-omit`).
//! What is not an option of the job stays with its face: the program and its
//! arguments, `--yield`/`yieldMs` and `signal`, `--json`.

use crate::model::job::{Readiness, RestartPolicy, WakeAction};
use crate::model::option_value::{read, FromText, Given, JsonData, Millis};
use crate::verbs::request::{parse_env_assignment, validate_env_key, RestartRequest, StartRequest};
use crate::{Error, Result};
use serde::Deserialize;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartOptions {
    /// Human name (default: the program's name).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", display_order = 1,
        help = "Human name for the job (default: the program's name)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Name in lists (default: program)")))]
    #[serde(default)]
    pub label: Option<String>,

    /// Working directory (default: the current one).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", display_order = 2,
        help = "Working directory (default: the current one)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Working dir (default: the server's)")))]
    #[serde(default, deserialize_with = "read::path")]
    pub cwd: Option<PathBuf>,

    /// Extra environment variables.
    #[cfg_attr(feature = "cli", arg(long = "env", value_name = "KEY=VALUE", display_order = 3,
        value_parser = clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), EnvVar::Assignment),
        help = "Extra environment variable, repeatable"))]
    #[cfg_attr(feature = "schema", schemars(with = "std::collections::BTreeMap<String, String>",
        extend("x-mcp" = "Extra env (default none)")))]
    #[serde(default, deserialize_with = "read_env")]
    pub env: Vec<EnvVar>,

    /// Kill the job's tree after this many milliseconds.
    #[cfg_attr(feature = "cli", arg(long = "timeout", value_name = "DUR", display_order = 4,
        help = "Kill the job's tree after this long (90s, 10m, 2h)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Kill after this (default never)")))]
    #[serde(default)]
    pub timeout_ms: Option<Given<Millis<1>>>,

    /// The agent or thread that owns the job.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", display_order = 5,
        help = "The agent or thread that owns the job"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Owning agent (default none)")))]
    #[serde(default)]
    pub owner: Option<String>,

    /// Arbitrary JSON kept with the job.
    #[cfg_attr(feature = "cli", arg(long, value_name = "JSON", display_order = 6,
        help = "Arbitrary JSON kept with the job"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "kept for the program that starts jobs and reads them back; a model keeps its notes in its conversation")))]
    #[serde(default)]
    pub context: Option<Given<JsonData>>,

    /// `false`: no exit notification for this job.
    #[cfg_attr(feature = "cli", arg(long = "no-notify", action = clap::ArgAction::SetFalse, display_order = 7,
        help = "No exit notification for this job"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "false: no exit notice (default true)")))]
    #[serde(default = "yes", deserialize_with = "read::flag")]
    pub notify: bool,

    /// Run this (with /bin/sh -c) when the job ends.
    #[cfg_attr(feature = "cli", arg(long, value_name = "COMMAND", display_order = 8,
        help = "Run this (with /bin/sh -c) when the job ends"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "a shell hook run by the supervisor adds nothing a model cannot do with another run_background and `after`")))]
    #[serde(default)]
    pub on_exit: Option<String>,

    /// Ready once a line of output matches this regular expression (`runYield` returns then).
    #[cfg_attr(feature = "cli", arg(long, value_name = "REGEX", display_order = 15,
        help = "Ready once a line of output matches this regex (--yield returns then)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = "MCP takes readyLog, readyPort and readyUrl as one string, `ready`")))]
    #[serde(default)]
    pub ready_log: Option<String>,

    /// Ready once one of the job's own processes listens on this port (at
    /// 127.0.0.1, ::1 or a wildcard address); a stranger's listener is not
    /// readiness (`readyBlocked` names it). macOS: anything that accepts a connect.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PORT", display_order = 16, value_parser = clap::value_parser!(u16).range(1..),
        help = "Ready once one of the job's processes listens on PORT (127.0.0.1, ::1 or any address)"))]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535),
        extend("x-mcp-omit" = "MCP takes readyLog, readyPort and readyUrl as one string, `ready`")))]
    #[serde(default, deserialize_with = "read::port")]
    pub ready_port: Option<u16>,

    /// Ready once a GET of this `http://` URL answers 2xx or 3xx.
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL", display_order = 17,
        help = "Ready once a GET of this http:// URL answers 2xx or 3xx"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = "MCP takes readyLog, readyPort and readyUrl as one string, `ready`")))]
    #[serde(default)]
    pub ready_url: Option<String>,

    /// Stop watching for readiness after this many ms; the job runs on, `not ready after …`.
    #[cfg_attr(feature = "cli", arg(long = "ready-timeout", value_name = "DUR", display_order = 18,
        help = "Stop watching for readiness after DUR; the job runs on, `not ready after DUR`"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "yieldMs and wait_job's timeout bound how long a model waits for readiness; left out to keep tools/list under 8,000 characters")))]
    #[serde(default)]
    pub ready_timeout_ms: Option<Given<Millis<1>>>,

    /// Each output line matching one of these regexes sends a `matched` notification (at most once per `notify.match_window_ms` per pattern).
    #[cfg_attr(feature = "cli", arg(long = "notify-on", value_name = "REGEX", display_order = 19,
        help = "Send a `matched` notification when a line matches REGEX (repeatable; at most once per notify.match_window_ms per pattern)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Output line regexes that notify")))]
    #[serde(default, deserialize_with = "read::texts")]
    pub notify_on: Vec<String>,

    /// Start the main process again when it ends: `on-failure` (not after exit
    /// 0) or `always`, under the same job id, after killing what is left of the
    /// ended run's tree.
    #[cfg_attr(feature = "cli", arg(long, value_name = "POLICY", display_order = 10,
        help = "Start the program again when it ends: on-failure (not after exit 0) or always"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Restart when it ends (default never)")))]
    #[serde(default)]
    pub restart: Option<RestartPolicy>,

    /// With `restart`: restarts in a row (no 10 s run between) before giving up (default 10).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", display_order = 11, value_parser = restart_count,
        help = "With --restart: give up after this many restarts in a row (default 10)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Max restarts in a row (default 10)")))]
    #[serde(default, deserialize_with = "read::restarts")]
    pub max_restarts: Option<u32>,

    /// With `restart`: the first restart's delay, doubled for each one in a row up to 30 s (default 1000).
    #[cfg_attr(feature = "cli", arg(long = "restart-delay", value_name = "DUR", display_order = 12,
        help = "With --restart: wait this long before the first restart, doubling up to 30s (default 1s)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Restart delay, doubling (default 1000)")))]
    #[serde(default)]
    pub restart_delay_ms: Option<Given<Millis<0>>>,

    /// `pipe`: the job's stdin stays open for `sendInput` (default `null`: /dev/null, NUL on Windows).
    #[cfg_attr(feature = "cli", arg(long, value_name = "MODE", display_order = 13,
        help = "`pipe`: keep the job's stdin open for `run-bg send` (default: null, /dev/null)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "pipe: for control_job send (default null)")))]
    #[serde(default)]
    pub stdin: Option<StdinMode>,

    /// Registers a one-off rule with the interrupt service as the job starts
    /// (the CLI's `--wake`): the job's end wakes the agent with `message`, whose
    /// `{{key}}`s the service fills from the event's data (`jobId`, `status`,
    /// `exitCode`, `outcome`, …; the event's own message without one). Needs
    /// the exit notification (`notify` not false, `notify.url` set).
    #[cfg_attr(feature = "cli", command(flatten))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "MCP takes the wake message as a string, `wake`; a model is woken in its own session, so action and instruction stay with the CLI and JS")))]
    #[serde(default)]
    pub wake: Option<WakeOptions>,

    /// Start once these jobs have ended successfully (else it ends `skipped`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "ID", num_args = 1.., display_order = 23,
        help = "Start only once these jobs have ended successfully (else end as skipped)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Start once these jobIds succeed")))]
    #[serde(default, deserialize_with = "read::texts")]
    pub after: Vec<String>,

    /// With `after`: start once they have ended, whatever their outcome.
    #[cfg_attr(feature = "cli", arg(long, display_order = 24,
        help = "With --after: start once they have ended, whatever their outcome"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "With after: once they end, any outcome")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub after_any: bool,

    /// Wait for a slot in this queue of config.json's `queues` (default: the `default` queue if configured).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", display_order = 25,
        help = "Wait for a slot in this queue (config.json `queues`: at most max_parallel at once)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Wait for a slot in this queue")))]
    #[serde(default)]
    pub queue: Option<String>,

    /// Higher starts first in its queue; first come first served within a priority (default 0).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", allow_negative_numbers = true, display_order = 26,
        help = "Higher starts first in its queue; first come first served within a priority"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Higher first in its queue (default 0)")))]
    #[serde(default, deserialize_with = "read::priority")]
    pub priority: Option<i64>,

    /// `true`: kill the job's tree when this Node process exits (the
    /// supervisor watches it with a pidfd on Linux 5.3 or later, a process
    /// handle on Windows; refused on macOS, which has neither).
    #[cfg_attr(feature = "cli", arg(long, display_order = 27,
        help = "Kill the job's tree when the process that ran run-bg (its parent, usually the agent's shell) exits"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "true: killed when this session ends")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub tie: bool,

    /// Kill the job's tree when the process with this pid exits.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PID", display_order = 28,
        help = "Kill the job's tree when this process exits"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "a model knows no pid of the host's to tie a job to; tie: true ties it to the session")))]
    #[serde(default, deserialize_with = "read::pid")]
    pub tie_pid: Option<u32>,

    /// The niceness the job's processes run at (as `renice` sets it), from
    /// -20 (the most CPU) to 19 (the least); default: the caller's. A value
    /// below the current one (usually 0) needs root, CAP_SYS_NICE or an
    /// RLIMIT_NICE that allows it; without, the start fails (a `failed` job
    /// that says so). On Windows a priority class, given to every process
    /// of the job: 19 idle, 1..18 below normal, 0 normal, -1..-9 above
    /// normal, -10..-20 high (never realtime; no privilege needed).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", allow_negative_numbers = true, display_order = 29,
        help = "Run the job's processes at niceness N, -20 (the most CPU) to 19 (the least); below the current one needs root or CAP_SYS_NICE. On Windows a priority class: 19 idle, 1..18 below normal, 0 normal, -1..-9 above normal, -10..-20 high"))]
    #[cfg_attr(feature = "schema", schemars(range(min = NICEST, max = LEAST_NICE),
        extend("x-mcp" = "Niceness -20..19 (default inherited)")))]
    #[serde(default, deserialize_with = "read::int32")]
    pub nice: Option<i32>,

    /// The agent harness session the job belongs to (default: `RUN_BG_SESSION`,
    /// else the harness's own variable, Claude Code's `CLAUDE_CODE_SESSION_ID`
    /// or Codex's `CODEX_THREAD_ID`, else the session whose harness process
    /// started the caller, as its session-start hook recorded it). With the
    /// hooks installed its end wakes that session, and the session's end
    /// kills it unless `outliveSession`. `none`: no session.
    #[cfg_attr(feature = "cli", arg(long, value_name = "ID", display_order = 30,
        help = "The agent session it belongs to (default: $RUN_BG_SESSION or the harness that ran run-bg; none: no session)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "the server's session is found from the harness that started it; a model does not name one")))]
    #[serde(default)]
    pub session: Option<String>,

    /// `true`: the end of its session leaves it running (a server to keep).
    #[cfg_attr(feature = "cli", arg(long = "outlive-session", display_order = 31,
        help = "Keep it running when its agent session ends (default: the session's end kills it)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "true: not killed as the session ends")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub outlive_session: bool,
}

/// The bounds of a niceness (setpriority(2)).
pub const NICEST: i32 = -20;
pub const LEAST_NICE: i32 = 19;

fn yes() -> bool {
    true
}

/// `wake: {message?, instruction?, action?}`; on the command line
/// `--wake <TEMPLATE>`, with `--wake-instruction` and `--wake-action`.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WakeOptions {
    /// The text the agent gets; `{{key}}` filled from the event's data.
    #[cfg_attr(feature = "cli", arg(id = "wake", long = "wake", value_name = "TEMPLATE", display_order = 20,
        help = "Register a one-off rule with the interrupt service as the job starts: its end wakes the agent with this text ({{jobId}}, {{status}}, {{exitCode}}, {{outcome}}, ... filled in by the service)"))]
    #[serde(default)]
    pub message: Option<String>,

    /// For a sub-agent: what it is to do about it.
    // The CLI's flags need the template (a JS `wake` object does not).
    #[cfg_attr(feature = "cli", arg(long = "wake-instruction", value_name = "TEXT", requires = "wake", display_order = 21,
        help = "With --wake: what the sub-agent is to do about it"))]
    #[serde(default)]
    pub instruction: Option<String>,

    /// `message` (into the agent's session, the default) or `subagent`.
    #[cfg_attr(feature = "cli", arg(long = "wake-action", value_name = "ACTION", requires = "wake", display_order = 22,
        help = "With --wake: message (into the agent's session, the default) or subagent"))]
    // Read as text in JSON too: parse_action's refusal is the same for every face.
    #[cfg_attr(feature = "schema", schemars(with = "Option<WakeAction>"))]
    #[serde(default, deserialize_with = "read_text")]
    pub action: Option<Given<WakeAction>>,
}

/// `stdin: 'pipe'`: a pipe `send` writes to; `null` (the default): /dev/null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum StdinMode {
    Pipe,
    Null,
}

/// One extra environment variable: `KEY=VALUE` from the command line (the
/// value any bytes), or a key and its value from a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvVar {
    Assignment(OsString),
    Pair(String, String),
}

fn read_env<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<EnvVar>, D::Error> {
    read::text_map(d).map(|pairs| pairs.into_iter().map(|(key, value)| EnvVar::Pair(key, value)).collect())
}

fn read_text<'de, D: serde::Deserializer<'de>, T>(d: D) -> std::result::Result<Option<Given<T>>, D::Error> {
    String::deserialize(d).map(|text| Some(Given::Text(text)))
}

impl FromText for WakeAction {
    fn from_text(_: &dyn Fn() -> String, text: &str) -> Result<Self> {
        crate::supervise::wake::parse_action(text)
    }
}

/// How a face spells the options in what it says, and who its caller is.
pub trait Face {
    /// An option by its JSON name (`timeoutMs`) as this face spells it:
    /// `--timeout` on the command line, `timeoutMs` in JS.
    fn name(&self, option: &str) -> String;
    /// Item `index` of a list option: `notifyOn[1]`.
    fn item(&self, option: &str, index: usize) -> String {
        format!("{}[{index}]", self.name(option))
    }
    /// The process `tie` ties a job to: the CLI's caller (its parent, the
    /// agent's shell), the Node process itself.
    fn caller_pid(&self) -> u32;
}

/// `--max-restarts` on the command line: clap's own message for a number
/// over `u32` said only "number too large to fit in target type".
#[cfg(feature = "cli")]
fn restart_count(text: &str) -> std::result::Result<u32, String> {
    text.trim().parse().map_err(|_| format!("`{text}` is not a number of restarts: give a whole number from 0 to {}", u32::MAX))
}

impl StartOptions {
    /// The rules between options and the checks that name an option, in the
    /// face's words. `into_request` calls it; the checks of the request
    /// itself (labels, env size, a tie's pid) follow in `start_job`.
    pub fn validate(&self, face: &dyn Face) -> Result<()> {
        use crate::supervise::ready::{check_pattern, check_url};
        if self.restart.is_none() && (self.max_restarts.is_some() || self.restart_delay_ms.is_some()) {
            let restart = face.name("restart");
            return Err(Error::Usage(format!(
                "{} and {} go with {restart}: give {restart} 'on-failure' or 'always'",
                face.name("maxRestarts"),
                face.name("restartDelayMs"),
            )));
        }
        if let Some(nice) = self.nice.filter(|n| !(NICEST..=LEAST_NICE).contains(n)) {
            return Err(Error::Usage(format!(
                "bad {} {nice}: give a niceness from {NICEST} (the most CPU) to {LEAST_NICE} (the least)",
                face.name("nice")
            )));
        }
        if self.tie && self.tie_pid.is_some() {
            return Err(Error::Usage(format!("give {} or {}, not both", face.name("tie"), face.name("tiePid"))));
        }
        if self.ready_timeout_ms.is_some() && self.ready_log.is_none() && self.ready_port.is_none() && self.ready_url.is_none() {
            return Err(Error::Usage(format!(
                "{} needs something to wait for: {} <regex>, {} <port> or {} <url>",
                face.name("readyTimeoutMs"),
                face.name("readyLog"),
                face.name("readyPort"),
                face.name("readyUrl"),
            )));
        }
        // Checked again with the option's name only to word a refusal: the
        // CLI finds a flag's name in clap's whole command.
        let pattern_named = |pattern: &str, name: &dyn Fn() -> String| {
            check_pattern("", pattern).or_else(|_| check_pattern(&name(), pattern)).map(drop)
        };
        if let Some(pattern) = &self.ready_log {
            pattern_named(pattern, &|| face.name("readyLog"))?;
        }
        if let Some(url) = &self.ready_url {
            check_url("", url).or_else(|_| check_url(&face.name("readyUrl"), url))?;
        }
        for (index, pattern) in self.notify_on.iter().enumerate() {
            pattern_named(pattern, &|| face.item("notifyOn", index))?;
        }
        Ok(())
    }

    /// The request to start `base` (its program and arguments) with these
    /// options, after `validate`; command-line text (durations, JSON) is
    /// parsed here, its errors naming the option as `face` spells it.
    pub fn into_request(self, mut request: StartRequest, face: &dyn Face) -> Result<StartRequest> {
        self.validate(face)?;
        request.label = self.label;
        request.cwd = self.cwd;
        for var in self.env {
            let (key, value) = match var {
                EnvVar::Assignment(assignment) => parse_env_assignment(&assignment)?,
                EnvVar::Pair(key, value) => {
                    validate_env_key(&key)?;
                    (key, value.into())
                }
            };
            request.env.insert(key, value);
        }
        request.timeout_ms = self.timeout_ms.map(|t| t.resolve(&|| face.name("timeoutMs"))).transpose()?.map(|m| m.0);
        request.owner = self.owner;
        request.context = self.context.map(|c| c.resolve(&|| face.name("context"))).transpose()?.map(|c| c.0);
        request.notify = self.notify;
        request.on_exit = self.on_exit;
        if let Some(policy) = self.restart {
            let delay = self.restart_delay_ms.map(|d| d.resolve(&|| face.name("restartDelayMs"))).transpose()?;
            request.restart = Some(RestartRequest { policy, max_restarts: self.max_restarts, delay_ms: delay.map(|d| d.0) });
        }
        request.stdin_pipe = self.stdin == Some(StdinMode::Pipe);
        if let Some(wake) = self.wake {
            let action = wake.action.map(|a| a.resolve(&|| face.name("wake"))).transpose()?;
            request.wake = Some(crate::model::job::Wake {
                message: wake.message,
                instruction: wake.instruction,
                action: action.unwrap_or_default(),
                ..Default::default()
            });
        }
        let ready_timeout = self.ready_timeout_ms.map(|t| t.resolve(&|| face.name("readyTimeoutMs"))).transpose()?.map(|m| m.0);
        if self.ready_log.is_some() || self.ready_port.is_some() || self.ready_url.is_some() || ready_timeout.is_some() {
            request.ready = Some(Readiness { log: self.ready_log, port: self.ready_port, url: self.ready_url, timeout_ms: ready_timeout });
        }
        request.notify_on = self.notify_on;
        request.after = self.after;
        request.after_any = self.after_any;
        request.queue = self.queue;
        request.priority = self.priority.unwrap_or(0);
        request.tie_to_caller = self.tie;
        request.tie_pid = if self.tie { Some(face.caller_pid()) } else { self.tie_pid };
        request.nice = self.nice;
        request.session = self.session.map(|given| crate::store::sessions::SessionChoice::parse(&face.name("session"), &given)).transpose()?;
        request.outlive_session = self.outlive_session;
        Ok(request)
    }
}

/// The JSON Schema of the options (draft 2020-12, inlined, no `$defs`), as
/// the MCP server builds its tool's input from it and index.d.ts is generated.
/// An option left out is not given: `null` (which JS reads as not given) is
/// left out of the types, and each object lists its properties in the order
/// the options are read and documented (`x-order`; JSON objects have none).
#[cfg(feature = "schema")]
pub fn schema() -> serde_json::Value {
    use crate::model::option_value::serde_fields;
    let mut schema = schema_of::<StartOptions>();
    schema["properties"]["wake"]["x-order"] = serde_fields::<WakeOptions>().into();
    schema
}

/// The schema of one options type, as `schema` describes it: inlined, no
/// `null`, its properties' order in `x-order`. The verbs' options
/// (verb_options.rs) are exported the same way.
#[cfg(feature = "schema")]
pub(crate) fn schema_of<T: schemars::JsonSchema + serde::de::DeserializeOwned>() -> serde_json::Value {
    use crate::model::option_value::serde_fields;
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    without_null(&mut schema);
    schema["x-order"] = serde_fields::<T>().into();
    schema
}

#[cfg(feature = "schema")]
pub(crate) fn without_null(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Value::Object(fields) = schema else { return };
    if fields.get("default") == Some(&Value::Null) {
        fields.remove("default");
    }
    if let Some(Value::Array(types)) = fields.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            fields.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = fields.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    for (_, value) in fields.iter_mut() {
        without_null(value);
    }
}

/// The JS face as unit tests of the option types see it: options named as
/// given, called from pid 4242.
#[cfg(test)]
pub(crate) struct Js;

#[cfg(test)]
impl Face for Js {
    fn name(&self, option: &str) -> String {
        option.to_string()
    }
    fn caller_pid(&self) -> u32 {
        4242
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(json: serde_json::Value) -> Result<StartRequest> {
        let options: StartOptions = serde_json::from_value(json).map_err(|e| Error::Usage(e.to_string()))?;
        options.into_request(StartRequest::shell("true"), &Js)
    }

    #[test]
    fn the_rules_between_options_are_checked_once_for_every_face() {
        let alone = options(serde_json::json!({"maxRestarts": 2})).unwrap_err().to_string();
        assert_eq!(alone, "maxRestarts and restartDelayMs go with restart: give restart 'on-failure' or 'always'");
        let both = options(serde_json::json!({"tie": true, "tiePid": 5})).unwrap_err().to_string();
        assert_eq!(both, "give tie or tiePid, not both");
        let pattern = options(serde_json::json!({"notifyOn": ["ok", "[z-a]"]})).unwrap_err().to_string();
        assert!(pattern.starts_with("bad notifyOn[1] `[z-a]`"), "{pattern}");
    }

    #[test]
    fn json_options_become_the_request() {
        let request = options(serde_json::json!({
            "label": "web", "env": {"A": "1"}, "timeoutMs": 5000, "restart": "always", "restartDelayMs": 0,
            "stdin": "pipe", "wake": {"action": "subagent"}, "readyPort": 3000, "tie": true, "notify": false,
        }))
        .unwrap();
        assert_eq!(request.label.as_deref(), Some("web"));
        assert_eq!(request.env.get("A"), Some(&OsString::from("1")));
        assert_eq!(request.timeout_ms, Some(5000));
        assert_eq!(request.restart.map(|r| (r.policy, r.delay_ms)), Some((RestartPolicy::Always, Some(0))));
        assert!(request.stdin_pipe && !request.notify && request.tie_to_caller);
        assert_eq!(request.tie_pid, Some(4242));
        assert_eq!(request.wake.map(|w| w.action), Some(WakeAction::Subagent));
        assert_eq!(request.ready.and_then(|r| r.port), Some(3000));
        let unknown = serde_json::from_value::<StartOptions>(serde_json::json!({"lable": "x"})).unwrap_err();
        assert!(unknown.to_string().contains("unknown field `lable`"), "{unknown}");
    }
}
