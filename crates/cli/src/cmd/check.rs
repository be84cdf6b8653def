//! `run-bg check <id>`: status, exit code, runtime and the last lines.

use crate::print_json;
use proc_manager_core::os::procinfo::ProcessEntry;
use proc_manager_core::present::format;
use proc_manager_core::present::view::{kb_to_mb, CheckView, JobView, ProcessView};
use proc_manager_core::verbs::ops::{CheckResult, Context, TailQuery};
use proc_manager_core::Result;

pub fn run(context: &Context, id: &str, lines: usize, grep: Option<&str>, errors: bool, json: bool) -> Result<i32> {
    let query = TailQuery::new(Some(lines), grep)?.errors(errors)?;
    let check = context.check(id, &query)?;
    print(&check, json);
    Ok(0)
}

/// What `check` prints; also what `--yield` prints for a job that ended in time.
pub fn print(check: &CheckResult, json: bool) {
    if json {
        let (job, tail, lingering) = (&check.job, &check.tail, &check.lingering);
        print_json(&CheckView {
            job: JobView::from(job),
            tail: tail.to_vec(),
            lingering: process_views(lingering),
            processes: check.usage.map(|u| u.processes),
            rss_mb: check.usage.map(|u| kb_to_mb(u.rss_kb)),
        });
        return;
    }
    outln!("{}", format::check_text(check));
}

fn process_views(processes: &[ProcessEntry]) -> Vec<ProcessView> {
    processes.iter().map(ProcessView::from).collect()
}
