//! `run-bg summary`: a few lines for an agent's context preamble.

use crate::print::print_json;
use proc_manager_core::present::view::SummaryView;
use crate::face::CommandLine;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::SummaryOptions;
use proc_manager_core::Result;

pub fn run(context: &Context, options: &SummaryOptions, json: bool) -> Result<i32> {
    let session = options.session(&CommandLine)?;
    let lines = context.summary(options.owner.as_deref(), session.as_ref())?;
    if json {
        print_json(&SummaryView { lines });
    } else {
        for line in &lines {
            outln!("{line}");
        }
    }
    Ok(0)
}
