//! Codex runs a hook only once it is trusted: its TUI's `/hooks` screen
//! records a hash of each approved hook in config.toml. `codex app-server`
//! (JSON-RPC over stdio) does the same for a client: `hooks/list` names each
//! hook with its key (`<hooks.json>:<event>:<group>:<handler>`) and current
//! hash, `config/batchWrite` records the trust. We ask it for our hooks
//! only, never for the user's others.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the app server gets for all of it (it starts in under a second).
const PATIENCE: Duration = Duration::from_secs(20);

/// `codex` on PATH (or `CODEX_BIN`).
fn codex() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("CODEX_BIN").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(bin));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(if cfg!(windows) { "codex.cmd" } else { "codex" })).find(|p| p.is_file())
}

/// What the trust step did: how many of our hooks it marked trusted, and
/// which of them Codex did not list (then nothing marks them).
pub struct Trusted {
    pub marked: usize,
    pub missing: Vec<String>,
}

/// Marks those of `keys` (our hooks) not yet trusted as trusted.
pub fn trust(cwd: &Path, keys: &[String]) -> Result<Trusted, String> {
    let codex = codex().ok_or("codex is not on PATH (set CODEX_BIN to it)")?;
    let mut child = Command::new(&codex)
        .arg("app-server")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {} app-server: {e}", codex.display()))?;
    let result = Rpc::over(&mut child).and_then(|mut rpc| {
        let trusted = rpc.trust(cwd, keys);
        // Closing its stdin asks the app server to leave.
        drop(rpc);
        trusted
    });
    // Ours, started just now: given a moment to leave, then ended.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if matches!(child.try_wait(), Ok(None)) {
        let _ = child.kill();
    }
    let _ = child.wait();
    result
}

struct Rpc {
    stdin: std::process::ChildStdin,
    answers: mpsc::Receiver<serde_json::Value>,
    next_id: u64,
    deadline: Instant,
}

impl Rpc {
    fn over(child: &mut std::process::Child) -> Result<Rpc, String> {
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (lines, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) {
                    if lines.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Rpc { stdin, answers, next_id: 0, deadline: Instant::now() + PATIENCE })
    }

    fn send(&mut self, message: serde_json::Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}").map_err(|e| format!("write to codex app-server: {e}"))
    }

    fn call(&mut self, method: &str, params: serde_json::Value) -> Result<serde_json::Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let answer = self.answers.recv_timeout(left).map_err(|_| format!("{method}: no answer from codex app-server within {} s", PATIENCE.as_secs()))?;
            if answer.get("id").and_then(|i| i.as_u64()) == Some(id) {
                if let Some(error) = answer.get("error") {
                    return Err(format!("{method}: {error}"));
                }
                return Ok(answer.get("result").cloned().unwrap_or_default());
            }
        }
    }

    fn trust(&mut self, cwd: &Path, keys: &[String]) -> Result<Trusted, String> {
        self.call("initialize", serde_json::json!({"clientInfo": {"name": "run-bg", "version": env!("CARGO_PKG_VERSION")}}))?;
        self.send(serde_json::json!({"jsonrpc": "2.0", "method": "initialized"}))?;
        let listed = self.call("hooks/list", serde_json::json!({"cwds": [cwd]}))?;
        let hooks: Vec<serde_json::Value> = listed
            .get("data")
            .and_then(|d| d.as_array())
            .map(|dirs| dirs.iter().flat_map(|d| d.get("hooks").and_then(|h| h.as_array()).cloned().unwrap_or_default()).collect())
            .unwrap_or_default();
        let listed: Vec<&str> = hooks.iter().filter_map(|h| h.get("key").and_then(|k| k.as_str())).collect();
        let missing: Vec<String> = keys.iter().filter(|k| !listed.contains(&k.as_str())).cloned().collect();
        let edits: Vec<serde_json::Value> = hooks
            .iter()
            .filter(|h| h.get("key").and_then(|k| k.as_str()).is_some_and(|k| keys.iter().any(|ours| ours == k)))
            .filter(|h| h.get("trustStatus").and_then(|s| s.as_str()) != Some("trusted"))
            .map(|h| {
                serde_json::json!({
                    "keyPath": format!("hooks.state.{}.trusted_hash", h["key"]),
                    "value": h.get("currentHash").cloned().unwrap_or_default(),
                    "mergeStrategy": "upsert",
                })
            })
            .collect();
        if edits.is_empty() {
            return Ok(Trusted { marked: 0, missing });
        }
        let marked = edits.len();
        self.call("config/batchWrite", serde_json::json!({"edits": edits}))?;
        Ok(Trusted { marked, missing })
    }
}
