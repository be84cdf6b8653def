//! `run-bg prune [--older-than <dur>]`: forgets finished jobs, deletes their logs.

use crate::face::CommandLine;
use crate::print::print_json;
use proc_manager_core::present::view::PruneView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::PruneOptions;
use proc_manager_core::Result;

pub fn run(context: &Context, options: &PruneOptions, json: bool) -> Result<i32> {
    let older_than = options.older_than(&CommandLine)?;
    let removed = context.prune(older_than)?;
    if json {
        print_json(&PruneView { removed });
    } else {
        outln!("removed {} finished job(s)", removed.len());
    }
    Ok(0)
}
