//! Pacing the notifications of a home under the interrupt service's rate
//! limit. The service gathers the events of each pipeline that arrive within
//! its batch window (2 s for the message pipeline, which `info` and `warn`
//! reach; 5 s for the sub-agent one, `alert`) into one batch, dispatches at
//! most 10 (message) / 4 (sub-agent) batches a minute and drops the rest
//! with only a log line. So an event that would open a batch over the limit
//! is held back, and everything held when a slot opens goes in one POST
//! (`data.jobs`). Every announcer and the deliverer of a home share the
//! record of the batches opened (`notify-pace.json`, under `notify-pace.lock`).

use crate::store::config::NotifyConfig;
use crate::store::paths::Home;
use crate::store::registry::write_json_file;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use crate::os::sys::OpenOptionsExt;

/// The service's limits for one pipeline, as we keep to them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub pipeline: &'static str,
    /// Batches opened per `window_ms`.
    pub max: u32,
    pub window_ms: u64,
    /// The service's batch window: a POST this soon after the one that opened
    /// a batch joins it.
    pub batch_ms: u64,
}

impl Pace {
    /// `alert` goes to the sub-agent pipeline (4 batches a minute, 5 s
    /// windows), `info` and `warn` to the message pipeline
    /// (`notify.max_per_minute`, `notify.batch_window_ms`).
    pub fn for_level(config: &NotifyConfig, level: &str) -> Pace {
        if level == "alert" {
            Pace {
                pipeline: "subagent",
                max: config.max_per_minute.min(4),
                window_ms: config.pace_window_ms,
                batch_ms: config.batch_window_ms * 5 / 2,
            }
        } else {
            Pace {
                pipeline: "message",
                max: config.max_per_minute,
                window_ms: config.pace_window_ms,
                batch_ms: config.batch_window_ms,
            }
        }
    }

    /// Slack for the service's clock: it counts a batch when its timer
    /// dispatches it, a batch window after our POST, later on a busy machine.
    /// A held event waits this much longer; a batch dispatched late is not
    /// counted in the next window.
    fn margin_ms(&self) -> u64 {
        (self.window_ms / 30).max(self.batch_ms + 500)
    }
}

/// When an event may go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slot {
    /// Now: it joins the batch open at the service, or opens one within the limit.
    Now,
    /// Not before this time (ms since the epoch): a batch more would be dropped.
    At(u64),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PaceFile {
    /// Per pipeline, when each batch of the last window was opened.
    opened: BTreeMap<String, Vec<u64>>,
}

/// Takes a slot for one POST at `now`, or says when one opens. Anything that
/// keeps us from reading or writing the record lets the POST go: a lost
/// notification is worse than a dropped batch.
pub fn claim(home: &Home, pace: &Pace, now: u64) -> Slot {
    let dir = home.dir();
    let Ok(lock) = crate::store::paths::options_nofollow()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join("notify-pace.lock"))
    else {
        return Slot::Now;
    };
    // Held for a moment by each claimer; one that cannot be had within a
    // second (a holder stopped with SIGSTOP) must not hold the event up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while lock.try_lock().is_err() {
        if std::time::Instant::now() >= deadline {
            return Slot::Now;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let path = dir.join("notify-pace.json");
    let mut file: PaceFile = crate::store::paths::read_file(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    let slot = take(file.opened.entry(pace.pipeline.to_string()).or_default(), pace, now);
    if slot == Slot::Now {
        let _ = write_json_file(&path, &file, true);
    }
    slot
}

/// The decision on the record of one pipeline (`opened`, oldest first).
fn take(opened: &mut Vec<u64>, pace: &Pace, now: u64) -> Slot {
    let span = pace.window_ms + pace.margin_ms();
    opened.retain(|&at| now < at + span);
    if let Some(&last) = opened.last() {
        // Well inside the window of the batch that is open: it goes with it.
        if now < last + pace.batch_ms * 3 / 4 {
            return Slot::Now;
        }
    }
    let max = pace.max.max(1) as usize;
    if opened.len() < max {
        opened.push(now);
        return Slot::Now;
    }
    Slot::At(opened[opened.len() - max] + span)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACE: Pace = Pace { pipeline: "message", max: 10, window_ms: 60_000, batch_ms: 2_000 };

    #[test]
    fn ten_batches_a_minute_then_held_until_the_oldest_leaves_the_window() {
        let mut opened = Vec::new();
        for i in 0..10 {
            assert_eq!(take(&mut opened, &PACE, i * 3_000), Slot::Now, "end {i}");
        }
        // The oldest batch leaves the window 60 s after it opened, plus 2.5 s
        // for the service's dispatch, a batch window (2 s) after the POST.
        assert_eq!(take(&mut opened, &PACE, 30_000), Slot::At(62_500));
        assert_eq!(take(&mut opened, &PACE, 33_000), Slot::At(62_500), "still the same slot");
        assert_eq!(take(&mut opened, &PACE, 62_500), Slot::Now);
        assert_eq!(opened.len(), 10);
    }

    #[test]
    fn an_end_within_the_open_batch_goes_with_it_without_a_slot() {
        let mut opened = Vec::new();
        assert_eq!(take(&mut opened, &PACE, 0), Slot::Now);
        assert_eq!(take(&mut opened, &PACE, 1_000), Slot::Now);
        assert_eq!(opened, [0], "joined the batch opened at 0");
        assert_eq!(take(&mut opened, &PACE, 1_900), Slot::Now);
        assert_eq!(opened, [0, 1_900], "too close to the end of that batch: a new one");
    }
}
