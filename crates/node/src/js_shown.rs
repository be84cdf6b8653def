//! How a JS value that was given is shown in an error message: numbers as
//! JavaScript writes them, strings quoted and cut, anything else by its kind.
//! Shared by the hand reader (js_args.rs) and the serde reader (js_serde.rs),
//! so that neither imports the other for it.

use napi::bindgen_prelude::*;
use napi::ValueType;
use proc_manager_core::model::text::visible;

/// A number as JavaScript writes it: `5`, `1.5`, `1e300`, `NaN`.
pub(crate) fn js_number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity".into() } else { "-Infinity".into() }
    } else if v.fract() == 0.0 && v.abs() < 1e21 {
        format!("{v:.0}")
    } else {
        format!("{v:?}")
    }
}

/// A string as an error shows it: quoted, its first 60 characters, control
/// characters written out.
pub(crate) fn shown_text(s: &str) -> String {
    let shown: String = s.chars().take(60).collect();
    let more = if s.chars().count() > 60 { "…" } else { "" };
    format!("\"{}{more}\"", visible(&shown))
}

/// How a value that was given is shown in an error: numbers, strings,
/// booleans and null as written; anything else by its kind.
pub(crate) fn describe(value: &Unknown) -> String {
    let kind = value.get_type().unwrap_or(ValueType::Unknown);
    match kind {
        ValueType::Number => f64::from_unknown(*value).map(js_number).unwrap_or_else(|_| "a number".into()),
        ValueType::String => String::from_unknown(*value).map(|s| shown_text(&s)).unwrap_or_else(|_| "a string".into()),
        ValueType::Boolean => bool::from_unknown(*value).map(|b| b.to_string()).unwrap_or_else(|_| "a boolean".into()),
        ValueType::Null => "null".into(),
        ValueType::Undefined => "undefined".into(),
        ValueType::Function => "a function".into(),
        ValueType::Symbol => "a symbol".into(),
        ValueType::Object if value.is_array().unwrap_or(false) => "an array".into(),
        ValueType::Object => "an object".into(),
        _ => "a value of another kind".into(),
    }
}
