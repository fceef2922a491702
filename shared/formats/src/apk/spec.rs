//! Alpine APK as the engine sees it: its registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_codecs::apk::signing::ApkKey;
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{
    FormatSpec, FormatUi, KeyChange, KeyChanged, KeyError, KeyKinds, KeyRequest, SettingsOf, SettingsSpec, SigningKeys,
};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, Repository};
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

    fn ui(&self) -> &dyn FormatUi {
        &super::ui::ApkUi
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::ApkHosted)
    }

    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let builder = super::publish::ApkBuilder {
            keystore: services.security.keystore.clone(),
            reader: packyard_core::groups::Reader::of(services),
            memory: Default::default(),
        };
        builders.with(super::KIND, Arc::new(builder))
    }

    fn signing_keys(&self) -> Option<&dyn SigningKeys> {
        Some(self)
    }
}

/// The keys APK generates and imports.
const KEYS: KeyKinds = KeyKinds {
    what: "APK index keys",
    algorithms: &["rsa2048", "rsa3072", "rsa4096"],
    default: "rsa4096",
    import: "<PEM RSA private key>",
};

#[async_trait]
impl SigningKeys for ApkSpec {
    fn label(&self) -> &'static str {
        "APK"
    }

    fn rotation_note(&self) -> Option<&'static str> {
        Some("keys/")
    }

    async fn describe(
        &self,
        services: &Services,
        repo: &Repository,
        _url: &str,
    ) -> Result<serde_json::Value, KeyError> {
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

    /// Generates (RSA, 4096 bits unless asked) or imports a PEM key, installs it (the old one
    /// stays offered under `keys/`) and re-signs every index.
    async fn change(
        &self,
        services: &Services,
        repo: &Repository,
        _url: &str,
        body: &KeyChange,
    ) -> Result<KeyChanged, KeyError> {
        let new = match body.request(&KEYS)? {
            KeyRequest::Generate(algorithm) => {
                let bits = match algorithm {
                    "rsa2048" => 2048,
                    "rsa3072" => 3072,
                    _ => 4096,
                };
                tokio::task::spawn_blocking(move || ApkKey::generate(bits))
                    .await
                    .map_err(KeyError::internal)?
                    .map_err(KeyError::internal)?
            }
            KeyRequest::Import(pem) => ApkKey::import(pem)
                .map_err(|e| KeyError::Invalid(format!("private_key is not a usable APK index key: {e}")))?,
        };
        keys::install(&new, &services.db, &services.security.keystore, repo.id).await.map_err(KeyError::internal)?;
        let units = services.db.request_rebuild(repo.id).await?;
        // Replicas drop the indexes they signed for units without a snapshot.
        services.db.touch_repository(repo.id).await?;
        services.changed(packyard_core::events::Changed::Publications);
        services.wake();
        let fingerprint = new.fingerprint().map_err(KeyError::internal)?;
        Ok(KeyChanged { audit: serde_json::json!({"fingerprint": fingerprint, "units_rebuilt": units}), key: None })
    }
}
