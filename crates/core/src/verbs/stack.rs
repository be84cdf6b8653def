//! Stacks: `run-bg up` / `down` (JS `up` / `down`). A `Procfile` (`name:
//! command` a line) or a `run-bg.json` names processes; `up` starts each as
//! a job labelled by its name and owned by the stack, `down` kills them.
//!
//! No scheduler of its own: a process with `after` is started `--after` the
//! jobs of those processes, queued with `after_ready`, so the queue's
//! daemonless hand-on starts it once each of them is ready (a server with a
//! readiness check: its supervisor hands on when it records readiness) or
//! ended well (a one-shot task). The whole file is read and checked (names,
//! fields, `after` targets, cycles, each process's start options) before
//! anything starts.

use crate::model::duration::parse_duration_ms;
use crate::model::job::{how_it_ended, Job, JobStatus, RestartPolicy};
use crate::verbs::cancel::Cancel;
use crate::verbs::context::Context;
use crate::verbs::kill::KillResult;
use crate::verbs::list::ListFilter;
use crate::verbs::request::StartRequest;
use crate::verbs::start_options::{Face, StartOptions};
use crate::{now_ms, Error, Result};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file `up` and `down` read when none is given: the first of these in
/// the current directory.
pub const DEFAULT_FILES: [&str; 2] = ["run-bg.json", "Procfile"];

/// The fields a process of run-bg.json may have, in the order the docs list them.
const FIELDS: [&str; 13] = [
    "command",
    "cwd",
    "env",
    "after",
    "ready-port",
    "ready-log",
    "ready-url",
    "ready-timeout",
    "restart",
    "max-restarts",
    "restart-delay",
    "timeout",
    "outlive-session",
];

/// A stack file, read and checked: its processes in the order they start
/// (each after what it runs after; otherwise in the file's order).
#[derive(Debug, Clone)]
pub struct StackFile {
    pub path: PathBuf,
    /// The file's directory (absolute): processes' `cwd` is relative to it,
    /// and its name is the stack's owner unless one is given.
    pub dir: PathBuf,
    pub processes: Vec<StackProcess>,
}

#[derive(Debug, Clone)]
pub struct StackProcess {
    pub name: String,
    /// Where the process is defined: `line 3` of a Procfile, `process `web``.
    pub place: String,
    pub command: StackCommand,
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub after: Vec<String>,
    /// The start options of the file's other fields (JSON names, as the JS API takes them).
    pub options: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackCommand {
    /// Run by the system's shell (`/bin/sh -c`).
    Shell(String),
    Argv(Vec<String>),
}

/// What `up` did with one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpAction {
    Started,
    /// Started `--after` the jobs of its `after` processes: it waits for them.
    Queued,
    /// A job of the stack with its label runs already (or waits in its queue).
    AlreadyRunning,
    /// It could not be started (or submitted): `error` says why.
    Failed,
    /// A process of its `after` had failed already: recorded `skipped`,
    /// never started; `error` says why.
    Skipped,
}

impl UpAction {
    pub fn as_str(self) -> &'static str {
        match self {
            UpAction::Started => "started",
            UpAction::Queued => "queued",
            UpAction::AlreadyRunning => "already running",
            UpAction::Failed => "failed",
            UpAction::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone)]
