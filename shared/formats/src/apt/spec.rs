//! APT as the engine sees it: its registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_codecs::apt::signing::{Algorithm, Signer};
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{
    FormatSpec, FormatUi, KeyChange, KeyChanged, KeyError, KeyKinds, KeyRequest, SettingsOf, SettingsSpec, SigningKeys,
};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, Repository};
use packyard_store::db::blobs::BlobColumn;
use packyard_store::db::DbResult;

use super::keys;
use super::settings::AptSettings;

pub struct AptSpec;

#[async_trait]
impl FormatSpec for AptSpec {
    fn format(&self) -> Format {
        Format::Apt
    }

    fn blob_columns(&self) -> &'static [BlobColumn] {
        &[
            BlobColumn { table: "apt_packages", column: "sha256" },
            BlobColumn { table: "apt_source_files", column: "sha256" },
        ]
    }

    fn settings(&self) -> Option<&'static dyn SettingsSpec> {
        Some(&SettingsOf::<AptSettings>::SPEC)
    }

    fn catalogue(&self) -> &'static dyn Catalogue {
        &super::catalogue::AptCatalogue
    }

    fn ui(&self) -> &dyn FormatUi {
        &super::ui::AptUi
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::AptHosted)
    }

    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let builder = super::publish::AptBuilder {
            page_size: 1_000,
            keystore: services.security.keystore.clone(),
            reader: packyard_core::groups::Reader::of(services),
            memory: Default::default(),
        };
        builders.with(super::KIND, Arc::new(builder))
    }

    async fn settings_changed(
        &self,
        services: &Services,
        before: Option<&Repository>,
        repo: &Repository,
    ) -> DbResult<usize> {
        if let Some(before) = before {
            super::settings_changed(&services.db, before, repo).await?;
        }
        super::request_publication(&services.db, repo).await
    }

    fn signing_keys(&self) -> Option<&dyn SigningKeys> {
        Some(self)
    }
}

/// The keys APT generates and imports.
const KEYS: KeyKinds = KeyKinds {
    what: "APT signing keys",
    algorithms: &["ed25519", "rsa3072", "rsa4096"],
    default: "ed25519",
    import: "<armored secret key>",
};

#[async_trait]
impl SigningKeys for AptSpec {
    fn label(&self) -> &'static str {
        "APT"
    }

    fn rotation_note(&self) -> Option<&'static str> {
        Some("gpg.key")
    }

    async fn describe(
        &self,
        services: &Services,
        repo: &Repository,
        _url: &str,
    ) -> Result<serde_json::Value, KeyError> {
        let ks = &services.security.keystore;
        let current =
            keys::signer(&services.db, ks, repo.id, &keys::user_id(repo)).await.map_err(KeyError::internal)?;
        let previous = keys::previous(&services.db, ks, repo.id).await.map_err(KeyError::internal)?;
        Ok(serde_json::json!({
            "repository": repo.name.as_str(),
            "fingerprint": current.fingerprint(),
            "algorithm": current.algorithm_name(),
            "public_key": current.public_armored().map_err(KeyError::internal)?,
            "previous_fingerprint": previous.map(|p| p.fingerprint()),
        }))
    }

    /// Generates (Ed25519 unless asked) or imports an armored OpenPGP key, rotates it in (the
    /// old one stays offered in `gpg.key`) and re-signs every distribution.
    async fn change(
        &self,
        services: &Services,
        repo: &Repository,
        _url: &str,
        body: &KeyChange,
    ) -> Result<KeyChanged, KeyError> {
        let new = match body.request(&KEYS)? {
            KeyRequest::Generate(algorithm) => {
                let id = keys::user_id(repo);
                let algorithm = match algorithm {
                    "rsa3072" => Algorithm::Rsa3072,
                    "rsa4096" => Algorithm::Rsa4096,
                    _ => Algorithm::Ed25519,
                };
                tokio::task::spawn_blocking(move || Signer::generate_with(&id, algorithm))
                    .await
                    .map_err(KeyError::internal)?
                    .map_err(KeyError::internal)?
            }
            KeyRequest::Import(armored) => Signer::import(armored).map_err(|e| {
                KeyError::Invalid(format!("private_key is not a usable OpenPGP secret key without passphrase: {e}"))
            })?,
        };
        keys::rotate(&services.db, &services.security.keystore, repo.id, &new).await.map_err(KeyError::internal)?;
        let units = services.db.request_rebuild(repo.id).await?;
        services.wake();
        Ok(KeyChanged {
            audit: serde_json::json!({"fingerprint": new.fingerprint(), "units_rebuilt": units}),
            key: None,
        })
    }
}
