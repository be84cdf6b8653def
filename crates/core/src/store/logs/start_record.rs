//! `.output.log.start`: where the current file lies in everything ever
//! written to the log.

use super::files::FileId;
use crate::os::sys::OpenOptionsExt;
use std::fs::File;
use std::path::{Path, PathBuf};

/// `.output.log.start` beside the log: the (device, inode) of the file that
/// is `output.log` and where it starts in everything ever written to the log.
/// A position in that stream (a cursor) thus names the same byte whatever
/// rotations come after, and a reader tells how much was dropped before the
/// oldest file kept. Written in place, one fixed-size record with a checksum
/// (a rename per rotation would cost a disk flush on ext4); a torn read fails
/// the checksum and is read again.
///
/// The record is `pm1 <dev> <ino> <start> <sum1> mix=<sum2>\n`: the `pm1`
/// record of earlier versions, which they still read (their parser takes
/// the hex fields and drops the `mix=` one), followed by the stronger
/// checksum this version requires. Earlier versions wrote only the `pm1`
/// part (72 bytes), or for a while `pm2 <dev> <ino> <start> <sum2>\n`,
/// which readers of the versions before could not read; both still read.
pub(super) struct StartRecord;

/// The record this version writes.
pub(super) const RECORD_LEN: usize = 93;
/// A `pm1` record without `mix=`, or a `pm2` one (see `StartRecord`).
const EARLIER_RECORD_LEN: usize = 72;

impl StartRecord {
    pub(super) fn path(log: &Path) -> PathBuf {
        let name = log.file_name().and_then(|n| n.to_str()).unwrap_or("output.log");
        log.with_file_name(format!(".{name}.start"))
    }

    /// `fresh`: a new log, so whatever a record file held before is dropped
    /// (a record is rewritten in place over its start, never truncated).
    pub(super) fn open(log: &Path, fresh: bool) -> Option<File> {
        let mut options = crate::store::paths::options_nofollow();
        options.write(true).create(true).truncate(fresh).mode(0o600);
        options.open(Self::path(log)).ok()
    }

    /// A record file already there, emptied (read as absent until written);
    /// `None` when there is none (or it cannot be opened): a new log makes
    /// its record only when it first rotates (see `RotatingWriter`).
    pub(super) fn open_existing_emptied(log: &Path) -> Option<File> {
        let mut options = crate::store::paths::options_nofollow();
        options.write(true).truncate(true);
        options.open(Self::path(log)).ok()
    }

