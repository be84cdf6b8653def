//! The options of check, list, wait, kill, orphans, logs (and following
//! them), send, prune, summary, up, down, rerun, the start's wait (yield),
//! and the JS API's own watchJobs and ResourceTracker, each defined once for every
//! face, as `StartOptions` is (see start_options.rs): the CLI's flags (clap,
//! feature `cli`), the JS options (serde), the MCP tools' inputs and
//! index.d.ts's interfaces (the JSON Schema, feature `schema`).
//!
//! Each field carries its doc (the JSON faces'), its CLI flag and help line,
//! and its MCP line (`x-mcp`) or why MCP leaves it out (`x-mcp-omit`).
//! What is not an option of the verb stays with its face: the job ids,
//! `--all` and `--json` on the command line, `signal` and `text` in JS, the
//! MCP tools' own bounds on how long a call may block.

use crate::model::job::JobStatus;
use crate::model::option_value::{read, FromText, Given, Millis};
use crate::store::config::ResourceTrackingConfig;
use crate::verbs::check::TailQuery;
use crate::verbs::list::{ListFilter, SessionFilter};
use crate::verbs::logs::LogRange;
use crate::verbs::orphans::OrphanOptions;
use crate::verbs::stack::StackFile;
use crate::verbs::start_options::Face;
use crate::{Error, Result};
use serde::Deserialize;
use std::time::Duration;

/// `checkJob`, `checkJobText`, `run-bg check`: which of the last lines to show.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckOptions {
    /// How many lines (default 20).
    // The CLI states its default in --help; a JSON caller leaves it out.
    #[cfg_attr(feature = "cli", arg(short = 'n', long = "lines", alias = "tail", default_value = "20", allow_negative_numbers = true,
        value_parser = line_count, help = "How many lines to show"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "How many last lines (default 20)")))]
    #[serde(default, deserialize_with = "read_lines")]
    pub lines: Option<usize>,

    /// Only lines matching this regular expression.
    #[cfg_attr(feature = "cli", arg(long, value_name = "REGEX", conflicts_with = "errors",
        help = "Only lines matching this regular expression"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Only lines matching this regex")))]
    #[serde(default)]
    pub grep: Option<String>,

    /// Only lines that look like errors, each with a line of context.
    #[cfg_attr(feature = "cli", arg(long, help = "Only lines that look like errors, each with a line of context"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Only error-like lines, with context")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub errors: bool,
}

impl CheckOptions {
    pub fn query(&self) -> Result<TailQuery> {
        TailQuery::new(self.lines, self.grep.as_deref())?.errors(self.errors)
    }
}

/// `-n` on the command line: clap's own message for `-n -1` was that `-1`
/// is an unexpected argument, with a tip that made it the job's id.
#[cfg(feature = "cli")]
pub(crate) fn line_count(text: &str) -> std::result::Result<usize, String> {
    text.trim().parse().map_err(|_| format!("`{text}` is not a number of lines: give a whole number, 0 or more (e.g. -n 50)"))
}

fn read_lines<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<usize>, D::Error> {
    read::whole_number(d, "a whole number of lines >= 0").map(|n| Some(n as usize))
}

/// `listJobs`, `listJobsText`, `run-bg list`: which jobs.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListOptions {
    /// Only jobs with this status (of any age).
    #[cfg_attr(feature = "cli", arg(long, value_name = "STATUS", help = "Only jobs with this status"))]
    #[cfg_attr(feature = "schema", schemars(schema_with = "status_schema", extend("x-mcp" = "Only jobs in this state")))]
    #[serde(default, deserialize_with = "read_explained")]
    pub status: Option<Given<JobStatus>>,

    /// Only jobs of this owner.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", help = "Only jobs of this owner"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Only this owner's jobs")))]
    #[serde(default)]
    pub owner: Option<String>,

    /// Only jobs of this agent session; `current`: the caller's (see `RunOptions.session`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "current",
        help = "Only jobs of this agent session (without ID, or `current`: the session run-bg runs in)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "current: this session's only")))]
    #[serde(default)]
    pub session: Option<String>,

    /// Include jobs that ended over an hour ago.
    #[cfg_attr(feature = "cli", arg(long, help = "Every job in the registry"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Also jobs ended over an hour ago")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub all: bool,
}

