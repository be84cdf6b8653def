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
fn cleaned_lines_backwards(log: &Path) -> impl Iterator<Item = (usize, String)> {
    ReverseLines::open(log)
        .map(|raw| text::clean_line(&String::from_utf8_lossy(&raw), LINE_CHARS))
        .enumerate()
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
}
