//! Where the supervisor is in a job's life (`Phase`), and how the main
//! process ended (`MainExit`): each step only goes forward. The same on
//! every platform; on Windows no child of ours is left to reap once the
//! main process has ended (what it left is in the Job Object, not ours).


/// How the main process ended (os/wait.rs: what a reap reports).
pub(super) use crate::os::wait::MainEnd as MainExit;

/// Where the supervisor is in a job's life. Each step only goes forward
/// (but for a restart, `--restart`, from an exit not yet recorded back to
/// a running main process): the end is recorded only once the main process
/// has exited, and the supervisor is done only once the end is recorded,
/// the output has ended and no child of ours is left to reap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The main process runs (it is our child, so there are children to reap).
    Running,
    /// The main process is reaped; its end is recorded once a kill in
    /// progress has settled. `children`: others of ours may be left to reap.
    MainExited { exit: MainExit, children: bool },
    /// The end is recorded; what outlived the main process (its output,
    /// adopted descendants, the notifier) is drained and reaped.
    Recorded { children: bool },
    /// Nothing of the job can write any more and nothing is left to reap.
    Done,
}

impl Phase {
    /// The main process was reaped with `exit`.
    pub(super) fn main_reaped(self, exit: MainExit) -> Phase {
        match self {
            Phase::Running => Phase::MainExited { exit, children: true },
            // Reaped once only: a later report cannot be the main process's.
            other => other,
        }
    }

    /// `waitpid` said no child of ours is left.
    pub(super) fn no_children(self) -> Phase {
        match self {
            Phase::MainExited { exit, .. } => Phase::MainExited { exit, children: false },
            Phase::Recorded { .. } => Phase::Recorded { children: false },
            // While Running the main process is a child: ECHILD cannot be.
            other => other,
        }
    }

    /// A child of ours was forked (the notifier). Windows forks none: its
    /// notifiers are threads, joined before it exits.
    pub(super) fn child_started(self) -> Phase {
        match self {
            Phase::MainExited { exit, .. } => Phase::MainExited { exit, children: true },
            Phase::Recorded { .. } => Phase::Recorded { children: true },
            other => other,
        }
    }

    /// The end is recorded; only a main process that has exited has one.
    pub(super) fn recorded(self) -> Phase {
        match self {
            Phase::MainExited { children, .. } => Phase::Recorded { children },
            other => other,
        }
    }

    /// Done once recorded with nothing left to reap and the output ended.
    pub(super) fn settle(self, output_open: bool) -> Phase {
        match self {
            Phase::Recorded { children: false } if !output_open => Phase::Done,
            other => other,
        }
    }

    pub(super) fn main_exit(self) -> Option<MainExit> {
        match self {
            Phase::MainExited { exit, .. } => Some(exit),
            _ => None,
        }
    }

    pub(super) fn main_running(self) -> bool {
        self == Phase::Running
    }

    /// A restart (`--restart`): a new main process runs. The one step back,
    /// and only from an exit not yet recorded: a recorded end is final.
    pub(super) fn restarted(self) -> Phase {
        match self {
            Phase::MainExited { .. } => Phase::Running,
            other => other,
        }
    }
}

#[cfg(test)]
mod phase_tests {
    use super::*;
    use crate::model::job::Exit;

    const EXIT: MainExit = MainExit::Code(3);

    #[test]
    fn a_job_whose_main_process_leaves_nothing_behind_goes_through_every_phase() {
        let phase = Phase::Running.main_reaped(EXIT);
        assert_eq!(phase, Phase::MainExited { exit: EXIT, children: true });
        assert_eq!(phase.main_exit(), Some(EXIT));
        let phase = phase.no_children().recorded();
        assert_eq!(phase, Phase::Recorded { children: false });
        assert_eq!(phase.settle(true), phase, "done only once the output has ended");
        assert_eq!(phase.settle(false), Phase::Done);
    }

    #[test]
    fn the_notifier_and_adopted_descendants_keep_the_supervisor_until_reaped() {
        let phase = Phase::Running.main_reaped(EXIT).recorded();
        assert_eq!(phase, Phase::Recorded { children: true });
        assert_eq!(phase.settle(false), phase, "a child is left to reap");
        let phase = phase.no_children().child_started();
        assert_eq!(phase, Phase::Recorded { children: true }, "the notifier forked after the last reap");
        assert_eq!(phase.no_children().settle(false), Phase::Done);
    }

    #[test]
    fn nothing_is_recorded_or_finished_while_the_main_process_runs() {
        let running = Phase::Running;
        assert!(running.main_running());
        assert_eq!(running.main_exit(), None);
        assert_eq!(running.recorded(), Phase::Running, "no end to record");
        assert_eq!(running.no_children(), Phase::Running, "the main process is a child");
        assert_eq!(running.settle(false), Phase::Running);
        assert_eq!(running.child_started(), Phase::Running);
    }

    #[test]
    fn every_step_only_goes_forward() {
        let recorded = Phase::Running.main_reaped(EXIT).recorded();
        assert_eq!(recorded.main_reaped(MainExit::Signal(9)), recorded, "the main process is reaped once");
        assert_eq!(recorded.recorded(), recorded);
        assert_eq!(recorded.main_exit(), None, "a recorded end is not recorded again");
        assert!(!recorded.main_running());
        assert_eq!(Phase::Done.main_reaped(EXIT), Phase::Done);
        for step in [Phase::no_children, Phase::child_started, Phase::recorded] {
            assert_eq!(step(Phase::Done), Phase::Done);
        }
        assert_eq!(Phase::Done.settle(true), Phase::Done);
    }

    #[test]
    fn a_restart_runs_a_new_main_process_only_after_an_exit_not_yet_recorded() {
        let exited = Phase::Running.main_reaped(EXIT).no_children();
        assert_eq!(exited.restarted(), Phase::Running);
        assert_eq!(Phase::Running.main_reaped(EXIT).restarted().main_reaped(MainExit::Code(4)).main_exit(), Some(MainExit::Code(4)));
        let recorded = exited.recorded();
        assert_eq!(recorded.restarted(), recorded, "a recorded end is final");
        assert_eq!(Phase::Done.restarted(), Phase::Done);
    }

    #[test]
    fn the_main_process_end_is_read_from_its_wait_status() {
        assert_eq!(MainExit::from_wait(Some(3), None), Some(MainExit::Code(3)));
        assert_eq!(MainExit::from_wait(Some(0), None), Some(MainExit::Code(0)));
        let sigkill = crate::model::signals::SIGKILL;
        assert_eq!(MainExit::from_wait(None, Some(sigkill)), Some(MainExit::Signal(sigkill)));
        assert_eq!(MainExit::from_wait(None, None), None, "a stop is no end");
        assert_eq!(MainExit::Code(3).recorded(), Some(Exit::Code(3)));
        assert_eq!(MainExit::Signal(15).recorded(), Some(Exit::Signal("SIGTERM".into())));
        assert_eq!(MainExit::Unread.recorded(), None);
    }
}
