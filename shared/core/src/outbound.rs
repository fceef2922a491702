//! Every request Packyard makes to another server — a proxy's upstream fetch, a webhook
//! delivery — goes out through one kind of client, under one address guard:
//!
//! - Only public addresses are reached, unless a configured list opens chosen networks
//!   (`proxy.allowed_networks`, `webhooks.allowed_networks`) or the operator allows every one.
//!   An IP literal is checked as written (the URL parser reads `127.1`, `0x7f000001` and
//!   `2130706433` as the IPv4 address they are); a name is checked at connect time, on every
//!   address it resolves to, so a name that resolves elsewhere later is caught then.
//! - Through the outbound proxy (`proxy.http_proxy`, or the environment's), the proxy resolves
//!   the name: where it resolves here too, every address must pass before the request is sent.
//! - Extra certificate authorities (`proxy.ca_certificates`) are trusted beside the public roots.
//! - Redirects are refused, or (proxy fetches) followed at most five times, each target
//!   checked again.
//!
//! [`cause`] reads why a request failed out of reqwest's error chain, for each caller to word.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use packyard_model::net::{AddressPolicy, OutboundProxy};

/// The address guard of one kind of request.
#[derive(Debug)]
pub struct Guard {
    policy: AddressPolicy,
    outbound: Arc<OutboundProxy>,
    /// Who is reached, in messages: `upstream host`, `webhook receiver`.
    whom: &'static str,
    /// How to open a network, in messages: `proxy.allowed_networks (...) or ...`.
    remedy: &'static str,
    /// Name the addresses a refused host resolves to (an upstream's administrator wants them;
    /// a webhook's message should not map the internal network).
    show_addresses: bool,
}

impl Guard {
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.policy.allows(ip)
    }

    /// Why `host`, resolving to `addrs`, may not be reached.
    pub fn refusal(&self, host: &str, addrs: &[IpAddr]) -> Blocked {
        let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        let shown = if self.show_addresses || host.parse::<IpAddr>().is_ok() {
            format!(" ({})", list.join(", "))
        } else {
            String::new()
        };
        Blocked(format!(
            "{} {host} resolves only to loopback, private or link-local addresses{shown}; allow them with {}",
            self.whom, self.remedy
        ))
    }

    /// An IP-literal host is never resolved, so it is checked here (also on redirects).
    pub fn check_literal(&self, url: &url::Url) -> Result<(), Blocked> {
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            _ => return Ok(()),
        };
        if self.allows(ip) {
            Ok(())
        } else {
            Err(self.refusal(&ip.to_string(), &[ip]))
        }
    }
}

/// A request the guard refused; also raised inside reqwest (the resolver, the redirect policy)
/// and found again in its error chain.
#[derive(Debug, Clone)]
pub struct Blocked(pub String);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Blocked {}

/// A host name that did not resolve; found again in reqwest's error chain.
#[derive(Debug)]
pub struct DnsFailure {
    pub host: String,
    pub cause: String,
}

impl std::fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot resolve {}: {}", self.host, self.cause)
    }
}

impl std::error::Error for DnsFailure {}

pub async fn lookup(host: &str) -> Result<Vec<SocketAddr>, DnsFailure> {
    match tokio::net::lookup_host((host, 0)).await {
        Ok(addrs) => Ok(addrs.collect()),
        Err(e) => Err(DnsFailure { host: host.to_string(), cause: e.to_string() }),
    }
}

