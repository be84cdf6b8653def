//! `config.json`: every setting with its default, read strictly (an unknown
//! key is an error naming it).

use crate::model::error::ConfigError;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Settings from `<home>/config.json`; every key is optional. Unknown keys are
/// refused so that a typo (`max_byte`) is reported instead of silently ignored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub logs: LogsConfig,
    pub registry: RegistryConfig,
    pub kill: KillConfig,
    pub notify: NotifyConfig,
    pub diagnostics: DiagnosticsConfig,
    /// Named queues with a parallel limit (`--queue <name>`); a queue named
    /// `default` takes every job started without `--queue`.
    pub queues: std::collections::BTreeMap<String, QueueConfig>,
}

/// One queue: at most `max_parallel` of its jobs run at once; the others wait, `queued`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    pub max_parallel: u32,
}

/// The queue that takes the jobs started without `--queue`, when configured.
pub const DEFAULT_QUEUE: &str = "default";

/// A queue name: what `--queue` and config.json's `queues` accept.
pub fn validate_queue_name(name: &str) -> std::result::Result<(), String> {
    let ok = (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("bad queue name `{}`: give 1 to 64 letters, digits, `-`, `_` or `.`", crate::model::text::visible(name)))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogsConfig {
    pub max_bytes: u64,
    pub keep: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryConfig {
    /// How many ended jobs are kept (the oldest beyond it forgotten); jobs
    /// that run, wait or are orphaned are never forgotten and do not count.
    pub max_jobs: usize,
    /// How long one process may hold the registry lock before whoever waits
    /// for it gives up, naming the holder (a stopped process holds it forever).
    pub lock_timeout_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct KillConfig {
    pub grace_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NotifyConfig {
    /// `null` turns the HTTP notification off.
    pub url: Option<String>,
    /// Whether config.json names `notify.url` (set by `Config::parse`): only
    /// then is a service known to be installed, worth retrying for a day.
    /// Not a key of config.json (refused there); serialized so that a
    /// supervisor, which gets its settings from its spec, knows it too.
    #[serde(default)]
    pub url_explicit: bool,
    pub command: Option<String>,
    pub source: String,
    /// The interrupt service's level for every outcome `levels` does not name.
    pub level: String,
    /// A level per outcome, over `level`.
    pub levels: LevelsConfig,
    /// At most this many batches opened at the interrupt service per
    /// `pace_window_ms` (its `rate_limit_max` / `rate_limit_window_ms`;
    /// `alert`'s sub-agent pipeline takes at most 4); what would open more is
    /// held back and sent together.
    pub max_per_minute: u32,
    pub pace_window_ms: u64,
    /// The service's batch window (its `batch_window_ms` of the message pipeline).
    pub batch_window_ms: u64,
    /// How long the supervisor keeps retrying a failed POST before spooling it.
    pub retry_for_ms: u64,
    /// Bound on one POST attempt (connect + send + answer).
    pub timeout_ms: u64,
    /// Bound on each command hook; it is killed after this.
    pub hook_timeout_ms: u64,
    /// A `--notify-on` pattern sends at most one `matched` event per this
    /// long (its later matches within it are only in the log).
    pub match_window_ms: u64,
    /// Also announce each restart of a job started with `--restart` (one
    /// POST, `status: "restarted"`); by default only its final end is.
    pub on_restart: bool,
}

/// The levels the interrupt service knows: `info` reaches the agent only
/// through a rule that matches, `warn` as a system event (message pipeline),
/// `alert` through a sub-agent.
pub const LEVELS: [&str; 3] = ["info", "warn", "alert"];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LevelsConfig {
    pub success: Option<String>,
    pub failed: Option<String>,
    pub killed: Option<String>,
    pub timeout: Option<String>,
    pub orphaned: Option<String>,
    pub lost: Option<String>,
}

impl NotifyConfig {
    /// The level for a job that ended as `status` (`success`, `failed`, …).
    pub fn level_for(&self, status: &str) -> &str {
        let levels = &self.levels;
        let own = match status {
            "success" => &levels.success,
            "failed" => &levels.failed,
            "killed" => &levels.killed,
            "timeout" => &levels.timeout,
            "orphaned" => &levels.orphaned,
            "lost" => &levels.lost,
            _ => &None,
        };
        own.as_deref().unwrap_or(&self.level)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct DiagnosticsConfig {
    pub resource_tracking: ResourceTrackingConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceTrackingConfig {
    pub enabled: bool,
    pub memory_threshold_mb: f64,
    pub mcp_patterns: Vec<String>,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig { max_bytes: 10 * 1024 * 1024, keep: 3 }
    }
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig { max_jobs: 200, lock_timeout_ms: 5_000 }
    }
}

impl Default for KillConfig {
    fn default() -> Self {
        KillConfig { grace_ms: 5000 }
    }
}

/// Where OpenClaw's interrupt service listens unless told otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7600/trigger";

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            url: Some(DEFAULT_URL.to_string()),
            url_explicit: false,
            command: None,
            source: "run-bg".to_string(),
            level: "warn".to_string(),
            levels: LevelsConfig::default(),
            max_per_minute: 10,
            pace_window_ms: 60_000,
            batch_window_ms: 2_000,
            retry_for_ms: 60_000,
            timeout_ms: 5_000,
            hook_timeout_ms: 30_000,
            match_window_ms: 30_000,
            on_restart: false,
        }
    }
}

impl Default for ResourceTrackingConfig {
    fn default() -> Self {
        ResourceTrackingConfig {
            enabled: true,
            memory_threshold_mb: 100.0,
            mcp_patterns: ["playwright", "chromium", "chrome", "firefox", "webkit", "headless_shell", "mcp-server-*", "*-mcp", "@modelcontextprotocol/*"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

impl Config {
    /// Reads `path`; a missing file means all defaults. A symlink in its place
    /// is refused, never followed: it could lead to someone else's hooks.
    pub fn load(path: &Path) -> Result<Config> {
        let read = crate::store::paths::read_file(path)
            .and_then(|bytes| String::from_utf8(bytes).map_err(|_| std::io::Error::other("it is not UTF-8 text")));
        let text = match read {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => {
                return Err(Error::Config { path: path.to_path_buf(), message: format!("cannot read it: {e}") })
            }
        };
        Self::parse(&text).map_err(|e| Error::Config { path: path.to_path_buf(), message: e.to_string() })
    }

    pub fn parse(text: &str) -> std::result::Result<Config, ConfigError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ConfigError::NotJson(e.to_string()))?;
        // Sections must be objects: serde would otherwise fill a struct from an array.
        let sections = ["logs", "registry", "kill", "notify", "diagnostics", "queues"];
        let Some(root) = value.as_object() else {
            return Err(ConfigError::NotAnObject(sections.join(", ")));
        };
        for (key, section) in root {
            if sections.contains(&key.as_str()) && !section.is_object() {
                return Err(ConfigError::bad_key(key, "expected an object"));
            }
        }
        if let Some(tracking) = value.pointer("/diagnostics/resource_tracking") {
            if !tracking.is_object() {
                return Err(ConfigError::bad_key("diagnostics.resource_tracking", "expected an object"));
            }
        }
        if value.pointer("/notify/url_explicit").is_some() {
            return Err(ConfigError::bad_key("notify.url_explicit", "unknown field; `notify.url` is what sets where to send"));
        }
        let url_explicit = value.pointer("/notify/url").is_some();
        let mut config: Config = serde_path_to_error::deserialize(value)
            .map_err(|e| ConfigError::bad_key(e.path().to_string(), e.inner().to_string()))?;
        config.notify.url_explicit = url_explicit;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> std::result::Result<(), ConfigError> {
        if self.logs.max_bytes < 4096 {
            let problem = format!("{} is too small; use at least 4096 bytes", self.logs.max_bytes);
            return Err(ConfigError::bad_key("logs.max_bytes", problem));
        }
        if self.logs.keep > crate::store::logs::MAX_KEEP {
            let max = crate::store::logs::MAX_KEEP;
            let problem = format!("{} is too many; use 0 to {max} rotated files", self.logs.keep);
            return Err(ConfigError::bad_key("logs.keep", problem));
        }
        if self.registry.max_jobs == 0 {
            return Err(ConfigError::bad_key("registry.max_jobs", "must be at least 1"));
        }
        if self.registry.lock_timeout_ms == 0 {
            return Err(ConfigError::bad_key("registry.lock_timeout_ms", "must be at least 1 (milliseconds)"));
        }
        if let Some(url) = &self.notify.url {
            let host = url.strip_prefix("http://").map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
            if host.is_none_or(str::is_empty) {
                let problem = format!("`{url}` is not an http:// URL with a host (or null to turn it off)");
                return Err(ConfigError::bad_key("notify.url", problem));
            }
        }
        let threshold = self.diagnostics.resource_tracking.memory_threshold_mb;
        if !threshold.is_finite() || threshold < 0.0 {
            let problem = format!("{threshold} is not a number of MiB >= 0");
            return Err(ConfigError::bad_key("diagnostics.resource_tracking.memory_threshold_mb", problem));
        }
        if self.notify.timeout_ms == 0 || self.notify.hook_timeout_ms == 0 {
            // Both named, as one rule: the text says it as before.
            return Err(ConfigError::bad_key("notify.timeout_ms` / `notify.hook_timeout_ms", "must be at least 1"));
        }
        for (key, value) in [
            ("notify.max_per_minute", u64::from(self.notify.max_per_minute)),
            ("notify.pace_window_ms", self.notify.pace_window_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::bad_key(key, "must be at least 1"));
            }
        }
        for (name, queue) in &self.queues {
            validate_queue_name(name).map_err(|problem| ConfigError::bad_key(format!("queues.{name}"), problem))?;
            if queue.max_parallel == 0 {
                return Err(ConfigError::bad_key(format!("queues.{name}.max_parallel"), "must be at least 1"));
            }
        }
        let levels = &self.notify.levels;
        let named = [
            ("notify.level", Some(&self.notify.level)),
            ("notify.levels.success", levels.success.as_ref()),
            ("notify.levels.failed", levels.failed.as_ref()),
            ("notify.levels.killed", levels.killed.as_ref()),
            ("notify.levels.timeout", levels.timeout.as_ref()),
            ("notify.levels.orphaned", levels.orphaned.as_ref()),
            ("notify.levels.lost", levels.lost.as_ref()),
        ];
        for (key, level) in named {
            if let Some(level) = level.filter(|l| !LEVELS.contains(&l.as_str())) {
                let problem = format!("`{level}` is not one of the interrupt service's levels {}", LEVELS.join(", "));
                return Err(ConfigError::bad_key(key, problem));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_gives_spec_defaults() {
        let config = Config::parse("{}").unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.logs.max_bytes, 10_485_760);
        assert_eq!(config.logs.keep, 3);
        assert_eq!(config.registry.max_jobs, 200);
        assert_eq!(config.registry.lock_timeout_ms, 5000);
        assert_eq!(config.kill.grace_ms, 5000);
        assert_eq!(config.notify.url.as_deref(), Some("http://127.0.0.1:7600/trigger"));
    }

    #[test]
    fn partial_settings_keep_other_defaults() {
        let config = Config::parse(r#"{"logs": {"keep": 1}, "notify": {"url": null}}"#).unwrap();
        assert_eq!(config.logs.keep, 1);
        assert_eq!(config.logs.max_bytes, 10_485_760);
        assert_eq!(config.notify.url, None);
    }

    #[test]
    fn errors_name_the_wrong_key() {
        let parse_error = |text| Config::parse(text).unwrap_err().to_string();
        let err = Config::parse(r#"{"logs": {"max_bytes": "big"}}"#).unwrap_err();
        assert!(matches!(&err, ConfigError::BadKey { key, .. } if key == "logs.max_bytes"), "{err}");
        let err = err.to_string();
        assert!(err.contains("logs.max_bytes"), "{err}");
        let err = parse_error(r#"{"logs": {"max_byte": 5}}"#);
        assert!(err.contains("max_byte") && err.contains("max_bytes"), "{err}");
        let err = parse_error(r#"{"registry": {"max_jobs": 0}}"#);
        assert!(err.contains("registry.max_jobs"), "{err}");
        let err = parse_error(r#"{"registry": {"lock_timeout_ms": 0}}"#);
        assert!(err.contains("registry.lock_timeout_ms"), "{err}");
        let err = parse_error(r#"{"registry": {"lock_timeout_ms": "5s"}}"#);
        assert!(err.contains("registry.lock_timeout_ms"), "{err}");
        let err = parse_error("{not json");
        assert!(err.contains("JSON"), "{err}");
        for bad in ["{} trailing", "[]", "null"] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
        assert!(parse_error(r#"{"logs": []}"#).contains("key `logs`: expected an object"));
        assert!(parse_error(r#"{"notify": {"url": "http://"}}"#).contains("notify.url"));
        let negative = r#"{"diagnostics": {"resource_tracking": {"memory_threshold_mb": -1}}}"#;
        assert!(parse_error(negative).contains("memory_threshold_mb"));
    }

    #[test]
    fn errors_read_as_they_always_did() {
        let said = |text| Config::parse(text).unwrap_err().to_string();
        assert_eq!(said(r#"{"registry": {"max_jobs": 0}}"#), "key `registry.max_jobs`: must be at least 1");
        assert_eq!(
            said(r#"{"notify": {"timeout_ms": 0}}"#),
            "key `notify.timeout_ms` / `notify.hook_timeout_ms`: must be at least 1"
        );
        assert_eq!(
            said(r#"{"notify": {"level": "loud"}}"#),
            "key `notify.level`: `loud` is not one of the interrupt service's levels info, warn, alert"
        );
        assert_eq!(said("[]"), "expected a JSON object with any of the keys logs, registry, kill, notify, diagnostics, queues");
        assert!(said("{not json").starts_with("not valid JSON: "));
    }

    #[test]
    fn the_interrupt_services_levels_are_accepted_per_outcome_and_no_others() {
        let config = Config::parse(r#"{"notify": {"level": "alert", "levels": {"success": "info"}}}"#).unwrap();
        assert_eq!((config.notify.level_for("success"), config.notify.level_for("failed")), ("info", "alert"));
        assert_eq!(Config::default().notify.level_for("lost"), "warn");
        for old in ["debug", "error"] {
            let err = Config::parse(&format!(r#"{{"notify": {{"levels": {{"timeout": "{old}"}}}}}}"#)).unwrap_err();
            assert!(matches!(&err, ConfigError::BadKey { key, .. } if key == "notify.levels.timeout"), "{err}");
            assert!(err.to_string().ends_with("levels info, warn, alert"), "{err}");
        }
        let err = Config::parse(r#"{"notify": {"levels": {"succes": "warn"}}}"#).unwrap_err().to_string();
        assert!(err.contains("succes"), "{err}");
    }

    #[test]
    fn only_a_url_named_in_config_json_counts_as_explicit() {
        assert!(!Config::parse("{}").unwrap().notify.url_explicit);
        assert!(!Config::parse(r#"{"notify": {"level": "warn"}}"#).unwrap().notify.url_explicit);
        let named = Config::parse(r#"{"notify": {"url": "http://127.0.0.1:7600/trigger"}}"#).unwrap();
        assert!(named.notify.url_explicit);
        assert!(Config::parse(r#"{"notify": {"url_explicit": true}}"#).is_err(), "not a setting");
        let through_a_spec: Config = serde_json::from_value(serde_json::to_value(&named).unwrap()).unwrap();
        assert!(through_a_spec.notify.url_explicit, "a supervisor gets it in its spec");
    }

    #[test]
    fn queues_take_a_parallel_limit_of_at_least_one_under_a_plain_name() {
        let config = Config::parse(r#"{"queues": {"heavy": {"max_parallel": 2}, "default": {"max_parallel": 4}}}"#).unwrap();
        assert_eq!(config.queues["heavy"].max_parallel, 2);
        assert_eq!(config.queues[DEFAULT_QUEUE].max_parallel, 4);
        let said = |text| Config::parse(text).unwrap_err().to_string();
        assert_eq!(said(r#"{"queues": {"q": {"max_parallel": 0}}}"#), "key `queues.q.max_parallel`: must be at least 1");
        assert!(said(r#"{"queues": {"q": {"max": 2}}}"#).contains("max_parallel"));
        assert!(said(r#"{"queues": {"a b": {"max_parallel": 1}}}"#).contains("bad queue name `a b`"));
        assert!(said(r#"{"queues": []}"#).contains("key `queues`: expected an object"));
    }

    #[cfg(unix)]
    #[test]
    fn a_config_json_that_is_a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join("planted.json");
        std::fs::write(&planted, r#"{"notify": {"command": "touch /tmp/owned"}}"#).unwrap();
        let config = dir.path().join("config.json");
        std::os::unix::fs::symlink(&planted, &config).unwrap();
        let err = Config::load(&config).expect_err("a symlinked config.json").to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
