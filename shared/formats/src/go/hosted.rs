//! Hosted Go: storing an uploaded module zip (streamed into the blob store), checking it with the
//! go command's zip rules, storing its `.mod`, and recording the version with its projection
//! change in one transaction. Nothing is kept of a refused upload.

use bytes::Bytes;
use futures_util::Stream;

use super::KIND;
use crate::go::rows::GoVersion;
use packyard_codecs::go::zip::{
    check_entries, locate, module_of_go_mod, parse_central, tail_len, verify_data, Limits, ZipError,
};
use packyard_core::services::Services;
use packyard_model::repos::{Repository, WritePolicy};
use packyard_store::blobs::{RangeSpec, StoredBlob};
use packyard_store::db::retry_conflicts;

pub use packyard_core::upload::UploadError;
use packyard_core::upload::{check_writable, discard, from_db, read_back, receive, store_derived};

/// What an upload stored.
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub version: GoVersion,
    /// False for an identical retry.
    pub created: bool,
    pub unit_id: i64,
    pub revision: i64,
}

/// The zip limits of this server (`go.*`; `server.max_upload_bytes` lowers the zip limit too).
pub fn limits(services: &Services) -> Limits {
    let go = &services.config.go;
    Limits {
        max_zip: go.max_zip_bytes.min(services.config.server.max_upload_bytes),
        max_unzipped: go.max_unzipped_bytes,
        max_go_mod: go.max_go_mod_bytes,
        max_license: go.max_license_bytes,
    }
}

/// Stores a module zip. `expected` is the (module, version) the URL names; `url_version` the
/// version a Nexus-style URL names. Without `expected` (the
/// Nexus-style `PUT <version>.zip`) they come from the zip's root directory.
pub async fn upload<S, E>(
    services: &Services,
    repo: &Repository,
    expected: Option<(&str, &str)>,
    url_version: Option<&str>,
    body: S,
    uploader: &str,
) -> Result<Uploaded, UploadError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    check_writable(repo)?;
    let limits = limits(services);
    let zip = receive(services, body, limits.max_zip, Some("the module zip")).await?;
    let mut derived = None;
    let outcome = record(services, repo, expected, url_version, &zip, &mut derived, &limits, uploader).await;
    if outcome.is_err() {
        discard(services, &zip.sha256, zip.created).await;
        if let Some(m) = derived {
            discard(services, &m.sha256, m.created).await;
        }
    }
    outcome
}

/// Checks the stored zip, stores its `.mod` (`derived`), and records the version with its
/// projection change in one transaction.
#[expect(clippy::too_many_arguments, reason = "the upload's parts, until the format engine carries them")]
async fn record(
    services: &Services,
    repo: &Repository,
    expected: Option<(&str, &str)>,
    url_version: Option<&str>,
    zip: &StoredBlob,
    derived: &mut Option<StoredBlob>,
    limits: &Limits,
    uploader: &str,
) -> Result<Uploaded, UploadError> {
    let (module, version, go_mod) = check(services, zip, expected, limits).await?;
    if let Some(v) = url_version.filter(|v| *v != version) {
        return Err(UploadError::Invalid(format!(
            "the URL names version {v} but the zip holds {module}@{version}: PUT it as {version}.zip"
        )));
    }
    let mod_bytes = match go_mod {
        Some(bytes) => {
            let declared = module_of_go_mod(&String::from_utf8_lossy(&bytes));
            if declared.as_deref() != Some(module.as_str()) {
                return Err(UploadError::Invalid(format!(
                    "the zip's go.mod declares module {:?}, not {module:?}",
                    declared.unwrap_or_default()
                )));
            }
            bytes
        }
        None => format!("module {module}\n").into_bytes(),
    };
    let db = &services.db;
    let stored_mod = store_derived(services, &mod_bytes).await?;
    *derived = Some(stored_mod.clone());
    let now = packyard_store::db::now_ms();
    let version = GoVersion {
        id: 0,
        repository_id: repo.id,
        module: module.clone(),
        version: version.clone(),
        time_ms: now - now.rem_euclid(1000),
        mod_sha256: stored_mod.sha256.to_string(),
        mod_size: i64::try_from(stored_mod.size).unwrap_or(i64::MAX),
        zip_sha256: zip.sha256.to_string(),
        zip_size: i64::try_from(zip.size).unwrap_or(i64::MAX),
    };
    // The existing version is read inside the retried write, so that concurrent identical
    // uploads both succeed (one inserts, the retry finds it) and different ones conflict.
    let outcome = retry_conflicts(|| async {
        let replace = match crate::go::rows::rows(db).go_version(repo.id, &module, &version.version).await? {
            Some(old) if old.zip_sha256 == version.zip_sha256 => return Ok(Err(old)),
            Some(_) if repo.write_policy == WritePolicy::AllowOnce => {
                return Err(packyard_store::db::DbError::Conflict(format!(
                    "{module}@{} is already in repository {} with different content; a module version never changes (go.sum pins its hash)",
                    version.version, repo.name
                )))
            }
            Some(_) => true,
            None => false,
        };
        let mut tx = db.pool().begin().await?;
        db.claim_blob(&mut tx, &zip.sha256).await?;
        db.claim_blob(&mut tx, &stored_mod.sha256).await?;
        crate::go::rows::rows(db).put_go_version(&mut tx, &version, uploader, replace).await?;
        let change = db.record_change(&mut tx, repo.id, KIND, &module).await?;
        tx.commit().await?;
        Ok(Ok(change))
    })
    .await
    .map_err(from_db)?;
    let (unit_id, revision) = match outcome {
        Ok(change) => change,
        Err(old) => {
            let u = db.unit_by_key(repo.id, KIND, &module).await?;
            let (unit_id, revision) = u.map_or((0, 0), |u| (u.id, u.desired_revision));
            return Ok(Uploaded { version: old, created: false, unit_id, revision });
        }
    };
    services.wake();
    Ok(Uploaded { version, created: true, unit_id, revision })
}

