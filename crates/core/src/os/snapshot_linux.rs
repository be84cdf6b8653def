//! Linux's reading of the process table for a snapshot, from /proc, and of
//! this process's own children; `snapshot_macos.rs` has the same functions.

use crate::os::snapshot::{Child, Marker, ProcessInfo};
use crate::os::platform::read_proc_file;
use crate::os::procinfo::{parse_stat, stat_comm, stat_comm_bytes};
use std::fmt::Write;
use std::sync::OnceLock;

struct Clock {
    boot_ms: u64,
    ms_per_tick: u64,
    page_kb: u64,
}

fn clock() -> &'static Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    CLOCK.get_or_init(|| {
        let boot_secs = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok()))
            .unwrap_or(0);
        // SAFETY: sysconf takes an integer name and touches no memory of
        // ours; an error (-1) is clamped to 1 below.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Clock { boot_ms: boot_secs * 1000, ms_per_tick: 1000 / ticks, page_kb: crate::os::platform::page_kb() }
    })
}

/// Start time in epoch ms from the start ticks of /proc/<pid>/stat.
pub fn ticks_to_epoch_ms(ticks: u64) -> u64 {
    let c = clock();
    c.boot_ms + ticks * c.ms_per_tick
}

/// Every live process, marked `is_mcp` by `mark` (none: nothing is
/// marked). With many processes the reads are split over a few
/// threads: they are independent syscalls, and the cores are there.
pub fn processes(mark: Option<Marker>) -> Vec<ProcessInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let pids: Vec<u32> =
        entries.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if workers < 2 || pids.len() < 256 {
        return read_processes(&pids, mark);
    }
    let chunk = pids.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let handles: Vec<_> = pids.chunks(chunk).map(|part| scope.spawn(move || read_processes(part, mark))).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

fn read_processes(pids: &[u32], mark: Option<Marker>) -> Vec<ProcessInfo> {
    let page_kb = clock().page_kb;
    let mut result = Vec::with_capacity(pids.len());
    let mut path = String::with_capacity(32);
    let mut stat = Vec::with_capacity(1024);
    let mut cmdline = Vec::with_capacity(4096);
    for &pid in pids {
        path.clear();
        let _ = write!(path, "/proc/{pid}/stat");
        if !read_proc_file(&path, &mut stat, 4096) {
            continue; // exited meanwhile
        }
        // An exiting process (PF_EXITING: killed, not yet a zombie) is as
        // good as gone: its children are being re-parented already.
        let Some(fields) = parse_stat(&stat).filter(|f| !f.is_dead() && f.flags & PF_EXITING == 0) else { continue };
        path.truncate(path.len() - "stat".len());
        path.push_str("cmdline");
        // A kernel thread's cmdline is empty: not worth an open per thread.
        let command = if !fields.is_kernel_thread()
            && read_proc_file(&path, &mut cmdline, 64 * 1024)
            && !cmdline.is_empty()
        {
            if cmdline.last() == Some(&0) {
                cmdline.pop();
            }
            for byte in cmdline.iter_mut().filter(|b| **b == 0) {
                *byte = b' ';
            }
            String::from_utf8_lossy(&cmdline).into_owned()
        } else {
            format!("[{}]", stat_comm(&stat))
        };
        // The executable's name is read only where it can name the
        // program differently from argv[0]: a readlink for every process
        // made snapshot() 1.4x slower (565 processes: 5.8 -> 8.3 ms). A
        // kernel thread has no executable at all.
        let is_mcp = mark.is_some_and(|mark| {
            let exe = if fields.is_kernel_thread() || !exe_may_differ(&command, stat_comm_bytes(&stat)) {
                None
            } else {
                path.truncate(path.len() - "cmdline".len());
                path.push_str("exe");
                exe_name(&path)
            };
            mark(&command, exe.as_deref())
        });
        result.push(ProcessInfo {
            pid,
            ppid: fields.ppid,
            command,
            memory_mb: (fields.rss_pages * page_kb) as f64 / 1024.0,
            start_time: ticks_to_epoch_ms(fields.start_ticks),
            is_mcp,
            job_id: None,
        });
    }
    result
}

const PF_EXITING: u64 = 0x4;

