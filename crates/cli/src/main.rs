//! The `run-bg` CLI: parses arguments, calls the core, prints. Also the
//! supervisor (`run-bg __supervise`, started by the core, not by users).
//!
//! Here: parsing (the clap definitions are in `args.rs`) and the dispatch
//! to each verb's file, `cmd/<verb>.rs`, which prints its own answer through
//! `print.rs`; `face.rs` is how the command line names options to the core.

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]
// Linux with glibc: our own C `main` (below), without std's runtime start-up; unit
// tests keep the test harness's.
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]

// First: `outln!` is for every module declared after it.
#[macro_use]
mod print;
mod args;
mod cmd;
mod context;
mod face;
mod warnings;

use args::{HooksAction, Parsed, Sub};
use face::CommandLine;
use proc_manager_core::model::protocol::HiddenMode;
use proc_manager_core::model::text::visible;
use proc_manager_core::verbs::verb_options::{LogsOptions, OrphansOptions};
use proc_manager_core::{Error, Result};
use std::ffi::OsString;
use std::io::Write;

/// Linux with glibc (which hands argc and argv to std's `.init_array` hook
/// before main, so `std::env::args` still works; musl does not): std's
/// start-up (`lang_start`) costs each run-bg process a quarter
/// of a millisecond of CPU (the main thread's stack guard, found by reading
/// and parsing /proc/self/maps, and its signal stack), as much as the rest
/// of a start's work before main; a start runs two (the CLI and the
/// supervisor) on its way to the job. What of it we rely on is done here
/// (`start_as_std_does`); the arguments are std's as ever (glibc hands them
/// to std before main). Unlike std's, this main has no handler for a stack
/// overflow (it ends in a plain SIGSEGV). A panic ends with exit code 101, as
/// std's `main` does.
#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
#[no_mangle]
extern "C" fn main(_argc: std::ffi::c_int, _argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    proc_manager_core::os::sys::start_as_std_does();
    std::process::exit(std::panic::catch_unwind(run_bg).unwrap_or(101))
}

#[cfg(any(not(all(target_os = "linux", target_env = "gnu")), test))]
fn main() {
    std::process::exit(run_bg())
}

/// Everything `main` does: each way out exits (with `std::process::exit`,
/// which flushes stdout as a return from main does).
fn run_bg() -> i32 {
    // Arguments are bytes: the program's may be any (`ls $'caf\xe9'`).
    let args: Vec<OsString> = std::env::args_os().collect();
    // The hidden modes' words come from the core, always text.
    let words: Option<Vec<String>> = args.iter().skip(1).map(|a| a.to_str().map(str::to_string)).collect();
    match words.and_then(|words| HiddenMode::parse(&words)) {
        Some(HiddenMode::Supervise) => {
            warnings::init_background();
            std::process::exit(cmd::supervise::run())
        }
        Some(HiddenMode::Errand(errand)) => {
            warnings::init_background();
            std::process::exit(cmd::errand::run(errand))
        }
        None => {}
    }
    // A harness's hook says nothing but its answer, and never fails the
    // harness: no warnings on stderr (they would reach the model with a
    // wake), no exit 2 for bad arguments (Claude Code takes exit 2 for a wake).
    if args.get(1).is_some_and(|a| a == "hook") {
        std::process::exit(cmd::hook::run_guarded(&args));
    }
    warnings::init();
    // As a command-line tool, end quietly when the reader goes away
    // (`run-bg list | head`), as Unix tools do, instead of panicking on EPIPE.
    // Every subcommand has done its work before it prints.
    proc_manager_core::os::sys::default_sigpipe();
    let code = match run(&args) {
        Ok(code) => code,
        Err(e) => {
            // Errors quote user input (an id, a path): its control characters written out.
            eprintln!("run-bg: {}", visible(&e.to_string()));
            e.exit_code()
        }
    };
    let _ = std::io::stdout().flush();
    code
}

