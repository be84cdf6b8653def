//! `pause` on Unix: SIGSTOP to every process of the job, none left running
//! (`resume` is SIGCONT to the same, which needs nothing of its own). The
//! supervisor says which processes are the job's (`signal_everything`, the
//! kill's reach, and what it adopted); this is how a tree that forks is
//! stopped whole. Windows suspends its Job Object instead (pause_windows.rs).

use crate::model::job::ProcessIdentity;
use crate::model::protocol::SUPERVISOR_MARK;
use crate::os::procinfo::{self, SignalOutcome};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// How long a pause may take to stop its tree: a process in uninterruptible
/// sleep (D) stops only once it leaves it, and is not waited for past this.
const STOP_PATIENCE: Duration = Duration::from_secs(2);

/// SIGSTOP to every process of the job, none left running. Passes over the
/// process table alone never catch up with a tree that forks faster than a
/// pass takes (a chain of processes each starting the next in a new
/// session: 300 stopped, hundreds more running a second later). So each
/// process found is stopped, and only once it has stopped are its children
/// looked at: a stopped process forks no more, and a fork it was in when
/// the signal came has either made its child, listed by then, or is undone.
/// Then what the supervisor adopted meanwhile (children of a process that
/// exited before it was found) and a last pass over the table, until
/// neither finds anything new.
///
/// `signal_tree` sends a signal to the job's tree as a kill finds it and
/// says who got it; `adopted` lists the job's processes re-parented to the
/// supervisor.
pub fn stop_tree(signal_tree: impl Fn(i32) -> Vec<ProcessIdentity>, adopted: impl Fn() -> Vec<ProcessIdentity>) {
    let deadline = Instant::now() + STOP_PATIENCE;
    let mut known: HashSet<(u32, u64)> = HashSet::new();
    let mut queue: Vec<ProcessIdentity> = Vec::new();
    let mut note = |who: ProcessIdentity, queue: &mut Vec<ProcessIdentity>| {
        if known.insert((who.pid, who.start_ticks)) {
            queue.push(who);
        }
    };
    for who in signal_tree(libc::SIGSTOP) {
        note(who, &mut queue);
    }
    loop {
        while let Some(who) = queue.pop() {
            wait_until_stopped(&who, deadline);
            for child in procinfo::live_children(who.pid) {
                if let Some(child) = stop_unless_helper(child) {
                    note(child, &mut queue);
                }
            }
        }
        for child in adopted() {
            if procinfo::signal_process(&child, libc::SIGSTOP) == SignalOutcome::Sent {
                note(child, &mut queue);
            }
        }
        if queue.is_empty() {
            for who in signal_tree(libc::SIGSTOP) {
                note(who, &mut queue);
            }
        }
        if queue.is_empty() || Instant::now() >= deadline {
            return;
        }
    }
}

/// Stops `pid`, a child of a process of the job, unless it is one of
/// proc-manager's helpers (another job's supervisor started from inside this
/// one, our notifier), which are not this job's. Who was stopped, if anyone.
fn stop_unless_helper(pid: u32) -> Option<ProcessIdentity> {
    let who = procinfo::identify(pid)?;
    if procinfo::environ_value(pid, SUPERVISOR_MARK).is_some() {
        return None;
    }
    (procinfo::signal_process(&who, libc::SIGSTOP) == SignalOutcome::Sent).then_some(who)
}

/// Waits (until `deadline` at most) for a process just sent SIGSTOP to stop,
/// or to be gone: a signal is acted on when its target next runs.
fn wait_until_stopped(who: &ProcessIdentity, deadline: Instant) {
    let mut nap = Duration::from_micros(50);
    while !procinfo::is_stopped(who.pid) && procinfo::is_same_process_alive(who) && Instant::now() < deadline {
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(2));
    }
}
