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

fn error_pattern() -> &'static regex::Regex {
    static PATTERN: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        regex::Regex::new(
            r"(?i)\berror\b|\berror(\[|:)|\berr!|\bfailed\b|\bfailure\b|\bfatal\b|\bpanic(ked)?\b|\bexception\b|traceback \(most recent call last\)|segmentation fault|\bFAIL\b|✗|✖",
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

/// Cleaned lines, newest first, each with its position from the end (0 = last line).
/// A line the reader hands over in pieces (over `MAX_LINE_BYTES`) is one line.
fn cleaned_lines_backwards(log: &Path) -> impl Iterator<Item = (usize, String)> {
    let mut reader = ReverseLines::open(log);
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let last = reader.next()?;
        if !reader.cut_a_line() {
            return Some(text::clean_line(&String::from_utf8_lossy(&last), LINE_CHARS));
        }
        // Pieces come last first: keep the start and the piece right after it.
        let (mut after_start, mut beyond) = (last, 0usize);
        let start = loop {
            if beyond > LONGEST_LINE_READ {
                // Its start lies further back than a check reads: so does every earlier line.
                done = true;
                let total = after_start.len() + beyond;
                return Some(format!("[a line of over {total} bytes; its start is not read] …"));
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
        Some(cut_long(&head, total))
    })
    .enumerate()
}

/// How far back a check reads for the start of one line: output with no
/// newline at all (`head -c 1G /dev/zero`) costs at most this much to show.
const LONGEST_LINE_READ: usize = 8 << 20;

/// What is shown of a line longer than what was held of it (`head`, its first
/// bytes, of `total`): one marker with all the rest.
fn cut_long(head: &[u8], total: usize) -> String {
    let raw = String::from_utf8_lossy(head);
    let kept: String = text::strip_ansi(text::last_redraw(&raw)).chars().take(LINE_CHARS).collect();
    format!("{kept}… [{} more bytes]", total.saturating_sub(kept.len()))
}

/// The last `n` display lines (after folding), oldest first; with `grep`, only matching lines.
pub fn last_lines(log: &Path, n: usize, grep: Option<&regex::Regex>) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let mut runs: Vec<(String, usize)> = Vec::new();
    for (_, line) in cleaned_lines_backwards(log) {
        if grep.is_some_and(|g| !g.is_match(&line)) {
            continue;
        }
        if let Some((last, count)) = runs.last_mut() {
            if *last == line {
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
    runs.into_iter().map(|(line, count)| fold(line, count)).collect()
}

fn fold(line: String, count: usize) -> String {
    if count > 1 { format!("{line} [×{count}]") } else { line }
}

/// Lines that look like errors, each with the line before and after it,
/// newest first within a budget of `n` lines (error lines take precedence over
/// context), returned oldest first with `--` between groups that are not adjacent.
pub fn error_lines(log: &Path, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    // (position from the end, line, is_error); positions grow towards the start.
    let mut errors: Vec<(usize, String)> = Vec::new();
    let mut context: Vec<(usize, String)> = Vec::new();
    let mut after: Option<(usize, String)> = None;
    let mut want_before = false;
    for (pos, line) in cleaned_lines_backwards(log) {
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
}

/// Lines `from ..` (numbered from 1, oldest rotated file first), at most
/// `count` of them; without `from`, the last `count`. A line of any length
/// is one line: only its first `MAX_LINE_BYTES` are held, the rest counted.
pub fn line_window(log: &Path, from: Option<usize>, count: usize) -> LineWindow {
    use std::io::BufRead;
    let mut window: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut total = 0usize;
    let mut held: Vec<u8> = Vec::new();
    let mut dropped = 0usize;
    let mut finish = |held: &mut Vec<u8>, dropped: &mut usize, total: &mut usize| {
        *total += 1;
        let wanted = match from {
            Some(from) => *total >= from && *total - from < count,
            None => count > 0,
        };
        if wanted {
            window.push_back(if *dropped == 0 {
                text::clean_line(&String::from_utf8_lossy(held), LINE_CHARS)
            } else {
                cut_long(held, held.len() + *dropped)
            });
            if from.is_none() && window.len() > count {
                window.pop_front();
            }
        }
        held.clear();
        *dropped = 0;
    };
    let mut files = crate::store::logs::log_files_newest_first(log);
    files.reverse();
    for path in files {
        // Rotated away between listing and opening: its lines moved to a later name.
        let Ok(file) = crate::store::paths::open_read(&path) else { continue };
        let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
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
            if ends_line {
                finish(&mut held, &mut dropped, &mut total);
            }
        }
    }
    if !held.is_empty() || dropped > 0 {
        finish(&mut held, &mut dropped, &mut total);
    }
    let first = match from {
        Some(from) => from,
        None => total - window.len() + 1,
    };
    LineWindow { first, lines: window.into(), total }
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
    fn folds_runs_strips_colour_and_collapses_progress() {
        let (_d, log) = log_with("start\nsame\nsame\nsame\n\x1b[32mok\x1b[0m\n10%\r50%\r100%\nend\n");
        assert_eq!(last_lines(&log, 10, None), vec!["start", "same [×3]", "ok", "100%", "end"]);
        assert_eq!(last_lines(&log, 2, None), vec!["100%", "end"]);
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
        let all = line_window(&log, Some(1), 100_000);
        assert_eq!(all.total, all.lines.len());
        let last: u32 = all.lines.last().unwrap()[5..8].parse().unwrap();
        assert_eq!(last, 300);
        for pair in all.lines.windows(2) {
            let (a, b): (u32, u32) = (pair[0][5..8].parse().unwrap(), pair[1][5..8].parse().unwrap());
            assert_eq!(b, a + 1, "consecutive, in order, cleaned: {pair:?}");
        }
        let some = line_window(&log, Some(3), 2);
        assert_eq!((some.first, some.lines.clone(), some.total), (3, all.lines[2..4].to_vec(), all.total));
        let tail = line_window(&log, None, 2);
        assert_eq!((tail.first, tail.lines), (all.total - 1, all.lines[all.total - 2..].to_vec()));
        assert_eq!(line_window(&log, Some(all.total + 1), 5).lines, Vec::<String>::new());
    }

    #[test]
    fn a_5_mb_line_is_one_line_shown_cut() {
        let long = "x".repeat(5_000_000);
        let (_d, log) = log_with(&format!("before\n{long}\nafter\nunfinished"));
        let window = line_window(&log, Some(1), 10);
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
}
