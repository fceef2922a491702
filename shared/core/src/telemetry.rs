//! Logging: human-readable by default, JSON with `log.format = "json"`. `RUST_LOG` overrides
//! `log.level`.
//!
//! Lines are not written by the thread that logs them: each formatted line is appended to its
//! thread's own buffer (no allocation once the buffer has grown; no system call; a lock that only
//! the writer thread ever contends), and a thread of its own writes what gathered in every
//! buffer to standard error every [`FLUSH_EVERY`] — or at once, from the logging thread, when
//! more than [`MAX_PENDING`] bytes wait in its buffer (a sink that cannot keep up slows the
//! loggers down instead of losing lines). [`flush`] writes what waits (at shutdown).
//!
//! One buffer per thread rather than one for the process: the worker threads log a line per
//! request, and a shared buffer moves its lock and its bytes between their cores on every one
//! (on the 2-core host of docs/perf/ceiling.md this measured neutral; it is meant for hosts
//! with more cores, where it was not measured). The price: lines of different threads gathered
//! in one round are written thread by thread, not interleaved by time (each line carries its
//! timestamp); the lines of one thread keep their order, but for the last few a thread logs
//! while it ends, after its buffer is gone (written at once, possibly ahead of what its buffer
//! still held).

use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use packyard_model::config::{LogConfig, LogFormat};

/// How often the writer thread writes what gathered.
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);
/// Past this many bytes waiting in its buffer a logger writes them itself.
pub const MAX_PENDING: usize = 4 << 20;

/// One thread's lines waiting to be written.
type Buffer = Arc<Mutex<Vec<u8>>>;

/// Every thread's buffer (a thread's own stays here after it ended, until what it held is
/// written).
static BUFFERS: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());
/// Whether the writer thread runs.
static WRITER_THREAD: OnceLock<bool> = OnceLock::new();

thread_local! {
    /// This thread's buffer, registered in [`BUFFERS`] on first use.
    static PENDING: Buffer = {
        let buffer = Buffer::default();
        BUFFERS.lock().unwrap_or_else(PoisonError::into_inner).push(buffer.clone());
        buffer
    };
}

/// Appends to this thread's buffer with `append`, writing what waits first when it is past
/// [`MAX_PENDING`]. A thread whose buffer is gone (it is ending) writes at once.
fn pending(append: impl FnOnce(&mut Vec<u8>)) {
    let mut append = Some(append);
    let kept = PENDING.try_with(|buffer| {
        let mut pending = buffer.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.len() > MAX_PENDING {
            write_out(&pending);
            pending.clear();
        }
        if let Some(append) = append.take() {
            append(&mut pending);
        }
    });
    if kept.is_err() {
        if let Some(append) = append.take() {
            let mut line = Vec::new();
            append(&mut line);
            write_out(&line);
        }
    }
}

/// Writes `bytes` to standard error (errors are dropped: there is nowhere to report them).
fn write_out(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    #[cfg(test)]
    if let Some(sink) = tests::SINK.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
        sink.extend_from_slice(bytes);
        return;
    }
    let _ = std::io::stderr().lock().write_all(bytes);
}

/// One round of [`write_buffers`] at a time: a [`flush`] at shutdown waits for the writer
/// thread's round, which may hold lines it took out of a buffer but has not written yet.
static ROUND: Mutex<()> = Mutex::new(());

/// Writes what waits in every buffer through `spare` (swapped with each non-empty one, so a
/// logger never waits for the write), and lets go of the buffers of threads that ended.
fn write_buffers(spare: &mut Vec<u8>) {
    let _round = ROUND.lock().unwrap_or_else(PoisonError::into_inner);
    let buffers = {
        let mut all = BUFFERS.lock().unwrap_or_else(PoisonError::into_inner);
        let now = all.clone();
        // Held by the list and `now` alone: an ended thread's buffer, written below and gone.
        all.retain(|b| Arc::strong_count(b) > 2);
        now
    };
    for buffer in &buffers {
        {
            let mut pending = buffer.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.is_empty() {
                continue;
            }
            std::mem::swap(&mut *pending, spare);
        }
        write_out(spare);
        spare.clear();
    }
}

