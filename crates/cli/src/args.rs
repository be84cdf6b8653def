//! The command line as clap defines it: the start (`run-bg [options] --
//! <program>`), every subcommand and its flags, and what a usage error says.
//! The start options and the verbs' shared options are defined once in the
//! core (verbs/start_options.rs, verbs/verb_options.rs) for every face.

use clap::{Args, Parser, Subcommand};
use proc_manager_core::model::os_text::bytes_of;
use proc_manager_core::model::text::visible;
use proc_manager_core::verbs::start_options::{Face, StartOptions};
use proc_manager_core::verbs::verb_options::{
    CheckOptions, DownOptions, KillOptions, ListOptions, LogsOptions, OrphansOptions, PruneOptions, SendOptions, SummaryOptions, UpOptions,
    WaitOptions, YieldOptions,
};
use proc_manager_core::{Error, Result};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// What the command line asks for.
pub enum Parsed {
    /// `run-bg [options] -- <program> [args...]`
    Start(Box<StartCli>),
    /// `run-bg <command> …`
    Sub(Sub),
}

/// The arguments as clap reads them. A usage error (and `--help`,
/// `--version`) ends the process here, as clap would, its text made safe.
/// `face`: how the command line speaks to the core (face.rs), to try a
/// suggested command's options with.
pub fn parse(args: &[OsString], face: &dyn Face) -> Result<Parsed> {
    let first = args.get(1).map(|word| word.as_os_str());
    // `run-bg help` alone is `run-bg --help`: the start form and every
    // command with its flags, not clap's bare list of subcommands, which
    // never says how to start a job.
    if first.is_some_and(|word| word == "help") && args.len() == 2 {
        let asked = [args[0].clone(), OsString::from("--help")];
        if let Err(help) = StartCli::try_parse_from(asked) {
            usage_exit(help, args);
        }
    }
    match first {
        Some(word) if !bytes_of(word).starts_with(b"-") => {
            let known = word.to_str().is_some_and(|word| {
                <SubCli as clap::CommandFactory>::command().get_subcommands().any(|c| c.get_name() == word || word == "help")
            });
            if !known {
                let word = escaped(word);
                return Err(Error::Usage(format!(
                    "unknown command `{word}`; to run a program, put it after `--`: run-bg -- {word} … (see run-bg --help)"
                )));
            }
            let cli = SubCli::try_parse_from(args).unwrap_or_else(|e| usage_exit(e, args));
            Ok(Parsed::Sub(cli.command))
        }
        _ => {
            let cli = StartCli::try_parse_from(args).unwrap_or_else(|e| {
                // `run-bg --label x npm test`: the program, without `--`
                // before it, reads as a stray argument to clap. Said once,
                // with the command as it should be.
                if let Some(said) = program_without_dashes(&e, args, face) {
                    eprintln!("{}", visible(&said));
                    std::process::exit(e.exit_code());
                }
                usage_exit(e, args)
            });
            Ok(Parsed::Start(Box::new(cli)))
        }
    }
}


