//! What `check` shows of a log: the last lines as a reader should see them
//! (ANSI codes stripped, progress-bar redraws collapsed, runs of identical
//! lines folded, long lines cut), or only the matching lines, or the lines
//! that look like errors with a line of context on each side. It reads
//! backwards, so its cost follows what it shows, not the log's size.

use crate::store::logs::ReverseLines;
use crate::model::text;
use std::path::Path;

/// Longer lines are cut (with a marker saying how much was dropped).
pub const LINE_CHARS: usize = 400;

/// Words that say something went wrong, as whole words; then, case-sensitive,
/// an exception named by its class (`TypeError:`, `KeyError`,
/// `java.lang.NullPointerException`: the line that says what went wrong,
/// where `\berror\b` never matches) and pytest's `E   ` assertion lines.
fn error_pattern() -> &'static regex::Regex {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        regex::Regex::new(
            r"(?i)\berror\b|\berror(\[|:)|\berr!|\bfailed\b|\bfailure\b|\bfatal\b|\bpanic(ked)?\b|\bexception\b|traceback \(most recent call last\)|segmentation fault|\bFAIL\b|✗|✖|(?-i:\b[A-Z]\w*(Error|Exception)\b|^E {2,}\S)",
        )
        .expect("error pattern compiles")
    })
}

pub fn looks_like_error(line: &str) -> bool {
    static ZERO_COUNTS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let zero_counts = ZERO_COUNTS
        .get_or_init(|| regex::Regex::new(r"(?i)\b0 (failed|failures?|errors?)\b").expect("valid pattern"));
    // A summary such as "10 passed, 0 failed" reports no error.
    error_pattern().is_match(&zero_counts.replace_all(line, ""))
}

/// Cleaned lines, newest first, each with its position from the end (0 = last
/// line) and the bytes it took in the log (its newline included). A line the
/// reader hands over in pieces (over `MAX_LINE_BYTES`) is one line.
fn cleaned_lines_backwards(mut reader: ReverseLines) -> impl Iterator<Item = (usize, (String, usize))> {
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let last = reader.next()?;
        if !reader.cut_a_line() {
            let bytes = last.len() + 1;
            return Some((text::clean_line(&String::from_utf8_lossy(&last), LINE_CHARS), bytes));
        }
        // Pieces come last first: keep the start and the piece right after it.
        let (mut after_start, mut beyond) = (last, 0usize);
        let start = loop {
            if beyond > LONGEST_LINE_READ {
                // Its start lies further back than a check reads: so does every earlier line.
                done = true;
                let total = after_start.len() + beyond;
                return Some((format!("[a line of over {total} bytes; its start is not read] …"), total));
            }
            let Some(item) = reader.next() else { break Vec::new() };
            if !reader.cut_a_line() {
                break item;
            }
            beyond += after_start.len();
            after_start = item;
        };
        let total = start.len() + after_start.len() + beyond;
        let mut head = start;
        head.extend_from_slice(&after_start[..after_start.len().min(4 * LINE_CHARS)]);
        Some((cut_long(&head, total), total + 1))
    })
    .enumerate()
}

/// How far back a check reads for the start of one line: output with no
/// newline at all (`head -c 1G /dev/zero`) costs at most this much to show.
const LONGEST_LINE_READ: usize = 8 << 20;

/// A run of identical lines is counted this far back at most, so that a
/// check's cost follows what it shows: `yes` writing 1 GiB is one run of
/// 17.6 million lines, which took 4.8 s to count. A longer run is shown as
/// `[×more than 100000]`, and the lines before it are not read.
const LONGEST_RUN_COUNTED: usize = 100_000;

/// Error lines are looked for in this many of the last lines, and in at most
/// `ERROR_SCAN_BYTES` of them: a log without any was read back to its start
/// (a failed job's notification waits for this look). Where the look stopped
/// before finding as many as asked, the first line says so.
const ERROR_SCAN_LINES: usize = 200_000;
const ERROR_SCAN_BYTES: usize = 64 << 20;

/// What is shown of a line longer than what was held of it (`head`, its first
/// bytes, of `total`): one marker with all the rest.
fn cut_long(head: &[u8], total: usize) -> String {
    let raw = String::from_utf8_lossy(head);
    let kept: String = text::strip_ansi(text::last_redraw(&raw)).chars().take(LINE_CHARS).collect();
    format!("{kept}… [{} more bytes]", total.saturating_sub(kept.len()))
}

/// The last `n` display lines (after folding), oldest first; with `grep`, only matching lines.
pub fn last_lines(log: &Path, n: usize, grep: Option<&regex::Regex>) -> Vec<String> {
    last_lines_of(ReverseLines::open(log), n, grep)
}

