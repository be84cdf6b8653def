//! What the processes of proc-manager tell each other: the environment marks
//! that identify a job's processes and its supervisor, the kill request left
//! beside a job, and the supervisor's first answer to its starter.

use serde::{Deserialize, Serialize};

/// Environment variable every process of a job inherits; its value is the job id.
pub const JOB_COOKIE: &str = "PROC_MANAGER_JOB";

/// What a killer writes to `jobs/<id>/kill-request.json` before sending SIGUSR1.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct KillRequest {
    pub grace_ms: u64,
    pub force: bool,
}

pub const KILL_REQUEST_FILE: &str = "kill-request.json";

/// Set in every supervisor's environment (value: its job id), so that a job's
/// supervisor can tell another job's supervisor among the processes it adopts.
pub const SUPERVISOR_MARK: &str = "PROC_MANAGER_SUPERVISOR";

/// The first line the supervisor writes on its stdout pipe: `ok <pid>` or `err <message>`.
pub const READY_OK: &str = "ok ";
pub const READY_ERR: &str = "err ";

/// Reads the supervisor's ready line from its stdout pipe.
pub fn parse_ready_line(line: &str) -> Result<u32, String> {
    let line = line.trim_end();
    if let Some(pid) = line.strip_prefix(READY_OK) {
        return pid.trim().parse().map_err(|_| format!("supervisor sent a bad ready line: {line}"));
    }
    if let Some(message) = line.strip_prefix(READY_ERR) {
        return Err(message.to_string());
    }
    Err(if line.is_empty() {
        "the supervisor exited before starting the job".to_string()
    } else {
        format!("supervisor sent a bad ready line: {line}")
    })
}
