//! What a job is, independent of any process or file: records, statuses, identities, ids, durations, errors, text, and the protocol our processes speak.

pub mod clock;
pub mod duration;
pub mod error;
pub mod ids;
pub mod job;
pub mod option_value;
pub mod os_text;
pub mod protocol;
pub mod text;
pub mod signals;
