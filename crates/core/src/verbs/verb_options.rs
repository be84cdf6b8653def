//! The options of check, list, wait, kill and orphans, each defined once for every
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
use crate::verbs::check::TailQuery;
use crate::verbs::list::{ListFilter, SessionFilter};
use crate::verbs::orphans::OrphanOptions;
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
    #[cfg_attr(feature = "cli", arg(short = 'n', long = "lines", default_value = "20", help = "How many lines to show"))]
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
    #[serde(default, deserialize_with = "read_status")]
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

impl FromText for JobStatus {
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self> {
        JobStatus::parse_or_explain(text).map_err(|e| Error::Usage(format!("{}: {e}", name())))
    }
}

/// Read as text and refused in `parse_or_explain`'s words, which name the
/// option already (`bad status `x`: expected one of …`).
fn read_status<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Given<JobStatus>>, D::Error> {
    let text = String::deserialize(d)?;
    JobStatus::parse_or_explain(&text).map(|s| Some(Given::Value(s))).map_err(serde::de::Error::custom)
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
    #[serde(default, deserialize_with = "read_mode")]
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

impl OrphanMode {
    fn parse(text: &str) -> std::result::Result<Self, String> {
        match text {
            "list" => Ok(OrphanMode::List),
            "kill" => Ok(OrphanMode::Kill),
            other => Err(format!("bad mode `{}`: expected 'list' or 'kill'", crate::model::text::visible(other))),
        }
    }
}

impl FromText for OrphanMode {
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self> {
        OrphanMode::parse(text).map_err(|e| Error::Usage(format!("{}: {e}", name())))
    }
}

/// Read as text and refused in `parse`'s words, which name the option.
fn read_mode<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Given<OrphanMode>>, D::Error> {
    let text = String::deserialize(d)?;
    OrphanMode::parse(&text).map(|m| Some(Given::Value(m))).map_err(serde::de::Error::custom)
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

fn millis<const MIN: u64>(given: &Option<Given<Millis<MIN>>>, face: &dyn Face, option: &str) -> Result<Option<Duration>> {
    given.clone().map(|g| g.resolve(&|| face.name(option))).transpose().map(|m| m.map(|m| Duration::from_millis(m.0)))
}

/// The JSON Schema of each verb's options, by the verb's name (`check`,
/// `list`, `wait`, `kill`, `orphans`), as `start_options::schema` gives the start's.
#[cfg(feature = "schema")]
pub fn schema() -> serde_json::Value {
    use crate::verbs::start_options::schema_of;
    serde_json::json!({
        "check": schema_of::<CheckOptions>(),
        "list": schema_of::<ListOptions>(),
        "wait": schema_of::<WaitOptions>(),
        "kill": schema_of::<KillOptions>(),
        "orphans": schema_of::<OrphansOptions>(),
    })
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
