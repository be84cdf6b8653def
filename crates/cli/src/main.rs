//! The `run-bg` CLI: parses arguments, calls the core, prints. Also the
//! supervisor (`run-bg __supervise`, started by the core, not by users).

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]

mod warnings;

use clap::{Args, Parser, Subcommand};
use proc_manager_core::model::duration::parse_duration_ms;
use proc_manager_core::model::job::{Job, JobStatus};
use proc_manager_core::verbs::ops::{CheckResult, Context, ListFilter, OrphanOptions, TailQuery};
use proc_manager_core::os::procinfo::ProcessEntry;
use proc_manager_core::verbs::spawn::{parse_env_assignment, start_job, StartRequest};
use proc_manager_core::present::view::{kb_to_mb, shell_exit_code, CheckView, JobView, ProcessView};
use proc_manager_core::present::format::{self, shorten};
use proc_manager_core::model::text::visible;
use proc_manager_core::{store::logs, supervise::notify, verbs::procs, supervise::supervisor, Error, Result};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

/// `println!` for the CLI's results: once nobody reads them any more (a closed
/// pipe, or a closed socketpair as Node's child stdio is), end quietly the way
/// `seq 1 1000000 | head -1` ends `seq`, instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => { emit_line(format_args!($($arg)*)) };
}

fn emit_line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.write_all(b"\n")) {
        stdout_failed(e);
    }
}

/// EPIPE from a pipe, ECONNRESET from a socketpair: nobody reads stdout any more.
fn reader_gone(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset)
}

/// A failed write to stdout: the reader is gone, or stdout itself is broken.
fn stdout_failed(error: std::io::Error) -> ! {
    if reader_gone(&error) {
        // Die of SIGPIPE (default disposition in the CLI), as on a closed pipe.
        // SAFETY: raise takes a signal number only; SIGPIPE's disposition is
        // the default here, so nothing of ours runs. If it returns, we exit.
        unsafe { libc::raise(libc::SIGPIPE) };
    }
    eprintln!("run-bg: cannot write to stdout: {error}");
    std::process::exit(1)
}

const START_HELP: &str = "\
Commands:
  run-bg check <id> [-n 20] [--grep <regex> | --errors]   status, exit code, runtime, last lines
  run-bg logs <id> [-n <lines> | --all] [--follow | --json]
  run-bg list [--all] [--status <s>] [--owner <name>]
  run-bg wait <id>... [--timeout <dur>]
  run-bg kill <id>... | --all [--owner <name>]  [--grace <dur>] [--force]
  run-bg orphans [--kill] [--force] [--owner <name>] [--grace <dur>]
                                               processes left behind; --kill removes them
  run-bg summary [--owner <name>]              a few lines for an agent's context preamble
  run-bg ps [--mcp]                            a process snapshot (MCP/browser processes marked)
  run-bg prune [--older-than <dur>]            forget finished jobs, delete their logs
  run-bg reconcile                             mark jobs whose supervisor died

Durations: 500ms, 90s, 10m, 2h, 1h30m. Every subcommand takes --json.
State lives in $PROC_MANAGER_HOME (default ~/.local/state/proc-manager).
Exit status: 0 done, 1 failed, 2 bad usage; `wait` exits with the job's own code.";

/// Run a command in the background under a small supervisor: bounded logs,
/// a job registry, whole-tree kills.
#[derive(Parser, Debug)]
#[command(name = "run-bg", version, after_help = START_HELP, override_usage = "run-bg [options] -- <program> [args...]\n       run-bg <command> [options]")]
struct StartCli {
    /// Human name for the job (default: the program's name)
    #[arg(long, value_name = "NAME")]
    label: Option<String>,
    /// Working directory (default: the current one)
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Extra environment variable, repeatable
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Kill the job's tree after this long (90s, 10m, 2h)
    #[arg(long, value_name = "DUR")]
    timeout: Option<String>,
    /// The agent or thread that owns the job
    #[arg(long, value_name = "NAME")]
    owner: Option<String>,
    /// Arbitrary JSON kept with the job
    #[arg(long, value_name = "JSON")]
    context: Option<String>,
    /// No exit notification for this job
    #[arg(long)]
    no_notify: bool,
    /// Run this (with /bin/sh -c) when the job ends
    #[arg(long, value_name = "COMMAND")]
    on_exit: Option<String>,
    /// Stay in the foreground up to DUR: if the job ends by then, print what
    /// `check` prints and exit with its code; else print the ack
    #[arg(long = "yield", value_name = "DUR")]
    yield_for: Option<String>,
    /// Machine-readable output
    #[arg(long)]
    json: bool,
    /// The program and its arguments, after `--`
    #[arg(last = true, value_name = "PROGRAM")]
    command: Vec<String>,
}

