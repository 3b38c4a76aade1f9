//! Structured logs on stderr (stdout stays for command output): JSON for clusters, text for
//! people, filtered by `RUST_LOG`. Either way a line carries the fields of the spans it was
//! logged in (JSON: `span` and `spans`), so a span's fields are not repeated on each line.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber, filtered by `RUST_LOG` or else by `default_filter` (an
/// `EnvFilter` directive such as `info`).
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colour codes only for a person at a terminal, never in collected logs.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    subscriber(format, filter, std::io::stderr, ansi).init();
}

/// The subscriber [`init`] installs, writing to `writer` (tests capture its lines).
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    match format {
        LogFormat::Text => Box::new(builder.finish()),
        LogFormat::Json => Box::new(builder.json().flatten_event(true).finish()),
    }
}
