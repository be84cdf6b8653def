//! `run-bg hooks install <harness>`: our hooks merged into a harness's own
//! settings (Claude Code's and Gemini CLI's `settings.json`, Codex's
//! `hooks.json` and `config.toml`), leaving every other key and hook as it
//! was; run again, it changes nothing; `--remove` takes out only ours.

use crate::verbs::harness::Harness;
use crate::{Error, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Where the hooks go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The user's settings: every project.
    User,
    /// One project's (its directory).
    Project(PathBuf),
}

/// How long a turn's end (Codex's `Stop`, Gemini CLI's `AfterAgent`) waits
/// for the session's jobs to end before it lets the turn end anyway.
pub const DEFAULT_TURN_WAIT: &str = "10m";

/// One file to write, as it was and as it is to be.
#[derive(Debug, Clone)]
pub struct Change {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: String,
}

impl Change {
    pub fn changes(&self) -> bool {
        self.before.as_deref() != Some(self.after.as_str())
    }
}

/// What an install or removal writes: the settings files, and for Codex
/// whether its hooks still need trusting.
#[derive(Debug, Clone)]
pub struct Plan {
    pub harness: Harness,
    pub changes: Vec<Change>,
    /// The events whose hooks are ours after the change.
    pub events: Vec<&'static str>,
}

fn home_dir() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Error::Usage("neither HOME nor USERPROFILE is set: cannot find the user's settings; give --project".into()))
}

/// The settings file the hooks go into.
pub fn settings_path(harness: Harness, scope: &Scope) -> Result<PathBuf> {
    Ok(match (harness, scope) {
        (Harness::ClaudeCode, Scope::User) => match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("settings.json"),
            None => home_dir()?.join(".claude").join("settings.json"),
        },
        (Harness::ClaudeCode, Scope::Project(dir)) => dir.join(".claude").join("settings.json"),
        (Harness::Gemini, Scope::User) => home_dir()?.join(".gemini").join("settings.json"),
        (Harness::Gemini, Scope::Project(dir)) => dir.join(".gemini").join("settings.json"),
        (Harness::Codex, Scope::User) => codex_home()?.join("hooks.json"),
        (Harness::Codex, Scope::Project(dir)) => dir.join(".codex").join("hooks.json"),
    })
}

pub fn codex_home() -> Result<PathBuf> {
    match std::env::var_os("CODEX_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home_dir()?.join(".codex")),
    }
}

/// A word for a shell command line (`sh -c`, `bash -c`): as it is when it
/// needs no quoting, else in single quotes.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Whether a hook's command is one of ours for `harness`.
fn is_ours(command: &str, harness: Harness) -> bool {
    command.contains("run-bg") && command.contains(&format!(" hook {} ", harness.name()))
}

/// Our hooks for `harness`: (event, the hook group to add).
fn our_hooks(harness: Harness, exe: &str, turn_wait: &str) -> Vec<(&'static str, Value)> {
    let command = |event: &str| format!("{} hook {} {event}", shell_word(exe), harness.name());
    // A turn's end waits up to `turn_wait`: its hook's own timeout must be longer.
    let wait_seconds = crate::model::duration::parse_duration_ms(turn_wait).unwrap_or(600_000) / 1000 + 60;
    match harness {
        Harness::ClaudeCode => vec![
            ("SessionStart", json!({"hooks": [{"type": "command", "command": command("session-start"), "timeout": 10}]})),
            // In the background (async), waking the model when it exits 2
            // (asyncRewake): after a tool that may have started a job…
            (
                "PostToolUse",
                json!({"matcher": "Bash|mcp__.*__run_background", "hooks": [{"type": "command", "command": command("post-tool-use"),
                    "async": true, "asyncRewake": true, "timeout": 86400}]}),
            ),
            // …and at each turn's end, for the jobs still running then.
            ("Stop", json!({"hooks": [{"type": "command", "command": command("stop"), "async": true, "asyncRewake": true, "timeout": 86400}]})),
            // Given 1.5 s unless it asks for more: a kill's grace needs more.
            ("SessionEnd", json!({"hooks": [{"type": "command", "command": command("session-end"), "timeout": 30}]})),
        ],
        Harness::Codex => vec![
            ("SessionStart", json!({"hooks": [{"type": "command", "command": command("session-start"), "timeout": 30}]})),
            // In the TUI a turn's end does not wait: the next prompt is told.
            ("UserPromptSubmit", json!({"hooks": [{"type": "command", "command": command("user-prompt-submit"), "timeout": 30}]})),
            (
                "Stop",
                json!({"hooks": [{"type": "command", "command": format!("{} --wait {turn_wait}", command("stop")), "timeout": wait_seconds}]}),
            ),
            // Codex clamps a SessionEnd hook to 3 s.
            ("SessionEnd", json!({"hooks": [{"type": "command", "command": command("session-end"), "timeout": 3}]})),
        ],
        Harness::Gemini => vec![
            (
                "SessionStart",
                json!({"hooks": [{"name": "run-bg-session-start", "type": "command", "command": command("session-start"), "timeout": 10_000}]}),
            ),
            (
                "BeforeAgent",
                json!({"hooks": [{"name": "run-bg-before-agent", "type": "command", "command": command("before-agent"), "timeout": 10_000}]}),
            ),
            (
                "AfterAgent",
                json!({"hooks": [{"name": "run-bg-after-agent", "type": "command", "command": format!("{} --wait {turn_wait}", command("after-agent")),
                    "timeout": wait_seconds * 1000}]}),
            ),
            (
                "SessionEnd",
                json!({"hooks": [{"name": "run-bg-session-end", "type": "command", "command": command("session-end"), "timeout": 30_000}]}),
            ),
        ],
    }
}

