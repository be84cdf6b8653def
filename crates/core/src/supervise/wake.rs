//! Per-job wake rules (`--wake`): a one-off rule of the interrupt service
//! that matches this job's events (`condition {"jobId": <id>}`), registered
//! by the supervisor as the job starts, so that the job's end wakes the agent
//! with the text the caller chose.
//!
//! The service (OpenClaw's `skills/interrupt-service`) keeps its rules in a
//! file, so a rule nobody removes stays for good: it takes `POST /rules` with
//! an `id` (required) and `one_off: true`, removes a one-off rule itself once
//! the batch its match went into was dispatched, and removes any rule on
//! `DELETE /rules/<id>` (404 for an id it does not have). So once the job's
//! end event has been answered, a rule that event did not go through (the
//! event failed, went merged with others, or the rule was not known to be
//! registered) is removed by us. One it did go through is only queued: the
//! service removes it after a *successful* dispatch, so we look at its rules
//! once its batch went out, and remove it if it is still there: a look due
//! later is kept in the spool (`spool/wake/<job>.json`), which the home's
//! deliverer takes in its rounds alongside the events (`confirm_due`), so
//! that no delivery waits for a dispatch window, and a deliverer killed
//! meanwhile leaves it to the next one any invocation starts.

use crate::model::duration::format_duration_ms;
use crate::model::job::{Job, Wake, WakeAction, WakeState};
use crate::now_ms;
use crate::store::config::NotifyConfig;
use crate::store::paths::{create_private_dir_all, Home};
use crate::store::registry::{write_json_file, Patience, Registry};
use crate::supervise::service::{post, Answer, Failure};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The keys of an event's `data`, which the service fills a template's `{{key}}` from.
pub const DATA_KEYS: &[&str] = &[
    "eventId", "jobId", "label", "command", "status", "exitCode", "signal", "outcome", "durationMs", "logPath", "owner",
    "message", "lastLines",
];

/// The rule's id at the service: one per job, so a removal needs no answer
/// from the registration (one that timed out may still have been taken).
pub fn rule_id(job_id: &str) -> String {
    format!("run-bg-{job_id}")
}

/// The service's rules address beside its trigger address (`…/trigger` →
/// `…/rules`; another path: `/rules` at the same host).
pub fn rules_url(trigger_url: &str) -> String {
    let trimmed = trigger_url.split(['?', '#']).next().unwrap_or(trigger_url).trim_end_matches('/');
    if let Some(base) = trimmed.strip_suffix("/trigger") {
        return format!("{base}/rules");
    }
    let after_scheme = trimmed.find("://").map_or(0, |i| i + 3);
    let origin_end = trimmed[after_scheme..].find('/').map_or(trimmed.len(), |i| after_scheme + i);
    format!("{}/rules", &trimmed[..origin_end])
}

/// A warning for `{{key}}`s of `template` that no event has in its `data`
/// (the service would leave them as they are), naming the keys there are.
pub fn template_warning(template: &str) -> Option<String> {
    let mut unknown: Vec<&str> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        rest = &rest[open + 2..];
        let Some(close) = rest.find("}}") else { break };
        let key = &rest[..close];
        // The service's pattern is `{{\w+}}`: anything else is plain text to it.
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            if !DATA_KEYS.contains(&key) && !unknown.contains(&key) {
                unknown.push(key);
            }
            rest = &rest[close + 2..];
        }
    }
    (!unknown.is_empty()).then(|| {
        let named: Vec<String> = unknown.iter().map(|k| format!("{{{{{k}}}}}")).collect();
        format!(
            "wake message: {} is not a key of the event's data and will reach the agent as it is; the keys are {}",
            named.join(", "),
            DATA_KEYS.join(", ")
        )
    })
}

/// The rule as the service takes it.
pub fn rule_body(config: &NotifyConfig, job: &Job, wake: &Wake) -> serde_json::Value {
    let mut rule = serde_json::json!({
        "id": rule_id(&job.id),
        "label": format!("run-bg wake for {}", job.id),
        "source": config.source,
        "condition": { "jobId": job.id },
        "action": wake.action.as_str(),
        "one_off": true,
        "enabled": true,
    });
    if let Some(message) = &wake.message {
        rule["message"] = message.clone().into();
    }
    if let Some(instruction) = &wake.instruction {
        rule["instruction"] = instruction.clone().into();
    }
    rule
}

