//! Who holds a TCP port, for `--ready-port` (Linux): a port counts as the
//! job's only when a listening socket on it is open in one of the job's own
//! processes. A connect alone cannot tell: a stranger already listening on
//! the port (the reason the job's server failed to bind it) accepts too.
//! The listening sockets come from /proc/net/tcp and tcp6 (state 0A, the
//! local port), each known by its inode; a process holds one when a link in
//! its /proc/<pid>/fd reads `socket:[<inode>]`. Not every process's fds may
//! be read: a supervisor that is not root gets EACCES for a process that is
//! non-dumpable (setuid or `setcap` binaries, `sudo`, PR_SET_DUMPABLE 0).
//! When one of the job's processes is such and no process we may read holds
//! the socket, the socket's owner (the uid column) is matched against that
//! process's uids instead, and a stranger found that way is not remembered:
//! the verdict rests on what could not be read. A read of /proc/net/tcp
//! walks the kernel's whole TCP table (about 2 ms each here, so 10 probes a
//! second cost 4% of a core), so a connect comes first, as the probe always
//! was: only a port that accepts is looked up. `ports_macos.rs` has the same
//! API.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A connect to loopback is answered at once; this only bounds a stuck one.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);

/// TCP_LISTEN in /proc/net/tcp's `st` column.
const LISTEN_STATE: &str = "0A";

pub use crate::os::PortHolder;

/// One socket listening on the port, from /proc/net/tcp{,6}.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Listener {
    inode: u64,
    /// Who created it (the effective uid of the process then).
    uid: u32,
}

/// What one process's descriptors say about the listening sockets.
#[derive(Debug, PartialEq, Eq)]
enum Holds {
    Yes,
    No,
    /// Its /proc/<pid>/fd refused us (EACCES/EPERM): it may or may not.
    Unreadable,
}

/// One job's port: the inodes found held by others are remembered, so a
/// stranger that keeps the port costs a read of /proc/net/tcp per probe,
/// not a pass over every process.
#[derive(Debug)]
pub struct PortWatch {
    port: u16,
    foreign: HashSet<u64>,
    stranger: Option<String>,
}

impl PortWatch {
    pub fn new(port: u16) -> PortWatch {
        PortWatch { port, foreign: HashSet::new(), stranger: None }
    }

    /// Looks once. `job_pids` gives the job's live processes; it is called
    /// only when a listener not already known to be a stranger's is there.
    pub fn look(&mut self, job_pids: &dyn Fn() -> Vec<u32>) -> PortHolder {
        let addrs = [SocketAddr::from(([127, 0, 0, 1], self.port)), SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, self.port))];
        if !addrs.iter().any(|addr| TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).is_ok()) {
            return PortHolder::Free;
        }
        let listeners = listeners_on(self.port);
        let listening: Vec<u64> = listeners.iter().map(|l| l.inode).collect();
        if listening.is_empty() {
            // It accepts, yet no socket of this network namespace listens:
            // a forward (docker's iptables rules) or a listener gone since.
            return PortHolder::Stranger("a forwarding rule (no process of this network namespace listens on it)".into());
        }
        if listening.iter().all(|inode| self.foreign.contains(inode)) {
            if let Some(who) = &self.stranger {
                return PortHolder::Stranger(who.clone());
            }
        }
        let mut unreadable = Vec::new();
        for pid in job_pids() {
            match holds_any(pid, &listening) {
                Holds::Yes => return PortHolder::Ours,
                Holds::Unreadable => unreadable.push(pid),
                Holds::No => {}
            }
        }
        let who = match holder_of(&listening) {
            Some((pid, name)) => format!("pid {pid} ({})", crate::model::text::visible(&name)),
            None if !unreadable.is_empty() => return owner_verdict(self.port, &listeners, &unreadable),
            None => "another process".to_string(),
        };
        self.foreign.extend(listening);
        self.stranger = Some(who.clone());
        PortHolder::Stranger(who)
    }
}

/// The job holds the port by the only evidence left: no process we may read
/// holds its socket, and one of the job's processes whose descriptors we may
/// not read runs as the uid that created it. A uid no such process has is a
/// stranger's (another user's server, or the job's after it changed uid:
/// then it is not ready by its port); neither verdict is remembered, since
/// it rests on what could not be read.
fn owner_verdict(port: u16, listeners: &[Listener], unreadable: &[u32]) -> PortHolder {
    for &pid in unreadable {
        let uids = process_uids(pid);
        if let Some(listener) = listeners.iter().find(|l| uids.contains(&l.uid)) {
            tracing::warn!(
                "port {port}: counted as the job's by its owner, uid {}, the uid of job process {pid}, whose descriptors this supervisor may not read (it is not dumpable)",
                listener.uid
            );
            return PortHolder::Ours;
        }
    }
    let owners: Vec<String> = listeners.iter().map(|l| l.uid.to_string()).collect();
    PortHolder::Stranger(format!("a process of uid {} whose descriptors this supervisor may not read", owners.join(", ")))
}

