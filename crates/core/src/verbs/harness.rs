//! What the agent harnesses' hooks ask of us (`run-bg hook <harness> <event>`),
//! whatever harness asks: record a session as it starts, tell it of its
//! jobs' ends (once each, a burst in one text), wait for those ends, and kill
//! its jobs as it ends. Each harness's own words (its hook input, how an
//! answer reaches its model) are the CLI's (`cmd/hook.rs`).

use crate::model::job::{Job, JobStatus};
use crate::store::sessions::{self, Session};
use crate::verbs::context::Context;
use crate::verbs::list::{ListFilter, SessionFilter};
use crate::{now_ms, model::text, Error, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// The harnesses whose hooks we answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    ClaudeCode,
    Codex,
    Gemini,
}

impl Harness {
    pub const ALL: [Harness; 3] = [Harness::ClaudeCode, Harness::Codex, Harness::Gemini];

    pub fn name(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
        }
    }

    pub fn parse(text: &str) -> Result<Harness> {
        Harness::ALL.into_iter().find(|h| h.name() == text).ok_or_else(|| {
            Error::Usage(format!(
                "unknown harness `{}`: give claude-code, codex or gemini",
                text::cut(&text::visible(text), 40)
            ))
        })
    }

    /// The variable a harness sets for its shell commands (and MCP servers)
    /// naming its session, when it has one.
    pub fn session_env(self) -> Option<&'static str> {
        match self {
            Harness::ClaudeCode => Some("CLAUDE_CODE_SESSION_ID"),
            Harness::Codex | Harness::Gemini => None,
        }
    }
}

/// The most a session-start context says (the issue's budget for it).
pub const START_CONTEXT_CHARS: usize = 600;

/// How long after a first end the wait goes on collecting others, so that
/// a burst of ends (or a `run-bg wait` that sees the end first) makes one
/// wake or none.
const BURST: Duration = Duration::from_millis(250);

/// A look at the registry even when no write woke us (a supervisor killed
/// without writing: the look's reconcile finds it lost).
const LOOK_EVERY: Duration = Duration::from_secs(2);

/// How long a hook that found another waiting for the session tries again,
/// in case that one is just leaving (it told, and exits).
const WAITER_HANDOFF: Duration = Duration::from_millis(300);

/// Programs that stand between a harness and the command it runs: a hook's
/// `sh -c`, a tool's `bash -c`, a launcher. The harness is the nearest
/// ancestor that is none of these.
const GO_BETWEENS: [&str; 16] = [
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox", "env", "nohup", "setsid", "cmd.exe", "cmd", "powershell.exe", "pwsh",
];

/// Whose jobs a look at a session's ends takes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobsOf {
    /// The session's own jobs.
    Session,
    /// The session's, and those of the project directory started outside
    /// any live session (left by a session that crashed or ended, or by hand).
    SessionAndProject,
}

impl Context {
    /// A session begins (or resumes): record it and the harness process
    /// running it, and say in at most `START_CONTEXT_CHARS` what of its jobs
    /// and its project's still runs or ended unseen (those told of then are
    /// not told again).
    pub fn session_started(&self, harness: Harness, id: &str, cwd: Option<&Path>) -> Result<Option<String>> {
        let process = harness_process(harness);
        let previous = sessions::load(&self.home, id);
        let session = Session {
            id: id.to_string(),
            harness: harness.name().to_string(),
            process: process.or(previous.as_ref().and_then(|p| p.process)),
            cwd: cwd.map(Path::to_path_buf).or(previous.as_ref().and_then(|p| p.cwd.clone())),
            started_at: previous.as_ref().map_or_else(now_ms, |p| p.started_at),
            // A resumed session is live again.
            ended_at: None,
        };
        sessions::save(&self.home, &session, true)?;
        let jobs = self.jobs_in_scope(&session, JobsOf::SessionAndProject)?;
        let running: Vec<&Job> = jobs.iter().filter(|j| !j.status().is_final()).collect();
        self.tell_ends(id, &jobs, |ended| start_context(&running, ended, self))
    }

