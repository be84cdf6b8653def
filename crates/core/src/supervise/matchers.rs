//! Wake-ups on a pattern (`--notify-on <regex>`, issue 15): the supervisor
//! cuts the job's output into lines only while some pattern needs them, and
//! a line that matches sends one `matched` notification through the same
//! channel and shape as the exit notification, at most once per
//! `notify.match_window_ms` per pattern.

use crate::model::job::Job;
use crate::model::text;
use crate::now_ms;
use crate::store::config::Config;
use crate::store::paths::Home;
use crate::supervise::notify;
use crate::supervise::service::{self, Answer, Failure};
use crate::supervise::pace::{self, Pace, Slot};
use regex::Regex;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A line longer than this is matched in pieces of this size (as the log
/// tail hands out long lines), so a job that never writes a newline cannot
/// grow our memory.
const MAX_LINE: usize = 16 * 1024;
/// Lines before the match sent with it, and lines after it waited for.
const BEFORE: usize = 3;
const AFTER: usize = 2;
/// How long a match waits for its following lines before it is sent.
const AFTER_WAIT: Duration = Duration::from_millis(250);
/// Each line sent is cut to this many characters.
const LINE_CHARS: usize = 300;

/// The job's output cut into lines, with the last few kept for context.
#[derive(Default)]
pub struct Lines {
    partial: Vec<u8>,
    recent: VecDeque<String>,
}

impl Lines {
    /// The complete lines in `bytes` (with what was left of the last call
    /// before them), cleaned as `check` shows them.
    pub fn split(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..end]);
            lines.push(self.take_partial());
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
        while self.partial.len() >= MAX_LINE {
            let tail = self.partial.split_off(MAX_LINE);
            lines.push(self.take_partial());
            self.partial = tail;
        }
        lines
    }

    /// What is left once the output has ended: a last line without a newline.
    pub fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| self.take_partial())
    }

    fn take_partial(&mut self) -> String {
        let raw = std::mem::take(&mut self.partial);
        let line = String::from_utf8_lossy(&raw);
        text::clean_line(line.trim_end_matches('\r'), MAX_LINE)
    }

    /// Keeps `line` as context for a later match.
    pub fn remember(&mut self, line: String) {
        if self.recent.len() == BEFORE {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }

    fn recent(&self) -> impl Iterator<Item = &String> {
        self.recent.iter()
    }
}

/// A line that matched a `--notify-on` pattern, with its neighbours.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchEvent {
    pub pattern: String,
    pub line: String,
    /// The lines before it, the line itself and the lines after it, in order.
    pub lines: Vec<String>,
}

struct Matcher {
    pattern: String,
    regex: Regex,
    last_sent: Option<Instant>,
}

struct Pending {
    event: MatchEvent,
    after: usize,
    due: Instant,
}

/// The `--notify-on` patterns of a job and when each last fired.
pub struct Matchers {
    list: Vec<Matcher>,
    window: Duration,
    pending: Vec<Pending>,
}

impl Matchers {
    /// Patterns that do not compile were refused when the job started; one
    /// that does not now (a hand-edited record) is left out.
    pub fn new(patterns: &[String], window: Duration) -> Matchers {
        let list = patterns
            .iter()
            .filter_map(|p| Regex::new(p).ok().map(|regex| Matcher { pattern: p.clone(), regex, last_sent: None }))
            .collect();
        Matchers { list, window, pending: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Looks at one line (`lines` holds the ones before it); a match out of
    /// its pattern's window waits for `AFTER` more lines or `AFTER_WAIT`.
    pub fn on_line(&mut self, line: &str, lines: &Lines, now: Instant, out: &mut Vec<MatchEvent>) {
        for pending in &mut self.pending {
            if pending.after < AFTER {
                pending.after += 1;
                pending.event.lines.push(text::cut(line, LINE_CHARS));
            }
        }
        self.flush(now, out);
        for matcher in &mut self.list {
            let due = matcher.last_sent.is_none_or(|at| now.duration_since(at) >= self.window);
            if due && matcher.regex.is_match(line) {
                matcher.last_sent = Some(now);
                let mut context: Vec<String> = lines.recent().map(|l| text::cut(l, LINE_CHARS)).collect();
                let line = text::cut(line, LINE_CHARS);
                context.push(line.clone());
                self.pending.push(Pending {
                    event: MatchEvent { pattern: matcher.pattern.clone(), line, lines: context },
                    after: 0,
                    due: now + AFTER_WAIT,
                });
            }
        }
    }

    /// Hands out the matches whose following lines came or whose wait is over.
    pub fn flush(&mut self, now: Instant, out: &mut Vec<MatchEvent>) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].after >= AFTER || self.pending[i].due <= now {
                out.push(self.pending.remove(i).event);
            } else {
                i += 1;
            }
        }
    }

    /// Every match still waiting, at once (the output ended).
    pub fn flush_all(&mut self, out: &mut Vec<MatchEvent>) {
        out.extend(self.pending.drain(..).map(|p| p.event));
    }

    pub fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.due).min()
    }
}