impl ListOptions {
    pub fn filter(self, face: &dyn Face) -> Result<ListFilter> {
        let status = self.status.map(|s| s.resolve(&|| face.name("status"))).transpose()?;
        // A status asked for is found at any age: `failed` an hour ago is still failed.
        let session = self.session.map(|text| SessionFilter::parse(&face.name("session"), &text)).transpose()?;
        Ok(ListFilter { status, owner: self.owner, session, all: self.all || status.is_some() })
    }
}

/// A value read from text whose refusal already says what was wrong and
/// what is accepted (`bad status `x`: expected one of …`): given as it is to
/// serde, and after the option's name to the other faces.
trait Explained: Sized {
    fn explained(text: &str) -> std::result::Result<Self, String>;
}

impl Explained for JobStatus {
    fn explained(text: &str) -> std::result::Result<Self, String> {
        JobStatus::parse_or_explain(text).map_err(|e| e.to_string())
    }
}

impl FromText for JobStatus {
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self> {
        JobStatus::explained(text).map_err(|e| Error::Usage(format!("{}: {e}", name())))
    }
}

/// Read as text and refused in the type's own words.
fn read_explained<'de, D: serde::Deserializer<'de>, T: Explained>(d: D) -> std::result::Result<Option<Given<T>>, D::Error> {
    let text = String::deserialize(d)?;
    T::explained(&text).map(|v| Some(Given::Value(v))).map_err(serde::de::Error::custom)
}

#[cfg(feature = "schema")]
fn status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
    // `x-ts`: index.d.ts names the type it already declares for these.
    schemars::json_schema!({ "type": "string", "enum": names, "x-ts": "JobStatus" })
}

/// `waitJob`, `run-bg wait`: how long, and for what.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitOptions {
    /// Give up after this many milliseconds; the result then has `timedOut: true`.
    #[cfg_attr(feature = "cli", arg(long = "timeout", value_name = "DUR", help = "Give up after this long (exit status 124)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Give up after this (default: until it ends)")))]
    #[serde(default)]
    pub timeout_ms: Option<Given<Millis<0>>>,

    /// Resolve once the job is ready (`readyLog`/`readyPort`/`readyUrl`), has
    /// passed its `readyTimeoutMs`, or ended, as `run-bg wait --ready`; rejects
    /// for a job without a readiness check.
    #[cfg_attr(feature = "cli", arg(long,
        help = "Until the job is ready (--ready-*): exit 0 once ready, the job's status (1 for exit 0) if it ended first, 124 if the wait or its readiness timeout passed first"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "wait_job waits for the end; run_background's yieldMs already answers once a job with `ready` is ready")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub ready: bool,
}

impl WaitOptions {
    pub fn timeout(&self, face: &dyn Face) -> Result<Option<Duration>> {
        millis(&self.timeout_ms, face, "timeoutMs")
    }
}

/// `killJob` (`graceMs`, `force`), `killAll` (all four), `run-bg kill`
/// (`--owner` and `--older-than` with `--all`).
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KillOptions {
    /// Only this owner's jobs.
    // `all` is the CLI's own flag, beside these in `run-bg kill`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", requires = "all", help = "With --all: only this owner's jobs"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "With olderThanMs: only this owner's", "x-all" = true)))]
    #[serde(default)]
    pub owner: Option<String>,

    /// Only this agent session's jobs; `current`: the caller's.
    #[cfg_attr(feature = "cli", arg(long, value_name = "ID", requires = "all", num_args = 0..=1, default_missing_value = "current",
        help = "With --all: only this agent session's jobs (without ID, or `current`: the session run-bg runs in)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "a session's end kills its jobs (hooks); kill_job ends the ones a model names", "x-all" = true)))]
    #[serde(default)]
    pub session: Option<String>,

    /// Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms).
    #[cfg_attr(feature = "cli", arg(long = "grace", value_name = "DUR",
        help = "Time between SIGTERM and SIGKILL (default: kill.grace_ms, 5s)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "SIGTERM to SIGKILL (default 5000)")))]
    #[serde(default)]
    pub grace_ms: Option<Given<Millis<0>>>,

    /// SIGKILL at once.
    #[cfg_attr(feature = "cli", arg(long, help = "SIGKILL at once"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "SIGKILL at once")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub force: bool,

    /// Only the jobs started more than this many milliseconds ago (`run-bg kill --all --older-than`).
    #[cfg_attr(feature = "cli", arg(long = "older-than", value_name = "DUR", requires = "all",
        help = "With --all: only jobs started longer ago than this (90s, 10m, 2h)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Instead of jobId: all started longer ago", "x-all" = true)))]
    #[serde(default)]
    pub older_than_ms: Option<Given<Millis<0>>>,
}

