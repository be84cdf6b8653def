//! `up` / `down`: a stack file's processes started as jobs of the stack, or
//! killed (the core's verbs/stack.rs).

use crate::abort::{cancel_for, refuse_aborted};
use crate::binary::supervisor_exe;
use crate::call_options::JsApi;
use crate::core_calls::{context, context_for_kill, napi_to_core, shape};
use crate::js_args::{no_more, string_arg, Options};
use crate::promise::{rejecting, spawn_promise, Settled};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;
use proc_manager_core::present::view::{StackDownView, StackUpView};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::stack;
use proc_manager_core::verbs::verb_options::{DownOptions, UpOptions};
use std::path::PathBuf;

/// The stack file given, `undefined`/`null` for the default one.
fn file_arg(file: Option<Unknown>) -> Result<Option<PathBuf>> {
    match file {
        Some(value) if !matches!(value.get_type()?, ValueType::Undefined | ValueType::Null) => {
            string_arg("file", value).map(|f| Some(PathBuf::from(f)))
        }
        _ => Ok(None),
    }
}

fn read(file: Option<PathBuf>) -> proc_manager_core::Result<stack::StackFile> {
    let cwd = std::env::current_dir().map_err(|e| proc_manager_core::Error::io("read the current directory", ".", e))?;
    stack::read(&stack::locate(file.as_deref(), &cwd)?)
}

/// Starts every process of a stack file that does not run yet: `file`, or
/// `run-bg.json` in the current directory, else its `Procfile`. Each process
/// is a job labelled by its name and owned by the stack (`owner`, else the
/// file's directory name); one with `after` starts once each process it runs
/// after is ready (one with a readiness check) or ended with exit 0 (one
/// without). The file is checked whole before anything starts. With
/// `yieldMs`, resolves once every process is up or one cannot be (`ready`,
/// `problems`); an aborted `signal` rejects with an `AbortError`, what
/// started runs on.
#[napi(ts_args_type = "file?: string | undefined | null, options?: UpOptions | undefined | null", ts_return_type = "Promise<StackUpResult>")]
pub fn up<'env>(env: &'env Env, file: Option<Unknown>, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("up", "file and options", extra)?;
        let mut o = Options::new("up", options)?;
        let options: UpOptions = o.serde()?;
        let signal = o.signal("signal")?;
        o.finish()?;
        let bound = options.yield_for(&JsApi)?;
        let file = file_arg(file)?;
        refuse_aborted(env, signal.as_ref())?;
        let context = context()?;
        let runner = supervisor_exe()?;
        let cancel = cancel_for(env, signal)?;
        let waiting = cancel.0.clone();
        spawn_promise(env, cancel, move || {
            let file = options.file(read(file)?);
            let mut up = context.stack_up(&file, options.owner.as_deref(), &runner)?;
            if let Some(bound) = bound {
                // Aborted: what started runs on, as `runYield` leaves its job.
                if context.stack_settle(&mut up, bound, &waiting)?.is_none() {
                    return Ok(Settled::Aborted(None));
                }
            }
            Ok(Settled::Done(shape(&StackUpView::from(&up)).map_err(napi_to_core)?))
        })
    })
}

/// Kills the jobs of a stack file's processes (of `owner`, else the file's
/// directory name), what runs after others first; resolves once their trees
/// are gone.
#[napi(ts_args_type = "file?: string | undefined | null, options?: DownOptions | undefined | null", ts_return_type = "Promise<StackDownResult>")]
pub fn down<'env>(env: &'env Env, file: Option<Unknown>, options: Option<Unknown>, extra: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        no_more("down", "file and options", extra)?;
        let mut o = Options::new("down", options)?;
        let DownOptions { owner } = o.serde()?;
        o.finish()?;
        let file = file_arg(file)?;
        let context = context_for_kill()?;
        spawn_promise(env, (Cancel::never(), None), move || {
            let down = context.stack_down(&read(file)?, owner.as_deref())?;
            Ok(Settled::Done(shape(&StackDownView::from(&down)).map_err(napi_to_core)?))
        })
    })
}