/// Registers `job`'s wake rule (one POST, bounded by `notify.timeout_ms`) and
/// records the outcome in its record; returns the wake as recorded.
pub fn register(registry: &Registry, config: &NotifyConfig, job: &Job) -> Option<Wake> {
    let mut wake = job.wake.clone()?;
    let Some(trigger) = &config.url else {
        wake.state = WakeState::Failed;
        wake.reason = Some("no interrupt service is configured (notify.url is null)".into());
        return Some(record(registry, &job.id, wake));
    };
    let url = rules_url(trigger);
    wake.rule_id = Some(rule_id(&job.id));
    wake.url = Some(url.clone());
    let body = serde_json::to_vec(&rule_body(config, job, &wake)).unwrap_or_default();
    match post(&url, &body, Duration::from_millis(config.timeout_ms)) {
        Ok(_) => {
            wake.state = WakeState::Registered;
            wake.reason = None;
        }
        Err(failure) => {
            wake.state = WakeState::Failed;
            wake.reason = Some(failure.to_string());
        }
    }
    Some(record(registry, &job.id, wake))
}

fn record(registry: &Registry, job_id: &str, wake: Wake) -> Wake {
    // Brief: the supervisor also keeps it in its own record, written at the job's end.
    let _ = registry.modify_with(Patience::Brief, job_id, |stored| stored.wake = Some(wake.clone()));
    wake
}

/// Removes the rule: `Ok(false)` when the service had no such rule.
pub fn remove(url: &str, id: &str, timeout: Duration) -> Result<bool, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let address = format!("{}/{}", url.trim_end_matches('/'), id);
    match agent.delete(&address).call() {
        Ok(response) if response.status().is_success() => Ok(true),
        Ok(response) if response.status().as_u16() == 404 => Ok(false),
        Ok(response) => Err(format!("HTTP {}", response.status())),
        Err(e) => Err(e.to_string()),
    }
}