impl KillOptions {
    /// The options that choose among all jobs: a kill of named jobs
    /// (`killJob`, `run-bg kill <id>`) does not take them. Marked `x-all`
    /// in the schema.
    pub const ALL_ONLY: [&'static str; 3] = ["owner", "session", "olderThanMs"];

    /// Which jobs `kill --all` picks by owner and session.
    pub fn selection(&self, face: &dyn Face) -> Result<ListFilter> {
        let session = self.session.as_deref().map(|text| SessionFilter::parse(&face.name("session"), text)).transpose()?;
        Ok(ListFilter { all: true, owner: self.owner.clone(), session, status: None })
    }

    pub fn grace(&self, face: &dyn Face) -> Result<Option<Duration>> {
        millis(&self.grace_ms, face, "graceMs")
    }

    pub fn older_than(&self, face: &dyn Face) -> Result<Option<Duration>> {
        millis(&self.older_than_ms, face, "olderThanMs")
    }
}

/// `cleanupOrphans`, `run-bg orphans`: only report what is found, or remove it.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrphansOptions {
    /// `list` (default) only reports; `kill` removes what it finds.
    // The command line says `--kill` for `mode: 'kill'` (`x-flag`), and has no `--mode`.
    #[cfg_attr(feature = "cli", arg(id = "mode", long = "kill", num_args = 0, default_missing_value = "kill",
        help = "SIGTERM them, then SIGKILL what is left after the grace period"))]
    #[cfg_attr(feature = "schema", schemars(schema_with = "mode_schema", extend("x-mcp" = "Default list", "x-flag" = "--kill")))]
    #[serde(default, deserialize_with = "read_explained")]
    pub mode: Option<Given<OrphanMode>>,

    /// Only jobs of this owner.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", help = "Only jobs of this owner"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Only this owner's jobs")))]
    #[serde(default)]
    pub owner: Option<String>,

    /// With `kill`: SIGKILL at once instead of SIGTERM, grace, SIGKILL.
    #[cfg_attr(feature = "cli", arg(long, requires = "mode", help = "With --kill: SIGKILL at once"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "With kill: SIGKILL at once")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub force: bool,

    /// Milliseconds between SIGTERM and SIGKILL (default: kill.grace_ms).
    #[cfg_attr(feature = "cli", arg(long = "grace", value_name = "DUR",
        help = "Time between SIGTERM and SIGKILL (default: kill.grace_ms, 5s)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "what a job left behind is past its own grace; kill.grace_ms holds, force skips it")))]
    #[serde(default)]
    pub grace_ms: Option<Given<Millis<0>>>,
}

/// What `orphans` does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OrphanMode {
    #[default]
    List,
    Kill,
}

impl Explained for OrphanMode {
    fn explained(text: &str) -> std::result::Result<Self, String> {
        match text {
            "list" => Ok(OrphanMode::List),
            "kill" => Ok(OrphanMode::Kill),
            other => Err(format!("bad mode `{}`: expected 'list' or 'kill'", crate::model::text::visible(other))),
        }
    }
}

impl FromText for OrphanMode {
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self> {
        OrphanMode::explained(text).map_err(|e| Error::Usage(format!("{}: {e}", name())))
    }
}

#[cfg(feature = "schema")]
fn mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ["list", "kill"], "default": "list" })
}

impl OrphansOptions {
    /// The core's options of `Context::orphans`, the mode and grace checked.
    pub fn options(self, face: &dyn Face) -> Result<OrphanOptions> {
        let mode = self.mode.map(|m| m.resolve(&|| face.name("mode"))).transpose()?.unwrap_or_default();
        let grace = millis(&self.grace_ms, face, "graceMs")?;
        Ok(OrphanOptions { kill: mode == OrphanMode::Kill, force: self.force, owner: self.owner, grace })
    }
}

