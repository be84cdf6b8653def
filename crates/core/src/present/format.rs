//! The text both faces print (the CLI, and the JS API's `*Text` functions the
//! MCP server uses): short, one fact per line, ready for a model's context.

use crate::model::duration::format_duration_ms;
use crate::model::job::{DeliveryState, Job, JobStatus, Notification};
use crate::supervise::service::NOTHING_LISTENS;
use crate::now_ms;
use crate::verbs::check::{CheckResult, Selection};
use crate::os::procinfo::ProcessEntry;
use crate::model::text::visible;
use crate::present::view::kb_to_mb;

/// User text for one line: control characters written out (`\x1b`), newlines
/// as spaces, cut to `max_chars` ending with `…` when cut.
pub fn shorten(text: &str, max_chars: usize) -> String {
    let one_line = visible(text).replace('\n', " ");
    if one_line.chars().count() <= max_chars {
        return one_line;
    }
    let cut: String = one_line.chars().take(max_chars.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// One line of under 200 characters: what started and how to look at it.
pub fn ack_line(job_id: &str, pid: u32, command: &str) -> String {
    let job_id = visible(job_id);
    let frame = format!("started {job_id} (pid {pid}):  — run-bg check {job_id}");
    let room = 199usize.saturating_sub(frame.chars().count()).clamp(10, 70);
    format!("started {job_id} (pid {pid}): {} — run-bg check {job_id}", shorten(command, room))
}

/// The ack of a start: `ack_line`, or for a job that waits
/// `queued build-3f2a1c (2nd in queue heavy) — run-bg check build-3f2a1c`,
/// under 200 characters whatever the ids and queue name.
pub fn start_ack(started: &crate::verbs::request::Started) -> String {
    let job_id = visible(&started.job_id);
    match (&started.queued, started.pid) {
        (Some(place), _) => {
            let frame = format!("queued {job_id} () — run-bg check {job_id}");
            let room = 199usize.saturating_sub(frame.chars().count());
            format!("queued {job_id} ({}) — run-bg check {job_id}", queue_place_within(place, room))
        }
        (None, Some(pid)) => ack_line(&started.job_id, pid, &started.command),
        (None, None) => format!("{job_id} recorded — run-bg check {job_id}"),
    }
}

/// `2nd in queue heavy, after build-1, test-2`: where a queued job waits.
pub fn queue_place(place: &crate::verbs::request::QueuedPlace) -> String {
    queue_place_within(place, 160)
}

/// `queue_place` in at most `room` characters (about: never less than the
/// queue part and `after N jobs`): the ids it waits for that fit, then `+N more`.
fn queue_place_within(place: &crate::verbs::request::QueuedPlace, room: usize) -> String {
    let mut text = match &place.queue {
        Some(queue) => format!("{} in queue {}", ordinal(place.position), shorten(queue, 24)),
        None if place.after.is_empty() => format!("{} in line", ordinal(place.position)),
        None => String::new(),
    };
    if place.after.is_empty() {
        return text;
    }
    let sep = if text.is_empty() { "after " } else { ", after " };
    let ids: Vec<String> = place.after.iter().map(|id| visible(id).into_owned()).collect();
    for shown in (0..=ids.len()).rev() {
        let rest = ids.len() - shown;
        let more = match (shown, rest) {
            (_, 0) => String::new(),
            (0, n) => format!("{n} jobs"),
            (_, n) => format!(" +{n} more"),
        };
        let candidate = format!("{text}{sep}{}{more}", ids[..shown].join(", "));
        if candidate.chars().count() <= room || shown == 0 {
            text = candidate;
            break;
        }
    }
    text
}

/// 1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st.
pub fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// `running for 2m13s`, `failed (exit 3) after 1.0s`, …
pub fn outcome_text(job: &Job) -> String {
    let runtime = format_duration_ms(job.duration_ms(now_ms()));
    match job.status() {
        JobStatus::Running if job.paused_at.is_some() => {
            let since = format_duration_ms(now_ms().saturating_sub(job.paused_at.unwrap_or_default()));
            format!("paused for {since} (started {runtime} ago){}", readiness_note(job))
        }
        JobStatus::Running => format!("running for {runtime}{}", readiness_note(job)),
        JobStatus::Orphaned if job.paused_at.is_some() => {
            let since = format_duration_ms(now_ms().saturating_sub(job.paused_at.unwrap_or_default()));
            format!("orphaned and paused for {since} (supervisor gone; its processes stay stopped until resumed or killed) after {runtime}")
        }
        JobStatus::Orphaned => format!("orphaned (supervisor gone, processes still running) after {runtime}"),
        JobStatus::Lost => format!("lost: {}, after {runtime}", why_lost(job)),
        JobStatus::Queued => format!("queued for {runtime}"),
        JobStatus::Skipped => format!("skipped after {runtime}: {}", how_it_ended(job)),
        status => format!("{status} ({}) after {runtime}", how_it_ended(job)),
    }
}

pub use crate::model::job::how_it_ended;

/// ` (ready after 3.2s)`, ` (not ready after 30s)`, ` (not ready yet: port 3000)`;
/// empty for a job without a readiness check.
pub fn readiness_note(job: &Job) -> String {
    let Some(ready) = &job.ready else { return String::new() };
    if let Some(at) = job.ready_at {
        return format!(" (ready after {})", format_duration_ms(at.saturating_sub(job.started_at)));
    }
    if let Some(limit) = job.not_ready_after(now_ms()) {
        return format!(" (not ready after {})", format_duration_ms(limit));
    }
    if let Some(blocked) = &job.ready_blocked {
        return format!(" (not ready yet: {})", visible(blocked));
    }
    let mut what = Vec::new();
    if let Some(pattern) = &ready.log {
        what.push(format!("a line matching /{}/", shorten(pattern, 40)));
    }
    if let Some(port) = ready.port {
        what.push(format!("port {port}"));
    }
    if let Some(url) = &ready.url {
        what.push(shorten(url, 60));
    }
    format!(" (not ready yet: waiting for {})", what.join(" or "))
}

pub use crate::verbs::context::processes_still_running;

/// `outcome_text` for an ended job some of whose processes still run, so
/// that it never reads as plain `success`: `success (exit 0), 1 process
/// still running, after 2.0s`.
pub fn outcome_text_lingering(job: &Job, lingering: usize) -> String {
    if lingering == 0 || !job.status().is_final() || job.status() == JobStatus::Lost {
        return outcome_text(job);
    }
    let runtime = format_duration_ms(job.duration_ms(now_ms()));
    format!("{} ({}), {}, after {runtime}", job.status(), how_it_ended(job), processes_still_running(lingering))
}


/// A `lost` job: its supervisor is gone without recording an end.
fn why_lost(job: &Job) -> String {
    // Its impossible identities were dropped: what is left of the record
    // would read as a supervisor gone early, which is not what happened.
    if job.lost_to_corrupt_record() {
        return crate::model::job::CORRUPT_RECORD.to_string();
    }
    let supervisor = match job.supervisor {
        Some(s) => format!("its supervisor (pid {})", s.pid),
        None => "its supervisor".to_string(),
    };
    match job.main {
        Some(_) => format!("{supervisor} is gone and no exit status was recorded"),
        None => format!("{supervisor} is gone before its main process was recorded"),
    }
}

/// `<id>: <outcome> · pid N · <command>`, then `  error: …` when there is one.
pub fn header(job: &Job, extra: &str) -> String {
    header_with(job, &outcome_text(job), extra)
}

fn header_with(job: &Job, outcome: &str, extra: &str) -> String {
    // Ids and signals are checked where they are made, not in a hand-edited registry.
    let mut line = format!("{}: {outcome}", visible(&job.id));
    if let Some(pid) = job.pid() {
        line.push_str(&format!(" · pid {pid}"));
    }
    line.push_str(&format!(" · {}{extra}", shorten(&job.command, 80)));
    if let Some(error) = &job.error() {
        line.push_str(&format!("\n  error: {}", visible(error)));
    }
    line
}

/// One line per job for `list`; `lingering` processes of an ended job are
/// said, so that it never reads as cleanly done while they run.
pub fn list_line(job: &Job, lingering: usize) -> String {
    let still = if lingering > 0 && job.status().is_final() {
        format!(" · {lingering} process(es) still running")
    } else {
        String::new()
    };
    format!("{}  {}{still}  {}", visible(&job.id), outcome_text(job), shorten(&job.command, 60))
}

/// `list`'s text for these jobs, with where each queued job waits (`places`,
/// by job id: `Context::queue_places`) and how many processes each ended job
/// left running (`leftovers`: `Context::leftover_counts`, counted as `check`
/// and `orphans` count them).
pub fn list_text(
    jobs: &[Job],
    places: &std::collections::HashMap<String, crate::verbs::request::QueuedPlace>,
    leftovers: &std::collections::HashMap<String, usize>,
) -> Vec<String> {
    let line = |j: &Job, lingering: usize| match places.get(&j.id) {
        Some(place) => format!("{}  queued: {}  {}", visible(&j.id), queue_place(place), shorten(&j.command, 60)),
        None => list_line(j, lingering),
    };
    jobs.iter().map(|j| line(j, leftovers.get(&j.id).copied().unwrap_or(0))).collect()
}

/// What `list` says when no job passed `filter`: which jobs it looked for,
/// so that `--status running` with none running does not read as "no jobs at
/// all". `every_job`: how this face spells the option that lists old jobs too.
pub fn nothing_listed(filter: &crate::verbs::list::ListFilter, every_job: &str) -> String {
    use crate::verbs::list::SessionFilter;
    let mut said = match filter.status {
        Some(status) => format!("no {status} jobs"),
        None => "no jobs".to_string(),
    };
    if let Some(owner) = &filter.owner {
        said.push_str(&format!(" of owner {}", visible(owner)));
    }
    match &filter.session {
        Some(SessionFilter::Id(id)) => said.push_str(&format!(" in session {}", visible(id))),
        Some(SessionFilter::Current) => said.push_str(" in this session"),
        Some(SessionFilter::NoSession) => said.push_str(" outside agent sessions"),
        None => {}
    }
    // A status filter looks at jobs of any age; without one, old ends are left out.
    if filter.status.is_none() && !filter.all {
        said.push_str(&format!(" running or ended within the hour ({every_job} for every job)"));
    }
    said
}

/// `list`'s line for a job directory whose record cannot be read.
pub fn corrupt_line(record: &crate::store::registry::CorruptRecord) -> String {
    if !record.removable {
        return format!(
            "{}  unreadable: record {} cannot be read ({}) — not removed: a newer version's record, or a read that failed for now",
            visible(&record.id),
            visible(&record.file.display().to_string()),
            visible(&shorten(&record.reason, 80))
        );
    }
    format!(
        "{}  corrupt: record {} cannot be read ({}) — `run-bg kill {}` removes it",
        visible(&record.id),
        visible(&record.file.display().to_string()),
        visible(&shorten(&record.reason, 80)),
        visible(&record.id)
    )
}

pub fn lingering_line(job: &Job, lingering: &[ProcessEntry]) -> Option<String> {
    if lingering.is_empty() {
        return None;
    }
    let shown: Vec<String> =
        lingering.iter().take(5).map(|p| format!("{} {}", p.identity.pid, shorten(&p.command, 40))).collect();
    let more = if lingering.len() > 5 { format!(", +{} more", lingering.len() - 5) } else { String::new() };
    Some(format!(
        "  still running: {} process(es): {}{more} — `run-bg kill {}` removes them",
        lingering.len(),
        shown.join(", "),
        visible(&job.id)
    ))
}

/// `  restarts: 2 (last: exit 1 at 14:02:11 UTC)` for a job started with
/// `--restart` that has restarted.
pub fn restart_line(job: &Job) -> Option<String> {
    let restart = job.restart.as_ref().filter(|r| r.count > 0)?;
    let last = match (&restart.last_reason, restart.last_at) {
        (Some(reason), Some(at)) => {
            let secs = (at / 1000) % 86_400;
            format!(" (last: {} at {:02}:{:02}:{:02} UTC)", visible(reason), secs / 3600, secs / 60 % 60, secs % 60)
        }
        (Some(reason), None) => format!(" (last: {})", visible(reason)),
        _ => String::new(),
    };
    let next = restart
        .next_run_at
        .filter(|_| !job.status().is_final())
        .and_then(|at| at.checked_sub(crate::now_ms()))
        .map_or(String::new(), |wait| format!("; run {} starts in {}s", restart.count + 1, wait.div_ceil(1000)));
    Some(format!("  restarts: {}{last}{next}", restart.count))
}

/// Why an ended job was never ready, when its supervisor saw why (a running
/// job says it in its header).
fn ready_blocked_line(job: &Job) -> Option<String> {
    let blocked = job.ready_blocked.as_ref().filter(|_| job.ready_at.is_none() && job.status().is_final())?;
    Some(format!("  not ready: {}", visible(blocked)))
}

/// Said only when something needs attention: a notification not delivered
/// (yet), a hook that failed.
fn delivery_lines(job: &Job) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(line) = job.notification.as_ref().and_then(notification_line) {
        lines.push(format!("  notification: {line}"));
    }
    if let Some(wake) = &job.wake {
        lines.push(format!("  wake: {}", wake_line(wake)));
    }
    for hook in job.hooks.iter().filter(|h| h.error.is_some()) {
        lines.push(format!(
            "  hook `{}` failed: {}",
            shorten(&hook.command, 60),
            visible(hook.error.as_deref().unwrap_or_default())
        ));
    }
    lines
}

/// Where the job's wake rule stands, in a few words.
fn wake_line(wake: &crate::model::job::Wake) -> String {
    use crate::model::job::WakeState;
    let rule = wake.rule_id.as_deref().map(visible).unwrap_or_default();
    let reason = wake.reason.as_deref().map(|r| shorten(r, 200)).unwrap_or_default();
    match wake.state {
        WakeState::Pending => "being registered with the interrupt service".to_string(),
        WakeState::Registered => format!("registered {rule}"),
        WakeState::Failed => format!("failed: {reason}"),
        WakeState::Queued => format!("{rule} matched by the job's end; not yet seen dispatched by the service"),
        WakeState::Fired => format!("{rule} fired by the job's end (the service dispatched it and removed the rule)"),
        WakeState::NotFired => format!("{rule} not fired {reason}"),
        WakeState::Removed => format!("{rule} removed: {reason}"),
    }
}

/// What became of the job's notification, in words, when the agent may not
/// have heard of the end through it (nothing for queued or delivered).
fn notification_line(n: &Notification) -> Option<String> {
    let level = n.level.as_deref().unwrap_or("warn");
    let reason = n.reason.as_deref().map(visible);
    Some(match n.state {
        DeliveryState::Queued | DeliveryState::Delivered => return None,
        DeliveryState::Pending if n.attempts == 0 => match reason.as_deref() {
            Some(reason) => format!("pending ({reason})"),
            None => "pending (being sent)".to_string(),
        },
        DeliveryState::Pending => {
            let error = match n.last_error.as_deref() {
                // Most often no interrupt service is installed: say how to stop trying.
                Some(e) if e.starts_with(NOTHING_LISTENS) => {
                    format!("; {} — if none runs here, `\"notify\": {{\"url\": null}}` in config.json turns this off", visible(e))
                }
                Some(e) => format!("; last error: {}", shorten(e, 80)),
                None => String::new(),
            };
            format!("pending ({} attempt(s){error})", n.attempts)
        }
        DeliveryState::Ignored => match reason.as_deref() {
            Some("no matching rules") | None => {
                format!("ignored by the interrupt service (no matching rule at level {level})")
            }
            Some(reason) => format!("ignored by the interrupt service ({}; level {level})", shorten(reason, 80)),
        },
        DeliveryState::Failed => {
            let error = n.last_error.as_deref().map(|e| shorten(e, 80)).unwrap_or_default();
            match n.reason.as_deref() {
                Some(why) if !n.last_error.as_deref().is_some_and(|e| e.contains(why)) => {
                    format!("failed: {error} ({})", shorten(why, 80))
                }
                _ => format!("failed: {error}"),
            }
        }
        DeliveryState::NoListener => no_listener_line(n),
    })
}

fn no_listener_line(n: &Notification) -> String {
    if n.hint {
        "not sent: no interrupt service listens at the default address; set `notify.url` in config.json to \
         yours, or `\"notify\": {\"url\": null}` to stop trying"
            .to_string()
    } else {
        "not sent (no interrupt service listening)".to_string()
    }
}

/// `--tie`: what the job is tied to, or that it was killed for it.
fn tie_line(job: &Job) -> Option<String> {
    let tie = job.tie.as_ref()?;
    Some(match tie.fired_at {
        Some(_) => format!("  {}: {}", job.status(), tie.reason()),
        None => format!("  tied to pid {}: its exit kills the job", tie.to.pid),
    })
}

/// What `run-bg check` prints: a header, what needs attention, then the lines.
pub fn check_text(check: &CheckResult) -> String {
    let job = &check.job;
    let extra = match (check.usage, job.peak_rss_kb) {
        (Some(usage), _) if job.status() == JobStatus::Running => {
            format!(" · {} process(es), {} MiB", usage.processes, kb_to_mb(usage.rss_kb))
        }
        (_, Some(peak)) if job.status().is_final() => format!(" · peak {} MiB", kb_to_mb(peak)),
        _ => String::new(),
    };
    let mut lines = vec![header_with(job, &outcome_text_lingering(job, check.lingering.len()), &extra)];
    lines.extend(restart_line(job));
    lines.extend(ready_blocked_line(job));
    lines.extend(tie_line(job));
    lines.extend(job.rerun_of.as_ref().map(|of| format!("  rerun of {}", visible(of))));
    lines.extend(job.session.as_ref().map(|s| {
        let outlives = if job.outlive_session { " (outlives it)" } else { "" };
        format!("  session {}{outlives}", visible(s))
    }));
    lines.extend(lingering_line(job, &check.lingering));
    lines.extend(delivery_lines(job));
    lines.extend(check.log_problem.as_ref().map(|problem| format!("  [no cursor: {problem}]")));
    if check.tail.is_empty() {
        let yet = if job.status() == JobStatus::Running { " yet" } else { "" };
        // Only what was asked for is absent, not the output.
        lines.push(match check.selection {
            Selection::Last => format!("(no output{yet})"),
            Selection::Matching => format!("(no line matches{yet})"),
            Selection::Errors => format!("(no line looks like an error{yet})"),
            Selection::NoLines => return lines.join("\n"),
        });
    }
    lines.extend(check.tail.iter().cloned());
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_list_says_which_jobs_it_looked_for() {
        use crate::model::job::JobStatus;
        use crate::verbs::list::{ListFilter, SessionFilter};
        let said = |status, owner: Option<&str>, session, all| {
            nothing_listed(&ListFilter { status, owner: owner.map(str::to_string), session, all }, "--all")
        };
        assert_eq!(said(None, None, None, false), "no jobs running or ended within the hour (--all for every job)");
        assert_eq!(said(None, None, None, true), "no jobs");
        // A status filter reads jobs of any age: no hour, no hint.
        assert_eq!(said(Some(JobStatus::Running), None, None, false), "no running jobs");
        assert_eq!(said(Some(JobStatus::Failed), Some("bob"), None, true), "no failed jobs of owner bob");
        assert_eq!(
            said(None, Some("bob"), Some(SessionFilter::Current), false),
            "no jobs of owner bob in this session running or ended within the hour (--all for every job)"
        );
        assert_eq!(said(None, Some("a\x1b[2J"), Some(SessionFilter::NoSession), true), "no jobs of owner a\\x1b[2J outside agent sessions");
    }

    fn place(position: usize, queue: Option<&str>, after: &[&str]) -> crate::verbs::request::QueuedPlace {
        crate::verbs::request::QueuedPlace { position, queue: queue.map(str::to_string), after: after.iter().map(|a| a.to_string()).collect() }
    }

    fn queued_ack(id: &str, place: crate::verbs::request::QueuedPlace) -> String {
        let started = crate::verbs::request::Started {
            job_id: id.into(),
            pid: None,
            log_path: Default::default(),
            label: String::new(),
            command: "make".into(),
            warnings: Vec::new(),
            queued: Some(place),
        };
        start_ack(&started)
    }

    #[test]
    fn a_queued_ack_says_where_it_waits_in_under_200_characters() {
        assert_eq!(queued_ack("build-3f2a1c", place(2, Some("heavy"), &[])), "queued build-3f2a1c (2nd in queue heavy) — run-bg check build-3f2a1c");
        assert_eq!(queued_ack("t-1", place(1, None, &["a-1", "b-2"])), "queued t-1 (after a-1, b-2) — run-bg check t-1");
        assert_eq!(queued_ack("t-1", place(11, Some("q"), &["a-1"])), "queued t-1 (11th in queue q, after a-1) — run-bg check t-1");
        let long = "x".repeat(40) + "-3f2a1c";
        let many: Vec<String> = (0..30).map(|i| format!("{}{i:02}", "y".repeat(40))).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let ack = queued_ack(&long, place(123, Some(&"q".repeat(64)), &many));
        assert!(ack.chars().count() < 200, "{} chars: {ack}", ack.chars().count());
        assert!(ack.contains("more") || ack.contains("30 jobs"), "{ack}");
        assert_eq!([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(ordinal), ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]);
    }
    use crate::model::job::{HookRun, JobState, Notification, ProcessIdentity};

    const HOUR_MS: u64 = 3_600_000;
    const PWNED: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J";

    fn job(status: JobStatus) -> Job {
        // Started 2h13m ago and, if it ended, ended then.
        let mut job = crate::model::job::sample_job(status);
        job.argv = vec!["make".into()];
        job
    }

    fn ended_at(job: &Job) -> u64 {
        let ended_at = job.ended_at().unwrap();
        assert_eq!(ended_at - job.started_at, 2 * HOUR_MS + 13 * 60_000);
        ended_at
    }

    /// A check that found no matching or error line says that, not that the
    /// job printed nothing (a newcomer read "(no output)" after a --grep).
    #[test]
    fn an_empty_check_says_what_was_not_found() {
        let text = |status, selection| {
            let check = CheckResult { job: job(status), tail: Vec::new(), cursor: 0, log_problem: None, lingering: Vec::new(), usage: None, selection };
            check_text(&check).lines().last().unwrap().to_string()
        };
        assert_eq!(text(JobStatus::Success, Selection::Last), "(no output)");
        assert_eq!(text(JobStatus::Running, Selection::Last), "(no output yet)");
        assert_eq!(text(JobStatus::Success, Selection::Matching), "(no line matches)");
        assert_eq!(text(JobStatus::Failed, Selection::Errors), "(no line looks like an error)");
        assert_eq!(text(JobStatus::Running, Selection::Errors), "(no line looks like an error yet)");
        // `-n 0` asks for the header alone: that says nothing of the output.
        assert!(text(JobStatus::Success, Selection::NoLines).starts_with("build-3f2a1c: success"), "the header is the last line");
    }

    #[test]
    fn a_lost_job_that_ran_says_what_is_known() {
        let mut lost = job(JobStatus::Lost);
        let reason = "the supervisor and the job's processes are gone and no exit status was recorded";
        lost.state = JobState::Lost { reason: Some(reason.into()), ended_at: ended_at(&lost) };
        let text = outcome_text(&lost);
        assert!(!text.contains("could not start"), "{text}");
        assert_eq!(text, "lost: its supervisor (pid 4241) is gone and no exit status was recorded, after 2h13m");
        let how = how_it_ended(&lost);
        assert!(!how.contains("could not start") && how.contains("no exit status"), "{how}");
    }

    /// Its impossible identities are dropped from the record, which then
    /// looks like a supervisor gone before recording its main process.
    #[test]
    fn a_job_lost_to_its_corrupt_record_says_only_that() {
        let mut lost = job(JobStatus::Lost);
        lost.main = None;
        let reason = "the record is corrupt: it names pid 1 as the job's main process, which no job's process can be; nothing was signalled";
        lost.state = JobState::Lost { reason: Some(reason.into()), ended_at: ended_at(&lost) };
        assert_eq!(outcome_text(&lost), "lost: the record is corrupt, after 2h13m");
        assert_eq!(how_it_ended(&lost), "the record is corrupt");
        let header = header(&lost, "");
        assert!(!header.contains("supervisor") && header.contains(reason), "{header}");
    }

    #[test]
    fn only_a_job_whose_main_process_never_started_could_not_start() {
        let mut failed = job(JobStatus::Failed);
        failed.main = None;
        failed.state = JobState::FailedToStart { error: "command not found in PATH".into(), ended_at: ended_at(&failed) };
        assert!(outcome_text(&failed).starts_with("failed (could not start) after"), "{}", outcome_text(&failed));

        let mut lost = job(JobStatus::Lost);
        lost.main = None;
        lost.state = JobState::Lost { reason: Some("gone".into()), ended_at: ended_at(&lost) };
        let text = outcome_text(&lost);
        assert!(text.starts_with("lost: its supervisor (pid 4241) is gone before its main process was recorded"), "{text}");

        // An error beside a main process that ran is no start failure.
        let mut killed = job(JobStatus::Killed);
        killed.note = Some("its supervisor died; its processes ended later".into());
        assert_eq!(how_it_ended(&killed), "no exit status");
    }

    #[test]
    fn user_text_is_printed_with_its_control_characters_escaped() {
        let mut j = job(JobStatus::Failed);
        // A hand-edited record can hold anything, even in its id and signal.
        j.id = format!("id{PWNED}");
        j.state = JobState::Signalled { signal: format!("SIGTERM{PWNED}"), ended_at: ended_at(&j) };
        j.command = format!("sh -c 'echo {PWNED}'");
        j.label = format!("x{PWNED}");
        j.note = Some(format!("working directory `/tmp/{PWNED}` does not exist"));
        j.hooks = vec![HookRun {
            command: format!("notify {PWNED}"),
            exit_code: Some(1),
            error: Some(format!("exited 1: {PWNED}")),
            duration_ms: 5,
            event_id: None,
        }];
        j.notification = Some(Notification {
            event_id: "x:failed".into(),
            state: crate::model::job::DeliveryState::Pending,
            attempts: 2,
            last_error: Some(format!("bad answer {PWNED}")),
            ..Default::default()
        });
        let lingering = vec![ProcessEntry {
            identity: ProcessIdentity::from_stat(77, 1),
            ppid: 1,
            pgid: 77,
            command: format!("sleep 300 {PWNED}"),
            cookie: Some(j.id.clone()),
            rss_kb: 0,
        }];
        let check = CheckResult {
            job: j.clone(),
            tail: vec!["plain".into()],
            cursor: 0,
            log_problem: None,
            lingering: lingering.clone(),
            usage: None,
            selection: Selection::Last,
        };
        let printed = [
            ack_line(&j.id, 4242, &j.command),
            header(&j, ""),
            list_line(&j, 0),
            lingering_line(&j, &lingering).unwrap(),
            check_text(&check),
        ];
        for text in printed {
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "raw control character in {text:?}");
            assert!(text.contains("\\x1b]0;pwned\\x07\\x1b[2J"), "{text:?}");
        }
    }
}