/// `hooks` of a settings object with ours for `harness` taken out: hooks of
/// ours dropped from each group, groups left empty dropped, events left
/// empty dropped. Whatever else is there stays.
fn without_ours(hooks: &mut serde_json::Map<String, Value>, harness: Harness) {
    for groups in hooks.values_mut() {
        let Some(groups) = groups.as_array_mut() else { continue };
        for group in groups.iter_mut() {
            if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                list.retain(|hook| !hook.get("command").and_then(Value::as_str).is_some_and(|c| is_ours(c, harness)));
            }
        }
        groups.retain(|group| group.get("hooks").and_then(Value::as_array).is_none_or(|list| !list.is_empty()));
    }
    hooks.retain(|_, groups| groups.as_array().is_none_or(|groups| !groups.is_empty()));
}

fn read_settings(path: &Path) -> Result<(Option<String>, serde_json::Map<String, Value>)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, serde_json::Map::new())),
        Err(e) => return Err(Error::io("read the settings", path, e)),
    };
    if text.trim().is_empty() {
        return Ok((Some(text), serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok((Some(text), map)),
        Ok(_) => Err(Error::Usage(format!("{} is not a JSON object: fix it by hand first, nothing was changed", path.display()))),
        Err(e) => Err(Error::Usage(format!(
            "{} is not valid JSON ({e}): fix it by hand first, nothing was changed (comments are not read: JSON only)",
            path.display()
        ))),
    }
}

/// The change that installs (or with `remove`, removes) our hooks.
pub fn plan(harness: Harness, scope: &Scope, exe: &Path, turn_wait: &str, remove: bool) -> Result<Plan> {
    let exe = exe.to_str().ok_or_else(|| Error::Other(format!("the run-bg executable's path is not UTF-8: {}", exe.display())))?;
    let path = settings_path(harness, scope)?;
    let (before, mut settings) = read_settings(&path)?;
    let hooks_value = settings.entry("hooks").or_insert_with(|| Value::Object(Default::default()));
    let Some(hooks) = hooks_value.as_object_mut() else {
        return Err(Error::Usage(format!("`hooks` in {} is not an object: fix it by hand first, nothing was changed", path.display())));
    };
    without_ours(hooks, harness);
    let mut events = Vec::new();
    if !remove {
        for (event, group) in our_hooks(harness, exe, turn_wait) {
            let groups = hooks.entry(event).or_insert_with(|| Value::Array(Vec::new()));
            match groups.as_array_mut() {
                Some(groups) => groups.push(group),
                None => {
                    return Err(Error::Usage(format!(
                        "`hooks.{event}` in {} is not an array: fix it by hand first, nothing was changed",
                        path.display()
                    )))
                }
            }
            events.push(event);
        }
    }
    if hooks.is_empty() {
        settings.remove("hooks");
    }
    let mut after = serde_json::to_string_pretty(&Value::Object(settings)).map_err(|e| Error::Other(format!("encode settings: {e}")))?;
    after.push('\n');
    let mut changes = vec![Change { path, before, after }];
    if harness == Harness::Codex && !remove {
        changes.push(codex_features(&codex_home()?.join("config.toml"))?);
    }
    // Nothing to remove from a file that does not exist: leave it absent.
    changes.retain(|c| !(remove && c.before.is_none()));
    Ok(Plan { harness, changes, events })
}

/// Codex reads hooks only with `[features] hooks = true` in its config.toml:
/// set that line, keeping the rest of the file as it is.
fn codex_features(path: &Path) -> Result<Change> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read Codex's config", path, e)),
    };
    let text = before.clone().unwrap_or_default();
    Ok(Change { path: path.to_path_buf(), before, after: with_hooks_feature(&text) })
}