/// `readLog`, `followLog`, `followLogs`, `run-bg logs`: which lines of a
/// job's log (or, without an id, of every job's). Each JS call takes some of
/// them (`CALLS`, `x-calls` in the schema) and refuses the others as unknown.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogsOptions {
    /// Only the jobs started with this `owner` (every job's lines: `followLogs`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", help = "Without an id: only jobs of this owner"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = "read_log reads the one job it names")))]
    #[serde(default)]
    pub owner: Option<String>,

    /// The first line to show, counted from 1 (the oldest line the log still
    /// holds); without it (and without `since`), the last `lines` lines.
    #[cfg_attr(feature = "cli", arg(skip))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "First line, 1 = oldest kept (default: last lines)",
        "x-cli-omit" = "run-bg logs prints the last lines (-n) or the whole log (--all); pages by number are for programs")))]
    #[serde(default, deserialize_with = "read_line_number")]
    pub from_line: Option<usize>,

    /// A cursor (`checkJob().cursor`, `readLog().cursor`): only the lines
    /// written after it, the oldest first. Not with `fromLine`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "CURSOR", conflicts_with_all = ["all", "follow"],
        help = "Only the lines written after this cursor (from `check --json` or an earlier `logs --since`), cleaned as `check` shows them; -n caps them"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "A cursor: only the lines after it")))]
    #[serde(default, deserialize_with = "read_cursor")]
    pub since: Option<u64>,

    /// How many lines (default 100). Following, the last lines to start
    /// with: `followLog` starts with the whole log kept when not given,
    /// `followLogs` with 10 of each job (0: only what is written from now on).
    #[cfg_attr(feature = "cli", arg(short = 'n', long = "lines", alias = "tail", allow_negative_numbers = true, value_parser = line_count,
        help = "How many lines from the end (default 100; without an id, 10 a job)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "How many lines (default 100)")))]
    #[serde(default, deserialize_with = "read_lines")]
    pub lines: Option<usize>,

    /// At most this many characters of lines (as JavaScript counts a string's
    /// length, one more per line for its newline): only the first lines that
    /// fit are given, `cursor` right after the last of them, and `notShown`
    /// counts the lines asked for that were left out.
    #[cfg_attr(feature = "cli", arg(skip))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = "the server sets it from the cap on its own answers",
        "x-cli-omit" = "a terminal or a pipe takes every line; the budget is for a caller that relays the text")))]
    #[serde(default, deserialize_with = "read_chars")]
    pub max_chars: Option<usize>,
}

impl LogsOptions {
    /// The options each JS call takes, by its name.
    pub const CALLS: [(&'static str, &'static [&'static str]); 3] = [
        ("readLog", &["fromLine", "since", "lines", "maxChars"]),
        ("followLog", &["lines"]),
        ("followLogs", &["owner", "lines"]),
    ];

    /// The options `call` does not take: refused by name, as an unknown one is.
    pub fn left_out(call: &str) -> Vec<&'static str> {
        let taken = Self::CALLS.iter().find(|(name, _)| *name == call).map_or(&[][..], |(_, taken)| *taken);
        crate::model::option_value::serde_fields::<Self>().iter().copied().filter(|f| !taken.contains(f)).collect()
    }

    /// The read `readLog` asks for: `lines` (default 100) from `fromLine`, or after `since`, not both.
    pub fn range(&self, face: &dyn Face) -> Result<LogRange> {
        let count = self.lines.unwrap_or(100);
        match (self.from_line, self.since) {
            (Some(_), Some(_)) => Err(Error::Usage(format!(
                "{} and {}: give one, not both (a line number, or a cursor)",
                face.name("fromLine"),
                face.name("since")
            ))),
            (_, Some(since)) => Ok(LogRange::Since { since, count }),
            (from, None) => Ok(LogRange::Lines { from, count }),
        }
    }
}

fn read_line_number<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<usize>, D::Error> {
    read::whole_number_from_one(d, "a whole line number >= 1 (1 = the oldest line kept)").map(|n| Some(n as usize))
}

fn read_cursor<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    read::whole_number(d, "a whole number of bytes >= 0 (a cursor)").map(|n| Some(n as u64))
}

fn read_chars<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<usize>, D::Error> {
    read::whole_number(d, "a whole number of characters >= 0").map(|n| Some(n as usize))
}