/// `last_lines` of what `reader` reads (its `cursor` says where that ends).
pub fn last_lines_of(reader: ReverseLines, n: usize, grep: Option<&regex::Regex>) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let mut runs: Vec<(String, usize)> = Vec::new();
    let mut counted_to_the_bound = false;
    for (_, (line, _)) in cleaned_lines_backwards(reader) {
        if grep.is_some_and(|g| !g.is_match(&line)) {
            continue;
        }
        if let Some((last, count)) = runs.last_mut() {
            if *last == line {
                if *count == LONGEST_RUN_COUNTED {
                    counted_to_the_bound = true;
                    break;
                }
                *count += 1;
                continue;
            }
        }
        if runs.len() == n {
            break;
        }
        runs.push((line, 1));
    }
    runs.reverse();
    runs.into_iter()
        .enumerate()
        .map(|(i, (line, count))| fold(line, count, i == 0 && counted_to_the_bound))
        .collect()
}

/// `longer`: the run goes on further back than it was counted.
fn fold(line: String, count: usize, longer: bool) -> String {
    match (count, longer) {
        (_, true) => format!("{line} [×more than {count}]"),
        (1, false) => line,
        (_, false) => format!("{line} [×{count}]"),
    }
}

/// Lines that look like errors, each with the line before and after it,
/// newest first within a budget of `n` lines (error lines take precedence over
/// context), returned oldest first with `--` between groups that are not adjacent.
pub fn error_lines(log: &Path, n: usize) -> Vec<String> {
    error_lines_of(ReverseLines::open(log), n)
}

/// `error_lines` of what `reader` reads.
pub fn error_lines_of(reader: ReverseLines, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    // (position from the end, line, is_error); positions grow towards the start.
    let mut errors: Vec<(usize, String)> = Vec::new();
    let mut context: Vec<(usize, String)> = Vec::new();
    let mut after: Option<(usize, String)> = None;
    let mut want_before = false;
    // How many of the last lines were searched, where the look stopped at its bounds.
    let mut searched_only: Option<usize> = None;
    let mut bytes_read = 0usize;
    for (pos, (line, bytes)) in cleaned_lines_backwards(reader) {
        bytes_read += bytes;
        if pos == ERROR_SCAN_LINES || bytes_read > ERROR_SCAN_BYTES {
            searched_only = (errors.len() < n).then_some(pos);
            break;
        }
        let is_error = looks_like_error(&line);
        if want_before && !is_error {
            context.push((pos, line.clone()));
        }
        want_before = false;
        if is_error {
            if errors.len() == n {
                break;
            }
            if let Some(after) = after.take() {
                context.push(after);
            }
            errors.push((pos, line.clone()));
            want_before = true;
        }
        after = Some((pos, line));
        if errors.len() == n && !want_before {
            break;
        }
    }
    // Context fills what the error lines leave of the budget, nearest to the newest first.
    let error_positions: std::collections::HashSet<usize> = errors.iter().map(|(p, _)| *p).collect();
    context.retain(|(p, _)| !error_positions.contains(p));
    context.sort_by_key(|(p, _)| *p);
    context.dedup_by_key(|(p, _)| *p);
    let room = n.saturating_sub(errors.len());
    let mut picked = errors;
    picked.extend(context.into_iter().take(room));
    picked.sort_by_key(|(p, _)| std::cmp::Reverse(*p));
    let mut out = Vec::with_capacity(picked.len() + 4);
    if let Some(searched) = searched_only {
        let lines = format!("the last {searched} lines");
        out.push(if picked.is_empty() {
            format!("[none in {lines}; earlier lines not searched]")
        } else {
            format!("[only {lines} were searched]")
        });
    }
    let mut previous: Option<usize> = None;
    for (pos, line) in picked {
        if previous.is_some_and(|p| p != pos + 1) {
            out.push("--".to_string());
        }
        previous = Some(pos);
        out.push(line);
    }
    out
}

/// Lines of a log by number, as `read_log` shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct LineWindow {
    /// The number of the first line in `lines` (1 = the oldest line the log still holds).
    pub first: usize,
    /// Cleaned as `check` shows them (ANSI stripped, redraws collapsed, cut
    /// at `LINE_CHARS`), never folded: each keeps its number.
    pub lines: Vec<String>,
    /// How many lines the log holds now (an unfinished last line counts).
    pub total: usize,
    /// Where the last line shown ends in everything ever written to the log
    /// (see `lines_since`); an unfinished last line is not counted as read
    /// unless the writer is gone.
    pub cursor: u64,
    /// Why `cursor` is not to be used (see `LogFiles::record_problem`).
    pub record_problem: Option<String>,
    /// Lines of the window asked for that were left out, after `lines`, to
    /// keep within the read's budget of characters (see `line_window_within`).
    pub not_shown: usize,
}

