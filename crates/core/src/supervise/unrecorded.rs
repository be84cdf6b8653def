//! An end a supervisor could write nowhere (a read-only home, a full disk
//! without the room job.json reserved), the same on every platform: kept
//! by the supervisor, shown to readers (`os::platform::publish_unrecorded`),
//! and written once it can be; let go of only when it never can be (the
//! home or the job's directory removed) or the supervisor is asked to stop.

use crate::model::job::Job;
use crate::model::protocol::KILL_REQUEST_FILE;
use crate::store::paths::HeldHome;
use crate::store::registry::Patience;
use crate::supervise::ending::{self, Ending};
use std::time::{Duration, Instant};

/// The first retry of an unrecorded end comes this soon, then ever less
/// often, up to `RETRY_LONGEST_PAUSE`: a disk remounted writable is noticed
/// within seconds, at the cost of two failed opens per try meanwhile.
const RETRY_FIRST_PAUSE: Duration = Duration::from_millis(100);
const RETRY_LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// An end that could not be written yet, and when to try again.
pub struct Unrecorded {
    pub error: String,
    pub since: Instant,
    pub next_try: Instant,
    pause: Duration,
    /// Where readers find it meanwhile; dropping it takes it away.
    _shown: Option<crate::os::platform::UnrecordedShown>,
}

/// What keeping an end asks of a supervisor, beyond recording it (`Ending`).
pub trait Keeping: Ending {
    /// The end kept unwritten, if any.
    fn kept(&mut self) -> &mut Option<Unrecorded>;
    /// The home this supervisor holds (supervise/paths.rs's `HeldHome`).
    fn held(&self) -> &HeldHome;
}

/// Keeps the end that could be written nowhere, shows it to readers, and
/// tries again now and then (`retry`): the same path as the first write,
/// whatever the error was.
pub fn keep<S: Keeping + ?Sized>(s: &mut S, error: String) {
    s.note_error(&format!("cannot record the job's end ({error}); keeping it here and trying again until it can be written"));
    let (_, _, _, job) = s.record();
    let shown = crate::model::protocol::UnrecordedEnd { job: job.clone(), error: error.clone() };
    let shown = serde_json::to_vec(&shown).ok().and_then(|bytes| match crate::os::platform::publish_unrecorded(&bytes) {
        Ok(shown) => shown,
        Err(e) => {
            s.note_error(&format!("cannot show the unrecorded end to readers: {e}"));
            None
        }
    });
    let now = Instant::now();
    *s.kept() = Some(Unrecorded { error, since: now, next_try: now + RETRY_FIRST_PAUSE, pause: RETRY_FIRST_PAUSE, _shown: shown });
}

/// Why an end kept unwritten can never be written, if it cannot: the home
/// we hold was removed (no name leads to it any more), or the job's
/// directory was and the registry no longer knows the job. Retrying for
/// ever would keep us alive for nothing.
fn nowhere_to_go<S: Keeping + ?Sized>(s: &mut S) -> Option<String> {
    if s.held().removed() {
        let (home, ..) = s.record();
        return Some(format!("the home {} was removed", home.root.display()));
    }
    let (home, _, registry, job) = s.record();
    let job_dir = home.job_dir(&job.id);
    let dir_gone = std::fs::symlink_metadata(&job_dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
    if dir_gone && matches!(registry.get(&job.id), Err(crate::Error::UnknownJob(_))) {
        return Some(format!("its directory {} was removed and the registry no longer knows it", home.shown(&job_dir).display()));
    }
    None
}

/// Lets go of an end that could not be written, saying what it was: the
/// supervisor then exits as soon as nothing else of the job keeps it.
pub fn give_up<S: Keeping + ?Sized>(s: &mut S, why: &str) {
    let Some(unrecorded) = s.kept().take() else { return };
    let (_, _, _, job) = s.record();
    let message = format!(
        "giving up recording the job's end ({}, {}), unwritten for {:.1} s ({}): {why}",
        job.status(),
        crate::model::job::how_it_ended(job),
        unrecorded.since.elapsed().as_secs_f64(),
        unrecorded.error
    );
    s.note_error(&message);
}

/// Writes the kept end when its time to try has come: job.json (which
/// readers prefer), else the registry. Once written, the queue's slot is
/// handed on, as after any end.
pub fn retry<S: Keeping + ?Sized>(s: &mut S) {
    let Some(unrecorded) = s.kept() else { return };
    let now = Instant::now();
    if now < unrecorded.next_try {
        return;
    }
    unrecorded.pause = (unrecorded.pause * 2).min(RETRY_LONGEST_PAUSE);
    unrecorded.next_try = now + unrecorded.pause;
    if let Some(why) = nowhere_to_go(s) {
        give_up(s, &why);
        return;
    }
    s.held().refresh();
    let (_, _, registry, job) = s.record();
    let job = job.clone();
    let in_job_file = registry.write_job_file(&job, true);
    let in_registry = registry.modify_with(Patience::Brief, &job.id, |stored| {
        // An end recorded by someone else meanwhile stands.
        if !stored.status().is_final() {
            *stored = Job { seen_at: stored.seen_at, ..job.clone() };
        }
    });
    if in_job_file.is_err() && in_registry.is_err() {
        return;
    }
    if let Some(unrecorded) = s.kept().take() {
        tracing::info!(
            "run-bg supervisor {}: recorded the job's end {:.1} s late (it could not be written: {})",
            job.id,
            unrecorded.since.elapsed().as_secs_f64(),
            unrecorded.error
        );
    }
    let (home, config, ..) = s.record();
    let _ = std::fs::remove_file(home.job_dir(&job.id).join(KILL_REQUEST_FILE));
    ending::hand_on_slot(home, config);
}
