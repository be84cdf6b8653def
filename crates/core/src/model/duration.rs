//! Durations as people write them (`500ms`, `30s`, `2h`) and as we show them.

use crate::{Error, Result};

/// The longest duration accepted anywhere (a timeout, a grace period, a wait,
/// `--older-than`): a year. Anything longer is a typo or an overflow waiting
/// to happen, not a plan.
pub const MAX_DURATION_MS: u64 = 365 * 86_400_000;

/// Parses `500ms`, `90s`, `10m`, `2h`, `1d` and sums such as `1h30m`, up to
/// `MAX_DURATION_MS`. A bare number is refused: its unit would be a guess;
/// but not a bare `0`, which is zero in every unit (where zero is refused,
/// the caller then says so, not that a unit is missing).
pub fn parse_duration_ms(text: &str) -> Result<u64> {
    let bad = || {
        Error::Usage(format!(
            "bad duration `{text}`: give a number with a unit (ms, s, m, h, d), e.g. 500ms, 90s, 10m, 2h, 1h30m"
        ))
    };
    let text_trimmed = text.trim();
    if text_trimmed.is_empty() {
        return Err(bad());
    }
    if text_trimmed.bytes().all(|b| b == b'0') {
        return Ok(0);
    }
    let mut total: u64 = 0;
    let mut rest = text_trimmed;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        // Only digits, so a parse error is an overflow: too long, as said below.
        let value: u64 = rest[..digits].parse().unwrap_or(u64::MAX);
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total = value.checked_mul(unit_ms).and_then(|v| total.checked_add(v)).unwrap_or(u64::MAX);
    }
    if total > MAX_DURATION_MS {
        return Err(Error::Usage(format!(
            "bad duration `{text}`: longer than a year; give at most 365d (8760h), e.g. 90s, 10m, 2h, 1h30m"
        )));
    }
    Ok(total)
}

/// Compact human form: `850ms`, `12.3s`, `2m13s`, `2h13m`, `3d4h`.
pub fn format_duration_ms(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let secs = ms / 1000;
    if secs < 3600 {
        return format!("{}m{:02}s", secs / 60, secs % 60);
    }
    if secs < 86_400 {
        return format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60);
    }
    format!("{}d{}h", secs / 86_400, (secs % 86_400) / 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse_duration_ms("500ms").unwrap(), 500);
        assert_eq!(parse_duration_ms("90s").unwrap(), 90_000);
        assert_eq!(parse_duration_ms("10m").unwrap(), 600_000);
        assert_eq!(parse_duration_ms("2h").unwrap(), 7_200_000);
        assert_eq!(parse_duration_ms("1h30m").unwrap(), 5_400_000);
    }

    #[test]
    fn a_bare_zero_is_zero_in_any_unit() {
        for zero in ["0", "00", " 0 "] {
            assert_eq!(parse_duration_ms(zero).unwrap(), 0, "{zero}");
        }
    }

    #[test]
    fn refuses_bare_numbers_and_junk() {
        for bad in ["", "5", "10", "s", "5x", "-5s", "-0", "1.5s", "99999999999999999999d"] {
            let err = parse_duration_ms(bad).unwrap_err().to_string();
            assert!(err.contains("bad duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn refuses_durations_beyond_a_year() {
        assert_eq!(parse_duration_ms("365d").unwrap(), MAX_DURATION_MS);
        assert_eq!(parse_duration_ms("8760h").unwrap(), MAX_DURATION_MS);
        for bad in ["99999999999h", "366d", "8760h1ms", "5000000000000h", "99999999999999999999d"] {
            let err = parse_duration_ms(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("bad duration `{bad}`")) && err.contains("at most 365d"), "{bad}: {err}");
        }
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_duration_ms(850), "850ms");
        assert_eq!(format_duration_ms(12_345), "12.3s");
        assert_eq!(format_duration_ms(133_000), "2m13s");
        assert_eq!(format_duration_ms(7_980_000), "2h13m");
    }
}
