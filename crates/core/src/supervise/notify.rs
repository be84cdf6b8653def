//! Telling the agent that a job ended: a POST to the interrupt service and
//! command hooks. Each event is claimed once (under the registry lock, with the
//! status change that causes it), retried with backoff for about a minute,
//! then kept in a spool that any later `run-bg` invocation drains.
//!
//! What is recorded is what the service answered, not only its HTTP status:
//! OpenClaw's interrupt service answers 200 both when it queued an event for
//! the agent (`{"status":"queued","matched":N}`) and when it dropped it
//! (`{"status":"ignored",…}`, an `info` event no rule matched); a 4xx will be
//! answered the same way again, so it is not retried; a 5xx may come after
//! the service queued the event (it does not de-duplicate), so it is retried
//! only a few times.

use crate::store::config::{Config, NotifyConfig};
use crate::supervise::pace::{self, Pace, Slot};
use crate::supervise::service::{post, Answer, Failure};
use crate::supervise::wake;
use crate::store::log_read;
use crate::model::duration::format_duration_ms;
use crate::model::error::PostError;
use crate::model::job::{DeliveryState, Exit, HookRun, Job, JobState, JobStatus, Notification};
use crate::store::deliveries::Recorder;
use crate::store::paths::{create_private_dir_all, Home};
use crate::store::registry::{write_json_file, Registry, FOLD_PATIENCE};
use crate::{store::logs, now_ms, model::text};
use serde::{Deserialize, Serialize};
use std::io::Write;
use crate::os::sys::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LAST_LINES: usize = 5;
const LAST_LINE_CHARS: usize = 200;
/// A spooled event is retried for this long before it is marked failed.
const SPOOL_GIVE_UP_MS: u64 = 24 * 3_600_000;
const SPOOL_RETRY_THROTTLE_MS: u64 = 2_000;
/// The background deliverer's pause between tries of one event: doubling from
/// 1 s up to this, so a service that comes back hears within 30 s.
const DELIVERER_MAX_PAUSE_MS: u64 = 30_000;
/// Created (once) in the home by the first `no-listener`: that one says how to
/// set up or turn off notifications, later ones only that none was sent.
const NO_LISTENER_SEEN: &str = "notify-no-listener.seen";
/// The `reason` of a notification held back by the pace.
const HELD: &str = "held back under the interrupt service's rate limit, to go with the next batch";
/// A 5xx may come after the service queued the event, and it does not
/// de-duplicate: each retry can be one more wake-up of the agent.
pub const MAX_SERVER_ERRORS: u32 = 3;
/// A wake rule's removal where no `notify.timeout_ms` is at hand.
const WAKE_REMOVE_TIMEOUT: Duration = Duration::from_secs(5);
/// The first error-looking line of a failed job's log, added to its message, is cut to this.
const ERROR_LINE_CHARS: usize = 160;

/// The notification to claim when a job reaches `job.status()`, if any is due.
pub fn claim(config: &NotifyConfig, job: &Job) -> Option<Notification> {
    (job.notify && config.url.is_some()).then(|| Notification {
        event_id: job.event_id(),
        level: Some(config.level_for(job.status().as_str()).to_string()),
        ..Default::default()
    })
}

/// Hooks to run for this job's current status: `notify.command` (unless the
/// job opted out of notifications) and the job's own `--on-exit`.
fn hooks_for(config: &NotifyConfig, job: &Job) -> Vec<String> {
    if !job.status().is_final() {
        return Vec::new();
    }
    let global = config.command.clone().filter(|_| job.notify);
    global.into_iter().chain(job.on_exit.clone()).collect()
}

pub fn has_work(config: &NotifyConfig, job: &Job) -> bool {
    claim(config, job).is_some() || !hooks_for(config, job).is_empty()
}

/// One line an agent can act on.
pub fn message_line(job: &Job) -> String {
    // Shown to an agent, and by hooks that print $RUN_BG_MESSAGE: control characters written out.
    let command = text::cut(&text::visible(&job.command).replace('\n', " "), 80);
    let label = if job.id.starts_with(&crate::model::ids::id_prefix_from_label(&job.label)) {
        String::new()
    } else {
        format!(" \"{}\"", text::cut(&text::visible(&job.label), 40))
    };
    let after = format_duration_ms(job.duration_ms(now_ms()));
    let id = &job.id;
    match job.status() {
        JobStatus::Orphaned => format!(
            "run-bg: {id}{label} ({command}) orphaned: its supervisor is gone while its processes run, after {after}; run-bg kill {id}"
        ),
        JobStatus::Lost => format!(
            "run-bg: {id}{label} ({command}) lost: supervisor and processes gone with no exit status, after {after}; run-bg check {id}"
        ),
        status => {
            let how = crate::model::job::how_it_ended(job);
            format!("run-bg: {id}{label} ({command}) {status}, {how}, after {after}; run-bg check {id}")
        }
    }
}