/// `sendInput`, `run-bg send`, MCP `control_job` with `action: send`: how
/// the text is written to a job's stdin.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendOptions {
    /// `false`: send the text as it is (default true: a newline follows).
    #[cfg_attr(feature = "cli", arg(long = "no-newline", action = clap::ArgAction::SetFalse,
        help = "Send the text as it is, without a newline"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "send: add a newline (default true)")))]
    #[serde(default = "yes", deserialize_with = "read::flag")]
    pub newline: bool,

    /// Close the job's stdin after the text: it reads end-of-file.
    #[cfg_attr(feature = "cli", arg(long, help = "Then close the job's stdin (it reads end-of-file)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "send: then close its stdin")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub eof: bool,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions { newline: true, eof: false }
    }
}

fn yes() -> bool {
    true
}

impl SendOptions {
    /// The bytes to write: `text` and its newline. Without a text (`--eof`
    /// alone) nothing; an empty text with its newline is an Enter.
    pub fn data(&self, text: Option<Vec<u8>>) -> Vec<u8> {
        let newline = text.is_some() && self.newline;
        let mut data = text.unwrap_or_default();
        if newline {
            data.push(b'\n');
        }
        data
    }
}

/// `pruneJobs`, `run-bg prune`: which ended jobs to forget.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PruneOptions {
    /// Only the jobs that ended more than this many milliseconds ago.
    #[cfg_attr(feature = "cli", arg(long = "older-than", value_name = "DUR", help = "Only jobs that ended longer ago than this"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" =
        "no MCP tool forgets jobs: their records and logs are what a model reads")))]
    #[serde(default)]
    pub older_than_ms: Option<Given<Millis<0>>>,
}

impl PruneOptions {
    pub fn older_than(&self, face: &dyn Face) -> Result<Option<Duration>> {
        millis(&self.older_than_ms, face, "olderThanMs")
    }
}

/// `summary`, `run-bg summary`: whose jobs.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SummaryOptions {
    /// Only jobs of this owner.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", help = "Only jobs of this owner"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = "list_jobs with summary: true passes its owner on")))]
    #[serde(default)]
    pub owner: Option<String>,

    /// Only this agent session's jobs; `current`: the session the caller runs in.
    #[cfg_attr(feature = "cli", arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "current",
        help = "Only jobs of this agent session (without ID, or `current`: the session run-bg runs in)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = "list_jobs with summary: true passes its session on")))]
    #[serde(default)]
    pub session: Option<String>,
}

impl SummaryOptions {
    pub fn session(&self, face: &dyn Face) -> Result<Option<SessionFilter>> {
        self.session.as_deref().map(|text| SessionFilter::parse(&face.name("session"), text)).transpose()
    }
}

/// `up`, `run-bg up`: whose the stack's jobs are, and how long to wait for them.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpOptions {
    /// Owner of the stack's jobs (default: the file's directory name).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", help = "Owner of the stack's jobs (default: the file's directory name)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = STACK_NOT_MCP)))]
    #[serde(default)]
    pub owner: Option<String>,

    /// `true`: the stack keeps running when the agent session that starts it ends.
    #[cfg_attr(feature = "cli", arg(long = "outlive-session",
        help = "Keep the stack running when the agent session that starts it ends"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = STACK_NOT_MCP)))]
    #[serde(default, deserialize_with = "read::flag")]
    pub outlive_session: bool,

    /// Wait up to this many milliseconds for every process to be up (ready,
    /// running, or a task that ended with exit 0), or one cannot be: `ready`, `problems`.
    #[cfg_attr(feature = "cli", arg(long = "yield", value_name = "DUR", num_args = 0..=1, default_missing_value = "2m",
        help = "Return once every process is up (ready, running, or a task that ended well), or one cannot be; waits at most DUR (default 2m)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = STACK_NOT_MCP)))]
    #[serde(default)]
    pub yield_ms: Option<Given<Millis<0>>>,
}

#[cfg(feature = "schema")]
const STACK_NOT_MCP: &str = "no MCP tool reads a stack file: run_background starts each process";

impl UpOptions {
    pub fn yield_for(&self, face: &dyn Face) -> Result<Option<Duration>> {
        millis(&self.yield_ms, face, "yieldMs")
    }

