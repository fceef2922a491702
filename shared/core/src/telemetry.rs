//! Logging: human-readable by default, JSON with `log.format = "json"`. `RUST_LOG` overrides
//! `log.level`.

use tracing_subscriber::EnvFilter;

use packyard_model::config::{LogConfig, LogFormat};

pub fn init(cfg: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    // A second init (tests) keeps the first subscriber.
    let _ = match cfg.format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init(),
    };
}
