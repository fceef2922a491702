//! Storage quotas: a repository's (`quota.*` in its definition) and the blob store's
//! (`blobs.quota.*` in the configuration). A soft limit is told about (a metric, an alert, a
//! webhook, a banner); a hard limit refuses the upload that would take the use past it (507).
//! What a repository uses is the bytes of its components' files, a blob shared with another
//! repository counting in each; what the blob store uses is the bytes of every blob it holds,
//! index snapshots included.

use serde::{Deserialize, Serialize};

/// A soft and a hard limit in bytes, each optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_bytes: Option<u64>,
}

/// Where a use stands against its quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    Within,
    /// Past the soft limit.
    Soft,
    /// At or past the hard limit: no upload adds bytes.
    Hard,
}

impl Quota {
    /// Whether either limit is set.
    pub fn is_set(&self) -> bool {
        self.soft_bytes.is_some() || self.hard_bytes.is_some()
    }

    /// Checks the limits; `key` prefixes the names in the message (`quota`, `blobs.quota`).
    pub fn validate(&self, key: &str) -> Result<(), String> {
        for (name, v) in [("soft_bytes", self.soft_bytes), ("hard_bytes", self.hard_bytes)] {
            if v == Some(0) {
                return Err(format!("`{key}.{name}` must be at least 1 byte (leave it out for no limit)"));
            }
            if v.is_some_and(|v| v > i64::MAX as u64) {
                return Err(format!("`{key}.{name}` is larger than {}", i64::MAX));
            }
        }
        if let (Some(soft), Some(hard)) = (self.soft_bytes, self.hard_bytes) {
            if soft > hard {
                return Err(format!("`{key}.soft_bytes` ({soft}) is above `{key}.hard_bytes` ({hard}): the soft limit warns before the hard one refuses"));
            }
        }
        Ok(())
    }

    /// Where `used` bytes stand.
    pub fn standing(&self, used: u64) -> Standing {
        if self.hard_bytes.is_some_and(|h| used >= h) {
            Standing::Hard
        } else if self.soft_bytes.is_some_and(|s| used > s) {
            Standing::Soft
        } else {
            Standing::Within
        }
    }

    /// Whether going from `before` to `after` bytes takes the use past the hard limit: only a
    /// change that adds bytes is refused (a replacement that shrinks what a repository over its
    /// limit holds is not).
    pub fn refuses(&self, before: u64, after: u64) -> bool {
        after > before && self.hard_bytes.is_some_and(|h| after > h)
    }

    /// Whether going from `before` to `after` bytes crosses the soft limit upwards.
    pub fn crosses_soft(&self, before: u64, after: u64) -> bool {
        self.soft_bytes.is_some_and(|s| before <= s && after > s)
    }

    /// The refusal of a change that would take `what`'s use (`key`: the setting's name) from
    /// `before` to `after` bytes, past its hard limit.
    pub fn refusal(&self, what: &str, key: &str, before: u64, after: u64) -> String {
        let hard = self.hard_bytes.unwrap_or(0);
        format!(
            "{what} would go over its hard quota: {key}.hard_bytes is {hard} bytes ({}), it uses {before} bytes ({}), and this upload would take it to {after} ({}); delete what is no longer needed or raise the quota",
            human(hard),
            human(before),
            human(after)
        )
    }

    /// One line on where `used` bytes stand, for a status and a banner.
    pub fn describe(&self, what: &str, used: u64) -> String {
        let limit = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |b| format!("{b} bytes ({})", human(b)));
        let state = match self.standing(used) {
            Standing::Within => "within its quota",
            Standing::Soft => "over its soft quota",
            Standing::Hard => "at its hard quota: uploads that add bytes are refused",
        };
        format!(
            "{what} uses {used} bytes ({}), {state} (soft limit: {}, hard limit: {})",
            human(used),
            limit(self.soft_bytes),
            limit(self.hard_bytes)
        )
    }
}

/// `1.5 MiB`: bytes as people read them.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_and_stood_against() {
        let q = Quota { soft_bytes: Some(100), hard_bytes: Some(200) };
        assert_eq!(q.validate("quota"), Ok(()));
        let wrong = Quota { soft_bytes: Some(300), hard_bytes: Some(200) };
        assert_eq!(
            wrong.validate("quota"),
            Err("`quota.soft_bytes` (300) is above `quota.hard_bytes` (200): the soft limit warns before the hard one refuses".to_string())
        );
        let zero = Quota { soft_bytes: None, hard_bytes: Some(0) };
        assert!(zero
            .validate("blobs.quota")
            .is_err_and(|e| e.starts_with("`blobs.quota.hard_bytes` must be at least 1")));
        assert_eq!(q.standing(100), Standing::Within);
        assert_eq!(q.standing(101), Standing::Soft);
        assert_eq!(q.standing(200), Standing::Hard);
        assert!(q.refuses(150, 201));
        assert!(!q.refuses(150, 200));
        assert!(!q.refuses(250, 240), "a change that frees bytes is never refused");
        assert!(q.crosses_soft(100, 101));
        assert!(!q.crosses_soft(101, 150));
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(12), "12 B");
        assert_eq!(
            q.refusal("repository shared", "quota", 150, 300),
            "repository shared would go over its hard quota: quota.hard_bytes is 200 bytes (200 B), it uses 150 bytes (150 B), and this upload would take it to 300 (300 B); delete what is no longer needed or raise the quota"
        );
    }
}
