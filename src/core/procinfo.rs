//! What the OS says about a process: is it still the one we recorded, and
//! which processes carry a job's environment cookie.

use super::job::ProcessIdentity;

/// Environment variable every process of a job inherits; its value is the job id.
pub const JOB_COOKIE: &str = "PROC_MANAGER_JOB";

/// Parsed from /proc/<pid>/stat: (state, ppid, start ticks).
#[cfg(target_os = "linux")]
fn read_stat(pid: u32) -> Option<(u8, u32, u64)> {
    let raw = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses; the fields follow the last ')'.
    let close = raw.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&raw[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.as_bytes().first().copied()?;
    let ppid = fields.next()?.parse().ok()?;
    // field 22 (starttime) is the 20th after the comm (fields 3..)
    let start = fields.nth(17)?.parse().ok()?;
    Some((state, ppid, start))
}

#[cfg(target_os = "linux")]
pub fn identify(pid: u32) -> Option<ProcessIdentity> {
    let (state, _, start_ticks) = read_stat(pid)?;
    if state == b'Z' || state == b'X' {
        return None;
    }
    Some(ProcessIdentity { pid, start_ticks })
}

#[cfg(not(target_os = "linux"))]
pub fn identify(pid: u32) -> Option<ProcessIdentity> {
    // Without /proc the start time is not read here; liveness is still checked.
    let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    alive.then_some(ProcessIdentity { pid, start_ticks: 0 })
}

/// True when a live (non-zombie) process at `who.pid` has the recorded start
/// time, i.e. it is the very process we recorded and not a pid reuse.
pub fn is_same_process_alive(who: &ProcessIdentity) -> bool {
    identify(who.pid).is_some_and(|now| now.start_ticks == who.start_ticks)
}

/// Live processes whose environment carries `PROC_MANAGER_JOB=<job_id>`,
/// except the calling process. Only processes of this user are readable.
#[cfg(target_os = "linux")]
pub fn processes_with_cookie(job_id: &str) -> Vec<ProcessIdentity> {
    let needle = format!("{JOB_COOKIE}={job_id}\0").into_bytes();
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let carries = environ.starts_with(&needle[..])
            || environ.windows(needle.len() + 1).any(|w| w[0] == 0 && w[1..] == needle[..]);
        if carries {
            if let Some(identity) = identify(pid) {
                found.push(identity);
            }
        }
    }
    found
}

#[cfg(not(target_os = "linux"))]
pub fn processes_with_cookie(_job_id: &str) -> Vec<ProcessIdentity> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifies_self_and_refuses_wrong_start_time() {
        let me = identify(std::process::id()).expect("own process is visible");
        assert!(is_same_process_alive(&me));
        let impostor = ProcessIdentity { pid: me.pid, start_ticks: me.start_ticks + 1 };
        assert!(!is_same_process_alive(&impostor));
    }

    #[test]
    fn finds_a_child_by_cookie() {
        let cookie = format!("test-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(JOB_COOKIE, &cookie)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = Vec::new();
        while std::time::Instant::now() < deadline {
            found = processes_with_cookie(&cookie);
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![child.id()]);
    }
}
