//! `run-bg pause <id>...` / `run-bg resume <id>...`: stop a job's whole tree
//! (and its --timeout clock) until resumed.

use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::view::PauseView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::Result;

/// Each job in turn; exit 1 if any could not be paused or resumed. A job
/// already paused (or not paused, for `resume`) is no failure: it is as asked.
pub fn run(context: &Context, ids: &[String], pause: bool, json: bool) -> Result<i32> {
    let mut failed = false;
    let mut views = Vec::new();
    for id in ids {
        let outcome = if pause { context.pause(id) } else { context.resume(id) };
        match outcome {
            Ok(outcome) => {
                let view = PauseView::from(&outcome);
                if !json {
                    outln!("{}", view.message);
                }
                views.push(view);
            }
            Err(e) => {
                failed = true;
                eprintln!("run-bg: {}", visible(&e.to_string()));
                // Its own entry, as `kill --json` gives one; an unknown id has none.
                if let Ok(job) = context.job(id) {
                    views.push(PauseView::refused(&job, &e));
                }
            }
        }
    }
    if json {
        // One job asked: its view; several: the list of those done.
        match (ids.len(), views.pop()) {
            (1, Some(view)) => print_json(&view),
            (_, last) => {
                views.extend(last);
                print_json(&views)
            }
        }
    }
    Ok(if failed { 1 } else { 0 })
}