pub struct UpEntry {
    pub name: String,
    pub job_id: Option<String>,
    pub pid: Option<u32>,
    pub action: UpAction,
    /// Queued: the processes it still waits for.
    pub waiting_for: Vec<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct StackUp {
    pub file: PathBuf,
    pub owner: String,
    pub processes: Vec<UpEntry>,
    /// With a yield: every process ready (or running, or a task ended
    /// well), or what was not, one line a process (`web: failed (exit 1)`).
    pub settled: Option<Result<(), Vec<String>>>,
}

#[derive(Debug)]
pub struct StackDown {
    pub file: PathBuf,
    pub owner: String,
    /// In the order killed: what runs after others first.
    pub killed: Vec<(String, KillResult)>,
}

/// The stack file to use: `file` as given, or the first of `DEFAULT_FILES`
/// in `cwd`.
pub fn locate(file: Option<&Path>, cwd: &Path) -> Result<PathBuf> {
    if let Some(file) = file {
        return Ok(cwd.join(file));
    }
    DEFAULT_FILES.iter().map(|name| cwd.join(name)).find(|path| path.is_file()).ok_or_else(|| {
        Error::Usage(format!(
            "no run-bg.json or Procfile in {}; give the file with -f <file> (JS: up(file))",
            cwd.display()
        ))
    })
}

/// A stack file is a line or a few a process: far past any real one.
const MAX_STACK_FILE: u64 = 1024 * 1024;

/// What of a refused line a message quotes: enough to find it, never a
/// whole megabyte into an agent's tool output.
const QUOTED_CHARS: usize = 120;

/// The stack file's text: a regular file (a FIFO would block the read for
/// good, /dev/zero never end) of at most `MAX_STACK_FILE`, in UTF-8, a BOM
/// at its start dropped.
fn read_text(path: &Path) -> Result<String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| Error::io("read the stack file", path, e))?;
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "{} is not a regular file (a directory, FIFO or device): give a run-bg.json or Procfile",
            path.display()
        )));
    }
    let too_big = |size: u64| {
        Error::Usage(format!("{} is {size} bytes: a stack file is at most {MAX_STACK_FILE} bytes (1 MiB)", path.display()))
    };
    if meta.len() > MAX_STACK_FILE {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_STACK_FILE + 1).read_to_end(&mut bytes))
        .map_err(|e| Error::io("read the stack file", path, e))?;
    if bytes.len() as u64 > MAX_STACK_FILE {
        return Err(too_big(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        Error::Usage(format!("{}: not UTF-8 text (at byte {}): save it as UTF-8", path.display(), e.utf8_error().valid_up_to()))
    })?;
    Ok(text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text))
}

/// Reads and checks the stack file at `path`: a `.json` file is a
/// run-bg.json, any other a Procfile.
pub fn read(path: &Path) -> Result<StackFile> {
    let text = read_text(path)?;
    let shown = path.display().to_string();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io("find the stack file's directory", dir, e))?;
    let is_json = path.extension().is_some_and(|e| e == "json");
    let processes = if is_json { parse_json(&text) } else { parse_procfile(&text) }.map_err(|e| Error::Usage(format!("{shown}{e}")))?;
    let processes = in_start_order(processes).map_err(|e| Error::Usage(format!("{shown}: {e}")))?;
    let file = StackFile { path: path.to_path_buf(), dir, processes };
    // Each process's options as a start checks them, before anything starts.
    for process in &file.processes {
        file.request(process, "stack", &[])?;
    }
    Ok(file)
}

/// A Procfile: `name: command` a line; `#` comments and blank lines skipped.
/// Errors start with what follows the file's name (` line 3: …`).
fn parse_procfile(text: &str) -> std::result::Result<Vec<StackProcess>, String> {
    let mut processes: Vec<StackProcess> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((name, command)) = trimmed.split_once(':') else {
            let quoted = crate::model::text::cut(&crate::model::text::visible(trimmed), QUOTED_CHARS);
            return Err(format!(" line {number}: `{quoted}` is not `name: command` (a process a line; `#` starts a comment)"));
        };
        let name = name.trim();
        check_name(name).map_err(|e| format!(" line {number}: {e}"))?;
        if let Some(first) = processes.iter().find(|p| p.name == name) {
            return Err(format!(" line {number}: process `{name}` is named twice (first on {})", first.place));
        }
        let command = command.trim();
        if command.is_empty() {
            return Err(format!(" line {number}: process `{name}` has no command"));
        }
        processes.push(StackProcess {
            name: name.to_string(),
            place: format!("line {number}"),
            command: StackCommand::Shell(command.to_string()),
            cwd: None,
            env: BTreeMap::new(),
            after: Vec::new(),
            options: Map::new(),
        });
    }
    if processes.is_empty() {
        return Err(": the Procfile names no process; give one `name: command` a line".into());
    }
    Ok(processes)
}