fn run(args: &[OsString]) -> Result<i32> {
    match args::parse(args, &CommandLine)? {
        Parsed::Start(cli) => cmd::start::run(*cli),
        Parsed::Sub(command) => run_sub(command),
    }
}

/// Each subcommand to its verb's file.
fn run_sub(command: Sub) -> Result<i32> {
    if let Sub::Top { args } = command {
        return cmd::top::run(args);
    }
    if let Sub::Hooks { action } = command {
        return match action {
            HooksAction::Install { target, remove, wait, trust } => {
                cmd::hook::install(&target.harness, target.project, remove, target.dry_run, wait.as_deref(), trust)
            }
            HooksAction::Remove { target } => cmd::hook::install(&target.harness, target.project, true, target.dry_run, None, false),
        };
    }
    let context = match &command {
        Sub::Kill { .. } | Sub::Orphans { options: OrphansOptions { mode: Some(_), .. }, .. } | Sub::Down { .. } => context::load_for_kill()?,
        _ => context::load()?,
    };
    match command {
        Sub::Check { id, options, json } => cmd::check::run(&context, &id, &options, json.json),
        Sub::Logs { id: None, all: false, .. } => {
            Err(Error::Usage("give a job id (run-bg logs <id>), or --all for every job's output".into()))
        }
        Sub::Logs { id: None, options: LogsOptions { owner, lines, since, .. }, follow, json, raw, .. } => {
            cmd::logs::all_jobs(&context, owner, lines, follow, since, json, raw)
        }
        Sub::Logs { id: Some(_), raw: true, .. } => {
            Err(Error::Usage("--raw is for `logs --all` on a terminal (a job's own `logs <id>` prints its bytes as written)".into()))
        }
        Sub::Logs { id: Some(_), options: LogsOptions { owner: Some(_), .. }, .. } => Err(Error::Usage(
            "--owner picks jobs for `logs --all` without an id; give a job id or --owner, not both".into(),
        )),
        Sub::Logs { id: Some(id), options: LogsOptions { lines, since, .. }, all, follow, json, .. } => match since {
            Some(since) => cmd::logs::since(&context, &id, since, lines, json),
            None => cmd::logs::run(&context, &id, lines, all, follow, json),
        },
        Sub::List { options, json } => cmd::list::run(&context, options, json.json),
        Sub::Wait { ids, options, json } => {
            let timeout = options.timeout(&CommandLine)?;
            match options.ready {
                true => cmd::wait::until_ready(&context, &ids, timeout, json.json),
                false => cmd::wait::run(&context, &ids, timeout, json.json),
            }
        }
        Sub::Kill { ids, all, options, json } => cmd::kill::run(&context, &ids, all, &options, json.json),
        Sub::Pause { ids, json } => cmd::pause::run(&context, &ids, true, json.json),
        Sub::Resume { ids, json } => cmd::pause::run(&context, &ids, false, json.json),
        Sub::Rerun { id, json } => cmd::rerun::run(&context, &id, json.json),
        Sub::Orphans { options, json } => cmd::orphans::run(&context, options, json.json),
        Sub::Summary { options, json } => cmd::summary::run(&context, &options, json.json),
        Sub::Ps { mcp, json } => cmd::ps::run(&context, mcp, json.json),
        Sub::Prune { options, json } => cmd::prune::run(&context, &options, json.json),
        Sub::Reconcile { json } => cmd::reconcile::run(&context, json.json),
        Sub::Send { id, text, options, json } => cmd::send::run(&context, &id, text, &options, json.json),
        Sub::Up { stack, options, json } => cmd::stack::up(&context, &stack, &options, json.json),
        Sub::Down { stack, options, json } => cmd::stack::down(&context, &stack, &options, json.json),
        Sub::Top { .. } | Sub::Hook { .. } | Sub::Hooks { .. } => unreachable!("run before the context is loaded"),
    }
}
