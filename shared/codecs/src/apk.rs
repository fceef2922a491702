//! Alpine APK (v2): package reading, index records, the signed `APKINDEX.tar.gz` and RSA index
//! keys. A publication unit is `<branch>/<channel>/<arch>` (e.g. `v3.20/main/x86_64`).

#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod index;
pub mod package;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod version;

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
