//! What a request says about where it came from, believed only as far as the configuration
//! allows: the public address people reach Packyard at (`server.public_url`, else the
//! request's own scheme and `Host`), and the client's address. The proxy headers count only on
//! requests from `server.trusted_proxies`, and only as a proxy leaves them (read from the
//! right); from anyone else they are ignored, so a client cannot choose the address its failed
//! logins are counted under. Which headers are the proxy's is the operator's choice
//! (`server.forwarded_headers`: `X-Forwarded-{For,Proto,Host}` or RFC 7239 `Forwarded`), never
//! the request's: a proxy passes on what it does not write, so the other kind is the client's
//! own and is never read. Without `server.public_url` the host of a generated URL is the
//! request's `Host` — the client's choice, as in any HTTP server: set `public_url`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use actix_web::{web, HttpRequest};
use packyard_model::config::{Config, ForwardedHeaders, ServerConfig};
use packyard_model::net::Network;

/// The parsed settings, kept in the app's data.
#[derive(Debug, Clone, Default)]
pub struct Frontage {
    /// `server.public_url` as origin and path prefix.
    public: Option<(String, String)>,
    trusted: Vec<Network>,
    headers: ForwardedHeaders,
}

/// Where people reach Packyard: an origin (`https://repo.example.com`) and a path prefix
/// (`/packyard`, or empty at the root).
#[derive(Debug, Clone)]
pub struct Base {
    pub origin: String,
    pub prefix: String,
    pub https: bool,
}

impl Frontage {
    /// From `server.public_url` and `server.trusted_proxies`; both were checked when the
    /// configuration was loaded, so a value that does not parse here counts as unset.
    pub fn new(config: &Config) -> Self {
        let public = config.server.public_url.as_deref().and_then(|u| ServerConfig::parse_public_url(u).ok());
        let trusted =
            packyard_model::net::networks("server.trusted_proxies", &config.server.trusted_proxies).unwrap_or_default();
        Self { public, trusted, headers: config.server.forwarded_headers }
    }

    fn of(req: &HttpRequest) -> Option<&Self> {
        req.app_data::<web::Data<Frontage>>().map(|d| d.get_ref())
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|n| n.contains(ip))
    }

    fn peer(req: &HttpRequest) -> IpAddr {
        req.peer_addr().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip())
    }

    fn peer_trusted(&self, req: &HttpRequest) -> bool {
        !self.trusted.is_empty() && req.peer_addr().is_some_and(|a| self.trusts(a.ip()))
    }

    fn base(&self, req: &HttpRequest) -> Base {
        if let Some((origin, prefix)) = &self.public {
            return Base { https: origin.starts_with("https:"), origin: origin.clone(), prefix: prefix.clone() };
        }
        let own_scheme = if req.app_config().secure() { "https" } else { "http" };
        // HTTP/2 clients send the host as the request's `:authority`, not as a `Host` header.
        let host_header = req
            .headers()
            .get(actix_web::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()));
        let (scheme, host) = if self.peer_trusted(req) {
            // What the proxy set: the last value (a proxy that appends puts its own last; one that
            // sets it leaves only its own).
            let (proto, host) = match self.headers {
                ForwardedHeaders::Forwarded => {
                    let last = forwarded(req).pop();
                    (last.as_ref().and_then(|e| e.proto.clone()), last.and_then(|e| e.host))
                }
                ForwardedHeaders::XForwarded => {
                    (last_value(req, "x-forwarded-proto"), last_value(req, "x-forwarded-host"))
                }
            };
            let scheme = proto
                .map(|p| p.to_ascii_lowercase())
                .filter(|p| p == "http" || p == "https")
                .unwrap_or_else(|| own_scheme.to_string());
            (scheme, host.or(host_header.map(str::to_string)))
        } else {
            (own_scheme.to_string(), host_header.map(str::to_string))
        };
        let host = host.filter(|h| plausible_host(h)).unwrap_or_else(|| req.app_config().host().to_string());
        Base { https: scheme == "https", origin: format!("{scheme}://{host}"), prefix: String::new() }
    }

    /// The client: the peer, or — from a trusted proxy — the nearest address in
    /// `X-Forwarded-For` (or `Forwarded`'s `for=`) that is not itself a trusted proxy, read from
    /// the right (each proxy appends the address it got the request from; what the client wrote
    /// lies to the left).
    fn client(&self, req: &HttpRequest) -> IpAddr {
        let peer = Self::peer(req);
        if !self.peer_trusted(req) {
            return peer;
        }
        let hops: Vec<String> = match self.headers {
            // An element without `for=` is a hop that cannot be read: it ends the walk.
            ForwardedHeaders::Forwarded => forwarded(req).into_iter().map(|e| e.for_.unwrap_or_default()).collect(),
            ForwardedHeaders::XForwarded => {
                entries(req, "x-forwarded-for").into_iter().map(Option::unwrap_or_default).collect()
            }
        };
        let mut client = peer;
        for hop in hops.iter().rev() {
            // An address that cannot be read ("unknown", an obfuscated name) ends the walk: what
            // lies beyond it was not vouched for.
            let Some(ip) = hop_address(hop) else { break };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

/// One element of an RFC 7239 `Forwarded` header: what one proxy said.
#[derive(Debug, Default)]
struct Hop {
    for_: Option<String>,
    proto: Option<String>,
    host: Option<String>,
}

/// The elements of `Forwarded` (over all its lines, left to right).
fn forwarded(req: &HttpRequest) -> Vec<Hop> {
    entries(req, "forwarded")
        .into_iter()
        .map(|element| {
            let mut hop = Hop::default();
            // An element that cannot be read says nothing (and, without `for=`, ends a walk).
            for pair in element.as_deref().unwrap_or_default().split(';') {
                let Some((key, value)) = pair.split_once('=') else { continue };
                let value = value.trim().trim_matches('"');
                let value = (!value.is_empty()).then(|| value.to_string());
                match key.trim().to_ascii_lowercase().as_str() {
                    "for" => hop.for_ = value,
                    "proto" => hop.proto = value,
                    "host" => hop.host = value,
                    _ => {}
                }
            }
            hop
        })
        .collect()
}

/// The comma-separated entries of a header over all its lines, left to right, trimmed. Split as
/// bytes: a proxy appends its entry to the line the client sent, so a client's byte that is not
/// text must not take the proxy's entry with it; an entry that is not ASCII comes back empty (a
/// hop that cannot be read) is `None`.
fn entries(req: &HttpRequest, name: &str) -> Vec<Option<String>> {
    req.headers()
        .get_all(name)
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .map(|e| e.is_ascii().then(|| String::from_utf8_lossy(e).trim().to_string()))
        .collect()
}

/// The last non-empty entry of a header; `None` when that one cannot be read.
fn last_value(req: &HttpRequest, name: &str) -> Option<String> {
    entries(req, name).into_iter().rev().find(|e| e.as_deref() != Some("")).flatten()
}

impl Base {
    /// Where the request's caller reaches this server.
    pub fn of(req: &HttpRequest) -> Self {
        match Frontage::of(req) {
            Some(f) => f.base(req),
            None => Frontage::default().base(req),
        }
    }

    /// A link to a page or file of this server (`/search` → `/packyard/search`).
    pub fn link(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// The whole URL, for what is pasted elsewhere (a client's configuration).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}{path}", self.origin, self.prefix)
    }
}

/// The address a request comes from, for the login throttle and the audit log.
pub fn client_addr(req: &HttpRequest) -> IpAddr {
    match Frontage::of(req) {
        Some(f) => f.client(req),
        None => Frontage::peer(req),
    }
}

/// A host (and port) fit to put in a URL: letters, digits, `.-_:` and an IPv6 literal's
/// brackets; anything else (a path, spaces, quotes) is not a host.
pub(crate) fn plausible_host(h: &str) -> bool {
    !h.is_empty() && h.len() <= 255 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b))
}

