//! How an option's value arrives from a face: typed from JSON (the JS API,
//! and through it MCP) or as text from the command line, still to be parsed;
//! and the serde readers that refuse a bad JSON value saying what is accepted.
//!
//! Command-line text is parsed after clap, not by it, so that its errors keep
//! the CLI's own wording (`run-bg: --timeout: bad duration …`) instead of
//! clap's `invalid value … for '--timeout <DUR>'`.

use crate::model::duration::{parse_duration_ms, MAX_DURATION_MS};
use crate::{Error, Result};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// An option's value as a face gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum Given<T> {
    /// From JSON: already typed and checked by its serde reader.
    Value(T),
    /// From the command line: parsed by `resolve`, which names the option.
    Text(String),
}

/// A value that can be written as command-line text (`90s`, `{"a":1}`).
pub trait FromText: Sized {
    /// `name` gives the option as the face spells it (`--timeout`), asked
    /// for only to word a refusal.
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self>;
}

impl<T: FromText> Given<T> {
    pub fn resolve(self, name: &dyn Fn() -> String) -> Result<T> {
        match self {
            Given::Value(value) => Ok(value),
            Given::Text(text) => T::from_text(name, &text),
        }
    }
}

/// clap's reading: any UTF-8 text (what clap demanded of these options before).
impl<T> From<String> for Given<T> {
    fn from(text: String) -> Self {
        Given::Text(text)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Given<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        T::deserialize(deserializer).map(Given::Value)
    }
}

#[cfg(feature = "schema")]
impl<T: schemars::JsonSchema> schemars::JsonSchema for Given<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// A span of milliseconds, at least `MIN`, at most a year: a number in JSON
/// (fractions cut), a duration such as `90s` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis<const MIN: u64>(pub u64);

impl<const MIN: u64> FromText for Millis<MIN> {
    /// The text's lower bound is the caller's to check: `--timeout 0s` is
    /// refused where the request is checked, with the same words for every face.
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self> {
        parse_duration_ms(text).map(Millis).map_err(|e| Error::Usage(format!("{}: {e}", name())))
    }
}

impl<'de, const MIN: u64> Deserialize<'de> for Millis<MIN> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let what = format!("a number of milliseconds >= {MIN}, at most {MAX_DURATION_MS} (365 days)");
        let ms = deserializer.deserialize_any(NumberIn { what, min: MIN as f64, max: MAX_DURATION_MS as f64, whole: false })?;
        Ok(Millis(ms as u64))
    }
}

#[cfg(feature = "schema")]
impl<const MIN: u64> schemars::JsonSchema for Millis<MIN> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Millis".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "integer", "minimum": MIN, "maximum": MAX_DURATION_MS })
    }
}

/// Arbitrary JSON data (a job's `context`): in JSON as it is, on the command
/// line as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonData(pub serde_json::Value);

impl FromText for JsonData {
    fn from_text(name: &dyn Fn() -> String, text: &str) -> Result<Self> {
        serde_json::from_str(text)
            .map(JsonData)
            .map_err(|e| Error::Usage(format!("bad {}: not valid JSON ({e})", name())))
    }
}

const JSON_DATA: &str = "JSON data (objects, arrays, strings, finite numbers, booleans, null)";

impl<'de> Deserialize<'de> for JsonData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor).map(JsonData)
    }
}

