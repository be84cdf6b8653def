//! Agent harness sessions (Claude Code, Codex, Gemini CLI) as the home keeps
//! them: which session a job belongs to, which harness process runs each
//! session, when it ended, and which job ends it was already told of.
//!
//! Layout, under `<home>/sessions/`:
//! - `<id>.json`: the session (`Session`), written by its hooks;
//! - `<id>.told`: the ids of the jobs whose end the session was told of, one
//!   a line, appended under `<id>.lock` so that each end is told once;
//! - `<id>.waiter`: held (flock) by the one hook that waits for the
//!   session's jobs to end, so a second waiter knows to leave it be;
//! - `by-process/<pid>-<start>`: the id of the newest session the harness
//!   process `<pid>` (started at `<start>`) runs. A job started by a process
//!   below it (a tool's shell, an MCP server) belongs to that session.

use crate::model::job::ProcessIdentity;
use crate::store::paths::{create_private_dir_all, Home};
use crate::{now_ms, Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// The environment variable that names the caller's session over any a
/// harness sets itself (for a user's own scripts and tests).
pub const SESSION_ENV: &str = "RUN_BG_SESSION";

/// How far up from the caller the harness process is looked for: a tool's
/// shell, `npx`, `node`, the launcher… a harness sits a few levels up.
const ANCESTORS_LOOKED_AT: usize = 24;

/// The longest session id kept (the harnesses' are UUIDs, 36 characters).
const MAX_ID_LEN: usize = 128;

/// A session as given to `--session` / `session` at a start: an id,
/// `none`, or `current` (found as when none is given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChoice {
    Id(String),
    None,
    Current,
}

/// Words that are no session id: `--session none`, `--session current`.
pub const RESERVED: [&str; 2] = ["none", "current"];

impl SessionChoice {
    /// `option` is the option's name as the face spells it (`--session`).
    pub fn parse(option: &str, text: &str) -> Result<SessionChoice> {
        match text {
            "none" => return Ok(SessionChoice::None),
            "current" => return Ok(SessionChoice::Current),
            _ => {}
        }
        check_id(text).map(|()| SessionChoice::Id(text.to_string())).map_err(|why| Error::Usage(format!("{option}: {why}")))
    }
}

/// Session ids become file names: 1 to 128 of `A-Z a-z 0-9 . _ : -`, not
/// starting with a dot.
pub fn check_id(text: &str) -> std::result::Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if text.is_empty() || text.len() > MAX_ID_LEN || text.starts_with('.') || !text.chars().all(allowed) || RESERVED.contains(&text) {
        return Err(format!(
            "bad session id `{}`: give 1 to {MAX_ID_LEN} of A-Z a-z 0-9 . _ : - (not starting with a dot), `none` or `current`",
            crate::model::text::cut(&crate::model::text::visible(text), 80)
        ));
    }
    Ok(())
}

/// One harness session, as its hooks recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    /// `claude-code`, `codex` or `gemini`.
    pub harness: String,
    /// The harness process running it, when one was found above the hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessIdentity>,
    /// The project directory the harness said it works in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    pub started_at: u64,
    /// When its session-end hook ran; the waiting hook leaves then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}

impl Session {
    /// Not ended by its hook, and its harness process (when known) still
    /// runs: a harness killed outright (SIGKILL, a crash) runs no
    /// session-end hook.
    pub fn is_live(&self) -> bool {
        self.ended_at.is_none() && self.process.as_ref().is_none_or(crate::os::procinfo::is_same_process_alive)
    }
}

pub fn dir(home: &Home) -> PathBuf {
    home.root.join("sessions")
}

fn file(home: &Home, id: &str, extension: &str) -> PathBuf {
    dir(home).join(format!("{id}.{extension}"))
}

pub fn waiter_lock_path(home: &Home, id: &str) -> PathBuf {
    file(home, id, "waiter")
}

