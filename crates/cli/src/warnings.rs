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

/// The background modes' voice: the core's message as it is. Their
/// messages name who speaks (`run-bg supervisor <id>: …`) and go to the
/// stderr their starter chose: a job's `supervisor.log`, or nowhere.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// For the supervisor and the errands (`__watch`, `__announce`, `__deliver`):
/// warnings and errors to stderr, unprefixed.
pub fn init_background() {
    let _ = tracing::subscriber::set_global_default(background(std::io::stderr));
}

fn background<W>(writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt().with_writer(Lossy(writer)).with_max_level(Level::WARN).with_ansi(false).event_format(Plain).finish()
}

/// Writes what it can and drops the rest. When a warning cannot be written
/// (stderr is a job's supervisor.log on a full disk), tracing reports the
/// failure with `eprintln!`, which panics when stderr is that same file: the
/// supervisor would die before recording the job's end. A lost warning is
/// the lesser harm.
struct Lossy<W>(W);

impl<'a, M: tracing_subscriber::fmt::MakeWriter<'a>> tracing_subscriber::fmt::MakeWriter<'a> for Lossy<M> {
    type Writer = Lossy<M::Writer>;
    fn make_writer(&'a self) -> Self::Writer {
        Lossy(self.0.make_writer())
    }
}

impl<W: std::io::Write> std::io::Write for Lossy<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.write_all(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let _ = self.0.flush();
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_background_mode_writes_the_core_s_warnings_and_errors_as_they_are() {
        let written = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = written.clone();
        let make = move || Sink(sink.clone());
        tracing::subscriber::with_default(background(make), || {
            tracing::error!("run-bg supervisor build-1: cannot record the job's end in its job.json: disk full");
            tracing::warn!("run-bg watcher: cannot log the orphaned job's output: gone");
            tracing::info!("not shown");
        });
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "run-bg supervisor build-1: cannot record the job's end in its job.json: disk full\n\
             run-bg watcher: cannot log the orphaned job's output: gone\n"
        );
    }

    #[test]
    fn a_warning_that_cannot_be_written_is_dropped_not_reported_on_stderr() {
        let mut lossy = Lossy(Full);
        assert_eq!(std::io::Write::write(&mut lossy, b"disk full\n").unwrap(), 10);
        assert!(std::io::Write::flush(&mut lossy).is_ok());
        // And through the subscriber: no error comes back to tracing, so it
        // has nothing to eprintln! (which panics when stderr is the full file).
        tracing::subscriber::with_default(background(|| Full), || tracing::error!("run-bg supervisor x: lost"));
    }

    /// /dev/full.
    struct Full;

    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("no space left on device"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::other("no space left on device"))
        }
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