    /// The checksum of format `pm1`, still read (a supervisor of an earlier
    /// version may be writing the log). It misses some one-bit changes (the
    /// `| 1` hides bit 0 of the product): a flipped bit there went unseen.
    pub(super) fn sum_v1(id: FileId, start: u64) -> u64 {
        (id.0 ^ id.1.rotate_left(21) ^ start.rotate_left(42)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }

    /// The checksum of format `pm2`: each field goes through a bijective
    /// mix (splitmix64's finaliser) before the next, so any change of one
    /// field changes the sum.
    pub(super) fn sum_v2(id: FileId, start: u64) -> u64 {
        fn mix(mut z: u64) -> u64 {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        mix(mix(mix(0x9E37_79B9_7F4A_7C15 ^ id.0) ^ id.1) ^ start)
    }

    pub(super) fn write(record: &File, id: FileId, start: u64) {
        use crate::os::sys::FileExt;
        let text = format!(
            "pm1 {:016x} {:016x} {:016x} {:016x} mix={:016x}\n",
            id.0,
            id.1,
            start,
            Self::sum_v1(id, start),
            Self::sum_v2(id, start)
        );
        debug_assert_eq!(text.len(), RECORD_LEN);
        if record.write_all_at(text.as_bytes(), 0).is_err() {
            return;
        }
        // Cut back after the record is written, never before: a reader sees
        // either the size it reported before or this record whole. A file
        // grown past the record (or an earlier, shorter one) heals here.
        if record.metadata().is_ok_and(|m| m.len() != RECORD_LEN as u64) {
            let _ = record.set_len(RECORD_LEN as u64);
        }
    }

    /// What the record says. A record is exactly `RECORD_LEN` bytes and only
    /// that much is ever read: a file of any other size is not one of ours.
    /// A torn read (the writer rewrites it in place) fails the checksum and
    /// is read again; one that stays wrong is corrupt, said so, never used.
    pub(super) fn read(log: &Path) -> Record {
        let path = Self::path(log);
        let file = match crate::store::paths::open_read(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Record::Absent,
            Err(e) => return Record::Corrupt(format!("{} cannot be read: {e}", path.display())),
        };
        let mut problem = String::new();
        // Rewritten in place, never replaced: the file opened stays the record.
        for _ in 0..100 {
            let size = file.metadata().map_or(0, |m| m.len());
            if size == 0 {
                // Not written yet: a writer creates it empty, then writes it
                // (or could not, on a full disk). The oldest file then starts
                // at 0, which for a new log is true.
                return Record::Absent;
            }
            let mut text = [0u8; RECORD_LEN];
            let read = read_prefix(&file, &mut text);
            if size > RECORD_LEN as u64 {
                // The writer cuts it back at its next rotation (see `write`);
                // until then it is not one of ours.
                problem = format!("it is {size} bytes; a start record is {RECORD_LEN}");
            } else {
                match Self::parse(&text[..read]) {
                    Some(found) => return Record::Valid(found),
                    None if read != RECORD_LEN && read != EARLIER_RECORD_LEN => {
                        problem = format!("it is {read} bytes; a start record is {RECORD_LEN}")
                    }
                    None => problem = "its checksum does not match what it says".to_string(),
                }
            }
            std::thread::yield_now();
        }
        Record::Corrupt(format!(
            "the log's start record {} is corrupt ({problem}): where the kept lines lie in everything written is unknown, \
             so no cursor can be placed until the job's next log rotation rewrites it",
            path.display()
        ))
    }

    /// The whole file (at most `RECORD_LEN` bytes): one record, or an
    /// earlier version's shorter `pm1` record written over this version's,
    /// which leaves the `mix=` field's line behind it.
    pub(super) fn parse(text: &[u8]) -> Option<(FileId, u64)> {
        let text = std::str::from_utf8(text).ok()?;
        let (line, after) = text.split_once('\n')?;
        let found = Self::parse_line(line)?;
        let left_behind = after.strip_prefix("mix=").and_then(|sum| sum.strip_suffix('\n')).is_some_and(|sum| hex_number(sum).is_some());
        let whole = after.is_empty() || (line.len() + 1 == EARLIER_RECORD_LEN && left_behind);
        whole.then_some(found)
    }

    fn parse_line(line: &str) -> Option<(FileId, u64)> {
        let (sum_of, fields): (fn(FileId, u64) -> u64, &str) = match line.split_at_checked(4)? {
            ("pm2 ", fields) => (Self::sum_v2, fields),
            ("pm1 ", fields) => (Self::sum_v1, fields),
            _ => return None,
        };
        let mut fields = fields.split(' ');
        let mut number = || fields.next().and_then(hex_number);
        let (dev, ino, start, sum) = (number()?, number()?, number()?, number()?);
        if sum_of((dev, ino), start) != sum {
            return None;
        }
        let strong = match fields.next() {
            None => true,
            // Required when there: the `pm1` sum misses some one-bit changes.
            Some(mix) if line.starts_with("pm1 ") => {
                mix.strip_prefix("mix=").and_then(hex_number).is_some_and(|sum| sum == Self::sum_v2((dev, ino), start))
            }
            Some(_) => false,
        };
        (strong && fields.next().is_none()).then_some(((dev, ino), start))
    }
}

/// A number of a start record: 16 hex digits (`from_str_radix` alone
/// would take a sign or fewer digits).
fn hex_number(field: &str) -> Option<u64> {
    let digits = field.len() == 16 && field.bytes().all(|b| b.is_ascii_hexdigit());
    digits.then(|| u64::from_str_radix(field, 16).ok()).flatten()
}

/// What a log's start record says.
pub(super) enum Record {
    /// There is none: a log written before the record existed.
    Absent,
    Valid((FileId, u64)),
    /// Why it cannot be used.
    Corrupt(String),
}

impl Record {
    pub(super) fn valid(&self) -> Option<(FileId, u64)> {
        match self {
            Record::Valid(found) => Some(*found),
            Record::Absent | Record::Corrupt(_) => None,
        }
    }
}

/// Reads up to `buf.len()` bytes from the start of `file`; how many it got.
fn read_prefix(file: &File, buf: &mut [u8]) -> usize {
    use crate::os::sys::FileExt;
    let mut read = 0;
    while read < buf.len() {
        match file.read_at(&mut buf[read..], read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    read
}
