//! serde reading of JS values, for option types defined in the core
//! (`StartOptions`, the verbs' options). napi's own serde reader (`napi::de`) turns 1e300 into
//! i64::MAX, refuses a function without naming the option, and says
//! "invalid type: …, expected …": this one keeps the words the hand reader
//! (js_args.rs) uses, `bad timeoutMs: "5s"; give a number of milliseconds …`,
//! naming the option by its path (`env.A`, `notifyOn[1]`).

use crate::js_shown::{describe, js_number, shown_text};
use napi::bindgen_prelude::*;
use napi::ValueType;
use proc_manager_core::model::option_value::SAFE_WHOLE;
use proc_manager_core::model::text::visible;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use std::fmt;

/// Why a value was refused; `located` once the option it is about is named.
#[derive(Debug)]
pub struct Refusal {
    message: String,
    located: bool,
}

impl Refusal {
    fn at(mut self, path: &str) -> Refusal {
        // A core reader's refusal may name its option already (`bad status `x`: …`).
        let named = self.message.starts_with(&format!("bad {path} "));
        if !self.located && !path.is_empty() && !named {
            self.message = format!("bad {path}: {}", self.message);
            self.located = true;
        }
        self
    }

    fn whole(message: String) -> Refusal {
        Refusal { message, located: true }
    }

    pub fn into_napi(self) -> napi::Error {
        napi::Error::new(napi::Status::InvalidArg, self.message)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// What was given, as the hand reader shows it: numbers, strings, booleans
/// and null as written, anything else by its kind.
fn shown(unexpected: &Unexpected) -> String {
    match unexpected {
        Unexpected::Str(s) => shown_text(s),
        Unexpected::Signed(n) => n.to_string(),
        Unexpected::Unsigned(n) => n.to_string(),
        Unexpected::Float(n) => js_number(*n),
        Unexpected::Bool(b) => b.to_string(),
        Unexpected::Unit | Unexpected::Option => "null".into(),
        Unexpected::Map => "an object".into(),
        Unexpected::Seq => "an array".into(),
        Unexpected::Other(kind) => kind.to_string(),
        _ => "a value of another kind".into(),
    }
}

impl de::Error for Refusal {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Refusal { message: message.to_string(), located: false }
    }
    fn invalid_type(unexpected: Unexpected, expected: &dyn de::Expected) -> Self {
        Self::custom(format!("{}; give {expected}", shown(&unexpected)))
    }
    fn invalid_value(unexpected: Unexpected, expected: &dyn de::Expected) -> Self {
        Self::invalid_type(unexpected, expected)
    }
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::custom(format!("{}; give one of {}", shown(&Unexpected::Str(variant)), quoted(expected)))
    }
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
}

type Outcome<T> = std::result::Result<T, Refusal>;

fn napi_failed(error: napi::Error) -> Refusal {
    Refusal::whole(error.reason.clone())
}

/// A JS value at `path` (empty for the options object itself); `None`: an
/// options object that was not given, read as an empty one.
pub struct JsInput<'env> {
    value: Option<Unknown<'env>>,
    path: String,
}

impl<'env> JsInput<'env> {
    pub fn options(value: Option<Unknown<'env>>) -> JsInput<'env> {
        JsInput { value, path: String::new() }
    }

    /// An options object holding only `value`, as option `name`.
    pub fn field(name: &'static str, value: Unknown<'env>) -> OneField<'env> {
        OneField(name, JsInput { value: Some(value), path: name.to_string() })
    }

    /// `undefined` and `null` are not given, as everywhere in the JS API.
    fn given(value: &Unknown) -> Outcome<bool> {
        Ok(!matches!(value.get_type().map_err(napi_failed)?, ValueType::Undefined | ValueType::Null))
    }

