//! Making job output fit for a model's context or a notification: ANSI escape
//! codes stripped, carriage-return redraws collapsed, long lines cut; and
//! making user-controlled text safe to print on a terminal.

use std::borrow::Cow;

/// Removes terminal escape sequences, parsed as a terminal would (the `vte`
/// state machine): CSI (colours, cursor moves), OSC (titles, hyperlinks), the
/// string sequences DCS, SOS, PM and APC with their payloads, and escapes with
/// intermediates (`ESC ( B`, `ESC # 8`). Of the control characters only tabs
/// are kept: bells, backspaces and the like only make noise in a context.
pub fn strip_ansi(line: &str) -> String {
    // A bidi mark is three bytes starting E2 80 or E2 81: the byte scan
    // stays a byte scan, the rare line with one goes to the parser.
    let bidi = |i: usize, b: u8| b == 0xe2 && line.as_bytes().get(i + 1).is_some_and(|&n| n == 0x80 || n == 0x81) && line[i..].chars().next().is_some_and(is_bidi_control);
    if !line.bytes().enumerate().any(|(i, b)| is_control_byte(line.as_bytes(), i, b) || bidi(i, b)) {
        // Most log lines: nothing for the parser to do.
        return line.to_string();
    }
    let mut text = PrintedText { out: String::with_capacity(line.len()) };
    vte::Parser::new().advance(&mut text, line.as_bytes());
    text.out
}

/// True where `bytes[i]` starts a C0 control (tab aside), DEL, or a C1 control
/// (U+0080..U+009F, encoded `C2 80`..`C2 9F`).
fn is_control_byte(bytes: &[u8], i: usize, b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
}

/// What a terminal would print: the parser hands over printable characters
/// and bare control codes; everything inside an escape sequence goes to the
/// other `Perform` methods, whose default is to ignore it.
struct PrintedText {
    out: String,
}