/// How the end event of a job went, as far as its wake rule is concerned.
pub enum EventOutcome<'a> {
    /// The service answered this about the job's own event.
    Answered(&'a Result<Answer, Failure>),
    /// Sent merged with other jobs' events: its `jobId` names them all, so no
    /// job's rule matched it.
    Merged,
    /// Not sent at all (given up on, nothing listening, notifications turned off).
    NotSent(&'a str),
}

/// After the service answered `job_id`'s event `event_id` for good: a rule
/// the event went through is recorded `queued`, its look scheduled in the
/// spool, and `true` returned: the caller then sees that a deliverer runs.
/// Any other is removed, once the job has ended (an `orphaned` event that
/// did not fire it leaves it for the end).
pub fn settle(home: &Home, registry: &Registry, timeout: Duration, job_id: &str, event_id: &str, outcome: EventOutcome) -> bool {
    let Ok(job) = registry.get(job_id) else { return false };
    let Some(wake) = job.wake.clone() else { return false };
    let settled = matches!(wake.state, WakeState::Queued | WakeState::Fired | WakeState::NotFired | WakeState::Removed);
    if settled || job.event_id() != event_id {
        return false;
    }
    let matched = wake.state == WakeState::Registered
        && matches!(outcome, EventOutcome::Answered(Ok(Answer::Queued { matched }))  if *matched > 0);
    if matched {
        let at = now_ms();
        if let (Some(url), Some(rule_id)) = (wake.url.clone(), wake.rule_id.clone()) {
            // Before `queued` is recorded: a process that dies between the two
            // leaves a look to take, never a `queued` no one looks at.
            let look = Look { job_id: job_id.to_string(), url, rule_id, action: wake.action, queued_at: at, next_look_at: at };
            if let Err(e) = look.save(home) {
                tracing::warn!("run-bg: cannot schedule the look at {job_id}'s wake rule: {e}");
            }
        }
        let _ = registry.modify(job_id, |stored| {
            if let Some(w) = stored.wake.as_mut() {
                w.state = WakeState::Queued;
                w.reason = None;
                w.queued_at = Some(at);
            }
        });
        return true;
    }
    if !job.status().is_final() {
        return false;
    }
    let why = match outcome {
        EventOutcome::Answered(Ok(Answer::Queued { matched })) if wake.state == WakeState::Registered => {
            format!("its end event was queued with matched {matched}, not by this rule")
        }
        EventOutcome::Answered(Ok(Answer::Queued { .. })) => {
            format!("its registration was not confirmed ({})", wake.reason.as_deref().unwrap_or("no answer"))
        }
        EventOutcome::Answered(Ok(Answer::Ignored { reason })) => format!("its end event was ignored ({reason})"),
        EventOutcome::Answered(Ok(Answer::Accepted)) => "its end event went to a receiver that is not the interrupt service".into(),
        EventOutcome::Answered(Err(failure)) => format!("its end event was not taken ({failure})"),
        EventOutcome::Merged => "its end event went merged with others' under the rate limit".into(),
        EventOutcome::NotSent(why) => format!("its end event was not sent ({why})"),
    };
    let (Some(url), Some(id)) = (wake.url.clone(), wake.rule_id.clone()) else {
        // Never sent anywhere: nothing to remove.
        let _ = registry.modify(job_id, |stored| {
            if let Some(w) = stored.wake.as_mut() {
                w.state = WakeState::Failed;
                w.reason = Some(match &w.reason {
                    Some(before) => format!("{before}; {why}"),
                    None => format!("never registered; {why}"),
                });
            }
        });
        return false;
    };
    let removed = remove(&url, &id, timeout);
    let _ = registry.modify(job_id, |stored| {
        if let Some(w) = stored.wake.as_mut() {
            match &removed {
                Ok(true) => {
                    w.state = WakeState::Removed;
                    w.reason = Some(why.clone());
                }
                Ok(false) => {
                    w.state = WakeState::Removed;
                    w.reason = Some(format!("{why}; the service had no such rule"));
                }
                Err(e) => w.reason = Some(format!("{why}; removing it failed: {e}")),
            }
        }
    });
    false
}

/// The service's batch window for the rule's pipeline, and how long after it
/// its dispatch may still run: the rule goes only once its `openclaw` call
/// succeeded (`openclaw system event` for a message, `openclaw agent`, which
/// the service gives 2 minutes, for a sub-agent). Both follow
/// `notify.batch_window_ms` (2 s: message 2 s + 10 s, sub-agent 5 s + 120 s).
fn dispatch_window(config: &NotifyConfig, action: WakeAction) -> (Duration, Duration) {
    let (level, dispatch_windows) = match action {
        WakeAction::Message => ("warn", 5),
        WakeAction::Subagent => ("alert", 24),
    };
    let batch = Duration::from_millis(crate::supervise::pace::Pace::for_level(config, level).batch_ms);
    // A window configured at 0 still leaves the service's timer and its call a moment.
    (batch, (batch * dispatch_windows).max(Duration::from_millis(500)))
}

/// A wake rule to look at (`GET /rules`) once the service's batch went out:
/// the job's end event was queued through it (`queued`). Kept in the spool,
/// so the look survives whoever scheduled it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Look {
    job_id: String,
    /// The service's rules address.
    url: String,
    rule_id: String,
    action: WakeAction,
    queued_at: u64,
    next_look_at: u64,
}

fn looks_dir(home: &Home) -> PathBuf {
    home.spool_dir().join("wake")
}

impl Look {
    fn path(&self, home: &Home) -> PathBuf {
        // Job ids are file-name safe.
        looks_dir(home).join(format!("{}.json", self.job_id))
    }

    fn save(&self, home: &Home) -> crate::Result<()> {
        create_private_dir_all(&looks_dir(home))?;
        write_json_file(&self.path(home), self, true)
    }
}

fn looks(home: &Home) -> Vec<Look> {
    let Ok(dir) = std::fs::read_dir(looks_dir(home)) else { return Vec::new() };
    dir.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| serde_json::from_slice(&crate::store::paths::read_file(&p).ok()?).ok())
        .collect()
}

/// Whether a look at a wake rule is scheduled (due now or later).
pub fn looks_pending(home: &Home) -> bool {
    !looks(home).is_empty()
}

/// Whether a look at a wake rule is due now: one whose deliverer died
/// meanwhile is then taken up by the deliverer any invocation starts.
pub fn looks_due(home: &Home) -> bool {
    let now = now_ms();
    looks(home).iter().any(|look| look.next_look_at <= now)
}

