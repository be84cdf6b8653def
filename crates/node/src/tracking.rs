//! Process snapshots, the orphan diff and the `ResourceTracker` for JS (the
//! core's verbs/left_behind.rs and verbs/resource_tracker.rs), with the
//! libuv walk that tells the tracker which children Node started itself.

use crate::core_calls::{api, shape};
use crate::js_args::{no_more, string_arg, Options};
use crate::logging;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use proc_manager_core::present::view::{processes_from_json, PhaseView, ProcessInfoView, SnapshotView};
use proc_manager_core::verbs::verb_options::TrackerOptions;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::{left_behind, resource_tracker};
use std::collections::HashMap;

/// Every process visible to this user: pid, ppid, command, memoryMb,
/// startTime, isMcp; with the time taken and the total resident memory.
#[napi(ts_args_type = "", ts_return_type = "ProcessSnapshot")]
pub fn snapshot(env: &Env, extra: Option<Unknown>) -> Result<serde_json::Value> {
    api(env, || {
        no_more("snapshot", "no arguments", extra)?;
        let patterns = Context::load()?.config.diagnostics.resource_tracking.mcp_patterns;
        Ok(shape(&SnapshotView::new(&left_behind::snapshot(&patterns), |_| true))?)
    })
}

/// Processes in `after` that were not in `before` (by pid and start time) and
/// lost their parent: it is gone, is init, or is a subreaper above this
/// process that adopted them. MCP processes first.
#[napi(
    ts_args_type = "before: ProcessSnapshot | Array<ProcessInfo>, after: ProcessSnapshot | Array<ProcessInfo>",
    ts_return_type = "Array<ProcessInfo>"
)]
pub fn detect_orphans(env: &Env, before: Unknown, after: Unknown) -> Result<serde_json::Value> {
    api(env, || {
        // Converted here, not by napi before the call: a refusal is then `ERR_USAGE`.
        let before = processes_from_json("before", env.from_js_value(before)?)?;
        let after = processes_from_json("after", env.from_js_value(after)?)?;
        let orphans = left_behind::detect_orphans(&before, &after, std::process::id());
        Ok(shape(&orphans.iter().map(ProcessInfoView::from).collect::<Vec<_>>())?)
    })
}

/// Snapshots around each phase of a task; reports what it left behind and
/// its memory growth, as data and as `tracing` log lines on stderr.
#[napi]
pub struct ResourceTracker {
    inner: resource_tracker::ResourceTracker,
}

#[napi]
impl ResourceTracker {
    #[napi(constructor, ts_args_type = "options?: TrackerOptions | undefined | null")]
    pub fn new(env: &Env, options: Option<Unknown>) -> Result<ResourceTracker> {
        api(env, || {
            let mut o = Options::new("ResourceTracker", options)?;
            let overrides: TrackerOptions = o.serde()?;
            o.finish()?;
            let config = overrides.over(Context::load()?.config.diagnostics.resource_tracking);
            if config.enabled {
                logging::init();
            }
            Ok(ResourceTracker { inner: resource_tracker::ResourceTracker::new(config) })
        })
    }

    /// Whether it tracks: `false` when `enabled: false` or config.json's
    /// `diagnostics.resource_tracking.enabled` turned it off.
    #[napi(getter)]
    pub fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    /// The environment to start tracked work with (`{ PROC_MANAGER_TRACKER: token }`);
    /// once handed out, processes carrying it count as left behind too, and
    /// new processes this process started itself that run on do not.
    #[napi]
    pub fn env(&mut self) -> HashMap<String, String> {
        let (key, value) = self.inner.env();
        HashMap::from([(key, value)])
    }

    /// Takes the snapshot a phase starts from, and makes this process a child
    /// subreaper (Linux) until the last open phase's `snapshotAfter`, so what
    /// the task orphans is re-parented here and found by ancestry even when a
    /// launcher stripped the cookie. `null` when disabled.
    #[napi(ts_args_type = "label: string", ts_return_type = "ProcessSnapshot | null")]
    pub fn snapshot_before(&mut self, env: &Env, label: Unknown) -> Result<serde_json::Value> {
        api(env, || {
            let label = string_arg("label", label)?;
            Ok(match self.inner.snapshot_before(&label) {
                Some(snapshot) => shape(&SnapshotView::new(&snapshot, |_| true))?,
                None => serde_json::Value::Null,
            })
        })
    }

