//! Making job output fit for a model's context or a notification: ANSI escape
//! codes stripped, carriage-return redraws collapsed, long lines cut.

/// Removes ANSI escape sequences: CSI (`ESC [ … final`), OSC (`ESC ] … BEL`
/// or `ESC \`), and two-byte escapes.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.next() {
                Some('[') => {
                    // parameters and intermediates, then one final byte in @..~
                    for next in chars.by_ref() {
                        if ('@'..='~').contains(&next) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(next) = chars.next() {
                        if next == '\u{7}' {
                            break;
                        }
                        if next == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // Charset designation (`ESC ( B`, as `tput sgr0` emits): one more byte.
                Some('(' | ')' | '*' | '+' | '-' | '.' | '/') => {
                    chars.next();
                }
                _ => {}
            }
            continue;
        }
        if c.is_control() && c != '\t' {
            continue; // bell, backspace and the like only make noise in a context
        }
        if c == '\u{9b}' {
            // 8-bit CSI
            for next in chars.by_ref() {
                if ('@'..='~').contains(&next) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
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
    let kept: String = line.chars().take(max_chars).collect();
    let dropped = line.chars().count() - max_chars;
    format!("{kept}… [{dropped} more chars]")
}

/// What a reader should see of one raw output line.
pub fn clean_line(raw: &str, max_chars: usize) -> String {
    cut(&strip_ansi(last_redraw(raw)), max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_colours_cursor_moves_and_titles() {
        assert_eq!(strip_ansi("\u{1b}[1;31merror\u{1b}[0m: x"), "error: x");
        assert_eq!(strip_ansi("\u{1b}[2K\u{1b}[1Gdone"), "done");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}text"), "text");
        assert_eq!(strip_ansi("plain"), "plain");
        assert_eq!(strip_ansi("bold\u{1b}(B\u{1b}[m text\u{7}"), "bold text");
    }

    #[test]
    fn keeps_the_last_state_of_a_progress_bar() {
        assert_eq!(last_redraw("10%\r50%\r100% done"), "100% done");
        assert_eq!(last_redraw("10%\r50%\r"), "50%");
    }

    #[test]
    fn cuts_long_lines_with_a_marker() {
        assert_eq!(cut("abcdef", 4), "abcd… [2 more chars]");
        assert_eq!(cut("abc", 4), "abc");
        assert_eq!(clean_line("\u{1b}[32mok\u{1b}[0m\rfinal", 100), "final");
    }
}
