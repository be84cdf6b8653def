//! `run-bg list`: jobs in the registry, running ones and those ended within the hour.

use crate::print_json;
use proc_manager_core::model::job::JobStatus;
use proc_manager_core::present::format;
use proc_manager_core::present::view::JobView;
use proc_manager_core::verbs::ops::{Context, ListFilter};
use proc_manager_core::{Error, Result};

pub fn run(context: &Context, all: bool, status: Option<String>, owner: Option<String>, json: bool) -> Result<i32> {
    let status = status
        .map(|s| JobStatus::parse_or_explain(&s).map_err(|e| Error::Usage(format!("--status: {e}"))))
        .transpose()?;
    let jobs = context.list(&ListFilter { status, owner, all: all || status.is_some() })?;
    let places = context.queue_places(&jobs)?;
    if json {
        print_json(&jobs.iter().map(|j| JobView::from(j).placed(places.get(&j.id))).collect::<Vec<_>>());
    } else if jobs.is_empty() {
        outln!("no jobs{}", if all { "" } else { " running or ended within the hour (--all for every job)" });
    } else {
        for line in format::list_text(&jobs, &places, &context.leftover_counts(&jobs)) {
            outln!("{line}");
        }
    }
    Ok(0)
}