    /// The stack as these options start it.
    pub fn file(&self, file: StackFile) -> StackFile {
        if self.outlive_session { file.outliving_sessions() } else { file }
    }
}

/// `down`, `run-bg down`: whose jobs are the stack's.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DownOptions {
    /// Owner of the stack's jobs (default: the file's directory name).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", help = "Owner of the stack's jobs (default: the file's directory name)"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = STACK_NOT_MCP)))]
    #[serde(default)]
    pub owner: Option<String>,
}

/// `rerunJob`'s overrides: none yet, the job starts again as it was started
/// (`run-bg rerun` has no flags). Any given is refused saying so.
#[derive(Debug, Clone, Default)]
pub struct RerunOptions {}

impl<'de> Deserialize<'de> for RerunOptions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct NoOverrides;
        impl<'de> serde::de::Visitor<'de> for NoOverrides {
            type Value = RerunOptions;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an empty object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<RerunOptions, A::Error> {
                match map.next_key::<String>()? {
                    Some(_) => Err(serde::de::Error::custom(
                        "rerunJob takes no overrides yet: it starts the job as it was started; to change its options, start it anew with runBackground",
                    )),
                    None => Ok(RerunOptions {}),
                }
            }
        }
        d.deserialize_map(NoOverrides)
    }
}

/// `runYield`'s wait (needed there), `run-bg --yield` (optional there): how
/// long to wait for the started job to end (or be ready) before leaving it running.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct YieldOptions {
    /// How long to wait for the job to end before leaving it running.
    #[cfg_attr(feature = "cli", arg(long = "yield", value_name = "DUR", display_order = 9,
        help = "Stay in the foreground up to DUR: if the job ends by then, print what `check` prints and exit with its code; else print the ack"))]
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp" = "Answer as check_job if done or ready by then (default 0)")))]
    #[serde(default)]
    pub yield_ms: Option<Given<Millis<0>>>,
}

/// `checkJob`'s own option beside the check's: the JS API's alone, since
/// run-bg prints the text and MCP answers in it.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CheckTextOptions {
    /// Also `text`: the answer as `checkJobText` gives it, from this same check (default false).
    #[cfg_attr(feature = "schema", schemars(extend(
        "x-mcp-omit" = "check_job answers in that text already",
        "x-cli-omit" = "run-bg check prints that text already (--json for the record)")))]
    #[serde(default, deserialize_with = "read::flag")]
    pub text: bool,
}

impl YieldOptions {
    pub fn bound(&self, face: &dyn Face) -> Result<Option<Duration>> {
        millis(&self.yield_ms, face, "yieldMs")
    }

    /// The wait, where it is not optional (`runYield`).
    pub fn required(&self, face: &dyn Face) -> Result<Duration> {
        self.bound(face)?.ok_or_else(|| {
            Error::Usage(format!(
                "{} is required: how long to wait for the job to end before leaving it running, in milliseconds",
                face.name("yieldMs")
            ))
        })
    }
}

/// `watchJobs`: whose job ends. The JS API's alone: a shell hears of a job's
/// end from its notification or `run-bg wait`, a model from `wait_job`.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchOptions {
    /// Only the jobs started with this `owner`.
    #[cfg_attr(feature = "schema", schemars(extend(
        "x-mcp-omit" = "an MCP call answers once: wait_job waits for a job's end",
        "x-cli-omit" = "a shell hears of a job's end from its notification or run-bg wait")))]
    #[serde(default)]
    pub owner: Option<String>,
}

/// `new ResourceTracker(options)`: overrides of config.json's
/// `diagnostics.resource_tracking`. The JS API's alone (a tracker watches the
/// phases of the Node process that makes it).
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrackerOptions {
    /// `false`: the tracker does nothing and logs nothing.
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = TRACKER_JS_ONLY, "x-cli-omit" = TRACKER_JS_ONLY)))]
    #[serde(default, deserialize_with = "read_some_flag")]
    pub enabled: Option<bool>,

    /// Memory growth over a phase that gives a warning (default 100).
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = TRACKER_JS_ONLY, "x-cli-omit" = TRACKER_JS_ONLY)))]
    #[serde(default, deserialize_with = "read_mib")]
    pub memory_threshold_mb: Option<f64>,

    /// Substrings (case-insensitive) that flag a command as an MCP/browser process.
    #[cfg_attr(feature = "schema", schemars(extend("x-mcp-omit" = TRACKER_JS_ONLY, "x-cli-omit" = TRACKER_JS_ONLY)))]
    #[serde(default, deserialize_with = "read_patterns")]
    pub mcp_patterns: Option<Vec<String>>,
}

