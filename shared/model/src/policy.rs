//! A repository's gate (DESIGN §5b `policy.*`): what it leaves out of the indexes it serves and
//! refuses to hand out — versions younger than a minimum release age, versions a quarantine rule
//! denies, and (in `enforce`) versions with advisories at or above a severity level. What a
//! break-glass exception lets through early lives in the database, not here.
//!
//! The rules are pure: [`PolicySettings::judge`] takes what is known of a version (its name,
//! version, publish time, licenses, architecture, advisory level) and the time, and answers.

use serde::{Deserialize, Serialize};

use crate::osv::Level;
use crate::repos::InvalidRepository;
use crate::security::glob_match;

/// What the vulnerability data does to a repository's versions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VulnMode {
    /// Advisories are only shown (components API, UI).
    #[default]
    Off,
    /// Served, with `X-Packyard-Advisories` naming the advisories.
    Audit,
    /// Left out of indexes and refused (403) at or above `vulnerability_severity`.
    Enforce,
}

impl VulnMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Audit => "audit",
            Self::Enforce => "enforce",
        }
    }
}

/// A quarantine rule: `deny` leaves matching versions out; with any `allow` rule, only versions
/// some `allow` rule matches are let through. A rule matches when every criterion it has does
/// (a criterion it lacks matches everything).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Named in refusals and previews.
    pub id: String,
    pub action: RuleAction,
    /// A glob (`*`, `?`) over the component's name (an APT or APK package, a Go module path, a
    /// Conan recipe name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A glob over the version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Globs over the licenses the package declares (APK, Conan): matches when one of its
    /// licenses matches one of these; a package that declares none matches no license rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub licenses: Vec<String>,
    /// Architectures (APT, APK, Conan's `arch` setting).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    Deny,
    Allow,
}

/// A longer or shorter minimum release age for the names a glob matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgeOverride {
    pub name: String,
    pub min_release_age_secs: u64,
}

/// The `policy` block of a repository's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySettings {
    /// A version younger than this is not offered (0: no minimum).
    #[serde(default)]
    pub min_release_age_secs: u64,
    /// Per-name overrides of `min_release_age_secs`, the first that matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub release_age_overrides: Vec<AgeOverride>,
    #[serde(default)]
    pub vulnerabilities: VulnMode,
    /// The lowest level `enforce` refuses.
    #[serde(default = "default_severity")]
    pub vulnerability_severity: Level,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
}

fn default_severity() -> Level {
    Level::High
}

impl Default for PolicySettings {
    fn default() -> Self {
        Self {
            min_release_age_secs: 0,
            release_age_overrides: Vec::new(),
            vulnerabilities: VulnMode::Off,
            vulnerability_severity: default_severity(),
            rules: Vec::new(),
        }
    }
}

/// What is known of one version when it is judged.
#[derive(Debug, Clone, Default)]
pub struct Subject<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// When it was published (ms), when the format says; else when the repository first saw it.
    pub published_ms: Option<i64>,
    pub licenses: &'a [String],
    pub architecture: Option<&'a str>,
}

/// Why a version is kept back; `None` from [`PolicySettings::judge`] lets it through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Too young: offered from `until_ms` on.
    Young { until_ms: i64, age_secs: u64 },
    /// A quarantine rule: a `deny` that matches, or no `allow` that does.
    Rule { id: String, allowed_only: bool },
    /// Aged, but its publish time cannot be read: not offered.
    Undated { age_secs: u64 },
}

impl Hold {
    /// A sentence a person can act on.
    pub fn message(&self, name: &str, version: &str) -> String {
        match self {
            Self::Young { until_ms, age_secs } => format!(
                "{name} {version} was published less than {} ago (this repository's minimum release age): it is offered from {} on; an administrator can let it through earlier with a policy exception",
                crate::time::human_duration(*age_secs),
                crate::time::rfc3339_ms(*until_ms)
            ),
            Self::Rule { id, allowed_only: false } => {
                format!("{name} {version} is denied by this repository's quarantine rule {id:?}")
            }
            Self::Undated { age_secs } => format!(
                "{name} {version} has no publish time this repository can read, so its minimum release age ({}) cannot be checked: it is not offered; an administrator can let it through with a policy exception",
                crate::time::human_duration(*age_secs)
            ),
            Self::Rule { id, allowed_only: true } => format!(
                "{name} {version} matches none of this repository's allow rules (the first is {id:?}): only what they allow is served"
            ),
        }
    }
}

