//! `run-bg send` on Windows: no job there has a stdin to write to (`--stdin
//! pipe` is refused when the job starts), so a send says so.

use crate::verbs::context::Context;
use crate::{Error, Result};
use std::time::Duration;

pub const SEND_PATIENCE: Duration = Duration::from_secs(5);

pub const MAX_SEND_BYTES: usize = 1024 * 1024;

/// What a send did (never, here).
#[derive(Debug, Clone)]
pub struct Sent {
    pub job_id: String,
    pub bytes: usize,
    pub closed: bool,
}

impl Context {
    pub fn send_input(&self, id: &str, _data: &[u8], _eof: bool) -> Result<Sent> {
        let job = self.job(id)?;
        Err(Error::Usage(format!(
            "cannot send to {}: sending to a job's stdin needs `--stdin pipe`, which is Unix-only (a named FIFO); on Windows a job's stdin is empty",
            job.id
        )))
    }
}
