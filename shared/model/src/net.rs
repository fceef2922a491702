//! Which network addresses a proxy may reach: the public ones, and named private networks
//! (`proxy.allowed_networks`) or all of them (`proxy.allow_private_addresses`).

use std::net::IpAddr;

/// Addresses a proxy may reach without `proxy.allow_private_addresses`: not loopback, private,
/// link-local, shared (CGNAT), unspecified, broadcast, multicast or documentation ranges.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            // IPv4 embedded by NAT64 (64:ff9b::/96), 6to4 (2002::/16) or the deprecated
            // IPv4-compatible form (::a.b.c.d) is judged as that IPv4 address.
            let embedded =
                |hi: u16, lo: u16| IpAddr::V4(std::net::Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                return is_public(embedded(s[6], s[7]));
            }
            if s[0] == 0x2002 {
                return is_public(embedded(s[1], s[2]));
            }
            if s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
                return is_public(embedded(s[6], s[7]));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || s[0] == 0x2001 && s[1] == 0x0db8)
        }
    }
}

/// An IP network in CIDR notation (`10.0.0.0/8`, `fd00::/8`, or a single address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (ip, prefix) = match s.trim().split_once('/') {
            Some((ip, p)) => (ip, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = ip.parse().map_err(|_| format!("{s:?} is not an IP network such as 10.0.0.0/8"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => {
                p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| format!("{s:?}: prefix must be 0 to {max}"))?
            }
            None => max,
        };
        Ok(Self { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Which upstream addresses a proxy may connect to: public ones, and non-public ones only when
/// `proxy.allow_private_addresses` or inside `proxy.allowed_networks`.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    pub allow_private: bool,
    pub networks: Vec<Network>,
}

/// A configured list of networks (`proxy.allowed_networks`, `webhooks.allowed_networks`,
/// `server.trusted_proxies`); a bad one is an error that names `key`.
pub fn networks(key: &str, list: &[String]) -> Result<Vec<Network>, String> {
    list.iter()
        .map(|n| Network::parse(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad value for key `{key}`: {e}"))
}

impl AddressPolicy {
    /// From `proxy.allow_private_addresses` and `proxy.allowed_networks` (or a webhook's
    /// `webhooks.allowed_networks`, named by `key`); a bad network is an error that names it.
    pub fn new(allow_private: bool, allowed_networks: &[String], key: &str) -> Result<Self, String> {
        Ok(Self { allow_private, networks: networks(key, allowed_networks)? })
    }

    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.networks.iter().any(|n| n.contains(ip))
    }
}

/// Where upstream fetches go: straight to the upstream, or through an outbound (corporate) HTTP
/// proxy. From `proxy.http_proxy` and `proxy.no_proxy` when `http_proxy` is set; otherwise from
/// the environment as curl reads it: `https_proxy`/`HTTPS_PROXY` for `https://` upstreams,
/// `http_proxy`/`HTTP_PROXY` for `http://` ones, `all_proxy`/`ALL_PROXY` for both, and
/// `no_proxy`/`NO_PROXY`.
#[derive(Debug, Clone, Default)]
pub struct OutboundProxy {
    http: Option<url::Url>,
    https: Option<url::Url>,
    bypass: Vec<Bypass>,
    /// Where the proxy came from (`proxy.http_proxy`, `HTTPS_PROXY`, ...), for messages.
    pub source: String,
}

#[derive(Debug, Clone)]
enum Bypass {
    All,
    Network(Network),
    /// A host and every host below it.
    Domain(String),
}

impl OutboundProxy {
    /// `env` reads an environment variable (the process's, or a test's).
    pub fn new(
        http_proxy: Option<&str>,
        no_proxy: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let env = |names: &[&str]| {
            names.iter().find_map(|n| env(n).filter(|v| !v.trim().is_empty()).map(|v| (n.to_string(), v)))
        };
        if let Some(url) = http_proxy.filter(|u| !u.trim().is_empty()) {
            let url = proxy_url(url).map_err(|e| format!("bad value for key `proxy.http_proxy`: {e}"))?;
            let bypass = no_proxy
                .iter()
                .map(|e| bypass(e))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("bad value for key `proxy.no_proxy`: {e}"))?;
            return Ok(Self { http: Some(url.clone()), https: Some(url), bypass, source: "proxy.http_proxy".into() });
        }
        let parse = |found: Option<(String, String)>| -> Result<Option<(String, url::Url)>, String> {
            found
                .map(|(name, v)| {
                    proxy_url(&v).map(|u| (name.clone(), u)).map_err(|e| format!("environment variable {name}: {e}"))
                })
                .transpose()
        };
        let all = parse(env(&["all_proxy", "ALL_PROXY"]))?;
        let https = parse(env(&["https_proxy", "HTTPS_PROXY"]))?.or_else(|| all.clone());
        let http = parse(env(&["http_proxy", "HTTP_PROXY"]))?.or(all);
        let mut bypass_list = Vec::new();
        if let Some((name, list)) = env(&["no_proxy", "NO_PROXY"]) {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                bypass_list.push(bypass(entry).map_err(|e| format!("environment variable {name}: {e}"))?);
            }
        }
        let sources: Vec<String> = [&https, &http].iter().filter_map(|p| p.as_ref().map(|(n, _)| n.clone())).collect();
        Ok(Self {
            https: https.map(|(_, u)| u),
            http: http.map(|(_, u)| u),
            bypass: bypass_list,
            source: sources.join(", "),
        })
    }

    pub fn is_configured(&self) -> bool {
        self.http.is_some() || self.https.is_some()
    }

    /// The proxy a request to `url` goes through, or `None` for a direct connection.
    pub fn for_url(&self, url: &url::Url) -> Option<&url::Url> {
        let proxy = match url.scheme() {
            "https" => self.https.as_ref(),
            "http" => self.http.as_ref(),
            _ => None,
        }?;
        let bypassed = self.bypass.iter().any(|b| match (b, url.host()) {
            (Bypass::All, _) => true,
            (Bypass::Network(n), Some(url::Host::Ipv4(ip))) => n.contains(IpAddr::V4(ip)),
            (Bypass::Network(n), Some(url::Host::Ipv6(ip))) => n.contains(IpAddr::V6(ip)),
            (Bypass::Domain(d), Some(url::Host::Domain(host))) => {
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                host == *d || host.strip_suffix(d.as_str()).is_some_and(|rest| rest.ends_with('.'))
            }
            _ => false,
        });
        (!bypassed).then_some(proxy)
    }

    /// The proxies' host names (connections to them are the operator's choice, whatever their
    /// addresses).
    pub fn hosts(&self) -> Vec<String> {
        [&self.http, &self.https].iter().filter_map(|u| u.as_ref()?.host_str().map(str::to_ascii_lowercase)).collect()
    }
}

/// A proxy's URL; `host:port` alone means `http://host:port`.
fn proxy_url(raw: &str) -> Result<url::Url, String> {
    let raw = raw.trim();
    let with_scheme = if raw.contains("://") { raw.to_string() } else { format!("http://{raw}") };
    let url =
        url::Url::parse(&with_scheme).map_err(|e| format!("{:?} is not a proxy URL ({e})", redact_userinfo(raw)))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{:?}: use http://host:port (or https://)", redact_userinfo(raw)));
    }
    Ok(url)
}