/// A `for=` value or an `X-Forwarded-For` entry: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `"[2001:db8::1]:4711"`.
fn hop_address(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim().trim_matches('"');
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = hop.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    hop.strip_prefix('[').and_then(|r| r.strip_suffix(']')).and_then(|r| r.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn frontage(public: Option<&str>, trusted: &[&str]) -> Frontage {
        let mut config = Config::default();
        config.server.public_url = public.map(str::to_string);
        config.server.trusted_proxies = trusted.iter().map(|s| s.to_string()).collect();
        Frontage::new(&config)
    }

    fn from(peer: &str) -> TestRequest {
        TestRequest::get().uri("/x").peer_addr(peer.parse().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))))
    }

    #[test]
    fn forwarded_headers_count_only_from_trusted_proxies() {
        let lb = frontage(None, &["10.0.0.0/8"]);
        let spoofed = from("203.0.113.9:5000")
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("X-Forwarded-Host", "evil.example"))
            .insert_header(("X-Forwarded-Proto", "https"))
            .insert_header(("X-Forwarded-For", "198.51.100.1"))
            .insert_header(("Forwarded", "for=198.51.100.2;host=evil2.example;proto=https"))
            .to_http_request();
        assert_eq!(lb.base(&spoofed).origin, "http://packyard.internal:8080");
        assert_eq!(lb.client(&spoofed).to_string(), "203.0.113.9");

        let via_lb = from("10.1.2.3:5000")
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("X-Forwarded-Host", "repo.example.com"))
            .insert_header(("X-Forwarded-Proto", "https"))
            .insert_header(("X-Forwarded-For", "192.0.2.99, 198.51.100.7, 10.9.9.9"))
            .to_http_request();
        let base = lb.base(&via_lb);
        assert_eq!((base.origin.as_str(), base.https), ("https://repo.example.com", true));
        // From the right: 10.9.9.9 is another trusted hop, 198.51.100.7 the client; what the
        // client wrote before itself (192.0.2.99) is not believed.
        assert_eq!(lb.client(&via_lb).to_string(), "198.51.100.7");

        // A client's own `Forwarded` and its X-Forwarded-* values to the left of the proxy's.
        let through_lb = from("10.1.2.3:5000")
            .insert_header(("Forwarded", "for=192.0.2.60;proto=https;host=evil.example"))
            .insert_header(("X-Forwarded-For", "192.0.2.1, 198.51.100.9"))
            .insert_header(("X-Forwarded-Host", "evil.example, repo.example.com"))
            .insert_header(("X-Forwarded-Proto", "http, https"))
            .to_http_request();
        assert_eq!(lb.client(&through_lb).to_string(), "198.51.100.9");
        assert_eq!(lb.base(&through_lb).origin, "https://repo.example.com");

        // A client's byte that is not text does not take the proxy's entry on its line with it.
        let binary = from("10.1.2.3:5000")
            .insert_header((
                "X-Forwarded-For",
                actix_web::http::header::HeaderValue::from_bytes(b"192.0.2.1\xff, 198.51.100.9")
                    .unwrap_or_else(|_| actix_web::http::header::HeaderValue::from_static("header value refused")),
            ))
            .to_http_request();
        assert_eq!(lb.client(&binary).to_string(), "198.51.100.9");
        let binary_last = from("10.1.2.3:5000")
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header((
                "X-Forwarded-Host",
                actix_web::http::header::HeaderValue::from_bytes(b"repo.example.com, evil\xff.example")
                    .unwrap_or_else(|_| actix_web::http::header::HeaderValue::from_static("header value refused")),
            ))
            .to_http_request();
        assert_eq!(
            lb.base(&binary_last).origin,
            "http://packyard.internal:8080",
            "an unreadable last value is no host"
        );

        let unknown =
            from("10.1.2.3:5000").insert_header(("X-Forwarded-For", "198.51.100.1, unknown")).to_http_request();
        assert_eq!(lb.client(&unknown).to_string(), "10.1.2.3", "an unreadable hop ends the walk");
    }

    /// Behind a proxy that writes RFC 7239 `Forwarded` (`server.forwarded_headers = "forwarded"`):
    /// its element (the last) counts; a client's own `Forwarded` elements to the left and its own
    /// `X-Forwarded-*` (which such a proxy passes on untouched) do not.
    #[test]
    fn rfc7239_forwarded_when_configured() {
        let mut config = Config::default();
        config.server.trusted_proxies = vec!["10.0.0.0/8".into()];
        config.server.forwarded_headers = ForwardedHeaders::Forwarded;
        let lb = Frontage::new(&config);
        let rfc7239 = from("10.1.2.3:5000")
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("X-Forwarded-Host", "evil-x.example"))
            .insert_header(("X-Forwarded-Proto", "http"))
            .insert_header(("X-Forwarded-For", "192.0.2.77"))
            .insert_header(("Forwarded", "for=192.0.2.1;host=evil.example;proto=http"))
            .insert_header(("Forwarded", "for=\"[2001:db8::7]:4711\";Proto=HTTPS;host=\"repo.example.com\""))
            .to_http_request();
        assert_eq!(lb.client(&rfc7239).to_string(), "2001:db8::7");
        assert_eq!(lb.base(&rfc7239).origin, "https://repo.example.com");

        let partial = from("10.1.2.3:5000")
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("Forwarded", "for=192.0.2.1;host=evil.example;proto=https, proto=http"))
            .to_http_request();
        assert_eq!(lb.base(&partial).origin, "http://packyard.internal:8080", "the client's host is not taken");
        assert_eq!(lb.client(&partial).to_string(), "10.1.2.3", "a hop without for= ends the walk");

        let chain = from("10.1.2.3:5000")
            .insert_header(("Forwarded", "for=192.0.2.1, for=198.51.100.20, for=10.7.7.7;proto=https"))
            .to_http_request();
        assert_eq!(lb.client(&chain).to_string(), "198.51.100.20", "trusted hops are walked past");

        let untrusted = from("203.0.113.9:5000")
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("Forwarded", "for=198.51.100.2;host=evil.example;proto=https"))
            .to_http_request();
        assert_eq!(lb.base(&untrusted).origin, "http://packyard.internal:8080");
        assert_eq!(lb.client(&untrusted).to_string(), "203.0.113.9");
    }

    #[test]
    fn the_public_url_wins_over_every_header() {
        let f = frontage(Some("https://repo.example.com/packyard/"), &["10.0.0.0/8"]);
        let req = from("10.1.2.3:5000")
            .insert_header(("Host", "internal:8080"))
            .insert_header(("X-Forwarded-Host", "other.example"))
            .to_http_request();
        let base = f.base(&req);
        assert_eq!(base.url("/repository/debs/"), "https://repo.example.com/packyard/repository/debs/");
        assert_eq!(base.link("/search"), "/packyard/search");
    }

    #[test]
    fn a_host_header_that_is_no_host_is_not_used() {
        let f = frontage(None, &[]);
        let req = from("203.0.113.9:5000").insert_header(("Host", "evil.example/\"><x")).to_http_request();
        assert!(!f.base(&req).origin.contains("evil"), "{}", f.base(&req).origin);
    }
}