/// `message_line`, and for a failed job the first line of its log that looks
/// like an error (the first `check --errors` shows), with every `{{` and `}}`
/// broken up: the interrupt service fills `{{key}}` in a rule's message from
/// `data`, and uses `data.message` as that template when the rule has none,
/// so text from the log must not be able to pull in other values.
pub fn event_message(home: &Home, job: &Job) -> String {
    let mut message = message_line(job);
    if job.status() == JobStatus::Failed {
        if let Some(line) = first_error_line(home, job) {
            message.push_str("; first error: ");
            message.push_str(&text::cut(&line, ERROR_LINE_CHARS));
        }
    }
    defuse_templates(&message)
}

/// The log is read through the home this process holds (`Home::job_log`).
fn first_error_line(home: &Home, job: &Job) -> Option<String> {
    log_read::error_lines(&home.job_log(&job.id, Path::new(&job.log_path)), 20).into_iter().find(|line| log_read::looks_like_error(line))
}

/// `{{` and `}}` become `{ {` and `} }`, until none is left (`{{{` too).
pub fn defuse_templates(text: &str) -> String {
    let mut text = text.to_string();
    while text.contains("{{") || text.contains("}}") {
        text = text.replace("{{", "{ {").replace("}}", "} }");
    }
    text
}

/// The exit code, as a shell's `$?` reports it: 128 + the signal's number
/// for a death by signal; -1 when no exit status is known (orphaned, lost,
/// never started). Never null, so a rule's `{{exitCode}}` always resolves.
pub fn exit_code_for_event(job: &Job) -> i32 {
    match job.state.exit() {
        Some(Exit::Code(code)) => code,
        Some(Exit::Signal(name)) => crate::model::job::signal_number(&name).map_or(-1, |n| 128 + n),
        None => -1,
    }
}

/// How it ended, in a few words: `exit 1`, `signal SIGTERM`, `timeout after
/// 10m`, `killed (signal SIGTERM)`, `orphaned`, `lost`, `could not start`.
pub fn outcome(job: &Job) -> String {
    let how = crate::model::job::how_it_ended(job);
    match &job.state {
        JobState::TimedOut { .. } => match job.timeout_ms {
            Some(limit) => format!("timeout after {}", format_duration_ms(limit)),
            None => "timeout".to_string(),
        },
        JobState::Killed { exit: Some(_), .. } => format!("killed ({how})"),
        JobState::Killed { exit: None, .. } => "killed".to_string(),
        JobState::Orphaned => "orphaned".to_string(),
        JobState::Lost { .. } => "lost".to_string(),
        _ => how,
    }
}

fn last_lines(home: &Home, job: &Job) -> Vec<String> {
    logs::tail_lines(&home.job_log(&job.id, Path::new(&job.log_path)), LAST_LINES, |_| true)
        .iter()
        .map(|line| text::clean_line(&String::from_utf8_lossy(line), LAST_LINE_CHARS))
        .collect()
}

/// The request body: `{"source", "level", "data": {...}}`. No value in
/// `data` is null: the service leaves a rule's `{{key}}` literal for a null.
pub fn event_body(home: &Home, config: &NotifyConfig, job: &Job) -> serde_json::Value {
    serde_json::json!({
        "source": config.source,
        "level": config.level_for(job.status().as_str()),
        "data": {
            "eventId": job.event_id(),
            "jobId": job.id,
            "label": job.label,
            "command": job.command,
            "status": job.status().as_str(),
            "exitCode": exit_code_for_event(job),
            "signal": job.signal().unwrap_or_default(),
            "outcome": outcome(job),
            "durationMs": job.duration_ms(now_ms()),
            "logPath": crate::model::os_text::escaped(job.log_path.as_os_str()),
            "owner": job.owner.clone().unwrap_or_default(),
            "message": event_message(home, job),
            "lastLines": last_lines(home, job),
        }
    })
}

