//! The process table for a snapshot on Windows; the same functions as
//! `snapshot_linux.rs`.

use crate::os::platform as portable;
use crate::os::snapshot::{Marker, ProcessInfo};
use crate::os::toolhelp;
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};

/// Chooses the reader, for the platform bench (`bench/platform.mjs`) and
/// diagnosis: `toolhelp` or `sysinfo`.
pub const SOURCE_VAR: &str = "PROC_MANAGER_WINDOWS_PROCESS_TABLE";

/// Every process, marked `is_mcp` by `mark` on its command line and its
/// executable's name (`chrome.exe`, `msedge.exe`, …).
pub fn processes(mark: Option<Marker>) -> Vec<ProcessInfo> {
    match std::env::var(SOURCE_VAR).as_deref() {
        Ok("sysinfo") => from_sysinfo(mark),
        _ => from_toolhelp(mark),
    }
}

fn from_toolhelp(mark: Option<Marker>) -> Vec<ProcessInfo> {
    toolhelp::processes(true)
        .into_iter()
        .filter(|p| p.pid != 0)
        .map(|p| {
            let command = if p.argv.is_empty() { format!("[{}]", p.name) } else { p.argv.join(" ") };
            let is_mcp = mark.is_some_and(|mark| mark(&command, Some(&p.name)));
            ProcessInfo {
                pid: p.pid,
                ppid: p.ppid,
                command,
                memory_mb: p.working_set_bytes as f64 / (1024.0 * 1024.0),
                start_time: p.started_ms.unwrap_or(0),
                is_mcp,
                job_id: None,
            }
        })
        .collect()
}

fn from_sysinfo(mark: Option<Marker>) -> Vec<ProcessInfo> {
    let Ok(mut system) = System::new() else { return Vec::new() };
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_memory().with_cmd(UpdateKind::Always),
    );
    system
        .processes()
        .values()
        .filter(|p| p.pid().as_u32() != 0)
        .map(|p| {
            let command = portable::command(p);
            let name = p.name().to_string_lossy();
            let is_mcp = mark.is_some_and(|mark| mark(&command, Some(&name)));
            ProcessInfo {
                pid: p.pid().as_u32(),
                ppid: p.parent().map(|pp| pp.as_u32()).unwrap_or(0),
                command,
                memory_mb: p.memory() as f64 / (1024.0 * 1024.0),
                start_time: p.start_time() * 1000,
                is_mcp,
                job_id: None,
            }
        })
        .collect()
}

pub use crate::os::no_subreaper::{
    is_child_subreaper, is_ending, own_children, pss_kb, reap_exactly, set_child_subreaper, CHILD_SUBREAPERS, READS_PSS,
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn me(table: &[ProcessInfo]) -> ProcessInfo {
        table.iter().find(|p| p.pid == std::process::id()).cloned().expect("this test's own process in the table")
    }

    /// The default reader sees this test's own process as it is: its argv
    /// (which sysinfo reads as `[name]` under wine 8, whose kernel keeps no
    /// copy of command lines), and parent, start (sysinfo's to the second)
    /// and working set as sysinfo reads them.
    #[test]
    fn the_table_reads_this_process_argv_parent_start_and_memory() {
        let (read, by_sysinfo) = (me(&processes(None)), me(&from_sysinfo(None)));
        assert_eq!(read.command, std::env::args().collect::<Vec<_>>().join(" "));
        if !by_sysinfo.command.starts_with('[') {
            assert_eq!(read.command, by_sysinfo.command);
        }
        assert_eq!(read.ppid, by_sysinfo.ppid);
        assert_eq!(read.start_time / 1000 * 1000, by_sysinfo.start_time);
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(read.start_time > now_ms - 600_000 && read.start_time <= now_ms, "{}", read.start_time);
        assert!(read.memory_mb > 1.0 && (read.memory_mb - by_sysinfo.memory_mb).abs() < 16.0, "{} vs {}", read.memory_mb, by_sysinfo.memory_mb);
    }

    /// The process table read by each reader and listed by `tasklist`, timed
    /// side by side in one run inside Rust (medians of 15; the readers'
    /// samples interleaved, each going first in turn), as
    /// scripts/bench-windows.sh runs it:
    ///   cargo test --release --target x86_64-pc-windows-gnu -p proc-manager-core \
    ///     process_table_readers_timed -- --ignored --nocapture
    #[test]
    #[ignore = "a benchmark, run by scripts/bench-windows.sh"]
    fn process_table_readers_timed() {
        let timed = |read: &dyn Fn() -> usize| {
            let t = Instant::now();
            let rows = read();
            (t.elapsed().as_secs_f64() * 1000.0, rows)
        };
        let median = |mut samples: Vec<(f64, usize)>| {
            samples.sort_by(|a, b| a.0.total_cmp(&b.0));
            samples[samples.len() / 2]
        };
        let (mut toolhelp, mut sysinfo) = (Vec::new(), Vec::new());
        for i in 0..15 {
            if i % 2 == 0 {
                toolhelp.push(timed(&|| from_toolhelp(None).len()));
                sysinfo.push(timed(&|| from_sysinfo(None).len()));
            } else {
                sysinfo.push(timed(&|| from_sysinfo(None).len()));
                toolhelp.push(timed(&|| from_toolhelp(None).len()));
            }
        }
        let tasklist = median(
            (0..15)
                .map(|_| {
                    timed(&|| {
                        let out = std::process::Command::new("tasklist").output().expect("tasklist");
                        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).count()
                    })
                })
                .collect(),
        );
        let (toolhelp, sysinfo) = (median(toolhelp), median(sysinfo));
        println!("| reader (inside Rust) | median (ms) | rows |");
        println!("|---|---|---|");
        println!("| Toolhelp32 | {:.2} | {} processes |", toolhelp.0, toolhelp.1);
        println!("| sysinfo | {:.2} | {} processes |", sysinfo.0, sysinfo.1);
        println!("| `tasklist`, spawned | {:.2} | {} lines out |", tasklist.0, tasklist.1);
    }
}
