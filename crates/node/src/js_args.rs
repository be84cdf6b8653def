//! Reading the JS arguments: the positional ones, and each options object
//! through the serde reading of the core type that defines it (js_serde.rs),
//! the core checking the values. napi's own conversion takes `env: 5` for no
//! environment, truncates `lines: 1.5` to 1, ignores a misspelt option name
//! and throws (instead of rejecting) from a promise-returning function; here
//! a wrong type or an unknown name is refused with a message that names it
//! and says what is accepted.

use proc_manager_core::model::text::visible;
use napi::bindgen_prelude::*;
use napi::ValueType;
use crate::js_shown::describe;

fn bad(message: String) -> napi::Error {
    napi::Error::new(Status::InvalidArg, message)
}

fn kind_of(value: &Unknown) -> Result<ValueType> {
    value.get_type()
}

/// Nothing after the last argument a call takes: napi would ignore it, so an
/// options object given to a call that takes none (`pauseJob(id, { force:
/// true })`) would be dropped without a word, where a misspelt option is
/// refused everywhere else.
pub fn no_more(function: &str, takes: &str, extra: Option<Unknown>) -> Result<()> {
    match extra {
        Some(value) if !matches!(kind_of(&value)?, ValueType::Undefined | ValueType::Null) => {
            Err(bad(format!("bad argument to {function}: {}; it takes {takes}", describe(&value))))
        }
        _ => Ok(()),
    }
}

/// A positional string argument (`jobId`, `command`).
pub fn string_arg(name: &str, value: Unknown) -> Result<String> {
    if kind_of(&value)? == ValueType::String {
        return String::from_unknown(value);
    }
    Err(bad(format!("bad {name}: {}; give a string", describe(&value))))
}

/// A plain argument that stands for option `name` of `T` (`pruneJobs(3600000)`:
/// its `olderThanMs`), read by `T`'s serde reading as if given by that name.
pub fn o_value<T: serde::de::DeserializeOwned>(name: &'static str, value: Unknown) -> Result<T> {
    T::deserialize(crate::js_serde::JsInput::field(name, value)).map_err(crate::js_serde::Refusal::into_napi)
}

/// One JS options object being read. Each getter records the name it reads,
/// so `finish` knows every accepted name without a second list to keep in
/// step: what the object holds beyond them is misspelt or unknown.
pub struct Options<'env> {
    function: &'static str,
    object: Option<Object<'env>>,
    /// The object as given, for `serde`.
    given: Option<Unknown<'env>>,
    /// What was given instead of an object, reported by `finish` with the names.
    not_an_object: Option<String>,
    accepted: Vec<&'static str>,
}

