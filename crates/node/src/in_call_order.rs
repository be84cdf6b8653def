//! `sendInput` calls to one job, done one at a time in the order they were
//! made. Each call blocks (up to 5 s against a job that does not read), so
//! it runs off the JS thread; a thread of its own per call would race the
//! others to the pipe: lines sent without awaiting arrived out of order, a
//! send of more than PIPE_BUF (4 KiB) interleaved with another, and an
//! `eof: true` could close stdin before the text sent just before it. One
//! worker per job with calls pending takes them in FIFO order; different
//! jobs have different workers, so one that does not read holds up no other.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// A call waiting its turn: run with `Ok(())` it does its work and settles
/// its promise; run with the reason it cannot be done, it rejects it.
pub(crate) type Call = Box<dyn FnOnce(Result<(), String>) + Send>;

/// The calls pending per job id. A job has an entry exactly while its
/// worker runs: the worker removes it, under this lock, once it finds the
/// queue empty, so a call queued meanwhile is never left without a worker.
static PENDING: Mutex<BTreeMap<String, VecDeque<Call>>> = Mutex::new(BTreeMap::new());

fn pending() -> std::sync::MutexGuard<'static, BTreeMap<String, VecDeque<Call>>> {
    // A poisoned lock only means a call panicked; the queues are still whole.
    PENDING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Queues `call` behind the calls already made for `job_id`, starting the
/// job's worker if it has none; if no thread can be started, `call` is run
/// at once with the reason, so its promise is rejected, not lost.
pub(crate) fn queue(job_id: &str, call: Call) {
    let mut pending = pending();
    if let Some(queue) = pending.get_mut(job_id) {
        queue.push_back(call);
        return;
    }
    let worker_job = job_id.to_string();
    // Still under the lock: the worker's first look waits for the entry.
    match std::thread::Builder::new().name("proc-manager-send".into()).spawn(move || work_through(&worker_job)) {
        Ok(_) => {
            pending.insert(job_id.to_string(), VecDeque::from([call]));
        }
        Err(e) => {
            drop(pending);
            call(Err(format!("cannot start a thread: {e}")));
        }
    }
}

fn work_through(job_id: &str) {
    loop {
        let next = {
            let mut pending = pending();
            let next = pending.get_mut(job_id).and_then(VecDeque::pop_front);
            if next.is_none() {
                pending.remove(job_id);
            }
            next
        };
        let Some(call) = next else { return };
        // A call that panics settles nothing, but those queued after it still run.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(Ok(()))));
    }
}