/// The words each outcome is said in, as every face prints them.
#[cfg(test)]
mod wording_tests {
    use super::*;
    use crate::model::job::sample_ended as ended;


    #[test]
    fn each_outcome_reads_as_its_status_how_it_ended_and_its_runtime() {
        let cases = [
            (ended(JobStatus::Running, None, None), "running for 2h13m"),
            (ended(JobStatus::Success, Some(0), None), "success (exit 0) after 2h13m"),
            (ended(JobStatus::Failed, Some(3), None), "failed (exit 3) after 2h13m"),
            (ended(JobStatus::Failed, None, Some("SIGSEGV")), "failed (signal SIGSEGV) after 2h13m"),
            (ended(JobStatus::Killed, None, Some("SIGTERM")), "killed (signal SIGTERM) after 2h13m"),
            (ended(JobStatus::Timeout, Some(0), None), "timeout (exit 0) after 2h13m"),
            (ended(JobStatus::Orphaned, None, None), "orphaned (supervisor gone, processes still running) after 2h13m"),
            (
                ended(JobStatus::Lost, None, None),
                "lost: its supervisor (pid 4241) is gone and no exit status was recorded, after 2h13m",
            ),
        ];
        for (job, expected) in cases {
            assert_eq!(outcome_text(&job), expected, "{}", job.status());
        }
        let mut unknown_supervisor = ended(JobStatus::Lost, None, None);
        unknown_supervisor.supervisor = None;
        assert!(outcome_text(&unknown_supervisor).starts_with("lost: its supervisor is gone and"));
    }