/// Takes the looks that are due, one `GET /rules` per service for all of
/// them: a rule gone `fired`; one still there when its dispatch would have
/// ended (the service keeps it when its `openclaw` call fails, when the
/// batch was dropped, or when it restarted before its batch went out) is
/// removed (`DELETE`) and recorded `not-fired`, with what we saw. Run by the
/// deliverer in each round, under the spool lock (so by one process); waits
/// for nothing but those requests. When the next look is due, if any is left.
pub fn confirm_due(home: &Home, registry: &Registry, config: &NotifyConfig) -> Option<u64> {
    let timeout = Duration::from_millis(config.timeout_ms);
    let mut listings: std::collections::HashMap<String, Result<Vec<String>, String>> = Default::default();
    let mut next_due: Option<u64> = None;
    let mut due_at = |at: u64| next_due = Some(next_due.map_or(at, |due| due.min(at)));
    for mut look in looks(home) {
        let state = registry.get(&look.job_id).ok().and_then(|job| job.wake).map(|w| w.state);
        // Registered: the process that scheduled it died before recording `queued`.
        if !matches!(state, Some(WakeState::Queued | WakeState::Registered)) {
            let _ = std::fs::remove_file(look.path(home));
            continue;
        }
        if look.next_look_at > now_ms() {
            due_at(look.next_look_at);
            continue;
        }
        let (batch, dispatch) = dispatch_window(config, look.action);
        let first_look = look.queued_at + batch.as_millis() as u64;
        let last_look = first_look + dispatch.as_millis() as u64;
        if look.next_look_at < first_look {
            // Scheduled without the batch window at hand: nothing to see before it.
            look.next_look_at = first_look;
            let _ = look.save(home);
            due_at(first_look);
            continue;
        }
        let listed = listings.entry(look.url.clone()).or_insert_with(|| rule_ids(&look.url, timeout));
        let error = match listed {
            Ok(ids) if !ids.contains(&look.rule_id) => {
                record_confirmed(registry, &look.job_id, WakeState::Fired, None);
                let _ = std::fs::remove_file(look.path(home));
                continue;
            }
            Ok(_) => None,
            Err(e) => Some(e.clone()),
        };
        if now_ms() >= last_look {
            give_up_waiting(registry, &look, timeout, error);
            let _ = std::fs::remove_file(look.path(home));
            continue;
        }
        let step = (batch / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        look.next_look_at = (now_ms() + step.as_millis() as u64).min(last_look);
        if let Err(e) = look.save(home) {
            tracing::warn!("run-bg: cannot reschedule the look at {}'s wake rule: {e}", look.job_id);
        }
        due_at(look.next_look_at);
    }
    next_due
}

/// The rule still there (or its listing unreadable) when its dispatch would
/// have ended: removed. A dispatch that runs later still may wake the agent,
/// so what is recorded is only what was seen within the wait.
fn give_up_waiting(registry: &Registry, look: &Look, timeout: Duration, error: Option<String>) {
    let waited = format_duration_ms(now_ms().saturating_sub(look.queued_at));
    let why = match error {
        None => format!(
            "within {waited} of the job's end being queued: the service still had it (its dispatch failed, or it restarted and lost the queued end)"
        ),
        Some(e) => format!("within {waited} of the job's end being queued, as far as we could tell: the service's rules could not be read ({e})"),
    };
    match remove(&look.url, &look.rule_id, timeout) {
        Ok(true) => record_confirmed(registry, &look.job_id, WakeState::NotFired, Some(format!("{why}; removed"))),
        // Gone between our last look and now: its dispatch went through.
        Ok(false) => record_confirmed(registry, &look.job_id, WakeState::Fired, None),
        Err(e) => record_confirmed(registry, &look.job_id, WakeState::NotFired, Some(format!("{why}; removing it failed ({e}): it may be left at the service"))),
    }
}

fn record_confirmed(registry: &Registry, job_id: &str, state: WakeState, reason: Option<String>) {
    let _ = registry.modify(job_id, |stored| {
        // Settled meanwhile by someone else: theirs stands.
        if let Some(w) = stored.wake.as_mut().filter(|w| matches!(w.state, WakeState::Queued | WakeState::Registered)) {
            w.state = state;
            w.reason = reason.clone();
        }
    });
}

/// The ids of the service's rules (`GET /rules`: the array of its rules).
fn rule_ids(url: &str, timeout: Duration) -> Result<Vec<String>, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent.get(url).call().map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status()));
    }
    let body = response.body_mut().with_config().limit(16 * 1024 * 1024).read_to_string().map_err(|e| e.to_string())?;
    let rules: serde_json::Value = serde_json::from_str(&body).map_err(|_| "GET /rules did not answer JSON".to_string())?;
    let rules = rules.as_array().or_else(|| rules.get("rules").and_then(|r| r.as_array()));
    let Some(rules) = rules else { return Err("GET /rules did not answer a list of rules".into()) };
    Ok(rules.iter().filter_map(|rule| rule.get("id").and_then(|v| v.as_str()).map(str::to_string)).collect())
}

