//! Semantic versions as the go command reads and orders them (`vMAJOR[.MINOR[.PATCH]]`,
//! pre-release, build), and pseudo-versions.

use std::cmp::Ordering;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// Pre-release identifiers (after `-`), empty for a release.
    pub pre: Vec<String>,
    pub build: Option<String>,
    /// Whether minor and patch were written out (`v1.2` is valid but not canonical).
    full: bool,
}

fn number(s: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a number"));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(format!("{s:?} has a leading zero"));
    }
    s.parse().map_err(|_| format!("{s:?} is too large"))
}

fn identifiers(s: &str, what: &str, numeric_rules: bool) -> Result<Vec<String>, String> {
    s.split('.')
        .map(|id| {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(format!("invalid {what} identifier {id:?}"));
            }
            if numeric_rules && id.len() > 1 && id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{what} identifier {id:?} has a leading zero"));
            }
            Ok(id.to_string())
        })
        .collect()
}

impl Version {
    pub fn parse(s: &str) -> Result<Self, String> {
        let rest = s.strip_prefix('v').ok_or("it does not start with 'v'")?;
        let (rest, build) = match rest.split_once('+') {
            Some((r, b)) => {
                identifiers(b, "build", false)?;
                (r, Some(b.to_string()))
            }
            None => (rest, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, identifiers(p, "pre-release", true)?),
            None => (rest, Vec::new()),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() > 3 {
            return Err("more than three numbers".into());
        }
        let full = parts.len() == 3;
        if !full && (!pre.is_empty() || build.is_some()) {
            return Err("a shortened version cannot carry a pre-release or build".into());
        }
        let get = |i: usize| parts.get(i).map_or(Ok(0), |p| number(p));
        Ok(Self { major: get(0)?, minor: get(1)?, patch: get(2)?, pre, build, full })
    }

    /// `vMAJOR`.
    pub fn major_str(&self) -> String {
        format!("v{}", self.major)
    }

    /// The canonical form: all three numbers, build metadata dropped except `+incompatible`.
    pub fn canonical(&self) -> String {
        let mut s = format!("v{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            s.push('-');
            s.push_str(&self.pre.join("."));
        }
        if self.build.as_deref() == Some("incompatible") {
            s.push_str("+incompatible");
        }
        s
    }

    pub fn is_release(&self) -> bool {
        self.pre.is_empty()
    }

    /// A pseudo-version (`v0.0.0-20191109021931-daa7c04131f5`, `v1.2.4-0.2019…-…`,
    /// `v1.2.3-pre.0.2019…-…`): what `list` leaves out.
    pub fn is_pseudo(&self) -> bool {
        let pre = self.pre.join(".");
        let Some((head, rev)) = pre.rsplit_once('-') else { return false };
        if rev.is_empty() || !rev.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return false;
        }
        let timestamp = |t: &str| t.len() == 14 && t.bytes().all(|b| b.is_ascii_digit());
        if timestamp(head) {
            return self.minor == 0 && self.patch == 0;
        }
        match head.rsplit_once('.') {
            Some((before, t)) if timestamp(t) => before == "0" || before.ends_with(".0"),
            _ => false,
        }
    }
}