/// The lines written after a cursor, as `read_log` shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct LinesSince {
    pub lines: Vec<String>,
    /// Where the last line in `lines` ends: the cursor for the next read.
    pub cursor: u64,
    /// Bytes after the cursor given that were rotated away and deleted
    /// before this read; the lines start at the oldest byte kept.
    pub rotated_away: u64,
    /// More complete lines follow `cursor` (the read stopped at its count,
    /// or at its budget of characters).
    pub more: bool,
    /// Lines within the count asked for that were left out, after `lines`,
    /// to keep within the read's budget of characters (see `lines_since_within`).
    pub not_shown: usize,
}

/// The room a line takes in an answer: its length as JavaScript counts it
/// (UTF-16 units: the MCP server measures its answers so) and its newline.
fn room_taken(line: &str) -> usize {
    line.encode_utf16().count() + 1
}

/// How many of `lines`, from the first, fit in `budget` (see `room_taken`).
fn fitting<'a>(lines: impl Iterator<Item = &'a str>, budget: Option<usize>) -> Option<usize> {
    let mut room = budget?;
    let mut fit = 0;
    for line in lines {
        let taken = room_taken(line);
        if taken > room {
            return Some(fit);
        }
        room -= taken;
        fit += 1;
    }
    Some(fit)
}

/// One line as the forward readers see it: its first `MAX_LINE_BYTES`, how
/// many bytes more it had, and where it ends (after its newline).
struct ForwardLine<'a> {
    held: &'a [u8],
    dropped: usize,
    end: u64,
    complete: bool,
}

impl ForwardLine<'_> {
    fn shown(&self) -> String {
        if self.dropped == 0 {
            text::clean_line(&String::from_utf8_lossy(self.held), LINE_CHARS)
        } else {
            cut_long(self.held, self.held.len() + self.dropped)
        }
    }
}

/// Splits `stream` into lines from where it stands, calling `each` for every
/// one (the last one possibly unfinished) until it returns false. A line of
/// any length costs at most `MAX_LINE_BYTES` of memory.
fn for_each_line(stream: crate::store::logs::StreamReader, mut each: impl FnMut(ForwardLine<'_>) -> bool) {
    use std::io::BufRead;
    let mut pos = stream.position();
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, stream);
    let mut held: Vec<u8> = Vec::new();
    let mut dropped = 0usize;
    let mut pending = false;
    while let Ok(chunk) = reader.fill_buf() {
        if chunk.is_empty() {
            break;
        }
        let (piece, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        let room = crate::store::logs::MAX_LINE_BYTES.saturating_sub(held.len());
        held.extend_from_slice(&piece[..piece.len().min(room)]);
        dropped += piece.len().saturating_sub(room);
        let used = piece.len() + usize::from(ends_line);
        reader.consume(used);
        pos += used as u64;
        pending = true;
        if ends_line {
            pending = false;
            if !each(ForwardLine { held: &held, dropped, end: pos, complete: true }) {
                return;
            }
            held.clear();
            dropped = 0;
        }
    }
    if pending {
        each(ForwardLine { held: &held, dropped, end: pos, complete: false });
    }
}

/// Lines `from ..` (numbered from 1, oldest rotated file first), at most
/// `count` of them; without `from`, the last `count`. A line of any length
/// is one line: only its first `MAX_LINE_BYTES` are held, the rest counted.
/// `ended`: the writer is gone, so an unfinished last line is complete.
pub fn line_window(log: &Path, from: Option<usize>, count: usize, ended: bool) -> LineWindow {
    line_window_within(log, from, count, ended, None)
}

/// `line_window`, keeping only the first lines of the window that fit in
/// `budget` characters (see `room_taken`), with the cursor right after the
/// last one kept and the rest counted in `not_shown`: from the same read,
/// so the cursor is where the lines shown end whatever rotated since (a
/// second, shorter read would start at another line after a rotation).
pub fn line_window_within(log: &Path, from: Option<usize>, count: usize, ended: bool, budget: Option<usize>) -> LineWindow {
    let files = crate::store::logs::LogFiles::open(log);
    let record_problem = files.record_problem.clone();
    let oldest = files.oldest();
    let mut window: std::collections::VecDeque<(String, u64)> = std::collections::VecDeque::new();
    let mut total = 0usize;
    // Where the line before the window ends: the cursor when nothing is shown.
    let mut before = oldest;
    let mut last_end = oldest;
    for_each_line(files.reader_from(oldest), |line| {
        total += 1;
        // An unfinished line is shown, but only read once it is whole.
        let end = if line.complete || ended { line.end } else { last_end };
        let wanted = match from {
            Some(from) => total >= from && total - from < count,
            None => count > 0,
        };
        if wanted {
            window.push_back((line.shown(), end));
            if from.is_none() && window.len() > count {
                before = window.pop_front().map_or(before, |(_, end)| end);
            }
        } else if from.is_some_and(|from| total < from) {
            before = end;
        }
        last_end = end;
        true
    });
    // The last 0 lines end where the log does; lines 0 from `from` end where line `from - 1` does.
    if count == 0 && from.is_none() {
        before = last_end;
    }
    let first = match from {
        Some(from) => from,
        None => total - window.len() + 1,
    };
    let mut not_shown = 0;
    if let Some(fit) = fitting(window.iter().map(|(line, _)| line.as_str()), budget) {
        not_shown = window.len() - fit;
        window.truncate(fit);
    }
    let cursor = window.back().map_or(before, |(_, end)| *end);
    LineWindow { first, lines: window.into_iter().map(|(line, _)| line).collect(), total, cursor, record_problem, not_shown }
}

/// At most `count` lines written after `since` (a cursor from `check`,
/// `line_window` or an earlier call), across rotations. Bytes after `since`
/// already dropped from the disk are counted in `rotated_away` and the lines
/// start at the oldest one kept. An unfinished last line is left for the
/// next call unless `ended` (the writer is gone). A cursor past the end of
/// the log is refused: it is not this log's.
pub fn lines_since(log: &Path, since: u64, count: usize, ended: bool) -> crate::Result<LinesSince> {
    lines_since_within(log, since, count, ended, None)
}

/// `lines_since`, keeping only the first lines that fit in `budget`
/// characters, as `line_window_within` does and for the same reason.
pub fn lines_since_within(
    log: &Path,
    since: u64,
    count: usize,
    ended: bool,
    budget: Option<usize>,
) -> crate::Result<LinesSince> {
    let read = SinceRead::open(log, since, count, ended)?;
    let rotated_away = read.rotated_away();
    let start = read.cursor;
    let mut lines = Vec::new();
    let SinceEnd { mut cursor, mut more } = read.each_line_ending(|line, end| lines.push((line, end)));
    let mut not_shown = 0;
    if let Some(fit) = fitting(lines.iter().map(|(line, _)| line.as_str()), budget) {
        if fit < lines.len() {
            not_shown = lines.len() - fit;
            lines.truncate(fit);
            cursor = lines.last().map_or(start, |(_, end)| *end);
            more = true;
        }
    }
    Ok(LinesSince { lines: lines.into_iter().map(|(line, _)| line).collect(), cursor, rotated_away, more, not_shown })
}

/// Where a read after a cursor stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SinceEnd {
    /// Where the last line given ends: the cursor for the next read.
    pub cursor: u64,
    /// More complete lines follow `cursor` (the read stopped at its count).
    pub more: bool,
}

