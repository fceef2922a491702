//! Why a fetch failed, in classes an operator can act on (blocked, unreachable, timeout, a
//! failing upstream, our storage), with the configured limit a message names.

use crate::outbound::root_cause;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ProxyError {
    /// The upstream's address is not allowed (SSRF guard).
    #[error("{0}")]
    Blocked(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("{0}")]
    Timeout(String),
    /// The upstream answered with a status that is neither content nor a remembered miss.
    #[error("{0}")]
    Status(String),
    /// The upstream answered with a server error (5xx): it is failing, not refusing.
    #[error("{0}")]
    Failing(String),
    #[error("{0}")]
    TooLarge(String),
    /// Caching it would take the repository past its hard quota (507).
    #[error("{0}")]
    Full(String),
    /// Our own storage (the database, the blob store) is unavailable: a 503, retried later.
    #[error("{0}")]
    Unavailable(String),
    /// The upstream changed between a client's requests and the bytes it was promised are gone:
    /// a 503 — retried, the client reads the new generation.
    #[error("{0}")]
    Changing(String),
    /// A defect of ours.
    #[error("{0}")]
    Internal(String),
}

pub(super) fn internal(e: impl std::fmt::Display) -> ProxyError {
    ProxyError::Internal(e.to_string())
}

/// The database or the blob store failed on the proxy path: logged with its cause, answered 503.
pub(super) fn unavailable(e: impl std::fmt::Display) -> ProxyError {
    tracing::error!(error = %e, "proxy cache storage unavailable");
    ProxyError::Unavailable("the proxy cache's storage (database or blob store) is unavailable; retry later".into())
}

/// The configured limits, named in the messages of the fetches that hit them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub(super) connect_ms: u64,
    pub(super) read_ms: u64,
    pub(super) deadline_ms: u64,
}

/// The URL without credentials or query, for messages and logs.
pub(super) fn redact(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// One upstream request, for naming why it failed.
pub(super) struct Attempt<'a> {
    /// The outbound proxy it went through, if any.
    pub(super) via: Option<&'a reqwest::Url>,
    pub(super) started: std::time::Instant,
    pub(super) timeouts: Timeouts,
}

/// Why an upstream request failed, as an operator can act on it: the name did not resolve, the
/// connection was refused or found no route, a timeout (which one), the TLS handshake, or the
/// outbound proxy; the same text goes to the client's 502/504 and to the log.
pub(super) fn classify(e: &reqwest::Error, url: &reqwest::Url, attempt: &Attempt<'_>) -> ProxyError {
    use crate::outbound::Cause;
    let base = redact(url);
    let through = attempt.via.map(|p| format!(" (through the outbound proxy {})", redact(p))).unwrap_or_default();
    let t = attempt.timeouts;
    match crate::outbound::cause(e) {
        Cause::Blocked(b) => ProxyError::Blocked(b.0.clone()),
        Cause::Dns(d) => {
            let whose = if attempt.via.is_some_and(|p| p.host_str() == Some(d.host.as_str())) {
                "the outbound proxy's host"
            } else {
                "upstream host"
            };
            ProxyError::Unreachable(format!("DNS: cannot resolve {whose} {} ({})", d.host, d.cause))
        }
        Cause::Tls(tls) => {
            let hint = match tls {
                rustls::Error::InvalidCertificate(_) => {
                    "; if it is signed by a private certificate authority, add that CA to proxy.ca_certificates"
                }
                _ => "",
            };
            ProxyError::Unreachable(format!("TLS: the handshake with upstream {base} failed{through}: {tls}{hint}"))
        }
        Cause::Connection(kind) => {
            use std::io::ErrorKind;
            let what = match kind {
                ErrorKind::ConnectionRefused => "refused the connection",
                ErrorKind::ConnectionReset => "reset the connection",
                _ => "is unreachable (no route)",
            };
            let who = match attempt.via {
                Some(p) if e.is_connect() => format!("the outbound proxy {} (for upstream {base})", redact(p)),
                _ => format!("upstream {base}"),
            };
            ProxyError::Unreachable(format!("connection: {who} {what}"))
        }
        Cause::ConnectTimeout => ProxyError::Timeout(format!(
            "timeout: no connection to upstream {base}{through} within proxy.connect_timeout_ms ({} ms)",
            t.connect_ms
        )),
        Cause::Timeout => {
            let elapsed = u64::try_from(attempt.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            ProxyError::Timeout(if elapsed + 50 >= t.deadline_ms {
                format!(
                    "timeout: the fetch from upstream {base}{through} took longer than proxy.fetch_deadline_ms ({} ms)",
                    t.deadline_ms
                )
            } else {
                format!("timeout: upstream {base}{through} sent nothing for proxy.read_timeout_ms ({} ms)", t.read_ms)
            })
        }
        Cause::Connect => ProxyError::Unreachable(format!(
            "connection: cannot connect to upstream {base}{through}: {}",
            root_cause(e)
        )),
        Cause::Other => ProxyError::Unreachable(format!("upstream {base} failed{through}: {}", root_cause(e))),
    }
}

/// A request that failed on the connection rather than in the upstream's answer: neither a
/// timeout nor a failed connect, and no status came back.
pub(super) fn is_stale_connection(e: &reqwest::Error) -> bool {
    !e.is_timeout() && !e.is_connect() && e.status().is_none() && (e.is_request() || e.is_body())
}

pub(super) fn error_label(e: &ProxyError) -> &'static str {
    match e {
        ProxyError::Blocked(_) => "blocked",
        ProxyError::Timeout(_) => "timeout",
        ProxyError::TooLarge(_) => "too_large",
        ProxyError::Full(_) => "quota",
        ProxyError::Changing(_) => "changing",
        ProxyError::Unreachable(_)
        | ProxyError::Status(_)
        | ProxyError::Failing(_)
        | ProxyError::Unavailable(_)
        | ProxyError::Internal(_) => "error",
    }
}
