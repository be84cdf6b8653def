//! `run-bg rerun <id>`: an ended job started again as a new job, with the
//! command, cwd, environment additions and options it was started with.

use super::start::answer_start;
use crate::face::CommandLine;
use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format;
use proc_manager_core::present::view::StartView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::Result;

pub fn run(context: &Context, id: &str, json: bool) -> Result<i32> {
    let exe = context.runner.clone().expect("load_context sets the runner");
    let Some(started) = answer_start(context.rerun(id, &CommandLine, &exe), json)? else {
        return Ok(1);
    };
    if json {
        print_json(&StartView::from(&started));
    } else {
        outln!("{} (a rerun of {})", format::start_ack(&started), visible(id));
    }
    Ok(0)
}
