//! Arguments, paths and environment values as Unix has them: bytes, which
//! need not be UTF-8 (`ls $'caf\xe9'`, a directory named in Latin-1). They
//! are kept as they are, written to records without loss, and shown with
//! the bytes that are no UTF-8 written out (`caf\xe9`).
//!
//! In a record (`jobs.json`, `job.json`) every such value stays a JSON
//! string, as format 1 has it, so that any run-bg sharing the home reads the
//! record: an earlier build that finds an array there sets the whole of
//! `jobs.json` aside as corrupt and drops the job. A value that is no UTF-8
//! is that string written out (`caf\xe9`), and its exact bytes go in a side
//! field only this build reads (`argv_bytes`, `cwd_bytes`, `env_bytes`,
//! `log_path_bytes`), written only for such a value. A queued job's
//! `spec.json` keeps its environment as arrays of byte values, as every
//! build has.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The bytes of an OS string: Unix's own bytes; on Windows its WTF-8, which
/// is UTF-8 for any text that is valid Unicode.
pub fn bytes_of(value: &OsStr) -> &[u8] {
    value.as_encoded_bytes()
}

/// An OS string from bytes `bytes_of` gave: any bytes on Unix.
#[cfg(unix)]
pub fn from_bytes(bytes: Vec<u8>) -> OsString {
    std::os::unix::ffi::OsStringExt::from_vec(bytes)
}

