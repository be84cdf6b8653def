//! `prune`: forgets ended jobs (and unreadable records) and deletes their logs.

use crate::os::procinfo::{self};
use crate::{os::tree, now_ms, Result};
use std::time::Duration;
use crate::verbs::context::Context;

impl Context {
    /// Forgets finished jobs that ended more than `older_than` ago (all finished
    /// jobs without it) and deletes their logs. Returns the ids removed.
    pub fn prune(&self, older_than: Option<Duration>) -> Result<Vec<String>> {
        let cutoff = now_ms().saturating_sub(older_than.map_or(0, |d| d.as_millis() as u64));
        self.reconcile()?;
        let rows = procinfo::table();
        let live = tree::TableIndex::new(&rows);
        let removed = self.registry().update(|jobs| {
            let mut removed = Vec::new();
            jobs.retain(|job| {
                let old_enough = job.ended_at().unwrap_or(job.started_at) <= cutoff;
                let remove = job.status().is_final()
                    && old_enough
                    && !tree::has_live_processes(job, &crate::store::procset::load(&self.home.job_dir(&job.id)), &live);
                if remove {
                    removed.push(job.id.clone());
                }
                !remove
            });
            removed
        })?;
        for id in &removed {
            let _ = std::fs::remove_dir_all(self.home.job_dir(id));
        }
        let mut removed = removed;
        // Unreadable records as old as their job.json go too, unless
        // something of their job lives (its supervisor, its cookie): its
        // `kill` ends that first, and then the record is most often written
        // anew by its supervisor.
        let unreadable: Vec<_> = self.registry().corrupt_records()?.into_iter().filter(|r| r.removable && r.modified_ms <= cutoff).collect();
        let rows = if unreadable.is_empty() { Vec::new() } else { crate::os::procinfo::table() };
        let lives = |id: &str| crate::verbs::kill::unreadable::unreadable_job_tree(&rows, id, &self.home).is_some();
        for record in unreadable.into_iter().filter(|r| !lives(&r.id)) {
            if self.registry().remove_corrupt(&record.id)? {
                removed.push(record.id);
            }
        }
        Ok(removed)
    }
}
