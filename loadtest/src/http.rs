//! A minimal HTTP/1.1 client for measuring: one keep-alive connection per worker, the request
//! written in one go, the response read to its last byte (Content-Length or chunked). Plain
//! `http://` on loopback is all a side-by-side measurement needs; nothing here pools, retries
//! or follows redirects, so what is timed is the server.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The longest a request may take before the run fails.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Where requests go: `host:port` and the path prefix of the target's base URL.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: String,
    pub host_header: String,
    /// The base URL's path, ending in `/`.
    pub prefix: String,
}

impl Endpoint {
    pub fn parse(base: &str) -> anyhow::Result<Self> {
        let url = url::Url::parse(base)?;
        anyhow::ensure!(url.scheme() == "http", "only http:// targets are measured (got {base})");
        let host = url.host_str().ok_or_else(|| anyhow::anyhow!("{base} has no host"))?.to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let mut prefix = url.path().to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(Self { addr: format!("{host}:{port}"), host_header: format!("{host}:{port}"), prefix })
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: &'static str,
    /// Relative to the endpoint's prefix.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<std::sync::Arc<Vec<u8>>>,
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body_len: u64,
    /// Only when asked to keep it.
    pub body: Vec<u8>,
    /// From just before the request was written until the last byte of the body was read.
    pub elapsed: Duration,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

pub struct Conn {
    endpoint: Endpoint,
    stream: Option<BufReader<TcpStream>>,
    scratch: Vec<u8>,
}

impl Conn {
    pub fn new(endpoint: Endpoint) -> Self {
        Self { endpoint, stream: None, scratch: vec![0; 64 * 1024] }
    }

    async fn connect(&mut self) -> anyhow::Result<&mut BufReader<TcpStream>> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.endpoint.addr).await?;
            s.set_nodelay(true)?;
            self.stream = Some(BufReader::with_capacity(64 * 1024, s));
        }
        self.stream.as_mut().ok_or_else(|| anyhow::anyhow!("no connection"))
    }

    /// Sends one request on the kept-alive connection (reconnecting if the server closed it
    /// before this request was written) and reads the whole response.
    pub async fn send(&mut self, req: &Request, keep_body: bool) -> anyhow::Result<Response> {
        match self.send_timed(req, keep_body).await {
            Ok(r) => Ok(r),
            // A kept-alive connection the server closed meanwhile: once more on a new one. Not
            // for a request with a body (an upload may have arrived; sending it again would be
            // another request).
            Err(e) if self.stream.is_none() && req.body.is_none() && e.downcast_ref::<Stale>().is_some() => {
                self.send_timed(req, keep_body).await
            }
            Err(e) => Err(e),
        }
    }

    /// A server that stops answering fails the run instead of hanging it.
    async fn send_timed(&mut self, req: &Request, keep_body: bool) -> anyhow::Result<Response> {
        match tokio::time::timeout(REQUEST_TIMEOUT, self.send_once(req, keep_body)).await {
            Ok(r) => r,
            Err(_) => {
                self.stream = None;
                anyhow::bail!("{} /{} got no complete answer within {REQUEST_TIMEOUT:?}", req.method, req.path)
            }
        }
    }

    async fn send_once(&mut self, req: &Request, keep_body: bool) -> anyhow::Result<Response> {
        let mut head = format!(
            "{} {}{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: packyard-loadtest\r\n",
            req.method, self.endpoint.prefix, req.path, self.endpoint.host_header
        );
        for (k, v) in &req.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = &req.body {
            head.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        head.push_str("\r\n");
        let reused = self.stream.is_some();
        let stream = self.connect().await?;
        let started = Instant::now();
        let written = async {
            stream.get_mut().write_all(head.as_bytes()).await?;
            if let Some(b) = &req.body {
                stream.get_mut().write_all(b).await?;
            }
            Ok::<_, std::io::Error>(())
        }
        .await;
        if let Err(e) = written {
            self.stream = None;
            return Err(if reused { anyhow::Error::new(Stale(e.to_string())) } else { e.into() });
        }
        let result = self.read_response(req.method == "HEAD", keep_body, started).await;
        match result {
            Ok((resp, close)) => {
                if close {
                    self.stream = None;
                }
                Ok(resp)
            }
            Err(e) => {
                self.stream = None;
                Err(if reused && e.to_string().contains("closed before") {
                    anyhow::Error::new(Stale(e.to_string()))
                } else {
                    e
                })
            }
        }
    }

    async fn read_response(
        &mut self,
        head_only: bool,
        keep: bool,
        started: Instant,
    ) -> anyhow::Result<(Response, bool)> {
        let stream = self.stream.as_mut().ok_or_else(|| anyhow::anyhow!("no connection"))?;
        let mut line = String::new();
        match stream.read_line(&mut line).await {
            Ok(0) => anyhow::bail!("the connection was closed before a response"),
            // A kept-alive connection the server had closed answers the request with a reset
            // instead of an end of stream when the request got there first.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                anyhow::bail!("the connection was closed before a response (reset)")
            }
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("malformed status line {line:?}"))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if stream.read_line(&mut line).await? == 0 {
                anyhow::bail!("the connection was closed in the response head");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        let close = get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let chunked = get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let length: Option<u64> = get("content-length").and_then(|v| v.parse().ok());
        let mut body = Vec::new();
        let mut body_len = 0u64;
        let no_body = head_only || status == 304 || status == 204 || (100..200).contains(&status);
        if !no_body {
            if chunked {
                loop {
                    line.clear();
                    anyhow::ensure!(
                        stream.read_line(&mut line).await? > 0,
                        "the connection was closed in a chunked body"
                    );
                    let size = u64::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16)
                        .map_err(|_| anyhow::anyhow!("malformed chunk size {line:?}"))?;
                    if size == 0 {
                        // Trailers end with an empty line.
                        loop {
                            line.clear();
                            if stream.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                                break;
                            }
                        }
                        break;
                    }
                    read_exact_into(stream, &mut self.scratch, size, keep, &mut body).await?;
                    body_len += size;
                    line.clear();
                    stream.read_line(&mut line).await?;
                }
            } else if let Some(n) = length {
                read_exact_into(stream, &mut self.scratch, n, keep, &mut body).await?;
                body_len = n;
            } else {
                // Until the server closes the connection.
                loop {
                    let n = stream.read(&mut self.scratch).await?;
                    if n == 0 {
                        break;
                    }
                    if keep {
                        body.extend_from_slice(&self.scratch[..n]);
                    }
                    body_len += n as u64;
                }
                return Ok((Response { status, headers, body_len, body, elapsed: started.elapsed() }, true));
            }
        }
        Ok((Response { status, headers, body_len, body, elapsed: started.elapsed() }, close))
    }
}

async fn read_exact_into(
    stream: &mut BufReader<TcpStream>,
    scratch: &mut [u8],
    mut n: u64,
    keep: bool,
    body: &mut Vec<u8>,
) -> anyhow::Result<()> {
    while n > 0 {
        let want = usize::try_from(n).unwrap_or(usize::MAX).min(scratch.len());
        let got = stream.read(&mut scratch[..want]).await?;
        anyhow::ensure!(got > 0, "the connection was closed in the body");
        if keep {
            body.extend_from_slice(&scratch[..got]);
        }
        n -= got as u64;
    }
    Ok(())
}

/// A reused connection turned out to be closed: the request may be sent again.
#[derive(Debug)]
struct Stale(String);

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stale keep-alive connection: {}", self.0)
    }
}

impl std::error::Error for Stale {}
