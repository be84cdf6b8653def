//! The async iterators the addon returns (`followLog`'s lines, `watchJobs`'
//! job ends): a native thread pushes items, `next()` calls take them. The
//! stream ends at once when the consumer stops (`return()`, as `break` calls
//! it), when the `signal` aborts, or when the iterator is collected; the
//! producing thread is told through `on_stop`.

use crate::abort::{abort_error, cancel_on};
use napi::bindgen_prelude::*;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

type Settle = Box<dyn FnOnce(Env) -> Result<serde_json::Value> + Send>;
type Pending = napi::JsDeferred<serde_json::Value, Settle>;

/// How a stream ended; what every later `next()` answers.
#[derive(Clone)]
pub enum End {
    /// Everything was handed over (or `return()` was called).
    Done,
    Aborted,
    /// The producer failed: what its JS error says, as a thrown one would.
    Failed(crate::core_calls::Said),
}

impl End {
    pub fn failed(error: &proc_manager_core::Error) -> End {
        End::Failed(crate::core_calls::Said::of(error))
    }
}

struct State<T> {
    items: VecDeque<T>,
    /// `next()` calls waiting for an item, oldest first.
    waiting: VecDeque<Pending>,
    end: Option<End>,
}

type Unlisten = Arc<Mutex<Option<crate::abort::Listening>>>;

pub struct Stream<T> {
    state: Mutex<State<T>>,
    /// Signalled when the consumer takes an item or the stream stops.
    room: Condvar,
    /// Items queued ahead of the consumer before `push` waits for it.
    read_ahead: usize,
    /// Wakes the producing thread so that it stops.
    on_stop: Box<dyn Fn() + Send + Sync>,
    /// The `signal`'s listener, removed on the JS thread once the stream has
    /// ended (its end handed to `next()`, `return()`, or the iterator collected).
    listening: Unlisten,
}

/// Removes the signal's listener, if it is still there; gives the signal's
/// `reason` then. On the JS thread.
fn unlisten<'env>(slot: &Unlisten, env: &'env Env) -> Result<Option<Unknown<'env>>> {
    let taken = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    taken.map(|listening| listening.remove(env)).transpose()
}

/// An `IteratorResult`: `{ value, done: false }`, or `{ done: true }` at the end.
#[derive(Serialize)]
struct Step<T> {
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<T>,
    done: bool,
}

fn step<T: Serialize + Send + 'static>(value: Option<T>) -> Settle {
    let done = value.is_none();
    Box::new(move |_| serde_json::to_value(Step { value, done }).map_err(|e| napi::Error::from_reason(e.to_string())))
}

/// Settles a `next()` with the stream's end, the signal's listener removed first.
fn settle_end(end: &End, listening: &Unlisten) -> Settle {
    let (end, listening) = (end.clone(), listening.clone());
    Box::new(move |env| {
        let reason = unlisten(&listening, &env)?;
        match end {
            End::Done => step::<()>(None)(env),
            End::Aborted => Err(abort_error(&env, None, reason)),
            End::Failed(said) => Err(said.into_js(&env)),
        }
    })
}

