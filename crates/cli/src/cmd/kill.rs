//! `run-bg kill <id>... | --all [--owner <name>] [--session [<id>]] [--older-than <dur>]`:
//! SIGTERM each job's process tree, SIGKILL what is left after the grace period.

use crate::face::CommandLine;
use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::view::KillView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::KillOptions;
use proc_manager_core::Result;

pub fn run(context: &Context, ids: &[String], all: bool, options: &KillOptions, json: bool) -> Result<i32> {
    let grace = options.grace(&CommandLine)?;
    let older_than = options.older_than(&CommandLine)?;
    let force = options.force;
    // What selects among all jobs needs --all: clap lets `requires = "all"`
    // pass once an id (which conflicts with --all) is given, and `kill <id>
    // --owner bob` killed the job whoever owned it.
    let selectors = [
        (older_than.is_some(), "--older-than", "2h"),
        (options.owner.is_some(), "--owner", "<name>"),
        (options.session.is_some(), "--session", "<id>"),
    ];
    if let Some((_, flag, example)) = selectors.into_iter().find(|&(present, ..)| present && !all) {
        return Err(proc_manager_core::Error::Usage(format!(
            "{flag} selects among all jobs: give it with --all (run-bg kill --all {flag} {example}), or name the jobs by id without it"
        )));
    }
    let results: Vec<std::result::Result<_, (String, _)>> = if all {
        context.kill_all(&options.selection(&CommandLine)?, older_than, grace, force)?
    } else {
        for id in ids {
            proc_manager_core::model::ids::validate_job_id(id)?;
        }
        ids.iter().map(|id| context.kill(id, grace, force).map_err(|e| (id.clone(), e))).collect()
    };
    let mut failed = false;
    let mut views = Vec::new();
    for result in results {
        match result {
            Ok(outcome) => {
                let view = KillView::from(&outcome);
                if !json {
                    outln!("{}", view.message);
                }
                views.push(view);
            }
            Err((job_id, e)) => {
                failed = true;
                eprintln!("run-bg: {}", visible(&e.to_string()));
                views.push(KillView::refused(&job_id, &e));
            }
        }
    }
    if json {
        print_json(&views);
    } else if views.is_empty() {
        outln!("no running jobs to kill");
    }
    Ok(if failed { 1 } else { 0 })
}
