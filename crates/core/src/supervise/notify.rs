//! Telling the agent that a job ended: a POST to the interrupt service and
//! command hooks. Each event is claimed once (under the registry lock, with the
//! status change that causes it), retried with backoff for about a minute,
//! then kept in a spool that any later `run-bg` invocation drains.

use crate::store::config::{Config, NotifyConfig};
use crate::model::duration::format_duration_ms;
use crate::model::error::PostError;
use crate::model::job::{DeliveryState, HookRun, Job, JobStatus, Notification};
use crate::store::paths::{create_private_dir_all, Home};
use crate::store::registry::{write_json_file, Registry};
use crate::{store::logs, now_ms, model::text};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LAST_LINES: usize = 5;
const LAST_LINE_CHARS: usize = 200;
/// A spooled event is retried for this long before it is marked failed.
const SPOOL_GIVE_UP_MS: u64 = 24 * 3_600_000;
const SPOOL_RETRY_THROTTLE_MS: u64 = 2_000;

/// Stable across retries and deliverers: a receiver drops duplicates by it.
pub fn event_id(job: &Job) -> String {
    format!("{}:{}", job.id, job.status())
}

/// The notification to claim when a job reaches `job.status()`, if any is due.
pub fn claim(config: &NotifyConfig, job: &Job) -> Option<Notification> {
    (job.notify && config.url.is_some()).then(|| Notification {
        event_id: event_id(job),
        state: DeliveryState::Pending,
        attempts: 0,
        last_error: None,
        delivered_at: None,
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

fn last_lines(job: &Job) -> Vec<String> {
    logs::tail_lines(Path::new(&job.log_path), LAST_LINES, |_| true)
        .iter()
        .map(|line| text::clean_line(&String::from_utf8_lossy(line), LAST_LINE_CHARS))
        .collect()
}

/// The request body: `{"source", "level", "data": {...}}`.
pub fn event_body(config: &NotifyConfig, job: &Job) -> serde_json::Value {
    serde_json::json!({
        "source": config.source,
        "level": config.level,
        "data": {
            "eventId": event_id(job),
            "jobId": job.id,
            "label": job.label,
            "command": job.command,
            "status": job.status().as_str(),
            "exitCode": job.exit_code(),
            "signal": job.signal(),
            "durationMs": job.duration_ms(now_ms()),
            "logPath": job.log_path,
            "owner": job.owner,
            "message": message_line(job),
            "lastLines": last_lines(job),
        }
    })
}

/// How a refused connection is recorded: most often no interrupt service is
/// installed at all, which `check` then says how to turn off.
pub const NOTHING_LISTENS: &str = "nothing listens at";

/// One POST, bounded by `timeout` from connect to answer; a non-2xx answer is a failure.
pub fn post(url: &str, body: &[u8], timeout: Duration) -> Result<(), PostError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    match agent.post(url).header("content-type", "application/json").send(body) {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(PostError::Status(response.status().to_string())),
        Err(ureq::Error::Timeout(_)) => Err(PostError::Timeout(format_duration_ms(timeout.as_millis() as u64))),
        Err(ureq::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Err(PostError::NothingListens { url: url.to_string() })
        }
        Err(e) => Err(PostError::Other(e.to_string())),
    }
}

/// Runs one hook with `/bin/sh -c`: the event JSON on stdin, `RUN_BG_*` in
/// its environment, output appended to `hooks.log` beside the job's log.
/// Killed (its whole group) after `timeout`; its failure is recorded, not fatal.
pub fn run_hook(command: &str, event: &[u8], job: &Job, message: &str, timeout: Duration) -> HookRun {
    let started = Instant::now();
    let finish = |exit_code: Option<i32>, error: Option<String>| HookRun {
        command: command.to_string(),
        exit_code,
        error,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let log_dir = Path::new(&job.log_path).parent().map(Path::to_path_buf).unwrap_or_default();
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
    let cwd = if Path::new(&job.cwd).is_dir() { PathBuf::from(&job.cwd) } else { PathBuf::from("/") };
    let spawned = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
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
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return finish(None, Some(format!("could not start /bin/sh: {e}"))),
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
                use std::os::unix::process::ExitStatusExt;
                return match (status.code(), status.signal()) {
                    (Some(0), _) => finish(Some(0), None),
                    (Some(code), _) => finish(Some(code), Some(format!("exited {code}"))),
                    (None, Some(signal)) => {
                        finish(None, Some(format!("died of {}", crate::model::job::signal_name(signal))))
                    }
                    _ => finish(None, Some("ended without a status".into())),
                };
            }
            Ok(None) if Instant::now() >= deadline => {
                // The hook is our unreaped child leading its own group, so the
                // group id cannot have been reused; ESRCH (the group is gone
                // already) needs nothing, anything else leaves its group running.
                let group = rustix::process::Pid::from_raw(child.id() as i32);
                let killed = group.map_or(Ok(()), |group| rustix::process::kill_process_group(group, rustix::process::Signal::KILL));
                if let Err(e) = killed.or_else(|e| if e == rustix::io::Errno::SRCH { Ok(()) } else { Err(e) }) {
                    tracing::warn!("cannot kill the timed-out hook's process group {}: {e}", child.id());
                    // At least the hook itself, so the wait below returns.
                    let _ = child.kill();
                }
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
    let notify = &config.notify;
    let event = event_body(notify, job);
    let body = serde_json::to_vec(&event).unwrap_or_default();
    let message = message_line(job);
    let url = claim(notify, job).and(notify.url.clone());
    let timeout = Duration::from_millis(notify.timeout_ms);
    let started = Instant::now();

    let mut attempts = 0u32;
    let mut outcome: Result<(), PostError> = Err(PostError::Other("not attempted".into()));
    if let Some(url) = &url {
        attempts += 1;
        outcome = post(url, &body, timeout);
        if let Err(error) = &outcome {
            // `check` says why it is pending while the retries go on.
            record_delivery(&registry, &job.id, &event_id(job), attempts, Some(error.to_string()));
        }
    }

    let hooks: Vec<HookRun> = hooks_for(notify, job)
        .iter()
        .map(|command| run_hook(command, &body, job, &message, Duration::from_millis(notify.hook_timeout_ms)))
        .collect();
    if !hooks.is_empty() {
        let _ = registry.modify(&job.id, |stored| stored.hooks.extend(hooks));
    }

    let Some(url) = url else { return };
    let mut pause = Duration::from_millis(250);
    let retry_until = started + Duration::from_millis(notify.retry_for_ms);
    while outcome.is_err() && Instant::now() + pause < retry_until {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(10));
        attempts += 1;
        outcome = post(&url, &body, timeout);
    }
    let event_id = event_id(job);
    let error = outcome.as_ref().err().map(PostError::to_string);
    record_delivery(&registry, &job.id, &event_id, attempts, error.clone());
    if let Some(error) = error {
        let entry = SpoolEntry {
            event_id,
            job_id: job.id.clone(),
            url,
            body: event,
            attempts,
            spooled_at: now_ms(),
            next_attempt_at: now_ms(),
            last_error: Some(error),
        };
        if let Err(e) = spool_add(home, &entry) {
            tracing::warn!("run-bg: cannot spool notification {}: {e}", entry.event_id);
        }
    }
}

fn record_delivery(registry: &Registry, job_id: &str, event_id: &str, attempts: u32, error: Option<String>) {
    let _ = registry.modify(job_id, |stored| {
        if let Some(n) = stored.notification.as_mut().filter(|n| n.event_id == event_id) {
            n.attempts = attempts;
            match &error {
                None => {
                    n.state = DeliveryState::Delivered;
                    n.delivered_at = Some(now_ms());
                    n.last_error = None;
                }
                Some(e) => n.last_error = Some(e.clone()),
            }
        }
    });
}

/// An event the supervisor could not deliver, kept in `<home>/spool/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpoolEntry {
    pub event_id: String,
    pub job_id: String,
    pub url: String,
    pub body: serde_json::Value,
    pub attempts: u32,
    pub spooled_at: u64,
    pub next_attempt_at: u64,
    pub last_error: Option<String>,
}

pub fn spool_dir(home: &Home) -> PathBuf {
    home.root.join("spool")
}

fn spool_file(home: &Home, event_id: &str) -> PathBuf {
    // Job ids are file-name safe; the status after ':' is a plain word.
    spool_dir(home).join(format!("{}.json", event_id.replace(':', ".")))
}

pub fn spool_add(home: &Home, entry: &SpoolEntry) -> crate::Result<()> {
    create_private_dir_all(&spool_dir(home))?;
    write_json_file(&spool_file(home, &entry.event_id), entry, true)
}

fn spool_entries(home: &Home) -> Vec<(PathBuf, SpoolEntry)> {
    let Ok(dir) = std::fs::read_dir(spool_dir(home)) else { return Vec::new() };
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
    spool_entries(home).iter().any(|(_, e)| e.next_attempt_at <= now)
}

fn spool_lock(home: &Home) -> Option<std::fs::File> {
    let file = crate::store::paths::options_nofollow()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(home.root.join("spool.lock"))
        .ok()?;
    file.try_lock().ok()?;
    Some(file)
}

/// Delivers what is due in the spool; one deliverer at a time (others return at once).
pub fn drain_spool(home: &Home, config: &Config) {
    let Some(_lock) = spool_lock(home) else { return };
    let registry = Registry::for_config(home, config);
    let timeout = Duration::from_millis(config.notify.timeout_ms);
    for (path, mut entry) in spool_entries(home) {
        if entry.next_attempt_at > now_ms() {
            continue;
        }
        let body = serde_json::to_vec(&entry.body).unwrap_or_default();
        entry.attempts += 1;
        match post(&entry.url, &body, timeout) {
            Ok(()) => {
                record_delivery(&registry, &entry.job_id, &entry.event_id, entry.attempts, None);
                let _ = std::fs::remove_file(&path);
            }
            Err(error) => {
                let error = error.to_string();
                entry.last_error = Some(error.clone());
                if now_ms().saturating_sub(entry.spooled_at) > SPOOL_GIVE_UP_MS {
                    let _ = registry.modify(&entry.job_id, |stored| {
                        if let Some(n) = stored.notification.as_mut().filter(|n| n.event_id == entry.event_id) {
                            n.state = DeliveryState::Failed;
                            n.attempts = entry.attempts;
                            n.last_error = Some(error.clone());
                        }
                    });
                    let failed_dir = spool_dir(home).join("failed");
                    let _ = create_private_dir_all(&failed_dir);
                    let _ = std::fs::rename(&path, failed_dir.join(path.file_name().unwrap_or_default()));
                } else {
                    // Any later invocation retries, at most this often, so an
                    // interrupt service that comes back hears of it at once.
                    entry.next_attempt_at = now_ms() + SPOOL_RETRY_THROTTLE_MS;
                    record_delivery(&registry, &entry.job_id, &entry.event_id, entry.attempts, Some(error));
                    let _ = write_json_file(&path, &entry, true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_post_says_nothing_listens_as_check_recognises_it() {
        // A port just freed: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/trigger");
        let error = post(&url, b"{}", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(&error, PostError::NothingListens { url: at } if *at == url), "{error:?}");
        assert_eq!(error.to_string(), format!("{NOTHING_LISTENS} {url} (connection refused)"));
    }

    #[test]
    fn other_failures_read_as_before() {
        assert_eq!(PostError::Status("404 Not Found".into()).to_string(), "HTTP 404 Not Found");
        assert_eq!(PostError::Timeout("5.0s".into()).to_string(), "no answer within 5.0s");
    }
}
