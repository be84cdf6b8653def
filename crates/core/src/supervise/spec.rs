//! What a caller hands a new supervisor (the job, its home, the config), on
//! every platform.

use crate::model::job::Job;
use crate::store::config::Config;
use crate::store::paths::Home;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What the caller hands the supervisor on its stdin.
#[derive(Debug, Serialize, Deserialize)]
pub struct SupervisorSpec {
    #[serde(with = "crate::model::os_text::path")]
    pub home: PathBuf,
    pub job: Job,
    pub config: Config,
    /// The caller exits right after our answer and never waits for us (the
    /// CLI's start): we stay its child, and with no second fork the job
    /// starts one process hand-over sooner (see `StartRequest::caller_exits`).
    /// A caller that lives on (the addon, `--yield`, a supervisor handing on
    /// a queued job) leaves it false, so it never holds a zombie of ours.
    #[serde(default)]
    pub stay_child: bool,
}

impl SupervisorSpec {
    /// The start request, as the caller writes it on our stdin (then closes it).
    pub fn read_from_stdin() -> Result<SupervisorSpec, String> {
        use std::io::Read;
        let mut input = Vec::new();
        std::io::stdin().read_to_end(&mut input).map_err(|e| e.to_string())?;
        serde_json::from_slice(&input).map_err(|e| e.to_string())
    }
}


/// Run once a job's end is recorded, to hand its queue slot on
/// (`verbs::queue::after_end`; that layer sits above this one, so the
/// binary sets it).
pub(crate) static AFTER_END: std::sync::OnceLock<fn(&Home, &Config)> = std::sync::OnceLock::new();

pub fn on_end_recorded(hook: fn(&Home, &Config)) {
    let _ = AFTER_END.set(hook);
}


/// The supervisor's answer to its caller: one line on stdout, which the
/// caller reads (`verbs::spawn`).
pub fn write_ready_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.replace('\n', " ").as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// The job's working directory is one, or the start is refused saying what it is.
pub fn check_cwd(cwd: &std::path::Path) -> std::result::Result<(), crate::model::error::LaunchError> {
    use crate::model::os_text::escaped;
    let why = match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => format!("working directory `{}` is not a directory", escaped(cwd.as_os_str())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!("working directory `{}` does not exist", escaped(cwd.as_os_str())),
        Err(e) => format!("working directory `{}`: {e}", escaped(cwd.as_os_str())),
    };
    Err(crate::model::error::LaunchError::BadRequest(why))
}
