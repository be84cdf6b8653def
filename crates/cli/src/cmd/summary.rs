//! `run-bg summary`: a few lines for an agent's context preamble.

use crate::print_json;
use proc_manager_core::present::view::SummaryView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::Result;

pub fn run(context: &Context, owner: Option<&str>, json: bool) -> Result<i32> {
    let lines = context.summary(owner)?;
    if json {
        print_json(&SummaryView { lines });
    } else {
        for line in &lines {
            outln!("{line}");
        }
    }
    Ok(0)
}
