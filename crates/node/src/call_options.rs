//! The JS options of the calls, mapped onto the core's types: the start
//! options (`RunOptions`, and the JS API as a `Face`), a tail query, a list
//! filter. The core defines each (start_options.rs, verb_options.rs); serde
//! reads them here.

use crate::core_calls::Outcome;
use crate::js_args::Options;
use napi::bindgen_prelude::*;
use proc_manager_core::verbs::check::TailQuery;
use proc_manager_core::verbs::list::ListFilter;
use proc_manager_core::verbs::start_options::{Face, StartOptions};
use proc_manager_core::verbs::verb_options::{CheckOptions, ListOptions};

/// Options of `runBackground`, and of `runYield` beside its own: the
/// program's `args` (this face's), then the core's `StartOptions`.
pub(crate) struct RunOptions {
    pub(crate) args: Option<Vec<String>>,
    pub(crate) start: StartOptions,
}

impl RunOptions {
    pub(crate) fn read(o: &mut Options) -> Result<RunOptions> {
        Ok(RunOptions { args: o.strings("args")?, start: o.serde()? })
    }
}

/// The JS API's spelling of the start options: their JSON names.
pub(crate) struct JsApi;

impl Face for JsApi {
    fn name(&self, option: &str) -> String {
        option.to_string()
    }

    /// `tie: true` ties the job to this Node process.
    fn caller_pid(&self) -> u32 {
        std::process::id()
    }
}

pub(crate) fn tail_query(function: &'static str, options: Option<Unknown>) -> Outcome<TailQuery> {
    let mut o = Options::new(function, options)?;
    let query = read_tail_query(&mut o)?;
    o.finish()?;
    Ok(query)
}

pub(crate) fn read_tail_query(o: &mut Options) -> Outcome<TailQuery> {
    Ok(o.serde::<CheckOptions>()?.query()?)
}

pub(crate) fn list_filter(function: &'static str, options: Option<Unknown>) -> Outcome<ListFilter> {
    let mut o = Options::new(function, options)?;
    let list: ListOptions = o.serde()?;
    o.finish()?;
    Ok(list.filter(&JsApi)?)
}