/// Writes every line that waits. Call before the process exits.
pub fn flush() {
    write_buffers(&mut Vec::new());
}

/// Starts the writer thread once: whether it runs.
fn start_writer_thread() -> bool {
    *WRITER_THREAD.get_or_init(|| {
        let spawned = std::thread::Builder::new().name("log-writer".into()).spawn(|| {
            // What gathered is written from here while loggers fill their buffers again.
            let mut spare: Vec<u8> = Vec::new();
            loop {
                std::thread::sleep(FLUSH_EVERY);
                write_buffers(&mut spare);
            }
        });
        if spawned.is_err() {
            eprintln!("packyard: cannot start the log writer thread; logs are written as they come");
        }
        spawned.is_ok()
    })
}

/// The fmt layer's writer: one formatted line at a time, appended to the thread's buffer.
#[derive(Clone, Copy)]
struct Deferred {
    /// No writer thread (it could not start): write at once.
    direct: bool,
}

impl std::io::Write for Deferred {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.direct {
            write_out(bytes);
        } else {
            pending(|pending| pending.extend_from_slice(bytes));
        }
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

/// How lines are written, once [`init`] ran: JSON or text, and whether with colours.
static STYLE: OnceLock<Lines> = OnceLock::new();

/// The target the access line is filed under (what `RUST_LOG`/`log.level` directives name).
pub const ACCESS_TARGET: &str = "packyard_api::observe";

/// Writes a request's access line — `request{request_id=… method=… path=…}: request status=…
/// elapsed_ms=…` in text, the same fields in JSON — when `info` is enabled for
/// [`ACCESS_TARGET`]. The line is formatted once, straight into the log buffer, without
/// tracing's per-event machinery: it is written for every request, so it is the log's hot path.
pub fn access(cx: &RequestContext, status: u16, elapsed: Duration) {
    if !tracing::enabled!(target: "packyard_api::observe", tracing::Level::INFO) {
        return;
    }
    let style = STYLE.get().copied().unwrap_or(Lines { json: false, ansi: true });
    if style.ansi || WRITER_THREAD.get() != Some(&true) {
        // A terminal (colours) or no writer thread: the ordinary way.
        REQUEST.sync_scope(
            RequestContext::new(cx.id, cx.method, cx.path.clone()),
            || tracing::info!(target: "packyard_api::observe", status, elapsed_ms = elapsed.as_secs_f64() * 1000.0, "request"),
        );
        return;
    }
    let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    pending(|pending| access_line(pending, style.json, cx, status, nanos));
}

/// One access line, appended to `line`.
fn access_line(line: &mut Vec<u8>, json: bool, cx: &RequestContext, status: u16, nanos: u64) {
    // `elapsed_ms` as `<ms>.<ns, 6 digits>`, each number written digit by digit: this line is
    // written for every request, and the formatting machinery costs more than the rest of it.
    let elapsed_ms = |line: &mut Vec<u8>| {
        push_u64(line, nanos / 1_000_000);
        line.push(b'.');
        push_padded(line, nanos % 1_000_000, 6);
    };
    if json {
        line.extend_from_slice(b"{\"timestamp\":\"");
        push_timestamp(line);
        line.extend_from_slice(b"\",\"level\":\"INFO\",\"message\":\"request\",\"status\":");
        push_u64(line, u64::from(status));
        line.extend_from_slice(b",\"elapsed_ms\":");
        elapsed_ms(line);
        line.extend_from_slice(b",\"target\":\"packyard_api::observe\",\"span\":{\"method\":");
        json_bytes(line, cx.method);
        line.extend_from_slice(b",\"path\":");
        json_bytes(line, &cx.path);
        line.extend_from_slice(b",\"request_id\":");
        json_bytes(line, cx.id.as_str());
        line.extend_from_slice(b",\"name\":\"request\"}}\n");
    } else {
        push_timestamp(line);
        line.extend_from_slice(b"  INFO request{request_id=");
        line.extend_from_slice(cx.id.as_str().as_bytes());
        line.extend_from_slice(b" method=\"");
        line.extend_from_slice(cx.method.as_bytes());
        line.extend_from_slice(b"\" path=");
        line.extend_from_slice(cx.path.as_bytes());
        line.extend_from_slice(b"}: request status=");
        push_u64(line, u64::from(status));
        line.extend_from_slice(b" elapsed_ms=");
        elapsed_ms(line);
        line.push(b'\n');
    }
}

/// Appends `n` in decimal.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Appends the last `width` decimal digits of `n`, zero-padded.
fn push_padded(out: &mut Vec<u8>, mut n: u64, width: usize) {
    let start = out.len();
    out.resize(start + width, b'0');
    for slot in out[start..].iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Appends the current time as `2026-11-30T12:34:56.789012Z`: the date and time of the second
/// written once a second (per thread), the microseconds each time.
fn push_timestamp(out: &mut Vec<u8>) {
    use std::cell::Cell;
    thread_local! {
        /// The second last written, and its `YYYY-MM-DDTHH:MM:SS.` (20 bytes).
        static SECOND: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
    }
    let now = std::time::SystemTime::now();
    let since = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (secs, prefix) = SECOND.get();
    let prefix = if secs == since.as_secs() {
        prefix
    } else {
        let mut text = Vec::with_capacity(32);
        let _ = write!(text, "{}", packyard_model::time::Rfc3339Micros(now));
        let mut prefix = [0u8; 20];
        prefix.copy_from_slice(&text[..20]);
        SECOND.set((since.as_secs(), prefix));
        prefix
    };
    out.extend_from_slice(&prefix);
    push_padded(out, u64::from(since.subsec_micros()), 6);
    out.push(b'Z');
}

/// [`json_str`] into bytes.
fn json_bytes(out: &mut Vec<u8>, s: &str) {
    struct Bytes<'a>(&'a mut Vec<u8>);
    impl std::fmt::Write for Bytes<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    let _ = json_str(&mut Bytes(out), s);
}

pub fn init(cfg: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = Deferred { direct: !start_writer_thread() };
    let lines = Lines { json: cfg.format == LogFormat::Json, ansi };
    let _ = STYLE.set(lines);
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer).event_format(lines);
    // A second init (tests) keeps the first subscriber.
    let _ = builder.try_init();
}

