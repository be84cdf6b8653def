//! `run-bg up` / `run-bg down`: a stack file's processes started as jobs of
//! the stack, or killed.

use crate::args::StackArgs;
use crate::face::CommandLine;
use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::format;
use proc_manager_core::present::view::{StackDownView, StackUpView};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::stack::{self, StackFile};
use proc_manager_core::verbs::verb_options::{DownOptions, UpOptions};
use proc_manager_core::{Error, Result};

fn read(args: &StackArgs) -> Result<StackFile> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?;
    stack::read(&stack::locate(args.file.as_deref(), &cwd)?)
}

pub fn up(context: &Context, args: &StackArgs, options: &UpOptions, json: bool) -> Result<i32> {
    let bound = options.yield_for(&CommandLine)?;
    let file = options.file(read(args)?);
    let runner = context.runner.clone().expect("load_context sets the runner");
    let mut up = context.stack_up(&file, options.owner.as_deref(), &runner)?;
    if let Some(bound) = bound {
        context.stack_settle(&mut up, bound, &Cancel::never())?;
    }
    let view = StackUpView::from(&up);
    if json {
        print_json(&view);
    } else {
        for line in format::stack_up_lines(&view) {
            outln!("{line}");
        }
    }
    for problem in &view.problems {
        eprintln!("run-bg: up: {problem}");
    }
    let failed = view.processes.iter().any(|p| p.error.is_some()) || view.ready == Some(false);
    Ok(if failed { 1 } else { 0 })
}

pub fn down(context: &Context, args: &StackArgs, options: &DownOptions, json: bool) -> Result<i32> {
    let file = read(args)?;
    let view = StackDownView::from(&context.stack_down(&file, options.owner.as_deref())?);
    if json {
        print_json(&view);
    } else {
        for line in format::stack_down_lines(&view) {
            outln!("{line}");
        }
    }
    let refused: Vec<&String> = view.killed.iter().filter_map(|k| k.kill.error.as_ref()).collect();
    for error in &refused {
        eprintln!("run-bg: {}", visible(error));
    }
    Ok(if refused.is_empty() { 0 } else { 1 })
}