/// The real, effective, saved and filesystem uids of `pid` (its `status`
/// stays readable when its descriptors are not); empty once it is gone.
fn process_uids(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return Vec::new() };
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .map(|uids| uids.split_whitespace().filter_map(|uid| uid.parse().ok()).collect())
        .unwrap_or_default()
}

/// The sockets listening on `port` at an address a connect to 127.0.0.1 or
/// ::1 reaches: loopback or the wildcard, v4, v6 or v4-mapped.
fn listeners_on(port: u16) -> Vec<Listener> {
    let mut listeners = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        listeners.extend(text.lines().skip(1).filter_map(|line| listener_on(line, port)));
    }
    listeners
}

/// A line of /proc/net/tcp{,6}: `sl local_address rem_address st … uid
/// timeout inode …`, the address as hex words in host byte order, `:` and
/// the port in hex.
fn listener_on(line: &str, port: u16) -> Option<Listener> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (local, state, uid, inode) = (fields.get(1)?, fields.get(3)?, fields.get(7)?, fields.get(9)?);
    if *state != LISTEN_STATE {
        return None;
    }
    let (address, local_port) = local.split_once(':')?;
    if u16::from_str_radix(local_port, 16).ok()? != port || !reachable_from_loopback(address)? {
        return None;
    }
    let inode = inode.parse().ok().filter(|&inode| inode != 0)?;
    Some(Listener { inode, uid: uid.parse().ok()? })
}

fn reachable_from_loopback(hex: &str) -> Option<bool> {
    let mut bytes = Vec::with_capacity(16);
    for word in 0..hex.len() / 8 {
        let value = u32::from_str_radix(hex.get(word * 8..word * 8 + 8)?, 16).ok()?;
        // The kernel prints each 32-bit word of the address as it sits in memory, read as a native integer.
        bytes.extend_from_slice(&value.to_ne_bytes());
    }
    Some(match bytes.len() {
        4 => bytes[0] == 127 || bytes == [0; 4],
        16 => {
            let ip = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes.as_slice()).ok()?);
            ip.is_unspecified() || ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        _ => return None,
    })
}

/// Whether one of `pid`'s descriptors is one of the sockets `inodes`.
fn holds_any(pid: u32, inodes: &[u64]) -> Holds {
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(fds) => fds,
        // EACCES and EPERM both: not ours to read. Anything else (ENOENT): gone.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Holds::Unreadable,
        Err(_) => return Holds::No,
    };
    if fds.flatten().any(|fd| socket_inode(&fd.path()).is_some_and(|inode| inodes.contains(&inode))) {
        Holds::Yes
    } else {
        Holds::No
    }
}

fn socket_inode(link: &std::path::Path) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    let target = target.to_str()?;
    target.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The first process whose descriptors we may read that holds one of
/// `inodes`, with its name (`comm`).
fn holder_of(inodes: &[u64]) -> Option<(u32, String)> {
    let me = std::process::id();
    let pids = std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    let pid = pids.filter(|&pid| pid != me).find(|&pid| holds_any(pid, inodes) == Holds::Yes)?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim_end().to_string();
    Some((pid, name))
}

/// The TCP ports each process listens on, for `list` and `top`: the
/// listening sockets (any address) from /proc/net/tcp{,6}, matched against
/// the sockets in each process's /proc/<pid>/fd. Reading every descriptor of
/// every process of 50 jobs each second would cost more than the rest of a
/// refresh, so what a process holds is remembered (by pid and start time)
/// until the set of listening sockets changes: a new listener anywhere
/// makes every process be read again.
#[derive(Debug, Default)]
pub struct ListeningPorts {
    /// Listening socket inode → its port, as of the last `refresh`.
    listening: HashMap<u64, u16>,
    /// The listening inodes each process held, read while `listening` was as it is.
    held: HashMap<(u32, u64), Vec<u64>>,
    /// The processes asked about since the last `refresh` (the rest are forgotten).
    asked: HashSet<(u32, u64)>,
}

impl ListeningPorts {
    pub fn new() -> ListeningPorts {
        ListeningPorts::default()
    }

