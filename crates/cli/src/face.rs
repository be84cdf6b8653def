//! How the command line speaks to the core: its spelling of an option's
//! name (the flag clap has for it) and the durations its flags give.

use crate::args::{StartCli, SubCli};
use proc_manager_core::model::duration::parse_duration_ms;
use proc_manager_core::verbs::start_options::Face;
use proc_manager_core::{Error, Result};
use std::time::Duration;

/// The command line's spelling of the start options and the verbs': the flag
/// clap has for the option's field (`timeoutMs` → field `timeout_ms` → `--timeout`).
pub struct CommandLine;

impl Face for CommandLine {
    fn name(&self, option: &str) -> String {
        let mut field = String::with_capacity(option.len() + 4);
        for c in option.chars() {
            if c.is_ascii_uppercase() {
                field.push('_');
            }
            field.push(c.to_ascii_lowercase());
        }
        // Built once, and only when a message names an option.
        // The start's flags first, then the subcommands' (`--grace`, `--older-than`).
        static COMMANDS: std::sync::OnceLock<[clap::Command; 2]> = std::sync::OnceLock::new();
        let [start, sub] = COMMANDS
            .get_or_init(|| [<StartCli as clap::CommandFactory>::command(), <SubCli as clap::CommandFactory>::command()]);
        let flag = std::iter::once(start)
            .chain(sub.get_subcommands())
            .flat_map(|c| c.get_arguments())
            .find(|arg| arg.get_id() == field.as_str())
            .and_then(|arg| arg.get_long());
        format!("--{}", flag.unwrap_or(option))
    }

    /// The CLI names the flag, which each pattern was given to.
    fn item(&self, option: &str, _: usize) -> String {
        self.name(option)
    }

    fn caller_pid(&self) -> u32 {
        proc_manager_core::supervise::tie::caller_pid()
    }
}

/// A duration flag's value (`--yield 30s`), refused with the flag's name.
pub fn parse_dur(flag: &str, text: &Option<String>) -> Result<Option<Duration>> {
    text.as_ref()
        .map(|t| {
            parse_duration_ms(t)
                .map(Duration::from_millis)
                .map_err(|e| Error::Usage(format!("{flag}: {e}")))
        })
        .transpose()
}