    /// The ends of the session's jobs it was not told of yet (nor saw with
    /// `check` or `wait`), as one text, recorded as told. `None`: nothing new.
    pub fn untold_ends(&self, id: &str, of: JobsOf) -> Result<Option<String>> {
        let jobs = self.jobs_in_scope(&self.session_or_new(id), of)?;
        self.tell_ends(id, &jobs, |ended| wake_text(ended, self))
    }

    /// Which of `jobs` ended untold, said by `say` and recorded as told, in
    /// one step under the session's lock.
    fn tell_ends(&self, id: &str, jobs: &[Job], say: impl FnOnce(&[&Job]) -> Option<String>) -> Result<Option<String>> {
        sessions::tell_once(&self.home, id, |told| {
            let ended: Vec<&Job> = jobs.iter().filter(|j| untold_end(j, told, id)).collect();
            (ended.iter().map(|j| j.id.clone()).collect(), say(&ended))
        })
    }

    /// Waits until one of the session's jobs ends untold, then tells of it
    /// (and of every other end within `BURST`) as one text. `None` when
    /// there is nothing to wait for, another hook already waits for the
    /// session, the session ended, or `limit` passed. Only jobs that end by
    /// themselves are waited for (`awaited`): a harness waits for its
    /// waiting hook at exit (Claude Code 30 s) or holds the turn for it
    /// (Codex, Gemini CLI), which a dev server running all session long
    /// must not cost; a server's end (a crash) is told at the next hook.
    pub fn wait_for_ends(&self, id: &str, limit: Option<Duration>) -> Result<Option<String>> {
        let Some(_waiter) = self.become_waiter(id)? else { return Ok(None) };
        let deadline = limit.map(|limit| Instant::now() + limit);
        let watcher = crate::os::platform::DirWatcher::new().map_err(|e| Error::io("watch", self.home.root.clone(), e))?;
        let jobs_dir = self.home.jobs_dir();
        watcher.watch(&self.home.root);
        watcher.watch(&jobs_dir);
        watcher.watch(&sessions::dir(&self.home));
        let mut watched_jobs = std::collections::HashSet::new();
        let mut first_end: Option<Instant> = None;
        loop {
            let session = self.session_or_new(id);
            // Ended, or its harness died without saying so: nobody to wake.
            if !session.is_live() {
                return Ok(None);
            }
            let jobs = self.jobs_in_scope(&session, JobsOf::Session)?;
            for job in jobs.iter().filter(|j| !j.status().is_final()) {
                if watched_jobs.insert(job.id.clone()) {
                    watcher.watch(&self.home.job_dir(&job.id));
                }
            }
            let told = sessions::told(&self.home, id);
            let ended_untold = jobs.iter().any(|j| untold_end(j, &told, id));
            let waited_for = |j: &&Job| awaited(j);
            if ended_untold {
                let since = *first_end.get_or_insert_with(Instant::now);
                // Collect the burst; a job still running that ends within it joins.
                if since.elapsed() >= BURST || !jobs.iter().any(|j| waited_for(&j)) && since.elapsed() >= BURST / 2 {
                    // The jobs just read: no second pass over the registry.
                    if let Some(text) = self.tell_ends(id, &jobs, |ended| wake_text(ended, self))? {
                        return Ok(Some(text));
                    }
                    first_end = None;
                }
            } else {
                first_end = None;
                if !jobs.iter().any(|j| waited_for(&j)) {
                    return Ok(None);
                }
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let mut pause = LOOK_EVERY;
            if let Some(since) = first_end {
                // With nothing awaited still running the burst is over at
                // half the window: wake then, not at the whole window.
                let window = if jobs.iter().any(|j| waited_for(&j)) { BURST } else { BURST / 2 };
                pause = pause.min(window.saturating_sub(since.elapsed()).max(Duration::from_millis(10)));
            }
            if let Some(deadline) = deadline {
                pause = pause.min(deadline.saturating_duration_since(now));
            }
            crate::os::sys::pause_until_readable(pause, watcher.fd(), None, &|| false);
            for name in watcher.drain().new_dirs {
                watcher.watch(&jobs_dir.join(name));
            }
        }
    }

    /// The session ends: mark it (its waiting hook leaves) and kill its jobs'
    /// trees, but those started to outlive it. Answers the kills' messages.
    pub fn session_ended(&self, harness: Harness, id: &str, grace: Option<Duration>, kill: bool) -> Result<Vec<String>> {
        sessions::end(&self.home, id, harness.name())?;
        if !kill {
            return Ok(Vec::new());
        }
        let filter = ListFilter { all: true, owner: None, session: Some(SessionFilter::Id(id.to_string())), status: None };
        let grace = grace.map(|g| g.min(Duration::from_millis(self.config.kill.grace_ms)));
        let results = self.kill_all_where(&filter, None, grace, false, &|job| !job.outlive_session)?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                Ok(outcome) => outcome.message,
                Err((job_id, e)) => format!("{job_id}: {e}"),
            })
            .collect())
    }

    /// Whether a person sits at the session's harness (Codex's TUI, Gemini
    /// CLI without `-p`): there a turn's end that waits holds what they type
    /// (and Esc drops the wake), so it tells only what already ended. A
    /// harness run headless (`codex exec`, `gemini -p`, stdin no terminal)
    /// ends when its turn does: there the turn's end waits for the jobs.
    pub fn session_is_interactive(&self, harness: Harness, id: &str) -> bool {
        // Not known: wait for nobody rather than hold a person's prompt.
        let Some(process) = sessions::load(&self.home, id).and_then(|s| s.process) else { return true };
        let command_line = crate::os::procinfo::command_line(process.pid);
        let words: Vec<&str> = command_line.split_whitespace().collect();
        match harness {
            // The subcommand: the first word after the program that is no flag.
            Harness::Codex => !words.iter().skip(1).find(|w| !w.starts_with('-')).is_some_and(|w| matches!(*w, "exec" | "e")),
            Harness::Gemini => {
                let prompt = words.iter().any(|w| matches!(*w, "-p" | "--prompt") || w.starts_with("--prompt="));
                !prompt && crate::os::procinfo::stdin_is_terminal(process.pid).unwrap_or(true)
            }
            Harness::ClaudeCode => true,
        }
    }

    fn session_or_new(&self, id: &str) -> Session {
        sessions::load(&self.home, id).unwrap_or_else(|| Session {
            id: id.to_string(),
            harness: String::new(),
            process: None,
            cwd: None,
            started_at: now_ms(),
            ended_at: None,
        })
    }

    /// One hook waits per session; another that finds it taken tries for a
    /// moment (the holder may be leaving, having told), then leaves it be.
    fn become_waiter(&self, id: &str) -> Result<Option<std::fs::File>> {
        let started = Instant::now();
        loop {
            if let Some(lock) = sessions::try_become_waiter(&self.home, id)? {
                return Ok(Some(lock));
            }
            if started.elapsed() >= WAITER_HANDOFF {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The session's jobs, and with `SessionAndProject` the jobs under its
    /// project directory that no live session looks after: those of no
    /// session; of an ended session, the ones still running (started to
    /// outlive it, or kept by `/clear`); of a session whose harness died
    /// without ending it, those it was not told of.
    fn jobs_in_scope(&self, session: &Session, of: JobsOf) -> Result<Vec<Job>> {
        let jobs = self.list(&ListFilter { all: true, owner: None, session: None, status: None })?;
        let project = session.cwd.as_deref();
        let mut others: std::collections::HashMap<String, Option<(Session, std::collections::HashSet<String>)>> = Default::default();
        let mut in_scope = Vec::new();
        for job in jobs {
            let keep = match (&job.session, of) {
                (Some(own), _) if *own == session.id => true,
                (_, JobsOf::Session) => false,
                _ if !project.is_some_and(|dir| job.cwd.starts_with(dir)) => false,
                (None, JobsOf::SessionAndProject) => true,
                (Some(other), JobsOf::SessionAndProject) => {
                    let known = others.entry(other.clone()).or_insert_with(|| {
                        sessions::load(&self.home, other).map(|s| {
                            let told = sessions::told(&self.home, other);
                            (s, told)
                        })
                    });
                    match known {
                        None => true,
                        Some((other, _)) if other.is_live() => false,
                        Some((other, _)) if other.ended_at.is_some() => !job.status().is_final(),
                        Some((_, told)) => !told.contains(&job.id),
                    }
                }
            };
            if keep {
                in_scope.push(job);
            }
        }
        Ok(in_scope)
    }
}

/// A job that ended and that the session `session` has neither been told
/// of nor looked at (`check`, `wait` from inside the session record it as
/// told: `Context::mark_seen`). A look from elsewhere (a person's terminal)
/// does not count for the session's own jobs; for another's, any look does.
fn untold_end(job: &Job, told: &std::collections::HashSet<String>, session: &str) -> bool {
    let status = job.status();
    let own = job.session.as_deref() == Some(session);
    status.is_final() && status != JobStatus::Skipped && !told.contains(&job.id) && (own || job.seen_at.is_none())
}

/// A running job expected to end by itself while the session lasts: not a
/// server (no readiness check, no restart policy), not one started to
/// outlive the session.
fn awaited(job: &Job) -> bool {
    // Running, not paused (a paused job ends when someone resumes it) nor
    // queued (it may wait on a server that never ends).
    job.shown_status() == JobStatus::Running && job.ready.is_none() && job.restart.is_none() && !job.outlive_session
}

/// The most ends one wake names a line each; the rest are counted.
const WAKE_LINES: usize = 20;

/// The line for each ended job, as the exit notification says it (outcome,
/// duration, first error, what to run to look), one a line.
pub fn wake_text(ended: &[&Job], context: &Context) -> Option<String> {
    if ended.is_empty() {
        return None;
    }
    let mut lines: Vec<String> = ended.iter().take(WAKE_LINES).map(|job| end_line(job, context)).collect();
    if ended.len() > WAKE_LINES {
        lines.push(format!("run-bg: …and {} more jobs ended (run-bg list --session)", ended.len() - WAKE_LINES));
    }
    Some(lines.join("\n"))
}

fn end_line(job: &Job, context: &Context) -> String {
    let line = crate::supervise::notify::event_message(&context.home, job);
    if started_through_mcp(job) {
        // The model that started it through MCP looks through MCP.
        line.replace(&format!("run-bg check {}", job.id), &format!("check_job {}", job.id))
    } else {
        line
    }
}

/// The MCP server marks what it starts (`context.startedBy`).
fn started_through_mcp(job: &Job) -> bool {
    job.context.as_ref().and_then(|c| c.get("startedBy")).and_then(|v| v.as_str()) == Some("mcp")
}

/// What a session is told as it starts: jobs still running, then ended
/// ones not looked at, cut to `START_CONTEXT_CHARS`.
fn start_context(running: &[&Job], ended: &[&Job], context: &Context) -> Option<String> {
    if running.is_empty() && ended.is_empty() {
        return None;
    }
    let now = now_ms();
    let mut items: Vec<String> = Vec::new();
    for job in running {
        let command = text::cut(&text::visible(&job.command).replace('\n', " "), 50);
        let state = if job.status() == JobStatus::Orphaned { "orphaned" } else { job.shown_status().as_str() };
        items.push(format!("{} {state} {} ({command})", job.id, crate::model::duration::format_duration_ms(job.duration_ms(now))));
    }
    for job in ended {
        items.push(text::cut(end_line(job, context).trim_start_matches("run-bg: "), 200));
    }
    // No angle brackets: Gemini CLI escapes them in context (`&lt;id&gt;`).
    let head = "run-bg jobs of this session or project (run-bg check ID to look, run-bg kill ID to stop): ";
    let mut out = head.to_string();
    for (index, item) in items.iter().enumerate() {
        let rest = items.len() - index;
        let more = if rest > 1 { format!("; …and {} more (run-bg list)", rest - 1) } else { String::new() };
        let separator = if index == 0 { "" } else { "; " };
        if out.chars().count() + separator.len() + item.chars().count() + more.chars().count() > START_CONTEXT_CHARS {
            let more = format!("{separator}…and {rest} more (run-bg list)");
            out.push_str(&more);
            break;
        }
        out.push_str(separator);
        out.push_str(item);
    }
    Some(text::cut(&out, START_CONTEXT_CHARS))
}

/// The harness process a hook runs under: the one the harness names
/// (Claude Code's `CLAUDE_PID`), else the nearest ancestor that is no shell
/// or launcher between it and us.
pub fn harness_process(harness: Harness) -> Option<crate::model::job::ProcessIdentity> {
    if harness == Harness::ClaudeCode {
        if let Some(pid) = std::env::var("CLAUDE_PID").ok().and_then(|p| p.parse::<u32>().ok()).filter(|&p| p > 1) {
            if let Some(identity) = crate::os::procinfo::identify(pid) {
                return Some(identity);
            }
        }
    }
    crate::os::procinfo::ancestors(16).into_iter().find(|ancestor| !is_go_between(&crate::os::procinfo::command_line(ancestor.pid)))
}

fn is_go_between(command_line: &str) -> bool {
    let mut words = words(command_line).map(|word| word.rsplit(['/', '\\']).next().unwrap_or(word));
    let name = words.next().unwrap_or("").trim_start_matches('-');
    if GO_BETWEENS.contains(&name) {
        return true;
    }
    // `npx run-bg hook …` / `npm exec`: node running npm is a launcher too,
    // and so is the run-bg command npm links, bin/run-bg.js (a Node shim).
    let node = name == "node" || name == "node.exe";
    node && words.next().is_some_and(|script| matches!(script, "npm" | "npx" | "npm-cli.js" | "npx-cli.js" | "run-bg.js"))
}

/// A command line's words, a word in double quotes as one without them:
/// Windows command lines quote paths (`"C:\Program Files\nodejs\node.exe"`,
/// and npm's run-bg.cmd runs `"node"  "…\proc-manager\bin\run-bg.js"`).
fn words(command_line: &str) -> impl Iterator<Item = &str> {
    let mut rest = command_line;
    std::iter::from_fn(move || {
        rest = rest.trim_start();
        if rest.is_empty() {
            return None;
        }
        let (word, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => rest.split_once(char::is_whitespace).unwrap_or((rest, "")),
        };
        rest = after;
        Some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_and_npm_stand_between_a_harness_and_its_hook() {
        for go_between in [
            "/bin/sh -c run-bg hook",
            "bash -c x",
            "-bash",
            "/usr/bin/env run-bg",
            "node /usr/lib/node_modules/npm/bin/npx-cli.js run-bg",
            "node /p/node_modules/proc-manager/bin/run-bg.js hook",
            r#""node"  "C:\p\node_modules\.bin\\..\proc-manager\bin\run-bg.js" hook"#,
            r#""C:\Program Files\nodejs\node.exe" "C:\Program Files\nodejs\node_modules\npm\bin\npx-cli.js" run-bg"#,
            r#"C:\windows\system32\cmd.exe /d /s /c "run-bg hook""#,
        ] {
            assert!(is_go_between(go_between), "{go_between}");
        }
        for harness in ["/usr/bin/node --max-old-space-size=12052 /x/gemini -p hi", "/x/claude.exe -p", "/x/codex exec"] {
            assert!(!is_go_between(harness), "{harness}");
        }
        assert_eq!(Harness::parse("gemini").unwrap(), Harness::Gemini);
        assert!(Harness::parse("cursor").unwrap_err().to_string().contains("claude-code, codex or gemini"));
    }
}
