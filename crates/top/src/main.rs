//! `run-bg-top`: a full-screen live view of the jobs (`run-bg top` execs
//! it). A binary of its own, so that `run-bg`, every job's supervisor,
//! carries no terminal UI. It reads what `list` and `check` read, once a
//! second (no daemon, nothing written but what `list` itself records), and
//! acts through the core's verbs.

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]

mod actions;
mod app;

use proc_manager_core::verbs::context::Context;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: run-bg top [--owner <name>]

A live view of the jobs: the table refreshes every second, the selected
job's output below it. Keys: up/down or j/k select, x or K kill (asks
first), X force kill, p pause, r resume, R rerun, f follow the log, / filter
(an owner or a status), o next owner, s next status, ? help, q quit.";

/// How often the jobs are read again.
const REFRESH: Duration = Duration::from_secs(1);

fn main() {
    let code = match run() {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("run-bg top: {message}");
            2
        }
    };
    std::process::exit(code)
}

struct Arguments {
    owner: Option<String>,
    /// The `run-bg` that background work is handed to (watchers,
    /// announcements): the one that exec'd us, else the one beside us.
    runner: PathBuf,
}

fn arguments() -> Result<Arguments, String> {
    let mut owner = None;
    let mut runner = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--owner" => owner = Some(args.next().ok_or("--owner needs a name: run-bg top --owner <name>")?),
            "--runner" => runner = Some(PathBuf::from(args.next().ok_or("--runner needs the path of run-bg")?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => return Err(format!("unknown argument `{}`\n{USAGE}", proc_manager_core::model::text::visible(other))),
        }
    }
    let runner = match runner {
        Some(runner) => runner,
        None => {
            let me = std::env::current_exe().map_err(|e| format!("cannot find its own executable: {e}"))?;
            me.with_file_name(format!("run-bg{}", std::env::consts::EXE_SUFFIX))
        }
    };
    Ok(Arguments { owner, runner })
}

fn run() -> Result<(), String> {
    let arguments = arguments()?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err("needs a terminal (it is a full-screen view); a script or an agent reads `run-bg list --json`".into());
    }
    let context = Context::load().map_err(|e| e.to_string())?.with_runner(arguments.runner);
    let mut app = app::App::new(context, arguments.owner, Box::new(actions::CoreVerbs));
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot set up the terminal: {e}"))?;
    let result = event_loop(&mut terminal, &mut app);
    // Raw mode off and the main screen back, also after an error.
    let restored = ratatui::try_restore();
    result?;
    restored.map_err(|e| format!("cannot restore the terminal: {e}"))
}

fn event_loop(terminal: &mut ratatui::DefaultTerminal, app: &mut app::App) -> Result<(), String> {
    use crossterm::event::{self, Event, KeyEventKind};
    let failed = |e: std::io::Error| format!("terminal: {e}");
    let mut refreshed_at: Option<Instant> = None;
    let mut dirty = true;
    loop {
        if refreshed_at.is_none_or(|at| at.elapsed() >= REFRESH) {
            app.refresh();
            refreshed_at = Some(Instant::now());
            dirty = true;
        }
        dirty |= app.take_finished_work();
        if dirty {
            terminal.draw(|frame| app.draw(frame)).map_err(failed)?;
            dirty = false;
        }
        let until_refresh = REFRESH.saturating_sub(refreshed_at.map_or(REFRESH, |at| at.elapsed()));
        // A kill runs on a thread: look for its answer more often meanwhile.
        let wait = if app.busy() { until_refresh.min(Duration::from_millis(100)) } else { until_refresh };
        if !event::poll(wait).map_err(failed)? {
            continue;
        }
        match event::read().map_err(failed)? {
            Event::Key(key) if key.kind == KeyEventKind::Press => {
                if app.key(key) == app::Next::Quit {
                    return Ok(());
                }
                dirty = true;
            }
            Event::Resize(..) => dirty = true,
            _ => {}
        }
    }
}
