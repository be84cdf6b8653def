//! `run-bg summary`: a few lines for an agent's context preamble.

use crate::print::print_json;
use proc_manager_core::present::view::SummaryView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::list::SessionFilter;
use proc_manager_core::Result;

pub fn run(context: &Context, owner: Option<&str>, session: Option<&str>, json: bool) -> Result<i32> {
    let session = session.map(|text| SessionFilter::parse("--session", text)).transpose()?;
    let lines = context.summary(owner, session.as_ref())?;
    if json {
        print_json(&SummaryView { lines });
    } else {
        for line in &lines {
            outln!("{line}");
        }
    }
    Ok(0)
}
