//! Unix's side of a kill (its course is supervise/kill.rs): signals to the
//! job's tree (its group and cookie, the processes recorded for it) and to
//! the descendants re-parented to the supervisor, a subreaper; and whether
//! anything of the job is left.

use crate::model::job::ProcessIdentity;
use crate::model::protocol::SUPERVISOR_MARK;
use crate::os::procinfo;
use crate::os::tree::{self, Tree};
use std::collections::HashSet;

/// Who was sent SIGTERM (pid, start time, command line): one forked after
/// a look gets it at the next one, and none gets it twice. The command line
/// counts: a child signalled between its fork and its exec may take the
/// signal into its parent's handler (a shell's trap, reset only after the
/// fork) and then run the new program without it, with the same pid and
/// start time.
pub type Termed = HashSet<(u32, u64, String)>;

/// What a kill reaches: the job's tree, and the supervisor's children but
/// its `notifier` (the forked child announcing the end, not the job's).
/// `below_only`: a sweeping caller passes over the rest of the table itself
/// (`KillRequest::caller_sweeps`), so only our subtree is looked at.
pub struct Reach<'a> {
    pub tree: Tree<'a>,
    pub below_only: bool,
    pub notifier: Option<libc::pid_t>,
}

impl Reach<'_> {
    fn found(&self) -> (Vec<procinfo::ProcessEntry>, bool) {
        if self.below_only {
            tree::job_subtree(self.tree, std::process::id())
        } else {
            tree::job_tree(self.tree)
        }
    }
}

/// The job's tree (group and cookie) plus the descendants re-parented to
/// us that carry no cookie (started with `env -u`, or dying: their
/// environment is gone already). Another job's supervisor, started from
/// inside this job and adopted by us, and our notifier are left alone.
/// Returns who got the signal, with their command lines (empty: nothing was left).
pub fn signal_everything(reach: &Reach, signal: i32) -> Vec<(ProcessIdentity, String)> {
    let mut sent: Vec<(ProcessIdentity, String)> =
        tree::signal_found(reach.tree, reach.found(), signal).sent.into_iter().map(|p| (p.identity, p.command)).collect();
    for child in adopted_children(reach.notifier) {
        if matches!(procinfo::signal_process(&child, signal), procinfo::SignalOutcome::Sent) {
            sent.push((child, procinfo::command_line(child.pid)));
        }
    }
    sent
}

/// SIGTERM to everything `signal_everything` reaches, noting who got it.
pub fn ask_to_stop(reach: &Reach, termed: &mut Termed) {
    let sent = signal_everything(reach, libc::SIGTERM);
    termed.extend(sent.into_iter().map(|(who, command)| (who.pid, who.start_ticks, command)));
}

/// During the grace period: SIGTERM to every process of the job not sent
/// one yet. The first pass cannot reach what is forked after it (a shell's
/// TERM trap starting a clean-up, a pool replacing a worker); without this
/// it lived until the SIGKILL at the deadline. Returns whether anything of
/// the job is left. Only what started at or after `started_since` (start
/// ticks) is asked: a caller that signalled the tree itself asked the rest.
pub fn signal_newcomers(reach: &Reach, termed: &mut Termed, started_since: u64) -> bool {
    let found = reach.found().0;
    let adopted: Vec<(ProcessIdentity, String)> =
        adopted_children(reach.notifier).into_iter().map(|who| (who, procinfo::command_line(who.pid))).collect();
    let all = found.iter().map(|p| (p.identity, p.command.clone())).chain(adopted.iter().cloned());
    for (who, command) in all.filter(|(who, _)| who.start_ticks >= started_since) {
        if termed.insert((who.pid, who.start_ticks, command)) {
            procinfo::signal_process(&who, libc::SIGTERM);
        }
    }
    !found.is_empty() || !adopted.is_empty()
}

/// The supervisor's live children that are the job's: not its notifier, nor
/// anything marked as a supervisor or a deliverer of ours.
pub fn adopted_children(notifier: Option<libc::pid_t>) -> Vec<ProcessIdentity> {
    procinfo::live_children(std::process::id())
        .into_iter()
        .filter(|&pid| Some(pid as libc::pid_t) != notifier)
        .filter(|&pid| procinfo::environ_value(pid, SUPERVISOR_MARK).is_none())
        .filter_map(procinfo::identify)
        .collect()
}

/// Whether any process of the job is left: its tree, or a descendant
/// re-parented to us (see `signal_everything`).
pub fn anything_left(tree: Tree, notifier: Option<libc::pid_t>) -> bool {
    tree::tree_alive(tree) || !adopted_children(notifier).is_empty()
}
