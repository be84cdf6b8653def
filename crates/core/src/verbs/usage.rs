//! What each job's processes use, for people: CPU %, memory, the TCP ports
//! they listen on, and the job's last line of output. `list` looks once, so
//! its CPU % is each process's lifetime average as `ps` gives it; `top`
//! looks every second with the same probe, and its CPU % is what the
//! processes used between two looks. Both count a job's processes as every
//! verb does (`TableIndex::members`), from one pass over the process table.

use crate::model::job::{Job, JobStatus};
use crate::now_ms;
use crate::os::ports::ListeningPorts;
use crate::os::procinfo::{self, CpuTime};
use crate::os::tree::{TableIndex, Tree};
use crate::store::log_read;
use crate::verbs::context::Context;
use std::collections::HashMap;

/// One job's processes as one look found them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobUsage {
    /// Its live processes (its supervisor not counted).
    pub processes: usize,
    /// Their resident memory added up, in KiB (shared pages counted in each).
    pub rss_kb: u64,
    /// Percent of one core (200 = two cores busy); `None` where the platform
    /// does not tell (macOS) or the job has no live process.
    pub cpu_percent: Option<f64>,
    /// The TCP ports its processes listen on, sorted; `None` where that
    /// cannot be told (macOS, Windows, descriptors not ours to read).
    pub ports: Option<Vec<u16>>,
    /// The last line of its output that is not blank.
    pub last_line: Option<String>,
}

/// When a look was (epoch ms), and each process's CPU time then (ms), by pid and start.
type Look = (u64, HashMap<(u32, u64), u64>);

/// Looks at jobs' processes, remembering from one look to the next what
/// makes the next cheaper or exact: each process's CPU time (for `top`'s
/// CPU % between looks), the sockets each process holds, each log's last line
/// while the log does not change.
#[derive(Debug, Default)]
pub struct UsageProbe {
    previous: Option<Look>,
    ports: ListeningPorts,
    /// Each job's log length when its last line was read, and that line.
    last_lines: HashMap<String, (u64, Option<String>)>,
}

impl UsageProbe {
    pub fn new() -> UsageProbe {
        UsageProbe::default()
    }

    /// Each job's usage, by job id. Queued jobs have no processes yet and
    /// are left out; ended jobs count what they left running.
    pub fn look(&mut self, context: &Context, jobs: &[Job]) -> HashMap<String, JobUsage> {
        let rows = procinfo::table();
        let index = TableIndex::new(&rows);
        self.ports.refresh();
        let now = now_ms();
        let mut members_of = Vec::with_capacity(jobs.len());
        for job in jobs.iter().filter(|j| j.status() != JobStatus::Queued) {
            let recorded = context.recorded_processes(job);
            let members = index.members(Tree::of(job).with_recorded(&recorded));
            members_of.push((job, members.rows));
        }
        let pids: Vec<u32> = members_of.iter().flat_map(|(_, rows)| rows.iter().map(|r| r.identity.pid)).collect();
        let cpu = procinfo::cpu_times(&pids);
        let mut cpu_now = HashMap::with_capacity(cpu.len());
        let mut usage = HashMap::with_capacity(jobs.len());
        for (job, rows) in members_of {
            let mut job_usage = JobUsage { processes: rows.len(), ..JobUsage::default() };
            let mut ports: Option<Vec<u16>> = Some(Vec::new());
            let mut percent: Option<f64> = None;
            for row in &rows {
                job_usage.rss_kb += row.rss_kb;
                let who = (row.identity.pid, row.identity.start_ticks);
                if let Some(time) = cpu.get(&row.identity.pid) {
                    cpu_now.insert(who, time.cpu_ms);
                    *percent.get_or_insert(0.0) += self.cpu_percent(who, time, now);
                }
                match (&mut ports, self.ports.ports_of(row.identity.pid, row.identity.start_ticks)) {
                    (Some(all), Some(found)) => all.extend(found),
                    _ => ports = None,
                }
            }
            if let Some(ports) = &mut ports {
                ports.sort_unstable();
                ports.dedup();
            }
            job_usage.cpu_percent = percent;
            job_usage.ports = if rows.is_empty() { Some(Vec::new()) } else { ports };
            job_usage.last_line = self.last_line(job);
            usage.insert(job.id.clone(), job_usage);
        }
        self.previous = Some((now, cpu_now));
        let shown: std::collections::HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        self.last_lines.retain(|id, _| shown.contains(id.as_str()));
        usage
    }

    /// Whether a look was taken already, so the next measures CPU from it.
    pub fn has_baseline(&self) -> bool {
        self.previous.is_some()
    }

    /// One process's CPU %: over the time since the last look when it was
    /// seen then (or started since), else over its whole life, as `ps`.
    fn cpu_percent(&self, who: (u32, u64), time: &CpuTime, now: u64) -> f64 {
        let percent = |used_ms: u64, over_ms: u64| used_ms as f64 * 100.0 / over_ms.max(1) as f64;
        match &self.previous {
            Some((at, before)) if now > *at => match before.get(&who) {
                Some(&earlier) => percent(time.cpu_ms.saturating_sub(earlier), now - at),
                None if time.started_at_ms >= *at => percent(time.cpu_ms, now - at),
                None => percent(time.cpu_ms, now.saturating_sub(time.started_at_ms)),
            },
            _ => percent(time.cpu_ms, now.saturating_sub(time.started_at_ms)),
        }
    }

    /// The job's last line that is not blank, read again only when its log changed.
    fn last_line(&mut self, job: &Job) -> Option<String> {
        let length = std::fs::metadata(&job.log_path).map_or(0, |m| m.len());
        if let Some((known, line)) = self.last_lines.get(&job.id) {
            if *known == length {
                return line.clone();
            }
        }
        let line = log_read::last_lines(&job.log_path, 1, Some(non_blank())).pop();
        self.last_lines.insert(job.id.clone(), (length, line.clone()));
        line
    }
}

fn non_blank() -> &'static regex::Regex {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| regex::Regex::new(r"\S").expect("valid pattern"))
}
