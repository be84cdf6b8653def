//! The job's output on Windows: each run's stdout and stderr (one pipe per
//! run) copied into a sink (the supervisor's log) by a thread of its own,
//! which hands what it wrote to the supervisor's loop while a watch needs
//! the lines, and sets an event that wakes the loop's wait. The sink is
//! generic: os/ knows nothing of the log it writes to.

use crate::os::windows_job;
use std::io::Read;
use std::os::windows::io::OwnedHandle;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// Where the output goes.
pub trait Sink: Send + 'static {
    /// Writes `bytes` whole; an error is said and the copy goes on.
    fn take(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// Every run's copy into one sink, and what the loop is handed of it.
pub struct Output<S> {
    sink: Arc<Mutex<S>>,
    sender: mpsc::Sender<Vec<u8>>,
    news: mpsc::Receiver<Vec<u8>>,
    /// Set by a copying thread when it sent bytes or ended: wakes the loop.
    pub wake: Arc<OwnedHandle>,
    /// Whether the loop wants the bytes (a watch looks at the lines).
    lines_wanted: Arc<AtomicBool>,
    /// The copying threads of every run, the current one's last.
    copiers: Vec<JoinHandle<()>>,
}

impl<S: Sink> Output<S> {
    pub fn new(sink: S) -> std::io::Result<Output<S>> {
        let (sender, news) = mpsc::channel();
        Ok(Output {
            sink: Arc::new(Mutex::new(sink)),
            sender,
            news,
            wake: Arc::new(windows_job::create_private_event()?),
            lines_wanted: Arc::new(AtomicBool::new(false)),
            copiers: Vec::new(),
        })
    }

    pub fn want_lines(&self, wanted: bool) {
        self.lines_wanted.store(wanted, Ordering::Relaxed);
    }

    /// Copies what `reader` gives into the sink, on a thread of its own,
    /// until every process holding the pipe has closed it.
    pub fn copy(&mut self, reader: std::io::PipeReader) {
        let (sink, sender, wake, wanted) = (self.sink.clone(), self.sender.clone(), self.wake.clone(), self.lines_wanted.clone());
        match std::thread::Builder::new().name("output".into()).spawn(move || copy_output(reader, &sink, &sender, &wake, &wanted)) {
            Ok(copier) => self.copiers.push(copier),
            Err(e) => tracing::warn!("run-bg supervisor: cannot start copying the job's output: {e}"),
        }
    }

    /// Every run's output has ended.
    pub fn all_copied(&self) -> bool {
        self.copiers.iter().all(JoinHandle::is_finished)
    }

    /// Waits for every run's output to end (the last process holding a pipe).
    pub fn join(&mut self) {
        for copier in std::mem::take(&mut self.copiers) {
            let _ = copier.join();
        }
    }

    /// The next piece handed over, if one is waiting.
    pub fn news(&self) -> Option<Vec<u8>> {
        self.news.try_recv().ok()
    }

    /// The sink itself, between two pieces of the copy.
    pub fn with_sink<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.sink.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Copies the job's output into the sink until every process holding the
/// pipe has closed it, handing each piece to the loop too while it wants them.
fn copy_output<S: Sink>(mut reader: std::io::PipeReader, sink: &Mutex<S>, news: &mpsc::Sender<Vec<u8>>, wake: &OwnedHandle, wanted: &AtomicBool) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Err(e) = sink.lock().unwrap_or_else(PoisonError::into_inner).take(&buffer[..n]) {
                    tracing::warn!("run-bg supervisor: cannot write the job's log: {e}");
                }
                // After the sink: what the watch sees (a ready line) is in the log already.
                if wanted.load(Ordering::Relaxed) && news.send(buffer[..n].to_vec()).is_ok() {
                    windows_job::set(wake);
                }
            }
        }
    }
    windows_job::set(wake);
}
