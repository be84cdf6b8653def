//! `run-bg hook <harness> <event>`: what an agent harness's hook runs. It
//! reads the harness's hook input (JSON on stdin) and answers in that
//! harness's words. It never fails the harness: whatever goes wrong is a
//! line in `<home>/harness-hooks.log` and a silent exit 0, never a blocked
//! tool or a turn held for nothing.
//!
//! `run-bg hooks install|remove <harness>`: puts those hooks in the
//! harness's settings (or takes them out).

use proc_manager_core::store::sessions;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::harness::{Harness, JobsOf};
use proc_manager_core::verbs::harness_install::{self, Plan};
use proc_manager_core::{Error, Result};
use std::io::{Read, Write};
use std::time::Duration;

/// A hook's input is a small JSON object; a tool's whole output may ride
/// along in it (`tool_response`): read that much at most.
const MAX_INPUT: u64 = 16 * 1024 * 1024;

/// The log of what hooks could not do is cut back once it grows past this.
const MAX_LOG: u64 = 1024 * 1024;

/// The events each harness's hooks call us for.
fn events(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::ClaudeCode => &["session-start", "post-tool-use", "stop", "user-prompt-submit", "session-end"],
        Harness::Codex => &["session-start", "stop", "user-prompt-submit", "session-end"],
        Harness::Gemini => &["session-start", "before-agent", "after-agent", "session-end"],
    }
}

/// The answer a hook gives: text for the model, and how this harness takes it.
enum Answer {
    /// Nothing to say: exit 0, no output.
    Quiet,
    /// Context for the model, where the event takes it (session start, a prompt).
    Context(&'static str, String),
    /// Wake the model with this text (a new turn, or the turn goes on).
    Wake(String),
}

/// `run-bg hook …` from `main`, before anything else is set up: bad
/// arguments and panics are logged and answered with exit 0 too.
pub fn run_guarded(args: &[std::ffi::OsString]) -> i32 {
    #[derive(clap::Parser)]
    #[command(name = "run-bg hook")]
    struct HookArgs {
        harness: String,
        event: String,
        #[arg(long, value_name = "DUR")]
        wait: Option<String>,
    }
    use clap::Parser;
    let parsed = match HookArgs::try_parse_from(args.iter().skip(1)) {
        Ok(parsed) => parsed,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            log(&format!("bad arguments: {}", e.render().to_string().lines().next().unwrap_or_default()));
            return 0;
        }
    };
    std::panic::catch_unwind(|| run(&parsed.harness, &parsed.event, parsed.wait.as_deref())).unwrap_or_else(|_| {
        log(&format!("{} {}: panicked", parsed.harness, parsed.event));
        0
    })
}

pub fn run(harness: &str, event: &str, wait: Option<&str>) -> i32 {
    let started = std::time::Instant::now();
    let outcome = (|| -> Result<(Harness, Answer)> {
        let harness = Harness::parse(harness)?;
        if !events(harness).contains(&event) {
            return Err(Error::Usage(format!("{} has no hook event `{event}` of ours: give one of {}", harness.name(), events(harness).join(", "))));
        }
        let wait = crate::face::parse_dur("--wait", &wait.map(str::to_string))?;
        let mut input = Vec::new();
        std::io::stdin().take(MAX_INPUT).read_to_end(&mut input).map_err(|e| Error::Other(format!("read the hook's input: {e}")))?;
        let input: serde_json::Value = serde_json::from_slice(&input).map_err(|e| Error::Other(format!("the hook's input is not JSON: {e}")))?;
        let context = crate::context::load()?;
        answer(&context, harness, event, &input, wait).map(|answer| (harness, answer))
    })();
    match outcome {
        Ok((harness, answer)) => speak(harness, answer),
        Err(e) => {
            log(&format!("{harness} {event}: {e} (after {} ms)", started.elapsed().as_millis()));
            0
        }
    }
}

fn session_id(harness: Harness, input: &serde_json::Value) -> Result<String> {
    let id = input
        .get("session_id")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .or_else(|| (harness == Harness::Gemini).then(|| std::env::var("GEMINI_SESSION_ID").ok()).flatten())
        .ok_or_else(|| Error::Other("the hook's input has no session_id".into()))?;
    sessions::check_id(&id).map_err(Error::Other)?;
    Ok(id)
}