/// `action` given as text (`--wake-action`, JS `wake.action`).
pub fn parse_action(text: &str) -> crate::Result<WakeAction> {
    WakeAction::parse(text).map_err(crate::Error::Usage)
}

/// Waits for the wake rule's registration (`spawn_registration`), if it
/// still runs, and keeps what it registered in the job: bounded by
/// notify.timeout_ms (and a brief registry wait).
pub fn join_registration(registering: &mut Option<std::thread::JoinHandle<Option<Wake>>>, job: &mut Job) {
    if let Some(Ok(Some(wake))) = registering.take().map(std::thread::JoinHandle::join) {
        job.wake = Some(wake);
    }
}

/// Registers the job's wake rule (`--wake`) on a thread of its own, so the
/// job's start waits for no service; joined before the end is recorded, so
/// the end's event goes after the rule. None: no rule, or no thread (said).
pub fn spawn_registration(registry: &Registry, notify: &NotifyConfig, job: &Job) -> Option<std::thread::JoinHandle<Option<Wake>>> {
    job.wake.as_ref()?;
    let (registry, notify, for_thread) = (registry.clone(), notify.clone(), job.clone());
    let spawned = std::thread::Builder::new().name("wake".into()).spawn(move || register(&registry, &notify, &for_thread));
    if let Err(e) = &spawned {
        tracing::warn!("run-bg supervisor {}: cannot start the wake rule's registration: {e}", job.id);
    }
    spawned.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_address_sits_beside_the_trigger_address() {
        assert_eq!(rules_url("http://127.0.0.1:7600/trigger"), "http://127.0.0.1:7600/rules");
        assert_eq!(rules_url("http://h:1/svc/trigger/"), "http://h:1/svc/rules");
        assert_eq!(rules_url("http://h:1/hook?x=1"), "http://h:1/rules");
        assert_eq!(rules_url("http://h:1"), "http://h:1/rules");
    }

    #[test]
    fn a_wake_rule_reads_back_from_the_record_and_is_posted_as_the_service_reads_it() {
        let mut job = crate::model::job::sample_job(crate::model::job::JobStatus::Running);
        job.wake = Some(Wake { message: Some("{{jobId}} {{status}}".into()), action: WakeAction::Subagent, ..Default::default() });
        let text = serde_json::to_string(&job).unwrap();
        assert!(text.contains(r#""wake":{"message":"{{jobId}} {{status}}","action":"subagent","state":"pending"}"#), "{text}");
        assert_eq!(serde_json::from_str::<Job>(&text).unwrap(), job);
        let config = NotifyConfig::default();
        let rule = rule_body(&config, &job, job.wake.as_ref().unwrap());
        assert_eq!(rule["id"], "run-bg-build-3f2a1c");
        assert_eq!(rule["one_off"], true, "the service reads one_off, not oneOff");
        assert_eq!(rule["condition"], serde_json::json!({"jobId": "build-3f2a1c"}));
        assert_eq!(rule["source"], "run-bg");
        assert!(rule.get("instruction").is_none(), "no null sent");
    }

    #[test]
    fn unknown_template_keys_are_named_with_the_known_ones() {
        assert_eq!(template_warning("job {{jobId}} {{status}} exit {{exitCode}} ({{outcome}})"), None);
        let warning = template_warning("{{jobid}} {{ jobId }} {{jobid}} {{nope}}").unwrap();
        assert!(warning.starts_with("wake message: {{jobid}}, {{nope}} is not a key"), "{warning}");
        assert!(warning.ends_with("the keys are eventId, jobId, label, command, status, exitCode, signal, outcome, durationMs, logPath, owner, message, lastLines"));
    }
}
