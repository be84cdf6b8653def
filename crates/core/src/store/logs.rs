//! The job log: one writer (the supervisor) that rotates by rename, and
//! readers that take its files as one stream: backwards from the end (the
//! tail), forward from a cursor, or as it is written (the follower).
//!
//! From the bottom up: `files` (the names and identities of a log's files),
//! `start_record` (where the current file lies in everything written),
//! `stream` (the files as one stream with positions), `writer` (the
//! writing side; its rotation and retention in `writer/rotation`), and
//! `follow` and `reverse` (the reading side).

mod files;
mod follow;
mod reverse;
mod seam;
mod start_record;
mod stream;
mod writer;

pub use files::{log_files_newest_first, rotated_path, MAX_KEEP};
pub use follow::LogFollower;
pub use reverse::{tail_lines, tail_then_follow, ReverseLines, MAX_LINE_BYTES};
pub use stream::{copy_all, LogFile, LogFiles, StreamReader};
pub use writer::RotatingWriter;

#[cfg(test)]
mod tests;
