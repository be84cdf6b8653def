//! Readiness of a server job (issue 15): `--ready-log` (a line of output
//! matches), `--ready-port` (one of the job's own processes listens on the
//! port, reachable on 127.0.0.1 or ::1: a stranger's listener, the reason the
//! job's server could not bind it, is not readiness; see os/ports),
//! `--ready-url` (an `http://` URL answers 2xx or 3xx), the first that holds.
//! The supervisor already moves the job's output, so a log pattern costs a
//! look at each line while it is watched (the output is then read and
//! written instead of spliced, and spliced again once nothing needs lines);
//! a port or URL is probed every `PROBE_EVERY` from the supervisor's loop
//! (its poll timeout, no thread), and no more once the job is ready, its
//! readiness timeout passed, or its main process ended.

use crate::model::job::{Job, JobState, Readiness};
use crate::os::ports::{PortHolder, PortWatch};
use crate::store::config::Config;
use crate::supervise::matchers::{Lines, MatchEvent, Matchers};
use crate::{Error, Result};
use regex::Regex;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Between two probes of a port or URL: a server is seen ready within this
/// of opening its port, and the probing costs one connect(2) per period.
pub const PROBE_EVERY: Duration = Duration::from_millis(100);
/// Between two probes of a port someone else holds: each costs a read of
/// the kernel's TCP table (see os/ports), and a stranger rarely lets go at once.
const BLOCKED_PROBE_EVERY: Duration = Duration::from_secs(1);
/// Bound on one URL probe (connect, request, status line), which runs on the
/// supervisor's loop: the job's output waits in its pipe meanwhile.
const URL_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A regular expression given as `name`, compiled, or a usage error naming it.
pub fn check_pattern(name: &str, pattern: &str) -> Result<Regex> {
    Regex::new(pattern).map_err(|e| {
        let why = e.to_string().lines().last().unwrap_or_default().trim().to_string();
        Error::Usage(format!(
            "bad {name} `{pattern}`: not a valid regular expression ({why}); give a pattern such as 'listening on|ready in'"
        ))
    })
}

/// An `http://host[:port][/path]` URL, as `--ready-url` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    pub path: String,
}

pub fn check_url(name: &str, url: &str) -> Result<HttpUrl> {
    let refuse = |why: &str| {
        Error::Usage(format!("bad {name} `{url}`: {why}; give an http:// URL, e.g. http://127.0.0.1:3000/health"))
    };
    let Some(rest) = url.strip_prefix("http://") else {
        if url.starts_with("https://") {
            return Err(refuse("https is not probed (no TLS in the supervisor); probe the plain port with --ready-port instead"));
        }
        return Err(refuse("not an http:// URL"));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(refuse("user info, spaces and control characters are not accepted"));
    }
    // `[::1]:8080`: an IPv6 address is bracketed, its colons are not the port's.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, port)) => (host, Some(port.strip_prefix(':').unwrap_or("x"))),
            None => return Err(refuse("unclosed [")),
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port.map(str::parse::<u16>) {
        None => 80,
        Some(Ok(port)) if port > 0 => port,
        Some(_) => return Err(refuse("bad port")),
    };
    if host.is_empty() {
        return Err(refuse("no host"));
    }
    Ok(HttpUrl { host: host.to_string(), port, path: path.to_string() })
}

/// Checks a job's readiness and `--notify-on` settings before it starts.
pub fn validate(ready: Option<&Readiness>, notify_on: &[String]) -> Result<()> {
    if let Some(ready) = ready {
        if let Some(pattern) = &ready.log {
            check_pattern("--ready-log", pattern)?;
        }
        if let Some(url) = &ready.url {
            check_url("--ready-url", url)?;
        }
        if ready.port == Some(0) {
            return Err(Error::Usage("bad --ready-port 0: give the port the server listens on, 1 to 65535".into()));
        }
        if ready.log.is_none() && ready.port.is_none() && ready.url.is_none() {
            return Err(Error::Usage(
                "--ready-timeout needs something to wait for: --ready-log <regex>, --ready-port <port> or --ready-url <url>".into(),
            ));
        }
        if ready.timeout_ms == Some(0) {
            return Err(Error::Usage("bad --ready-timeout: it must be greater than zero".into()));
        }
    }
    for pattern in notify_on {
        check_pattern("--notify-on", pattern)?;
    }
    Ok(())
}