/// What every log line of a request says about it (`request{request_id=… method=… path=…}` in
/// text, `"span":{…}` in JSON): set by the HTTP middleware for the request's future
/// ([`REQUEST`]) — a task-local value rather than a tracing span, which would be made, formatted
/// and entered on every request whether anything logs in it or not.
#[derive(Debug)]
pub struct RequestContext {
    pub id: RequestId,
    pub method: &'static str,
    pub path: String,
    /// The repository the request turned out to be for, once a route knows it (the metrics'
    /// labels): kept here rather than in the request's extensions, which cost an allocation
    /// and a hash insert per request.
    pub repository: std::cell::OnceCell<std::sync::Arc<packyard_model::repos::Repository>>,
}

impl RequestContext {
    pub fn new(id: RequestId, method: &'static str, path: String) -> Self {
        Self { id, method, path, repository: std::cell::OnceCell::new() }
    }
}

/// A request id: at most [`RequestId::MAX`] ASCII letters, digits, `-`, `_` and `.`, held in
/// place (every request has one; it costs no allocation).
#[derive(Clone, Copy)]
pub struct RequestId {
    bytes: [u8; RequestId::MAX],
    len: u8,
}

impl RequestId {
    pub const MAX: usize = 64;

    /// `text` when it is a sane id (what a client's `X-Request-Id` may say).
    pub fn parse(text: &[u8]) -> Option<Self> {
        let sane = |b: &u8| b.is_ascii_alphanumeric() || b"-_.".contains(b);
        if text.is_empty() || text.len() > Self::MAX || !text.iter().all(sane) {
            return None;
        }
        let mut bytes = [0; Self::MAX];
        bytes[..text.len()].copy_from_slice(text);
        Some(Self { bytes, len: u8::try_from(text.len()).ok()? })
    }

