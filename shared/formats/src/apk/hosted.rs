//! Hosted APK: storing an uploaded package (streamed into the blob store while hashing), reading
//! and checking it against its path, and recording it with its publication change in one
//! transaction. Nothing is kept of a refused upload.

use bytes::Bytes;
use futures_util::Stream;

use super::{Unit, KIND};
use crate::apk::rows::ApkPackage;
use packyard_codecs::apk::package::{index_record, read_package, ApkInfo, Limits};
use packyard_core::services::Services;
use packyard_model::repos::{Repository, WritePolicy};
use packyard_store::blobs::Sha256Hex;
use packyard_store::db::{retry_conflicts, DbError};

pub use packyard_core::upload::UploadError;
use packyard_core::upload::{check_writable, discard, from_db, read_back, receive};

/// What an upload stored.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub package: ApkPackage,
    /// False for an identical retry.
    pub created: bool,
    pub unit_id: i64,
    pub revision: i64,
}

/// Stores the package uploaded to `<unit>/<file_name>`.
pub async fn upload<S, E>(
    services: &Services,
    repo: &Repository,
    unit: &Unit,
    file_name: &str,
    body: S,
    uploader: &str,
) -> Result<Uploaded, UploadError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    check_writable(repo)?;
    let settings = repo.settings.apk.clone().unwrap_or_default();
    if !settings.architectures.contains(&unit.arch) {
        return Err(UploadError::Invalid(format!(
            "architecture {:?} is not configured for repository {}; configured: {}",
            unit.arch,
            repo.name,
            settings.architectures.join(", ")
        )));
    }
    if !file_name.ends_with(".apk") {
        return Err(UploadError::Invalid(format!(
            "upload to <branch>/<channel>/<arch>/<pkgname>-<pkgver>.apk, not {file_name:?}"
        )));
    }
    let stored = receive(services, body, services.config.server.max_upload_bytes, Some("the .apk")).await?;
    let outcome = record(services, repo, unit, file_name, &stored, uploader).await;
    if outcome.is_err() {
        discard(services, &stored.sha256, stored.created).await;
    }
    outcome
}

/// Checks the stored package and records it with its publication change in one transaction.
async fn record(
    services: &Services,
    repo: &Repository,
    unit: &Unit,
    file_name: &str,
    stored: &packyard_store::blobs::StoredBlob,
    uploader: &str,
) -> Result<Uploaded, UploadError> {
    let info = check(repo, unit, file_name, read_stored(services, &stored.sha256, stored.size).await?)?;
    let package = ApkPackage {
        id: 0,
        repository_id: repo.id,
        unit_key: unit.key(),
        name: info.pkginfo.name.clone(),
        version: info.pkginfo.version.clone(),
        path: format!("{}/{file_name}", unit.key()),
        record: index_record(&info, &unit.arch, stored.size),
        checksum: info.checksum.clone(),
        size: i64::try_from(stored.size).unwrap_or(i64::MAX),
        sha256: stored.sha256.to_string(),
    };
    let db = &services.db;
    let outcome = retry_conflicts(|| async {
        let replace = match crate::apk::rows::rows(db).apk_by_path(repo.id, &package.path).await? {
            Some(old) if old.sha256 == package.sha256 => return Ok(None),
            Some(_) if repo.write_policy == WritePolicy::AllowOnce => {
                return Err(DbError::Conflict(format!(
                    "{} is already in repository {} with different content; its write policy allows each version once",
                    package.path, repo.name
                )))
            }
            Some(_) => true,
            None => false,
        };
        let mut tx = db.pool().begin().await?;
        db.claim_blob(&mut tx, &stored.sha256).await?;
        crate::apk::rows::rows(db).put_apk_package(&mut tx, &package, uploader, replace).await?;
        let change = db.record_change(&mut tx, repo.id, KIND, &package.unit_key).await?;
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
            let u = db.unit_by_key(repo.id, KIND, &package.unit_key).await?;
            let (unit_id, revision) = u.map_or((0, 0), |u| (u.id, u.desired_revision));
            Ok(Uploaded { package, created: false, unit_id, revision })
        }
    }
}

/// The path must name the package: `<pkgname>-<pkgver>.apk`, under the package's architecture
/// (a `noarch` package goes under any configured one).
fn check(repo: &Repository, unit: &Unit, file_name: &str, info: ApkInfo) -> Result<ApkInfo, UploadError> {
    let p = &info.pkginfo;
    let expected = format!("{}-{}.apk", p.name, p.version);
    if file_name != expected {
        return Err(UploadError::Invalid(format!(
            "the path names {file_name:?} but the package's .PKGINFO says {expected:?} (pkgname {}, pkgver {})",
            p.name, p.version
        )));
    }
    if p.arch != unit.arch && p.arch != "noarch" {
        return Err(UploadError::Invalid(format!(
            "the package is built for {:?} but was uploaded under {:?} in repository {}",
            p.arch, unit.arch, repo.name
        )));
    }
    Ok(info)
}

async fn read_stored(services: &Services, digest: &Sha256Hex, size: u64) -> Result<ApkInfo, UploadError> {
    let limits = Limits { max_data: packyard_codecs::archive::expansion_limit(size), ..Limits::default() };
    read_back(services, digest, move |r| read_package(r, limits))
        .await?
        .map_err(|e| UploadError::Invalid(format!("not a valid apk v2 package: {e}")))
}

/// Deletes the package at `<unit>/<file>`; the unit's next snapshot no longer lists it.
pub async fn delete(services: &Services, repo: &Repository, path: &str) -> Result<Option<ApkPackage>, UploadError> {
    let db = &services.db;
    check_writable(repo)?;
    let Some(pkg) = crate::apk::rows::rows(db).apk_by_path(repo.id, path).await? else { return Ok(None) };
    retry_conflicts(|| async {
        let mut tx = db.pool().begin().await?;
        crate::apk::rows::rows(db).delete_apk_package(&mut tx, pkg.id).await?;
        db.record_change(&mut tx, repo.id, KIND, &pkg.unit_key).await?;
        tx.commit().await?;
        Ok(())
    })
    .await?;
    services.wake();
    Ok(Some(pkg))
}