impl<'env> Options<'env> {
    /// `undefined` and `null` stand for no options.
    pub fn new(function: &'static str, value: Option<Unknown<'env>>) -> Result<Options<'env>> {
        let mut options = Options { function, object: None, given: None, not_an_object: None, accepted: Vec::new() };
        if let Some(value) = value {
            if kind_of(&value)? == ValueType::Object && !value.is_array()? {
                options.object = Some(Object::from_unknown(value)?);
                options.given = Some(value);
            } else {
                options.not_an_object = Some(describe(&value));
            }
        }
        Ok(options)
    }

    /// The value of option `name`; `undefined` and `null` mean not given.
    fn get(&mut self, name: &'static str) -> Result<Option<Unknown<'env>>> {
        self.accepted.push(name);
        let Some(object) = &self.object else { return Ok(None) };
        match object.get::<Unknown>(name)? {
            Some(value) if kind_of(&value)? == ValueType::Null => Ok(None),
            other => Ok(other),
        }
    }

    pub fn strings(&mut self, name: &'static str) -> Result<Option<Vec<String>>> {
        let Some(value) = self.get(name)? else { return Ok(None) };
        if kind_of(&value)? != ValueType::Object || !value.is_array()? {
            return Err(bad(format!("bad {name}: {}; give an array of strings", describe(&value))));
        }
        let array = Array::from_unknown(value)?;
        let mut strings = Vec::with_capacity(array.len() as usize);
        for i in 0..array.len() {
            let item = array.get::<Unknown>(i)?.ok_or_else(|| bad(format!("bad {name}[{i}]: missing")))?;
            strings.push(string_arg(&format!("{name}[{i}]"), item)?);
        }
        Ok(Some(strings))
    }

    /// An `AbortSignal` (`signal`): an object with a boolean `aborted` and
    /// an `addEventListener` method.
    pub fn signal(&mut self, name: &'static str) -> Result<Option<Object<'env>>> {
        let Some(value) = self.get(name)? else { return Ok(None) };
        let refuse = || bad(format!("bad {name}: {}; give an AbortSignal (from an AbortController)", describe(&value)));
        if kind_of(&value)? != ValueType::Object {
            return Err(refuse());
        }
        let object = Object::from_unknown(value)?;
        let aborted = object.get::<Unknown>("aborted")?;
        let listen = object.get::<Unknown>("addEventListener")?;
        let is = |v: Option<Unknown>, kind: ValueType| -> Result<bool> {
            Ok(match v {
                Some(v) => kind_of(&v)? == kind,
                None => false,
            })
        };
        if !is(aborted, ValueType::Boolean)? || !is(listen, ValueType::Function)? {
            return Err(refuse());
        }
        Ok(Some(object))
    }

    /// Options a core type defines (`StartOptions`), read by its serde
    /// reading (js_serde.rs) with the same words as the getters above; its
    /// field names join the accepted ones, in its order.
    pub fn serde<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        self.accepted.extend(proc_manager_core::model::option_value::serde_fields::<T>());
        T::deserialize(crate::js_serde::JsInput::options(self.given)).map_err(crate::js_serde::Refusal::into_napi)
    }

    /// `serde`, without the fields named in `left_out`, which this call
    /// does not take (`killJob` takes no `owner`): they are refused as any
    /// unknown name is, before their values are looked at.
    pub fn serde_without<T: serde::de::DeserializeOwned>(&mut self, left_out: &[&str]) -> Result<T> {
        let fields = proc_manager_core::model::option_value::serde_fields::<T>();
        self.accepted.extend(fields.iter().filter(|f| !left_out.contains(f)));
        if let Some(object) = &self.object {
            if let Some(key) = Object::keys(object)?.into_iter().find(|k| left_out.contains(&k.as_str())) {
                return Err(self.unknown(&key));
            }
        }
        T::deserialize(crate::js_serde::JsInput::options(self.given)).map_err(crate::js_serde::Refusal::into_napi)
    }

    /// `serde`, with this face's own options (read by `own`) listed among
    /// the accepted names right after `after` (`waitJob`: timeoutMs, signal, ready).
    pub fn serde_with<T: serde::de::DeserializeOwned, R>(
        &mut self,
        after: &str,
        own: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<(T, R)> {
        let start = self.accepted.len();
        let read = self.serde::<T>()?;
        let split = self.accepted[start..].iter().position(|n| *n == after).map_or(self.accepted.len(), |at| start + at + 1);
        let rest: Vec<&'static str> = self.accepted.drain(split..).collect();
        let own = own(self)?;
        self.accepted.extend(rest);
        Ok((read, own))
    }

    fn unknown(&self, key: &str) -> napi::Error {
        bad(format!("unknown option `{}` for {}; accepted: {}", visible(key), self.function, self.accepted.join(", ")))
    }

    /// Refuses what was not read: a value that is no options object, or a
    /// name that is not one of the options.
    pub fn finish(self) -> Result<()> {
        let accepted = self.accepted.join(", ");
        if let Some(given) = self.not_an_object {
            return Err(bad(format!(
                "bad options for {}: {given}; give an object with any of: {accepted}",
                self.function
            )));
        }
        if let Some(object) = &self.object {
            for key in Object::keys(object)? {
                if !self.accepted.contains(&key.as_str()) {
                    return Err(self.unknown(&key));
                }
            }
        }
        Ok(())
    }
}
