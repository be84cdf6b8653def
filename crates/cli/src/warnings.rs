//! Where the core's `tracing` warnings and errors go in the CLI: stderr, in
//! the CLI's own voice (`run-bg: warning: …`, `run-bg: …`). The core never
//! writes to stderr itself, so a Node host's stderr stays its own.

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

struct CliVoice;

impl<S, N> FormatEvent<S, N> for CliVoice
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let prefix = if *event.metadata().level() == Level::WARN { "run-bg: warning: " } else { "run-bg: " };
        writer.write_str(prefix)?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Warnings and errors to stderr; the core's info events (snapshots) stay off.
pub fn init() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(Level::WARN)
        .with_ansi(false)
        .event_format(CliVoice)
        .try_init();
}
