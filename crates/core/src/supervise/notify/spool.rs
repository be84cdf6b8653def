//! The spool: events the supervisor could not deliver, kept in
//! `<home>/spool/` and delivered by any later `run-bg` (the background
//! deliverer), merged under the service's rate limit.

use crate::store::config::Config;
use crate::supervise::pace::{self, Pace, Slot};
use crate::supervise::service::{post, Failure};
use crate::supervise::wake;
use crate::model::error::PostError;
use crate::model::job::DeliveryState;
use crate::store::paths::{create_private_dir_all, Home};
use crate::store::registry::{write_json_file, Registry, FOLD_PATIENCE};
use crate::now_ms;
use std::io::Write;
use crate::os::sys::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use super::event::SpoolEntry;
use super::message::defuse_templates;
use super::tries::{Tries, WAKE_REMOVE_TIMEOUT};

/// A spooled event is retried for this long before it is marked failed.
const SPOOL_GIVE_UP_MS: u64 = 24 * 3_600_000;
const SPOOL_RETRY_THROTTLE_MS: u64 = 2_000;
/// The background deliverer's pause between tries of one event: doubling from
/// 1 s up to this, so a service that comes back hears within 30 s.
const DELIVERER_MAX_PAUSE_MS: u64 = 30_000;


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