/// `user:password@` left out of a proxy URL in messages.
fn redact_userinfo(raw: &str) -> String {
    match raw.rsplit_once('@') {
        Some((before, after)) => {
            let scheme = before.split_once("://").map_or("", |(s, _)| s);
            if scheme.is_empty() {
                format!("****@{after}")
            } else {
                format!("{scheme}://****@{after}")
            }
        }
        None => raw.to_string(),
    }
}

/// One `no_proxy` entry: `*`, an IP network, or a domain (`example.com`, `.example.com`,
/// `*.example.com`: the domain and every host below it); a `:port` is ignored.
fn bypass(entry: &str) -> Result<Bypass, String> {
    let entry = entry.trim();
    if entry == "*" {
        return Ok(Bypass::All);
    }
    if let Ok(n) = Network::parse(entry.trim_start_matches('[').trim_end_matches(']')) {
        return Ok(Bypass::Network(n));
    }
    let host = entry.trim_start_matches("*.").trim_start_matches('.');
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)) {
        return Err(format!("{entry:?} is neither a host name, a domain nor an IP network"));
    }
    Ok(Bypass::Domain(host.trim_end_matches('.').to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_public_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))), "{private}");
        }
        for public in ["151.101.2.132", "8.8.8.8", "2a04:4e42::644", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(is_public(public.parse().unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))), "{public}");
        }
    }

    #[test]
    fn allowed_networks_open_only_themselves() -> Result<(), Box<dyn std::error::Error>> {
        let ip = |s: &str| s.parse::<IpAddr>();
        let config = |nets: &[&str]| nets.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        const KEY: &str = "proxy.allowed_networks";
        let policy = AddressPolicy::new(false, &config(&["10.1.2.0/24", "127.0.0.1", "fd00:1::/32"]), KEY)?;
        for allowed in ["10.1.2.0", "10.1.2.255", "127.0.0.1", "::ffff:10.1.2.7", "fd00:1:ffff::1", "8.8.8.8"] {
            assert!(policy.allows(ip(allowed)?), "{allowed}");
        }
        for refused in ["10.1.3.1", "10.1.1.255", "127.0.0.2", "169.254.169.254", "fd00:2::1", "::1", "192.168.1.1"] {
            assert!(!policy.allows(ip(refused)?), "{refused}");
        }
        let everything = AddressPolicy::new(false, &config(&["0.0.0.0/0"]), KEY)?;
        assert!(everything.allows(ip("10.9.9.9")?) && !everything.allows(ip("::1")?));
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.0/x", "fd00::/129", ""] {
            let err = AddressPolicy::new(false, &config(&[bad]), KEY).err().unwrap_or_default();
            assert!(err.contains("proxy.allowed_networks"), "{bad}: {err}");
        }
        Ok(())
    }

    #[test]
    fn outbound_proxy_from_the_configuration_or_the_environment() -> Result<(), String> {
        let url = |s: &str| url::Url::parse(s).map_err(|e| e.to_string());
        let none = |_: &str| None;
        // Nothing set: direct.
        let p = OutboundProxy::new(None, &[], none)?;
        assert!(!p.is_configured());
        assert_eq!(p.for_url(&url("https://deb.debian.org/")?), None);
        // The configuration: every scheme, except what no_proxy names.
        let list = ["internal.example".to_string(), "10.0.0.0/8".into(), "*.corp.example".into(), "mirror:8080".into()];
        let p = OutboundProxy::new(Some("http://user:pw@proxy.corp.example:3128"), &list, none)?;
        let via = |u: &str| -> Result<Option<String>, String> {
            Ok(p.for_url(&url(u)?).map(|u| u.host_str().unwrap_or("").to_string()))
        };
        assert_eq!(via("https://deb.debian.org/debian")?.as_deref(), Some("proxy.corp.example"));
        assert_eq!(via("http://deb.debian.org/debian")?.as_deref(), Some("proxy.corp.example"));
        assert_eq!(via("https://internal.example/")?, None);
        assert_eq!(via("https://a.b.internal.example/")?, None, "below a listed domain");
        assert_eq!(via("https://notinternal.example/")?.as_deref(), Some("proxy.corp.example"), "not a suffix match");
        assert_eq!(via("https://x.corp.example/")?, None);
        assert_eq!(via("https://corp.example/")?, None);
        assert_eq!(via("http://10.1.2.3/")?, None);
        assert_eq!(via("http://11.1.2.3/")?.as_deref(), Some("proxy.corp.example"));
        assert_eq!(via("http://mirror:9000/")?, None, "a port in an entry is ignored");
        assert_eq!(p.source, "proxy.http_proxy");
        assert_eq!(p.hosts(), ["proxy.corp.example", "proxy.corp.example"]);
        // The environment, as curl reads it: per scheme, lower case first, `host:port` alone.
        let env = |name: &str| match name {
            "https_proxy" => Some("secure-proxy:8443".to_string()),
            "HTTP_PROXY" => Some("http://plain-proxy:3128".to_string()),
            "NO_PROXY" => Some("localhost, .svc.cluster.local,127.0.0.1".to_string()),
            _ => None,
        };
        let p = OutboundProxy::new(None, &[], env)?;
        assert_eq!(
            p.for_url(&url("https://proxy.golang.org/")?).map(url::Url::as_str),
            Some("http://secure-proxy:8443/")
        );
        assert_eq!(p.for_url(&url("http://deb.debian.org/")?).map(url::Url::as_str), Some("http://plain-proxy:3128/"));
        assert_eq!(p.for_url(&url("http://localhost:8080/")?), None);
        assert_eq!(p.for_url(&url("http://api.ns.svc.cluster.local/")?), None);
        assert_eq!(p.for_url(&url("http://127.0.0.1:9/")?), None);
        assert_eq!(p.source, "https_proxy, HTTP_PROXY");
        // The configuration wins over the environment, its no_proxy too.
        let p = OutboundProxy::new(Some("http://cfg-proxy:1"), &[], env)?;
        assert_eq!(p.for_url(&url("http://localhost/")?).and_then(url::Url::host_str), Some("cfg-proxy"));
        // ALL_PROXY covers both schemes.
        let p = OutboundProxy::new(None, &[], |n: &str| (n == "ALL_PROXY").then(|| "http://all:1".to_string()))?;
        assert!(p.for_url(&url("http://a/")?).is_some() && p.for_url(&url("https://a/")?).is_some());
        // Bad values name their key or variable, without the password.
        let e = OutboundProxy::new(Some("ftp://u:secret@x:1"), &[], none).err().unwrap_or_default();
        assert!(e.contains("proxy.http_proxy") && !e.contains("secret"), "{e}");
        let e = OutboundProxy::new(Some("http://p:1"), &["bad entry!".into()], none).err().unwrap_or_default();
        assert!(e.contains("proxy.no_proxy") && e.contains("bad entry!"), "{e}");
        let e = OutboundProxy::new(None, &[], |n: &str| (n == "HTTPS_PROXY").then(|| "http://[zz".to_string()))
            .err()
            .unwrap_or_default();
        assert!(e.contains("HTTPS_PROXY"), "{e}");
        Ok(())
    }
}