fn answer(context: &Context, harness: Harness, event: &str, input: &serde_json::Value, wait: Option<Duration>) -> Result<Answer> {
    let id = session_id(harness, input)?;
    let cwd = input.get("cwd").and_then(|v| v.as_str()).filter(|c| !c.is_empty()).map(std::path::PathBuf::from);
    let context_for = |text: Option<String>, event_name: &'static str| text.map_or(Answer::Quiet, |t| Answer::Context(event_name, t));
    Ok(match (harness, event) {
        (_, "session-start") => context_for(context.session_started(harness, &id, cwd.as_deref())?, "SessionStart"),
        (Harness::Gemini, "before-agent") => context_for(context.untold_ends(&id, JobsOf::Session)?, "BeforeAgent"),
        (_, "user-prompt-submit") => context_for(context.untold_ends(&id, JobsOf::Session)?, "UserPromptSubmit"),
        // Claude Code runs these in the background and wakes its model
        // when they exit 2: wait as long as any job of the session runs.
        (Harness::ClaudeCode, "post-tool-use" | "stop") => context.wait_for_ends(&id, None)?.map_or(Answer::Quiet, Answer::Wake),
        // A turn's end that the harness waits for: tell of ends not told
        // yet, else wait (up to --wait) for the jobs that will end by
        // themselves, not for servers.
        (Harness::Codex, "stop") | (Harness::Gemini, "after-agent") => match context.untold_ends(&id, JobsOf::Session)? {
            Some(text) => Answer::Wake(text),
            // A person at the harness: the next prompt hears of it instead.
            None if context.session_is_interactive(harness, &id) => Answer::Quiet,
            None => context.wait_for_ends(&id, Some(wait.unwrap_or(Duration::from_secs(600))))?.map_or(Answer::Quiet, Answer::Wake),
        },
        (_, "session-end") => {
            // Codex gives a session-end hook 3 s in all: the grace fits in it.
            let grace = (harness == Harness::Codex).then(|| Duration::from_millis(1500));
            // `/clear` ends the session but not the work: the jobs run on,
            // and the session that follows is told of them as it starts.
            let cleared = input.get("reason").and_then(|r| r.as_str()) == Some("clear");
            for line in context.session_ended(harness, &id, grace, !cleared)? {
                log(&format!("{} session-end {id}: {line}", harness.name()));
            }
            Answer::Quiet
        }
        _ => Answer::Quiet,
    })
}

/// Says `answer` as `harness` takes it; the exit code.
fn speak(harness: Harness, answer: Answer) -> i32 {
    let out = |text: String| {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.write_all(b"\n")).and_then(|()| stdout.flush());
    };
    match answer {
        Answer::Quiet => 0,
        Answer::Context(event_name, text) => {
            out(serde_json::json!({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}).to_string());
            0
        }
        Answer::Wake(text) => match harness {
            // Gemini CLI reads the decision from stdout, whatever the exit code.
            Harness::Gemini => {
                out(serde_json::json!({"decision": "block", "reason": text}).to_string());
                0
            }
            // Claude Code (asyncRewake) and Codex (Stop) hand a hook's
            // stderr to the model when it exits 2.
            Harness::ClaudeCode | Harness::Codex => {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(text.as_bytes()).and_then(|()| stderr.write_all(b"\n"));
                2
            }
        },
    }
}

/// A line in `<home>/harness-hooks.log`, where hook failures go instead of
/// the harness's screen; cut back to its last half once over `MAX_LOG`.
fn log(line: &str) {
    let Ok(root) = proc_manager_core::store::paths::Home::resolve_root() else { return };
    let path = root.join("harness-hooks.log");
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_LOG) {
        if let Ok(bytes) = std::fs::read(&path) {
            let keep = &bytes[bytes.len() / 2..];
            let start = keep.iter().position(|&b| b == b'\n').map_or(0, |at| at + 1);
            let _ = std::fs::write(&path, &keep[start..]);
        }
    }
    let mut options = proc_manager_core::store::paths::options_nofollow();
    {
        use proc_manager_core::os::sys::OpenOptionsExt;
        options.create(true).append(true).mode(0o600);
    }
    if let Ok(mut file) = options.open(&path) {
        let stamp = proc_manager_core::now_ms();
        let _ = writeln!(file, "{stamp} {}", proc_manager_core::model::text::visible(line));
    }
}