    /// Reads the listening sockets again; call once per look, before `ports_of`.
    pub fn refresh(&mut self) {
        let mut listening = HashMap::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else { continue };
            listening.extend(text.lines().skip(1).filter_map(any_listener));
        }
        if listening != self.listening {
            self.held.clear();
            self.listening = listening;
        }
        let asked = std::mem::take(&mut self.asked);
        self.held.retain(|who, _| asked.contains(who));
    }

    /// The ports `pid` (which started at `start_ticks`) listens on, sorted;
    /// `None` where that cannot be told (here: its descriptors are not ours to read).
    pub fn ports_of(&mut self, pid: u32, start_ticks: u64) -> Option<Vec<u16>> {
        if self.listening.is_empty() {
            return Some(Vec::new());
        }
        let who = (pid, start_ticks);
        self.asked.insert(who);
        if !self.held.contains_key(&who) {
            let held = held_sockets(pid, &self.listening)?;
            self.held.insert(who, held);
        }
        let mut ports: Vec<u16> = self.held[&who].iter().filter_map(|inode| self.listening.get(inode).copied()).collect();
        ports.sort_unstable();
        ports.dedup();
        Some(ports)
    }
}

/// A listening socket's inode and port from a line of /proc/net/tcp{,6}.
fn any_listener(line: &str) -> Option<(u64, u16)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
    if *state != LISTEN_STATE {
        return None;
    }
    let port = u16::from_str_radix(local.split_once(':')?.1, 16).ok()?;
    Some((inode.parse().ok().filter(|&inode| inode != 0)?, port))
}

/// Which of the `listening` sockets `pid` holds; `None` when its
/// descriptors are not ours to read.
fn held_sockets(pid: u32, listening: &HashMap<u64, u16>) -> Option<Vec<u64>> {
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(fds) => fds,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return None,
        Err(_) => return Some(Vec::new()),
    };
    Some(fds.flatten().filter_map(|fd| socket_inode(&fd.path())).filter(|inode| listening.contains_key(inode)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ports_a_process_listens_on_are_found_and_forgotten_when_closed() {
        let me = std::process::id();
        let start = crate::os::procinfo::identify(me).unwrap().start_ticks;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut ports = ListeningPorts::new();
        ports.refresh();
        assert!(ports.ports_of(me, start).unwrap().contains(&port));
        drop(listener);
        ports.refresh();
        assert!(!ports.ports_of(me, start).unwrap().contains(&port), "closed: read again, since the listening set changed");
    }

    #[test]
    fn listeners_are_read_from_proc_net_tcp_lines() {
        let v4 = "   1: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listener_on(v4, 3000), Some(Listener { inode: 4242, uid: 1000 }));
        assert_eq!(listener_on(v4, 3001), None, "another port");
        let established = v4.replace(" 0A ", " 01 ");
        assert_eq!(listener_on(&established, 3000), None, "not listening");
        let elsewhere = v4.replace("0100007F", "0500000A");
        assert_eq!(listener_on(&elsewhere, 3000), None, "10.0.0.5 is not reached from loopback");
        let any = v4.replace("0100007F", "00000000");
        assert_eq!(listener_on(&any, 3000).map(|l| l.inode), Some(4242));
        let v6_loopback = "   0: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0 100 0 0 10 0";
        assert_eq!(listener_on(v6_loopback, 3000), Some(Listener { inode: 77, uid: 1000 }));
        let v6_any = v6_loopback.replace("00000000000000000000000001000000:", "00000000000000000000000000000000:");
        assert_eq!(listener_on(&v6_any, 3000).map(|l| l.inode), Some(77));
    }

    #[test]
    fn a_listener_of_this_process_is_ours_and_a_stranger_is_named() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        assert_eq!(PortWatch::new(port).look(&|| vec![me]), PortHolder::Ours);
        // Not ours by the job's processes: the holder is looked for among the rest,
        // and this process is the prober itself, so it is `another process`, or
        // the child of another test's fork(), which holds a copy of the socket
        // until it execs (close-on-exec).
        let stranger = PortWatch::new(port).look(&Vec::new);
        assert!(
            stranger == PortHolder::Stranger("another process".into())
                || matches!(&stranger, PortHolder::Stranger(who) if who.starts_with("pid ") && !who.starts_with(&format!("pid {me} "))),
            "{stranger:?}"
        );
        drop(listener);
        // Such a forked copy is closed at its exec: wait for that.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut look = PortWatch::new(port).look(&|| vec![me]);
        while look != PortHolder::Free && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            look = PortWatch::new(port).look(&|| vec![me]);
        }
        assert_eq!(look, PortHolder::Free);
    }

    #[test]
    fn an_unreadable_job_process_holds_a_socket_its_uid_created_and_not_another_uids() {
        let me = std::process::id();
        let my_uid = process_uids(me)[1];
        let mine = [Listener { inode: 1, uid: my_uid }];
        assert_eq!(owner_verdict(3000, &mine, &[me]), PortHolder::Ours);
        let other_uid = my_uid.wrapping_add(1);
        let theirs = [Listener { inode: 1, uid: other_uid }];
        assert_eq!(
            owner_verdict(3000, &theirs, &[me]),
            PortHolder::Stranger(format!("a process of uid {other_uid} whose descriptors this supervisor may not read"))
        );
    }
}