enum Probe {
    Port(u16, PortWatch),
    Url(HttpUrl),
}

/// What one probe found.
enum Look {
    Ready,
    NotYet,
    /// Something stands in the way, in words (a stranger holds the port).
    Blocked(String),
}

impl Probe {
    fn look(&mut self, job_pids: &dyn Fn() -> Vec<u32>) -> Look {
        match self {
            Probe::Port(port, watch) => match watch.look(job_pids) {
                PortHolder::Ours => Look::Ready,
                PortHolder::Free => Look::NotYet,
                PortHolder::Stranger(who) => Look::Blocked(format!("port {port} is held by {who}, not by this job")),
            },
            Probe::Url(url) if http_get_ok(url) => Look::Ready,
            Probe::Url(_) => Look::NotYet,
        }
    }
}

/// A GET of `url` answered 2xx or 3xx within `URL_PROBE_TIMEOUT`.
fn http_get_ok(url: &HttpUrl) -> bool {
    let deadline = Instant::now() + URL_PROBE_TIMEOUT;
    let Ok(addrs) = (url.host.as_str(), url.port).to_socket_addrs() else { return false };
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, left) else { continue };
        let host = if url.host.contains(':') { format!("[{}]", url.host) } else { url.host.clone() };
        let request = format!("GET {} HTTP/1.1\r\nHost: {host}:{}\r\nUser-Agent: run-bg-ready\r\nConnection: close\r\n\r\n", url.path, url.port);
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        if stream.set_read_timeout(Some(left)).is_err() || stream.set_write_timeout(Some(left)).is_err() {
            return false;
        }
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        // `HTTP/1.1 200 …`: the status is all we need.
        let mut head = [0u8; 16];
        let mut got = 0;
        while got < 12 {
            match stream.read(&mut head[got..]) {
                Ok(0) | Err(_) => return false,
                Ok(n) => got += n,
            }
        }
        let status = std::str::from_utf8(&head[9..12]).ok().and_then(|s| s.parse::<u16>().ok());
        return head.starts_with(b"HTTP/") && matches!(status, Some(200..=399));
    }
    false
}

/// What the watch saw.
#[derive(Debug)]
pub enum Event {
    /// The job is ready (the first time only).
    Ready,
    /// A `--notify-on` pattern matched.
    Matched(MatchEvent),
    /// What keeps the job from being ready changed: `port 3000 is held by
    /// pid 812 (nginx), not by this job`, or `None` once that is over.
    Blocked(Option<String>),
}

/// A job's readiness check and `--notify-on` patterns, as its supervisor
/// runs them.
pub struct Watch {
    ready_log: Option<Regex>,
    probe: Option<Probe>,
    next_probe: Instant,
    deadline: Option<Instant>,
    /// Readiness is still being watched.
    watching: bool,
    lines: Lines,
    matchers: Matchers,
    /// The output was kept from splice for us, and not handed back yet.
    holds_lines: bool,
    /// Cleared when the main process has ended: nothing more is probed.
    probing: bool,
    /// The last `Event::Blocked` given.
    blocked: Option<String>,
    /// While the job is paused: what was left of its readiness timeout. A
    /// stopped server cannot become ready, so nothing is probed (a URL probe
    /// would hold the loop for its whole bound) and the timeout waits.
    paused: Option<Option<Duration>>,
}

