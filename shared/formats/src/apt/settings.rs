//! APT's settings block (`"apt": {…}`): what a repository publishes or mirrors, its defaults and
//! checks, its schema and the web UI's fields.

use packyard_codecs::apt::signing::parse_public_keys;
use packyard_core::formats::{FormField, Settings, SettingsForm};
use packyard_model::repos::{check_list, check_token, Format, FormatSettings, InvalidRepository, RepoType};
use serde::{Deserialize, Serialize};

/// APT settings (DESIGN §5). `origin`/`label` default to the repository name. A hosted
/// repository publishes, a proxy mirrors and a group publishes each of `distributions`
/// (default: `[distribution]`); a hosted repository's uploads that name no distribution go to
/// `distribution`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AptSettings {
    pub distribution: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distributions: Vec<String>,
    pub components: Vec<String>,
    pub architectures: Vec<String>,
    pub origin: Option<String>,
    pub label: Option<String>,
    /// Proxy: the upstream archive's armored public key(s). A group verifies the upstream
    /// `InRelease` with it before merging and re-signing the proxy's packages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

impl Default for AptSettings {
    fn default() -> Self {
        Self {
            distribution: "stable".into(),
            distributions: Vec::new(),
            components: vec!["main".into()],
            architectures: vec!["amd64".into(), "all".into()],
            origin: None,
            label: None,
            signed_by: None,
        }
    }
}

impl FormatSettings for AptSettings {
    const FORMAT: Format = Format::Apt;
}

impl AptSettings {
    /// The distributions a repository publishes (hosted, group) or mirrors (proxy).
    pub fn suites(&self) -> Vec<&str> {
        if self.distributions.is_empty() {
            vec![self.distribution.as_str()]
        } else {
            self.distributions.iter().map(String::as_str).collect()
        }
    }
}

impl Settings for AptSettings {
    /// Every repository has a block.
    fn check(self, repo_type: RepoType) -> Result<Option<Self>, InvalidRepository> {
        let mut apt = self;
        check_token("apt.distribution", &apt.distribution)?;
        if !apt.distributions.is_empty() {
            check_list("apt.distributions", &apt.distributions)?;
            // A hosted repository's `distribution` is where an upload that names none goes: one
            // of its distributions, the first unless another is named. A proxy's or a group's
            // is the first of them (what it serves; never a default it does not serve).
            if !apt.distributions.contains(&apt.distribution) {
                if repo_type == RepoType::Hosted && apt.distribution != Self::default().distribution {
                    return Err(InvalidRepository(format!(
                        "apt.distribution {:?} (where an upload that names no distribution goes) must be one of apt.distributions: {}",
                        apt.distribution,
                        apt.distributions.join(", ")
                    )));
                }
                apt.distribution = apt.distributions[0].clone();
            }
        }
        if let Some(key) = &apt.signed_by {
            if repo_type != RepoType::Proxy {
                return Err(InvalidRepository(
                    "apt.signed_by applies to proxy repositories (the upstream's key)".into(),
                ));
            }
            parse_public_keys(key)
                .map_err(|e| InvalidRepository(format!("apt.signed_by is not an armored OpenPGP public key: {e}")))?;
        }
        check_list("apt.components", &apt.components)?;
        check_list("apt.architectures", &apt.architectures)?;
        for (key, v) in [("apt.origin", &apt.origin), ("apt.label", &apt.label)] {
            if let Some(v) = v {
                if v.is_empty() || v.len() > 200 || v.chars().any(char::is_control) {
                    return Err(InvalidRepository(format!("{key} must be 1 to 200 printable characters on one line")));
                }
            }
        }
        Ok(Some(apt))
    }

    fn schema() -> serde_json::Value {
        let list =
            |default: &[&str]| serde_json::json!({"type": "array", "items": {"type": "string"}, "default": default});
        serde_json::json!({"type": "object", "additionalProperties": false, "properties": {
            "distribution": {"type": "string", "default": "stable", "description": "hosted: where an upload that names no distribution goes"},
            "distributions": {"type": "array", "items": {"type": "string"}, "description": "the distributions published (hosted, group) or mirrored (proxy); default: [distribution]"},
            "components": list(&["main"]),
            "architectures": list(&["amd64", "all"]),
            "origin": {"type": "string"}, "label": {"type": "string"},
            "signed_by": {"type": "string", "description": "proxy: the upstream archive's armored OpenPGP public key(s)"}}})
    }

    fn form() -> Option<&'static SettingsForm> {
        Some(&FORM)
    }
}

