//! Which queued job starts next (see verbs/queue.rs): the order of the
//! queues, what a job still waits for, why one will never start. Decided on
//! the jobs as read under the registry lock; nothing here reads or writes.

use crate::model::job::{Job, JobStatus};
use crate::now_ms;

/// What the queue does next, decided on the jobs as read under the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueStep {
    /// Start the job at this index: its slot is free and what it runs after succeeded.
    Start(usize),
    /// End the job at this index as `skipped`, for this reason.
    Skip(usize, String),
}

/// The queued jobs in the order they start: higher priority first, then
/// first submitted first (the id breaks a tie of the same millisecond).
pub fn queue_order(jobs: &[Job]) -> Vec<usize> {
    let mut queued: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].status() == JobStatus::Queued).collect();
    let key = |i: &usize| {
        let waits = jobs[*i].waits.clone().unwrap_or_default();
        (std::cmp::Reverse(waits.priority), waits.queued_at, jobs[*i].id.clone())
    };
    queued.sort_by_key(key);
    queued
}

/// The queue a job counts against, if any.
pub fn queue_of(job: &Job) -> Option<&str> {
    job.waits.as_ref().and_then(|w| w.queue.as_deref())
}

/// How many of `queue`'s jobs run now (running or orphaned: an orphan's
/// processes still take the machine).
pub fn running_in_queue(jobs: &[Job], queue: &str) -> usize {
    jobs.iter()
        .filter(|j| matches!(j.status(), JobStatus::Running | JobStatus::Orphaned) && queue_of(j) == Some(queue))
        .count()
}

/// A queue's limit; a queue no longer in config.json runs one job at a time.
pub fn queue_limit(queues: &std::collections::BTreeMap<String, crate::store::config::QueueConfig>, queue: &str) -> usize {
    queues.get(queue).map_or(1, |q| q.max_parallel as usize)
}

/// The jobs `job` still waits for (those not ended yet), in its `--after` order.
pub fn waiting_for<'a>(job: &'a Job, jobs: &[Job]) -> Vec<&'a str> {
    let Some(waits) = &job.waits else { return Vec::new() };
    // Ended (how is skip_reason's to judge), or ready when that is enough.
    let settled = |dep: &Job| dep.status().is_final() || (waits.after_ready && was_ready(dep));
    waits
        .after
        .iter()
        .filter(|id| jobs.iter().find(|j| &j.id == *id).is_some_and(|dep| !settled(dep)))
        .map(String::as_str)
        .collect()
}

/// With `after_ready`: a job of `after` that has a readiness check was seen ready.
fn was_ready(dep: &Job) -> bool {
    dep.ready.is_some() && dep.ready_at.is_some()
}

/// Why `job` will never start, if a job it runs after ended without success
/// (and it did not ask for `--after-any`): `skipped: build-3f2a1c failed (exit 1)`.
fn skip_reason(job: &Job, jobs: &[Job]) -> Option<String> {
    let waits = job.waits.as_ref()?;
    if waits.after_any {
        return None;
    }
    waits.after.iter().find_map(|id| match jobs.iter().find(|j| &j.id == id) {
        None => Some(format!("skipped: {id} is no longer in the registry (pruned), so its outcome is unknown")),
        Some(dep) if waits.after_ready && was_ready(dep) => None,
        // It will never be ready: its readiness timeout passed (it runs on).
        Some(dep) if waits.after_ready && !dep.status().is_final() && dep.not_ready_after(now_ms()).is_some() => {
            let limit = dep.not_ready_after(now_ms()).unwrap_or_default();
            Some(format!("skipped: {id} was not ready after {}", crate::model::duration::format_duration_ms(limit)))
        }
        Some(dep) if dep.status().is_final() && dep.status() != JobStatus::Success => Some(match dep.status() {
            JobStatus::Skipped => format!("skipped: {id} was skipped"),
            status => format!("skipped: {id} {status} ({})", crate::model::job::how_it_ended(dep)),
        }),
        Some(_) => None,
    })
}

/// The next step for the queue: the first queued job (in `queue_order`)
/// that must be skipped, or that may start now (everything it runs after
/// has ended, and its queue has a free slot). `None`: nothing can move.
pub fn next_queue_step(
    jobs: &[Job],
    queues: &std::collections::BTreeMap<String, crate::store::config::QueueConfig>,
) -> Option<QueueStep> {
    for i in queue_order(jobs) {
        let job = &jobs[i];
        if let Some(reason) = skip_reason(job, jobs) {
            return Some(QueueStep::Skip(i, reason));
        }
        if !waiting_for(job, jobs).is_empty() {
            continue;
        }
        match queue_of(job) {
            Some(queue) if running_in_queue(jobs, queue) >= queue_limit(queues, queue) => continue,
            _ => return Some(QueueStep::Start(i)),
        }
    }
    None
}

/// A queued job's place: 1 for the next to start in its queue (or among
/// the jobs without a queue).
pub fn queue_position(jobs: &[Job], id: &str) -> Option<usize> {
    let job = jobs.iter().find(|j| j.id == id && j.status() == JobStatus::Queued)?;
    let queue = queue_of(job);
    queue_order(jobs).into_iter().filter(|&i| queue_of(&jobs[i]) == queue).position(|i| jobs[i].id == id).map(|p| p + 1)
}