impl Watch {
    /// `None` when the job asked for neither readiness nor wake-ups.
    pub fn new(job: &Job, config: &Config) -> Option<Watch> {
        let now = Instant::now();
        let window = Duration::from_millis(config.notify.match_window_ms);
        let matchers = Matchers::new(&job.notify_on, window);
        let ready = job.ready.as_ref().filter(|_| job.ready_at.is_none());
        if ready.is_none() && matchers.is_empty() {
            return None;
        }
        let probe = ready.and_then(|r| match (&r.port, &r.url) {
            (Some(port), _) => Some(Probe::Port(*port, PortWatch::new(*port))),
            (None, Some(url)) => check_url("--ready-url", url).ok().map(Probe::Url),
            (None, None) => None,
        });
        let mut watch = Watch {
            ready_log: ready.and_then(|r| r.log.as_deref()).and_then(|p| Regex::new(p).ok()),
            probe,
            next_probe: now + PROBE_EVERY,
            deadline: ready.and_then(|r| r.timeout_ms).map(|ms| now + Duration::from_millis(ms)),
            watching: ready.is_some(),
            lines: Lines::default(),
            matchers,
            holds_lines: false,
            probing: true,
            blocked: None,
            paused: None,
        };
        watch.holds_lines = watch.needs_lines();
        Some(watch)
    }

    /// True once, when the lines were needed and no longer are (ready, or
    /// its readiness timeout passed, with no `--notify-on`): the output may
    /// be spliced again.
    pub fn release_lines(&mut self) -> bool {
        let release = self.holds_lines && !self.needs_lines();
        self.holds_lines &= !release;
        release
    }

    /// Whether the output must be seen line by line (else it may be spliced).
    pub fn needs_lines(&self) -> bool {
        (self.watching && self.ready_log.is_some()) || !self.matchers.is_empty()
    }

    /// Looks at output the supervisor just moved into the log.
    pub fn feed(&mut self, bytes: &[u8], events: &mut Vec<Event>) {
        if !self.needs_lines() {
            return;
        }
        let lines = self.lines.split(bytes);
        self.look_at(lines, events);
    }

    /// The output ended: its last line without a newline, and every match waiting.
    pub fn output_ended(&mut self, events: &mut Vec<Event>) {
        let last: Vec<String> = self.lines.finish().into_iter().collect();
        self.look_at(last, events);
        let mut matched = Vec::new();
        self.matchers.flush_all(&mut matched);
        events.extend(matched.into_iter().map(Event::Matched));
    }

    fn look_at(&mut self, lines: Vec<String>, events: &mut Vec<Event>) {
        let now = Instant::now();
        let mut matched = Vec::new();
        for line in lines {
            if self.watching && self.ready_log.as_ref().is_some_and(|r| r.is_match(&line)) {
                self.became_ready(events);
            }
            self.matchers.on_line(&line, &self.lines, now, &mut matched);
            self.lines.remember(line);
        }
        events.extend(matched.into_iter().map(Event::Matched));
    }

    fn became_ready(&mut self, events: &mut Vec<Event>) {
        self.watching = false;
        events.push(Event::Ready);
    }

    /// The job was paused at `now`: its readiness timeout stops.
    pub fn pause(&mut self, now: Instant) {
        if self.paused.is_none() {
            self.paused = Some(self.deadline.take().map(|at| at.saturating_duration_since(now)));
        }
    }

    /// The job was resumed at `now`: its readiness timeout goes on with what was left.
    pub fn resume(&mut self, now: Instant) {
        if let Some(left) = self.paused.take() {
            self.deadline = left.map(|left| now + left);
            self.next_probe = now;
        }
    }

    /// When the loop must wake for us next, if at all.
    pub fn next_wake(&self) -> Option<Instant> {
        let probe = (self.watching && self.probe.is_some() && self.probing && self.paused.is_none()).then_some(self.next_probe);
        let deadline = self.deadline.filter(|_| self.watching);
        [probe, deadline, self.matchers.next_due()].into_iter().flatten().min()
    }

