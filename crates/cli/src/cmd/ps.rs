//! `run-bg ps [--mcp]`: a process snapshot, MCP/browser processes marked,
//! each with the job that owns it, and each job's total.

use crate::print::print_json;
use proc_manager_core::present::format::shorten;
use proc_manager_core::present::view::SnapshotView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::list::ListFilter;
use proc_manager_core::verbs::left_behind;
use proc_manager_core::Result;

pub fn run(context: &Context, mcp: bool, json: bool) -> Result<i32> {
    let mut snap = left_behind::snapshot(&context.config.diagnostics.resource_tracking.mcp_patterns);
    let jobs = context.list(&ListFilter { all: true, owner: None, status: None, session: None })?;
    left_behind::assign_jobs(&mut snap, &jobs, &context.processes_of_jobs(&jobs));
    let shown: Vec<&left_behind::ProcessInfo> = snap.processes.iter().filter(|p| !mcp || p.is_mcp).collect();
    if json {
        print_json(&SnapshotView::new(&snap, |p| !mcp || p.is_mcp));
        return Ok(0);
    }
    let job_width = shown.iter().filter_map(|p| p.job_id.as_ref()).map(|j| j.len()).max().unwrap_or(1).max(3);
    outln!("{:>7} {:>7} {:>8}  {:<job_width$}  COMMAND", "PID", "PPID", "RSS MiB", "JOB");
    for p in &shown {
        let mark = if p.is_mcp { "[mcp] " } else { "" };
        let job = p.job_id.as_deref().unwrap_or("-");
        outln!("{:>7} {:>7} {:>8.1}  {job:<job_width$}  {mark}{}", p.pid, p.ppid, p.memory_mb, shorten(&p.command, 100));
    }
    outln!(
        "{} process(es){}, {:.1} MiB resident in all",
        shown.len(),
        if mcp { " matching mcp_patterns" } else { "" },
        shown.iter().fold(0.0, |sum, p| sum + p.memory_mb)
    );
    // Per job, in the order the jobs were started.
    for job in &jobs {
        let mine: Vec<&&left_behind::ProcessInfo> = shown.iter().filter(|p| p.job_id.as_deref() == Some(job.id.as_str())).collect();
        if !mine.is_empty() {
            let total = mine.iter().fold(0.0, |sum, p| sum + p.memory_mb);
            outln!("job {}: {} process(es), {total:.1} MiB resident", job.id, mine.len());
        }
    }
    Ok(0)
}
