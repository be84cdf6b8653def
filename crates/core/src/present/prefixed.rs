//! `logs --all` for people: each line after its job's name, the names padded
//! to a common width (as `docker compose logs` and foreman print them), each
//! job's name in a colour of its own on a terminal.

use crate::model::job::Job;
use std::collections::HashMap;

/// Names are padded to the longest one so far, up to this width; a longer
/// name is shown whole, unpadded others.
const MOST_PADDING: usize = 24;

/// ANSI foreground colours handed to jobs in turn: cyan, yellow, green,
/// magenta, blue, then their bright forms. Red is left for failures.
const PALETTE: [u8; 10] = [36, 33, 32, 35, 34, 96, 93, 92, 95, 94];

/// Whether to colour: only for a terminal, and never with `NO_COLOR` set to
/// anything but the empty string (no-color.org).
pub fn colour_wanted(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// The prefixes of a stream's lines.
pub struct Prefixer {
    colour: bool,
    width: usize,
    /// Each job's colour (by id), handed out as they join.
    colours: HashMap<String, u8>,
}

impl Prefixer {
    pub fn new(colour: bool) -> Prefixer {
        Prefixer { colour, width: 0, colours: HashMap::new() }
    }

    /// A job joins: the width grows to its name, and it gets its colour.
    pub fn joined(&mut self, id: &str, name: &str) {
        self.width = self.width.max(name.chars().count().min(MOST_PADDING));
        let next = PALETTE[self.colours.len() % PALETTE.len()];
        self.colours.entry(id.to_string()).or_insert(next);
    }

    /// `name   | `, coloured up to the bar on a terminal.
    pub fn prefix(&self, id: &str, name: &str) -> String {
        let padded = format!("{name:<width$} |", width = self.width);
        match (self.colour, self.colours.get(id)) {
            (true, Some(colour)) => format!("\x1b[{colour}m{padded}\x1b[0m "),
            _ => format!("{padded} "),
        }
    }
}

/// The line that says a followed job has left the stream:
/// `[ended: success (exit 0) after 1.2s]`.
pub fn ended_line(job: &Job) -> String {
    format!("[ended: {}]", crate::present::format::outcome_text(job))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_padded_to_the_longest_so_far_and_coloured_only_when_asked() {
        let mut plain = Prefixer::new(false);
        plain.joined("db-1", "db");
        assert_eq!(plain.prefix("db-1", "db"), "db | ");
        plain.joined("web-2", "web");
        assert_eq!(plain.prefix("db-1", "db"), "db  | ");
        plain.joined("x-3", &"x".repeat(40));
        assert_eq!(plain.prefix("db-1", "db"), format!("{:<24} | ", "db"), "padded to 24 at most");
        let mut coloured = Prefixer::new(true);
        coloured.joined("a-1", "a");
        coloured.joined("b-2", "b");
        assert_eq!(coloured.prefix("a-1", "a"), "\x1b[36ma |\x1b[0m ");
        assert_eq!(coloured.prefix("b-2", "b"), "\x1b[33mb |\x1b[0m ");
        assert!(colour_wanted(true, None) && colour_wanted(true, Some("".as_ref())));
        assert!(!colour_wanted(true, Some("1".as_ref())) && !colour_wanted(false, None));
    }
}