    /// 16 random hex digits.
    pub fn random() -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = [0; Self::MAX];
        for (i, b) in rand::random::<[u8; 8]>().into_iter().enumerate() {
            bytes[2 * i] = HEX[usize::from(b >> 4)];
            bytes[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        Self { bytes, len: 16 }
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

tokio::task_local! {
    /// The request the current task serves.
    pub static REQUEST: RequestContext;
}

/// Formats a line: text as tracing's full format writes it, or JSON with the event's fields
/// flattened; the request's context from [`REQUEST`].
#[derive(Debug, Clone, Copy)]
struct Lines {
    json: bool,
    ansi: bool,
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Lines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::FormatFields as _;
        let meta = event.metadata();
        let now = packyard_model::time::Rfc3339Micros(std::time::SystemTime::now());
        if self.json {
            write!(w, "{{\"timestamp\":\"{now}\",\"level\":\"{}\"", meta.level())?;
            let mut fields = JsonFields { w: &mut w, result: Ok(()) };
            event.record(&mut fields);
            fields.result?;
            w.write_str(",\"target\":")?;
            json_str(&mut w, meta.target())?;
            let _ = REQUEST.try_with(|r| -> std::fmt::Result {
                w.write_str(",\"span\":{\"method\":")?;
                json_str(&mut w, r.method)?;
                w.write_str(",\"path\":")?;
                json_str(&mut w, &r.path)?;
                w.write_str(",\"request_id\":")?;
                json_str(&mut w, r.id.as_str())?;
                w.write_str(",\"name\":\"request\"}")
            });
            return w.write_str("}\n");
        }
        let level = meta.level();
        let colour = match *level {
            tracing::Level::ERROR => "31",
            tracing::Level::WARN => "33",
            tracing::Level::INFO => "32",
            tracing::Level::DEBUG => "34",
            tracing::Level::TRACE => "35",
        };
        if self.ansi {
            write!(w, "\x1b[2m{now}\x1b[0m \x1b[{colour}m{level:>5}\x1b[0m ")?;
        } else {
            write!(w, "{now} {level:>5} ")?;
        }
        let _ =
            REQUEST.try_with(|r| write!(w, "request{{request_id={} method={:?} path={}}}: ", r.id, r.method, r.path));
        ctx.format_fields(w.by_ref(), event)?;
        w.write_char('\n')
    }
}

/// Writes `s` as a JSON string.
fn json_str(w: &mut (impl std::fmt::Write + ?Sized), s: &str) -> std::fmt::Result {
    w.write_char('"')?;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let escaped = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            c if (c as u32) < 0x20 => {
                w.write_str(&s[start..i])?;
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
                continue;
            }
            _ => continue,
        };
        w.write_str(&s[start..i])?;
        w.write_str(escaped)?;
        start = i + c.len_utf8();
    }
    w.write_str(&s[start..])?;
    w.write_char('"')
}

/// An event's fields as JSON members (`,"name":value` each).
struct JsonFields<'a, 'w> {
    w: &'a mut tracing_subscriber::fmt::format::Writer<'w>,
    result: std::fmt::Result,
}

impl JsonFields<'_, '_> {
    fn member(
        &mut self,
        field: &tracing::field::Field,
        value: impl FnOnce(&mut dyn std::fmt::Write) -> std::fmt::Result,
    ) {
        if self.result.is_err() {
            return;
        }
        self.result = (|| {
            self.w.write_char(',')?;
            json_str(self.w, field.name())?;
            self.w.write_char(':')?;
            value(self.w)
        })();
    }
}

