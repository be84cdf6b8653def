//! Who holds a TCP port, for `--ready-port` (macOS): the same API as
//! `ports_linux.rs`, with today's behaviour kept: there is no /proc to tell
//! whose socket accepts, so anything that accepts a connect on 127.0.0.1 or
//! ::1 counts as the job's (a stranger holding the port makes the job ready
//! here; README's limits say so).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A connect to loopback is answered at once; this only bounds a stuck one.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);

pub use crate::os::PortHolder;

#[derive(Debug)]
pub struct PortWatch {
    port: u16,
}

impl PortWatch {
    pub fn new(port: u16) -> PortWatch {
        PortWatch { port }
    }

    pub fn look(&mut self, _job_pids: &dyn Fn() -> Vec<u32>) -> PortHolder {
        let addrs = [SocketAddr::from(([127, 0, 0, 1], self.port)), SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, self.port))];
        if addrs.iter().any(|addr| TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).is_ok()) {
            PortHolder::Ours
        } else {
            PortHolder::Free
        }
    }
}

/// The ports each process listens on, for `list` and `top`: not told here
/// (no /proc to match sockets to processes), so the column shows `-`.
#[derive(Debug, Default)]
pub struct ListeningPorts;

impl ListeningPorts {
    pub fn new() -> ListeningPorts {
        ListeningPorts
    }

    pub fn refresh(&mut self) {}

    pub fn ports_of(&mut self, _pid: u32, _start_ticks: u64) -> Option<Vec<u16>> {
        None
    }
}