/// Whether a process's executable can have another name than argv[0]'s
/// base name. The kernel names a process (`comm`, at most 15 bytes)
/// after the file it executed, so where argv[0]'s base name is that name
/// the executable is the same program, except when it was started
/// through a link whose name says nothing (`/proc/self/exe`, how
/// Chromium and Electron start their zygotes; `/proc/self/fd/N`;
/// `/dev/fd/N`) or it rewrote its title: Node's `process.title` and
/// Python's setproctitle set comm and argv[0] alike, but leave the rest
/// of the old command line as NULs, which `command` ends in as spaces. A
/// script (comm is the script's name, argv[0] its interpreter) gets its
/// executable read too. Missed: a program run through a symlink of
/// another name (`python3` -> `python3.12`, a busybox applet) whose
/// target's name alone matches a pattern.
fn exe_may_differ(command: &str, comm: &[u8]) -> bool {
    if command.ends_with(' ') {
        return true;
    }
    let argv0 = command.split(' ').next().unwrap_or("");
    if argv0.starts_with("/proc/") || argv0.starts_with("/dev/fd/") {
        return true;
    }
    let base = argv0.rsplit('/').next().unwrap_or(argv0).as_bytes();
    const COMM_MAX: usize = 15;
    let named_alike = base == comm || (comm.len() == COMM_MAX && base.starts_with(comm));
    !named_alike
}

/// The base name of the executable behind `exe_link` (/proc/<pid>/exe),
/// where this user may read it.
fn exe_name(exe_link: &str) -> Option<String> {
    let target = std::fs::read_link(exe_link).ok()?;
    // A replaced binary reads `/usr/bin/x (deleted)`.
    let name = target.file_name()?.to_string_lossy().trim_end_matches(" (deleted)").to_string();
    Some(name)
}

/// Proportional set size in KiB (shared pages split among their users),
/// from /proc/<pid>/smaps_rollup; None where it cannot be read.
pub fn pss_kb(pid: u32) -> Option<u64> {
    let mut buf = Vec::with_capacity(1024);
    if !read_proc_file(&format!("/proc/{pid}/smaps_rollup"), &mut buf, 8192) {
        return None;
    }
    let text = std::str::from_utf8(&buf).ok()?;
    text.lines().find_map(|l| l.strip_prefix("Pss:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// Field 6 of /proc/<pid>/stat, counted after the command name's `)`.
fn session_of(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    std::str::from_utf8(&stat[close + 1..]).ok()?.split_ascii_whitespace().nth(3)?.parse().ok()
}

/// Whether `pid` is on its way out but has not yet handed its children
/// on: SIGKILL is pending, or its exit has begun (PF_EXITING) and it is
/// not a zombie yet. Read in the order those come, so that one moving on
/// between the two reads is seen in the second.
pub fn is_ending(pid: u32) -> bool {
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    let mut buf = Vec::with_capacity(2048);
    if !read_proc_file(&format!("/proc/{pid}/status"), &mut buf, 16384) {
        return false;
    }
    let pending = String::from_utf8_lossy(&buf).lines().any(|line| {
        let mask = line.strip_prefix("SigPnd:").or_else(|| line.strip_prefix("ShdPnd:"));
        mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).is_some_and(|m| m & SIGKILL_BIT != 0)
    });
    if pending {
        return true;
    }
    if !read_proc_file(&format!("/proc/{pid}/stat"), &mut buf, 4096) {
        return false;
    }
    parse_stat(&buf).is_some_and(|stat| !stat.is_dead() && stat.flags & PF_EXITING != 0)
}

/// Every direct child of the calling process, zombies included, with
/// their states (Z: exited, not yet reaped).
pub fn own_children() -> Vec<Child> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) else { return found };
    let mut buf = Vec::with_capacity(256);
    for task in tasks.flatten() {
        let path = format!("{}/children", task.path().display());
        if !read_proc_file(&path, &mut buf, 1 << 20) {
            continue;
        }
        for pid in String::from_utf8_lossy(&buf).split_ascii_whitespace().filter_map(|c| c.parse::<u32>().ok()) {
            let mut stat = Vec::with_capacity(512);
            if !read_proc_file(&format!("/proc/{pid}/stat"), &mut stat, 4096) {
                continue;
            }
            if let Some(fields) = parse_stat(&stat).filter(|f| f.ppid == me) {
                found.push(Child {
                    pid,
                    start_time: ticks_to_epoch_ms(fields.start_ticks),
                    zombie: fields.state == b'Z',
                    session: session_of(&stat),
                });
            }
        }
    }
    found
}

/// Child subreapers exist here (prctl PR_SET_CHILD_SUBREAPER).
pub const CHILD_SUBREAPERS: bool = true;

