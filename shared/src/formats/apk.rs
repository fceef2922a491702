//! Alpine APK (v2): package reading, index records, the signed `APKINDEX.tar.gz`, the
//! repository's RSA index key, hosted uploads and the snapshot builder. A publication unit is
//! `<branch>/<channel>/<arch>` (e.g. `v3.20/main/x86_64`).

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