/// A run-bg.json: `{"processes": {"<name>": {"command": …, …}}}`, in the
/// file's order. Errors start with what follows the file's name (`: …`).
fn parse_json(text: &str) -> std::result::Result<Vec<StackProcess>, String> {
    // `processes` read straight from the text: a `Value` in between would sort it.
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct JsonFile {
        processes: Ordered,
    }
    let file: JsonFile = serde_json::from_str(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => format!(": {e}; the file is {{\"processes\": {{\"web\": {{\"command\": \"npm start\"}}}}}}"),
        _ => format!(": not valid JSON: {e}"),
    })?;
    let Ordered(entries) = file.processes;
    let mut processes: Vec<StackProcess> = Vec::new();
    for (name, value) in entries {
        check_name(&name).map_err(|e| format!(": {e}"))?;
        if processes.iter().any(|p| p.name == name) {
            return Err(format!(": process `{name}` is named twice"));
        }
        processes.push(parse_process(&name, value).map_err(|e| format!(": process `{name}`: {e}"))?);
    }
    if processes.is_empty() {
        return Err(": `processes` names no process".into());
    }
    Ok(processes)
}

fn parse_process(name: &str, value: Value) -> std::result::Result<StackProcess, String> {
    let Value::Object(fields) = value else {
        return Err("give an object with at least `command`".into());
    };
    let mut process = StackProcess {
        name: name.to_string(),
        place: format!("process `{name}`"),
        command: StackCommand::Shell(String::new()),
        cwd: None,
        env: BTreeMap::new(),
        after: Vec::new(),
        options: Map::new(),
    };
    let mut has_command = false;
    for (field, value) in fields {
        let bad = |what: &str| format!("{field}: {what}, not {value}");
        match field.as_str() {
            "command" => {
                has_command = true;
                process.command = match &value {
                    Value::String(line) if !line.trim().is_empty() => StackCommand::Shell(line.clone()),
                    Value::Array(items) if items.is_empty() => return Err("command: an empty list; give the program and its arguments".into()),
                    Value::Array(items) => StackCommand::Argv(
                        items.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| bad("a list of strings"))?,
                    ),
                    _ => return Err(bad("a command line (run by sh -c) or a list of strings (the program and its arguments)")),
                };
            }
            "cwd" => process.cwd = Some(PathBuf::from(value.as_str().ok_or_else(|| bad("a directory (relative to the file's)"))?)),
            "env" => {
                let Value::Object(vars) = &value else { return Err(bad("an object of strings")) };
                for (key, var) in vars {
                    let var = var.as_str().ok_or_else(|| format!("env: {key}: give a string, not {var}"))?;
                    crate::verbs::request::validate_env_key(key).map_err(|e| format!("env: {e}"))?;
                    process.env.insert(key.clone(), var.to_string());
                }
            }
            "after" => {
                let names: Vec<String> = match &value {
                    Value::String(one) => vec![one.clone()],
                    Value::Array(items) => items.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| bad("a list of process names"))?,
                    _ => return Err(bad("a list of process names")),
                };
                process.after = names;
            }
            "ready-port" => {
                let port = value.as_u64().filter(|p| (1..=65535).contains(p)).ok_or_else(|| bad("a port from 1 to 65535"))?;
                process.options.insert("readyPort".into(), port.into());
            }
            "ready-log" | "ready-url" => {
                let text = value.as_str().ok_or_else(|| bad("a string"))?;
                let key = if field == "ready-log" { "readyLog" } else { "readyUrl" };
                process.options.insert(key.into(), text.into());
            }
            "ready-timeout" | "restart-delay" | "timeout" => {
                let ms = duration(&value).map_err(|e| format!("{field}: {e}"))?;
                let key = match field.as_str() {
                    "ready-timeout" => "readyTimeoutMs",
                    "restart-delay" => "restartDelayMs",
                    _ => "timeoutMs",
                };
                process.options.insert(key.into(), ms.into());
            }
            "restart" => {
                let policy = value.as_str().ok_or_else(|| bad("`on-failure` or `always`"))?;
                serde_json::from_value::<RestartPolicy>(policy.into()).map_err(|_| bad("`on-failure` or `always`"))?;
                process.options.insert("restart".into(), policy.into());
            }
            "outlive-session" => {
                let keep = value.as_bool().ok_or_else(|| bad("true or false"))?;
                process.options.insert("outliveSession".into(), keep.into());
            }
            "max-restarts" => {
                let count = value.as_u64().filter(|n| *n <= u32::MAX as u64).ok_or_else(|| bad("a number of restarts"))?;
                process.options.insert("maxRestarts".into(), count.into());
            }
            other => return Err(format!("unknown field `{other}`; a process takes {}", FIELDS.join(", "))),
        }
    }
    if !has_command {
        return Err("missing field `command`: give the command line (run by sh -c) or a list: the program and its arguments".into());
    }
    Ok(process)
}