/// `text` (a config.toml) with `hooks = true` in its `[features]` table.
fn with_hooks_feature(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let is_table = |line: &str| line.trim_start().starts_with('[');
    let key_of = |line: &str| line.split('=').next().map(|k| k.trim().trim_matches('"').to_string());
    let mut out: Vec<String> = Vec::new();
    let mut in_features = false;
    let mut done = false;
    for (index, line) in lines.iter().enumerate() {
        if is_table(line) {
            if in_features && !done {
                out.push("hooks = true".into());
                done = true;
            }
            in_features = line.trim() == "[features]";
        }
        let in_root = !lines[..index].iter().any(|l| is_table(l));
        let sets_hooks = (in_features && key_of(line).as_deref() == Some("hooks")) || (in_root && key_of(line).as_deref() == Some("features.hooks"));
        if sets_hooks && line.contains('=') && !line.trim_start().starts_with('#') {
            if !done {
                out.push(if in_root { "features.hooks = true".into() } else { "hooks = true".into() });
                done = true;
            }
            continue;
        }
        out.push(line.to_string());
    }
    if in_features && !done {
        out.push("hooks = true".into());
        done = true;
    }
    if !done {
        if out.last().is_some_and(|l| !l.trim().is_empty()) {
            out.push(String::new());
        }
        out.push("[features]".into());
        out.push("hooks = true".into());
    }
    let mut joined = out.join("\n");
    joined.push('\n');
    joined
}

/// The keys Codex knows our hooks by (`<hooks.json>:<event>:<group>:<handler>`,
/// the event in snake case), as the plan leaves the file.
pub fn codex_hook_keys(plan: &Plan) -> Vec<String> {
    let Some(change) = plan.changes.first() else { return Vec::new() };
    let Ok(Value::Object(settings)) = serde_json::from_str::<Value>(&change.after) else { return Vec::new() };
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else { return Vec::new() };
    let path = change.path.display().to_string();
    let mut keys = Vec::new();
    for (event, groups) in hooks {
        let snake = event.chars().enumerate().fold(String::new(), |mut s, (i, c)| {
            if c.is_ascii_uppercase() && i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
            s
        });
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            for (h, hook) in group.get("hooks").and_then(Value::as_array).into_iter().flatten().enumerate() {
                if hook.get("command").and_then(Value::as_str).is_some_and(|c| is_ours(c, Harness::Codex)) {
                    keys.push(format!("{path}:{snake}:{g}:{h}"));
                }
            }
        }
    }
    keys
}

/// Writes each change (a temporary file renamed over the old one; the
/// directory made if need be).
pub fn apply(plan: &Plan) -> Result<()> {
    for change in plan.changes.iter().filter(|c| c.changes()) {
        if let Some(dir) = change.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create the settings directory", dir, e))?;
        }
        let temp = change.path.with_extension(format!("run-bg-{}.tmp", std::process::id()));
        std::fs::write(&temp, &change.after)
            .and_then(|()| std::fs::rename(&temp, &change.path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&temp);
                Error::io("write the settings", &change.path, e)
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_features_table_gets_hooks_true_and_nothing_else_changes() {
        assert_eq!(with_hooks_feature(""), "[features]\nhooks = true\n");
        assert_eq!(with_hooks_feature("model = \"x\"\n"), "model = \"x\"\n\n[features]\nhooks = true\n");
        assert_eq!(with_hooks_feature("[features]\nhooks = false\nother = 1\n"), "[features]\nhooks = true\nother = 1\n");
        assert_eq!(with_hooks_feature("[features]\nother = 1\n[x]\ny = 2\n"), "[features]\nother = 1\nhooks = true\n[x]\ny = 2\n");
        assert_eq!(with_hooks_feature("features.hooks = false\n[x]\n"), "features.hooks = true\n[x]\n");
        let once = with_hooks_feature("a = 1\n");
        assert_eq!(with_hooks_feature(&once), once, "idempotent");
    }

    #[test]
    fn ours_are_replaced_and_removed_leaving_the_users_hooks() {
        let mut hooks: serde_json::Map<String, Value> = serde_json::from_value(json!({
            "Stop": [{"hooks": [{"type": "command", "command": "/x/run-bg hook claude-code stop"}, {"type": "command", "command": "say done"}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "'/a b/run-bg' hook claude-code session-end"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/x/run-bg hook gemini stop"}]}]
        }))
        .unwrap();
        without_ours(&mut hooks, Harness::ClaudeCode);
        assert_eq!(
            Value::Object(hooks),
            json!({"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
                   "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/x/run-bg hook gemini stop"}]}]})
        );
        assert_eq!(shell_word("/a b/run-bg"), "'/a b/run-bg'");
        assert_eq!(shell_word("/usr/lib/node_modules/proc-manager/native/run-bg"), "/usr/lib/node_modules/proc-manager/native/run-bg");
    }
}