/// Deletes a module version; its module's next projection no longer lists it. `None` when the
/// repository has no such version.
pub async fn delete(
    services: &Services,
    repo: &Repository,
    module: &str,
    version: &str,
) -> Result<Option<(GoVersion, i64, i64)>, UploadError> {
    check_writable(repo)?;
    let db = &services.db;
    let Some(v) = crate::go::rows::rows(db).go_version(repo.id, module, version).await? else { return Ok(None) };
    let change = retry_conflicts(|| async {
        let mut tx = db.pool().begin().await?;
        crate::go::rows::rows(db).delete_go_version(&mut tx, v.id).await?;
        let change = db.record_change(&mut tx, repo.id, KIND, module).await?;
        tx.commit().await?;
        Ok(change)
    })
    .await?;
    services.wake();
    Ok(Some((v, change.0, change.1)))
}

/// Reads the stored zip's central directory (from its end), checks it, then reads it once in
/// order to check every entry's data; returns the module, version and root go.mod.
async fn check(
    services: &Services,
    zip: &StoredBlob,
    expected: Option<(&str, &str)>,
    limits: &Limits,
) -> Result<(String, String, Option<Vec<u8>>), UploadError> {
    let blobs = &services.blobs;
    let tail = blobs.read_range(&zip.sha256, RangeSpec::Suffix(tail_len(zip.size))).await?;
    let (cd_offset, cd_size, count) = locate(&tail, zip.size).map_err(zip_error)?;
    if cd_size > 64 << 20 {
        return Err(zip_error(ZipError::TooLarge {
            what: "the central directory".into(),
            size: cd_size,
            limit: 64 << 20,
        }));
    }
    let cd = if cd_size == 0 {
        Bytes::new()
    } else {
        blobs.read_range(&zip.sha256, RangeSpec::From { start: cd_offset, end: Some(cd_offset + cd_size - 1) }).await?
    };
    let entries = parse_central(&cd, count, cd_offset).map_err(zip_error)?;
    let (module, version) = check_entries(&entries, expected, limits).map_err(zip_error)?;
    let go_mod_name = format!("{module}@{version}/go.mod");
    let go_mod =
        read_back(services, &zip.sha256, move |r| verify_data(r, &entries, &go_mod_name)).await?.map_err(zip_error)?;
    Ok((module, version, go_mod))
}

/// A module zip refused: over a limit is 413, the rest 400.
fn zip_error(e: ZipError) -> UploadError {
    match e {
        ZipError::TooLarge { .. } => UploadError::TooLarge(e.to_string()),
        other => UploadError::Invalid(other.to_string()),
    }
}

/// The `.info` of a version.
pub fn info_json(version: &str, time_ms: i64) -> String {
    serde_json::json!({"Version": version, "Time": packyard_model::time::rfc3339_ms(time_ms).replace(".000Z", "Z")})
        .to_string()
}

/// Checks a URL's module path and version (already case-decoded).
pub fn check_coordinate(module: &str, version: &str) -> Result<(), UploadError> {
    packyard_codecs::go::check_module_path(module).map_err(|e| UploadError::Invalid(e.0))?;
    packyard_codecs::go::check_module_version(module, version).map_err(|e| UploadError::Invalid(e.0))?;
    Ok(())
}