/// `lines_since` one line at a time, so that a reader that prints the
/// lines as they come (`run-bg logs --since`) holds one line, whatever the
/// log's size; what was rotated away is known before the first line.
pub struct SinceRead {
    files: crate::store::logs::LogFiles,
    cursor: u64,
    rotated_away: u64,
    count: usize,
    ended: bool,
}

impl SinceRead {
    /// Refuses a cursor past the log's end and a count of 0 (a read of no
    /// lines would say `more` and give the same cursor forever).
    pub fn open(log: &Path, since: u64, count: usize, ended: bool) -> crate::Result<SinceRead> {
        if count == 0 {
            return Err(crate::Error::Usage("bad lines: 0; give lines >= 1 with since".into()));
        }
        let files = crate::store::logs::LogFiles::open(log);
        if let Some(problem) = &files.record_problem {
            // Placed from a guess, the cursor would silently skip or repeat lines.
            return Err(crate::Error::Other(format!(
                "cannot read after cursor {since}: {problem}; read by line number instead (fromLine, or `run-bg logs` without `--since`)"
            )));
        }
        let end = files.end();
        if since > end {
            return Err(crate::Error::Usage(format!(
                "bad since: {since}; this job's log ends at {end} (a cursor is what a check or an earlier read of this job's log gave)"
            )));
        }
        let rotated_away = files.oldest().saturating_sub(since);
        let cursor = since.max(files.oldest());
        Ok(SinceRead { files, cursor, rotated_away, count, ended })
    }

    /// Bytes after the cursor given that were rotated away and deleted.
    pub fn rotated_away(&self) -> u64 {
        self.rotated_away
    }

    /// Hands each line to `each`, oldest first, up to the count.
    pub fn each_line(self, mut each: impl FnMut(String)) -> SinceEnd {
        self.each_line_ending(|line, _| each(line))
    }