/// `run-bg hooks install|remove <harness> [--project [DIR] | --user] [--dry-run]`.
pub fn install(harness: &str, project: Option<Option<std::path::PathBuf>>, remove: bool, dry_run: bool, wait: Option<&str>, trust: bool) -> Result<i32> {
    let harness = Harness::parse(harness)?;
    let cwd = || std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e));
    let scope = match project {
        // Absolute: Codex names a hook by its file's absolute path.
        Some(Some(dir)) if dir.is_absolute() => harness_install::Scope::Project(dir),
        Some(Some(dir)) => harness_install::Scope::Project(cwd()?.join(dir)),
        Some(None) => harness_install::Scope::Project(cwd()?),
        None => harness_install::Scope::User,
    };
    if wait.is_some() && harness == Harness::ClaudeCode {
        return Err(Error::Usage(
            "--wait is for codex and gemini, whose turn's end waits for the jobs; Claude Code's hooks wait in the background and are woken at the end".into(),
        ));
    }
    let turn_wait = wait.unwrap_or(harness_install::DEFAULT_TURN_WAIT);
    proc_manager_core::model::duration::parse_duration_ms(turn_wait).map_err(|e| Error::Usage(format!("--wait: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("find own executable", "/proc/self/exe", e))?;
    let plan = harness_install::plan(harness, &scope, &exe, turn_wait, remove)?;
    if dry_run {
        for change in &plan.changes {
            if change.changes() {
                outln!("would write {}:", change.path.display());
                outln!("{}", change.after.trim_end());
            } else {
                outln!("{}: unchanged", change.path.display());
            }
        }
        return Ok(0);
    }
    harness_install::apply(&plan)?;
    say_done(&plan, remove);
    if harness == Harness::Codex && !remove {
        codex_trust(&plan, &scope, trust);
    }
    Ok(0)
}

fn say_done(plan: &Plan, remove: bool) {
    for change in &plan.changes {
        let what = match (remove, change.changes()) {
            (_, false) => "unchanged (already so)",
            (true, true) => "removed run-bg's hooks",
            (false, true) => "written",
        };
        outln!("{}: {what}", change.path.display());
    }
    if !remove {
        outln!("{} now runs run-bg's hooks on {}; a job started in a session wakes it when it ends, and the session's end kills its jobs (--outlive-session keeps one)", plan.harness.name(), plan.events.join(", "));
    }
}

/// Codex runs a hook only once its user trusted it (`/hooks` in its TUI):
/// ask its app server to record that trust for our hooks, as `/hooks` would.
fn codex_trust(plan: &Plan, scope: &harness_install::Scope, trust: bool) {
    let how = "Codex runs hooks only once trusted: approve them in codex's /hooks screen, or run `codex exec --dangerously-bypass-hook-trust`";
    if !trust {
        outln!("note: not trusted (--no-trust). {how}");
        return;
    }
    let cwd = match scope {
        harness_install::Scope::Project(dir) => dir.clone(),
        harness_install::Scope::User => std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from(".")),
    };
    let keys = harness_install::codex_hook_keys(plan);
    match super::codex_trust::trust(&cwd, &keys) {
        Ok(trust) if !trust.missing.is_empty() => {
            outln!("note: codex does not list {} of run-bg's hooks ({}). {how}", trust.missing.len(), trust.missing.join(", "))
        }
        Ok(trust) if trust.marked == 0 => outln!("codex: run-bg's {} hooks were already trusted", keys.len()),
        Ok(trust) => outln!("codex: trusted run-bg's {} hook(s) (as its /hooks screen does)", trust.marked),
        Err(e) => outln!("note: could not mark the hooks trusted ({e}). {how}"),
    }
}
