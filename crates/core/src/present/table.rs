//! `list` on a terminal: the jobs as an aligned table for people (id, name,
//! status in colour, runtime, CPU %, memory, restarts, ports, last line),
//! fitted to the terminal's width. Off a terminal `list` prints
//! `format::list_text`, the compact lines agents read, unchanged. `top`
//! builds its rows from the same cells (`JobCells`).

use crate::model::duration::format_duration_ms;
use crate::model::job::{Job, JobStatus};
use crate::model::text::visible;
use crate::now_ms;
use crate::verbs::request::QueuedPlace;
use crate::verbs::usage::JobUsage;
use std::collections::HashMap;

/// The table's columns, in order.
pub const HEADERS: [&str; 10] = ["ID", "LABEL", "STATUS", "RUNTIME", "CPU%", "MEM", "RESTARTS", "PORTS", "COMMAND", "LAST LINE"];

const LABEL: usize = 1;
pub const STATUS: usize = 2;
/// CPU%, MEM and RESTARTS: numbers, right-aligned.
pub const NUMBERS: std::ops::RangeInclusive<usize> = 4..=6;
const COMMAND: usize = 8;
const LAST_LINE: usize = 9;
/// The widest the label and command columns start at, before any shrinking.
const LABEL_NATURAL_MAX: usize = 24;
const COMMAND_NATURAL_MAX: usize = 40;
/// Narrower than this, the column is left out instead of cut.
const LAST_LINE_MIN: usize = 10;
const COMMAND_MIN: usize = 10;
const LABEL_MIN: usize = 5;
const GAP: &str = "  ";
/// On a terminal too narrow for every number, these go, in this order.
const NARROW_DROPS: [usize; 5] = [6, 7, 3, 5, 4];

/// One job's cells as text for people, each on one line.
#[derive(Debug, Clone, PartialEq)]
pub struct JobCells {
    pub cells: [String; 10],
    pub status: JobStatus,
}

impl JobCells {
    pub fn of(job: &Job, usage: Option<&JobUsage>, place: Option<&QueuedPlace>) -> JobCells {
        let one_line = |text: &str| visible(text).replace(['\n', '\r', '\t'], " ");
        let live = usage.filter(|u| u.processes > 0);
        let mut status = job.shown_status().to_string();
        if let Some(place) = place {
            status = format!("queued ({})", crate::present::format::queue_place(place));
        } else if job.status().is_final() {
            if let Some(usage) = live {
                status.push_str(&format!(" +{} left", usage.processes));
            }
        }
        let cpu = live.and_then(|u| u.cpu_percent).map_or_else(|| "-".to_string(), |p| format!("{p:.1}"));
        let memory = live.map_or_else(|| "-".to_string(), |u| memory_text(u.rss_kb));
        let ports = match live.map(|u| u.ports.as_deref()) {
            Some(Some([])) | None => "-".to_string(),
            Some(None) => "?".to_string(),
            Some(Some(ports)) => ports.iter().map(u16::to_string).collect::<Vec<_>>().join(","),
        };
        let restarts = job.restart.as_ref().map_or(0, |r| r.count).to_string();
        let last = usage.and_then(|u| u.last_line.as_deref()).map(one_line).unwrap_or_default();
        JobCells {
            cells: [
                visible(&job.id).into_owned(),
                one_line(&job.label),
                status,
                format_duration_ms(job.duration_ms(now_ms())),
                cpu,
                memory,
                restarts,
                ports,
                one_line(&job.command),
                last.trim().to_string(),
            ],
            status: job.shown_status(),
        }
    }
}

/// `1.2G`, `340M`, `812K`: resident memory in binary units, at most 4 characters.
pub fn memory_text(kb: u64) -> String {
    let mb = kb as f64 / 1024.0;
    if kb < 1024 {
        format!("{kb}K")
    } else if mb < 10.0 {
        format!("{mb:.1}M")
    } else if mb < 1024.0 {
        format!("{mb:.0}M")
    } else {
        format!("{:.1}G", mb / 1024.0)
    }
}

/// The ANSI colour a status is shown in: green running or done, red failed,
/// yellow killed or timed out, cyan waiting, blue paused, magenta orphaned.
pub fn status_colour(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Running => "32",
        JobStatus::Success => "32;2",
        JobStatus::Failed | JobStatus::Lost => "31",
        JobStatus::Killed | JobStatus::Timeout => "33",
        JobStatus::Queued | JobStatus::Skipped => "36",
        JobStatus::Paused => "34",
        JobStatus::Orphaned => "35",
    }
}

