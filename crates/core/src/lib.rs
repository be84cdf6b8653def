//! The pure-Rust core shared by the napi addon (crates/node) and the `run-bg`
//! CLI (crates/cli). Nothing in here names a napi type; the faces convert.
//! clap and schemars appear only as derives on the options
//! (verbs/start_options.rs, verbs/verb_options.rs) and schemars on the result
//! views (present/view.rs, exported by present/schema.rs), behind the
//! features `cli` and `schema`, so that each face is derived from that one
//! definition.
//!
//! Layers, each importing only from those above it in this list (a test,
//! `__test__/layers.test.mjs`, fails on an upward import):
//!
//! - `model`: what a job is (record, status, identity), ids, durations,
//!   errors, text cleaning, and the protocol between our processes.
//! - `os`: the process table, identities and signals (pidfd), fork/exec,
//!   finding and signalling a job's tree. Most `unsafe` lives here.
//! - `store`: the home, config, the registry, logs (writer, tail, follow).
//! - `supervise`: the per-job supervisor loop, its output pipe, notifications.
//! - `verbs`: start, check, wait, kill, reconcile, orphans, prune, summary,
//!   snapshots.
//! - `present`: the text and shapes the faces print or return.

// Every unsafe block says why it is sound; clippy keeps it so.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod model;
pub mod os;
pub mod store;
pub mod supervise;
pub mod verbs;
pub mod present;

// Names every layer uses, said short. The root defines nothing itself: an
// item of its own, taken by a module it declares, would tie the two in a
// circle.
pub use model::clock::now_ms;
pub use model::error::{Error, Result};
