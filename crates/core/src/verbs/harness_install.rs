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
        // The hooks name this machine's run-bg by its path: the project's
        // local settings, which are not committed, not its shared ones.
        (Harness::ClaudeCode, Scope::Project(dir)) => dir.join(".claude").join("settings.local.json"),
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

fn hook_is_ours(hook: &Value, harness: Harness) -> bool {
    hook.get("command").and_then(Value::as_str).is_some_and(|c| is_ours(c, harness))
}

fn group_is_ours(group: &Value, harness: Harness) -> bool {
    group.get("hooks").and_then(Value::as_array).is_some_and(|list| list.iter().any(|h| hook_is_ours(h, harness)))
}

/// `hooks` of a settings object with ours for `harness` taken out: hooks of
/// ours dropped from each group, and the groups and events that only ours
/// made up. Whatever else is there stays, empty or not.
fn without_ours(hooks: &mut serde_json::Map<String, Value>, harness: Harness) {
    let mut emptied = Vec::new();
    for (event, groups) in hooks.iter_mut() {
        let Some(groups) = groups.as_array_mut() else { continue };
        let before = groups.len();
        groups.retain_mut(|group| {
            let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) else { return true };
            let had = list.len();
            list.retain(|hook| !hook_is_ours(hook, harness));
            // A group that held only ours goes with them.
            !(had > 0 && list.is_empty())
        });
        if before > 0 && groups.is_empty() {
            emptied.push(event.clone());
        }
    }
    for event in emptied {
        hooks.remove(&event);
    }
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
    // Where ours stood, per event: a new one takes its place, so the groups
    // after it keep their index (Codex keys each hook's trust by it).
    let places: std::collections::HashMap<String, usize> = hooks
        .iter()
        .filter_map(|(event, groups)| Some((event.clone(), groups.as_array()?.iter().position(|g| group_is_ours(g, harness))?)))
        .collect();
    without_ours(hooks, harness);
    let mut events = Vec::new();
    if !remove {
        for (event, group) in our_hooks(harness, exe, turn_wait) {
            let groups = hooks.entry(event).or_insert_with(|| Value::Array(Vec::new()));
            match groups.as_array_mut() {
                Some(groups) => {
                    let at = places.get(event).copied().unwrap_or(groups.len()).min(groups.len());
                    groups.insert(at, group)
                }
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

/// Codex's config.toml with its hooks on (`with_hooks_feature`), the rest
/// of the file as it was.
fn codex_features(path: &Path) -> Result<Change> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read Codex's config", path, e)),
    };
    let text = before.clone().unwrap_or_default();
    Ok(Change { path: path.to_path_buf(), before, after: with_hooks_feature(&text) })
}

/// `text` (a config.toml) with Codex's hooks on. Codex 0.171 runs hooks
/// unless `hooks = false`: an explicit `false` (in `[features]`, or
/// `features.hooks` at the top) becomes `true`; a file that says nothing of
/// features at all gets `[features] hooks = true` (older versions want it).
/// Anything else (features set inline, in dotted keys, in a form this does
/// not read with certainty) is left as it is: writing a second `[features]`
/// would make the file one Codex refuses. Line endings are kept.
fn with_hooks_feature(text: &str) -> String {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let lines: Vec<&str> = text.lines().collect();
    // A table header: `[features]`, `[ features ]  # note`; not `[[x]]` nor
    // a line inside a multi-line string or array (those do not start a line
    // with `[name]` followed by nothing but a comment).
    let header = |line: &str| -> Option<String> {
        let line = line.trim_start_matches('\u{feff}').trim();
        let (head, rest) = line.strip_prefix('[')?.split_once(']')?;
        let rest = rest.trim();
        (!head.starts_with('[') && (rest.is_empty() || rest.starts_with('#'))).then(|| head.trim().trim_matches('"').to_string())
    };
    let key_value = |line: &str| -> Option<(String, String)> {
        let line = line.trim();
        if line.starts_with('#') {
            return None;
        }
        let (key, value) = line.split_once('=')?;
        let value = value.split('#').next().unwrap_or("").trim().to_string();
        Some((key.trim().trim_matches('"').to_string(), value))
    };
    let mut table: Option<String> = None;
    let mut mentions_features = false;
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 2);
    for line in &lines {
        if let Some(name) = header(line) {
            mentions_features |= name == "features" || name.starts_with("features.");
            table = Some(name);
            out.push(line.to_string());
            continue;
        }
        let kv = key_value(line);
        if let Some((key, _)) = &kv {
            mentions_features |= table.is_none() && (key == "features" || key.starts_with("features."));
        }
        let is_false_hooks = match (&table, &kv) {
            (Some(t), Some((k, v))) => t == "features" && k == "hooks" && v == "false",
            (None, Some((k, v))) => k == "features.hooks" && v == "false",
            _ => false,
        };
        if is_false_hooks {
            let indent = &line[..line.len() - line.trim_start().len()];
            let key = if table.is_none() { "features.hooks" } else { "hooks" };
            out.push(format!("{indent}{key} = true"));
        } else {
            out.push(line.to_string());
        }
    }
    if !mentions_features {
        if out.last().is_some_and(|l| !l.trim().is_empty()) {
            out.push(String::new());
        }
        out.push("[features]".into());
        out.push("hooks = true".into());
    }
    let mut joined = out.join(newline);
    joined.push_str(newline);
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
        // A settings file kept elsewhere and linked here (dotfiles) is
        // written where it lives; the link stays a link.
        let path = std::fs::canonicalize(&change.path).unwrap_or_else(|_| change.path.clone());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create the settings directory", dir, e))?;
        }
        // Its mode is kept (a 0600 file holding tokens stays 0600); a new one is the user's alone.
        let permissions = std::fs::metadata(&path).ok().map(|m| m.permissions());
        let temp = path.with_extension(format!("run-bg-{}.tmp", std::process::id()));
        let written = (|| {
            use crate::os::sys::OpenOptionsExt;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true).mode(0o600);
            let mut file = options.open(&temp)?;
            std::io::Write::write_all(&mut file, change.after.as_bytes())?;
            if let Some(permissions) = &permissions {
                file.set_permissions(permissions.clone())?;
            }
            file.sync_all()?;
            std::fs::rename(&temp, &path)
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            Error::io("write the settings", &path, e)
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
        assert_eq!(with_hooks_feature("[ features ] # mine\n  hooks = false # no\r\n"), "[ features ] # mine\r\n  hooks = true\r\n");
        // A features table that says nothing of hooks: on by default, left alone.
        for kept in ["[features]\nother = 1\n[x]\ny = 2\n", "features = { other = true }\n", "features.x = 1\n", "[features.sub]\na = 1\n", "[\"features\"]\na = 1\n"] {
            assert_eq!(with_hooks_feature(kept), kept, "{kept}");
        }
        assert_eq!(with_hooks_feature("features.hooks = false\n[x]\n"), "features.hooks = true\n[x]\n");
        // A `[` line inside a multi-line array is no table.
        assert_eq!(with_hooks_feature("a = [\n[1, 2],\n]\n"), "a = [\n[1, 2],\n]\n\n[features]\nhooks = true\n");
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