    /// Runs what is due at `now`: a probe, the readiness timeout, matches
    /// whose following lines did not come. Nothing is probed once the main
    /// process has ended. `job_pids` gives the job's live processes (asked
    /// only when a port probe finds a listener it does not know yet).
    pub fn tick(&mut self, main_running: bool, job_pids: &dyn Fn() -> Vec<u32>, events: &mut Vec<Event>) {
        let now = Instant::now();
        let mut matched = Vec::new();
        self.matchers.flush(now, &mut matched);
        events.extend(matched.into_iter().map(Event::Matched));
        if !self.watching || self.paused.is_some() {
            return;
        }
        if self.deadline.is_some_and(|d| now >= d) {
            // The job runs on; `check` says `not ready after …` from its record.
            self.watching = false;
            return;
        }
        // A main process that has ended opens no port; its last output is
        // still looked at (a `--ready-log` line written just before the exit).
        if !main_running {
            self.probing = false;
            return;
        }
        let look = match &mut self.probe {
            Some(probe) if now >= self.next_probe => probe.look(job_pids),
            _ => return,
        };
        let blocked = match look {
            Look::Ready => return self.became_ready(events),
            Look::NotYet => None,
            Look::Blocked(why) => Some(why),
        };
        let pause = if blocked.is_some() { BLOCKED_PROBE_EVERY } else { PROBE_EVERY };
        if blocked != self.blocked {
            self.blocked = blocked.clone();
            events.push(Event::Blocked(blocked));
        }
        // From now, not from when it was due: a slow probe never piles up.
        self.next_probe = Instant::now() + pause;
    }
}

/// The state to record for a job whose main process ended as `state`: one
/// with a readiness check that ended by itself before it was ready failed,
/// whatever its exit code (see `JobState::EndedBeforeReady`).
pub fn judge_end(job: &Job, state: JobState) -> JobState {
    if job.ready.is_none() || job.ready_at.is_some() {
        return state;
    }
    match state {
        JobState::Exited { code, ended_at } => JobState::EndedBeforeReady { exit: crate::model::job::Exit::Code(code), ended_at },
        JobState::Signalled { signal, ended_at } => {
            JobState::EndedBeforeReady { exit: crate::model::job::Exit::Signal(signal), ended_at }
        }
        other => other,
    }
}

/// A new run of a job that restarts serves only once it says so again:
/// its readiness is watched afresh (and `wait --ready` waits again).
/// Whether the watch was renewed (the job has a readiness check).
pub fn new_run(job: &mut Job, config: &Config, watch: &mut Option<Watch>) -> bool {
    if job.ready.is_none() {
        return false;
    }
    job.ready_at = None;
    job.ready_blocked = None;
    *watch = Watch::new(job, config);
    true
}

/// What a supervisor does with the watch's events its own way, for
/// `on_events`: each platform's supervisor implements it; what is recorded,
/// and when, is `on_events`'s.
pub trait Watching {
    /// The registry and the job, to record readiness in.
    fn record(&mut self) -> (&crate::store::registry::Registry, &mut Job);
    /// Before readiness is recorded (Unix refreshes its hold of the home).
    fn before_ready(&mut self) {}
    /// Sends a `matched` event without holding up the loop.
    fn matched(&mut self, matched: MatchEvent);
    /// Whether the watch no longer needs the output's lines, now that it
    /// has seen these (taking the news: `Watch::release_lines`).
    fn release_lines(&mut self) -> bool;
    /// The output need not be handed over line by line any more.
    fn lines_released(&mut self);
    /// Readiness is recorded: jobs queued to start once this one is ready
    /// may start now (`ending::hand_on_slot`, as at an end), on every platform.
    fn ready_recorded(&mut self);
    fn note_error(&self, message: &str);
}

/// Records what the watch saw: readiness, what keeps the job from it, a
/// `--notify-on` match; then lets go of the output's lines if nothing
/// needs them any more.
pub fn on_events<S: Watching + ?Sized>(s: &mut S, events: Vec<Event>) {
    for event in events {
        match event {
            // Not once the end is recorded: it was judged not ready then.
            Event::Ready => record_ready(s),
            Event::Matched(matched) => s.matched(matched),
            Event::Blocked(why) => record_blocked(s, why),
        }
    }
    if s.release_lines() {
        s.lines_released();
    }
}

