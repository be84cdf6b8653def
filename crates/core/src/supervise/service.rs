//! The interrupt service's HTTP client: one POST of an event, and what its
//! answer means (queued, ignored, refused, a server error, no answer). Both
//! the notifier and the wake rules' settling speak through it.

use crate::model::duration::format_duration_ms;
use crate::model::error::PostError;
use crate::model::text;
use std::time::Duration;

/// How a refused connection is recorded: most often no interrupt service is
/// installed at all, which `check` then says how to turn off.
pub const NOTHING_LISTENS: &str = "nothing listens at";

/// What a receiver made of an event it took (a 2xx).
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The interrupt service queued it for the agent; `matched` rules (0: its default action).
    Queued { matched: u32 },
    /// The interrupt service took it and passes it to no one.
    Ignored { reason: String },
    /// A 2xx in another shape: a receiver that is not the interrupt service.
    Accepted,
}

/// Why a POST did not get an event taken.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// A 4xx: this request is refused, and would be again.
    Refused { status: String, error: String },
    /// A 5xx (or another non-2xx): the service may have queued it first.
    ServerError { status: String, error: String },
    /// No answer: refused connection, timeout, broken connection.
    Unanswered(PostError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused { status, error } | Failure::ServerError { status, error } if !error.is_empty() => {
                write!(f, "HTTP {status}: {error}")
            }
            Failure::Refused { status, .. } | Failure::ServerError { status, .. } => write!(f, "HTTP {status}"),
            Failure::Unanswered(e) => e.fmt(f),
        }
    }
}

/// Reads a 2xx body as the interrupt service writes it.
fn read_answer(body: &str) -> Answer {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else { return Answer::Accepted };
    match value.get("status").and_then(|s| s.as_str()) {
        Some("queued") => Answer::Queued { matched: value.get("matched").and_then(|m| m.as_u64()).unwrap_or(0) as u32 },
        Some("ignored") => Answer::Ignored {
            reason: value.get("reason").and_then(|r| r.as_str()).unwrap_or("no reason given").to_string(),
        },
        _ => Answer::Accepted,
    }
}

/// The error text of a refusal: its JSON `error`, else the body itself (cut).
fn error_text(body: &str) -> String {
    let said = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    text::cut(&text::visible(&said.replace('\n', " ")), 200)
}

/// One POST, bounded by `timeout` from connect to answer.
pub fn post(url: &str, body: &[u8], timeout: Duration) -> Result<Answer, Failure> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    match agent.post(url).header("content-type", "application/json").send(body) {
        Ok(mut response) => {
            let status = response.status();
            let text = response.body_mut().with_config().limit(64 * 1024).read_to_string().unwrap_or_default();
            if status.is_success() {
                Ok(read_answer(&text))
            } else if status.is_client_error() {
                Err(Failure::Refused { status: status.to_string(), error: error_text(&text) })
            } else {
                Err(Failure::ServerError { status: status.to_string(), error: error_text(&text) })
            }
        }
        Err(ureq::Error::Timeout(_)) => {
            Err(Failure::Unanswered(PostError::Timeout(format_duration_ms(timeout.as_millis() as u64))))
        }
        Err(ureq::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Err(Failure::Unanswered(PostError::NothingListens { url: url.to_string() }))
        }
        Err(e) => Err(Failure::Unanswered(PostError::Other(e.to_string()))),
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
        assert!(matches!(&error, Failure::Unanswered(PostError::NothingListens { url: at }) if *at == url), "{error:?}");
        assert_eq!(error.to_string(), format!("{NOTHING_LISTENS} {url} (connection refused)"));
    }

    #[test]
    fn the_services_answers_are_read_as_it_writes_them() {
        assert_eq!(read_answer(r#"{"status":"queued","matched":2}"#), Answer::Queued { matched: 2 });
        assert_eq!(read_answer(r#"{"status":"queued","matched":0,"defaultAction":true}"#), Answer::Queued { matched: 0 });
        let ignored = r#"{"status":"ignored","matched":0,"reason":"no matching rules"}"#;
        assert_eq!(read_answer(ignored), Answer::Ignored { reason: "no matching rules".into() });
        assert_eq!(read_answer("ok"), Answer::Accepted, "another kind of receiver");
        assert_eq!(error_text("{\"error\":\"Missing required field: source\"}\n"), "Missing required field: source");
        assert_eq!(error_text("<html>\nbad gateway</html>"), "<html> bad gateway</html>");
    }

    #[test]
    fn other_failures_read_as_before() {
        assert_eq!(PostError::Status("404 Not Found".into()).to_string(), "HTTP 404 Not Found");
        assert_eq!(PostError::Timeout("5.0s".into()).to_string(), "no answer within 5.0s");
    }
}