/// Runs one hook with `/bin/sh -c`: the event JSON on stdin, `RUN_BG_*` in
/// its environment, output appended to `hooks.log` in the job's directory,
/// reached through the home this process holds (never by the home's name,
/// which may lead elsewhere by now). Killed (its whole group) after
/// `timeout`; its failure is recorded, not fatal.
pub fn run_hook(home: &Home, command: &str, event: &[u8], job: &Job, message: &str, timeout: Duration) -> HookRun {
    let started = Instant::now();
    let finish = |exit_code: Option<i32>, error: Option<String>| HookRun {
        command: command.to_string(),
        exit_code,
        error,
        duration_ms: started.elapsed().as_millis() as u64,
        event_id: Some(job.event_id()),
    };
    let log_dir = home.job_dir(&job.id);
    let output = crate::store::paths::options_nofollow()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log_dir.join("hooks.log"))
        .ok();
    let (stdout, stderr) = match output.as_ref().and_then(|f| Some((f.try_clone().ok()?, f.try_clone().ok()?))) {
        Some((a, b)) => (Stdio::from(a), Stdio::from(b)),
        None => (Stdio::null(), Stdio::null()),
    };
    let cwd = if Path::new(&job.cwd).is_dir() { PathBuf::from(&job.cwd) } else { std::env::temp_dir() };
    let spawned = crate::os::sys::hook_command(command)
        .current_dir(cwd)
        .env("RUN_BG_JOB_ID", &job.id)
        .env("RUN_BG_LABEL", &job.label)
        .env("RUN_BG_STATUS", job.status().as_str())
        .env("RUN_BG_EXIT_CODE", job.exit_code().map(|c| c.to_string()).unwrap_or_default())
        .env("RUN_BG_LOG", &job.log_path)
        .env("RUN_BG_MESSAGE", message)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return finish(None, Some(format!("could not start {}: {e}", crate::os::sys::HOOK_SHELL))),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let event = event.to_vec();
        // A hook that never reads its stdin must not block us: write from a thread.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&event);
        });
    }
    let deadline = started + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return match (status.code(), crate::os::sys::exit_signal(&status)) {
                    (Some(0), _) => finish(Some(0), None),
                    (Some(code), _) => finish(Some(code), Some(format!("exited {code}"))),
                    (None, Some(signal)) => {
                        finish(None, Some(format!("died of {}", crate::model::job::signal_name(signal))))
                    }
                    _ => finish(None, Some("ended without a status".into())),
                };
            }
            Ok(None) if Instant::now() >= deadline => {
                crate::os::sys::kill_hook(&mut child);
                let _ = child.wait();
                return finish(None, Some(format!("timed out after {}", format_duration_ms(timeout.as_millis() as u64))));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return finish(None, Some(format!("cannot wait for it: {e}"))),
        }
    }
}

/// Announces `job` (already recorded with its new status and, when a POST is
/// due, a pending `notification`): POST at once, then hooks, then retries with
/// backoff for `notify.retry_for_ms`; what still fails goes to the spool.
/// Blocking; the supervisor runs it in a forked child.
pub fn announce(home: &Home, config: &Config, job: &Job) {
    let registry = Registry::for_config(home, config);
    let mut tries = Tries::first(home, &config.notify, job);
    announce_event(home, config, &registry, job, &mut tries);
    registry.fold_deliveries(tries.recorder.written(), FOLD_PATIENCE);
}

