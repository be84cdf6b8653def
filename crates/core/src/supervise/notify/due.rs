//! What is due when a job reaches a status: the notification to claim and
//! the hooks to run.

use crate::model::job::{Job, Notification};
use crate::store::config::NotifyConfig;

/// The notification to claim when a job reaches `job.status()`, if any is due.
pub fn claim(config: &NotifyConfig, job: &Job) -> Option<Notification> {
    (job.notify && config.url.is_some()).then(|| Notification {
        event_id: job.event_id(),
        level: Some(config.level_for(job.status().as_str()).to_string()),
        ..Default::default()
    })
}

/// Hooks to run for this job's current status: `notify.command` (unless the
/// job opted out of notifications) and the job's own `--on-exit`.
pub(super) fn hooks_for(config: &NotifyConfig, job: &Job) -> Vec<String> {
    if !job.status().is_final() {
        return Vec::new();
    }
    let global = config.command.clone().filter(|_| job.notify);
    global.into_iter().chain(job.on_exit.clone()).collect()
}

pub fn has_work(config: &NotifyConfig, job: &Job) -> bool {
    claim(config, job).is_some() || !hooks_for(config, job).is_empty()
}
