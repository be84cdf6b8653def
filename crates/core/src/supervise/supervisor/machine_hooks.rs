//! What the machines every platform shares (restart.rs, pause.rs, ready.rs)
//! ask of the supervisor, and its readiness notifications: a child of
//! supervisor.rs, so it reaches the supervisor's fields as the loop does.

use super::*;

/// Between two runs (`--restart`). What the ended run left (`sleep 600 &`)
/// goes as a kill takes it (SIGTERM then SIGKILL after the grace; CTRL_BREAK
/// then the Job Object ended); the loop steps on once that kill has settled.
/// Each run is a fresh process in the same tree (on Windows the same Job
/// Object: `kill` and `check` find it by the one name the job has).
impl BetweenRuns for Supervisor {
    /// When what the ended run left was found gone.
    type Cleanup = Option<Instant>;

    fn runs(&mut self) -> &mut Runs {
        &mut self.runs
    }

    fn job_mut(&mut self) -> &mut Job {
        &mut self.job
    }

    fn is_paused(&self) -> bool {
        Supervisor::is_paused(self)
    }

    fn going_on(&mut self) {
        self.main_ended_at = None;
    }

    fn start_cleaning(&mut self, _now: Instant) -> (Option<Instant>, bool) {
        if !self.anything_left() {
            return (None, false);
        }
        self.begin_kill(KillReason::Restart, self.default_kill());
        (None, true)
    }

    /// Here only once that kill has settled: the old tree is gone. Its
    /// output is copied to its end (Windows's copying thread ends with the
    /// run's last process), so the separator goes after all of it.
    fn cleaned(&mut self, gone_at: &mut Option<Instant>, now: Instant) -> bool {
        self.kill = None;
        let gone_at = *gone_at.get_or_insert(now);
        if !self.output.runs_copied() && now < gone_at + OUTPUT_END_WAIT {
            return false;
        }
        self.drain_output_nonblocking();
        true
    }

    fn write_separator(&mut self, line: &str) -> crate::Result<()> {
        self.output.with_log(|log| log.write_separator(line))
    }

    fn save_run(&mut self) {
        Supervisor::save_run(self);
    }

    /// Beside the loop (a forked child, reaped as any child of ours; a thread).
    fn announce(&mut self, announcement: restart::Announcement) {
        self.errand("restart announcer", move || announcement.send());
    }

    fn note_error(&self, message: &str) {
        Supervisor::note_error(self, message);
    }

    fn context(&self) -> (&Home, &Config, &Job) {
        (&self.home, &self.config, &self.job)
    }

    fn relaunch(&mut self) -> bool {
        Supervisor::relaunch(self)
    }
}

/// `pause` and `resume` (supervise/pause.rs): SIGSTOP and SIGCONT to every
/// process a kill would signal (os/pause_unix.rs); every member of the Job
/// Object suspended, and each that joins while paused (os/pause_windows.rs).
impl Pausing for Supervisor {
    fn clocks(&mut self) -> Clocks<'_> {
        Clocks { paused: &mut self.paused, timeout_at: &mut self.timeout_at, watch: self.watch.as_mut(), job: &mut self.job }
    }

    fn ending(&self) -> bool {
        let killed = self.kill.as_ref().is_some_and(KillInProgress::ends_the_job);
        killed || (!self.phase.main_running() && self.runs.between.is_none())
    }

    fn hold_tree(&mut self) {
        let (host, scope) = self.host_and_scope();
        host.hold_tree(scope);
    }

    fn release_tree(&mut self) {
        let (host, scope) = self.host_and_scope();
        host.release_tree(scope);
    }

    fn record(&mut self) -> (&Registry, &Job) {
        self.held.refresh();
        (&self.registry, &self.job)
    }

    fn note_error(&self, message: &str) {
        Supervisor::note_error(self, message);
    }
}

impl Supervisor {
    /// A kill of a paused job: its tree, just asked to stop (`signalled`),
    /// is let run so it can act on it (a stopped process only takes
    /// SIGKILL); the pause is over, and the kill's end is recorded without it.
    pub(in crate::supervise) fn end_pause_for_kill(&mut self, signalled: bool) {
        let was_paused = self.paused.take().is_some();
        let (host, scope) = self.host_and_scope();
        if host.release_for_kill(scope, was_paused, signalled) {
            self.job.paused_at = None;
        }
    }

    /// Whether a pause holds the job (a restart waits for the resume).
    pub(in crate::supervise) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }
}

/// What the supervisor does with readiness and `--notify-on` (ready::on_events).
impl Watching for Supervisor {
    fn record(&mut self) -> (&Registry, &mut Job) {
        (&self.registry, &mut self.job)
    }

    fn before_ready(&mut self) {
        self.held.refresh();
    }

    fn matched(&mut self, matched: crate::supervise::matchers::MatchEvent) {
        self.spawn_match_notifier(&matched);
    }

    fn release_lines(&mut self) -> bool {
        self.watch.as_mut().is_some_and(ready::Watch::release_lines)
    }

    /// The output is spliced again (Unix); the copying threads keep it to
    /// themselves again (Windows).
    fn lines_released(&mut self) {
        self.output.want_lines(false);
    }

    /// Jobs queued to start once this one is ready (a stack's `after`) may
    /// start now: the hand-on an end makes (one stat when nothing is
    /// queued). Its moment without the subreaper is as at the end.
    fn ready_recorded(&mut self) {
        crate::supervise::ending::hand_on_slot(&self.home, &self.config);
    }

    fn note_error(&self, message: &str) {
        Supervisor::note_error(self, message);
    }
}

/// Readiness and `--notify-on` (issue 15; the checks are in supervise/ready.rs).
impl Supervisor {
    pub(super) fn on_watch_events(&mut self, events: Vec<ready::Event>) {
        ready::on_events(self, events);
    }

    /// The job's live processes, as a kill finds them.
    pub(super) fn job_pids(&self) -> Vec<u32> {
        self.host.pids(Scope { below_only: false, ..self.scope() })
    }

    /// The matches held back while the wake rule was being registered, once
    /// it is done.
    pub(in crate::supervise) fn flush_deferred_matches(&mut self) {
        if self.deferred_matches.is_empty() || self.wake_thread.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        for matched in std::mem::take(&mut self.deferred_matches) {
            self.spawn_match_notifier(&matched);
        }
    }

    /// Sends a `matched` event beside the loop, as the end's notifier does,
    /// so a slow service never holds up the job's output.
    pub(super) fn spawn_match_notifier(&mut self, matched: &crate::supervise::matchers::MatchEvent) {
        if self.config.notify.url.is_none() {
            return;
        }
        // Not beside the wake rule's registration thread (the child could
        // inherit a lock it holds, the allocator's, and hang), nor waiting
        // for it here (a slow service would stall the job's output): sent
        // once it has finished.
        if crate::os::supervision::FORKS && self.wake_thread.as_ref().is_some_and(|t| !t.is_finished()) {
            self.deferred_matches.push(matched.clone());
            return;
        }
        let (home, config, job, matched) = (self.home.clone(), self.config.clone(), self.job.clone(), matched.clone());
        self.errand("match notifier", move || crate::supervise::matchers::announce_match(&home, &config, &job, &matched));
    }
}
