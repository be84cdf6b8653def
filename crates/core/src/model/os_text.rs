//! Arguments, paths and environment values as Unix has them: bytes, which
//! need not be UTF-8 (`ls $'caf\xe9'`, a directory named in Latin-1). They
//! are kept as they are, written to records without loss, and shown with
//! the bytes that are no UTF-8 written out (`caf\xe9`).
//!
//! In a record such a value is a JSON string when it is UTF-8, so records of
//! UTF-8 jobs read and write as before, and otherwise the array of its byte
//! values (as a queued job's `spec.json` keeps its environment).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// One value as written: text, or its bytes when they are not UTF-8.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Stored<'a> {
    Text(Cow<'a, str>),
    Bytes(Cow<'a, [u8]>),
}

impl<'a> Stored<'a> {
    fn of(value: &'a OsStr) -> Stored<'a> {
        match value.to_str() {
            Some(text) => Stored::Text(Cow::Borrowed(text)),
            None => Stored::Bytes(Cow::Borrowed(value.as_bytes())),
        }
    }

    fn into_os(self) -> OsString {
        match self {
            Stored::Text(text) => OsString::from(text.into_owned()),
            Stored::Bytes(bytes) => OsString::from_vec(bytes.into_owned()),
        }
    }
}

/// `value` to show: as it is when UTF-8, else each byte that is no part of a
/// UTF-8 character as `\xNN` (`caf\xe9`). Control characters are left to
/// `text::visible`, as for any other text.
pub fn escaped(value: &OsStr) -> Cow<'_, str> {
    if let Some(text) = value.to_str() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for chunk in value.as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    Cow::Owned(out)
}

/// serde `with` for an `OsString` field.
pub mod word {
    use super::*;

    pub fn serialize<S: Serializer>(value: &OsString, serializer: S) -> Result<S::Ok, S::Error> {
        Stored::of(value).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<OsString, D::Error> {
        Stored::deserialize(deserializer).map(Stored::into_os)
    }
}

/// serde `with` for a `PathBuf` field.
pub mod path {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        Stored::of(value.as_os_str()).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
        Stored::deserialize(deserializer).map(|stored| PathBuf::from(stored.into_os()))
    }
}

/// serde `with` for a `Vec<OsString>` field (an argv).
pub mod words {
    use super::*;

    pub fn serialize<S: Serializer>(values: &[OsString], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|v| Stored::of(v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<OsString>, D::Error> {
        let stored: Vec<Stored> = Vec::deserialize(deserializer)?;
        Ok(stored.into_iter().map(Stored::into_os).collect())
    }
}

/// serde `with` for environment variables: names are text (JSON object
/// keys), values any bytes.
pub mod env {
    use super::*;

    pub fn serialize<S: Serializer>(values: &BTreeMap<String, OsString>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(values.iter().map(|(k, v)| (k, Stored::of(v))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, OsString>, D::Error> {
        let stored: BTreeMap<String, Stored> = BTreeMap::deserialize(deserializer)?;
        Ok(stored.into_iter().map(|(k, v)| (k, v.into_os())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Record {
        #[serde(with = "words")]
        argv: Vec<OsString>,
        #[serde(with = "path")]
        cwd: PathBuf,
        #[serde(with = "env")]
        env: BTreeMap<String, OsString>,
    }

    fn latin1(text: &[u8]) -> OsString {
        OsString::from_vec(text.to_vec())
    }

    #[test]
    fn utf8_values_are_written_as_plain_strings_as_before() {
        let record = Record {
            argv: vec!["ls".into(), "café".into()],
            cwd: "/tmp/café".into(),
            env: [("A".to_string(), OsString::from("b"))].into(),
        };
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(json, r#"{"argv":["ls","café"],"cwd":"/tmp/café","env":{"A":"b"}}"#);
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), record);
    }

    #[test]
    fn other_bytes_are_written_as_their_byte_values_and_read_back_exactly() {
        let record = Record {
            argv: vec!["ls".into(), latin1(b"caf\xe9")],
            cwd: PathBuf::from(latin1(b"/tmp/caf\xe9")),
            env: [("NAME".to_string(), latin1(b"\xff\xfe"))].into(),
        };
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(json, r#"{"argv":["ls",[99,97,102,233]],"cwd":[47,116,109,112,47,99,97,102,233],"env":{"NAME":[255,254]}}"#);
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), record);
    }

    #[test]
    fn bytes_that_are_no_utf8_are_shown_written_out() {
        assert_eq!(escaped(OsStr::new("café")), "café");
        assert_eq!(escaped(&latin1(b"caf\xe9")), "caf\\xe9");
        assert_eq!(escaped(&latin1(b"\xc3\xa9\xc3")), "é\\xc3", "a cut character is its bytes");
    }
}
