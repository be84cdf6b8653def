//! A job's end recorded, the same on every platform: its status, exit,
//! who ended it and its outcome judged (`ready::judge_end`), the
//! notification claimed, the job's own job.json written, the notification
//! sent, the queue's slot handed on, then the registry. What a platform does
//! its own way (how it announces without holding up its loop, how it keeps
//! an end it could write nowhere) is behind `Ending`.

use crate::model::job::{EndedBy, Exit, Job, JobState};
use crate::model::protocol::KILL_REQUEST_FILE;
use crate::os::procinfo;
use crate::store::config::Config;
use crate::store::paths::Home;
use crate::store::registry::Registry;
use crate::supervise::{notify, ready};
use crate::Error;

/// What a supervisor gives the shared recording of a job's end.
pub trait Ending {
    /// The home, the config, the registry and the job whose end is recorded.
    fn record(&mut self) -> (&Home, &Config, &Registry, &mut Job);
    /// Sends the end's notification (`notify::announce` of the job as now
    /// recorded) without holding up the loop: a forked child on Unix, a
    /// thread on Windows, either waited for before the supervisor exits.
    fn announce(&mut self);
    fn note_error(&self, message: &str);
    /// Writes the job (as `record` now holds it) into its job.json; fsynced
    /// when `durable`. Unix writes through the lock file it let go of, so
    /// no inode is allocated or freed (outcome.rs).
    fn write_end_record(&mut self, durable: bool) -> crate::Result<()> {
        let (_, _, registry, job) = self.record();
        registry.write_job_file(job, durable)
    }
}

/// How the job ended.
pub struct End {
    pub by: EndedBy,
    /// `None`: the main process's end could not be read.
    pub exit: Option<Exit>,
    /// When the main process ended (ms since the epoch): the job's `endedAt`.
    pub ended_at: u64,
    /// A sweeping `kill` records every end it waited for in the registry
    /// itself (`KillRequest::caller_sweeps`): neither read nor written here.
    pub caller_records: bool,
}

/// What became of the end.
#[derive(Debug)]
pub enum Recorded {
    /// Someone else recorded an end first (`kill` acting without this
    /// supervisor while it was stopped): it stands, and the job is theirs now.
    Already,
    /// Written in job.json, in the registry, or in both.
    Written,
    /// Written nowhere (a read-only home, a full disk without the room
    /// job.json reserved): the job.json write's error.
    Nowhere(String),
}

/// Records `end` for the job (see the module's doc), in this order: job.json
/// first (it needs no lock, its room was reserved at the start, and readers
/// prefer it), the announcement (claimed in job.json, which only we write
/// while we live, so it goes out even if the registry is held up), the
/// queue's slot (free once the end is in job.json, which the registry's
/// locked reads take in), then the registry.
pub fn record_end<S: Ending + ?Sized>(s: &mut S, end: End) -> Recorded {
    let (home, config, registry, job) = s.record();
    let is_final = |j: &Job| j.status().is_final();
    let recorded_first = registry
        .own_record(&job.id)
        .filter(is_final)
        .or_else(|| (!end.caller_records).then(|| registry.get(&job.id).ok()).flatten().filter(is_final));
    let request = home.job_dir(&job.id).join(KILL_REQUEST_FILE);
    if let Some(stored) = recorded_first {
        *job = stored;
        let _ = std::fs::remove_file(&request);
        return Recorded::Already;
    }
    let state = ready::judge_end(job, JobState::ended(end.by, end.exit, end.ended_at));
    let notify_config = config.notify.clone();
    // The announcement is claimed with the status change: whoever records
    // an outcome announces it, so it is announced once.
    let peak_rss_kb = procinfo::children_peak_rss_kb();
    let (wake, tie) = (job.wake.clone(), job.tie.clone());
    let apply = |job: &mut Job| {
        job.tie = tie.clone();
        job.state = state.clone();
        job.peak_rss_kb = peak_rss_kb;
        job.notification = notify::claim(&notify_config, job);
        job.wake = wake.clone();
        // Ended, it is no longer paused (a kill resumed its tree).
        job.paused_at = None;
    };
    apply(job);
    // Durable unless a sweeping caller records the end: its one registry
    // write for every job it killed is (an fsync each cost a kill of 1,000
    // jobs a tenth of its supervisors' time).
    let kept = s.write_end_record(!end.caller_records);
    let _ = std::fs::remove_file(&request);
    let (_, config, _, job) = s.record();
    let announce = notify::has_work(&config.notify, job);
    if let Err(e) = &kept {
        s.note_error(&format!("cannot record the job's end in its job.json: {e}"));
    }
    if announce {
        s.announce();
    }
    let (home, config, registry, job) = s.record();
    hand_on_slot(home, config);
    if end.caller_records && kept.is_ok() {
        // The killer takes every end it waited for into the registry at
        // once; should it die first, any later write does.
        return Recorded::Written;
    }
    // The notifier may have recorded its delivery (taking our end from
    // job.json) before we get the lock: an end already there stays as it is.
    let registry_apply = |stored: &mut Job| {
        if stored.state != state {
            apply(stored);
        }
    };
    let in_registry = match registry.modify(&job.id, registry_apply) {
        Err(Error::UnknownJob(_)) => registry.upsert(job),
        other => other.map(|_| ()),
    };
    // The registry was read whole: what that took goes back.
    procinfo::release_free_heap();
    match (kept, in_registry) {
        // The first error says it: the registry's is the same refusal again.
        (Err(in_job_file), Err(_)) => Recorded::Nowhere(in_job_file.to_string()),
        (Ok(()), Err(e)) => {
            s.note_error(&format!("cannot record the job's end in the registry: {e}; it is kept in its job.json, which readers prefer"));
            Recorded::Written
        }
        _ => Recorded::Written,
    }
}

/// Jobs queued behind this one (`--queue`, a stack's `after`) may start now:
/// after its end is recorded, and once it is ready (`ready::Watching::ready_recorded`).
/// One stat when nothing is queued.
pub fn hand_on_slot(home: &Home, config: &Config) {
    if let Some(hook) = crate::supervise::spec::AFTER_END.get() {
        hook(home, config);
    }
}