/// An OS string from bytes: on Windows only text (WTF-8 from another
/// Windows process is not trusted), anything else with replacement.
#[cfg(windows)]
pub fn from_bytes(bytes: Vec<u8>) -> OsString {
    match String::from_utf8(bytes) {
        Ok(text) => OsString::from(text),
        Err(e) => OsString::from(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

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
            None => Stored::Bytes(Cow::Borrowed(bytes_of(value))),
        }
    }

    fn into_os(self) -> OsString {
        match self {
            Stored::Text(text) => OsString::from(text.into_owned()),
            Stored::Bytes(bytes) => from_bytes(bytes.into_owned()),
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
    for chunk in bytes_of(value).utf8_chunks() {
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

/// serde `with` for a `PathBuf` field of what one process of this build
/// hands another (the supervisor's spec on its stdin); records, which other
/// builds read, keep text and side fields instead (`to_record`).
pub mod path {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        Stored::of(value.as_os_str()).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
        Stored::deserialize(deserializer).map(|stored| PathBuf::from(stored.into_os()))
    }
}

/// `value` as a record keeps it: the text every reader takes (written out
/// when the bytes are no UTF-8) and, only then, the exact bytes beside it.
pub fn to_record(value: &OsStr) -> (String, Option<Vec<u8>>) {
    match value.to_str() {
        Some(text) => (text.to_string(), None),
        None => (escaped(value).into_owned(), Some(bytes_of(value).to_vec())),
    }
}

/// The value a record holds: its exact bytes when it keeps them and they are
/// what `text` shows; else `text` (a record written before bytes were kept,
/// or rewritten by an earlier build, which drops the side fields it does not
/// know).
pub fn from_record(text: String, bytes: Option<Vec<u8>>) -> OsString {
    match bytes {
        Some(bytes) if escaped(from_bytes(bytes.clone()).as_os_str()) == text => from_bytes(bytes),
        _ => OsString::from(text),
    }
}

/// The side field of an argv: at each word's place, its bytes when it is no
/// UTF-8, else `null`.
pub type WordBytes = Vec<Option<Vec<u8>>>;

/// An argv as a record keeps it: its words as text, and, when some word is
/// no UTF-8, the bytes of each such word at its place.
pub fn words_to_record(values: &[OsString]) -> (Vec<String>, Option<WordBytes>) {
    let (texts, bytes): (Vec<String>, Vec<Option<Vec<u8>>>) = values.iter().map(|v| to_record(v)).unzip();
    let any_bytes = bytes.iter().any(Option::is_some);
    (texts, any_bytes.then_some(bytes))
}

/// The argv a record holds (see `from_record`).
pub fn words_from_record(texts: Vec<String>, bytes: Option<WordBytes>) -> Vec<OsString> {
    let mut bytes = bytes.filter(|b| b.len() == texts.len()).unwrap_or_default().into_iter();
    texts.into_iter().map(|text| from_record(text, bytes.next().flatten())).collect()
}

/// Environment variables as a record keeps them: names are text (JSON
/// object keys), values text, and the exact bytes of the values that are no
/// UTF-8 by name beside them.
pub fn env_to_record(values: &BTreeMap<String, OsString>) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u8>>) {
    let mut texts = BTreeMap::new();
    let mut bytes = BTreeMap::new();
    for (name, value) in values {
        let (text, exact) = to_record(value);
        texts.insert(name.clone(), text);
        if let Some(exact) = exact {
            bytes.insert(name.clone(), exact);
        }
    }
    (texts, bytes)
}

/// The environment variables a record holds (see `from_record`).
pub fn env_from_record(texts: BTreeMap<String, String>, mut bytes: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, OsString> {
    texts.into_iter().map(|(name, text)| {
        let exact = bytes.remove(&name);
        (name, from_record(text, exact))
    }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record fields these helpers fill, as `JobRecord` has them.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Record {
        argv: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argv_bytes: Option<WordBytes>,
        cwd: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd_bytes: Option<Vec<u8>>,
        env: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env_bytes: BTreeMap<String, Vec<u8>>,
    }

    /// What a record holds, as a job has it.
    #[derive(PartialEq, Debug)]
    struct Values {
        argv: Vec<OsString>,
        cwd: OsString,
        env: BTreeMap<String, OsString>,
    }

    fn write(values: &Values) -> String {
        let (argv, argv_bytes) = words_to_record(&values.argv);
        let (cwd, cwd_bytes) = to_record(&values.cwd);
        let (env, env_bytes) = env_to_record(&values.env);
        serde_json::to_string(&Record { argv, argv_bytes, cwd, cwd_bytes, env, env_bytes }).unwrap()
    }

    fn read(json: &str) -> Values {
        let r: Record = serde_json::from_str(json).unwrap();
        Values { argv: words_from_record(r.argv, r.argv_bytes), cwd: from_record(r.cwd, r.cwd_bytes), env: env_from_record(r.env, r.env_bytes) }
    }

    #[cfg(unix)]
    fn latin1(text: &[u8]) -> OsString {
        from_bytes(text.to_vec())
    }

    #[test]
    fn utf8_values_are_written_as_plain_strings_as_before() {
        let values = Values {
            argv: vec!["ls".into(), "café".into()],
            cwd: "/tmp/café".into(),
            env: [("A".to_string(), OsString::from("b"))].into(),
        };
        let json = write(&values);
        assert_eq!(json, r#"{"argv":["ls","café"],"cwd":"/tmp/café","env":{"A":"b"}}"#);
        assert_eq!(read(&json), values);
    }

    // Unix paths and values are bytes; Windows's are UTF-16 text.
    #[cfg(unix)]
    #[test]
    fn other_bytes_are_written_out_as_text_with_their_bytes_beside_and_read_back_exactly() {
        let values = Values {
            argv: vec!["ls".into(), latin1(b"caf\xe9")],
            cwd: latin1(b"/tmp/caf\xe9"),
            env: [("NAME".to_string(), latin1(b"\xff\xfe")), ("PLAIN".to_string(), "p".into())].into(),
        };
        let json = write(&values);
        assert_eq!(
            json,
            r#"{"argv":["ls","caf\\xe9"],"argv_bytes":[null,[99,97,102,233]],"cwd":"/tmp/caf\\xe9","cwd_bytes":[47,116,109,112,47,99,97,102,233],"env":{"NAME":"\\xff\\xfe","PLAIN":"p"},"env_bytes":{"NAME":[255,254]}}"#
        );
        assert_eq!(read(&json), values);
    }

    /// A build before bytes were kept reads strings where these are, and
    /// rewrites a record without the side fields it does not know.
    #[test]
    fn a_record_without_its_side_fields_or_edited_since_reads_as_its_text() {
        assert_eq!(read(r#"{"argv":["ls","caf\\xe9"],"cwd":"/tmp","env":{"V":"\\xff"}}"#).argv[1], OsString::from("caf\\xe9"));
        let edited = read(r#"{"argv":["ls","other"],"argv_bytes":[null,[99,97,102,233]],"cwd":"/x","cwd_bytes":[47,121,233],"env":{"V":"w"},"env_bytes":{"V":[255]}}"#);
        assert_eq!(edited, Values { argv: vec!["ls".into(), "other".into()], cwd: "/x".into(), env: [("V".to_string(), OsString::from("w"))].into() });
        let cut = read(r#"{"argv":["caf\\xe9"],"argv_bytes":[null,[233]],"cwd":"/","env":{}}"#);
        assert_eq!(cut.argv, [OsString::from("caf\\xe9")], "side bytes of another length are not matched up");
    }

    // Unix paths and values are bytes; Windows's are UTF-16 text.
    #[cfg(unix)]
    #[test]
    fn bytes_that_are_no_utf8_are_shown_written_out() {
        assert_eq!(escaped(OsStr::new("café")), "café");
        assert_eq!(escaped(&latin1(b"caf\xe9")), "caf\\xe9");
        assert_eq!(escaped(&latin1(b"\xc3\xa9\xc3")), "é\\xc3", "a cut character is its bytes");
    }
}
