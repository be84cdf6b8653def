//! `list` and `summary`: the jobs as they stand, and the few lines an agent
//! harness shows before each model call.

use crate::model::job::{Job, JobStatus};
use crate::model::duration::format_duration_ms;
use crate::{store::log_read, now_ms, model::text, Result};
use crate::verbs::context::{processes_still_running, Context};

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<JobStatus>,
    pub owner: Option<String>,
    pub session: Option<SessionFilter>,
    /// Without it, jobs that ended over an hour ago are left out.
    pub all: bool,
}

/// `--session <id>`; `current`: the session the caller runs in; `none`:
/// jobs of no session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionFilter {
    Id(String),
    Current,
    NoSession,
}

impl SessionFilter {
    pub fn parse(option: &str, text: &str) -> Result<SessionFilter> {
        match text {
            "current" => return Ok(SessionFilter::Current),
            "none" => return Ok(SessionFilter::NoSession),
            _ => {}
        }
        crate::store::sessions::check_id(text)
            .map(|()| SessionFilter::Id(text.to_string()))
            .map_err(|why| crate::Error::Usage(format!("{option}: {why}")))
    }
}

impl Context {
    /// The session id a filter names (`None`: jobs of no session).
    fn session_of(&self, filter: &SessionFilter) -> Result<Option<String>> {
        match filter {
            SessionFilter::NoSession => Ok(None),
            SessionFilter::Id(id) => Ok(Some(id.clone())),
            SessionFilter::Current => crate::store::sessions::detect(&self.home).map(Some).ok_or_else(|| {
                crate::Error::Usage(format!(
                    "not inside an agent session: {} is not set and no harness session was recorded for a process above this one (run-bg hooks install <harness> sets that up); give the session's id",
                    crate::store::sessions::SESSION_ENV
                ))
            }),
        }
    }

    pub fn list(&self, filter: &ListFilter) -> Result<Vec<Job>> {
        self.list_of(self.registry().load()?, filter)
    }

    /// `list` from the job directories alone (`Registry::load_job_files_only`).
    pub fn list_without_registry(&self, filter: &ListFilter) -> Result<Vec<Job>> {
        self.list_of(self.registry().load_job_files_only(), filter)
    }

    /// `list` of the jobs a registry read gave.
    pub(crate) fn list_of(&self, loaded: Vec<Job>, filter: &ListFilter) -> Result<Vec<Job>> {
        // An owner no start accepts selects nothing: refused as a start refuses it.
        if let Some(owner) = &filter.owner {
            crate::verbs::request::validate_name("owner", owner)?;
        }
        let recent_since = now_ms().saturating_sub(3_600_000);
        let session = filter.session.as_ref().map(|s| self.session_of(s)).transpose()?;
        let mut jobs = Vec::new();
        for job in self.reconcile_jobs(loaded)? {
            if let Some(status) = filter.status {
                if job.shown_status() != status {
                    continue;
                }
            } else if !filter.all && job.status().is_final() && job.ended_at().unwrap_or(0) < recent_since {
                continue;
            }
            if filter.owner.as_ref().is_some_and(|owner| job.owner.as_ref() != Some(owner)) {
                continue;
            }
            if session.as_ref().is_some_and(|session| job.session != *session) {
                continue;
            }
            jobs.push(job);
        }
        Ok(jobs)
    }

    /// The few lines an agent harness puts in front of each model call: jobs
    /// still running (pid, command, runtime, last line) and jobs that ended
    /// but nobody has looked at yet. Empty when there is nothing to say.
    pub fn summary(&self, owner: Option<&str>, session: Option<&SessionFilter>) -> Result<Vec<String>> {
        let filter = ListFilter { all: true, owner: owner.map(str::to_string), session: session.cloned(), status: None };
        let jobs = self.list(&filter)?;
        let now = now_ms();
        let mut lines = Vec::new();
        for job in jobs.iter().filter(|j| !j.status().is_final()) {
            let command = text::cut(&text::visible(&job.command).replace('\n', " "), 60);
            let runtime = format_duration_ms(job.duration_ms(now));
            let pid = job.pid().map(|p| format!("PID {p} ")).unwrap_or_default();
            let state = match job.status() {
                JobStatus::Orphaned => format!("orphaned (supervisor gone) after {runtime}"),
                JobStatus::Queued => format!("queued for {runtime}"),
                _ if job.paused_at.is_some() => format!("paused, running {runtime}"),
                _ => format!("running {runtime}"),
            };
            let last = log_read::last_lines(std::path::Path::new(&job.log_path), 1, Some(non_blank()))
                .pop()
                .map(|l| format!(", last line: \"{}\"", text::cut(&l, 80)))
                .unwrap_or_default();
            lines.push(format!("{pid}({}): `{command}` — {state}{last}", job.id));
        }
        // One pass over /proc for every ended job: one whose processes run on
        // is said so, never plain `success`.
        let left = self.leftover_counts(&jobs);
        let left_count = |job: &Job| left.get(&job.id).copied().unwrap_or(0);
        let unseen: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.status().is_final() && j.seen_at.is_none())
            .filter(|j| now.saturating_sub(j.ended_at().unwrap_or(j.started_at)) < 24 * 3_600_000)
            .collect();
        const SHOWN: usize = 5;
        for job in unseen.iter().rev().take(SHOWN) {
            let how = crate::model::job::how_it_ended(job);
            let still = match left_count(job) {
                0 => String::new(),
                n => format!(", {},", processes_still_running(n)),
            };
            lines.push(format!(
                "finished: {} `{}` {} ({how}){still} after {} — run-bg check {}",
                job.id,
                text::cut(&text::visible(&job.command).replace('\n', " "), 50),
                job.status(),
                format_duration_ms(job.duration_ms(now)),
                job.id
            ));
        }
        // Ended jobs already looked at (or not shown above) whose processes run on.
        let shown: std::collections::HashSet<&str> = unseen.iter().rev().take(SHOWN).map(|j| j.id.as_str()).collect();
        for job in jobs.iter().filter(|j| j.status().is_final() && left_count(j) > 0 && !shown.contains(j.id.as_str())) {
            lines.push(format!(
                "ended: {} `{}` {} ({}), {} — run-bg kill {} removes them",
                job.id,
                text::cut(&text::visible(&job.command).replace('\n', " "), 50),
                job.status(),
                crate::model::job::how_it_ended(job),
                processes_still_running(left_count(job)),
                job.id
            ));
        }
        if unseen.len() > SHOWN {
            lines.push(format!("…and {} more finished jobs not looked at (run-bg list)", unseen.len() - SHOWN));
        }
        Ok(lines)
    }
}

fn non_blank() -> &'static regex::Regex {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| regex::Regex::new(r"\S").expect("valid pattern"))
}
