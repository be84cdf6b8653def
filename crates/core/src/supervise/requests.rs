//! What a caller leaves beside a job for its supervisor before ringing its
//! doorbell, read the same way on every platform: `kill`'s request here,
//! `pause`'s in pause.rs.

use crate::model::protocol::{KillRequest, KILL_REQUEST_FILE};
use crate::store::paths::Home;

/// The request `kill` left beside job `job_id`, if any: read, not taken
/// (the end's recording removes it).
pub fn kill_request(home: &Home, job_id: &str) -> Option<KillRequest> {
    let path = home.job_dir(job_id).join(KILL_REQUEST_FILE);
    crate::store::paths::read_file(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok())
}
