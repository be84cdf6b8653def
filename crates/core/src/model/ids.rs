//! Job ids: how they are checked (file-name safe, at most 64 bytes) and made
//! (the label's words and a random suffix).

use crate::{Error, Result};
use std::io::Read;

pub const ID_RULE: &str = "1 to 64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit";

/// A job id is used as a directory name, so anything outside
/// `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$` (path separators, `..`, empty, too long) is refused.
pub fn validate_job_id(id: &str) -> Result<()> {
    let bytes = id.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        let shown: String = id.chars().take(40).collect();
        let more = if id.chars().count() > 40 { "…" } else { "" };
        Err(Error::Usage(format!("invalid job id `{shown}{more}`: a job id is {ID_RULE}")))
    }
}

/// The label part of a new id: the label squeezed into the id alphabet and cut
/// so that `<prefix>-<6 hex>` stays within 64 characters.
pub fn id_prefix_from_label(label: &str) -> String {
    let mut prefix = String::new();
    for c in label.chars() {
        let mapped = if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' { c } else { '-' };
        if mapped == '-' && prefix.ends_with('-') {
            continue;
        }
        prefix.push(mapped);
        if prefix.len() >= 40 {
            break;
        }
    }
    let trimmed = prefix.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()).trim_end_matches('-');
    if trimmed.is_empty() { "job".to_string() } else { trimmed.to_string() }
}

pub fn random_suffix() -> String {
    let mut bytes = [0u8; 3];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_ok();
    if !filled {
        // Fallback only matters where /dev/urandom is missing; uniqueness is
        // still enforced by creating the job directory exclusively.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ std::process::id().rotate_left(16);
        bytes.copy_from_slice(&nanos.to_le_bytes()[..3]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_spec_form() {
        for id in ["a", "npm-install-3f2a", "A.b_c-9", &"x".repeat(64)] {
            validate_job_id(id).unwrap();
        }
    }

    #[test]
    fn refuses_paths_and_oversize() {
        for id in ["", "../../etc", "-x", ".hidden", "a/b", "a b", &"x".repeat(65), &"y".repeat(200)] {
            let err = validate_job_id(id).unwrap_err().to_string();
            assert!(err.contains("invalid job id"), "{id}: {err}");
        }
    }

    #[test]
    fn prefixes_are_valid_ids() {
        for label in ["npm install", "../../etc", "", "日本語", "--x--", &"long".repeat(40)] {
            let id = format!("{}-{}", id_prefix_from_label(label), random_suffix());
            validate_job_id(&id).unwrap();
        }
        assert_eq!(id_prefix_from_label("npm install"), "npm-install");
    }
}