/// A duration of the file: text as the CLI's (`30s`, `2m`) or a number of ms.
fn duration(value: &Value) -> std::result::Result<u64, String> {
    match value {
        Value::String(text) => parse_duration_ms(text).map_err(|e| e.to_string()),
        Value::Number(n) => n.as_u64().filter(|ms| *ms > 0).ok_or_else(|| format!("give a duration (30s, 2m) or a number of ms above 0, not {n}")),
        other => Err(format!("give a duration (30s, 2m) or a number of ms, not {other}")),
    }
}

/// The de-facto Procfile name: letters, digits, `_` and `-`.
fn check_name(name: &str) -> std::result::Result<(), String> {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Ok(());
    }
    Err(format!(
        "bad process name `{}`: names are letters, digits, `_` and `-`",
        crate::model::text::cut(&crate::model::text::visible(name), QUOTED_CHARS)
    ))
}

/// The processes in the order they start: each after every process of its
/// `after`, otherwise in the file's order. Unknown names and cycles refused.
fn in_start_order(processes: Vec<StackProcess>) -> std::result::Result<Vec<StackProcess>, String> {
    let names: Vec<&str> = processes.iter().map(|p| p.name.as_str()).collect();
    for process in &processes {
        for dep in &process.after {
            if dep == &process.name {
                return Err(format!("process `{}`: after: a process cannot run after itself", process.name));
            }
            if !names.contains(&dep.as_str()) {
                return Err(format!("process `{}`: after: no process `{dep}` in this file (it names {})", process.name, names.join(", ")));
            }
        }
    }
    if let Some(cycle) = find_cycle(&processes) {
        return Err(format!("`after` makes a cycle: {}; a process can start only once those it runs after are up", cycle.join(" → ")));
    }
    let mut left = processes;
    let mut ordered: Vec<StackProcess> = Vec::with_capacity(left.len());
    while !left.is_empty() {
        // There is one: no cycle.
        let next = left.iter().position(|p| p.after.iter().all(|d| ordered.iter().any(|o| &o.name == d))).unwrap_or(0);
        ordered.push(left.remove(next));
    }
    Ok(ordered)
}

