//! Stopping a blocking verb (a wait, a yield, a follow) from another thread,
//! at once: the verb's pauses poll a pipe that `cancel` writes to, so it
//! wakes the moment it is cancelled instead of at its next look.

use std::io::{PipeReader, PipeWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A cancel switch shared by the verb that waits and whoever may stop it
/// (the napi face wires an `AbortSignal` to it). `Cancel::never()` costs no
/// file descriptor and pauses with a plain sleep.
#[derive(Clone, Default)]
pub struct Cancel(Option<Arc<Switch>>);

struct Switch {
    cancelled: AtomicBool,
    /// The pipe the pauses poll; taken (closed) by `release` once the verb
    /// is done, so that a switch kept by a long-lived listener holds no fd.
    /// Shared out of the lock, so a pause polls without holding it.
    pipe: Mutex<Option<Arc<(PipeReader, PipeWriter)>>>,
}

impl Cancel {
    /// Never cancelled: the CLI's waits, which end with the process.
    pub fn never() -> Cancel {
        Cancel(None)
    }

    /// A switch that can be thrown once.
    pub fn new() -> crate::Result<Cancel> {
        let pipe = std::io::pipe().map_err(|e| crate::Error::io("create a pipe for", "a cancellable wait", e))?;
        Ok(Cancel(Some(Arc::new(Switch { cancelled: AtomicBool::new(false), pipe: Mutex::new(Some(Arc::new(pipe))) }))))
    }

    /// Stops the verb at its current or next pause. Any thread; idempotent.
    pub fn cancel(&self) {
        let Some(switch) = &self.0 else { return };
        if switch.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        let pipe = lock(&switch.pipe).clone();
        if let Some(pipe) = pipe {
            // One byte, never read: the pipe stays readable, so every later
            // pause returns at once too. A full pipe cannot happen (one write).
            let _ = (&pipe.1).write_all(&[1]);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|s| s.cancelled.load(Ordering::SeqCst))
    }

    /// Pauses up to `pause`; true when cancelled (before or during the pause),
    /// at once when it is.
    pub fn pause(&self, pause: Duration) -> bool {
        let Some(switch) = &self.0 else {
            std::thread::sleep(pause);
            return false;
        };
        if self.is_cancelled() {
            return true;
        }
        let pipe = lock(&switch.pipe).clone();
        let Some(pipe) = pipe else {
            std::thread::sleep(pause);
            return self.is_cancelled();
        };
        crate::os::sys::pause_until_readable(pause, None, Some(&pipe.0), &|| self.is_cancelled());
        self.is_cancelled()
    }

    /// `pause`, ended early also when `wake` becomes readable (an inotify
    /// watch on the records a wait looks at); true when cancelled.
    pub fn pause_or_wake(&self, pause: Duration, wake: Option<crate::os::sys::WakeFd<'_>>) -> bool {
        let Some(wake) = wake else { return self.pause(pause) };
        if self.is_cancelled() {
            return true;
        }
        let pipe = self.0.as_ref().and_then(|switch| lock(&switch.pipe).clone());
        crate::os::sys::pause_until_readable(pause, Some(wake), pipe.as_ref().map(|p| &p.0), &|| self.is_cancelled());
        self.is_cancelled()
    }

    /// The verb is done: close the pipe once no pause uses it (a later
    /// `cancel` only sets the flag).
    pub fn release(&self) {
        if let Some(switch) = &self.0 {
            lock(&switch.pipe).take();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_pause_ends_at_once_when_cancelled_from_another_thread() {
        let cancel = Cancel::new().unwrap();
        let thrower = cancel.clone();
        let started = Instant::now();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            thrower.cancel();
        });
        assert!(cancel.pause(Duration::from_secs(600)), "cancelled");
        assert!(started.elapsed() < Duration::from_secs(60));
        thread.join().unwrap();
        assert!(cancel.pause(Duration::from_secs(600)), "stays cancelled");
    }

    #[test]
    fn an_uncancelled_pause_lasts_its_time() {
        let cancel = Cancel::new().unwrap();
        let started = Instant::now();
        assert!(!cancel.pause(Duration::from_millis(30)));
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(!Cancel::never().pause(Duration::from_millis(1)));
        cancel.release();
        cancel.cancel();
        assert!(cancel.is_cancelled() && cancel.pause(Duration::from_secs(600)), "released: the flag still says so");
    }
}
