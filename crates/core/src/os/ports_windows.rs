//! Who holds a TCP port, for `--ready-port` (Windows): the same API as
//! `ports_linux.rs`. A port counts as the job's only when a socket listening
//! on it is owned by one of the job's processes (those in its Job Object): a
//! stranger already listening there (the reason the job's server could not
//! bind it) accepts a connect too. `GetExtendedTcpTable` with
//! `TCP_TABLE_OWNER_PID_LISTENER` gives every listening socket with its
//! owner's pid, for IPv4 and IPv6. As on Linux a connect comes first: only a
//! port that accepts is looked up.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;
use windows_sys::Win32::NetworkManagement::IpHelper::{
    GetExtendedTcpTable, MIB_TCP6ROW_OWNER_PID, MIB_TCPROW_OWNER_PID, MIB_TCP_STATE_LISTEN, TCP_TABLE_OWNER_PID_LISTENER,
};

/// A connect to loopback is answered at once; this only bounds a stuck one.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
const AF_INET: u32 = 2;
const AF_INET6: u32 = 23;
/// GetExtendedTcpTable's answer when the buffer was too small (it then says
/// how big a one it needs).
const ERROR_INSUFFICIENT_BUFFER: u32 = 122;

pub use crate::os::PortHolder;

#[derive(Debug)]
pub struct PortWatch {
    port: u16,
    /// The table could not be read, or named no owner: said once, not at every probe.
    warned: bool,
}

impl PortWatch {
    pub fn new(port: u16) -> PortWatch {
        PortWatch { port, warned: false }
    }

    /// Looks once. `job_pids` gives the job's live processes; it is called
    /// only when the port accepts.
    pub fn look(&mut self, job_pids: &dyn Fn() -> Vec<u32>) -> PortHolder {
        let addrs = [SocketAddr::from((Ipv4Addr::LOCALHOST, self.port)), SocketAddr::from((Ipv6Addr::LOCALHOST, self.port))];
        if !addrs.iter().any(|addr| TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).is_ok()) {
            return PortHolder::Free;
        }
        let owners = match listener_pids(self.port) {
            Ok(owners) => owners,
            Err(e) => {
                // Without the table a stranger cannot be told from the job:
                // what accepts counts, as on macOS.
                if !std::mem::replace(&mut self.warned, true) {
                    tracing::warn!("port {}: cannot read the TCP table ({e}); a listener on it counts as the job's", self.port);
                }
                return PortHolder::Ours;
            }
        };
        if owners.is_empty() {
            // It accepts, yet nothing listens on it by the table: a listener
            // gone since the connect, or one reached through a forward.
            return PortHolder::Stranger("a process this supervisor cannot see (no listening socket in the TCP table)".into());
        }
        // Pid 0 (the idle process, which holds no socket) is how wine 8's
        // table says it does not know the owner: then, as without a table.
        if owners.iter().all(|&pid| pid == 0) {
            if !std::mem::replace(&mut self.warned, true) {
                tracing::warn!("port {}: the TCP table names no owner of its listener (pid 0); a listener on it counts as the job's", self.port);
            }
            return PortHolder::Ours;
        }
        let ours = job_pids();
        if owners.iter().any(|pid| ours.contains(pid)) {
            return PortHolder::Ours;
        }
        let pid = owners.iter().copied().find(|&pid| pid != 0).unwrap_or_default();
        let command = crate::os::platform::command_line(pid);
        let name = command.split_whitespace().next().map(|program| program.rsplit(['\\', '/']).next().unwrap_or(program)).unwrap_or("");
        PortHolder::Stranger(format!("pid {pid} ({})", crate::model::text::visible(name)))
    }
}

/// The ports each process listens on, for `list` and `top`: one read of the
/// TCP tables per look gives every listener with its owner's pid.
#[derive(Debug, Default)]
pub struct ListeningPorts {
    /// Owner pid → its listening ports, as of the last `refresh`; `None`
    /// when the table could not be read or names no owner (wine 8 says pid 0
    /// for every socket), so a column says "cannot tell", not "none".
    by_pid: Option<std::collections::HashMap<u32, Vec<u16>>>,
}

impl ListeningPorts {
    pub fn new() -> ListeningPorts {
        ListeningPorts::default()
    }

    /// Reads the listening sockets again; call once per look, before `ports_of`.
    pub fn refresh(&mut self) {
        let Ok(v4) = listening_rows::<MIB_TCPROW_OWNER_PID>(AF_INET) else {
            self.by_pid = None;
            return;
        };
        let v6 = listening_rows::<MIB_TCP6ROW_OWNER_PID>(AF_INET6).unwrap_or_default();
        let rows = v4
            .iter()
            .filter(|row| row.dwState == MIB_TCP_STATE_LISTEN as u32)
            .map(|row| (row.dwOwningPid, u16::from_be(row.dwLocalPort as u16)))
            .chain(
                v6.iter()
                    .filter(|row| row.dwState == MIB_TCP_STATE_LISTEN as u32)
                    .map(|row| (row.dwOwningPid, u16::from_be(row.dwLocalPort as u16))),
            );
        let mut by_pid: std::collections::HashMap<u32, Vec<u16>> = std::collections::HashMap::new();
        let mut any = false;
        for (pid, port) in rows {
            any = true;
            by_pid.entry(pid).or_default().push(port);
        }
        let owners_known = !any || by_pid.keys().any(|&pid| pid != 0);
        self.by_pid = owners_known.then_some(by_pid);
    }

