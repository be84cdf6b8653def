//! `run-bg list`: jobs in the registry, running ones and those ended within the hour.

use crate::print::print_json;
use proc_manager_core::present::{format, table};
use proc_manager_core::verbs::usage::UsageProbe;
use proc_manager_core::present::view::{CorruptJobView, JobView};
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::ListOptions;
use proc_manager_core::{Error, Result};

pub fn run(context: &Context, options: ListOptions, json: bool) -> Result<i32> {
    let filter = options.filter(&crate::face::CommandLine)?;
    // Unreadable records belong to no status and no owner that can be told.
    let unfiltered = filter.status.is_none() && filter.owner.is_none();
    let jobs = context.list(&filter)?;
    let places = context.queue_places(&jobs)?;
    let corrupt = if unfiltered { context.corrupt_records()? } else { Vec::new() };
    if json {
        let mut shown: Vec<serde_json::Value> = Vec::new();
        for job in &jobs {
            shown.push(serde_json::to_value(JobView::from(job).placed(places.get(&job.id))).map_err(|e| Error::Other(e.to_string()))?);
        }
        for record in &corrupt {
            shown.push(serde_json::to_value(CorruptJobView::from(record)).map_err(|e| Error::Other(e.to_string()))?);
        }
        print_json(&shown);
    } else if std::io::IsTerminal::is_terminal(&std::io::stdout()) && !jobs.is_empty() {
        // For people: the table. Pipes and agents get the compact lines below.
        let width = proc_manager_core::os::sys::terminal_columns().map_or(80, usize::from);
        let usage = UsageProbe::new().look(context, &jobs);
        for line in table::jobs_table(&jobs, &places, &usage, width, table::colour_allowed(true)) {
            outln!("{line}");
        }
        for record in &corrupt {
            outln!("{}", format::corrupt_line(record));
        }
    } else if !corrupt.is_empty() {
        for line in format::list_text(&jobs, &places, &context.leftover_counts(&jobs)) {
            outln!("{line}");
        }
        for record in &corrupt {
            outln!("{}", format::corrupt_line(record));
        }
    } else if jobs.is_empty() {
        outln!("{}", format::nothing_listed(&filter, "--all"));
    } else {
        for line in format::list_text(&jobs, &places, &context.leftover_counts(&jobs)) {
            outln!("{line}");
        }
    }
    Ok(0)
}