    /// `each_line`, with where each line ends (the cursor after it).
    fn each_line_ending(self, mut each: impl FnMut(String, u64)) -> SinceEnd {
        let SinceRead { files, mut cursor, count, ended, .. } = self;
        let mut given = 0usize;
        let mut more = false;
        for_each_line(files.reader_from(cursor), |line| {
            if !line.complete && !ended {
                return false;
            }
            if given == count {
                more = true;
                return false;
            }
            given += 1;
            each(line.shown(), line.end);
            cursor = line.end;
            true
        });
        SinceEnd { cursor, more }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::logs::RotatingWriter;

    fn log_with(content: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&path, 1 << 30, 1).unwrap();
        writer.write_all(content.as_bytes()).unwrap();
        (dir, path)
    }

    #[test]
    fn a_budget_keeps_the_first_lines_that_fit_with_the_cursor_after_them_and_counts_the_rest() {
        // 10 lines of 10 UTF-16 units ("é" is one, "𝄞" two) and a newline: 11 each.
        let (_d, log) = log_with(&(1..=10).map(|i| format!("line {i:02}é𝄞\n")).collect::<String>());
        let line_bytes = "line 01é𝄞\n".len() as u64;
        let window = line_window_within(&log, Some(2), 5, true, Some(35));
        assert_eq!((window.first, window.lines.len(), window.not_shown), (2, 3, 2), "{window:?}");
        assert_eq!(window.cursor, 4 * line_bytes, "right after line 4, the last shown");
        let last = line_window_within(&log, None, 4, true, Some(25));
        assert_eq!((last.first, last.lines.clone(), last.not_shown), (7, vec!["line 07é𝄞".to_string(), "line 08é𝄞".into()], 2));
        assert_eq!(last.cursor, 8 * line_bytes);
        let since = lines_since_within(&log, line_bytes, 8, true, Some(11)).unwrap();
        assert_eq!((since.lines.len(), since.not_shown, since.more, since.cursor), (1, 7, true, 2 * line_bytes));
        let whole = lines_since_within(&log, 0, 3, true, Some(1000)).unwrap();
        assert_eq!((whole.lines.len(), whole.not_shown, whole.cursor), (3, 0, 3 * line_bytes));
    }

    #[test]
    fn folds_runs_strips_colour_and_collapses_progress() {
        let (_d, log) = log_with("start\nsame\nsame\nsame\n\x1b[32mok\x1b[0m\n10%\r50%\r100%\nend\n");
        assert_eq!(last_lines(&log, 10, None), vec!["start", "same [×3]", "ok", "100%", "end"]);
        assert_eq!(last_lines(&log, 2, None), vec!["100%", "end"]);
    }

    /// `yes` writing 1 GiB is one run of 17.6 million lines: counting it all
    /// took check 4.8 s. The count stops at `LONGEST_RUN_COUNTED` and says so;
    /// what came before the run is further back than a check reads.
    #[test]
    fn a_run_longer_than_what_a_check_counts_is_shown_as_at_least_that_long() {
        let mut content = String::from("before the run\n");
        content.push_str(&"y\n".repeat(LONGEST_RUN_COUNTED + 5));
        let (_d, log) = log_with(&content);
        assert_eq!(last_lines(&log, 5, None), vec![format!("y [×more than {LONGEST_RUN_COUNTED}]")]);
        // A run up to the bound is counted exactly, with what came before it.
        let (_d, log) = log_with(&format!("before the run\n{}", "y\n".repeat(LONGEST_RUN_COUNTED)));
        assert_eq!(last_lines(&log, 5, None), vec!["before the run".to_string(), format!("y [×{LONGEST_RUN_COUNTED}]")]);
    }