/// reqwest's resolver: every address a name resolves to is checked when a connection is made.
struct GuardedResolver {
    guard: Arc<Guard>,
    /// The outbound proxies' host names: reached whatever their addresses (the operator's
    /// choice, typically a private address).
    trusted: Arc<Vec<String>>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let trusted = self.trusted.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let all = lookup(&host).await.map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            if trusted.iter().any(|t| t.eq_ignore_ascii_case(&host)) {
                return Ok(Box::new(all.into_iter()) as reqwest::dns::Addrs);
            }
            let allowed: Vec<SocketAddr> = all.iter().copied().filter(|a| guard.allows(a.ip())).collect();
            if allowed.is_empty() && !all.is_empty() {
                let ips: Vec<IpAddr> = all.iter().map(SocketAddr::ip).collect();
                return Err(Box::new(guard.refusal(&host, &ips)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// How a kind of request goes out.
pub struct Settings<'a> {
    pub policy: AddressPolicy,
    pub whom: &'static str,
    pub remedy: &'static str,
    pub show_addresses: bool,
    pub outbound: OutboundProxy,
    pub ca_certificates: &'a [PathBuf],
    pub user_agent: &'static str,
    pub connect_timeout: Duration,
    /// Longest silence while reading an answer (none: only `timeout`).
    pub read_timeout: Option<Duration>,
    /// The whole request.
    pub timeout: Duration,
    pub max_idle_per_host: usize,
    /// Follow up to five redirects, each target guarded (proxy fetches); otherwise a redirect
    /// is the answer.
    pub follow_redirects: bool,
}

/// A guarded client; cheap to clone.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    guard: Arc<Guard>,
}

impl Outbound {
    pub fn new(s: Settings<'_>) -> anyhow::Result<Self> {
        let outbound = Arc::new(s.outbound);
        let guard = Arc::new(Guard {
            policy: s.policy,
            outbound: outbound.clone(),
            whom: s.whom,
            remedy: s.remedy,
            show_addresses: s.show_addresses,
        });
        let redirects = if s.follow_redirects {
            let guard = guard.clone();
            reqwest::redirect::Policy::custom(move |attempt| {
                let target = attempt.url();
                let host = target.host_str().unwrap_or_default().to_ascii_lowercase();
                let proxied = guard.outbound.for_url(target).is_some();
                let first_host =
                    attempt.previous().first().and_then(|u| u.host_str()).unwrap_or_default().to_ascii_lowercase();
                if attempt.previous().len() >= 5 {
                    attempt.error("more than 5 redirects")
                } else if let Err(b) = guard.check_literal(target) {
                    attempt.error(b)
                } else if !proxied && guard.outbound.hosts().contains(&host) {
                    // The proxy's own name is trusted only as the proxy, never as a destination.
                    attempt.error(Blocked(format!(
                        "{} redirected to {host}, the outbound proxy's host, which is not one",
                        guard.whom
                    )))
                } else if proxied && host != first_host {
                    // Through the proxy the name is resolved there, out of the guard's sight.
                    attempt.error(Blocked(format!(
                        "{} {first_host} redirected to another host, {host}, through the outbound proxy, where the address guard cannot check it: use {host} as the remote_url, or list it in proxy.no_proxy",
                        guard.whom
                    )))
                } else {
                    attempt.follow()
                }
            })
        } else {
            reqwest::redirect::Policy::none()
        };
        let mut builder = reqwest::Client::builder()
            .user_agent(s.user_agent)
            .connect_timeout(s.connect_timeout)
            .timeout(s.timeout)
            .pool_max_idle_per_host(s.max_idle_per_host)
            .pool_idle_timeout(Duration::from_secs(60))
            .dns_resolver(Arc::new(GuardedResolver { guard: guard.clone(), trusted: Arc::new(outbound.hosts()) }))
            // reqwest's own reading of the environment is off: the outbound proxy is decided
            // here (`OutboundProxy`), where the guard knows which requests it carries.
            .no_proxy()
            .redirect(redirects);
        if let Some(read) = s.read_timeout {
            builder = builder.read_timeout(read);
        }
        if outbound.is_configured() {
            let route = outbound.clone();
            builder = builder.proxy(reqwest::Proxy::custom(move |url| route.for_url(url).cloned()));
        }
        for path in s.ca_certificates {
            let certs = crate::certs::pem_certificates(path)
                .map_err(|e| anyhow::anyhow!("bad value for key `proxy.ca_certificates`: {e}"))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Self { client: builder.build()?, guard })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    pub fn outbound(&self) -> &OutboundProxy {
        &self.guard.outbound
    }

    /// The outbound proxy a request to `url` goes through, if any.
    pub fn via(&self, url: &url::Url) -> Option<&url::Url> {
        self.guard.outbound.for_url(url)
    }

    /// What the guard checks before a request is sent (the resolver checks the rest at connect
    /// time): an IP literal; and, where the outbound proxy will resolve the name — or the name
    /// is the proxy's own, which the resolver trusts only as the proxy — the name as it
    /// resolves here, every address (a name this host cannot resolve is the proxy's to reach,
    /// under its own rules; the proxy's own name is never a destination).
    pub async fn preflight(&self, url: &url::Url) -> Result<(), Blocked> {
        self.guard.check_literal(url)?;
        let via = self.via(url).is_some();
        let Some(url::Host::Domain(host)) = url.host() else { return Ok(()) };
        let host = host.to_ascii_lowercase();
        let proxy_host = self.guard.outbound.hosts().contains(&host);
        if !via && !proxy_host {
            return Ok(());
        }
        match self.resolved(&host).await {
            Some(checked) => checked,
            None if !via => {
                Err(Blocked(format!("{} {host} is the outbound proxy's, which is not one", self.guard.whom)))
            }
            None => Ok(()),
        }
    }

    /// `host` as it resolves here, every address checked; `None` when it does not resolve.
    async fn resolved(&self, host: &str) -> Option<Result<(), Blocked>> {
        let addrs = lookup(host).await.ok()?;
        let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
        Some(if ips.iter().any(|ip| !self.guard.allows(*ip)) { Err(self.guard.refusal(host, &ips)) } else { Ok(()) })
    }

    /// A destination checked when it is configured (a webhook's URL): an IP literal, or the
    /// name as it resolves now — every address must pass. A name that does not resolve (yet) is
    /// let through when requests connect directly (it is checked at every connection); through
    /// the outbound proxy, which resolves names itself out of the guard's sight, it is refused.
    pub async fn check(&self, url: &url::Url) -> Result<(), Blocked> {
        self.guard.check_literal(url)?;
        let Some(url::Host::Domain(host)) = url.host() else { return Ok(()) };
        let host = host.to_ascii_lowercase();
        let via = self.via(url).is_some();
        if self.guard.outbound.hosts().contains(&host) && !via {
            return Err(Blocked(format!("{} {host} is the outbound proxy's, which is not one", self.guard.whom)));
        }
        match self.resolved(&host).await {
            Some(checked) => checked,
            None if via => Err(Blocked(format!(
                "{} {host} does not resolve here, and through the outbound proxy the address guard could not check where it leads: use a name this host resolves, or list it in proxy.no_proxy",
                self.guard.whom
            ))),
            None => Ok(()),
        }
    }
}

/// Why a request failed, read out of reqwest's error chain.
#[derive(Debug)]
pub enum Cause<'a> {
    /// The guard refused it (at connect time, or a redirect).
    Blocked(&'a Blocked),
    Dns(&'a DnsFailure),
    Tls(&'a rustls::Error),
    /// The connection was refused, reset, or found no route.
    Connection(std::io::ErrorKind),
    /// No connection within the connect timeout.
    ConnectTimeout,
    /// Connected, then no answer (or not all of it) in time.
    Timeout,
    /// Another failure to connect.
    Connect,
    Other,
}

/// The cause of `e`.
pub fn cause(e: &reqwest::Error) -> Cause<'_> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(b) = s.downcast_ref::<Blocked>() {
            return Cause::Blocked(b);
        }
        if let Some(d) = s.downcast_ref::<DnsFailure>() {
            return Cause::Dns(d);
        }
        if let Some(t) = s.downcast_ref::<rustls::Error>() {
            return Cause::Tls(t);
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind;
            if matches!(
                io.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::ConnectionReset
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::HostUnreachable
            ) {
                return Cause::Connection(io.kind());
            }
        }
        source = next_cause(s);
    }
    match (e.is_timeout(), e.is_connect()) {
        (true, true) => Cause::ConnectTimeout,
        (true, false) => Cause::Timeout,
        (false, true) => Cause::Connect,
        (false, false) => Cause::Other,
    }
}

/// The error `e` wraps: an I/O error's `source` skips the error it carries (rustls' errors come
/// wrapped in one, or two), so that one is taken from it.
fn next_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a (dyn std::error::Error + 'static)> {
    match e.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
        Some(inner) => Some(inner),
        None => e.source(),
    }
}

/// The innermost error's text.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(s) = last.source() {
        last = s;
    }
    last.to_string()
}

