//! `run-bg send` on Windows: no job there has a stdin to write to (`--stdin
//! pipe` is refused when the job starts), so a send says so.

use crate::verbs::context::Context;
use crate::{Error, Result};

/// What a send did (never, here): the type the faces show, as on Unix.
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
