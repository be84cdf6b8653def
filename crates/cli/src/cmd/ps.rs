//! `run-bg ps [--mcp]`: a process snapshot, MCP/browser processes marked.

use crate::print_json;
use proc_manager_core::present::format::shorten;
use proc_manager_core::present::view::SnapshotView;
use proc_manager_core::verbs::ops::Context;
use proc_manager_core::verbs::procs;
use proc_manager_core::Result;

pub fn run(context: &Context, mcp: bool, json: bool) -> Result<i32> {
    let snap = procs::snapshot(&context.config.diagnostics.resource_tracking.mcp_patterns);
    let shown: Vec<&procs::ProcessInfo> = snap.processes.iter().filter(|p| !mcp || p.is_mcp).collect();
    if json {
        print_json(&SnapshotView::new(&snap, |p| !mcp || p.is_mcp));
    } else {
        outln!("{:>7} {:>7} {:>8}  COMMAND", "PID", "PPID", "RSS MiB");
        for p in &shown {
            let mark = if p.is_mcp { "[mcp] " } else { "" };
            outln!("{:>7} {:>7} {:>8.1}  {mark}{}", p.pid, p.ppid, p.memory_mb, shorten(&p.command, 100));
        }
        outln!(
            "{} process(es){}, {:.1} MiB resident in all",
            shown.len(),
            if mcp { " matching mcp_patterns" } else { "" },
            shown.iter().fold(0.0, |sum, p| sum + p.memory_mb)
        );
    }
    Ok(0)
}