impl PolicySettings {
    /// Whether the policy can keep anything back (an `off` policy costs the read path nothing).
    pub fn gates(&self) -> bool {
        self.min_release_age_secs > 0
            || self.release_age_overrides.iter().any(|o| o.min_release_age_secs > 0)
            || self.vulnerabilities != VulnMode::Off
            || !self.rules.is_empty()
    }

    /// The minimum age for `name`.
    pub fn min_age_secs(&self, name: &str) -> u64 {
        self.release_age_overrides
            .iter()
            .find(|o| glob_match(&o.name, name))
            .map_or(self.min_release_age_secs, |o| o.min_release_age_secs)
    }

    /// Whether the release age needs the version's publish time.
    pub fn ages(&self, name: &str) -> bool {
        self.min_age_secs(name) > 0
    }

    /// The quarantine rule that keeps `s` back, if one does.
    pub fn rule_hold(&self, s: &Subject<'_>) -> Option<Hold> {
        if let Some(r) = self.rules.iter().find(|r| r.action == RuleAction::Deny && r.matches(s)) {
            return Some(Hold::Rule { id: r.id.clone(), allowed_only: false });
        }
        let mut allows = self.rules.iter().filter(|r| r.action == RuleAction::Allow).peekable();
        let first = allows.peek().map(|r| r.id.clone())?;
        if allows.any(|r| r.matching(s, true)) {
            None
        } else {
            Some(Hold::Rule { id: first, allowed_only: true })
        }
    }

    /// The release age's hold on `s` at `now_ms`; an aged version whose time is unknown is held
    /// ([`Hold::Undated`]).
    pub fn age_hold(&self, s: &Subject<'_>, now_ms: i64) -> Option<Hold> {
        let age_secs = self.min_age_secs(s.name);
        if age_secs == 0 {
            return None;
        }
        let Some(published) = s.published_ms else { return Some(Hold::Undated { age_secs }) };
        let until_ms = published.saturating_add(i64::try_from(age_secs.saturating_mul(1000)).unwrap_or(i64::MAX));
        (age_secs > 0 && now_ms < until_ms).then_some(Hold::Young { until_ms, age_secs })
    }

    /// Checks what serde cannot: ids, globs, sizes.
    pub fn validate(&self) -> Result<(), InvalidRepository> {
        let bad = |m: String| Err(InvalidRepository(format!("policy: {m}")));
        if self.rules.len() > 1000 || self.release_age_overrides.len() > 1000 {
            return bad("at most 1000 rules and 1000 release-age overrides".into());
        }
        let mut ids = std::collections::BTreeSet::new();
        for r in &self.rules {
            if !crate::is_plain_name(&r.id, b"-_.") {
                return bad(format!(
                    "rule id {:?} is not 1 to 64 letters, digits, '-', '_' or '.'",
                    crate::repos::truncate(&r.id)
                ));
            }
            if !ids.insert(r.id.as_str()) {
                return bad(format!("two rules have the id {:?}", r.id));
            }
            let patterns = r.name.iter().chain(&r.version).chain(&r.licenses).chain(&r.architectures);
            if let Some(p) = patterns.clone().find(|p| p.is_empty() || p.len() > 256) {
                return bad(format!(
                    "rule {:?} has an empty or over-long pattern {:?}",
                    r.id,
                    crate::repos::truncate(p)
                ));
            }
            if patterns.count() == 0 {
                return bad(format!(
                    "rule {:?} has no criterion (name, version, licenses or architectures): it would match everything",
                    r.id
                ));
            }
        }
        if let Some(o) = self.release_age_overrides.iter().find(|o| o.name.is_empty() || o.name.len() > 256) {
            return bad(format!(
                "release-age override name {:?} is empty or over-long",
                crate::repos::truncate(&o.name)
            ));
        }
        const TEN_YEARS: u64 = 10 * 365 * 86_400;
        if self.min_release_age_secs > TEN_YEARS
            || self.release_age_overrides.iter().any(|o| o.min_release_age_secs > TEN_YEARS)
        {
            return bad("a minimum release age is at most ten years (315360000 seconds)".into());
        }
        Ok(())
    }
}

