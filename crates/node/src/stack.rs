//! `up` / `down`: a stack file's processes started as jobs of the stack, or
//! killed (the core's verbs/stack.rs).

use crate::abort::{cancel_for, refuse_aborted};
use crate::binary::supervisor_exe;
use crate::core_calls::{context, context_for_kill, napi_to_core, shape};
use crate::js_args::{string_arg, Options};
use crate::promise::{rejecting, spawn_promise, Settled};
use napi::bindgen_prelude::*;
use napi::ValueType;
use napi_derive::napi;
use proc_manager_core::present::view::{StackDownView, StackUpView};
use proc_manager_core::verbs::cancel::Cancel;
use proc_manager_core::verbs::stack;
use std::path::PathBuf;
use std::time::Duration;

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

/// Starts every process of a stack file (`run-bg.json`, else `Procfile`,
/// in the current directory when `file` is not given) that does not run
/// yet, as jobs labelled by name and owned by the stack (`owner`, else the
/// file's directory name), each after the processes of its `after`. With
/// `yieldMs`, resolves once every process is up (ready, running, or a task
/// that ended well) or one cannot be: `ready`, `problems`.
#[napi(ts_args_type = "file?: string | undefined | null, options?: UpOptions | undefined | null", ts_return_type = "Promise<StackUpResult>")]
pub fn up<'env>(env: &'env Env, file: Option<Unknown>, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let mut o = Options::new("up", options)?;
        let owner = o.string("owner")?;
        let yield_ms = o.millis("yieldMs", 0)?;
        let signal = o.signal("signal")?;
        o.finish()?;
        let file = file_arg(file)?;
        refuse_aborted(env, signal.as_ref())?;
        let context = context()?;
        let runner = supervisor_exe()?;
        let cancel = cancel_for(env, signal)?;
        let waiting = cancel.0.clone();
        spawn_promise(env, cancel, move || {
            let file = read(file)?;
            let mut up = context.stack_up(&file, owner.as_deref(), &runner)?;
            if let Some(ms) = yield_ms {
                // Aborted: what started runs on, as `runYield` leaves its job.
                if context.stack_settle(&mut up, Duration::from_millis(ms), &waiting)?.is_none() {
                    return Ok(Settled::Aborted(None));
                }
            }
            Ok(Settled::Done(shape(&StackUpView::from(&up)).map_err(napi_to_core)?))
        })
    })
}

/// Kills the jobs of a stack file's processes (of `owner`, else the file's
/// directory name), what runs after others first; resolves once their trees
/// are gone, with what was killed.
#[napi(ts_args_type = "file?: string | undefined | null, options?: DownOptions | undefined | null", ts_return_type = "Promise<StackDownResult>")]
pub fn down<'env>(env: &'env Env, file: Option<Unknown>, options: Option<Unknown>) -> Result<Object<'env>> {
    rejecting(env, || {
        let mut o = Options::new("down", options)?;
        let owner = o.string("owner")?;
        o.finish()?;
        let file = file_arg(file)?;
        let context = context_for_kill()?;
        spawn_promise(env, (Cancel::never(), None), move || {
            let down = context.stack_down(&read(file)?, owner.as_deref())?;
            Ok(Settled::Done(shape(&StackDownView::from(&down)).map_err(napi_to_core)?))
        })
    })
}
