//! Alpine APK as the engine sees it: its registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_codecs::apk::signing::ApkKey;
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{
    FormatSpec, FormatUi, KeyError, KeyKinds, Part, Rotating, RotatingKeys, SettingsOf, SettingsSpec, SigningKeys,
};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::blobs::BlobColumn;

use super::keys;
use super::settings::ApkSettings;

pub struct ApkSpec;

#[async_trait]
impl FormatSpec for ApkSpec {
    fn format(&self) -> Format {
        Format::Apk
    }

    fn blob_columns(&self) -> &'static [BlobColumn] {
        &[BlobColumn { table: "apk_packages", column: "sha256" }]
    }

    fn settings(&self) -> Option<&'static dyn SettingsSpec> {
        Some(&SettingsOf::<ApkSettings>::SPEC)
    }

    fn catalogue(&self) -> &'static dyn Catalogue {
        &super::catalogue::ApkCatalogue
    }

    fn import(
        &self,
        args: packyard_core::import::ImportArgs,
    ) -> Option<Result<Box<dyn packyard_core::import::ImportJob>, String>> {
        let job = super::import::ApkImport::from_args(args);
        Some(job.map(|i| Box::new(packyard_core::import::Job(i)) as Box<dyn packyard_core::import::ImportJob>))
    }

    /// A group applies its policy when it merges its members' indexes, a proxy when it filters
    /// its upstream's (each signs what it publishes); a package declares its architecture and licenses to it.
    fn policy_facets(&self) -> Option<&'static [&'static str]> {
        Some(&["licenses", "architectures"])
    }

    fn policy_refused(
        &self,
        repo_type: packyard_model::repos::RepoType,
        block: Option<&serde_json::Value>,
    ) -> Option<String> {
        packyard_core::formats::signed_index_policy_refused(repo_type, block, "apk")
    }

    fn osv(&self) -> Option<&dyn packyard_core::formats::OsvSpec> {
        Some(&ApkOsv)
    }

    fn ui(&self) -> &dyn FormatUi {
        &super::ui::ApkUi
    }

    /// A group verifies a proxy member's upstream index with its `apk.signed_by` before it signs
    /// the records again: a proxy member must have the key.
    fn check_member(&self, _group: Part<'_>, member: Part<'_>) -> Result<(), String> {
        if member.repo_type == RepoType::Proxy && member.settings::<ApkSettings>().signed_by.is_none() {
            return Err(format!(
                "group member {} is a proxy without apk.signed_by: the group verifies the upstream's APKINDEX and signs it again, so set apk.signed_by on {} to the upstream's index public key (PEM)",
                member.name, member.name
            ));
        }
        Ok(())
    }

    /// The unit's (`v3.20/main/x86_64`), which is the component's group.
    fn architecture(&self, group: &str, _paths: &[&str]) -> Option<String> {
        group.rsplit('/').next().filter(|a| !a.is_empty() && *a != "noarch").map(str::to_string)
    }

    fn rollback(&self) -> Option<packyard_core::formats::Rollback> {
        Some(packyard_core::formats::Rollback { kind: super::KIND, label: "branch" })
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::ApkHosted)
    }

    fn copies(&self) -> &dyn packyard_core::hosted::Copies {
        &ByKey(super::hosted::ApkHosted)
    }

    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let builder = super::publish::ApkBuilder {
            keystore: services.security.keystore.clone(),
            reader: packyard_core::groups::Reader::of(services),
            memory: Default::default(),
            services: Some(services.clone()),
        };
        builders.with(super::KIND, Arc::new(builder))
    }

    fn signing_keys(&self) -> Option<&dyn SigningKeys> {
        Some(&KEYS)
    }
}

/// APK's keys: RSA, 4096 bits unless asked; the old one stays offered under `keys/`.
pub struct ApkKeys;

static KEYS: Rotating<ApkKeys> = Rotating(ApkKeys);

static KINDS: KeyKinds = KeyKinds {
    what: "APK index keys",
    algorithms: &["rsa2048", "rsa3072", "rsa4096"],
    default: "rsa4096",
    import: "<PEM RSA private key>",
};

#[async_trait]
impl RotatingKeys for ApkKeys {
    type Key = ApkKey;

    fn kinds(&self) -> &'static KeyKinds {
        &KINDS
    }

    fn label(&self) -> &'static str {
        "APK"
    }

    fn rotation_note(&self) -> &'static str {
        "keys/"
    }

    fn generate(_repo: &Repository, algorithm: &'static str) -> Result<ApkKey, String> {
        let bits = match algorithm {
            "rsa2048" => 2048,
            "rsa3072" => 3072,
            _ => 4096,
        };
        ApkKey::generate(bits).map_err(|e| e.to_string())
    }

    fn import(pem: &str) -> Result<ApkKey, String> {
        ApkKey::import(pem).map_err(|e| format!("private_key is not a usable APK index key: {e}"))
    }

    fn fingerprint(key: &ApkKey) -> Result<String, KeyError> {
        key.fingerprint().map_err(KeyError::internal)
    }

    async fn install(&self, services: &Services, repo: &Repository, key: &ApkKey) -> Result<(), KeyError> {
        keys::install(key, &services.db, &services.security.keystore, repo.id).await.map_err(KeyError::internal)
    }

    const STORE: &'static str = "apk";

    fn encode(key: &ApkKey) -> Result<Vec<u8>, String> {
        key.private_pem().map(String::into_bytes).map_err(|e| e.to_string())
    }

    fn decode(bytes: &[u8]) -> Result<ApkKey, String> {
        ApkKey::import(&String::from_utf8_lossy(bytes)).map_err(|e| e.to_string())
    }

    fn public(repo: &Repository, key: &ApkKey) -> Result<serde_json::Map<String, serde_json::Value>, KeyError> {
        let mut m = serde_json::Map::new();
        m.insert("algorithm".into(), format!("rsa{}", key.bits()).into());
        m.insert("key_name".into(), key.file_name(repo.name.as_str()).map_err(KeyError::internal)?.into());
        m.insert("public_key".into(), key.public_pem().map_err(KeyError::internal)?.into());
        Ok(m)
    }

    async fn describe(&self, services: &Services, repo: &Repository) -> Result<serde_json::Value, KeyError> {
        let ks = &services.security.keystore;
        let current = keys::current(&services.db, ks, repo.id).await.map_err(KeyError::internal)?;
        let previous = keys::previous(&services.db, ks, repo.id).await.map_err(KeyError::internal)?;
        let name = |k: &ApkKey| k.file_name(repo.name.as_str()).map_err(KeyError::internal);
        Ok(serde_json::json!({
            "repository": repo.name.as_str(),
            "fingerprint": current.fingerprint().map_err(KeyError::internal)?,
            "algorithm": format!("rsa{}", current.bits()),
            "key_name": name(&current)?,
            "public_key": current.public_pem().map_err(KeyError::internal)?,
            "previous_key_name": previous.as_ref().map(name).transpose()?,
        }))
    }
}

/// The format's packages in OSV (`Alpine`), in the format's own version order.
pub(crate) struct ApkOsv;

impl packyard_core::formats::OsvSpec for ApkOsv {
    fn ecosystem(&self) -> &'static str {
        "Alpine"
    }

    fn compare(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apk::version::compare(a, b)
    }

    /// A unit's branch (`v3.20` of `v3.20/main/x86_64`); `edge` is no release.
    fn release_of(&self, unit: &str) -> Option<String> {
        let branch = unit.split('/').next()?;
        (branch.starts_with('v') && branch.len() > 1).then(|| branch.to_string())
    }
}