/// The license names of an SPDX-like expression (`GPL-2.0-only OR MIT`, `(A AND B)`), as rules
/// match them: the words but the operators and parentheses.
pub fn license_names(expression: &str) -> Vec<String> {
    expression
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| !w.is_empty() && !matches!(w.to_ascii_uppercase().as_str(), "AND" | "OR" | "WITH"))
        .map(str::to_string)
        .collect()
}

/// Whether a rule of `policy` needs a package's licenses (reading them costs a read per version
/// where the index does not carry them: Conan's recipes).
pub fn wants_licenses(policy: &PolicySettings) -> bool {
    policy.rules.iter().any(|r| !r.licenses.is_empty())
}

/// Whether a rule of `policy` names architectures (Conan reads a binary's `conaninfo.txt` for
/// it).
pub fn wants_architectures(policy: &PolicySettings) -> bool {
    policy.rules.iter().any(|r| !r.architectures.is_empty())
}

impl Rule {
    pub fn matches(&self, s: &Subject<'_>) -> bool {
        self.matching(s, false)
    }

    /// Whether the rule matches `s`; a criterion on the architecture, where `s` has none (a
    /// Conan recipe: each of its binaries has one, judged on its own), counts as met when
    /// `unknown_matches` (an `allow` rule: the recipe is not held for what only its binaries
    /// decide) and as not met otherwise (a `deny` rule).
    fn matching(&self, s: &Subject<'_>, unknown_matches: bool) -> bool {
        let name = self.name.as_deref().is_none_or(|p| glob_match(p, s.name));
        let version = self.version.as_deref().is_none_or(|p| glob_match(p, s.version));
        let licenses =
            self.licenses.is_empty() || s.licenses.iter().any(|l| self.licenses.iter().any(|p| glob_match(p, l)));
        let arch = self.architectures.is_empty()
            || s.architecture.map_or(unknown_matches, |a| self.architectures.iter().any(|p| glob_match(p, a)));
        name && version && licenses && arch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject<'a>(name: &'a str, version: &'a str, licenses: &'a [String]) -> Subject<'a> {
        Subject { name, version, published_ms: Some(1_000_000), licenses, architecture: Some("x86_64") }
    }

    #[test]
    fn license_expressions_name_their_licenses() {
        assert_eq!(license_names("GPL-2.0-only OR (MIT and Apache-2.0)"), ["GPL-2.0-only", "MIT", "Apache-2.0"]);
        assert_eq!(license_names("  "), Vec::<String>::new());
    }

    #[test]
    fn release_age_holds_until_the_age_passes() {
        let p = PolicySettings {
            min_release_age_secs: 3600,
            release_age_overrides: vec![AgeOverride { name: "example.com/fast/*".into(), min_release_age_secs: 0 }],
            ..PolicySettings::default()
        };
        let s = subject("example.com/slow", "v1.1.0", &[]);
        assert_eq!(p.age_hold(&s, 1_000_000 + 3_599_999), Some(Hold::Young { until_ms: 4_600_000, age_secs: 3600 }));
        assert_eq!(p.age_hold(&s, 4_600_000), None);
        assert_eq!(p.age_hold(&subject("example.com/fast/x", "v1", &[]), 1_000_000), None);
        let unknown = Subject { published_ms: None, ..s };
        assert_eq!(p.age_hold(&unknown, 0), Some(Hold::Undated { age_secs: 3600 }));
        let m = Hold::Young { until_ms: 4_600_000, age_secs: 3600 }.message("m", "v1");
        assert!(m.contains("less than 1 hour ago") && m.contains("1970-01-01T01:16:40.000Z"), "{m}");
    }

    #[test]
    fn rules_deny_and_allow_only() {
        let rule = |id: &str, action, name: Option<&str>, licenses: &[&str]| Rule {
            id: id.into(),
            action,
            name: name.map(Into::into),
            version: None,
            licenses: licenses.iter().map(|s| s.to_string()).collect(),
            architectures: vec![],
        };
        let gpl = ["GPL-3.0-only".to_string()];
        let mut p = PolicySettings {
            rules: vec![rule("no-gpl", RuleAction::Deny, None, &["GPL-*", "AGPL-*"])],
            ..PolicySettings::default()
        };
        assert_eq!(
            p.rule_hold(&subject("zlib", "1", &gpl)),
            Some(Hold::Rule { id: "no-gpl".into(), allowed_only: false })
        );
        assert_eq!(p.rule_hold(&subject("zlib", "1", &[])), None, "no declared license matches no license rule");
        p.rules.push(rule("ours", RuleAction::Allow, Some("acme-*"), &[]));
        assert_eq!(p.rule_hold(&subject("zlib", "1", &[])), Some(Hold::Rule { id: "ours".into(), allowed_only: true }));
        assert_eq!(p.rule_hold(&subject("acme-tool", "1", &[])), None);
        assert!(p.validate().is_ok());
        p.rules.push(rule("ours", RuleAction::Deny, Some("x"), &[]));
        assert!(p.validate().err().is_some_and(|e| e.0.contains("two rules have the id")));
        p.rules.pop();
        p.rules.push(rule("all", RuleAction::Deny, None, &[]));
        assert!(p.validate().err().is_some_and(|e| e.0.contains("no criterion")));
    }

    #[test]
    fn architecture_rules_leave_a_subject_without_one_to_its_binaries() {
        let arch = |id: &str, action, archs: &[&str]| Rule {
            id: id.into(),
            action,
            name: None,
            version: None,
            licenses: vec![],
            architectures: archs.iter().map(|s| s.to_string()).collect(),
        };
        let on = |a: Option<&'static str>| Subject { architecture: a, ..subject("zlib", "1.3", &[]) };
        let deny = PolicySettings { rules: vec![arch("no-x86", RuleAction::Deny, &["x86"])], ..Default::default() };
        assert_eq!(deny.rule_hold(&on(Some("x86"))), Some(Hold::Rule { id: "no-x86".into(), allowed_only: false }));
        assert_eq!(deny.rule_hold(&on(Some("x86_64"))), None);
        assert_eq!(deny.rule_hold(&on(None)), None, "a recipe is not denied for one of its binaries");
        let only = PolicySettings { rules: vec![arch("x64", RuleAction::Allow, &["x86_64"])], ..Default::default() };
        assert_eq!(only.rule_hold(&on(Some("armv8"))), Some(Hold::Rule { id: "x64".into(), allowed_only: true }));
        assert_eq!(only.rule_hold(&on(Some("x86_64"))), None);
        assert_eq!(only.rule_hold(&on(None)), None, "nor held back by an allow-only rule on architectures");
        assert!(wants_architectures(&only) && !wants_architectures(&PolicySettings::default()));
    }

    #[test]
    fn settings_parse_with_their_defaults() {
        let p: PolicySettings = serde_json::from_str(r#"{"vulnerabilities":"enforce"}"#).unwrap_or_default();
        assert_eq!((p.vulnerabilities, p.vulnerability_severity, p.gates()), (VulnMode::Enforce, Level::High, true));
        assert!(!PolicySettings::default().gates());
        let e = serde_json::from_str::<PolicySettings>(r#"{"vulnerabilities":"block"}"#).map(|_| ());
        assert!(e.is_err());
    }
}
