//! What the supervisor gives back of its memory while the job runs: the
//! code pages each look over the process table brings in.

use std::time::{Duration, Instant};

/// Releases of code pages after looks are at least this far apart (see
/// `release_code_pages`).
const CODE_RELEASE_GAP: Duration = Duration::from_millis(100);

/// `release_code_pages`, and when it ran.
pub(super) struct CodePages {
    /// When `release_code_pages` last ran.
    released: Instant,
    /// A look ran since: its code is resident until the next release. A
    /// look within `CODE_RELEASE_GAP` of a release used to leave it so
    /// until the look after (up to 5 s): a supervisor's PSS then read
    /// 0.57 MiB instead of 0.27.
    owed: bool,
    /// The job's end is under way (`hold`): no more releases.
    held: bool,
}

impl CodePages {
    /// Made as the job starts, with the first release owed: what start-up
    /// brought in (parsing, the spawn, the start's heap and stack) goes
    /// `CODE_RELEASE_GAP` later, not at once. Released at once, it read
    /// smaps and faulted pages while the job's first processes exec'd, on
    /// the same cores: CPU taken from the start the caller waits on.
    pub(super) fn new() -> CodePages {
        CodePages { released: Instant::now(), owed: true, held: false }
    }

    /// A kill that ends the job is under way: what is resident stays. The
    /// end runs next (its record, its files, the exit), and a release now
    /// would read smaps and give back the very pages the end faults in
    /// again a moment later: a tenth of each supervisor's CPU in a kill of
    /// 1,000 jobs. The supervisor exits once the end is recorded, unless a
    /// notifier keeps it; a tree slow to die keeps it resident for the
    /// grace period at most.
    pub(super) fn hold(&mut self) {
        self.held = true;
        self.owed = false;
    }

    /// `release_code_pages`, now.
    pub(super) fn release(&mut self) {
        crate::os::platform::release_code_pages();
        self.released = Instant::now();
    }

    /// A look ran: the code it brought in is to go.
    pub(super) fn owe(&mut self) {
        self.owed = !self.held;
    }

    /// Releases what looks brought in once `CODE_RELEASE_GAP` has passed
    /// since the last release.
    pub(super) fn release_if_due(&mut self, now: Instant) {
        if self.owed && now.duration_since(self.released) >= CODE_RELEASE_GAP {
            self.owed = false;
            self.release();
        }
    }

    /// When a release is owed, the time it is due.
    pub(super) fn due(&self) -> Option<Instant> {
        self.owed.then(|| self.released + CODE_RELEASE_GAP)
    }
}
