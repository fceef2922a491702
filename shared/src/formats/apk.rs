//! Alpine APK (v2): package reading, index records, the signed `APKINDEX.tar.gz`, the
//! repository's RSA index key, hosted uploads and the snapshot builder. A publication unit is
//! `<branch>/<channel>/<arch>` (e.g. `v3.20/main/x86_64`).

pub mod group;
pub mod hosted;
pub mod index;
pub mod package;
pub mod publish;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// The unit kind of APK snapshots.
pub const KIND: &str = "apk";

/// The file of a unit's signed index.
pub const INDEX_FILE: &str = "APKINDEX.tar.gz";

/// A branch, channel or architecture segment: letters, digits, `.`, `_`, `-`, not starting
/// with a dot, at most 64 bytes.
pub fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `<branch>/<channel>/<arch>`, each segment checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub branch: String,
    pub channel: String,
    pub arch: String,
}

impl Unit {
    pub fn new(branch: &str, channel: &str, arch: &str) -> Result<Self, String> {
        for (what, s) in [("branch", branch), ("channel", channel), ("architecture", arch)] {
            if !valid_segment(s) {
                return Err(format!("invalid {what} {s:?}: use letters, digits, '.', '_' and '-'"));
            }
        }
        Ok(Self { branch: branch.into(), channel: channel.into(), arch: arch.into() })
    }

    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.branch, self.channel, self.arch)
    }
}

/// How a proxy fetches an APK path: packages are immutable (a name-version is built once), an
/// `APKINDEX.tar.gz` is metadata; 404 and 410 are remembered.
pub fn proxy_request(
    repo: &crate::repos::Repository,
    path: &str,
) -> Result<crate::proxy::FetchRequest, crate::proxy::ProxyError> {
    use crate::proxy::{FetchRequest, Freshness};
    let freshness = if path.ends_with(".apk") { Freshness::Immutable } else { Freshness::Metadata };
    let mut req = FetchRequest::new(repo, path, freshness)?;
    req.negative_statuses = &[404, 410];
    Ok(req)
}

impl std::str::FromStr for Unit {
    type Err = String;

    /// `<branch>/<channel>/<arch>`.
    fn from_str(key: &str) -> Result<Self, String> {
        let mut parts = key.splitn(3, '/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(b), Some(c), Some(a)) => Self::new(b, c, a),
            _ => Err(format!("invalid unit {key:?}: expected <branch>/<channel>/<arch>")),
        }
    }
}