impl tracing::field::Visit for JsonFields<'_, '_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.member(field, |w| json_str(w, value));
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.member(field, |w| write!(w, "{value}"));
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.member(field, |w| write!(w, "{value}"));
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.member(field, |w| write!(w, "{value}"));
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.member(field, |w| if value.is_finite() { write!(w, "{value}") } else { w.write_str("null") });
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        // Rare (messages and `?` fields): formatted once into a string, then escaped.
        let text = format!("{value:?}");
        self.member(field, |w| json_str(w, &text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_timestamps_are_written_digit_by_digit() {
        let mut out = Vec::new();
        push_u64(&mut out, 0);
        out.push(b' ');
        push_u64(&mut out, 18_446_744_073_709_551_615);
        out.push(b' ');
        push_padded(&mut out, 42, 6);
        out.push(b' ');
        push_padded(&mut out, 1_234_567, 6);
        assert_eq!(String::from_utf8_lossy(&out), "0 18446744073709551615 000042 234567");
        let mut ts = Vec::new();
        push_timestamp(&mut ts);
        push_timestamp(&mut ts);
        let ts = String::from_utf8_lossy(&ts).to_string();
        let (a, b) = ts.split_at(27);
        for t in [a, b] {
            assert!(packyard_model::time::parse_rfc3339(t).is_some(), "{t}");
            assert!(t.ends_with('Z') && t.as_bytes()[19] == b'.', "{t}");
        }
    }

    #[test]
    fn access_lines_in_text_and_json() -> Result<(), Box<dyn std::error::Error>> {
        let cx = RequestContext::new(RequestId::parse(b"abc-1").ok_or("id")?, "GET", "/repository/d/x\"y".into());
        let mut out = Vec::new();
        access_line(&mut out, false, &cx, 404, 2_053_116);
        let text = String::from_utf8(out)?;
        assert_eq!(
            &text[27..],
            "  INFO request{request_id=abc-1 method=\"GET\" path=/repository/d/x\"y}: request status=404 elapsed_ms=2.053116\n"
        );
        let mut out = Vec::new();
        access_line(&mut out, true, &cx, 200, 7_000);
        let line: serde_json::Value = serde_json::from_slice(&out)?;
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "request");
        assert_eq!(line["status"], 200);
        assert_eq!(line["elapsed_ms"], 0.007);
        assert_eq!(line["target"], "packyard_api::observe");
        assert_eq!(
            line["span"],
            serde_json::json!({"method": "GET", "path": "/repository/d/x\"y", "request_id": "abc-1", "name": "request"})
        );
        assert!(line["timestamp"].as_str().and_then(packyard_model::time::parse_rfc3339).is_some(), "{line}");
        Ok(())
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut out = String::new();
        let _ = json_str(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(out, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }

    /// The tests that flush every buffer, one at a time (no writer thread runs in them).
    static FLUSHES: Mutex<()> = Mutex::new(());
    /// Where [`write_out`] writes instead of standard error while a test sets it.
    pub(super) static SINK: Mutex<Option<Vec<u8>>> = Mutex::new(None);

    #[test]
    fn lines_are_written_in_order_and_flushed() {
        let _alone = FLUSHES.lock().unwrap_or_else(PoisonError::into_inner);
        let mut w = Deferred { direct: false };
        for i in 0..3 {
            let _ = w.write_all(format!("line {i}\n").as_bytes());
        }
        let mine = || PENDING.with(|b| b.lock().map(|p| p.clone()).unwrap_or_default());
        let pending = String::from_utf8(mine()).unwrap_or_default();
        assert!(pending.contains("line 0\nline 1\nline 2\n"), "{pending:?}");
        flush();
        assert!(mine().is_empty());
    }

    #[test]
    fn an_ended_threads_lines_are_written_and_its_buffer_let_go() -> std::thread::Result<()> {
        let _alone = FLUSHES.lock().unwrap_or_else(PoisonError::into_inner);
        let buffer = std::thread::spawn(|| {
            let _ = Deferred { direct: false }.write_all(b"from a thread that ends\n");
            PENDING.with(Arc::downgrade)
        })
        .join()?;
        let held = buffer.upgrade().map(|b| b.lock().map(|p| p.clone()).unwrap_or_default());
        assert_eq!(
            held.as_deref(),
            Some(&b"from a thread that ends\n"[..]),
            "the line is not in the ended thread's buffer"
        );
        *SINK.lock().unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
        flush();
        let written = SINK.lock().unwrap_or_else(PoisonError::into_inner).take().unwrap_or_default();
        assert!(
            String::from_utf8_lossy(&written).contains("from a thread that ends\n"),
            "the ended thread's line was not written: {written:?}"
        );
        assert!(buffer.upgrade().is_none(), "the ended thread's buffer is still listed");
        Ok(())
    }
}