    #[test]
    fn a_header_names_the_job_its_outcome_pid_and_command_then_its_error() {
        let mut job = ended(JobStatus::Failed, Some(2), None);
        assert_eq!(header(&job, ""), "build-3f2a1c: failed (exit 2) after 2h13m · pid 4242 · make -j2");
        assert_eq!(
            header(&job, " · peak 1.5 MiB"),
            "build-3f2a1c: failed (exit 2) after 2h13m · pid 4242 · make -j2 · peak 1.5 MiB"
        );
        job.note = Some("hook timed out".into());
        assert_eq!(header(&job, ""), "build-3f2a1c: failed (exit 2) after 2h13m · pid 4242 · make -j2\n  error: hook timed out");

        let mut never_started = ended(JobStatus::Failed, None, None);
        never_started.main = None;
        never_started.command = "/nonexistent/prog".into();
        assert_eq!(
            header(&never_started, ""),
            "build-3f2a1c: failed (could not start) after 2h13m · /nonexistent/prog",
            "no pid without a main process"
        );
    }

    #[test]
    fn a_long_or_multi_line_command_is_shown_on_one_line_cut_with_an_ellipsis() {
        let mut job = ended(JobStatus::Success, Some(0), None);
        job.command = format!("sh -c 'echo a\necho b' {}", "x".repeat(200));
        let line = header(&job, "");
        let command = line.rsplit(" · ").next().unwrap();
        assert_eq!(command.chars().count(), 80);
        assert!(command.starts_with("sh -c 'echo a echo b' ") && command.ends_with('…'), "{command}");
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("exactly10!", 10), "exactly10!");
        assert_eq!(shorten("eleven chars", 10), "eleven ch…");
    }

    #[test]
    fn the_ack_stays_under_200_characters_whatever_the_command() {
        let line = ack_line("build-3f2a1c", 4242, &"y".repeat(5000));
        assert!(line.chars().count() < 200, "{} chars", line.chars().count());
        assert!(line.starts_with("started build-3f2a1c (pid 4242): yyy") && line.ends_with("… — run-bg check build-3f2a1c"));
        assert_eq!(ack_line("ls-1", 7, "ls"), "started ls-1 (pid 7): ls — run-bg check ls-1");
    }

    #[test]
    fn list_says_lingering_processes_only_for_an_ended_job() {
        let done = ended(JobStatus::Success, Some(0), None);
        assert_eq!(list_line(&done, 0), "build-3f2a1c  success (exit 0) after 2h13m  make -j2");
        assert_eq!(
            list_line(&done, 2),
            "build-3f2a1c  success (exit 0) after 2h13m · 2 process(es) still running  make -j2"
        );
        let running = ended(JobStatus::Running, None, None);
        assert_eq!(list_line(&running, 2), "build-3f2a1c  running for 2h13m  make -j2");
    }
}