#[derive(Parser, Debug)]
#[command(name = "run-bg", version)]
struct SubCli {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Args, Debug)]
struct JsonFlag {
    /// Machine-readable output
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Status, exit code, runtime and the last lines of a job's output
    Check {
        id: String,
        /// How many lines to show
        #[arg(short = 'n', long = "lines", default_value_t = 20)]
        lines: usize,
        /// Only lines matching this regular expression
        #[arg(long, value_name = "REGEX", conflicts_with = "errors")]
        grep: Option<String>,
        /// Only lines that look like errors, each with a line of context
        #[arg(long)]
        errors: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A job's output
    Logs {
        id: String,
        /// How many lines from the end (default 100)
        #[arg(short = 'n', long = "lines", conflicts_with = "all")]
        lines: Option<usize>,
        /// The whole log, rotated files included
        #[arg(long)]
        all: bool,
        /// Keep printing new output until the job ends
        #[arg(long, short = 'f', conflicts_with = "json")]
        follow: bool,
        /// The lines as a JSON array (lossy UTF-8)
        #[arg(long)]
        json: bool,
    },
    /// Jobs in the registry (running ones and those ended within the hour)
    List {
        /// Every job in the registry
        #[arg(long)]
        all: bool,
        /// Only jobs with this status
        #[arg(long, value_name = "STATUS")]
        status: Option<String>,
        /// Only jobs of this owner
        #[arg(long, value_name = "NAME")]
        owner: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Block until jobs end; exits with the job's own exit code
    Wait {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        /// Give up after this long (exit status 124)
        #[arg(long, value_name = "DUR")]
        timeout: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// SIGTERM a job's process tree, SIGKILL what is left after the grace period
    Kill {
        #[arg(value_name = "ID", required_unless_present = "all", conflicts_with = "all")]
        ids: Vec<String>,
        /// Every running job (of --owner, when given)
        #[arg(long)]
        all: bool,
        /// With --all: only this owner's jobs
        #[arg(long, value_name = "NAME", requires = "all")]
        owner: Option<String>,
        /// Time between SIGTERM and SIGKILL (default: kill.grace_ms, 5s)
        #[arg(long, value_name = "DUR")]
        grace: Option<String>,
        /// SIGKILL at once
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Orphaned jobs and processes left behind by ended jobs; --kill removes them
    Orphans {
        /// SIGTERM them, then SIGKILL what is left after the grace period
        #[arg(long)]
        kill: bool,
        /// With --kill: SIGKILL at once
        #[arg(long, requires = "kill")]
        force: bool,
        /// Only jobs of this owner
        #[arg(long, value_name = "NAME")]
        owner: Option<String>,
        /// Time between SIGTERM and SIGKILL (default: kill.grace_ms, 5s)
        #[arg(long, value_name = "DUR")]
        grace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A few lines for an agent's context: running jobs, ended jobs not looked at yet
    Summary {
        /// Only jobs of this owner
        #[arg(long, value_name = "NAME")]
        owner: Option<String>,
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
        /// Only jobs that ended longer ago than this
        #[arg(long, value_name = "DUR")]
        older_than: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Verify running jobs: supervisor gone → orphaned or lost
    Reconcile {
        #[command(flatten)]
        json: JsonFlag,
    },
}

fn main() {
    warnings::init();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__supervise") => std::process::exit(supervisor::supervise_main()),
        Some("__announce") | Some("__deliver") | Some("__watch") => std::process::exit(background_main(&args)),
        _ => {}
    }
    // As a command-line tool, end quietly when the reader goes away
    // (`run-bg list | head`), as Unix tools do, instead of panicking on EPIPE.
    // Every subcommand has done its work before it prints.
    // SAFETY: installs the default disposition, no handler of ours; cannot
    // fail for SIGPIPE (only SIGKILL/SIGSTOP are refused).
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let code = match run(&args) {
        Ok(code) => code,
        Err(e) => {
            // Errors quote user input (an id, a path): its control characters written out.
            eprintln!("run-bg: {}", visible(&e.to_string()));
            e.exit_code()
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// `run-bg __announce <id>` (a job found orphaned or lost), `run-bg __deliver`
/// (the notification spool) and `run-bg __watch <id>` (an orphaned job, until
/// its processes end), started in the background by the core.
fn background_main(args: &[String]) -> i32 {
    if supervisor::detach().is_err() {
        return 1;
    }
    let Ok(context) = Context::load() else { return 1 };
    match (args[1].as_str(), args.get(2)) {
        ("__announce", Some(id)) => match context.registry().get(id) {
            Ok(mut job) => {
                if let Some(claimed) = args.get(3).and_then(|s| JobStatus::parse(s)) {
                    job.status = claimed;
                }
                notify::announce(&context.home, &context.config, &job)
            }
            Err(_) => return 1,
        },
        ("__deliver", _) => notify::drain_spool(&context.home, &context.config),
        ("__watch", Some(id)) => {
            if proc_manager_core::model::ids::validate_job_id(id).is_err() {
                return 2;
            }
            // What it cannot do (log the orphan's output) is said where the supervisor's errors go.
            let errors = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(context.home.job_dir(id).join("supervisor.log"));
            if let Ok(errors) = errors {
                // SAFETY: dup2 onto our own stderr, which nothing else in this process holds a pointer into.
                // On failure stderr stays /dev/null: there is nowhere else to say so.
                unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&errors), 2) };
            }
            let inherited = proc_manager_core::supervise::outpipe::take_inherited(&context.home.job_dir(id));
            let runner = std::env::current_exe().ok();
            let context = Context { runner, ..context };
            if context.watch_orphan(id, inherited).is_err() {
                return 1;
            }
        }
        _ => return 2,
    }
    0
}

/// The context every command works in; also kicks the notification spool.
fn load_context() -> Result<Context> {
    with_own_runner(Context::load()?)
}

fn with_own_runner(context: Context) -> Result<Context> {
    let exe = std::env::current_exe().map_err(|e| Error::io("find own executable", "/proc/self/exe", e))?;
    Ok(context.with_runner(exe))
}

fn run(args: &[String]) -> Result<i32> {
    let first = args.get(1).map(String::as_str);
    match first {
        Some(word) if !word.starts_with('-') => {
            let known = <SubCli as clap::CommandFactory>::command()
                .get_subcommands()
                .any(|c| c.get_name() == word || word == "help");
            if !known {
                return Err(Error::Usage(format!(
                    "unknown command `{word}`; to run a program, put it after `--`: run-bg -- {word} … (see run-bg --help)"
                )));
            }
            let cli = SubCli::try_parse_from(args).unwrap_or_else(|e| usage_exit(e));
            run_sub(cli.command)
        }
        _ => {
            let cli = StartCli::try_parse_from(args).unwrap_or_else(|e| usage_exit(e));
            run_start(cli)
        }
    }
}

/// clap's usage errors quote the argument they refuse, which may carry escape
/// codes: print them written out (help and version go out as clap prints them).
fn usage_exit(error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) {
        error.exit()
    }
    eprint!("{}", visible(&error.render().to_string()));
    std::process::exit(error.exit_code())
}

fn parse_dur(flag: &str, text: &Option<String>) -> Result<Option<Duration>> {
    text.as_ref()
        .map(|t| {
            parse_duration_ms(t)
                .map(Duration::from_millis)
                .map_err(|e| Error::Usage(format!("{flag}: {e}")))
        })
        .transpose()
}

fn print_json<T: serde::Serialize>(value: &T) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = serde_json::to_writer(&mut out, value).map_err(std::io::Error::from).and_then(|_| out.write_all(b"\n")) {
        stdout_failed(e);
    }
}

fn run_start(cli: StartCli) -> Result<i32> {
    let mut request = StartRequest::program(cli.command);
    request.label = cli.label;
    request.cwd = cli.cwd;
    for assignment in &cli.env {
        let (key, value) = parse_env_assignment(assignment)?;
        request.env.insert(key, value);
    }
    request.timeout_ms = parse_dur("--timeout", &cli.timeout)?.map(|d| d.as_millis() as u64);
    request.owner = cli.owner;
    request.context = cli
        .context
        .map(|text| {
            serde_json::from_str(&text).map_err(|e| Error::Usage(format!("bad --context: not valid JSON ({e})")))
        })
        .transpose()?;
    request.notify = !cli.no_notify;
    request.on_exit = cli.on_exit;
    let yield_for = parse_dur("--yield", &cli.yield_for)?;

    let context = load_context()?;
    let exe = context.runner.clone().expect("load_context sets the runner");
    let started = match start_job(&context, request, &exe) {
        Ok(started) => started,
        Err(Error::StartFailed { job_id, message }) => {
            if cli.json {
                print_json(&serde_json::json!({ "jobId": job_id, "status": "failed", "error": message }));
            }
            eprintln!("run-bg: {} (recorded as failed job {job_id})", visible(&message));
            return Ok(1);
        }
        Err(e) => return Err(e),
    };

    if let Some(wait_for) = yield_for {
        let outcome = context.wait(std::slice::from_ref(&started.job_id), Some(wait_for))?;
        if !outcome.timed_out {
            let check = context.check(&started.job_id, &TailQuery::new(None, None)?)?;
            print_check(&check, cli.json);
            return Ok(shell_exit_code(&check.job));
        }
    }
    if cli.json {
        print_json(&serde_json::json!({
            "jobId": started.job_id, "pid": started.pid, "logPath": started.log_path,
            "label": started.label, "status": "running",
        }));
    } else {
        outln!("{}", format::ack_line(&started.job_id, started.pid, &started.command));
    }
    Ok(0)
}

fn process_views(processes: &[ProcessEntry]) -> Vec<ProcessView> {
    processes.iter().map(ProcessView::from).collect()
}

fn print_check(check: &CheckResult, json: bool) {
    if json {
        let (job, tail, lingering) = (&check.job, &check.tail, &check.lingering);
        print_json(&CheckView {
            job: JobView::from(job),
            tail: tail.to_vec(),
            lingering: process_views(lingering),
            processes: check.usage.map(|u| u.processes),
            rss_mb: check.usage.map(|u| kb_to_mb(u.rss_kb)),
        });
        return;
    }
    outln!("{}", format::check_text(check));
}

fn run_sub(command: Sub) -> Result<i32> {
    let context = match &command {
        Sub::Kill { .. } | Sub::Orphans { kill: true, .. } => with_own_runner(Context::load_for_kill()?)?,
        _ => load_context()?,
    };
    match command {
        Sub::Check { id, lines, grep, errors, json } => {
            let query = TailQuery::new(Some(lines), grep.as_deref())?.errors(errors)?;
            let check = context.check(&id, &query)?;
            print_check(&check, json.json);
            Ok(0)
        }
        Sub::Logs { id, lines, all, follow, json } => run_logs(&context, &id, lines, all, follow, json),
        Sub::List { all, status, owner, json } => {
            let status = status
                .map(|s| JobStatus::parse_or_explain(&s).map_err(|e| Error::Usage(format!("--status: {e}"))))
                .transpose()?;
            let jobs = context.list(&ListFilter { status, owner, all: all || status.is_some() })?;
            if json.json {
                print_json(&jobs.iter().map(JobView::from).collect::<Vec<_>>());
            } else if jobs.is_empty() {
                outln!("no jobs{}", if all { "" } else { " running or ended within the hour (--all for every job)" });
            } else {
                for line in format::list_text(&jobs) {
                    outln!("{line}");
                }
            }
            Ok(0)
        }
        Sub::Wait { ids, timeout, json } => {
            let timeout = parse_dur("--timeout", &timeout)?;
            let outcome = context.wait(&ids, timeout)?;
            if json.json {
                print_json(&serde_json::json!({
                    "timedOut": outcome.timed_out,
                    "jobs": outcome.jobs.iter().map(JobView::from).collect::<Vec<_>>(),
                }));
            } else {
                for job in &outcome.jobs {
                    outln!("{}", format::header(job, ""));
                    if let Some(line) = format::lingering_line(job, &context.lingering(job)) {
                        outln!("{line}");
                    }
                }
            }
            if outcome.timed_out {
                if !json.json {
                    eprintln!("run-bg: wait timed out; the job is still running");
                }
                return Ok(124);
            }
            Ok(match outcome.jobs.as_slice() {
                [job] => shell_exit_code(job),
                jobs if jobs.iter().all(|j| j.status == JobStatus::Success) => 0,
                _ => 1,
            })
        }
        Sub::Kill { ids, all, owner, grace, force, json } => {
            let grace = parse_dur("--grace", &grace)?;
            let results: Vec<Result<_>> = if all {
                context.kill_all(owner.as_deref(), grace, force)?.into_iter().map(|r| r.map_err(|(_, e)| e)).collect()
            } else {
                for id in &ids {
                    proc_manager_core::model::ids::validate_job_id(id)?;
                }
                ids.iter().map(|id| context.kill(id, grace, force)).collect()
            };
            let mut failed = false;
            let mut views = Vec::new();
            for result in results {
                match result {
                    Ok(outcome) => {
                        if !json.json {
                            outln!("{}", visible(&outcome.message));
                        }
                        views.push(serde_json::json!({
                            "jobId": outcome.job.id, "status": outcome.job.status.as_str(),
                            "signalled": outcome.signalled, "message": outcome.message,
                        }));
                    }
                    Err(e) => {
                        failed = true;
                        eprintln!("run-bg: {}", visible(&e.to_string()));
                        views.push(serde_json::json!({ "error": e.to_string() }));
                    }
                }
            }
            if json.json {
                print_json(&views);
            } else if views.is_empty() {
                outln!("no running jobs to kill");
            }
            Ok(if failed { 1 } else { 0 })
        }
        Sub::Orphans { kill, force, owner, grace, json } => {
            let grace = parse_dur("--grace", &grace)?;
            let report = context.orphans(&OrphanOptions { kill, force, owner, grace })?;
            let orphan_view = |o: &proc_manager_core::verbs::ops::OrphanProcess| {
                serde_json::json!({
                    "jobId": o.job_id, "jobStatus": o.job_status.as_str(),
                    "pid": o.process.identity.pid, "command": o.process.command,
                })
            };
            if json.json {
                print_json(&serde_json::json!({
                    "orphanedJobs": report.orphaned_jobs.iter().map(JobView::from).collect::<Vec<_>>(),
                    "processes": report.found.iter().map(orphan_view).collect::<Vec<_>>(),
                    "killed": report.killed.iter().map(orphan_view).collect::<Vec<_>>(),
                    "failed": report.failed.iter().map(|(o, why)| {
                        let mut v = orphan_view(o);
                        v["reason"] = serde_json::Value::String(why.clone());
                        v
                    }).collect::<Vec<_>>(),
                }));
            } else {
                if report.found.is_empty() && report.orphaned_jobs.is_empty() {
                    outln!("no orphans: no process of an ended job is running");
                }
                for job in &report.orphaned_jobs {
                    outln!("orphaned job {}: supervisor gone, processes still running · {}", job.id, shorten(&job.command, 60));
                }
                for o in &report.killed {
                    outln!("killed: pid {} {} (job {}, {})", o.process.identity.pid, shorten(&o.process.command, 60), o.job_id, o.job_status);
                }
                if !kill {
                    for o in &report.found {
                        outln!("pid {} {} (job {}, {})", o.process.identity.pid, shorten(&o.process.command, 60), o.job_id, o.job_status);
                    }
                    if !report.found.is_empty() {
                        outln!("run `run-bg orphans --kill` to remove them");
                    }
                }
                for (o, why) in &report.failed {
                    outln!(
                        "failed: pid {} {} (job {}): {}",
                        o.process.identity.pid,
                        shorten(&o.process.command, 60),
                        o.job_id,
                        visible(why)
                    );
                }
            }
            Ok(if report.failed.is_empty() { 0 } else { 1 })
        }
        Sub::Summary { owner, json } => {
            let lines = context.summary(owner.as_deref())?;
            if json.json {
                print_json(&serde_json::json!({ "lines": lines }));
            } else {
                for line in &lines {
                    outln!("{line}");
                }
            }
            Ok(0)
        }
        Sub::Ps { mcp, json } => {
            let snap = procs::snapshot(&context.config.diagnostics.resource_tracking.mcp_patterns);
            let shown: Vec<&procs::ProcessInfo> = snap.processes.iter().filter(|p| !mcp || p.is_mcp).collect();
            if json.json {
                print_json(&serde_json::json!({
                    "timestamp": snap.timestamp,
                    "totalMemoryMb": snap.total_memory_mb,
                    "processes": shown.iter().map(|p| serde_json::json!({
                        "pid": p.pid, "ppid": p.ppid, "command": p.command,
                        "memoryMb": p.memory_mb, "startTime": p.start_time, "isMcp": p.is_mcp,
                    })).collect::<Vec<_>>(),
                }));
            } else {
                outln!("{:>7} {:>7} {:>8}  COMMAND", "PID", "PPID", "RSS MiB");
                for p in &shown {
                    let mark = if p.is_mcp { "[mcp] " } else { "" };
                    outln!("{:>7} {:>7} {:>8.1}  {mark}{}", p.pid, p.ppid, p.memory_mb, shorten(&p.command, 100));
                }
                outln!(
                    "{} process(es){}, {:.1} MiB resident in all",
                    shown.len(),
                    if mcp { " matching mcp_patterns" } else { "" },
                    shown.iter().fold(0.0, |sum, p| sum + p.memory_mb)
                );
            }
            Ok(0)
        }
        Sub::Prune { older_than, json } => {
            let older_than = parse_dur("--older-than", &older_than)?;
            let removed = context.prune(older_than)?;
            if json.json {
                print_json(&serde_json::json!({ "removed": removed }));
            } else {
                outln!("removed {} finished job(s)", removed.len());
            }
            Ok(0)
        }
        Sub::Reconcile { json } => {
            let (orphaned, lost) = context.reconcile()?;
            if json.json {
                print_json(&serde_json::json!({
                    "orphaned": orphaned.iter().map(JobView::from).collect::<Vec<_>>(),
                    "lost": lost.iter().map(JobView::from).collect::<Vec<_>>(),
                }));
            } else {
                outln!("{} orphaned, {} lost", orphaned.len(), lost.len());
                for job in orphaned.iter().chain(&lost) {
                    outln!("{}", format::header(job, ""));
                }
            }
            Ok(0)
        }
    }
}

fn run_logs(context: &Context, id: &str, lines: Option<usize>, all: bool, follow: bool, json: bool) -> Result<i32> {
    let job = context.mark_seen(context.job(id)?)?;
    let log = PathBuf::from(&job.log_path);
    if json {
        let raw = if all {
            let mut bytes = Vec::new();
            logs::copy_all(&log, &mut bytes).map_err(|e| Error::io("read log", &log, e))?;
            bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect::<Vec<_>>()
        } else {
            logs::tail_lines(&log, lines.unwrap_or(100), |_| true)
        };
        let mut text: Vec<String> = raw.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect();
        if all && text.last().is_some_and(String::is_empty) {
            text.pop();
        }
        print_json(&serde_json::json!({ "jobId": job.id, "lines": text }));
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    if follow {
        // The follower goes on exactly where the lines printed first end.
        let mut follower = if all {
            logs::LogFollower::from_start(&log)
        } else {
            let (lines, follower) = logs::tail_then_follow(&log, lines.unwrap_or(100));
            print_lines(&mut out, &lines);
            follower
        };
        let _ = out.flush();
        follow_log(context, &job, &mut follower, &mut out)?;
    } else if all {
        logs::copy_all(&log, &mut out)
            .map_err(|e| if reader_gone(&e) { stdout_failed(e) } else { Error::io("read log", &log, e) })?;
    } else {
        print_lines(&mut out, &logs::tail_lines(&log, lines.unwrap_or(100), |_| true));
    }
    let _ = out.flush();
    Ok(0)
}

fn print_lines(out: &mut dyn Write, lines: &[Vec<u8>]) {
    for line in lines {
        if let Err(e) = out.write_all(line).and_then(|_| out.write_all(b"\n")) {
            stdout_failed(e);
        }
    }
}

/// Streams new output until the job has ended and its supervisor, the log's
/// only writer, is gone.
fn follow_log(context: &Context, job: &Job, follower: &mut logs::LogFollower, out: &mut dyn Write) -> Result<()> {
    follower.follow(&mut StdoutSink(out), Duration::from_millis(100), || {
        let current = context.registry().get(&job.id)?;
        let supervised = proc_manager_core::os::tree::live_supervisor(&current).is_some();
        Ok(current.status.is_final() && !supervised)
    })
}

/// Our stdout for the core's writers: a failed write ends the CLI as any
/// other write to stdout does (quietly once the reader is gone).
struct StdoutSink<'a>(&'a mut dyn Write);

impl Write for StdoutSink<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.write(data).map_err(fail_unless_interrupted)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(fail_unless_interrupted)
    }
}

/// EINTR is retried by `write_all`; anything else ends the CLI.
fn fail_unless_interrupted(error: std::io::Error) -> std::io::Error {
    if error.kind() == std::io::ErrorKind::Interrupted {
        return error;
    }
    stdout_failed(error)
}