/// In job.json at once (no lock), which every reader merges in; in the
/// registry too if its lock is free now.
fn record_ready<S: Watching + ?Sized>(s: &mut S) {
    if s.record().1.state != JobState::Running {
        return;
    }
    s.before_ready();
    let (registry, job) = s.record();
    let at = crate::now_ms();
    job.ready_at = Some(at);
    job.ready_blocked = None;
    let written = registry.write_job_file(job, false);
    let _ = registry.modify_with(crate::store::registry::Patience::Immediate, &job.id, |job| {
        job.ready_at = Some(at);
        job.ready_blocked = None;
    });
    if let Err(e) = written {
        s.note_error(&format!("cannot record that the job is ready: {e}"));
    }
    s.ready_recorded();
}

/// What keeps the job from being ready (a stranger holding its port), or
/// that it no longer does: recorded as `record_ready` records readiness.
fn record_blocked<S: Watching + ?Sized>(s: &mut S, why: Option<String>) {
    let (registry, job) = s.record();
    if job.state != JobState::Running {
        return;
    }
    job.ready_blocked = why.clone();
    let written = registry.write_job_file(job, false);
    let _ = registry.modify_with(crate::store::registry::Patience::Immediate, &job.id, |job| job.ready_blocked = why);
    if let Err(e) = written {
        s.note_error(&format!("cannot record what keeps the job from being ready: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_are_read_and_others_refused_with_what_is_accepted() {
        assert_eq!(
            check_url("--ready-url", "http://127.0.0.1:3000/health?x=1").unwrap(),
            HttpUrl { host: "127.0.0.1".into(), port: 3000, path: "/health?x=1".into() }
        );
        assert_eq!(check_url("--ready-url", "http://localhost").unwrap(), HttpUrl { host: "localhost".into(), port: 80, path: "/".into() });
        assert_eq!(check_url("--ready-url", "http://[::1]:8080/").unwrap().host, "::1");
        for bad in ["https://x/", "ftp://x", "http://:80/", "http://x:0/", "http://x:99999/", "localhost:3000"] {
            let e = check_url("--ready-url", bad).unwrap_err().to_string();
            assert!(e.contains("--ready-url") && e.contains("http://"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_bad_pattern_is_refused_naming_its_flag() {
        let e = check_pattern("--notify-on", "(unclosed").unwrap_err().to_string();
        assert!(e.starts_with("bad --notify-on `(unclosed`: not a valid regular expression"), "{e}");
        assert!(validate(Some(&Readiness { timeout_ms: Some(5), ..Default::default() }), &[]).is_err());
    }

    #[test]
    fn a_log_pattern_makes_the_job_ready_once_and_then_hands_the_output_back_to_splice() {
        let mut job = crate::model::job::sample_job(crate::model::job::JobStatus::Running);
        job.ready = Some(Readiness { log: Some("listening on \\d+".into()), ..Default::default() });
        let mut watch = Watch::new(&job, &Config::default()).unwrap();
        assert!(watch.needs_lines());
        assert!(!watch.release_lines(), "still watching");
        let mut events = Vec::new();
        watch.feed(b"starting\nlisten", &mut events);
        assert!(events.is_empty());
        watch.feed(b"ing on 3000\nlistening on 3001\n", &mut events);
        assert!(matches!(events.as_slice(), [Event::Ready]), "{events:?}");
        assert!(!watch.needs_lines());
        assert!(watch.release_lines());
        assert!(!watch.release_lines(), "handed back once");
        assert_eq!(watch.next_wake(), None, "nothing left to wake for");
    }

    #[test]
    fn a_server_that_ends_before_it_is_ready_failed_even_with_exit_0() {
        let mut job = crate::model::job::sample_job(crate::model::job::JobStatus::Running);
        let exited = JobState::Exited { code: 0, ended_at: 5 };
        assert_eq!(judge_end(&job, exited.clone()), exited, "no readiness check: as it ended");
        job.ready = Some(Readiness { port: Some(3000), ..Default::default() });
        let judged = judge_end(&job, exited.clone());
        assert_eq!(judged.status(), crate::model::job::JobStatus::Failed);
        assert_eq!(judged.shell_exit_code(), 1);
        job.ready_at = Some(3);
        assert_eq!(judge_end(&job, exited.clone()), exited, "it was ready: as it ended");
    }
}