impl vte::Perform for PrintedText {
    fn print(&mut self, c: char) {
        // DEL reaches `print`; it is no text either. A bidi mark is shown, not obeyed.
        if is_bidi_control(c) {
            self.out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else if !c.is_control() {
            self.out.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if byte == b'\t' {
            self.out.push('\t');
        }
    }
}

/// User-controlled text (a command line, a label, an error that quotes a
/// path) as it may be shown on a terminal: every control character but the
/// newline is written out (`\x1b`, `\x09`, `\u{9b}`), so that printing it can
/// never move the cursor, retitle the window or clear the screen.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs_escape(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n') || is_bidi_control(c)
}

/// The marks that reorder what follows them on screen (U+202A–U+202E
/// embeddings and overrides, U+2066–U+2069 isolates): `evil\u{202e}txt.exe`
/// reads as `evilexe.txt`. Shown written out, never obeyed.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A progress bar redraws its line with `\r`: only its last state matters.
pub fn last_redraw(line: &str) -> &str {
    let trimmed = line.strip_suffix('\r').unwrap_or(line);
    match trimmed.rfind('\r') {
        Some(at) => &trimmed[at + 1..],
        None => trimmed,
    }
}

/// Cuts to at most `max_chars` characters, marking the cut.
pub fn cut(line: &str, max_chars: usize) -> String {
    if line.chars().count() <= max_chars {
        return line.to_string();
    }
    let dropped = line.chars().count() - max_chars;
    let marker = format!("… [{dropped} more chars]");
    // A marker as long as what it would hide hides nothing: the line is shown
    // whole (never longer than it would be cut).
    if dropped <= marker.chars().count() {
        return line.to_string();
    }
    let kept: String = line.chars().take(max_chars).collect();
    format!("{kept}{marker}")
}

/// What a reader should see of one raw output line.
pub fn clean_line(raw: &str, max_chars: usize) -> String {
    cut(&strip_ansi(last_redraw(raw)), max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_never_hides_less_than_its_marker_says() {
        assert_eq!(cut("abcdef", 5), "abcdef", "one char over: shown whole, not `abcde… [1 more chars]`");
        let just_over = "x".repeat(400 + 17);
        assert_eq!(cut(&just_over, 400), just_over);
        let long = "y".repeat(500);
        assert_eq!(cut(&long, 400), format!("{}… [100 more chars]", "y".repeat(400)));
    }

    #[test]
    fn strips_colours_cursor_moves_and_titles() {
        assert_eq!(strip_ansi("\u{1b}[1;31merror\u{1b}[0m: x"), "error: x");
        assert_eq!(strip_ansi("\u{1b}[2K\u{1b}[1Gdone"), "done");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}text"), "text");
        assert_eq!(strip_ansi("plain"), "plain");
        assert_eq!(strip_ansi("bold\u{1b}(B\u{1b}[m text\u{7}"), "bold text");
    }

    #[test]
    fn bidi_overrides_are_shown_written_out_not_obeyed() {
        assert_eq!(visible("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(visible("a\u{2066}b\u{2069}"), "a\\u{2066}b\\u{2069}");
        assert_eq!(strip_ansi("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(visible("naïve café"), "naïve café");
    }

    #[test]
    fn keeps_the_last_state_of_a_progress_bar() {
        assert_eq!(last_redraw("10%\r50%\r100% done"), "100% done");
        assert_eq!(last_redraw("10%\r50%\r"), "50%");
    }

    #[test]
    fn cuts_long_lines_with_a_marker() {
        assert_eq!(cut(&"abcdef".repeat(10), 4), "abcd… [56 more chars]");
        assert_eq!(cut("abc", 4), "abc");
        assert_eq!(clean_line("\u{1b}[32mok\u{1b}[0m\rfinal", 100), "final");
    }

    #[test]
    fn strips_string_sequences_and_their_payloads() {
        // DCS, SOS, PM and APC carry a payload up to ST (ESC \): none of it is text.
        assert_eq!(strip_ansi("a\u{1b}P1$r0m\u{1b}\\b"), "ab", "DCS");
        assert_eq!(strip_ansi("a\u{1b}Xsos payload\u{1b}\\b"), "ab", "SOS");
        assert_eq!(strip_ansi("a\u{1b}^pm payload\u{1b}\\b"), "ab", "PM");
        assert_eq!(strip_ansi("a\u{1b}_Gf=100;AAAA\u{1b}\\b"), "ab", "APC (kitty graphics)");
        assert_eq!(strip_ansi("a\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\b"), "alinkb", "OSC 8 hyperlink");
        // ESC # 8 (DECALN) and other escapes with intermediates: no byte of them is text.
        assert_eq!(strip_ansi("a\u{1b}#8b"), "ab", "ESC # 8");
        assert_eq!(strip_ansi("a\u{1b}%Gb\u{1b}(0c"), "abc", "charset selections");
        assert_eq!(clean_line("x\u{1b}P+q544e\u{1b}\\y\u{1b}#8", 100), "xy");
    }

    #[test]
    fn keeps_text_tabs_and_unicode_and_drops_other_controls() {
        assert_eq!(strip_ansi("a\tb"), "a\tb");
        assert_eq!(strip_ansi("héllo ✓ 日本"), "héllo ✓ 日本");
        assert_eq!(strip_ansi("bell\u{7}back\u{8}del\u{7f}nul\u{0}c1\u{9b}31m"), "bellbackdelnulc131m");
        // An escape cut off at the end of the line takes nothing after it.
        assert_eq!(strip_ansi("done\u{1b}[3"), "done");
        assert_eq!(strip_ansi("done\u{1b}"), "done");
    }

    #[test]
    fn visible_escapes_every_control_character() {
        assert_eq!(visible("plain text and é"), "plain text and é");
        assert_eq!(visible("a\tb"), "a\\x09b");
        assert_eq!(visible("a\u{1b}]0;pwned\u{7}b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(visible("\u{1b}[2J\r\u{7f}\u{9b}"), "\\x1b[2J\\x0d\\x7f\\u{9b}");
        assert_eq!(visible("two\nlines"), "two\nlines");
        assert!(matches!(visible("nothing to do"), std::borrow::Cow::Borrowed(_)));
    }

    /// `cargo test --release -- --ignored --nocapture clean_speed`: the tail path
    /// cleans every line it shows, and `--grep` every line it reads.
    #[test]
    #[ignore]
    fn clean_speed() {
        let lines: Vec<String> = (0..100_000)
            .map(|i| match i % 4 {
                0 => format!("\u{1b}[1;32m✓\u{1b}[0m test {i} passed \u{1b}[2m(12 ms)\u{1b}[0m"),
                1 => format!("compiling crate-{i} v0.1.0 (/home/user/src/crate-{i})"),
                2 => format!("{i}%\r{i}% [=====>    ]\r\u{1b}[2K\u{1b}[1G{i}% [==========]"),
                _ => format!("src/module_{i}.rs:12:5: warning: unused variable `x`\t(see #{i})"),
            })
            .collect();
        let start = std::time::Instant::now();
        let mut total = 0;
        for _ in 0..5 {
            for line in &lines {
                total += clean_line(line, 400).len();
            }
        }
        let per_run = start.elapsed() / 5;
        eprintln!("clean_line over 100,000 lines: {per_run:?} ({total} bytes out)");
    }
}