/// The guarded client deliveries go out with: the address guard (public addresses, and
/// `webhooks.allowed_networks`), the outbound proxy and the CAs that proxy fetches use, no
/// redirects. `env` reads the process's environment (the outbound proxy's variables).
pub fn for_webhooks(
    config: &packyard_model::config::Config,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Outbound> {
    let w = &config.webhooks;
    Outbound::new(Settings {
        policy: w.address_policy().map_err(anyhow::Error::msg)?,
        whom: "webhook receiver",
        show_addresses: false,
        remedy: "webhooks.allowed_networks (e.g. [\"10.0.0.0/8\"])",
        outbound: config.proxy.outbound(env).map_err(anyhow::Error::msg)?,
        ca_certificates: &config.proxy.ca_certificates,
        user_agent: concat!("Packyard-Webhooks/", env!("CARGO_PKG_VERSION")),
        connect_timeout: Duration::from_millis(w.timeout_ms.clamp(1, 10_000)),
        read_timeout: None,
        timeout: Duration::from_millis(w.timeout_ms.max(1)),
        max_idle_per_host: 4,
        follow_redirects: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbound(allowed: &[&str]) -> anyhow::Result<Outbound> {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Outbound::new(Settings {
            policy: AddressPolicy::new(false, &allowed, "webhooks.allowed_networks").map_err(anyhow::Error::msg)?,
            whom: "webhook receiver",
            remedy: "webhooks.allowed_networks",
            show_addresses: false,
            outbound: OutboundProxy::default(),
            ca_certificates: &[],
            user_agent: "test",
            connect_timeout: Duration::from_secs(1),
            read_timeout: None,
            timeout: Duration::from_secs(1),
            max_idle_per_host: 1,
            follow_redirects: false,
        })
    }

    #[tokio::test]
    async fn every_spelling_of_a_private_address_is_refused() -> anyhow::Result<()> {
        let o = outbound(&[])?;
        for url in [
            "http://127.0.0.1/",
            "http://localhost:8080/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://017700000001/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::1]/",
            "http://0.0.0.0/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
        ] {
            let parsed = url::Url::parse(url)?;
            let refused = o.check(&parsed).await.err().map(|b| b.0).unwrap_or_default();
            assert!(refused.contains("webhooks.allowed_networks"), "{url}: {refused}");
        }
        o.check(&url::Url::parse("http://93.184.215.14/")?).await?;
        let open = outbound(&["127.0.0.0/8"])?;
        open.check(&url::Url::parse("http://127.0.0.1:9/")?).await?;
        open.check(&url::Url::parse("http://127.1/")?).await?;
        assert!(open.check(&url::Url::parse("http://[::1]/")?).await.is_err());
        Ok(())
    }
}