/// A file of ours in the sessions directory, created if need be (owner
/// only), never through a symlink; emptied first when `truncate`.
fn create(path: &std::path::Path, truncate: bool) -> std::io::Result<File> {
    use crate::os::sys::OpenOptionsExt;
    let mut options = crate::store::paths::options_nofollow();
    options.write(true).create(true).truncate(truncate).mode(0o600);
    options.open(path).map_err(crate::store::paths::no_symlinks)
}

fn process_key(identity: &ProcessIdentity) -> String {
    format!("{}-{}", identity.pid, identity.start_ticks)
}

pub fn load(home: &Home, id: &str) -> Option<Session> {
    check_id(id).ok()?;
    let bytes = crate::store::paths::read_file(&file(home, id, "json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the session whole (a temporary file renamed over it), and with
/// `claim_process` points its harness process at it (a start does; an end
/// must not, or it could take the process back from the session after it).
pub fn save(home: &Home, session: &Session, claim_process: bool) -> Result<()> {
    check_id(&session.id).map_err(Error::Usage)?;
    let sessions = dir(home);
    create_private_dir_all(&sessions)?;
    let path = file(home, &session.id, "json");
    let temp = sessions.join(format!(".{}.{}.tmp", session.id, std::process::id()));
    let bytes = serde_json::to_vec(session).map_err(|e| Error::Other(format!("encode session: {e}")))?;
    create(&temp, true)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&temp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            home.explain(Error::io("record the session", &path, e))
        })?;
    if let Some(process) = session.process.as_ref().filter(|_| claim_process) {
        let by_process = sessions.join("by-process");
        create_private_dir_all(&by_process)?;
        let link = by_process.join(process_key(process));
        create(&link, true)
            .and_then(|mut f| f.write_all(session.id.as_bytes()))
            .map_err(|e| home.explain(Error::io("record the session's process", &link, e)))?;
    }
    Ok(())
}

/// The session a job started now belongs to: the one given, none for
/// `none`, else `RUN_BG_SESSION`, else the newest session of the nearest
/// ancestor that runs one.
pub fn session_for_start(home: &Home, choice: Option<&SessionChoice>) -> Option<String> {
    match choice {
        Some(SessionChoice::Id(id)) => Some(id.clone()),
        Some(SessionChoice::None) => None,
        Some(SessionChoice::Current) | None => detect(home),
    }
}

/// The caller's session, if it runs inside one (see `session_for_start`).
pub fn detect(home: &Home) -> Option<String> {
    // Ours first (a user's override), then what a harness sets itself for
    // its commands (Claude Code's for its MCP servers too; Codex's thread
    // id). Gemini CLI sets none: its session is found by its process below.
    for variable in [SESSION_ENV, "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID"] {
        if let Some(id) = std::env::var(variable).ok().filter(|id| check_id(id).is_ok()) {
            return Some(id);
        }
    }
    let by_process = dir(home).join("by-process");
    // No session was ever recorded here: nothing to look for (one stat).
    if !by_process.is_dir() {
        return None;
    }
    crate::os::procinfo::ancestors(ANCESTORS_LOOKED_AT).iter().find_map(|ancestor| {
        let id = crate::store::paths::read_file(&by_process.join(process_key(ancestor))).ok()?;
        String::from_utf8(id).ok().filter(|id| check_id(id).is_ok())
    })
}

/// The ids of the jobs whose end `id` was told of.
pub fn told(home: &Home, id: &str) -> HashSet<String> {
    let bytes = crate::store::paths::read_file(&file(home, id, "told")).unwrap_or_default();
    String::from_utf8_lossy(&bytes).lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// Runs `tell` with the session's lock held, handing it what the session
/// was told so far; what it returns is recorded as told too. The lock makes
/// "not told yet → tell → record" one step among every hook of the session.
pub fn tell_once<T>(home: &Home, id: &str, tell: impl FnOnce(&HashSet<String>) -> (Vec<String>, T)) -> Result<T> {
    create_private_dir_all(&dir(home))?;
    let lock_path = file(home, id, "lock");
    let lock = create(&lock_path, false).map_err(|e| home.explain(Error::io("open the session's lock", &lock_path, e)))?;
    lock.lock().map_err(|e| Error::io("lock the session", &lock_path, e))?;
    let (now_told, answer) = tell(&told(home, id));
    if !now_told.is_empty() {
        let path = file(home, id, "told");
        let mut options = crate::store::paths::options_nofollow();
        {
            use crate::os::sys::OpenOptionsExt;
            options.create(true).append(true).mode(0o600);
        }
        let lines: String = now_told.iter().map(|job| format!("{job}\n")).collect();
        options
            .open(&path)
            .and_then(|mut f| f.write_all(lines.as_bytes()))
            .map_err(|e| home.explain(Error::io("record what the session was told", &path, e)))?;
    }
    drop(lock);
    Ok(answer)
}

/// Marks the session ended (its waiting hook leaves) and returns it.
pub fn end(home: &Home, id: &str, harness: &str) -> Result<Session> {
    let mut session = load(home, id).unwrap_or_else(|| Session {
        id: id.to_string(),
        harness: harness.to_string(),
        process: None,
        cwd: None,
        started_at: now_ms(),
        ended_at: None,
    });
    session.ended_at.get_or_insert(now_ms());
    save(home, &session, false)?;
    Ok(session)
}

/// Tries to take the session's waiter lock: `None` when another hook holds it.
pub fn try_become_waiter(home: &Home, id: &str) -> Result<Option<File>> {
    create_private_dir_all(&dir(home))?;
    let path = waiter_lock_path(home, id);
    let lock = create(&path, false).map_err(|e| home.explain(Error::io("open the session's waiter lock", &path, e)))?;
    match lock.try_lock() {
        Ok(()) => Ok(Some(lock)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock the session's waiter", &path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_file_names_or_refused_saying_what_is_accepted() {
        assert!(check_id("0d9c2a4e-1f2b-4c3d-9e8f-001122334455").is_ok());
        assert!(check_id("codex:thread.1_a").is_ok());
        for bad in ["", "../x", ".hidden", "a/b", "a b", "é", &"x".repeat(129), "current"] {
            let why = check_id(bad).unwrap_err();
            assert!(why.contains("A-Z a-z 0-9 . _ : -"), "{why}");
            assert!(check_id("none").is_err());
        }
        assert_eq!(SessionChoice::parse("--session", "none").unwrap(), SessionChoice::None);
        assert!(SessionChoice::parse("--session", "a/b").unwrap_err().to_string().starts_with("--session: bad session id"));
    }

    #[test]
    fn a_job_end_is_told_once_and_the_record_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::unchecked(dir.path().to_path_buf());
        let first = tell_once(&home, "s1", |told| {
            assert!(told.is_empty());
            (vec!["a-1".to_string(), "b-2".to_string()], 2)
        })
        .unwrap();
        assert_eq!(first, 2);
        tell_once(&home, "s1", |told| {
            assert_eq!(told.len(), 2);
            (Vec::new(), ())
        })
        .unwrap();
        assert!(told(&home, "s2").is_empty(), "another session's record is its own");
    }

    #[test]
    fn the_session_of_an_ancestor_process_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::unchecked(dir.path().to_path_buf());
        // The test runner's parent (cargo, or a shell) stands in for the harness.
        let Some(parent) = crate::os::procinfo::ancestors(1).pop() else { return };
        let session = Session { id: "s-anc".into(), harness: "claude-code".into(), process: Some(parent), cwd: None, started_at: 1, ended_at: None };
        save(&home, &session, true).unwrap();
        if std::env::var_os(SESSION_ENV).is_none() {
            assert_eq!(detect(&home).as_deref(), Some("s-anc"));
        }
        assert_eq!(load(&home, "s-anc").unwrap(), session);
    }
}