fn announce_event(home: &Home, config: &Config, registry: &Registry, job: &Job, tries: &mut Tries) {
    let notify = &config.notify;
    let event = event_body(home, notify, job);
    let body = serde_json::to_vec(&event).unwrap_or_default();
    let message = event_message(home, job);
    let url = claim(notify, job).and(notify.url.clone());
    let timeout = Duration::from_millis(notify.timeout_ms);
    let started = Instant::now();
    let event_id = job.event_id();

    let mut retry = None;
    let mut held_until = None;
    if let Some(url) = &url {
        let pace = Pace::for_level(notify, notify.level_for(job.status().as_str()));
        match pace::claim(home, &pace, now_ms()) {
            Slot::Now => retry = tries.attempt(home, registry, post(url, &body, timeout), timeout),
            Slot::At(at) => held_until = Some(at),
        }
    }

    let hooks: Vec<HookRun> = hooks_for(notify, job)
        .iter()
        .map(|command| run_hook(home, command, &body, job, &message, Duration::from_millis(notify.hook_timeout_ms)))
        .collect();
    if !hooks.is_empty() {
        tries.recorder.add_hooks(hooks);
    }

    let Some(url) = url else {
        tries.settle(home, registry, timeout, wake::EventOutcome::NotSent("no interrupt service is configured now"));
        return;
    };
    if let Some(at) = held_until {
        // Over the service's rate limit: the deliverer sends it at `at`,
        // together with whatever else is held by then.
        tries.recorder.change(|n| n.reason = Some(HELD.to_string()));
        let entry = SpoolEntry {
            event_id,
            job_id: job.id.clone(),
            url,
            body: event,
            attempts: 0,
            server_errors: 0,
            spooled_at: now_ms(),
            next_attempt_at: at,
            last_error: None,
            keep_trying: notify.url_explicit,
            spool_tries: 0,
            held: true,
            notification: tries.notification(),
            has_wake: tries.has_wake,
        };
        match spool_add(home, &entry) {
            Ok(()) => start_deliverer(home),
            Err(e) => tracing::warn!("run-bg: cannot spool notification {}: {e}", entry.event_id),
        }
        return;
    }
    let mut pause = Duration::from_millis(250);
    let retry_until = started + Duration::from_millis(notify.retry_for_ms);
    while retry.is_some() && Instant::now() + pause < retry_until {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(10));
        retry = tries.attempt(home, registry, post(&url, &body, timeout), timeout);
    }
    let Some(error) = retry else {
        if tries.wake_queued {
            // The look at the rule after the service's batch is the deliverer's.
            start_deliverer(home);
        }
        return;
    };
    if !notify.url_explicit && tries.all_refused {
        // The built-in address, and nothing listened there for the whole
        // retry period: no interrupt service is installed. Spooling would
        // only grow the spool and keep a process retrying for nobody.
        tries.no_listener(home, registry);
        return;
    }
    let entry = SpoolEntry {
        event_id,
        job_id: job.id.clone(),
        url,
        body: event,
        attempts: tries.attempts,
        server_errors: tries.server_errors,
        spooled_at: now_ms(),
        next_attempt_at: now_ms(),
        last_error: Some(error),
        keep_trying: notify.url_explicit,
        spool_tries: 0,
        held: false,
        notification: tries.notification(),
        has_wake: tries.has_wake,
    };
    if let Err(e) = spool_add(home, &entry) {
        tracing::warn!("run-bg: cannot spool notification {}: {e}", entry.event_id);
        return;
    }
    if entry.keep_trying {
        start_deliverer(home);
    }
}

/// The value of `SUPERVISOR_MARK` in the deliverer a notifier starts: a
/// supervisor (a subreaper) adopts it, and does not wait for it.
pub const DELIVERER_MARK: &str = "deliverer";

/// Starts `run-bg __deliver` in the background (it detaches itself at once);
/// if one already delivers for this home, the new one finds its lock taken
/// and leaves, and the running one takes the new event in on its next round.
fn start_deliverer(home: &Home) {
    let Ok(runner) = std::env::current_exe() else { return };
    use crate::model::protocol::{Errand, JOB_COOKIE, SUPERVISOR_MARK};
    let spawned = Command::new(runner)
        .args(Errand::Deliver.args())
        .env("PROC_MANAGER_HOME", &home.root)
        .env_remove(JOB_COOKIE)
        .env(SUPERVISOR_MARK, DELIVERER_MARK)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            let _ = child.wait();
        }
        Err(e) => tracing::warn!("run-bg: cannot start the notification deliverer: {e}"),
    }
}

/// The attempts made at one event, by whichever process makes them.
#[derive(Debug)]
struct Tries {
    attempts: u32,
    server_errors: u32,
    /// Every attempt so far met a refused connection: nothing listens.
    all_refused: bool,
    /// The event went merged with others' (`data.jobs`): no job's wake rule matches it.
    merged: bool,
    /// Its answer queued it through the job's wake rule: a look at the rule is scheduled for the deliverer.
    wake_queued: bool,
    /// The job has a wake rule to settle; without one the registry is not read.
    has_wake: bool,
    recorder: Recorder,
}

impl Tries {
    /// The first attempts, by the job's notifier.
    fn first(home: &Home, notify: &NotifyConfig, job: &Job) -> Tries {
        let recorder = Recorder::new(home, &job.id, &job.event_id(), claim(notify, job));
        Tries { attempts: 0, server_errors: 0, all_refused: true, merged: false, wake_queued: false, has_wake: job.wake.is_some(), recorder }
    }

