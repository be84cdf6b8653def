//! `orphans [--kill]`: orphaned jobs and the processes ended jobs left behind.

use crate::model::job::{Job, JobStatus};
use crate::os::procinfo::ProcessEntry;
use crate::store::registry::Patience;
use crate::Result;
use std::time::Duration;
use crate::verbs::context::Context;
use crate::verbs::kill::{mark_killed, terminate_processes};

#[derive(Debug, Clone, Default)]
pub struct OrphanOptions {
    pub kill: bool,
    pub force: bool,
    pub owner: Option<String>,
    pub grace: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct OrphanProcess {
    pub job_id: String,
    pub job_status: JobStatus,
    pub process: ProcessEntry,
}

#[derive(Debug, Clone)]
pub struct OrphanReport {
    /// Processes left behind by ended or orphaned jobs.
    pub found: Vec<OrphanProcess>,
    /// Jobs whose supervisor is gone while their processes run.
    pub orphaned_jobs: Vec<Job>,
    pub killed: Vec<OrphanProcess>,
    pub failed: Vec<(OrphanProcess, String)>,
}

impl Context {
    /// Orphaned jobs, and every process that still carries the cookie of a job
    /// that has ended. With `kill`, removes them (SIGTERM, grace, SIGKILL).
    pub fn orphans(&self, options: &OrphanOptions) -> Result<OrphanReport> {
        self.reconcile()?;
        let jobs: Vec<Job> = self
            .registry()
            .load()?
            .into_iter()
            .filter(|j| j.status().is_final() || j.status() == JobStatus::Orphaned)
            .filter(|j| options.owner.as_ref().is_none_or(|o| j.owner.as_ref() == Some(o)))
            .collect();
        let mut owned = self.processes_of_jobs_anywhere(&jobs);
        let found: Vec<OrphanProcess> = jobs
            .iter()
            .flat_map(|job| {
                let processes = owned.remove(&job.id).unwrap_or_default();
                processes.into_iter().map(|process| OrphanProcess { job_id: job.id.clone(), job_status: job.status(), process })
            })
            .collect();
        let orphaned_jobs: Vec<Job> = jobs.iter().filter(|j| j.status() == JobStatus::Orphaned).cloned().collect();
        let mut report = OrphanReport { found, orphaned_jobs, killed: Vec::new(), failed: Vec::new() };
        if !options.kill {
            return Ok(report);
        }
        let grace = options.grace.unwrap_or(Duration::from_millis(self.config.kill.grace_ms));
        for job in &report.orphaned_jobs {
            let _ = self.note_kill_request(&job.id, grace, options.force);
        }
        let targets: Vec<&ProcessEntry> = report.found.iter().map(|o| &o.process).collect();
        let failures = terminate_processes(&targets, grace, options.force);
        for orphan in &report.found {
            match failures.iter().find(|(pid, _)| *pid == orphan.process.identity.pid) {
                Some((_, why)) => report.failed.push((orphan.clone(), why.clone())),
                None => report.killed.push(orphan.clone()),
            }
        }
        // One registry write for them all: one each made `orphans --kill` of
        // N orphaned jobs cost N registry rewrites.
        let ids: Vec<String> = report.orphaned_jobs.iter().map(|j| j.id.clone()).collect();
        if let Err(e) = self.change_statuses(&ids, Patience::Full, mark_killed) {
            tracing::warn!("killed {} orphaned job(s), but that could not be recorded: {e}", ids.len());
        }
        Ok(report)
    }
}