/// The web UI's fields: every setting, each for the types that have it.
pub static FORM: SettingsForm = SettingsForm {
    types: &[RepoType::Hosted, RepoType::Proxy, RepoType::Group],
    fields: &[
        FormField::list(
            "distributions",
            "Distributions",
            "comma-separated, e.g. bookworm, bookworm-updates: each published (hosted, group) or mirrored (proxy); empty: the default distribution alone (stable for a proxy or a group)",
        ),
        FormField::text("distribution", "Default distribution", "where an upload that names none goes; the first distribution when empty")
            .only(&[RepoType::Hosted]),
        FormField::list("components", "Components", "comma-separated, e.g. main"),
        FormField::list("architectures", "Architectures", "comma-separated, e.g. amd64, arm64, all"),
        FormField::text("origin", "Origin", "the Release file's Origin; the repository's name when empty")
            .only(&[RepoType::Hosted, RepoType::Group]),
        FormField::text("label", "Label", "the Release file's Label; the repository's name when empty")
            .only(&[RepoType::Hosted, RepoType::Group]),
        FormField::lines(
            "signed_by",
            "Upstream key",
            "the upstream archive's armored OpenPGP public key: a group over this proxy verifies what it merges with it, and clients of the proxy fetch it as gpg.key",
        )
        .only(&[RepoType::Proxy]),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::settings;

    use crate::tests::invalid;

    #[test]
    fn defaults_apply() -> Result<(), String> {
        let apt = settings::<AptSettings>(serde_json::json!({"name":"debs","format":"apt","type":"hosted"}))?;
        assert_eq!(apt.distribution, "stable");
        assert_eq!(apt.components, vec!["main"]);
        assert_eq!(apt.architectures, vec!["amd64", "all"]);
        Ok(())
    }

    #[test]
    fn a_hosted_repository_publishes_several_distributions() -> Result<(), String> {
        let def = |apt: serde_json::Value| {
            settings::<AptSettings>(serde_json::json!({"name":"debs","format":"apt","type":"hosted","apt":apt}))
        };
        // Uploads that name none go to the first, unless another is named.
        let apt = def(serde_json::json!({"distributions":["bookworm","trixie"]}))?;
        assert_eq!((apt.distribution.as_str(), apt.suites()), ("bookworm", vec!["bookworm", "trixie"]));
        let apt = def(serde_json::json!({"distribution":"trixie","distributions":["bookworm","trixie"]}))?;
        assert_eq!(apt.distribution, "trixie");
        // One distribution, as before.
        assert_eq!(def(serde_json::json!({"distribution":"bookworm"}))?.suites(), vec!["bookworm"]);
        // A group's or a proxy's `distribution` is one it serves (the API shows it beside
        // `distributions`): never the default `stable` it does not publish.
        for (kind, extra) in [
            ("group", serde_json::json!({"group":{"members":[]}})),
            ("proxy", serde_json::json!({"proxy":{"remote_url":"https://deb.example/"}})),
        ] {
            let mut body = serde_json::json!({"name":"g","format":"apt","type":kind,"apt":{"distributions":["bookworm","trixie"]}});
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            let apt = settings::<AptSettings>(body)?;
            assert_eq!((apt.distribution.as_str(), apt.suites()), ("bookworm", vec!["bookworm", "trixie"]), "{kind}");
        }
        let m = invalid(
            serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"distribution":"sid","distributions":["bookworm"]}}),
        );
        assert!(m.contains("apt.distribution \"sid\" (where an upload that names no distribution goes) must be one of apt.distributions: bookworm"), "{m}");
        let m =
            invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"distributions":["a","a"]}}));
        assert!(m.contains("apt.distributions lists \"a\" twice"), "{m}");
        Ok(())
    }

    #[test]
    fn invalid_settings_say_why() {
        let m = invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"components":[]}}));
        assert!(m.contains("apt.components must not be empty"), "{m}");
        let m = invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"colour":"red"}}));
        assert!(m.starts_with("invalid `apt` settings: unknown field `colour`"), "{m}");
        let m = invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"signed_by":"x"}}));
        assert!(m.contains("apt.signed_by applies to proxy repositories"), "{m}");
        let m = invalid(
            serde_json::json!({"name":"d","format":"apt","type":"proxy","proxy":{"remote_url":"https://deb.example/"},"apt":{"signed_by":"x"}}),
        );
        assert!(m.contains("apt.signed_by is not an armored OpenPGP public key"), "{m}");
        let m = invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"label":"a\nb"}}));
        assert!(m.contains("apt.label must be 1 to 200 printable characters on one line"), "{m}");
    }
}