const START_HELP: &str = "\
Commands:
  run-bg check <id> [-n 20] [--grep <regex> | --errors]   status, exit code, runtime, last lines
  run-bg logs <id> [-n <lines> | --all] [--follow | --json] [--since <cursor>]
  run-bg logs --all [-n 10] [--follow] [--owner <name>]  every job's output, each line after its name
  run-bg list [--all] [--status <s>] [--owner <name>] [--session [<id>]]
  run-bg wait <id>... [--timeout <dur>] [--ready]
  run-bg kill <id>... | --all [--owner <name>] [--session [<id>]] [--older-than <dur>]  [--grace <dur>] [--force]
  run-bg pause <id>... / run-bg resume <id>...  stop a job's tree (and its --timeout clock) / continue it
  run-bg rerun <id>                            start an ended job again as a new job, same command and options
  run-bg orphans [--kill] [--force] [--owner <name>] [--grace <dur>]
                                               processes left behind; --kill removes them
  run-bg summary [--owner <name>]              a few lines for an agent's context preamble
  run-bg ps [--mcp]                            a process snapshot (MCP/browser processes marked)
  run-bg prune [--older-than <dur>]            forget finished jobs, delete their logs
  run-bg send <id> <text> [--no-newline] [--eof]  write to the stdin of a job started with --stdin pipe
  run-bg reconcile                             mark jobs whose supervisor died
  run-bg up [-f <file>] [--owner <name>] [--yield [DUR]]   start a Procfile's or run-bg.json's processes
  run-bg down [-f <file>] [--owner <name>]     kill them, what runs after others first
  run-bg top [--owner <name>]                  a live full-screen view of the jobs (? for its keys)
  run-bg hooks install claude-code|codex|gemini [--project [DIR] | --user] [--dry-run] [--remove]
                                               a job's end wakes the agent in that harness; its session's end kills its jobs
  run-bg hook <harness> <event>                what those hooks run (the harness's JSON on stdin)
  run-bg help [<command>]                      this text, or a command's flags (also run-bg <command> --help)
Start later: --after <id>... [--after-any], --queue <name>, --priority <n>.

Durations: 500ms, 90s, 10m, 2h, 1h30m. Every subcommand but top and hooks takes --json.
State lives in $PROC_MANAGER_HOME (default ~/.local/state/proc-manager).
Exit status, of the command and not the job (`check` of a failed job exits 0): 0 done,
1 failed, 2 bad usage; `wait` exits with the job's own code.";

/// Run a command in the background under a small supervisor: bounded logs,
/// a job registry, whole-tree kills.
#[derive(Parser, Debug)]
#[command(name = "run-bg", version, after_help = START_HELP, override_usage = "run-bg [options] -- <program> [args...]\n       run-bg <command> [options]")]
pub struct StartCli {
    /// What the job is started with: defined once for every face, in the
    /// core (verbs/start_options.rs), flags and help lines included.
    #[command(flatten)]
    pub options: StartOptions,
    /// `--yield`: the core's `YieldOptions`, as `runYield` has it.
    #[command(flatten)]
    pub yield_for: YieldOptions,
    /// Machine-readable output
    #[arg(long, display_order = 14)]
    pub json: bool,
    /// The program and its arguments, after `--`
    #[arg(last = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

#[derive(Parser, Debug)]
#[command(name = "run-bg", version)]
pub struct SubCli {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Args, Debug)]
pub struct JsonFlag {
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Status, exit code, runtime and the last lines of a job's output
    Check {
        id: String,
        /// Defined once for every face in the core (verbs/verb_options.rs).
        #[command(flatten)]
        options: CheckOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A job's output, or every job's (--all without an id)
    Logs {
        id: Option<String>,
        /// Defined once for every face in the core (verbs/verb_options.rs).
        #[command(flatten)]
        options: LogsOptions,
        /// With an id: the whole log, rotated files included. Without: every
        /// job's output, each line after its job's name
        #[arg(long)]
        all: bool,
        /// Keep printing new output until the job ends
        #[arg(long, short = 'f', conflicts_with = "json")]
        follow: bool,
        /// The lines as a JSON array (lossy UTF-8)
        #[arg(long)]
        json: bool,
        /// Without an id, on a terminal: each job's bytes as written (escape
        /// codes and all); by default they are cleaned as check shows them
        #[arg(long)]
        raw: bool,
    },
    /// Jobs in the registry (running ones and those ended within the hour)
    List {
        #[command(flatten)]
        options: ListOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Block until jobs end; exits with the job's own exit code
    Wait {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        #[command(flatten)]
        options: WaitOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// SIGTERM a job's process tree, SIGKILL what is left after the grace period
    // One group of the two ways to name the jobs: without either, clap's
    // error named only `<ID>...`, and a user asking to kill everything was
    // not told of --all.
    #[command(group(clap::ArgGroup::new("jobs").required(true).args(["ids", "all"])))]
    Kill {
        #[arg(value_name = "ID")]
        ids: Vec<String>,
        /// Every running job (of --owner, when given)
        #[arg(long)]
        all: bool,
        /// `--owner` and `--older-than` require `--all`.
        #[command(flatten)]
        options: KillOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Stop a job's whole process tree (SIGSTOP) and its --timeout clock until `resume`
    Pause {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Continue a paused job's tree (SIGCONT) and its --timeout clock
    Resume {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Start an ended job again as a new job: the same command, cwd, --env and options
    Rerun {
        id: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Orphaned jobs and processes left behind by ended jobs; --kill removes them
    Orphans {
        #[command(flatten)]
        options: OrphansOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A few lines for an agent's context: running jobs, ended jobs not looked at yet
    Summary {
        #[command(flatten)]
        options: SummaryOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A process snapshot: pid, parent, memory, command; MCP/browser processes marked
    Ps {
        /// Only processes matching diagnostics.resource_tracking.mcp_patterns
        #[arg(long)]
        mcp: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Forget finished jobs and delete their logs
    Prune {
        #[command(flatten)]
        options: PruneOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Verify running jobs: supervisor gone → orphaned or lost
    Reconcile {
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A live full-screen view of the jobs: CPU, memory, output; keys to kill, filter, follow (? for help)
    Top {
        /// For the view (run-bg-top): --owner <name>
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<OsString>,
    },
    /// Write a line to the stdin of a job started with --stdin pipe
    Send {
        id: String,
        /// The text; a newline is added unless --no-newline
        #[arg(required_unless_present = "eof", allow_hyphen_values = true)]
        text: Option<OsString>,
        #[command(flatten)]
        options: SendOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Start every process of a stack file (run-bg.json or Procfile) that does not run yet
    Up {
        #[command(flatten)]
        stack: StackArgs,
        #[command(flatten)]
        options: UpOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Kill the jobs of a stack file's processes, what runs after others first
    Down {
        #[command(flatten)]
        stack: StackArgs,
        #[command(flatten)]
        options: DownOptions,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// What an agent harness's hook runs (installed by `run-bg hooks install`): reads its JSON on stdin
    Hook {
        /// claude-code, codex or gemini
        harness: String,
        /// session-start, post-tool-use, stop, after-agent, before-agent, user-prompt-submit or session-end
        event: String,
        /// At a turn's end (Codex stop, Gemini after-agent): wait this long at most for the session's jobs
        #[arg(long, value_name = "DUR")]
        wait: Option<String>,
    },
    /// Put run-bg's hooks into an agent harness's settings (or take them out)
    Hooks {
        #[command(subcommand)]
        action: HooksAction,
    },
}

#[derive(Subcommand, Debug)]
pub enum HooksAction {
    /// Merge run-bg's hooks into the harness's settings: its jobs wake the model when they end
    Install {
        #[command(flatten)]
        target: HooksTarget,
        /// Take run-bg's hooks out instead (the same as `hooks remove`)
        #[arg(long)]
        remove: bool,
        /// Codex, Gemini CLI: how long a turn's end waits for the session's jobs (default 10m)
        #[arg(long, value_name = "DUR")]
        wait: Option<String>,
        /// Codex: leave the hooks untrusted (Codex then runs them only once approved in /hooks)
        #[arg(long = "no-trust", action = clap::ArgAction::SetFalse)]
        trust: bool,
    },
    /// Take run-bg's hooks out of the harness's settings, leaving every other hook
    Remove {
        #[command(flatten)]
        target: HooksTarget,
    },
}

#[derive(Args, Debug)]
pub struct HooksTarget {
    /// claude-code, codex or gemini
    pub harness: String,
    /// Into this project's settings (DIR, default the current directory), not the user's
    #[arg(long, value_name = "DIR", num_args = 0..=1, conflicts_with = "user")]
    pub project: Option<Option<std::path::PathBuf>>,
    /// Into the user's settings, for every project (the default)
    #[arg(long)]
    pub user: bool,
    /// Print what would be written, write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Which stack file `up` and `down` read (the JS API's first argument);
/// their options are the core's (`UpOptions`, `DownOptions`).
#[derive(Args, Debug)]
pub struct StackArgs {
    /// The stack file (default: run-bg.json in the current directory, else Procfile)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// clap's usage errors quote the argument they refuse, which may carry escape
/// codes: print them written out (help and version go out as clap prints them).
fn usage_exit(error: clap::Error, args: &[OsString]) -> ! {
    usage_exit_saying(error, args, None)
}

/// `usage_exit`, with `hint` on a line of its own after clap's message.
fn usage_exit_saying(error: clap::Error, args: &[OsString], hint: Option<&str>) -> ! {
    use clap::error::ErrorKind;
    if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) {
        error.exit()
    }
    if error.kind() == ErrorKind::InvalidUtf8 {
        // clap says only that some argument is no UTF-8: name it, and what may be bytes.
        eprintln!("run-bg: {}", visible(&not_text(args)));
        std::process::exit(error.exit_code())
    }
    if let Some(said) = negative_value(&error, args) {
        eprintln!("{}", visible(&said));
        std::process::exit(error.exit_code())
    }
    eprint!("{}", visible(&error.render().to_string()));
    if let Some(hint) = hint {
        eprintln!("{hint}");
    }
    std::process::exit(error.exit_code())
}

/// `run-bg --label x sleep 10`: the first word clap found no place for, a
/// program's name (not an option), and no `--` anywhere: the command with
/// `--` put before it.
fn program_without_dashes(error: &clap::Error, args: &[OsString], face: &dyn Face) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument || args.iter().any(|a| a == "--") {
        return None;
    }
    let Some(ContextValue::String(refused)) = error.get(ContextKind::InvalidArg) else { return None };
    if refused.starts_with('-') {
        return None;
    }
    // Where `--` goes: the latest place, up to the refused word, that makes
    // a command whose options hold (`--label sleep sleep 10`: before the
    // second `sleep`; `--yield sleep 1`: `--yield` took `sleep` for its
    // duration, so before `sleep`).
    let last = (1..args.len()).rev().find(|&i| args[i].to_str() == Some(refused.as_str()))?;
    let holds = |i: usize| {
        let mut fixed = args[..i].to_vec();
        fixed.push("--".into());
        fixed.extend_from_slice(&args[i..]);
        StartCli::try_parse_from(fixed).is_ok_and(|cli| cli.yield_for.bound(face).is_ok() && cli.options.validate(face).is_ok())
    };
    let at = (1..=last).rev().filter(|&i| !bytes_of(&args[i]).starts_with(b"-")).find(|&i| holds(i));
    use proc_manager_core::verbs::request::display_argv;
    Some(match at {
        Some(at) => format!(
            "run-bg: `{refused}` is not an option: the program and its arguments go after `--`: run-bg {} -- {}",
            display_argv(&args[1..at]),
            display_argv(&args[at..])
        ),
        None => format!(
            "run-bg: `{refused}` is not an option: the program and its arguments go after `--`: run-bg [options] -- <program> [args...]"
        ),
    })
}

/// `--timeout -5s`, `--ready-port -1`: clap takes the value for an option it
/// does not know and says so, with a tip (`-- -5s`) that would make it the
/// program. Said instead: the option before it takes no negative value.
fn negative_value(error: &clap::Error, args: &[OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(refused)) = error.get(ContextKind::InvalidArg) else { return None };
    if !refused.strip_prefix('-')?.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    // clap names `-5` of `-5s` (read as short flags); the argument it refused
    // is the one after an option that takes a value but no negative one
    // (`--priority -5 --timeout -5s`: the second).
    (1..args.len()).find_map(|at| {
        let given = args[at].to_str().filter(|given| given.starts_with(refused.as_str()))?;
        let option = args[at - 1].to_str()?;
        let what = match value_name_refusing_negatives(option)?.as_str() {
            "DUR" => "duration: give one such as 500ms, 90s, 10m, 2h",
            "PORT" => "port: give one from 1 to 65535",
            "PID" => "pid: give a process id",
            "N" => "number: give a whole number",
            "CURSOR" => "cursor: give one a read gave (check --json's or logs --json's `cursor`), 0 or more",
            _ => return None,
        };
        Some(format!("run-bg: {option} takes no negative {what} (`{given}` was given)"))
    })
}

/// The value name (`DUR`, `PORT`) of the option spelled `--name` or `-c`, if
/// it takes a value that cannot be negative (those that can, `--priority`,
/// take `-5` as it is).
fn value_name_refusing_negatives(spelled: &str) -> Option<String> {
    let option = our_option(spelled, |a| a.get_action().takes_values() && !a.is_allow_negative_numbers_set())?;
    option.get_value_names().and_then(|names| names.first()).map(|name| name.to_string())
}

/// Why the arguments were refused when one that must be text is not UTF-8.
fn not_text(args: &[OsString]) -> String {
    const ACCEPTED: &str = "only the program and its arguments (after --), --cwd, the value of --env and the text of \
        `send` may be any bytes; labels, owners, ids, patterns and the other options are text: give them in UTF-8";
    // The values that may be bytes are not what clap refused: skip them.
    const BYTES: [&str; 2] = ["--cwd", "--env"];
    let after_bytes_option = |at: usize| at > 0 && BYTES.iter().any(|o| args[at - 1] == *o);
    let bytes_given_inline = |arg: &OsStr| BYTES.iter().any(|o| bytes_of(arg).starts_with(format!("{o}=").as_bytes()));
    let before_program = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let refused = (0..before_program)
        .find(|&at| args[at].to_str().is_none() && !after_bytes_option(at) && !bytes_given_inline(&args[at]));
    let Some(at) = refused else {
        return format!("an argument is not UTF-8 text; {ACCEPTED}");
    };
    let option = at
        .checked_sub(1)
        .and_then(|before| args[before].to_str())
        .and_then(|before| before.strip_prefix("--"))
        .filter(|name| option_takes_value(name))
        .map(|name| format!(" (the value of --{name})"))
        .unwrap_or_default();
    format!("`{}`{option} is not UTF-8 text; {ACCEPTED}", escaped(&args[at]))
}

/// Whether `--<name>` of any of our commands takes a value.
fn option_takes_value(name: &str) -> bool {
    our_option(&format!("--{name}"), |a| a.get_action().takes_values()).is_some()
}

/// The option of any of our commands spelled `--name` or `-c` that is `wanted`.
fn our_option(spelled: &str, wanted: impl Fn(&clap::Arg) -> bool) -> Option<clap::Arg> {
    use clap::CommandFactory;
    let named = |a: &clap::Arg| match spelled.strip_prefix("--") {
        Some(long) => a.get_long() == Some(long),
        None => spelled.strip_prefix('-').is_some_and(|short| a.get_short().is_some_and(|c| short == c.to_string())),
    };
    let (start, sub) = (StartCli::command(), SubCli::command());
    let found = std::iter::once(&start)
        .chain(sub.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .find(|a| named(a) && wanted(a))
        .cloned();
    found
}

fn escaped(word: &OsStr) -> std::borrow::Cow<'_, str> {
    proc_manager_core::model::os_text::escaped(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_help_names_every_command() {
        let commands = <SubCli as clap::CommandFactory>::command();
        let unnamed: Vec<&str> =
            commands.get_subcommands().map(|c| c.get_name()).filter(|name| !START_HELP.contains(&format!("run-bg {name} "))).collect();
        assert!(unnamed.is_empty(), "`run-bg --help` (and `run-bg help`) leaves out {unnamed:?}");
    }
}