/// Whether text for people may carry colour: on a terminal, unless
/// `NO_COLOR` is set to anything but the empty string (no-color.org).
pub fn colour_allowed(on_terminal: bool) -> bool {
    on_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Which columns a table `width` wide shows, in order, and each column's
/// width (by column index, for all of them): the rules of `list_table`,
/// which `top` lays its table out by too.
pub fn column_layout(rows: &[JobCells], width: usize) -> (Vec<usize>, Vec<usize>) {
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| display_width(h)).collect();
    for row in rows {
        for (column, cell) in row.cells.iter().enumerate() {
            widths[column] = widths[column].max(display_width(cell));
        }
    }
    widths[LABEL] = widths[LABEL].min(LABEL_NATURAL_MAX);
    widths[COMMAND] = widths[COMMAND].min(COMMAND_NATURAL_MAX);
    let fixed: usize = widths[..COMMAND].iter().sum::<usize>() + GAP.len() * (COMMAND - 1);
    let room = width.saturating_sub(fixed + GAP.len());
    let mut columns: Vec<usize> = (0..COMMAND).collect();
    if room >= widths[COMMAND] + GAP.len() + LAST_LINE_MIN {
        widths[LAST_LINE] = widths[LAST_LINE].min(room - widths[COMMAND] - GAP.len());
        columns.extend([COMMAND, LAST_LINE]);
    } else if room >= COMMAND_MIN + GAP.len() + LAST_LINE_MIN {
        widths[LAST_LINE] = widths[LAST_LINE].min(LAST_LINE_MIN);
        widths[COMMAND] = room - GAP.len() - widths[LAST_LINE];
        columns.extend([COMMAND, LAST_LINE]);
    } else if room >= COMMAND_MIN {
        widths[COMMAND] = widths[COMMAND].min(room);
        columns.push(COMMAND);
    } else {
        // Then whole columns, the least looked at first, and the label last.
        let mut total = fixed;
        for column in NARROW_DROPS {
            if total <= width {
                break;
            }
            columns.retain(|&c| c != column);
            total -= widths[column] + GAP.len();
        }
        let overflow = total.saturating_sub(width);
        widths[LABEL] = widths[LABEL].saturating_sub(overflow).max(LABEL_MIN.min(widths[LABEL]));
    }
    (columns, widths)
}

/// The table's lines, none wider than `width` columns: the last line
/// shrinks first (to 10 columns), then the command (to 10), then the last
/// line is left out, then the command, then restarts, ports, runtime,
/// memory and CPU, then the label shrinks (to 5); a line still too wide is cut.
pub fn list_table(rows: &[JobCells], width: usize, colour: bool) -> Vec<String> {
    let (columns, widths) = column_layout(rows, width);
    let line = |cells: &[String], status: Option<JobStatus>, header: bool| {
        let mut text = String::new();
        let mut shown = 0;
        for (at, &column) in columns.iter().enumerate() {
            if at > 0 {
                text.push_str(GAP);
                shown += GAP.len();
            }
            let cell = fit(&cells[column], widths[column]);
            let pad = if at + 1 == columns.len() { 0 } else { widths[column] - display_width(&cell) };
            let padded = if NUMBERS.contains(&column) && !header {
                format!("{}{cell}", " ".repeat(pad))
            } else {
                format!("{cell}{}", " ".repeat(pad))
            };
            shown += display_width(&padded);
            let painted = match (colour, status) {
                (true, Some(status)) if column == STATUS => format!("\x1b[{}m{padded}\x1b[0m", status_colour(status)),
                _ => padded,
            };
            text.push_str(&painted);
        }
        let text = if shown > width { fit_painted(&text, width) } else { text };
        let text = text.trim_end().to_string();
        if colour && header {
            format!("\x1b[1m{text}\x1b[0m")
        } else {
            text
        }
    };
    let headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    let mut lines = vec![line(&headers, None, true)];
    lines.extend(rows.iter().map(|row| line(&row.cells, Some(row.status), false)));
    lines
}

/// `list`'s table for these jobs, from what `UsageProbe::look` found.
pub fn jobs_table(
    jobs: &[Job],
    places: &HashMap<String, QueuedPlace>,
    usage: &HashMap<String, JobUsage>,
    width: usize,
    colour: bool,
) -> Vec<String> {
    let rows: Vec<JobCells> = jobs.iter().map(|job| JobCells::of(job, usage.get(&job.id), places.get(&job.id))).collect();
    list_table(&rows, width, colour)
}