    /// The deliverer's, going on from where the spooled `entry` left off.
    fn spooled(home: &Home, entry: &SpoolEntry, merged: bool) -> Tries {
        let notification = entry.notification.clone().unwrap_or_else(|| Notification {
            // Spooled by a version that did not keep it: as it would stand.
            event_id: entry.event_id.clone(),
            state: DeliveryState::Pending,
            attempts: entry.attempts,
            last_error: entry.last_error.clone(),
            level: entry.body.get("level").and_then(|l| l.as_str()).map(str::to_string),
            ..Default::default()
        });
        let recorder = Recorder::new(home, &entry.job_id, &entry.event_id, Some(notification));
        Tries {
            attempts: entry.attempts,
            server_errors: entry.server_errors,
            all_refused: false,
            merged,
            wake_queued: false,
            has_wake: entry.has_wake,
            recorder,
        }
    }

    fn job_id(&self) -> &str {
        &self.recorder.record.job_id
    }

    fn event_id(&self) -> &str {
        &self.recorder.record.event_id
    }

    /// The notification as it stands, for the spool to carry on from.
    fn notification(&self) -> Option<Notification> {
        self.recorder.record.notification.clone()
    }

    /// Settles the job's wake rule (if it has one) now that `outcome` is final.
    fn settle(&mut self, home: &Home, registry: &Registry, timeout: Duration, outcome: wake::EventOutcome) {
        if self.has_wake {
            let (job_id, event_id) = (self.job_id().to_string(), self.event_id().to_string());
            self.wake_queued = wake::settle(home, registry, timeout, &job_id, &event_id, outcome);
        }
    }

    /// Nothing listened at the built-in address for the whole retry period.
    fn no_listener(&mut self, home: &Home, registry: &Registry) {
        // O_EXCL: of all the announcers of a home, exactly one creates it.
        let first = crate::store::paths::options_nofollow()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(home.dir().join(NO_LISTENER_SEEN))
            .is_ok();
        self.recorder.change(|n| {
            n.state = DeliveryState::NoListener;
            n.hint = first;
        });
        self.settle(home, registry, WAKE_REMOVE_TIMEOUT, wake::EventOutcome::NotSent("nothing listens"));
    }

    /// Records what one attempt came to in the job's `notification`;
    /// `Some(error)` when another attempt is worth making.
    fn attempt(&mut self, home: &Home, registry: &Registry, result: Result<Answer, Failure>, timeout: Duration) -> Option<String> {
        self.attempts += 1;
        let attempts = self.attempts;
        self.all_refused &= matches!(&result, Err(Failure::Unanswered(PostError::NothingListens { .. })));
        // Kept for the wake rule's settling once this answer is the last.
        let result_seen = result.clone();
        let (retry, update): (Option<String>, Update) = match result {
            Ok(answer) => (
                None,
                Box::new(move |n: &mut Notification| {
                    (n.state, n.matched, n.reason) = match &answer {
                        Answer::Queued { matched } => (DeliveryState::Queued, Some(*matched), None),
                        Answer::Ignored { reason } => (DeliveryState::Ignored, None, Some(reason.clone())),
                        Answer::Accepted => (DeliveryState::Delivered, None, None),
                    };
                    n.delivered_at = Some(now_ms());
                    n.last_error = None;
                }),
            ),
            Err(failure @ Failure::Refused { .. }) => (None, failed(&failure, None)),
            Err(failure @ Failure::ServerError { .. }) => {
                self.server_errors += 1;
                if self.server_errors >= MAX_SERVER_ERRORS {
                    let why = format!("not sent again after {} server errors: each may have queued it", self.server_errors);
                    (None, failed(&failure, Some(why)))
                } else {
                    (Some(failure.to_string()), pending(failure.to_string()))
                }
            }
            Err(failure @ Failure::Unanswered(_)) => (Some(failure.to_string()), pending(failure.to_string())),
        };
        self.recorder.change(|n| {
            n.attempts = attempts;
            update(n);
        });
        if retry.is_none() {
            let outcome = if self.merged { wake::EventOutcome::Merged } else { wake::EventOutcome::Answered(&result_seen) };
            self.settle(home, registry, timeout, outcome);
        }
        retry
    }
}

/// A change to a job's `notification`.
type Update = Box<dyn Fn(&mut Notification)>;

fn failed(failure: &Failure, why: Option<String>) -> Update {
    let (last_error, reason) = match failure {
        Failure::Refused { error, .. } | Failure::ServerError { error, .. } => {
            (failure.to_string(), why.or_else(|| (!error.is_empty()).then(|| error.clone())))
        }
        Failure::Unanswered(_) => (failure.to_string(), why),
    };
    Box::new(move |n: &mut Notification| {
        n.state = DeliveryState::Failed;
        n.last_error = Some(last_error.clone());
        n.reason = reason.clone();
    })
}