/// A cycle of `after`, as the names along it back to the first.
fn find_cycle(processes: &[StackProcess]) -> Option<Vec<String>> {
    fn visit(at: usize, processes: &[StackProcess], state: &mut [u8], path: &mut Vec<usize>) -> Option<Vec<String>> {
        state[at] = 1;
        path.push(at);
        for dep in &processes[at].after {
            let Some(next) = processes.iter().position(|p| &p.name == dep) else { continue };
            if state[next] == 1 {
                let from = path.iter().position(|&p| p == next).unwrap_or(0);
                let mut cycle: Vec<String> = path[from..].iter().map(|&i| processes[i].name.clone()).collect();
                cycle.push(processes[next].name.clone());
                return Some(cycle);
            }
            if state[next] == 0 {
                if let Some(cycle) = visit(next, processes, state, path) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        state[at] = 2;
        None
    }
    let mut state = vec![0u8; processes.len()];
    (0..processes.len()).find_map(|i| if state[i] == 0 { visit(i, processes, &mut state, &mut Vec::new()) } else { None })
}

/// A JSON object's entries in the file's order (serde_json's map sorts them).
struct Ordered(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// The file's spelling of the start options, for the checks `StartOptions` makes.
struct FileFields;

impl Face for FileFields {
    fn name(&self, option: &str) -> String {
        match option {
            "timeoutMs" => "timeout",
            "readyLog" => "ready-log",
            "readyPort" => "ready-port",
            "readyUrl" => "ready-url",
            "readyTimeoutMs" => "ready-timeout",
            "maxRestarts" => "max-restarts",
            "restartDelayMs" => "restart-delay",
            "outliveSession" => "outlive-session",
            other => other,
        }
        .to_string()
    }

    fn caller_pid(&self) -> u32 {
        std::process::id()
    }
}

impl StackFile {
    /// `up --outlive-session`: every process of the stack outlives the
    /// session that starts it (a stack shared by the project's sessions).
    pub fn outliving_sessions(mut self) -> StackFile {
        for process in &mut self.processes {
            process.options.insert("outliveSession".into(), true.into());
        }
        self
    }

    /// The start of `process`, owned by `owner`, after the jobs `after`.
    fn request(&self, process: &StackProcess, owner: &str, after: &[String]) -> Result<StartRequest> {
        let place = |e: Error| Error::Usage(format!("{}: {}: {e}", self.path.display(), process.place));
        let base = match &process.command {
            StackCommand::Shell(line) => StartRequest::shell(line),
            StackCommand::Argv(argv) => StartRequest::program(argv.iter().map(Into::into).collect()),
        };
        let mut options = process.options.clone();
        options.insert("label".into(), process.name.clone().into());
        options.insert("owner".into(), owner.into());
        options.insert("env".into(), process.env.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect::<Map<_, _>>().into());
        let options: StartOptions = serde_json::from_value(Value::Object(options)).map_err(|e| place(Error::Usage(e.to_string())))?;
        let mut request = options.into_request(base, &FileFields).map_err(place)?;
        request.cwd = Some(match &process.cwd {
            Some(cwd) => self.dir.join(cwd),
            None => self.dir.clone(),
        });
        request.after = after.to_vec();
        request.after_ready = !after.is_empty();
        crate::verbs::request::validate(&request).map_err(place)?;
        Ok(request)
    }

    /// The stack's owner: `owner` when given, else the file's directory
    /// name, refused (saying to give `--owner`) when that is no owner: not
    /// UTF-8, over 200 characters, control characters.
    pub fn owner(&self, owner: Option<&str>) -> Result<String> {
        if let Some(owner) = owner {
            return Ok(owner.to_string());
        }
        let Some(name) = self.dir.file_name() else { return Ok("stack".to_string()) };
        let refused = |why: String| {
            Error::Usage(format!(
                "the stack's owner is its folder's name unless --owner gives one (JS: up(file, {{owner}})), and the folder's name {why}: give --owner <name>"
            ))
        };
        let name = name.to_str().ok_or_else(|| refused(format!("`{}` is not UTF-8 text", name.to_string_lossy())))?;
        crate::verbs::request::validate_name("owner", name).map_err(|e| refused(format!("is no owner ({e})")))?;
        Ok(name.to_string())
    }

    /// How deep `process` sits: 0 without `after`, else one below the deepest it runs after.
    fn depth(&self, name: &str) -> usize {
        let Some(process) = self.processes.iter().find(|p| p.name == name) else { return 0 };
        process.after.iter().map(|d| self.depth(d) + 1).max().unwrap_or(0)
    }
}

/// How long an `up` or `down` waits for another of the same stack to finish
/// its starts or kills (seconds each, however many processes).
const STACK_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

impl Context {
    /// The stack's own lock (`<home>/stacks/<owner, hashed>.lock`, flock),
    /// held while one `up` or `down` starts or kills its processes; another
    /// waits its turn, then sees what the first did.
    fn stack_lock(&self, owner: &str) -> Result<std::fs::File> {
        use crate::os::sys::OpenOptionsExt;
        let dir = self.home.root.join("stacks");
        crate::store::paths::create_private_dir_all(&dir)?;
        // An owner is any printable text up to 200 characters: its FNV-1a
        // hash names the file (a file name is at most 255 bytes, no `/`).
        let hash = owner.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3));
        let path = dir.join(format!("{hash:016x}.lock"));
        let mut options = crate::store::paths::options_nofollow();
        options.write(true).create(true).truncate(false).mode(0o600);
        let file = options.open(&path).map_err(|e| self.home.explain(Error::io("open the stack's lock", &path, e)))?;
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < STACK_LOCK_PATIENCE => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::Busy(format!(
                        "another run-bg up or down of the stack `{}` has been starting or killing its processes for {} s: let it finish (`run-bg list --owner '{}'` shows them)",
                        crate::model::text::visible(owner),
                        STACK_LOCK_PATIENCE.as_secs(),
                        crate::model::text::visible(owner)
                    )))
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock the stack", &path, e)),
            }
        }
    }

    /// The stack's jobs that run (or wait in a queue), by label, newest last.
    fn stack_jobs(&self, owner: &str) -> Result<Vec<Job>> {
        let filter = ListFilter { all: true, owner: Some(owner.to_string()), status: None, session: None };
        let mut jobs: Vec<Job> = self.list(&filter)?.into_iter().filter(|j| !j.status().is_final()).collect();
        jobs.sort_by_key(|j| j.started_at);
        Ok(jobs)
    }

    /// Starts what of `file` does not run yet, in order, each process after
    /// the jobs of its `after` (already running ones or those just started).
    pub fn stack_up(&self, file: &StackFile, owner: Option<&str>, runner: &Path) -> Result<StackUp> {
        let owner = file.owner(owner)?;
        // What runs is read and what does not is started under the stack's
        // lock: two `up` at once would each see nothing running and start
        // every process twice; a `down` would kill half a start.
        let _lock = self.stack_lock(&owner)?;
        let running = self.stack_jobs(&owner)?;
        let mut entries: Vec<UpEntry> = Vec::new();
        for process in &file.processes {
            if let Some(job) = running.iter().rev().find(|j| j.label == process.name) {
                entries.push(UpEntry {
                    name: process.name.clone(),
                    job_id: Some(job.id.clone()),
                    pid: job.pid(),
                    action: UpAction::AlreadyRunning,
                    waiting_for: Vec::new(),
                    error: None,
                });
                continue;
            }
            let failed = |error: String| UpEntry {
                name: process.name.clone(),
                job_id: None,
                pid: None,
                action: UpAction::Failed,
                waiting_for: Vec::new(),
                error: Some(error),
            };
            let mut after = Vec::new();
            for dep in &process.after {
                match entries.iter().find(|e| &e.name == dep).and_then(|e| e.job_id.clone()) {
                    Some(id) => after.push(id),
                    None => break,
                }
            }
            if after.len() < process.after.len() {
                let missing = process.after.iter().find(|d| !entries.iter().any(|e| &e.name == *d && e.job_id.is_some()));
                entries.push(failed(format!("not started: `{}` could not be started", missing.map_or("", String::as_str))));
                continue;
            }
            let request = file.request(process, &owner, &after)?;
            match crate::verbs::start::start_job(self, request, runner) {
                Ok(started) => {
                    let names = |ids: &[String]| -> Vec<String> {
                        ids.iter().filter_map(|id| entries.iter().find(|e| e.job_id.as_ref() == Some(id)).map(|e| e.name.clone())).collect()
                    };
                    entries.push(UpEntry {
                        name: process.name.clone(),
                        job_id: Some(started.job_id.clone()),
                        pid: started.pid,
                        action: if started.queued.is_some() { UpAction::Queued } else { UpAction::Started },
                        waiting_for: started.queued.as_ref().map(|q| names(&q.after)).unwrap_or_default(),
                        error: None,
                    });
                }
                Err(Error::StartFailed { job_id, message }) => {
                    entries.push(UpEntry { job_id: Some(job_id), ..failed(message) });
                }
                Err(Error::Skipped { job_id, reason }) => {
                    entries.push(UpEntry { job_id: Some(job_id), action: UpAction::Skipped, ..failed(reason) });
                }
                Err(e) => entries.push(failed(e.to_string())),
            }
        }
        Ok(StackUp { file: file.path.clone(), owner, processes: entries, settled: None })
    }

    /// Waits up to `bound` until every process `up` started or found is up:
    /// ready (with a readiness check), running (without), or ended well (a
    /// task); or until one of them cannot be (it failed, was skipped, was
    /// not ready within its readiness timeout). `None`: cancelled.
    pub fn stack_settle(&self, up: &mut StackUp, bound: Duration, cancel: &Cancel) -> Result<Option<()>> {
        let ids: Vec<String> = up.processes.iter().filter_map(|e| e.job_id.clone()).collect();
        let up_yet = |job: &Job| match job.status() {
            JobStatus::Queued => false,
            _ => job.readiness_settled(now_ms()),
        };
        let Some(outcome) = self.wait_until_or_cancel(&ids, Some(bound), cancel, &up_yet)? else { return Ok(None) };
        let now = now_ms();
        let mut problems: Vec<String> = up
            .processes
            .iter()
            .filter(|e| e.action == UpAction::Failed)
            .map(|e| format!("{}: {}", e.name, e.error.as_deref().unwrap_or("could not be started")))
            .collect();
        for entry in &up.processes {
            let Some(job) = outcome.jobs.iter().find(|j| Some(&j.id) == entry.job_id.as_ref()) else { continue };
            if entry.action == UpAction::Failed {
                continue;
            }
            let problem = match job.status() {
                JobStatus::Success if job.ready.is_none() => None,
                JobStatus::Skipped => Some(job.error().unwrap_or("skipped").to_string()),
                status if status.is_final() => Some(format!("{status} ({})", how_it_ended(job))),
                JobStatus::Queued => Some(format!("still queued after {}", crate::model::duration::format_duration_ms(bound.as_millis() as u64))),
                _ if job.ready_at.is_some() || job.ready.is_none() => None,
                _ => Some(match job.not_ready_after(now) {
                    Some(limit) => format!("not ready after {}", crate::model::duration::format_duration_ms(limit)),
                    None => format!("not ready yet after {}", crate::model::duration::format_duration_ms(bound.as_millis() as u64)),
                }),
            };
            if let Some(problem) = problem {
                problems.push(format!("{}: {problem} (run-bg check {})", entry.name, job.id));
            }
        }
        up.settled = Some(if problems.is_empty() { Ok(()) } else { Err(problems) });
        Ok(Some(()))
    }

    /// Kills the stack's jobs (those of `owner` labelled with a process of
    /// `file`), what runs after others first: each depth of `after` at once,
    /// the deepest first, each killed (its tree gone) before the next.
    pub fn stack_down(&self, file: &StackFile, owner: Option<&str>) -> Result<StackDown> {
        let owner = file.owner(owner)?;
        // After an `up` still starting has started all it will (`stack_up`).
        let _lock = self.stack_lock(&owner)?;
        let filter = ListFilter { all: true, owner: Some(owner.clone()), status: None, session: None };
        let jobs: Vec<Job> = self.list(&filter)?.into_iter().filter(|j| file.processes.iter().any(|p| p.name == j.label)).collect();
        // Ended jobs whose processes live on are the stack's too, as for `kill --all`.
        let left = self.leftover_counts(&jobs);
        let targets: Vec<Job> = jobs.into_iter().filter(|j| !j.status().is_final() || left.contains_key(&j.id)).collect();
        let deepest = file.processes.iter().map(|p| file.depth(&p.name)).max().unwrap_or(0);
        let mut killed = Vec::new();
        for depth in (0..=deepest).rev() {
            let names: Vec<&str> = file.processes.iter().filter(|p| file.depth(&p.name) == depth).map(|p| p.name.as_str()).collect();
            let level: Vec<Job> = targets.iter().filter(|j| names.contains(&j.label.as_str())).cloned().collect();
            if level.is_empty() {
                continue;
            }
            let labels: Vec<(String, String)> = level.iter().map(|j| (j.id.clone(), j.label.clone())).collect();
            for result in self.kill_jobs(level, None, false) {
                let id = match &result {
                    Ok(outcome) => outcome.job.id.clone(),
                    Err((id, _)) => id.clone(),
                };
                let name = labels.iter().find(|(i, _)| i == &id).map_or_else(String::new, |(_, l)| l.clone());
                killed.push((name, result));
            }
        }
        Ok(StackDown { file: file.path.clone(), owner, killed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(processes: &[StackProcess]) -> Vec<&str> {
        processes.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn a_procfile_is_read_with_its_comments_and_blank_lines_skipped() {
        let processes = parse_procfile("# dev\n\nweb: npm start -- --port=$PORT\n  worker-2 :  celery worker # not a comment\n").unwrap();
        assert_eq!(names(&processes), ["web", "worker-2"]);
        assert_eq!(processes[0].command, StackCommand::Shell("npm start -- --port=$PORT".into()));
        assert_eq!(processes[1].command, StackCommand::Shell("celery worker # not a comment".into()));
        assert_eq!(processes[1].place, "line 4");
    }

    #[test]
    fn processes_start_after_what_they_run_after_else_in_the_file_order() {
        let json = r#"{"processes": {"web": {"command": "w", "after": ["db", "migrate"]}, "db": {"command": "d"},
            "worker": {"command": "k", "after": "web"}, "migrate": {"command": "m", "after": ["db"]}, "cron": {"command": "c"}}}"#;
        let ordered = in_start_order(parse_json(json).unwrap()).unwrap();
        assert_eq!(names(&ordered), ["db", "migrate", "web", "worker", "cron"]);
        let cycle = r#"{"processes": {"a": {"command": "x", "after": ["b"]}, "b": {"command": "x", "after": ["a"]}}}"#;
        let refused = in_start_order(parse_json(cycle).unwrap()).unwrap_err();
        assert!(refused.starts_with("`after` makes a cycle: a → b → a"), "{refused}");
    }

    #[test]
    fn a_process_field_of_the_wrong_kind_is_refused_naming_it() {
        let refused = |process: &str| parse_json(&format!(r#"{{"processes": {{"web": {process}}}}}"#)).unwrap_err();
        assert_eq!(refused(r#"{"command": "x", "ready-port": 0}"#), ": process `web`: ready-port: a port from 1 to 65535, not 0");
        assert_eq!(refused(r#"{"command": ["x", 1]}"#), r#": process `web`: command: a list of strings, not ["x",1]"#);
        assert!(refused(r#"{"command": "x", "env": {"A": 1}}"#).contains("env: A: give a string, not 1"));
        assert!(refused(r#"{"command": "x", "timeout": "2 weeks"}"#).starts_with(": process `web`: timeout: bad duration"));
        assert!(refused(r#"{"command": "x", "restart": "sometimes"}"#).contains("restart: `on-failure` or `always`"));
    }
}