    /// Compares with the snapshot taken before `label`: orphans, memory delta,
    /// warnings. A child this process killed just before is first waited for
    /// (up to 1 s) until its exit has handed its processes here. Reaps the
    /// zombies it adopted that provably are not children this process started
    /// (never the exit status of a `child_process`), and stops being a
    /// subreaper if it was not one before.
    #[napi(ts_args_type = "label: string", ts_return_type = "PhaseResult")]
    pub fn snapshot_after(&mut self, env: &Env, label: Unknown) -> Result<serde_json::Value> {
        api(env, || {
            let label = string_arg("label", label)?;
            // Compared with nothing, every phase would read clean: "nothing
            // was left behind" for a phase nobody measured.
            let open = self.inner.open_phases();
            if self.inner.enabled() && !open.contains(&label) {
                let open = if open.is_empty() { "none is open".to_string() } else { format!("open: {}", open.join(", ")) };
                return Err(proc_manager_core::Error::Usage(format!(
                    "no phase `{label}` is open: call snapshotBefore('{label}') when it begins ({open})"
                ))
                .into());
            }
            // A live child this thread's loop still tracks was started here
            // (child_process), not adopted: it is not a leftover.
            let own = loop_children(env);
            let owns = |pid: u32| own.as_ref().is_some_and(|own| own.contains(&pid));
            let owns: Option<&dyn Fn(u32) -> bool> = if own.is_some() { Some(&owns) } else { None };
            Ok(shape(&PhaseView::new(&label, self.inner.snapshot_after_with(&label, owns).as_ref()))?)
        })
    }
}

/// The pids of the child processes this thread's event loop tracks (each
/// `child_process.spawn` is a libuv process handle until its exit is seen).
/// libuv's functions are looked up at run time, not linked: `None` in a
/// runtime that has no libuv (the tracker then counts every new child).
fn loop_children(env: &Env) -> Option<std::collections::HashSet<u32>> {
    use std::ffi::{c_char, c_int, c_void, CStr};
    type WalkCb = unsafe extern "C" fn(*mut c_void, *mut c_void);
    type Walk = unsafe extern "C" fn(*mut c_void, WalkCb, *mut c_void);
    type GetType = unsafe extern "C" fn(*const c_void) -> c_int;
    type TypeName = unsafe extern "C" fn(c_int) -> *const c_char;
    type GetPid = unsafe extern "C" fn(*const c_void) -> c_int;
    struct Walker {
        get_type: GetType,
        type_name: TypeName,
        get_pid: GetPid,
        pids: std::collections::HashSet<u32>,
    }
    fn symbol(name: &CStr) -> Option<*mut c_void> {
        proc_manager_core::os::sys::loaded_symbol(name)
    }
    unsafe extern "C" fn visit(handle: *mut c_void, arg: *mut c_void) {
        // SAFETY: `arg` is the Walker below, alive and not otherwise borrowed
        // during uv_walk; `handle` is a live handle of the loop, which the
        // libuv accessors only read.
        unsafe {
            let walker = &mut *(arg as *mut Walker);
            let name = (walker.type_name)((walker.get_type)(handle));
            if !name.is_null() && CStr::from_ptr(name).to_bytes() == b"process" {
                let pid = (walker.get_pid)(handle);
                if pid > 0 {
                    walker.pids.insert(pid as u32);
                }
            }
        }
    }
    let walk = symbol(c"uv_walk")?;
    let get_type = symbol(c"uv_handle_get_type")?;
    let type_name = symbol(c"uv_handle_type_name")?;
    let get_pid = symbol(c"uv_process_get_pid")?;
    let mut uv_loop: *mut napi::sys::uv_loop_s = std::ptr::null_mut();
    // SAFETY: a valid env of the calling thread and an out pointer to a local.
    let status = unsafe { napi::sys::napi_get_uv_event_loop(env.raw(), &mut uv_loop) };
    if status != napi::sys::Status::napi_ok || uv_loop.is_null() {
        return None;
    }
    // SAFETY: the symbols are libuv's functions with these signatures
    // (uv.h, libuv >= 1.19, Node >= 10).
    let (walk, get_type, type_name, get_pid) = unsafe {
        (
            std::mem::transmute::<*mut c_void, Walk>(walk),
            std::mem::transmute::<*mut c_void, GetType>(get_type),
            std::mem::transmute::<*mut c_void, TypeName>(type_name),
            std::mem::transmute::<*mut c_void, GetPid>(get_pid),
        )
    };
    let mut walker = Walker { get_type, type_name, get_pid, pids: std::collections::HashSet::new() };
    // SAFETY: we run on the loop's own thread (a napi call), so the loop
    // is not walked or changed concurrently; `visit` only reads handles.
    unsafe { walk(uv_loop as *mut c_void, visit, &mut walker as *mut Walker as *mut c_void) };
    Some(walker.pids)
}
