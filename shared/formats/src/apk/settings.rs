//! APK's settings block (`"apk": {…}`): the architectures a repository takes or serves, a
//! proxy's upstream keys.

use packyard_codecs::apk::signing::parse_public_keys;
use packyard_core::formats::{FormField, Settings, SettingsForm};
use packyard_model::repos::{check_list, Format, FormatSettings, InvalidRepository, RepoType};
use serde::{Deserialize, Serialize};

use super::valid_segment;

/// APK settings: the architectures packages may be uploaded for (hosted) or are served for
/// (proxy, group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApkSettings {
    pub architectures: Vec<String>,
    /// Proxy: the upstream's index public key(s), SPKI PEM. A group verifies the upstream
    /// `APKINDEX.tar.gz` signature with them before merging and re-signing its records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

impl Default for ApkSettings {
    fn default() -> Self {
        Self { architectures: vec!["x86_64".into(), "aarch64".into()], signed_by: None }
    }
}

impl FormatSettings for ApkSettings {
    const FORMAT: Format = Format::Apk;
}

impl Settings for ApkSettings {
    /// Every repository has a block. Each architecture is a path segment; an upstream index key
    /// must be SPKI PEM.
    fn check(self, _repo_type: RepoType) -> Result<Option<Self>, InvalidRepository> {
        check_list("apk.architectures", &self.architectures)?;
        if let Some(bad) = self.architectures.iter().find(|a| !valid_segment(a)) {
            return Err(InvalidRepository(format!("apk.architectures: invalid architecture {bad:?}")));
        }
        if let Some(pem) = &self.signed_by {
            parse_public_keys(pem).map_err(|e| InvalidRepository(format!("apk.signed_by: {e}")))?;
        }
        Ok(Some(self))
    }

    fn schema() -> serde_json::Value {
        serde_json::json!({"type": "object", "additionalProperties": false, "properties": {
            "architectures": {"type": "array", "items": {"type": "string"}, "default": ["x86_64", "aarch64"]},
            "signed_by": {"type": "string", "description": "proxy: the upstream's index public key(s), SPKI PEM"}}})
    }

    fn form() -> Option<&'static SettingsForm> {
        Some(&FORM)
    }
}

/// The web UI's fields.
pub static FORM: SettingsForm = SettingsForm {
    types: &[RepoType::Hosted, RepoType::Proxy, RepoType::Group],
    fields: &[
        FormField::list("architectures", "Architectures", "comma-separated, e.g. x86_64, aarch64"),
        FormField::lines(
            "signed_by",
            "Upstream index keys",
            "the upstream's index public key(s), SPKI PEM: a group over this proxy verifies the upstream APKINDEX with them",
        )
        .only(&[RepoType::Proxy]),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::settings;

    #[test]
    fn settings_are_checked() -> Result<(), String> {
        let apk = settings::<ApkSettings>(serde_json::json!({"name":"a","format":"apk","type":"hosted"}))?;
        assert_eq!(apk, ApkSettings::default());
        for (block, message) in [
            (serde_json::json!({"architectures":[]}), "apk.architectures must not be empty"),
            (serde_json::json!({"architectures":["x86_64","x86_64"]}), "apk.architectures lists \"x86_64\" twice"),
            (serde_json::json!({"signed_by":"not a key"}), "apk.signed_by: "),
            (serde_json::json!({"arch":["x86_64"]}), "invalid `apk` settings: unknown field `arch`"),
        ] {
            let m = settings::<ApkSettings>(serde_json::json!({"name":"a","format":"apk","type":"hosted","apk":block}))
                .err()
                .unwrap_or_default();
            assert!(m.contains(message), "{m:?} lacks {message:?}");
        }
        Ok(())
    }
}
