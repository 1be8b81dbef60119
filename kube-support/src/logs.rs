//! Structured logs: JSON or text on stderr, filtered by `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

/// The log line format (a `clap` value: `json` or `text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (for log collectors).
    Json,
    /// Human-readable lines.
    Text,
}

/// Installs the global subscriber.
///
/// # Panics
///
/// When a global subscriber is already installed.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: in a pod's log they are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