    /// The ports `pid` listens on, sorted; `None` where that cannot be told.
    pub fn ports_of(&mut self, pid: u32, _start_ticks: u64) -> Option<Vec<u16>> {
        let mut ports = self.by_pid.as_ref()?.get(&pid).cloned().unwrap_or_default();
        ports.sort_unstable();
        ports.dedup();
        Some(ports)
    }
}

/// The owners of the sockets listening on `port` where a connect to
/// loopback reaches them (on any address, or on a loopback one).
fn listener_pids(port: u16) -> std::io::Result<Vec<u32>> {
    let mut owners = Vec::new();
    for row in listening_rows::<MIB_TCPROW_OWNER_PID>(AF_INET)? {
        // Both in network byte order, the port in the low 16 bits.
        let address = Ipv4Addr::from(u32::from_be(row.dwLocalAddr));
        if row.dwState == MIB_TCP_STATE_LISTEN as u32
            && u16::from_be(row.dwLocalPort as u16) == port
            && (address.is_unspecified() || address.is_loopback())
        {
            owners.push(row.dwOwningPid);
        }
    }
    // A machine without IPv6 has no such table: only the IPv4 one counts then.
    for row in listening_rows::<MIB_TCP6ROW_OWNER_PID>(AF_INET6).unwrap_or_default() {
        let address = Ipv6Addr::from(row.ucLocalAddr);
        if row.dwState == MIB_TCP_STATE_LISTEN as u32
            && u16::from_be(row.dwLocalPort as u16) == port
            && (address.is_unspecified() || address.is_loopback() || address.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
        {
            owners.push(row.dwOwningPid);
        }
    }
    Ok(owners)
}

/// The listening sockets of family `family` (`AF_INET` with
/// `MIB_TCPROW_OWNER_PID` rows, `AF_INET6` with `MIB_TCP6ROW_OWNER_PID`).
fn listening_rows<Row: Copy>(family: u32) -> std::io::Result<Vec<Row>> {
    // A socket may open between the size asked and the table read: asked again then.
    let mut size: u32 = 0;
    let mut buffer: Vec<u64> = Vec::new();
    for _ in 0..4 {
        // SAFETY: `buffer` holds `size` bytes (u64s keep the rows aligned),
        // or is empty with `size` 0, where the call only writes the size it
        // needs into `size`, a live u32.
        let rc = unsafe {
            GetExtendedTcpTable(buffer.as_mut_ptr().cast(), &mut size, 0, family, TCP_TABLE_OWNER_PID_LISTENER, 0)
        };
        match rc {
            0 => {
                // The table: a u32 count, then the rows, aligned as a row is.
                let count = buffer.first().map_or(0, |first| (*first & 0xffff_ffff) as usize);
                let offset = std::mem::align_of::<Row>().max(std::mem::size_of::<u32>());
                let bytes = buffer.len() * 8;
                let fits = offset + count.saturating_mul(std::mem::size_of::<Row>()) <= bytes;
                if !fits {
                    return Err(std::io::Error::other("the TCP table is larger than the buffer it was read into"));
                }
                // SAFETY: `count` rows of `Row` follow the count at `offset`
                // (checked to lie within the buffer above); the rows are
                // plain integers, and copied out before the buffer goes.
                let rows = unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>().add(offset).cast::<Row>(), count) };
                return Ok(rows.to_vec());
            }
            ERROR_INSUFFICIENT_BUFFER => buffer = vec![0u64; (size as usize).div_ceil(8) + 1],
            other => return Err(std::io::Error::from_raw_os_error(other as i32)),
        }
    }
    Err(std::io::Error::other("the TCP table kept growing while it was read"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_of_ours_is_found_with_our_pid_and_a_closed_port_has_none() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let owners = listener_pids(port).unwrap();
        assert!(!owners.is_empty(), "no listener on {port} in the TCP table");
        let mine = std::process::id();
        let mut watch = PortWatch::new(port);
        if owners.iter().all(|&pid| pid == 0) {
            // wine 8 lists listeners without their owner (pid 0).
            assert_eq!(watch.look(&|| vec![mine]), PortHolder::Ours, "an owner not told counts as the job's");
        } else {
            assert_eq!(owners, vec![mine]);
            assert_eq!(watch.look(&|| vec![mine]), PortHolder::Ours);
            assert!(matches!(watch.look(&|| vec![mine + 4]), PortHolder::Stranger(who) if who.starts_with(&format!("pid {mine} ("))));
        }
        drop(listener);
        assert_eq!(listener_pids(port).unwrap(), Vec::<u32>::new());
        assert_eq!(PortWatch::new(port).look(&|| vec![mine]), PortHolder::Free);
    }
}