/// Proportional set sizes can be read (`pss_kb`).
pub const READS_PSS: bool = true;

/// Whether this process is a child subreaper now.
pub fn is_child_subreaper() -> bool {
    rustix::process::child_subreaper().map(|p| p.is_some()).unwrap_or(false)
}

/// Makes this process a child subreaper, or stops it being one.
pub fn set_child_subreaper(on: bool) -> rustix::io::Result<()> {
    rustix::process::set_child_subreaper(on.then(rustix::process::getpid))
}

/// Reaps the zombie `child` and nothing else: a pidfd pins the process, its
/// start time is checked after, and waitid on the pidfd takes only it.
pub fn reap_exactly(child: Child) {
    use rustix::process::{waitid, WaitId, WaitIdOptions};
    let Ok(fd) = crate::os::pidfd::open_checked(child.pid) else { return };
    let same = own_children().iter().any(|c| c.pid == child.pid && c.start_time == child.start_time && c.zombie);
    if same {
        let _ = waitid(WaitId::PidFd(std::os::fd::AsFd::as_fd(&fd)), WaitIdOptions::EXITED | WaitIdOptions::NOHANG);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executable_is_read_only_where_it_can_name_another_program() {
        let differs = |command: &str, comm: &str| exe_may_differ(command, comm.as_bytes());
        assert!(!differs("/usr/bin/sleep 600", "sleep"), "started by its own name");
        assert!(!differs("sleep 600", "sleep"), "found in PATH");
        assert!(!differs("/opt/x/mcp-server-filesystem-extra --stdio", "mcp-server-file"), "a long name, cut to 15 bytes");
        assert!(differs("/proc/self/exe --type=zygote", "exe"), "re-executed through /proc/self/exe");
        assert!(differs("/proc/self/fd/3 --type=zygote", "3"), "through a descriptor");
        assert!(differs("/dev/fd/4", "4"), "through /dev/fd");
        assert!(differs("my-title    ", "my-title"), "a title set by process.title: comm alike, NUL padding after it");
        assert!(differs("my-title", "node"), "argv[0] rewritten alone");
        assert!(differs("node /x/.bin/mcp-server-git", "mcp-server-git"), "a script: comm names the script");
        assert!(differs("/usr/bin/sleepy 1", "sleep"), "a name that only starts alike");
    }

    /// What the kernel reports for a real process started through
    /// /proc/self/exe (as Chromium starts its zygote): its executable is read.
    #[test]
    fn a_program_reexecuted_through_proc_self_exe_is_marked_by_its_executable() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        // A copy of this test binary named like a browser, started as
        // `/proc/self/exe`: argv[0] says nothing, the executable does. (Not
        // a copy of sleep: where that is a multi-call binary, busybox or
        // uutils, it would pick its tool by the name `exe`.)
        let browser = dir.path().join("chromium");
        std::fs::copy(std::env::current_exe().unwrap(), &browser).unwrap();
        // The copy can be "busy" (ETXTBSY) for a moment: another test
        // thread's fork copied our write descriptor, and its child holds it
        // until its own exec. That is the harness's threads, so it is waited
        // out (bounded).
        let busy_until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut child = loop {
            let spawned = std::process::Command::new(&browser)
                .arg0("/proc/self/exe")
                .args(["--ignored", "--exact", "os::snapshot_platform::tests::waits_until_its_stdin_closes", "--test-threads=1"])
                .env("PM_TEST_WAIT_ON_STDIN", "1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn();
            match spawned {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && std::time::Instant::now() < busy_until => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                other => break other.unwrap(),
            }
        };
        let pid = child.id();
        // Marked where the executable read is the browser's (verbs' MCP
        // matching would say the same of `chromium`).
        let mark = |_: &str, exe: Option<&str>| exe == Some("chromium");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let found = processes(Some(&mark)).into_iter().find(|p| p.pid == pid);
            if found.as_ref().is_some_and(|p| p.command.starts_with("/proc/self/exe")) || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let _ = child.kill();
        let _ = child.wait();
        let found = found.expect("the child is in the snapshot");
        assert!(found.is_mcp, "marked through its executable: {found:?}");
    }

    /// Not a check: the process the test above starts, which must stay
    /// alive until it is killed (it waits on a pipe nobody writes).
    #[test]
    #[ignore]
    fn waits_until_its_stdin_closes() {
        if std::env::var_os("PM_TEST_WAIT_ON_STDIN").is_some() {
            let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
        }
    }
}
