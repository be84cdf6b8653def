//! `run-bg orphans [--kill]`: orphaned jobs and processes left behind by
//! ended jobs; `--kill` removes them.

use crate::face::CommandLine;
use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format::shorten;
use proc_manager_core::present::view::OrphanReportView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::OrphansOptions;
use proc_manager_core::Result;

pub fn run(context: &Context, options: OrphansOptions, json: bool) -> Result<i32> {
    let options = options.options(&CommandLine)?;
    let kill = options.kill;
    let report = context.orphans(&options)?;
    if json {
        print_json(&OrphanReportView::from(&report));
    } else {
        if report.found.is_empty() && report.orphaned_jobs.is_empty() {
            outln!("no orphans: no process of an ended job is running");
        }
        for job in &report.orphaned_jobs {
            outln!("orphaned job {}: supervisor gone, processes still running · {}", job.id, shorten(&job.command, 60));
        }
        for o in &report.killed {
            outln!("killed: pid {} {} (job {}, {})", o.process.identity.pid, shorten(&o.process.command, 60), o.job_id, o.job_status);
        }
        if !kill {
            for o in &report.found {
                outln!("pid {} {} (job {}, {})", o.process.identity.pid, shorten(&o.process.command, 60), o.job_id, o.job_status);
            }
            if !report.found.is_empty() {
                outln!("run `run-bg orphans --kill` to remove them");
            }
        }
        for (o, why) in &report.failed {
            outln!(
                "failed: pid {} {} (job {}): {}",
                o.process.identity.pid,
                shorten(&o.process.command, 60),
                o.job_id,
                visible(why)
            );
        }
    }
    Ok(if report.failed.is_empty() { 0 } else { 1 })
}
