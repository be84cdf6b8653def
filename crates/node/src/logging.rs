//! The addon's `tracing` output: the core library only emits events; the
//! addon, the program Node loads, decides where they go.

/// Sends `tracing` events to stderr as `LEVEL message key=value`, once per
/// process, unless the host installed a subscriber first.
/// `PROC_MANAGER_LOG` sets the level (error, warn, info, debug, trace, off).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let level = match std::env::var("PROC_MANAGER_LOG").unwrap_or_default().to_ascii_lowercase().as_str() {
            "off" => return,
            "error" => tracing::Level::ERROR,
            "warn" => tracing::Level::WARN,
            "debug" => tracing::Level::DEBUG,
            "trace" => tracing::Level::TRACE,
            _ => tracing::Level::INFO,
        };
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(level)
            .without_time()
            .with_target(false)
            .with_ansi(false)
            .try_init();
    });
}