    /// A failed job's notification looks for its first error line: in a big
    /// log without one, that read every line back to the start.
    #[test]
    fn errors_are_looked_for_in_the_last_lines_only_and_the_answer_says_so() {
        let mut content = String::from("error: far back\n");
        for i in 0..ERROR_SCAN_LINES + 10 {
            content.push_str(&format!("step {i}\n"));
        }
        let (_d, log) = log_with(&content);
        assert_eq!(error_lines(&log, 20), vec![format!("[none in the last {ERROR_SCAN_LINES} lines; earlier lines not searched]")]);
        assert!(!looks_like_error(&error_lines(&log, 20)[0]), "the note is not taken for an error line");
        // Fewer errors than asked within the bound: they come after a note.
        content.push_str("error: near the end\nlast\n");
        let (_d, log) = log_with(&content);
        let found = error_lines(&log, 20);
        assert_eq!(found[0], format!("[only the last {ERROR_SCAN_LINES} lines were searched]"));
        assert_eq!(&found[found.len() - 2..], ["error: near the end", "last"]);
        assert!(!looks_like_error(&found[0]));
        // Long lines: the bytes bound stops the look first.
        let long = "x".repeat(1000);
        let mut content = String::from("error: far back\n");
        for _ in 0..(ERROR_SCAN_BYTES / 1000 + 10) {
            content.push_str(&long);
            content.push('\n');
        }
        let (_d, log) = log_with(&content);
        let found = error_lines(&log, 20);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("[none in the last ") && found[0].ends_with("lines; earlier lines not searched]"), "{found:?}");
        // Within the bound, it is found.
        let (_d, log) = log_with("error: near\nstep 1\n");
        assert_eq!(error_lines(&log, 20), vec!["error: near", "step 1"]);
    }

    #[test]
    fn grep_sees_cleaned_lines() {
        let (_d, log) = log_with("a 1\n\x1b[31mwarn\x1b[0m: b\nc 2\nwarn: d\n");
        let re = regex::Regex::new("^warn").unwrap();
        assert_eq!(last_lines(&log, 5, Some(&re)), vec!["warn: b", "warn: d"]);
    }

    #[test]
    fn errors_come_with_a_line_of_context() {
        let mut content = String::new();
        for i in 0..1000 {
            content.push_str(&format!("compiling unit {i}\n"));
        }
        content.push_str("src/a.c:1: error: expected ';'\n  12 | int x\n");
        for i in 0..1000 {
            content.push_str(&format!("linking step {i}\n"));
        }
        content.push_str("make: *** [all] Error 2\n");
        let (_d, log) = log_with(&content);
        assert_eq!(
            error_lines(&log, 20),
            vec![
                "compiling unit 999",
                "src/a.c:1: error: expected ';'",
                "  12 | int x",
                "--",
                "linking step 999",
                "make: *** [all] Error 2",
            ]
        );
    }

    #[test]
    fn error_words_need_boundaries() {
        assert!(looks_like_error("error[E0308]: mismatched types"));
        assert!(looks_like_error("npm ERR! code E404"));
        assert!(looks_like_error("FAIL src/app.test.js"));
        assert!(!looks_like_error("terrorist detection model"));
        assert!(!looks_like_error("compiled without errors"));
        assert!(!looks_like_error("Tests: 10 passed, 0 failed"));
        assert!(looks_like_error("Tests: 1 failed, 9 passed"));
    }

    #[test]
    fn exceptions_named_by_their_class_look_like_errors() {
        for line in [
            "TypeError: Cannot read properties of undefined (reading 'foo')",
            "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes",
            "ValueError: bad value",
            "KeyError: 'foo'",
            "AssertionError: expected 1 to equal 2",
            "ModuleNotFoundError: No module named 'requests'",
            "RuntimeError: boom",
            "ZeroDivisionError: division by zero",
            "Exception in thread \"main\" java.lang.NullPointerException",
            "java.lang.IllegalStateException: closed",
            "Uncaught ReferenceError: x is not defined",
            "E       assert 1 == 2",
            "E   AssertionError",
        ] {
            assert!(looks_like_error(line), "{line}");
        }
        for line in [
            "ErrorBoundary mounted",
            "handleTypeError is a function name",
            "E2E suite: 12 specs",
            "Everything is fine",
            "E found",
            "the terror of it",
        ] {
            assert!(!looks_like_error(line), "{line}");
        }
    }
    #[test]
    fn a_line_window_numbers_lines_across_rotations_and_never_folds() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 4096, 3).unwrap();
        let mut content = String::new();
        for i in 1..=300 {
            content.push_str(&format!("\x1b[1mline {i:03}\x1b[0m same\n"));
        }
        writer.write_all(content.as_bytes()).unwrap();
        assert!(crate::store::logs::rotated_path(&log, 1).exists(), "the test needs a rotated file");
        let all = line_window(&log, Some(1), 100_000, false);
        assert_eq!(all.total, all.lines.len());
        let last: u32 = all.lines.last().unwrap()[5..8].parse().unwrap();
        assert_eq!(last, 300);
        for pair in all.lines.windows(2) {
            let (a, b): (u32, u32) = (pair[0][5..8].parse().unwrap(), pair[1][5..8].parse().unwrap());
            assert_eq!(b, a + 1, "consecutive, in order, cleaned: {pair:?}");
        }
        let some = line_window(&log, Some(3), 2, false);
        assert_eq!((some.first, some.lines.clone(), some.total), (3, all.lines[2..4].to_vec(), all.total));
        let tail = line_window(&log, None, 2, false);
        assert_eq!((tail.first, tail.lines), (all.total - 1, all.lines[all.total - 2..].to_vec()));
        assert_eq!(line_window(&log, Some(all.total + 1), 5, false).lines, Vec::<String>::new());
    }

    #[test]
    fn a_5_mb_line_is_one_line_shown_cut() {
        let long = "x".repeat(5_000_000);
        let (_d, log) = log_with(&format!("before\n{long}\nafter\nunfinished"));
        let window = line_window(&log, Some(1), 10, false);
        assert_eq!(window.total, 4);
        assert_eq!(window.lines[0], "before");
        assert!(window.lines[1].starts_with(&"x".repeat(LINE_CHARS)), "{}", &window.lines[1][..40]);
        assert!(window.lines[1].len() < 1000, "{}", window.lines[1]);
        assert!(window.lines[1].ends_with(&format!("… [{} more bytes]", 5_000_000 - LINE_CHARS)), "{}", &window.lines[1][LINE_CHARS..]);
        assert_eq!(&window.lines[2..], ["after", "unfinished"]);
        // check's view: the same line, once, with the same marker.
        assert_eq!(last_lines(&log, 10, None), window.lines);
        assert_eq!(error_lines(&log, 10), Vec::<String>::new());
        let re = regex::Regex::new("^x").unwrap();
        assert_eq!(last_lines(&log, 10, Some(&re)), vec![window.lines[1].clone()]);
    }

    #[test]
    fn a_line_longer_than_a_check_reads_ends_what_it_shows() {
        let long = "y".repeat(LONGEST_LINE_READ + 3 * crate::store::logs::MAX_LINE_BYTES);
        let (_d, log) = log_with(&format!("before\n{long}\nafter\n"));
        let shown = last_lines(&log, 10, None);
        assert_eq!(shown.len(), 2, "{:?}", shown.iter().map(|l| &l[..l.len().min(80)]).collect::<Vec<_>>());
        assert!(shown[0].starts_with("[a line of over ") && shown[0].ends_with(" bytes; its start is not read] …"), "{}", shown[0]);
        assert_eq!(shown[1], "after");
    }

    fn numbered(range: std::ops::Range<usize>) -> String {
        range.map(|i| format!("line {i:05}\n")).collect()
    }

    #[test]
    fn reading_since_a_cursor_across_rotations_neither_repeats_nor_loses_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        // 11-byte lines, 256-byte files, 20 kept: nothing is dropped here.
        let mut writer = RotatingWriter::create(&log, 256, 20).unwrap();
        let mut seen: Vec<String> = Vec::new();
        let first = line_window(&log, None, 10, false);
        assert_eq!((first.lines.len(), first.cursor), (0, 0));
        let mut cursor = first.cursor;
        for round in 0..12 {
            writer.write_all(numbered(round * 40..round * 40 + 40).as_bytes()).unwrap();
            // Small reads: a cursor that lands in a file later rotated goes on.
            loop {
                let read = lines_since(&log, cursor, 7, false).unwrap();
                assert_eq!(read.rotated_away, 0);
                seen.extend(read.lines.iter().cloned());
                assert!(read.cursor >= cursor);
                cursor = read.cursor;
                if !read.more {
                    break;
                }
            }
        }
        assert!(crate::store::logs::rotated_path(&log, 10).exists(), "the test needs many rotations");
        let expected: Vec<String> = (0..480).map(|i| format!("line {i:05}")).collect();
        assert_eq!(seen, expected);
        assert_eq!(cursor, 480 * 11, "the cursor counts every byte ever written");
        assert!(lines_since(&log, cursor, 10, false).unwrap().lines.is_empty());
    }

    #[test]
    fn a_cursor_behind_what_was_dropped_says_how_much_and_goes_on_from_the_oldest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 110, 2).unwrap();
        writer.write_all(numbered(0..5).as_bytes()).unwrap();
        let cursor = line_window(&log, None, 100, false).cursor;
        assert_eq!(cursor, 55);
        // 10 lines a file, 3 files kept: lines 0..70 are dropped by the end.
        writer.write_all(numbered(5..100).as_bytes()).unwrap();
        let read = lines_since(&log, cursor, 1000, false).unwrap();
        let kept = line_window(&log, Some(1), 1000, false);
        assert_eq!(read.lines, kept.lines, "from the oldest line kept");
        assert_eq!(read.lines.first().map(String::as_str), Some("line 00070"));
        assert_eq!(read.rotated_away, 70 * 11 - 55, "the bytes between the cursor and the oldest kept");
        assert_eq!((read.cursor, kept.cursor), (1100, 1100));
        // A cursor from elsewhere (past the end) is refused, saying why.
        let error = lines_since(&log, 5000, 10, false).unwrap_err().to_string();
        assert!(error.contains("bad since: 5000; this job's log ends at 1100"), "{error}");
    }

    #[test]
    fn a_resumed_writer_goes_on_counting_where_the_last_one_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 110, 1).unwrap();
        writer.write_all(numbered(0..35).as_bytes()).unwrap();
        drop(writer);
        let cursor = line_window(&log, None, 1, false).cursor;
        assert_eq!(cursor, 35 * 11);
        let mut writer = RotatingWriter::resume(&log, 110, 1).unwrap();
        writer.write_all(numbered(35..38).as_bytes()).unwrap();
        let read = lines_since(&log, cursor, 100, false).unwrap();
        assert_eq!(read.lines, vec!["line 00035", "line 00036", "line 00037"]);
        assert_eq!((read.cursor, read.rotated_away), (38 * 11, 0));
    }

    #[test]
    fn an_unfinished_line_is_read_once_it_is_whole_or_the_writer_is_gone() {
        let (_d, log) = log_with("one\ntw");
        let check = crate::store::logs::ReverseLines::open(&log);
        assert_eq!((check.cursor(false), check.cursor(true)), (4, 6));
        let read = lines_since(&log, 0, 10, false).unwrap();
        assert_eq!((read.lines.clone(), read.cursor), (vec!["one".to_string()], 4));
        let window = line_window(&log, None, 10, false);
        assert_eq!((window.lines.clone(), window.cursor), (vec!["one".to_string(), "tw".to_string()], 4));
        let ended = lines_since(&log, 4, 10, true).unwrap();
        assert_eq!((ended.lines, ended.cursor), (vec!["tw".to_string()], 6));
    }

    #[test]
    fn a_read_at_any_step_of_a_rotation_gives_every_line_after_the_cursor() {
        use std::sync::{Arc, Mutex};
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 110, 4).unwrap();
        writer.write_all(numbered(0..3).as_bytes()).unwrap();
        let cursor = line_window(&log, None, 100, false).cursor;
        let written = Arc::new(Mutex::new(3usize));
        let failures = Arc::new(Mutex::new(Vec::new()));
        // At each file-system step of the writer (between the renames of a
        // rotation too), a reader from the cursor gets every line written
        // since, and the lines still kept are never said to be rotated away.
        let (at_log, at_written, at_failures) = (log.clone(), written.clone(), failures.clone());
        writer.set_seam(Arc::new(move |point| {
            if point == "unlink" {
                return;
            }
            let read = lines_since(&at_log, cursor, 1000, false).unwrap();
            let upto = *at_written.lock().unwrap();
            let expected: Vec<String> = (3..upto).map(|i| format!("line {i:05}")).collect();
            if read.rotated_away != 0 || read.lines != expected {
                at_failures.lock().unwrap().push(format!("at {point} after {upto} lines: {:?}, {} lines", read.rotated_away, read.lines.len()));
            }
        }));
        // 4 rotated files of 10 lines and the current one hold 50 lines: 3 + 45 fit.
        for i in 3..48 {
            writer.write_all(numbered(i..i + 1).as_bytes()).unwrap();
            *written.lock().unwrap() = i + 1;
        }
        assert!(crate::store::logs::rotated_path(&log, 4).exists(), "the test needs full rotations");
        let failures = failures.lock().unwrap();
        assert!(failures.is_empty(), "{} reads failed; first: {}", failures.len(), failures[0]);
    }

    #[test]
    fn a_read_of_0_lines_since_a_cursor_is_refused_saying_what_is_accepted() {
        let (_d, log) = log_with("one\ntwo\n");
        let error = lines_since(&log, 0, 0, false).unwrap_err().to_string();
        assert!(error.contains("bad lines: 0; give lines >= 1 with since"), "{error}");
        assert_eq!(lines_since(&log, 0, 1, false).unwrap().cursor, 4);
    }

    #[test]
    fn a_window_of_0_lines_from_a_line_ends_where_the_line_before_it_does() {
        let (_d, log) = log_with("one\ntwo\nthree\n");
        for (from, cursor) in [(1, 0), (2, 4), (3, 8), (4, 14)] {
            let window = line_window(&log, Some(from), 0, false);
            assert_eq!((window.lines.len(), window.cursor), (0, cursor), "fromLine {from}");
        }
        // Without a line to start from, the last 0 lines end at the end.
        assert_eq!(line_window(&log, None, 0, false).cursor, 14);
    }

    #[test]
    fn a_read_since_a_cursor_hands_over_its_lines_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("output.log");
        let mut writer = RotatingWriter::create(&log, 110, 2).unwrap();
        writer.write_all(numbered(0..40).as_bytes()).unwrap();
        let read = SinceRead::open(&log, 0, 25, false).unwrap();
        let rotated_away = read.rotated_away();
        assert_eq!(rotated_away, 10 * 11, "known before the first line");
        let mut given = Vec::new();
        let end = read.each_line(|line| given.push(line));
        let expected: Vec<String> = (10..35).map(|i| format!("line {i:05}")).collect();
        assert_eq!((given, end), (expected, SinceEnd { cursor: 35 * 11, more: true }));
        assert_eq!(lines_since(&log, 0, 25, false).unwrap(), LinesSince {
            lines: (10..35).map(|i| format!("line {i:05}")).collect(),
            cursor: 35 * 11,
            rotated_away,
            more: true,
            not_shown: 0,
        });
    }
}