impl<T: Serialize + Send + 'static> Stream<T> {
    /// A stream that stops at `signal`'s abort; `read_ahead: None` queues
    /// without bound.
    pub fn new(
        env: &Env,
        signal: Option<Object>,
        read_ahead: Option<usize>,
        on_stop: impl Fn() + Send + Sync + 'static,
    ) -> Result<Arc<Stream<T>>> {
        let stream = Arc::new(Stream {
            state: Mutex::new(State { items: VecDeque::new(), waiting: VecDeque::new(), end: None }),
            room: Condvar::new(),
            read_ahead: read_ahead.unwrap_or(usize::MAX),
            on_stop: Box::new(on_stop),
            listening: Arc::default(),
        });
        let aborter = Arc::downgrade(&stream);
        let listening = cancel_on(env, signal, move || {
            if let Some(stream) = aborter.upgrade() {
                stream.stop(End::Aborted);
            }
        })?;
        *stream.listening.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = listening;
        Ok(stream)
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An item from the producing thread: to the oldest waiting `next()`,
    /// else queued; waits while the consumer is `read_ahead` items behind.
    /// False once the stream has stopped.
    pub fn push(&self, item: T) -> bool {
        let mut state = self.lock();
        if state.end.is_some() {
            return false;
        }
        if let Some(pending) = state.waiting.pop_front() {
            pending.resolve(step(Some(item)));
            return true;
        }
        state.items.push_back(item);
        while state.items.len() >= self.read_ahead && state.end.is_none() {
            state = self.room.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        state.end.is_none()
    }

    /// Ends the stream (unless it has ended already): waiting `next()` calls
    /// get `end`, and the producing thread is woken to stop at once.
    pub fn stop(&self, end: End) {
        let mut state = self.lock();
        if state.end.is_none() {
            if !matches!(end, End::Done) {
                // An abort or a failure is said at once, not after the items queued.
                state.items.clear();
            }
            for pending in state.waiting.drain(..) {
                pending.resolve(settle_end(&end, &self.listening));
            }
            state.end = Some(end);
        }
        drop(state);
        (self.on_stop)();
        self.room.notify_all();
    }

    /// The consumer is gone (`return()`, or the iterator dropped): nothing
    /// more is handed over, the thread ends.
    pub fn close(&self) {
        self.lock().items.clear();
        self.stop(End::Done);
    }

    /// The iterator's `next()`.
    pub fn next<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        let mut state = self.lock();
        if let Some(item) = state.items.pop_front() {
            drop(state);
            self.room.notify_all();
            deferred.resolve(step(Some(item)));
        } else if let Some(end) = &state.end {
            deferred.resolve(settle_end(end, &self.listening));
        } else {
            state.waiting.push_back(deferred);
        }
        Ok(promise)
    }

    /// The iterator's `return()`: stops the stream; later `next()` calls
    /// give `{ done: true }`.
    pub fn finish<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        self.close();
        unlisten(&self.listening, env)?;
        let (deferred, promise) = env.create_deferred::<serde_json::Value, Settle>()?;
        deferred.resolve(step::<()>(None));
        Ok(promise)
    }

    /// The iterator was collected: the signal lets go of the listener (the
    /// iterator's `Drop` then ends the thread).
    pub fn collected(&self, env: &Env) -> Result<()> {
        unlisten(&self.listening, env).map(drop)
    }

    /// The producing thread could not start: nothing will end this stream,
    /// so its listener goes now.
    pub fn not_started(&self, env: &Env, error: std::io::Error) -> napi::Error {
        let _ = unlisten(&self.listening, env);
        crate::core_calls::coded_error(env, "ERR_FAILED", &format!("cannot start a thread: {error}"), None)
    }
}

/// Makes a native iterator usable in `for await` (`[Symbol.asyncIterator]`
/// returns itself).
pub fn make_iterable(env: &Env, iterator: Object) -> Result<()> {
    let make_iterable: Function<Object, ()> =
        env.run_script("(function (it) { it[Symbol.asyncIterator] = function () { return this } })")?;
    make_iterable.call(iterator)
}

/// Starts `produce` on a named native thread; the stream ends through it.
/// A thread that cannot start lets the stream's abort listener go.
pub fn spawn_producer<T: Serialize + Send + 'static>(
    env: &Env,
    stream: &Arc<Stream<T>>,
    name: &str,
    produce: impl FnOnce(Arc<Stream<T>>) + Send + 'static,
) -> Result<()> {
    let producing = stream.clone();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || produce(producing))
        .map(drop)
        .map_err(|e| stream.not_started(env, e))
}

/// Defines a JS async iterator class over a `Stream<$item>`: `next()`,
/// `return()` (what `break` in `for await` calls), the stream closed when
/// the object is collected, and `into_iterable` to hand it to JS with
/// `[Symbol.asyncIterator]`. napi classes cannot be generic, so each item
/// type gets its class from here rather than from a copy.
macro_rules! stream_iterator {
    ($(#[$doc:meta])* $class:ident, $item:ty, $ts_result:literal, $next_doc:literal) => {
        $(#[$doc])*
        #[napi(custom_finalize)]
        pub struct $class {
            stream: std::sync::Arc<$crate::stream::Stream<$item>>,
        }

        impl ObjectFinalize for $class {
            fn finalize(self, env: Env) -> Result<()> {
                self.stream.collected(&env)
            }
        }

        impl Drop for $class {
            /// Collected without `return()` (the consumer dropped it): the thread ends.
            fn drop(&mut self) {
                self.stream.close();
            }
        }

        #[napi]
        impl $class {
            #[doc = $next_doc]
            #[napi(ts_return_type = $ts_result)]
            pub fn next<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
                self.stream.next(env)
            }

            /// Stops (what `break` in `for await` calls): the native thread
            /// ends at once; later `next()` calls give `{ done: true }`.
            #[napi(js_name = "return", ts_return_type = $ts_result)]
            pub fn finish<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
                self.stream.finish(env)
            }
        }

        impl $class {
            /// The JS object, usable in `for await`.
            pub fn into_iterable<'env>(stream: std::sync::Arc<$crate::stream::Stream<$item>>, env: &'env Env) -> Result<Object<'env>> {
                let iterator = $class { stream }.into_instance(env)?;
                $crate::stream::make_iterable(env, iterator.as_object(env))?;
                Ok(iterator.as_object(env))
            }
        }
    };
}
pub(crate) use stream_iterator;
