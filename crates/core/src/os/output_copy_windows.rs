//! The job's output on Windows: each run's stdout and stderr (one pipe per
//! run) copied into a sink (the supervisor's log) by a thread of its own,
//! which hands what it wrote to the supervisor's loop while a watch needs
//! the lines, and sets an event that wakes the loop's wait. The sink is
//! generic: os/ knows nothing of the log it writes to.

use crate::os::windows_job;
use std::io::Read;
use std::os::windows::io::OwnedHandle;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    /// How many copying threads have ended their copy: counted before
    /// their last wake, so the loop woken by it never finds a thread
    /// still returning (`JoinHandle::is_finished` could, and the output's
    /// end then waited for the next wake, up to an hour).
    copies_ended: Arc<AtomicUsize>,
    /// No run comes after the current one (the job ends for good).
    last_run: bool,
    /// Its end has been handed to the loop.
    ended: bool,
}

/// A piece of what the job wrote, as the loop is handed it while a watch
/// needs the lines, or its end.
pub enum Piece<'a> {
    Bytes(&'a [u8]),
    Ended,
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
            copies_ended: Arc::new(AtomicUsize::new(0)),
            last_run: false,
            ended: false,
        })
    }

    pub fn want_lines(&mut self, wanted: bool) {
        self.lines_wanted.store(wanted, Ordering::Relaxed);
    }

    /// Copies what a new run's `reader` gives into the sink, on a thread of
    /// its own, until every process holding the pipe has closed it.
    pub fn new_run(&mut self, reader: std::io::PipeReader) {
        let (sink, sender, wake, wanted) = (self.sink.clone(), self.sender.clone(), self.wake.clone(), self.lines_wanted.clone());
        let ended = self.copies_ended.clone();
        let copy = move || {
            copy_output(reader, &sink, &sender, &wake, &wanted);
            ended.fetch_add(1, Ordering::SeqCst);
            windows_job::set(&wake);
        };
        match std::thread::Builder::new().name("output".into()).spawn(copy) {
            Ok(copier) => self.copiers.push(copier),
            Err(e) => tracing::warn!("run-bg supervisor: cannot start copying the job's output: {e}"),
        }
    }

    /// Every run's output has ended (its copy with it).
    pub fn runs_copied(&self) -> bool {
        self.copies_ended.load(Ordering::SeqCst) >= self.copiers.len()
    }

    /// No run comes after the current one: once its copy ends, the output has.
    pub fn no_more_runs(&mut self) {
        self.last_run = true;
    }

    /// What the loop's wait watches (the copying threads' event); `None`
    /// once the output has ended.
    pub fn waitable(&self) -> Option<std::os::windows::io::BorrowedHandle<'_>> {
        use std::os::windows::io::AsHandle;
        (!self.ended).then(|| self.wake.as_handle())
    }

    pub fn is_open(&self) -> bool {
        !self.ended
    }

    /// Hands `seen` what the copying threads handed over, then the output's
    /// end once the last run's copy has ended; how many bytes it was handed.
    pub fn copy(&mut self, seen: &mut dyn FnMut(Piece)) -> usize {
        let mut handed = 0;
        while let Ok(bytes) = self.news.try_recv() {
            handed += bytes.len();
            seen(Piece::Bytes(&bytes));
        }
        if self.last_run && !self.ended && self.runs_copied() {
            // What a thread sent between the loop above and its count.
            while let Ok(bytes) = self.news.try_recv() {
                seen(Piece::Bytes(&bytes));
            }
            self.ended = true;
            seen(Piece::Ended);
        }
        handed
    }

    /// The copying threads say their failures themselves.
    pub fn take_failure(&mut self) -> Option<String> {
        None
    }

    /// The threads hold the pipes: nothing of ours to close.
    pub fn close(&mut self) {}

    /// The sink itself, between two pieces of the copy.
    pub fn with_log<R>(&mut self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.sink.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Copies the job's output into the sink until every process holding the
/// pipe has closed it, handing each piece to the loop too while it wants
/// them. Its caller counts the copy ended, then wakes the loop.
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::windows::io::AsHandle;
    use std::time::Duration;

    struct Discard;

    impl Sink for Discard {
        fn take(&mut self, _bytes: &[u8]) -> Result<(), String> {
            Ok(())
        }
    }

    /// The loop sleeps until the copy's event: woken by a copy's end, it
    /// must find that copy ended, or it sleeps again with nothing left to
    /// wake it (the supervisor then stayed an hour after the job's output
    /// ended). The end was read from the thread's handle, which says
    /// "finished" only once the thread has returned, after its last wake.
    #[test]
    fn a_loop_woken_by_a_copy_s_end_finds_it_ended() {
        for attempt in 0..200 {
            let mut output = Output::new(Discard).unwrap();
            let (reader, writer) = std::io::pipe().unwrap();
            output.new_run(reader);
            drop(writer);
            let woken = windows_job::wait_any(&[output.wake.as_handle()], Duration::from_secs(10));
            assert!(matches!(woken, windows_job::Woken::Handle(0)), "attempt {attempt}: the copy's end woke nobody");
            assert!(output.runs_copied(), "attempt {attempt}: woken by the copy's end, the loop found it still running");
        }
    }
}