fn pending(error: String) -> Update {
    Box::new(move |n: &mut Notification| {
        n.state = DeliveryState::Pending;
        n.last_error = Some(error.clone());
    })
}

/// An event the supervisor could not deliver, kept in `<home>/spool/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpoolEntry {
    pub event_id: String,
    pub job_id: String,
    pub url: String,
    pub body: serde_json::Value,
    pub attempts: u32,
    /// 5xx answers so far (`MAX_SERVER_ERRORS` ends the retries).
    #[serde(default)]
    pub server_errors: u32,
    pub spooled_at: u64,
    pub next_attempt_at: u64,
    pub last_error: Option<String>,
    /// `notify.url` was set in config.json: a service is installed, so the
    /// background deliverer keeps at it (up to a day) without any invocation.
    #[serde(default)]
    pub keep_trying: bool,
    /// Tries made from the spool, for the deliverer's backoff.
    #[serde(default)]
    pub spool_tries: u32,
    /// Held back by the pace (never sent yet): sent at `next_attempt_at`
    /// together with every other event held for the same pipeline.
    #[serde(default)]
    pub held: bool,
    /// The notification as its last writer left it, for the next to go on from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<Notification>,
    /// The job has a wake rule to settle once the event is answered for good
    /// (unknown in entries spooled before this was kept: looked at).
    #[serde(default = "unknown_is_yes")]
    pub has_wake: bool,
}

fn unknown_is_yes() -> bool {
    true
}

fn spool_file(home: &Home, event_id: &str) -> PathBuf {
    // Job ids are file-name safe; the status after ':' is a plain word.
    home.spool_dir().join(format!("{}.json", event_id.replace(':', ".")))
}

pub fn spool_add(home: &Home, entry: &SpoolEntry) -> crate::Result<()> {
    create_private_dir_all(&home.spool_dir())?;
    write_json_file(&spool_file(home, &entry.event_id), entry, true)
}

fn spool_entries(home: &Home) -> Vec<(PathBuf, SpoolEntry)> {
    let Ok(dir) = std::fs::read_dir(home.spool_dir()) else { return Vec::new() };
    let mut entries: Vec<(PathBuf, SpoolEntry)> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let entry = serde_json::from_slice(&crate::store::paths::read_file(&p).ok()?).ok()?;
            Some((p, entry))
        })
        .collect();
    entries.sort_by_key(|(_, e)| e.spooled_at);
    entries
}

/// True when some spooled event is due for another attempt. Costs one
/// failed `readdir` when nothing was ever spooled.
pub fn spool_due(home: &Home) -> bool {
    let now = now_ms();
    spool_entries(home).iter().any(|(_, e)| e.next_attempt_at <= now) || wake::looks_due(home)
}

fn spool_lock(home: &Home) -> Option<std::fs::File> {
    let mut file = crate::store::paths::options_nofollow()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(home.dir().join("spool.lock"))
        .ok()?;
    file.try_lock().ok()?;
    // Who delivers, for whoever wonders what this process is.
    let _ = file.set_len(0);
    let _ = writeln!(file, "{}", std::process::id());
    Some(file)
}

/// The background deliverer (`run-bg __deliver`), one per home (a lock; a
/// second returns at once): tries what is due in the spool; while an event
/// spooled for an explicitly configured service is left, sleeps until the
/// next one is due (at most 30 s) and goes on; returns when none is left.
pub fn deliver(home: &Home, config: &Config) {
    loop {
        {
            let Some(_lock) = spool_lock(home) else { return };
            let mut config = config.clone();
            loop {
                let next_round = deliver_round(home, &config);
                let round_ended = Instant::now();
                // One registry write for what the round recorded, as soon as
                // the gap since the last write allows, within the pause.
                Registry::for_config(home, &config).fold_deliveries(None, next_round.unwrap_or(FOLD_PATIENCE));
                let Some(wait) = next_round else { break };
                std::thread::sleep(wait.saturating_sub(round_ended.elapsed()));
                // Turned off meanwhile (`"url": null`): the rest is not sent.
                if let Ok(now) = Config::load(&home.config_path()) {
                    config = now;
                }
            }
        }
        // An event spooled while we held the lock, by an announcer that then
        // found the lock taken, is ours: look once more now that it is free.
        if !spool_entries(home).iter().any(|(_, e)| e.keep_trying || e.held) && !wake::looks_pending(home) {
            return;
        }
    }
}