#[cfg(feature = "schema")]
const TRACKER_JS_ONLY: &str = "a tracker watches the phases of the Node process that makes it";

impl TrackerOptions {
    /// config.json's settings with these over them.
    pub fn over(self, mut config: ResourceTrackingConfig) -> ResourceTrackingConfig {
        config.enabled = self.enabled.unwrap_or(config.enabled);
        config.memory_threshold_mb = self.memory_threshold_mb.unwrap_or(config.memory_threshold_mb);
        config.mcp_patterns = self.mcp_patterns.unwrap_or(config.mcp_patterns);
        config
    }
}

fn read_some_flag<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<bool>, D::Error> {
    read::flag(d).map(Some)
}

fn read_mib<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    read::amount(d, "a number of MiB >= 0").map(Some)
}

fn read_patterns<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Vec<String>>, D::Error> {
    read::texts(d).map(Some)
}

fn millis<const MIN: u64>(given: &Option<Given<Millis<MIN>>>, face: &dyn Face, option: &str) -> Result<Option<Duration>> {
    given.clone().map(|g| g.resolve(&|| face.name(option))).transpose().map(|m| m.map(|m| Duration::from_millis(m.0)))
}

/// The JSON Schema of each verb's options, by the verb's name (`check`,
/// `checkText`, `list`, `wait`, `kill`, `orphans`, `logs`, `send`, `prune`,
/// `summary`, `up`, `down`, `watch`, `tracker`, `yield`), as `start_options::schema` gives the start's.
#[cfg(feature = "schema")]
pub fn schema() -> serde_json::Value {
    use crate::verbs::start_options::schema_of;
    serde_json::json!({
        "check": schema_of::<CheckOptions>(),
        "checkText": schema_of::<CheckTextOptions>(),
        "list": schema_of::<ListOptions>(),
        "wait": schema_of::<WaitOptions>(),
        "kill": schema_of::<KillOptions>(),
        "orphans": schema_of::<OrphansOptions>(),
        "logs": with_calls(schema_of::<LogsOptions>(), &LogsOptions::CALLS),
        "send": schema_of::<SendOptions>(),
        "prune": schema_of::<PruneOptions>(),
        "summary": schema_of::<SummaryOptions>(),
        "up": schema_of::<UpOptions>(),
        "down": schema_of::<DownOptions>(),
        "watch": schema_of::<WatchOptions>(),
        "tracker": schema_of::<TrackerOptions>(),
        "yield": schema_of::<YieldOptions>(),
    })
}

