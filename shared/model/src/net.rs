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

impl AddressPolicy {
    /// From `proxy.allow_private_addresses` and `proxy.allowed_networks`; a bad network is an
    /// error that names the key.
    pub fn new(allow_private: bool, allowed_networks: &[String]) -> Result<Self, String> {
        let networks = allowed_networks
            .iter()
            .map(|n| Network::parse(n))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("bad value for key `proxy.allowed_networks`: {e}"))?;
        Ok(Self { allow_private, networks })
    }

    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.networks.iter().any(|n| n.contains(ip))
    }
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
        let policy = AddressPolicy::new(false, &config(&["10.1.2.0/24", "127.0.0.1", "fd00:1::/32"]))?;
        for allowed in ["10.1.2.0", "10.1.2.255", "127.0.0.1", "::ffff:10.1.2.7", "fd00:1:ffff::1", "8.8.8.8"] {
            assert!(policy.allows(ip(allowed)?), "{allowed}");
        }
        for refused in ["10.1.3.1", "10.1.1.255", "127.0.0.2", "169.254.169.254", "fd00:2::1", "::1", "192.168.1.1"] {
            assert!(!policy.allows(ip(refused)?), "{refused}");
        }
        let everything = AddressPolicy::new(false, &config(&["0.0.0.0/0"]))?;
        assert!(everything.allows(ip("10.9.9.9")?) && !everything.allows(ip("::1")?));
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.0/x", "fd00::/129", ""] {
            let err = AddressPolicy::new(false, &config(&[bad])).err().unwrap_or_default();
            assert!(err.contains("proxy.allowed_networks"), "{bad}: {err}");
        }
        Ok(())
    }
}