/// `text` in at most `width` columns, its end replaced by `…` when cut.
pub fn fit(text: &str, width: usize) -> String {
    if display_width(text) <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut kept = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = char_width(c);
        if used + w > width - 1 {
            break;
        }
        kept.push(c);
        used += w;
    }
    kept.push('…');
    kept
}

/// `fit` for a line that may hold colour codes: they take no room, and a
/// reset ends the cut line so no colour runs on.
fn fit_painted(text: &str, width: usize) -> String {
    let mut kept = String::new();
    let mut used = 0;
    let mut chars = text.chars().peekable();
    let mut painted = false;
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            kept.push(c);
            for code in chars.by_ref() {
                kept.push(code);
                if code == 'm' {
                    break;
                }
            }
            painted = true;
            continue;
        }
        let w = char_width(c);
        if used + w > width.saturating_sub(1) {
            kept.push('…');
            break;
        }
        kept.push(c);
        used += w;
    }
    if painted {
        kept.push_str("\x1b[0m");
    }
    kept
}

/// How many terminal columns `text` takes.
pub fn display_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// Columns a character takes on a terminal: 0 for combining marks and
/// zero-width characters, 2 for East Asian wide ones and emoji, else 1.
/// (The common ranges, as wcwidth has them; exactness is not worth a table.)
pub fn char_width(c: char) -> usize {
    match c as u32 {
        0x0300..=0x036F | 0x200B..=0x200F | 0x20D0..=0x20FF | 0xFE00..=0xFE0F | 0xFE20..=0xFE2F => 0,
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1F64F
        | 0x1F900..=0x1F9FF
        | 0x20000..=0x3FFFD => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, command: &str, last: &str) -> JobCells {
        let cells = [id, "web", "running", "1m05s", "12.5", "3.4M", "0", "3000", command, last].map(str::to_string);
        JobCells { cells, status: JobStatus::Running }
    }

    #[test]
    fn the_last_line_shrinks_first_then_the_name_and_no_line_is_wider_than_the_terminal() {
        let rows = [row("web-1a2b", "npm run dev -- --port 3000", "ready in 812 ms, listening on http://localhost:3000")];
        for width in [200, 120, 100, 80, 60, 40, 20] {
            for line in list_table(&rows, width, false) {
                assert!(display_width(&line) <= width, "{width}: {line:?}");
            }
        }
        let wide = list_table(&rows, 200, false);
        assert!(wide[1].ends_with("listening on http://localhost:3000"), "{wide:?}");
        assert!(wide[1].contains("npm run dev -- --port 3000"));
        let narrower = list_table(&rows, 110, false);
        assert!(narrower[1].contains("npm run dev -- --port 3000") && narrower[1].ends_with('…'), "{narrower:?}");
        let narrower = list_table(&rows, 95, false);
        assert!(narrower[1].contains("npm run dev -- --p…  ready in …"), "the command gives way too: {narrower:?}");
        let narrow = list_table(&rows, 85, false);
        assert!(!narrow[0].contains("LAST LINE") && narrow[1].contains("npm run dev") && narrow[1].ends_with('…'), "{narrow:?}");
        let narrowest = list_table(&rows, 60, false);
        assert!(!narrowest[0].contains("COMMAND") && narrowest[1].starts_with("web-1a2b  web "), "{narrowest:?}");
        let narrowest = list_table(&rows, 40, false);
        assert_eq!(narrowest[0], "ID        LABEL  STATUS   CPU%  MEM", "{narrowest:?}");
    }

    #[test]
    fn colour_is_only_around_the_status_and_takes_no_room() {
        let rows = [row("a", "b", "c")];
        let plain = list_table(&rows, 80, false);
        let painted = list_table(&rows, 80, true);
        assert!(!plain.concat().contains('\x1b'));
        assert!(painted[1].contains("\x1b[32mrunning"), "{painted:?}");
        let stripped = painted[1].replace("\x1b[32m", "").replace("\x1b[0m", "");
        assert_eq!(stripped, plain[1]);
    }

    #[test]
    fn wide_characters_count_twice() {
        assert_eq!(display_width("日本"), 4);
        assert_eq!(fit("日本語のテキスト", 5), "日本…");
        assert_eq!(memory_text(512), "512K");
        assert_eq!(memory_text(3 * 1024 + 512), "3.5M");
        assert_eq!(memory_text(2 * 1024 * 1024), "2.0G");
    }
}