fn cmp_identifiers(a: &[String], b: &[String]) -> Ordering {
    // A release sorts after its pre-releases.
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    for (x, y) in a.iter().zip(b) {
        let nx = x.bytes().all(|c| c.is_ascii_digit());
        let ny = y.bytes().all(|c| c.is_ascii_digit());
        let o = match (nx, ny) {
            (true, true) => x.len().cmp(&y.len()).then_with(|| x.cmp(y)),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| cmp_identifiers(&self.pre, &other.pre))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `@latest` over a set of versions: the highest release, else the highest pre-release, else the
/// highest pseudo-version.
pub fn latest<'a>(versions: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    let parsed = || versions.clone().filter_map(|v| Version::parse(v).ok().map(|p| (p, v)));
    let pick =
        |f: &dyn Fn(&Version) -> bool| parsed().filter(|(p, _)| f(p)).max_by(|a, b| a.0.cmp(&b.0)).map(|(_, v)| v);
    pick(&|p| p.is_release() && !p.is_pseudo()).or_else(|| pick(&|p| !p.is_pseudo())).or_else(|| pick(&|_| true))
}

/// `@v/list`: the versions without pseudo-versions, lowest first, one per line.
pub fn list<'a>(versions: impl Iterator<Item = &'a str>) -> String {
    let mut v: Vec<(Version, &str)> =
        versions.filter_map(|s| Version::parse(s).ok().map(|p| (p, s))).filter(|(p, _)| !p.is_pseudo()).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    v.dedup_by(|a, b| a.1 == b.1);
    v.iter().map(|(_, s)| format!("{s}\n")).collect()
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, as Go's `time.RFC3339` parses.
fn is_rfc3339(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || !digits(5..7)
        || !digits(8..10)
        || !digits(11..13)
        || !digits(14..16)
        || !digits(17..19)
    {
        return false;
    }
    if (b[4], b[7], b[10], b[13], b[16]) != (b'-', b'-', b'T', b':', b':') {
        return false;
    }
    let mut rest = &t[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest.as_bytes() {
        [b'Z'] => true,
        [s, h1, h2, b':', m1, m2] => (*s == b'+' || *s == b'-') && [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()),
        _ => false,
    }
}

/// An `@v/list` as the go command reads it: one canonical version per line, no blank lines
/// but the end. The first line it would not take, and why.
pub fn check_list(text: &str) -> Result<usize, String> {
    let mut n = 0;
    for line in text.lines() {
        match Version::parse(line) {
            Ok(v) if v.canonical() == line => n += 1,
            Ok(v) => return Err(format!("@v/list: {line:?} is not canonical (should be {})", v.canonical())),
            Err(e) => return Err(format!("@v/list: {line:?} is not a version: {e}")),
        }
    }
    Ok(n)
}

/// A `.info` (or `@latest`) as the go command reads it: JSON with a canonical `Version` and an
/// RFC 3339 `Time` when present. The version.
pub fn check_info(json: &str) -> Result<String, String> {
    let info: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!(".info is not the JSON the go command reads: {e}"))?;
    let version = info["Version"].as_str().ok_or(".info has no Version string")?.to_string();
    let time = match &info["Time"] {
        serde_json::Value::Null => None,
        serde_json::Value::String(t) => Some(t.clone()),
        other => return Err(format!(".info: Time {other} is not a string")),
    };
    struct Info {
        version: String,
        time: Option<String>,
    }
    let info = Info { version, time };
    let v = Version::parse(&info.version)
        .map_err(|e| format!(".info: Version {:?} is not a version: {e}", info.version))?;
    if v.canonical() != info.version {
        return Err(format!(".info: Version {:?} is not canonical", info.version));
    }
    if let Some(t) = &info.time {
        if !is_rfc3339(t) {
            return Err(format!(".info: Time {t:?} is not an RFC 3339 time"));
        }
    }
    Ok(info.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_times_as_go_reads_them() {
        for ok in ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123Z", "2024-01-02T03:04:05-05:00"] {
            assert!(check_info(&format!("{{\"Version\":\"v1.0.0\",\"Time\":\"{ok}\"}}")).is_ok(), "{ok}");
        }
        for bad in ["2024-01-02", "2024-01-02T03:04:05", "yesterday", "2024-01-02T03:04:05.Z"] {
            assert!(check_info(&format!("{{\"Version\":\"v1.0.0\",\"Time\":\"{bad}\"}}")).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_orders_and_canonicalises() -> Result<(), String> {
        let v = |s: &str| Version::parse(s);
        assert_eq!(v("v1.2")?.canonical(), "v1.2.0");
        assert_eq!(v("v1.2.3+meta")?.canonical(), "v1.2.3");
        assert_eq!(v("v2.0.0+incompatible")?.canonical(), "v2.0.0+incompatible");
        assert!(v("v01.2.3").is_err() && v("v1.2.3-01").is_err() && v("1.2.3").is_err() && v("v1.2.3.4").is_err());
        let mut all: Vec<Version> = [
            "v1.0.0",
            "v1.0.0-rc.1",
            "v1.0.0-beta.11",
            "v1.0.0-beta.2",
            "v1.0.0-alpha",
            "v0.9.9",
            "v1.0.1",
            "v1.0.0-alpha.1",
        ]
        .iter()
        .map(|s| v(s))
        .collect::<Result<_, _>>()?;
        all.sort();
        let names: Vec<String> = all.iter().map(Version::canonical).collect();
        assert_eq!(
            names,
            [
                "v0.9.9",
                "v1.0.0-alpha",
                "v1.0.0-alpha.1",
                "v1.0.0-beta.2",
                "v1.0.0-beta.11",
                "v1.0.0-rc.1",
                "v1.0.0",
                "v1.0.1"
            ]
        );
        Ok(())
    }

    #[test]
    fn pseudo_versions() -> Result<(), String> {
        for p in [
            "v0.0.0-20191109021931-daa7c04131f5",
            "v1.2.4-0.20191109021931-daa7c04131f5",
            "v1.2.3-pre.0.20191109021931-daa7c04131f5",
        ] {
            assert!(Version::parse(p)?.is_pseudo(), "{p}");
        }
        for r in ["v1.0.0", "v1.0.0-rc.1", "v1.2.3-20191109021931-daa7c04131f5"] {
            assert!(!Version::parse(r)?.is_pseudo(), "{r}");
        }
        Ok(())
    }

    #[test]
    fn latest_and_list() {
        let vs = ["v1.0.0", "v1.1.0-rc.1", "v0.0.0-20191109021931-daa7c04131f5", "v0.9.0"];
        assert_eq!(latest(vs.iter().copied()), Some("v1.0.0"));
        assert_eq!(latest(["v1.1.0-rc.1", "v0.0.0-20191109021931-daa7c04131f5"].iter().copied()), Some("v1.1.0-rc.1"));
        assert_eq!(
            latest(["v0.0.0-20191109021931-daa7c04131f5"].iter().copied()),
            Some("v0.0.0-20191109021931-daa7c04131f5")
        );
        assert_eq!(latest([].iter().copied()), None);
        assert_eq!(list(vs.iter().copied()), "v0.9.0\nv1.0.0\nv1.1.0-rc.1\n");
    }
}
