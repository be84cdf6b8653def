//! Who holds the registry's lock, for the message a waiter gets once it
//! gives up: the holder's pid from the kernel's lock table and its state,
//! both read from /proc.

/// The pid holding a flock on `path`, from /proc/locks. Reading that file
/// takes the kernel's file-lock rwsem for writing, which stalls every flock
/// on the machine: only for a waiter that has given up.
pub fn flock_holder(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let dev = meta.dev();
    let id = format!("{:02x}:{:02x}:{}", libc::major(dev), libc::minor(dev), meta.ino());
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    table.lines().filter(|line| !line.contains("->")).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 4242 00:2d:1234 0 EOF"
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&id.as_str()))
            .then(|| fields.get(4).and_then(|p| p.parse::<u32>().ok()).filter(|&p| p > 0))
            .flatten()
    })
}

/// What the process is doing, in words: a holder that is stopped or stuck
/// on a disk is what keeps everyone waiting.
pub fn run_state(pid: u32) -> Option<&'static str> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.get(stat.rfind(')')? + 2..)?.chars().next()?;
    Some(match state {
        'R' => "running",
        'S' | 'I' => "sleeping",
        'D' => "waiting on a disk or network filesystem",
        'T' => "stopped (SIGSTOP or job control)",
        't' => "stopped by a debugger",
        'Z' => "a zombie",
        _ => return None,
    })
}
