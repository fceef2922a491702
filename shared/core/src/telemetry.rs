//! Logging: human-readable by default, JSON with `log.format = "json"`. `RUST_LOG` overrides
//! `log.level`.
//!
//! Lines are not written by the thread that logs them: each formatted line is appended to a
//! shared buffer (no allocation once the buffer has grown; no system call), and a thread of its
//! own writes what gathered to standard error every [`FLUSH_EVERY`] — or at once, from the
//! logging thread, when more than [`MAX_PENDING`] bytes wait (a sink that cannot keep up slows
//! the loggers down instead of losing lines). [`flush`] writes what waits (at shutdown).

use std::io::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use packyard_model::config::{LogConfig, LogFormat};

/// How often the writer thread writes what gathered.
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);
/// Past this many waiting bytes a logger writes them itself.
pub const MAX_PENDING: usize = 4 << 20;

/// The lines waiting to be written.
static PENDING: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// Whether the writer thread runs.
static WRITER_THREAD: OnceLock<bool> = OnceLock::new();

/// Writes `bytes` to standard error (errors are dropped: there is nowhere to report them).
fn write_out(bytes: &[u8]) {
    if !bytes.is_empty() {
        let _ = std::io::stderr().lock().write_all(bytes);
    }
}

/// Writes every line that waits. Call before the process exits.
pub fn flush() {
    let mut pending = PENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    write_out(&pending);
    pending.clear();
}

/// Starts the writer thread once: whether it runs.
fn start_writer_thread() -> bool {
    *WRITER_THREAD.get_or_init(|| {
        let spawned = std::thread::Builder::new().name("log-writer".into()).spawn(|| {
            // Two buffers swapped in turn: what gathered is written while loggers fill the other.
            let mut spare: Vec<u8> = Vec::new();
            loop {
                std::thread::sleep(FLUSH_EVERY);
                {
                    let mut pending = PENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if pending.is_empty() {
                        continue;
                    }
                    std::mem::swap(&mut *pending, &mut spare);
                }
                write_out(&spare);
                spare.clear();
            }
        });
        if spawned.is_err() {
            eprintln!("packyard: cannot start the log writer thread; logs are written as they come");
        }
        spawned.is_ok()
    })
}

/// The fmt layer's writer: one formatted line at a time, appended to [`PENDING`].
#[derive(Clone, Copy)]
struct Deferred {
    /// No writer thread (it could not start): write at once.
    direct: bool,
}

impl std::io::Write for Deferred {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.direct {
            write_out(bytes);
            return Ok(bytes.len());
        }
        let mut pending = PENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pending.len() + bytes.len() > MAX_PENDING {
            write_out(&pending);
            pending.clear();
        }
        pending.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Deferred {
    type Writer = Deferred;
    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

pub fn init(cfg: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = Deferred { direct: !start_writer_thread() };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer);
    // A second init (tests) keeps the first subscriber.
    let _ = match cfg.format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_written_in_order_and_flushed() {
        let mut w = Deferred { direct: false };
        for i in 0..3 {
            let _ = w.write_all(format!("line {i}\n").as_bytes());
        }
        let pending = String::from_utf8(PENDING.lock().map(|p| p.clone()).unwrap_or_default()).unwrap_or_default();
        assert!(pending.contains("line 0\nline 1\nline 2\n"), "{pending:?}");
        flush();
        assert!(PENDING.lock().map(|p| p.is_empty()).unwrap_or(false));
    }
}
