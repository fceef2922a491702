//! Hosted APT: storing an uploaded `.deb` (streamed into the blob store while hashing), checking
//! it, and recording it with its publication change in one transaction.

use bytes::Bytes;
use futures_util::Stream;

use crate::apt::rows::AptPackage;
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_core::services::Services;
use packyard_model::repos::{Repository, WritePolicy};
use packyard_store::blobs::Sha256Hex;
use packyard_store::db::{retry_conflicts, DbError};

pub const KIND: &str = "apt";

pub use packyard_core::upload::UploadError;
use packyard_core::upload::{check_writable, discard, from_db, read_back, receive};

/// What an upload stored.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub package: AptPackage,
    /// False for an identical retry.
    pub created: bool,
    pub unit_id: i64,
    pub revision: i64,
}

/// Stores one `.deb` for `repo` in `component` (default: the first configured).
pub async fn upload<S, E>(
    services: &Services,
    repo: &Repository,
    component: Option<&str>,
    body: S,
    uploader: &str,
) -> Result<Uploaded, UploadError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let settings = repo.settings.apt.clone().unwrap_or_default();
    check_writable(repo)?;
    let component = component.unwrap_or(settings.components.first().map_or("main", String::as_str)).to_string();
    if !settings.components.contains(&component) {
        return Err(UploadError::Invalid(format!(
            "component {component:?} is not configured for repository {}; configured: {}",
            repo.name,
            settings.components.join(", ")
        )));
    }
    // Stream to the blob store (which hashes SHA-256). The MD5, which only the `Packages` index
    // lists, is computed once by the worker that first publishes the package, off the upload's
    // path.
    let stored = receive(services, body, services.config.server.max_upload_bytes, Some("the .deb")).await?;
    let outcome = record(services, repo, &settings, component, &stored, uploader).await;
    if outcome.is_err() {
        discard(services, &stored.sha256, stored.created).await;
    }
    outcome
}

/// Checks the stored `.deb` and records it with its publication change in one transaction.
async fn record(
    services: &Services,
    repo: &Repository,
    settings: &packyard_model::repos::AptSettings,
    component: String,
    stored: &packyard_store::blobs::StoredBlob,
    uploader: &str,
) -> Result<Uploaded, UploadError> {
    let control = read_stored_control(services, &stored.sha256).await?;
    let arch_ok = control.architecture == "all" || settings.architectures.contains(&control.architecture);
    if !arch_ok {
        return Err(UploadError::Invalid(format!(
            "architecture {:?} is not configured for repository {}; configured: {}",
            control.architecture,
            repo.name,
            settings.architectures.join(", ")
        )));
    }
    let package = AptPackage {
        id: 0,
        repository_id: repo.id,
        pool_path: control.pool_path(&component),
        component,
        name: control.package.clone(),
        version: control.version.clone(),
        architecture: control.architecture.clone(),
        control: control.text.clone(),
        size: i64::try_from(stored.size).unwrap_or(i64::MAX),
        md5: String::new(),
        sha256: stored.sha256.to_string(),
    };
    let db = &services.db;
    let distribution = settings.distribution.clone();
    let outcome = retry_conflicts(|| async {
        let existing = crate::apt::rows::rows(db).apt_by_coordinate(repo.id, &package.name, &package.version, &package.architecture).await?;
        let replace = match &existing {
            Some(old) if old.sha256 == package.sha256 && old.component == package.component => return Ok(None),
            Some(_) if repo.write_policy == WritePolicy::AllowOnce => {
                return Err(DbError::Conflict(format!(
                    "{}_{}_{} is already in repository {} with different content; its write policy allows each version once",
                    package.name, package.version, package.architecture, repo.name
                )))
            }
            Some(_) => true,
            None => false,
        };
        let mut tx = db.pool().begin().await?;
        db.claim_blob(&mut tx, &stored.sha256).await?;
        crate::apt::rows::rows(db).put_apt_package(&mut tx, &package, uploader, replace).await?;
        let change = db.record_change(&mut tx, repo.id, KIND, &distribution).await?;
        tx.commit().await?;
        Ok(Some(change))
    })
    .await
    .map_err(from_db)?;
    match outcome {
        Some((unit_id, revision)) => {
            services.wake();
            Ok(Uploaded { package, created: true, unit_id, revision })
        }
        None => {
            let unit = db.unit_by_key(repo.id, KIND, &distribution).await?;
            let (unit_id, revision) = unit.map_or((0, 0), |u| (u.id, u.desired_revision));
            Ok(Uploaded { package, created: false, unit_id, revision })
        }
    }
}

async fn read_stored_control(
    services: &Services,
    digest: &Sha256Hex,
) -> Result<packyard_codecs::apt::control::Control, UploadError> {
    read_back(services, digest, |r| read_package(r, Limits::default()))
        .await?
        .map_err(|e| UploadError::Invalid(format!("not a valid .deb: {e}")))
}

/// Deletes the package at a pool path; the next snapshot no longer lists it.
pub async fn delete(
    services: &Services,
    repo: &Repository,
    pool_path: &str,
) -> Result<Option<AptPackage>, UploadError> {
    let db = &services.db;
    let distribution = repo.settings.apt.clone().unwrap_or_default().distribution;
    check_writable(repo)?;
    let Some(pkg) = crate::apt::rows::rows(db).apt_by_pool_path(repo.id, pool_path).await? else { return Ok(None) };
    retry_conflicts(|| async {
        let mut tx = db.pool().begin().await?;
        crate::apt::rows::rows(db).delete_apt_package(&mut tx, pkg.id).await?;
        db.record_change(&mut tx, repo.id, KIND, &distribution).await?;
        tx.commit().await?;
        Ok(())
    })
    .await?;
    services.wake();
    Ok(Some(pkg))
}