/// `run-bg up`'s lines: one a process, `name  id  what`, the columns aligned.
pub fn stack_up_lines(view: &crate::present::view::StackUpView) -> Vec<String> {
    let name_width = view.processes.iter().map(|p| p.name.len()).max().unwrap_or(0);
    let id_width = view.processes.iter().map(|p| p.job_id.as_deref().map_or(1, str::len)).max().unwrap_or(0);
    view.processes
        .iter()
        .map(|p| {
            let what = match (p.action.as_str(), &p.error) {
                ("queued", _) if !p.waiting_for.is_empty() => format!("queued (after {})", p.waiting_for.join(", ")),
                // The reason says `skipped: …` itself.
                ("skipped", Some(error)) => shorten(error, 160),
                (_, Some(error)) => format!("{}: {}", p.action, shorten(error, 160)),
                (action, None) => action.to_string(),
            };
            format!("{:<name_width$}  {:<id_width$}  {what}", p.name, visible(p.job_id.as_deref().unwrap_or("-")))
        })
        .collect()
}

/// `run-bg down`'s lines: one a job killed, `name  <what kill says>`.
pub fn stack_down_lines(view: &crate::present::view::StackDownView) -> Vec<String> {
    if view.killed.is_empty() {
        return vec![format!("nothing of stack {} is running", visible(&view.owner))];
    }
    let name_width = view.killed.iter().map(|k| k.name.len()).max().unwrap_or(0);
    view.killed.iter().map(|k| format!("{:<name_width$}  {}", k.name, k.kill.message)).collect()
}
