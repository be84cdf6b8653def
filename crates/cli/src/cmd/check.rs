//! `run-bg check <id>`: status, exit code, runtime and the last lines.

use crate::print::print_json;
use proc_manager_core::present::format;
use proc_manager_core::present::view::CheckView;
use proc_manager_core::verbs::check::CheckResult;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::CheckOptions;
use proc_manager_core::Result;

pub fn run(context: &Context, id: &str, options: &CheckOptions, json: bool) -> Result<i32> {
    let query = options.query()?;
    let check = context.check(id, &query)?;
    print(&check, json);
    Ok(0)
}

/// What `check` prints; also what `--yield` prints for a job that ended in time.
pub fn print(check: &CheckResult, json: bool) {
    if json {
        print_json(&CheckView::from(check));
        return;
    }
    outln!("{}", format::check_text(check));
}
