//! APT as the engine sees it: its registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_codecs::apt::signing::{Algorithm, Signer};
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{
    FormatSpec, FormatUi, KeyChange, KeyChanged, KeyError, SettingsOf, SettingsSpec, SigningKeys,
};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
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

#[async_trait]
impl SigningKeys for AptSpec {
    fn label(&self) -> &'static str {
        "APT"
    }

    fn rotation_note(&self) -> Option<&'static str> {
        Some("gpg.key")
    }

    fn refuse(&self, repo: &Repository) -> Option<String> {
        (repo.repo_type == RepoType::Proxy).then(|| {
            format!("repository {} is a proxy: it serves its upstream's signatures and has no signing key", repo.name)
        })
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
        if body.name.is_some() {
            return Err(KeyError::Invalid("`name` applies to the checksum database key of a Go repository".into()));
        }
        let new = match (body.generate, body.private_key.as_deref()) {
            (true, None) => {
                let id = keys::user_id(repo);
                let algorithm = match body.algorithm.as_deref() {
                    None | Some("ed25519") => Algorithm::Ed25519,
                    Some("rsa3072") => Algorithm::Rsa3072,
                    Some("rsa4096") => Algorithm::Rsa4096,
                    Some(other) => {
                        return Err(KeyError::Invalid(format!(
                            "algorithm {other:?} is not available for APT signing keys: use ed25519, rsa3072 or rsa4096"
                        )))
                    }
                };
                tokio::task::spawn_blocking(move || Signer::generate_with(&id, algorithm))
                    .await
                    .map_err(KeyError::internal)?
                    .map_err(KeyError::internal)?
            }
            (false, Some(_)) if body.algorithm.is_some() => {
                return Err(KeyError::Invalid(
                    "`algorithm` applies to {\"generate\":true}, not to an imported key".into(),
                ))
            }
            (false, Some(armored)) => Signer::import(armored).map_err(|e| {
                KeyError::Invalid(format!("private_key is not a usable OpenPGP secret key without passphrase: {e}"))
            })?,
            _ => {
                return Err(KeyError::Invalid(
                    "send either {\"generate\":true} (optionally with \"algorithm\": \"ed25519\", \"rsa3072\" or \"rsa4096\") or {\"private_key\":\"<armored secret key>\"}".into(),
                ))
            }
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
