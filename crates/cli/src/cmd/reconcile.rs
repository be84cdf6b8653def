//! `run-bg reconcile`: verifies running jobs; supervisor gone → orphaned or lost.

use crate::print::print_json;
use proc_manager_core::present::format;
use proc_manager_core::present::view::ReconcileView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::Result;

pub fn run(context: &Context, json: bool) -> Result<i32> {
    let (orphaned, lost) = context.reconcile()?;
    if json {
        print_json(&ReconcileView::new(&orphaned, &lost));
    } else {
        outln!("{} orphaned, {} lost", orphaned.len(), lost.len());
        for job in orphaned.iter().chain(&lost) {
            outln!("{}", format::header(job, ""));
        }
    }
    Ok(0)
}