/// Each option marked with the JS calls that take it (`x-calls`).
#[cfg(feature = "schema")]
fn with_calls(mut schema: serde_json::Value, calls: &[(&str, &[&str])]) -> serde_json::Value {
    if let Some(properties) = schema["properties"].as_object_mut() {
        for (name, option) in properties.iter_mut() {
            let takers: Vec<&str> = calls.iter().filter(|(_, taken)| taken.contains(&name.as_str())).map(|(call, _)| *call).collect();
            option["x-calls"] = takers.into();
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::start_options::Js;

    #[test]
    fn json_options_are_read_and_checked() {
        let list: ListOptions = serde_json::from_value(serde_json::json!({"status": "failed"})).unwrap();
        let filter = list.filter(&Js).unwrap();
        assert_eq!(filter.status, Some(JobStatus::Failed));
        assert!(filter.all, "a status is found at any age");
        let bad = serde_json::from_value::<ListOptions>(serde_json::json!({"status": "done"})).unwrap_err().to_string();
        assert!(bad.starts_with("bad status `done`: expected one of running"), "{bad}");
        let kill: KillOptions = serde_json::from_value(serde_json::json!({"graceMs": 1500, "force": true})).unwrap();
        assert_eq!(kill.grace(&Js).unwrap(), Some(Duration::from_millis(1500)));
        let lines = serde_json::from_value::<CheckOptions>(serde_json::json!({"lines": 1.5})).unwrap_err().to_string();
        assert!(lines.contains("a whole number of lines >= 0"), "{lines}");
        let orphans: OrphansOptions = serde_json::from_value(serde_json::json!({"mode": "kill", "graceMs": 10})).unwrap();
        let orphans = orphans.options(&Js).unwrap();
        assert!(orphans.kill && orphans.grace == Some(Duration::from_millis(10)));
        let mode = serde_json::from_value::<OrphansOptions>(serde_json::json!({"mode": "remove"})).unwrap_err().to_string();
        assert!(mode.starts_with("bad mode `remove`: expected 'list' or 'kill'"), "{mode}");
        let logs: LogsOptions = serde_json::from_value(serde_json::json!({"since": 40, "lines": 5})).unwrap();
        assert_eq!(logs.range(&Js).unwrap(), LogRange::Since { since: 40, count: 5 });
        let both: LogsOptions = serde_json::from_value(serde_json::json!({"since": 40, "fromLine": 2})).unwrap();
        let both = both.range(&Js).unwrap_err().to_string();
        assert!(both.contains("fromLine and since: give one, not both"), "{both}");
        let cursor = serde_json::from_value::<LogsOptions>(serde_json::json!({"since": -1})).unwrap_err().to_string();
        assert!(cursor.contains("a whole number of bytes >= 0 (a cursor)"), "{cursor}");
        assert_eq!(LogsOptions::left_out("followLog"), ["owner", "fromLine", "since", "maxChars"]);
        let send: SendOptions = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(send.data(Some(b"y".to_vec())), b"y\n", "a newline by default");
        let send: SendOptions = serde_json::from_value(serde_json::json!({"newline": false, "eof": true})).unwrap();
        assert_eq!((send.data(Some(b"y".to_vec())), send.eof), (b"y".to_vec(), true));
        assert!(SendOptions::default().data(None).is_empty(), "--eof alone sends nothing");
        let summary: SummaryOptions = serde_json::from_value(serde_json::json!({"session": "current"})).unwrap();
        assert!(summary.session(&Js).unwrap().is_some());
        let up: UpOptions = serde_json::from_value(serde_json::json!({"yieldMs": 250, "outliveSession": true})).unwrap();
        assert_eq!(up.yield_for(&Js).unwrap(), Some(Duration::from_millis(250)));
        let prune = serde_json::from_value::<PruneOptions>(serde_json::json!({"olderThanMs": "1h"})).unwrap_err().to_string();
        assert!(prune.contains("a number of milliseconds >= 0"), "{prune}");
        serde_json::from_value::<RerunOptions>(serde_json::json!({})).unwrap();
        let rerun = serde_json::from_value::<RerunOptions>(serde_json::json!({"label": "x"})).unwrap_err().to_string();
        assert!(rerun.starts_with("rerunJob takes no overrides yet"), "{rerun}");
        let tracker: TrackerOptions = serde_json::from_value(serde_json::json!({"memoryThresholdMb": 2.5})).unwrap();
        assert_eq!(tracker.over(ResourceTrackingConfig::default()).memory_threshold_mb, 2.5);
        let mib = serde_json::from_value::<TrackerOptions>(serde_json::json!({"memoryThresholdMb": -1})).unwrap_err().to_string();
        assert!(mib.contains("a number of MiB >= 0"), "{mib}");
        let needed = YieldOptions::default().required(&Js).unwrap_err().to_string();
        assert!(needed.starts_with("yieldMs is required"), "{needed}");
        let unknown = serde_json::from_value::<WaitOptions>(serde_json::json!({"timeout": 5})).unwrap_err().to_string();
        assert!(unknown.contains("unknown field `timeout`"), "{unknown}");
    }

    #[test]
    fn command_line_text_is_parsed_naming_the_flag() {
        let wait = WaitOptions { timeout_ms: Some(Given::Text("soon".into())), ready: false };
        let flag = |_: &str| "--timeout".to_string();
        struct Cli<'a>(&'a dyn Fn(&str) -> String);
        impl Face for Cli<'_> {
            fn name(&self, option: &str) -> String {
                (self.0)(option)
            }
            fn caller_pid(&self) -> u32 {
                0
            }
        }
        let error = wait.timeout(&Cli(&flag)).unwrap_err().to_string();
        assert!(error.starts_with("--timeout: bad duration `soon`"), "{error}");
    }
}