    fn any<'de, V: Visitor<'de>>(self, visitor: V) -> Outcome<V::Value> {
        let Some(value) = self.value else { return visitor.visit_map(Entries::of(Vec::new())) };
        match value.get_type().map_err(napi_failed)? {
            ValueType::Undefined | ValueType::Null => visitor.visit_unit(),
            ValueType::Boolean => visitor.visit_bool(bool::from_unknown(value).map_err(napi_failed)?),
            ValueType::Number => {
                let n = f64::from_unknown(value).map_err(napi_failed)?;
                // Whole numbers a double holds exactly read as integers; the
                // rest (1.5, 1e300, NaN) as they are.
                if n.fract() == 0.0 && n.abs() <= SAFE_WHOLE {
                    if n < 0.0 { visitor.visit_i64(n as i64) } else { visitor.visit_u64(n as u64) }
                } else {
                    visitor.visit_f64(n)
                }
            }
            ValueType::String => visitor.visit_string(String::from_unknown(value).map_err(napi_failed)?),
            ValueType::Object if value.is_array().map_err(napi_failed)? => {
                let array = Array::from_unknown(value).map_err(napi_failed)?;
                let mut items = Vec::with_capacity(array.len() as usize);
                for i in 0..array.len() {
                    let item = array.get::<Unknown>(i).map_err(napi_failed)?;
                    items.push(JsInput { value: item, path: format!("{}[{i}]", self.path) });
                }
                visitor.visit_seq(Items(items.into_iter()))
            }
            ValueType::Object => {
                let object = Object::from_unknown(value).map_err(napi_failed)?;
                let mut entries = Vec::new();
                for key in Object::keys(&object).map_err(napi_failed)? {
                    // Left out, as JSON.stringify leaves it out.
                    let Some(item) = object.get::<Unknown>(&key).map_err(napi_failed)? else { continue };
                    if item.get_type().map_err(napi_failed)? == ValueType::Undefined {
                        continue;
                    }
                    let path = format!("{}.{}", self.path, visible(&key));
                    entries.push((key, JsInput { value: Some(item), path }));
                }
                visitor.visit_map(Entries::of(entries))
            }
            ValueType::Function => Err(de::Error::invalid_type(Unexpected::Other("a function"), &visitor)),
            ValueType::Symbol => Err(de::Error::invalid_type(Unexpected::Other("a symbol"), &visitor)),
            _ => Err(de::Error::invalid_type(Unexpected::Other("a value of another kind"), &visitor)),
        }
    }

    /// The struct's fields that were given, in the struct's order; a nested
    /// struct (`wake`) refuses names it does not know, the options object
    /// leaves that to `Options::finish`, which knows the face's own names too.
    fn fields<'de, V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Outcome<V::Value> {
        let Some(value) = self.value else { return visitor.visit_map(Entries::of(Vec::new())) };
        if value.get_type().map_err(napi_failed)? != ValueType::Object || value.is_array().map_err(napi_failed)? {
            return Err(de::Error::custom(format!("{}; give an object", describe(&value))));
        }
        let object = Object::from_unknown(value).map_err(napi_failed)?;
        let mut items = Vec::new();
        for &field in fields {
            let Some(item) = object.get::<Unknown>(field).map_err(napi_failed)? else { continue };
            if Self::given(&item)? {
                let path = if self.path.is_empty() { field.to_string() } else { format!("{}.{field}", self.path) };
                items.push((field.to_string(), JsInput { value: Some(item), path }));
            }
        }
        let read = visitor.visit_map(Entries::of(items))?;
        if !self.path.is_empty() {
            for key in Object::keys(&object).map_err(napi_failed)? {
                if !fields.contains(&key.as_str()) {
                    return Err(Refusal::whole(format!(
                        "unknown option `{}` for {}; accepted: {}",
                        visible(&key),
                        self.path,
                        fields.join(", ")
                    )));
                }
            }
        }
        Ok(read)
    }
}

/// See `JsInput::field`.
pub struct OneField<'env>(&'static str, JsInput<'env>);

impl<'de> Deserializer<'de> for OneField<'_> {
    type Error = Refusal;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Outcome<V::Value> {
        visitor.visit_map(Entries::of(vec![(self.0.to_string(), self.1)]))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

struct Items<'env>(std::vec::IntoIter<JsInput<'env>>);

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = Refusal;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Outcome<Option<T::Value>> {
        self.0.next().map(|item| seed.deserialize(item)).transpose()
    }
}

struct Entries<'env> {
    items: std::vec::IntoIter<(String, JsInput<'env>)>,
    next: Option<JsInput<'env>>,
}

impl<'env> Entries<'env> {
    fn of(items: Vec<(String, JsInput<'env>)>) -> Entries<'env> {
        Entries { items: items.into_iter(), next: None }
    }
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Refusal;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Outcome<Option<K::Value>> {
        let Some((key, value)) = self.items.next() else { return Ok(None) };
        self.next = Some(value);
        seed.deserialize(key.into_deserializer()).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Outcome<V::Value> {
        seed.deserialize(self.next.take().expect("a key was read before its value"))
    }
}

impl<'de> Deserializer<'de> for JsInput<'_> {
    type Error = Refusal;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Outcome<V::Value> {
        let path = self.path.clone();
        self.any(visitor).map_err(|e| e.at(&path))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Outcome<V::Value> {
        match &self.value {
            Some(value) if !Self::given(value)? => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Outcome<V::Value> {
        let path = self.path.clone();
        let read: Outcome<V::Value> = match self.value {
            Some(value) if value.get_type().map_err(napi_failed)? == ValueType::String => {
                let text = String::from_unknown(value).map_err(napi_failed)?;
                visitor.visit_enum(text.into_deserializer())
            }
            value => {
                let given = value.map_or_else(|| "nothing".into(), |value| describe(&value));
                Err(de::Error::custom(format!("{given}; give one of {}", quoted(variants))))
            }
        };
        read.map_err(|e| e.at(&path))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Outcome<V::Value> {
        let path = self.path.clone();
        self.fields(fields, visitor).map_err(|e| e.at(&path))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Outcome<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Outcome<V::Value> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map identifier
    }
}