/// One pass over the spool: each due event is tried once. How long to sleep
/// before the next pass, or `None` when nothing is left to keep trying.
fn deliver_round(home: &Home, config: &Config) -> Option<Duration> {
    let registry = Registry::for_config(home, config);
    let timeout = Duration::from_millis(config.notify.timeout_ms);
    let mut next_due: Option<u64> = send_held(home, config, &registry, timeout);
    for (path, mut entry) in spool_entries(home).into_iter().filter(|(_, e)| !e.held) {
        if config.notify.url.is_none() {
            give_up(home, &registry, &path, &entry, "not sent: notify.url is null in config.json now");
            continue;
        }
        if entry.next_attempt_at > now_ms() {
            if entry.keep_trying {
                next_due = Some(next_due.map_or(entry.next_attempt_at, |d| d.min(entry.next_attempt_at)));
            }
            continue;
        }
        let body = serde_json::to_vec(&entry.body).unwrap_or_default();
        let mut tries = Tries::spooled(home, &entry, false);
        let retry = tries.attempt(home, &registry, post(&entry.url, &body, timeout), timeout);
        entry.attempts = tries.attempts;
        entry.server_errors = tries.server_errors;
        entry.notification = tries.notification();
        entry.spool_tries += 1;
        match retry {
            None => {
                let _ = std::fs::remove_file(&path);
            }
            Some(error) if now_ms().saturating_sub(entry.spooled_at) > SPOOL_GIVE_UP_MS => {
                give_up(home, &registry, &path, &entry, &format!("given up on after 24h of retries; last: {error}"));
            }
            Some(error) => {
                entry.last_error = Some(error);
                entry.next_attempt_at = now_ms()
                    + if entry.keep_trying {
                        (1_000u64 << entry.spool_tries.min(5)).min(DELIVERER_MAX_PAUSE_MS)
                    } else {
                        // Any later invocation retries, at most this often, so an
                        // interrupt service that comes back hears of it at once.
                        SPOOL_RETRY_THROTTLE_MS
                    };
                let _ = write_json_file(&path, &entry, true);
                if entry.keep_trying {
                    next_due = Some(next_due.map_or(entry.next_attempt_at, |d| d.min(entry.next_attempt_at)));
                }
            }
        }
    }
    // After the events: a look at a wake rule waits for no one's delivery.
    if let Some(due) = wake::confirm_due(home, &registry, &config.notify) {
        next_due = Some(next_due.map_or(due, |d| d.min(due)));
    }
    next_due.map(|due| Duration::from_millis(due.saturating_sub(now_ms()).clamp(10, DELIVERER_MAX_PAUSE_MS)))
}