/// serde_json's own visitor, but saying what it accepts in the options' words
/// and refusing NaN and the infinities, which JSON cannot hold.
struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = serde_json::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(JSON_DATA)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Self::Value, E> {
        serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::invalid_value(de::Unexpected::Float(v), &self))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        JsonData::deserialize(d).map(|data| data.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(JsonData(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(items.into())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut fields = serde_json::Map::new();
        while let Some((key, JsonData(value))) = map.next_entry::<String, JsonData>()? {
            fields.insert(key, value);
        }
        Ok(fields.into())
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for JsonData {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonData".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!(true)
    }
}

/// A number from `min` to `max` (whole when `whole`), refused in `what`'s words.
struct NumberIn {
    what: String,
    min: f64,
    max: f64,
    whole: bool,
}

impl NumberIn {
    fn check<E: de::Error>(&self, n: f64, unexpected: de::Unexpected) -> std::result::Result<f64, E> {
        let fits = n.is_finite() && n >= self.min && n <= self.max && (!self.whole || n.fract() == 0.0);
        if fits {
            return Ok(n);
        }
        // Over the bound a text that does not name it ("a whole number of
        // lines >= 0" of 2^53) would read as a contradiction: it names it.
        let bound = format!("{}", self.max);
        if n > self.max && n.is_finite() && !self.what.contains(&bound) {
            let said = NumberIn { what: format!("{}, at most {bound}", self.what), ..*self };
            return Err(E::invalid_value(unexpected, &said));
        }
        Err(E::invalid_value(unexpected, self))
    }
}

impl<'de> Visitor<'de> for NumberIn {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.what)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<f64, E> {
        self.check(v as f64, de::Unexpected::Signed(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<f64, E> {
        self.check(v as f64, de::Unexpected::Unsigned(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<f64, E> {
        self.check(v, de::Unexpected::Float(v))
    }
}

/// The field names `T`'s serde reading accepts, in their declared order
/// (what a JS caller is told when a name is misspelt, and the order in which
/// the options are documented): serde hands them to the deserializer it asks
/// for a struct, here one that only takes note of them.
pub fn serde_fields<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    use std::cell::Cell;
    struct Noting<'a>(&'a Cell<&'static [&'static str]>);
    impl<'de> Deserializer<'de> for Noting<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> std::result::Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            self.0.set(fields);
            Err(de::Error::custom("noted"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let noted = Cell::new(&[][..]);
    let _ = T::deserialize(Noting(&noted));
    noted.get()
}

/// Beyond 2^53 a double (every JS number) no longer holds every whole number.
pub const SAFE_WHOLE: f64 = 9_007_199_254_740_991.0;

/// serde readers for option fields whose JSON value has more to say when
/// refused than serde's own ("a whole number of restarts", not "u32").
/// Each reads a value that was given: absence (and JSON null) is the
/// field's `#[serde(default)]`.
pub mod read {
    use super::*;

    fn whole<'de, D: Deserializer<'de>>(d: D, what: String, min: f64, max: f64) -> std::result::Result<f64, D::Error> {
        d.deserialize_any(NumberIn { what, min, max, whole: true })
    }

    /// A whole number >= 0 a double holds exactly (`lines`), refused in `what`'s words.
    pub fn whole_number<'de, D: Deserializer<'de>>(d: D, what: &str) -> std::result::Result<f64, D::Error> {
        whole(d, what.into(), 0.0, SAFE_WHOLE)
    }

    /// A whole number >= 1 a double holds exactly (`fromLine`: lines are counted from 1), refused in `what`'s words.
    pub fn whole_number_from_one<'de, D: Deserializer<'de>>(d: D, what: &str) -> std::result::Result<f64, D::Error> {
        whole(d, what.into(), 1.0, SAFE_WHOLE)
    }

    /// Any finite number >= 0, fractions kept (`memoryThresholdMb`), refused in `what`'s words.
    pub fn amount<'de, D: Deserializer<'de>>(d: D, what: &str) -> std::result::Result<f64, D::Error> {
        d.deserialize_any(NumberIn { what: what.into(), min: 0.0, max: f64::MAX, whole: false })
    }

    pub fn restarts<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u32>, D::Error> {
        let what = format!("a whole number of restarts from 0 to {}", u32::MAX);
        whole(d, what, 0.0, u32::MAX as f64).map(|n| Some(n as u32))
    }

    /// Which pids name a live process is the request's check (`tie_to`).
    pub fn pid<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u32>, D::Error> {
        whole(d, "a pid (a whole number)".into(), 0.0, u32::MAX as f64).map(|n| Some(n as u32))
    }

    pub fn port<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u16>, D::Error> {
        whole(d, "a port from 1 to 65535".into(), 1.0, 65535.0).map(|n| Some(n as u16))
    }

    /// Any whole number a double holds exactly, negative too (`priority`).
    pub fn priority<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
        whole(d, "a whole number (higher starts first)".into(), -SAFE_WHOLE, SAFE_WHOLE).map(|n| Some(n as i64))
    }

    /// A whole number within `i32`, its own bounds checked with the request's.
    pub fn int32<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i32>, D::Error> {
        whole(d, "a whole number".into(), i32::MIN as f64, i32::MAX as f64).map(|n| Some(n as i32))
    }

    struct Flag;
    impl<'de> Visitor<'de> for Flag {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("true or false")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<bool, E> {
            Ok(v)
        }
    }

    pub fn flag<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_any(Flag)
    }

    /// A path given as text (the JS API's strings; the CLI takes any bytes):
    /// serde's own reading of a `PathBuf` would ask for "a path string".
    /// A path given as text; an empty one is refused (it names no
    /// directory: a `cwd: ''` ran the job in the caller's directory).
    pub fn path<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<std::path::PathBuf>, D::Error> {
        d.deserialize_string(PathText).map(Some)
    }

    /// Refused inside the visitor, where the reader names the option.
    struct PathText;
    impl Visitor<'_> for PathText {
        type Value = std::path::PathBuf;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a path that is not empty")
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> std::result::Result<Self::Value, E> {
            if text.is_empty() {
                return Err(E::invalid_value(serde::de::Unexpected::Str(text), &self));
            }
            Ok(text.into())
        }
    }

    struct Texts;
    impl<'de> Visitor<'de> for Texts {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of strings")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Vec<String>, A::Error> {
            let mut texts = Vec::new();
            while let Some(text) = seq.next_element::<String>()? {
                texts.push(text);
            }
            Ok(texts)
        }
    }

    pub fn texts<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
        d.deserialize_any(Texts)
    }

    struct TextMap;
    impl<'de> Visitor<'de> for TextMap {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of strings, e.g. { NODE_ENV: 'test' }")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
            let mut pairs = Vec::new();
            while let Some(pair) = map.next_entry::<String, String>()? {
                pairs.push(pair);
            }
            Ok(pairs)
        }
    }

    /// An object whose values are strings (`env`), in its own order.
    pub fn text_map<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<(String, String)>, D::Error> {
        d.deserialize_any(TextMap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_text_is_parsed_naming_the_option_as_the_face_spells_it() {
        let ms: Given<Millis<1>> = Given::Text("1h30m".into());
        let name = |flag: &'static str| move || flag.to_string();
        assert_eq!(ms.resolve(&name("--timeout")).unwrap(), Millis(5_400_000));
        let bad: Given<Millis<1>> = Given::Text("soon".into());
        assert!(bad.resolve(&name("--timeout")).unwrap_err().to_string().starts_with("--timeout: bad duration `soon`"));
        let json: Given<JsonData> = Given::Text("{bad".into());
        assert!(json.resolve(&name("--context")).unwrap_err().to_string().starts_with("bad --context: not valid JSON"));
    }

    #[test]
    fn json_values_are_read_within_their_bounds() {
        let read = |text: &str| serde_json::from_str::<Given<Millis<1>>>(text);
        assert_eq!(read("1500.7").unwrap(), Given::Value(Millis(1500)));
        for bad in ["0", "-5", "31536000001", "\"5s\""] {
            let error = read(bad).unwrap_err().to_string();
            assert!(error.contains("a number of milliseconds >= 1, at most 31536000000 (365 days)"), "{bad}: {error}");
        }
        let context: JsonData = serde_json::from_str(r#"{"a":[1,"x",null,true]}"#).unwrap();
        assert_eq!(context.0, serde_json::json!({"a": [1, "x", null, true]}));
    }
}