/// The body of a `matched` event: the exit event's shape (`event_body`),
/// with `status: "matched"`, the pattern, the line and its neighbours. The
/// job still runs, so `exitCode` is -1 and `outcome` names the pattern.
pub fn match_body(home: &Home, config: &Config, job: &Job, event: &MatchEvent) -> serde_json::Value {
    let mut body = notify::event_body(home, &config.notify, job);
    body["level"] = config.notify.level.clone().into();
    let message = format!(
        "run-bg: {} ({}) printed a line matching /{}/: {}; run-bg check {}",
        job.id,
        text::cut(&job.command, 80),
        event.pattern,
        event.line,
        job.id
    );
    if let Some(data) = body.get_mut("data").and_then(|d| d.as_object_mut()) {
        data.insert("eventId".into(), format!("{}:matched:{}", job.id, now_ms()).into());
        data.insert("status".into(), "matched".into());
        data.insert("exitCode".into(), (-1).into());
        data.insert("signal".into(), "".into());
        data.insert("outcome".into(), format!("matched /{}/", event.pattern).into());
        data.insert("pattern".into(), event.pattern.clone().into());
        data.insert("line".into(), event.line.clone().into());
        data.insert("lastLines".into(), event.lines.clone().into());
        data.insert("message".into(), notify::defuse_templates(&message).into());
    }
    body
}

/// Sends one `matched` event (blocking; the supervisor runs it in a forked
/// child): under the home's pace, like every other event, then at most a
/// few tries while nothing answers or the service fails. Not spooled, and
/// not recorded in the job: a wake-up that comes a minute late is no
/// wake-up, and the job's record keeps the announcement of its end.
pub fn announce_match(home: &Home, config: &Config, job: &Job, event: &MatchEvent) {
    let Some(url) = config.notify.url.clone() else { return };
    let body = serde_json::to_vec(&match_body(home, config, job, event)).unwrap_or_default();
    let pace = Pace::for_level(&config.notify, &config.notify.level);
    if let Slot::At(at) = pace::claim(home, &pace, now_ms()) {
        std::thread::sleep(Duration::from_millis(at.saturating_sub(now_ms())));
    }
    let timeout = Duration::from_millis(config.notify.timeout_ms);
    for attempt in 0..notify::MAX_SERVER_ERRORS {
        match service::post(&url, &body, timeout) {
            Ok(Answer::Queued { .. } | Answer::Ignored { .. } | Answer::Accepted) | Err(Failure::Refused { .. }) => return,
            Err(e) => {
                tracing::warn!("run-bg: matched event of {} not delivered (try {}): {e}", job.id, attempt + 1);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_at_newlines_across_reads_and_long_lines_in_pieces() {
        let mut lines = Lines::default();
        assert_eq!(lines.split(b"one\ntw"), vec!["one"]);
        assert_eq!(lines.split(b"o\r\nthree\n\x1b[31mred\x1b[0m\n"), vec!["two", "three", "red"]);
        assert!(lines.split(&vec![b'x'; MAX_LINE + 10]).len() == 1);
        assert_eq!(lines.finish().map(|l| l.len()), Some(10));
        assert_eq!(lines.finish(), None);
    }

    #[test]
    fn a_pattern_fires_once_per_window_with_the_lines_around_it() {
        let mut matchers = Matchers::new(&["error".to_string()], Duration::from_secs(30));
        let mut lines = Lines::default();
        let mut out = Vec::new();
        let t0 = Instant::now();
        for (i, line) in ["a", "b", "c", "d", "error 1", "e", "error 2", "f"].iter().enumerate() {
            matchers.on_line(line, &lines, t0 + Duration::from_millis(i as u64), &mut out);
            lines.remember(line.to_string());
        }
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].line, "error 1");
        assert_eq!(out[0].lines, vec!["b", "c", "d", "error 1", "e", "error 2"]);
        let later = t0 + Duration::from_secs(31);
        matchers.on_line("error 3", &lines, later, &mut out);
        assert_eq!(matchers.next_due(), Some(later + AFTER_WAIT));
        matchers.flush(later + AFTER_WAIT, &mut out);
        assert_eq!(out.len(), 2, "a new window, a new event");
        assert_eq!(out[1].line, "error 3");
    }
}