/// Sends what the pace held back, one POST per pipeline and address with
/// every event held for it (merged when there are several), once the first
/// of them is due and a slot is free. When to look again, if anything stays held.
fn send_held(home: &Home, config: &Config, registry: &Registry, timeout: Duration) -> Option<u64> {
    let held: Vec<(PathBuf, SpoolEntry)> = spool_entries(home).into_iter().filter(|(_, e)| e.held).collect();
    let mut groups: std::collections::BTreeMap<(&'static str, String), Vec<(PathBuf, SpoolEntry)>> = Default::default();
    for (path, entry) in held {
        let level = entry.body.get("level").and_then(|l| l.as_str()).unwrap_or("warn");
        let pipeline = Pace::for_level(&config.notify, level).pipeline;
        groups.entry((pipeline, entry.url.clone())).or_default().push((path, entry));
    }
    let mut next_due: Option<u64> = None;
    let mut look_at = |at: u64| next_due = Some(next_due.map_or(at, |d: u64| d.min(at)));
    for ((_, url), mut group) in groups {
        if config.notify.url.is_none() {
            for (path, entry) in &group {
                give_up(home, registry, path, entry, "not sent: notify.url is null in config.json now");
            }
            continue;
        }
        let due = group.iter().map(|(_, e)| e.next_attempt_at).min().unwrap_or(0);
        if due > now_ms() {
            look_at(due);
            continue;
        }
        let body = merged_body(group.iter().map(|(_, e)| &e.body).collect());
        let level = body.get("level").and_then(|l| l.as_str()).unwrap_or("warn").to_string();
        if let Slot::At(at) = pace::claim(home, &Pace::for_level(&config.notify, &level), now_ms()) {
            for (path, entry) in &mut group {
                entry.next_attempt_at = at;
                let _ = write_json_file(path, entry, true);
            }
            look_at(at);
            continue;
        }
        let result = post(&url, &serde_json::to_vec(&body).unwrap_or_default(), timeout);
        let merged = group.len() > 1;
        for (path, mut entry) in group {
            let mut tries = Tries::spooled(home, &entry, merged);
            let retry = tries.attempt(home, registry, result.clone(), timeout);
            match retry {
                None => {
                    let _ = std::fs::remove_file(&path);
                }
                Some(_) if !entry.keep_trying && matches!(&result, Err(Failure::Unanswered(PostError::NothingListens { .. }))) => {
                    // The built-in address, and nothing there: as in `announce`.
                    tries.no_listener(home, registry);
                    let _ = std::fs::remove_file(&path);
                }
                Some(error) => {
                    // Sent once: from now on retried as any spooled event.
                    (entry.held, entry.attempts, entry.server_errors) = (false, tries.attempts, tries.server_errors);
                    entry.notification = tries.notification();
                    entry.last_error = Some(error);
                    entry.next_attempt_at = now_ms() + SPOOL_RETRY_THROTTLE_MS;
                    let _ = write_json_file(&path, &entry, true);
                    look_at(entry.next_attempt_at);
                }
            }
        }
    }
    next_due
}

/// One event standing for several: `data.jobs` holds each one's `data`, the
/// other fields name them all (joined with `, `), so that a rule's template
/// still resolves and `message` is one line naming every job.
pub fn merged_body(bodies: Vec<&serde_json::Value>) -> serde_json::Value {
    if let [only] = bodies.as_slice() {
        return (*only).clone();
    }
    let data: Vec<&serde_json::Value> = bodies.iter().map(|b| &b["data"]).collect();
    let join = |key: &str| {
        data.iter().map(|d| d[key].as_str().unwrap_or_default().to_string()).collect::<Vec<_>>().join(", ")
    };
    let level = if bodies.iter().any(|b| b["level"] == "warn") { "warn" } else { bodies[0]["level"].as_str().unwrap_or("warn") };
    let named: Vec<String> = data
        .iter()
        .map(|d| format!("{} {} ({})", d["jobId"].as_str().unwrap_or_default(), d["status"].as_str().unwrap_or_default(), d["outcome"].as_str().unwrap_or_default()))
        .collect();
    let first_failed = data.iter().find(|d| d["exitCode"].as_i64().unwrap_or(0) != 0);
    let message = defuse_templates(&format!(
        "run-bg: {} jobs ended: {}; run-bg check <id> for each",
        data.len(),
        named.join(", ")
    ));
    serde_json::json!({
        "source": bodies[0]["source"],
        "level": level,
        "data": {
            "eventId": join("eventId"),
            "jobId": join("jobId"),
            "label": join("label"),
            "command": join("command"),
            "status": join("status"),
            "exitCode": first_failed.map_or(0, |d| d["exitCode"].as_i64().unwrap_or(0)),
            "signal": join("signal"),
            "outcome": join("outcome"),
            "durationMs": data.iter().map(|d| d["durationMs"].as_u64().unwrap_or(0)).max().unwrap_or(0),
            "logPath": join("logPath"),
            "owner": join("owner"),
            "message": message,
            "lastLines": [],
            "jobs": data,
        }
    })
}

/// Marks the event failed for good and moves it to `spool/failed/`.
fn give_up(home: &Home, registry: &Registry, path: &Path, entry: &SpoolEntry, why: &str) {
    let mut tries = Tries::spooled(home, entry, false);
    tries.recorder.change(|n| {
        n.state = DeliveryState::Failed;
        n.last_error = entry.last_error.clone();
        n.reason = Some(why.to_string());
    });
    let failed_dir = home.spool_dir().join("failed");
    let _ = create_private_dir_all(&failed_dir);
    let _ = std::fs::rename(path, failed_dir.join(path.file_name().unwrap_or_default()));
    tries.settle(home, registry, WAKE_REMOVE_TIMEOUT, wake::EventOutcome::NotSent(why));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_braces_are_broken_up_however_many() {
        assert_eq!(defuse_templates("a {{jobId}} b"), "a { {jobId} } b");
        assert_eq!(defuse_templates("{{{x}}}"), "{ { {x} } }");
        assert_eq!(defuse_templates("{ plain }"), "{ plain }");
    }
}
