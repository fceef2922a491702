//! Hosted Go over the engine: a module zip is checked with the go command's zip rules (from its
//! central directory, then every entry's data, hashed on the way into its `h1:`), its `.mod`
//! stored beside it, and the version written with its module's projection change and its record
//! in the repository's checksum database (`sumdb.rs`), in one transaction. A version is also
//! deleted as the other formats' packages are; its record stays, and other bytes for a logged
//! version are refused whatever the write policy.

use async_trait::async_trait;
use bytes::Bytes;

use super::rows::{self, GoVersion};
use super::sumdb::{self, AppendError};
use super::KIND;
use packyard_codecs::go::zip::{
    check_entries, locate, parse_central, tail_len, verify_data, Limits, Verified, ZipError,
};
use packyard_core::hosted::{
    read_back, store_derived, Existing, Forget, Hosted, InTx, Inspected, Removed, TxError, UnitRef, UploadError,
    Written,
};
use packyard_core::services::Services;
use packyard_model::repos::{Repository, WritePolicy};
use packyard_store::blobs::{RangeSpec, StoredBlob};
use packyard_store::db::{DbError, DbResult};

/// Go's hosted rules.
pub struct GoHosted;

/// Where a zip goes: the module and version the URL names (`PUT <module>/@v/<version>.zip`),
/// or only the version (Nexus's `PUT <version>.zip`: the module comes from the zip's root).
pub enum Target {
    Coordinate {
        module: String,
        version: String,
    },
    Version(String),
    /// Whatever module and version the zip holds (a form upload that names neither).
    Zip,
}

/// An upload: the version's row and its record in the checksum database (its go.sum lines).
#[derive(Debug, Clone)]
pub struct GoUpload {
    pub version: GoVersion,
    pub record: String,
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

#[async_trait]
impl Hosted for GoHosted {
    type Target = Target;
    type Artifact = GoUpload;
    /// `(module, version)`.
    type Removal = (String, String);

    const NAME: &'static str = KIND;
    const BODY: Option<&'static str> = Some("the module zip");

    fn max_bytes(&self, services: &Services) -> u64 {
        limits(services).max_zip
    }

    const IMMUTABILITY: &'static str = "a module version never changes (go.sum pins its hash)";

    fn check_target(&self, _repo: &Repository, t: &Target) -> Result<(), UploadError> {
        match t {
            Target::Coordinate { module, version } => check_coordinate(module, version),
            Target::Version(_) | Target::Zip => Ok(()),
        }
    }

    async fn inspect(
        &self,
        services: &Services,
        repo: &Repository,
        t: &Target,
        zip: &StoredBlob,
    ) -> Result<Inspected<GoUpload>, UploadError> {
        let expected = match t {
            Target::Coordinate { module, version } => Some((module.as_str(), version.as_str())),
            Target::Version(_) | Target::Zip => None,
        };
        let (module, version, verified) = check(services, zip, expected, &limits(services)).await?;
        let go_mod = verified.go_mod;
        if let Target::Version(v) = t {
            if *v != version {
                return Err(UploadError::Invalid(format!(
                    "the URL names version {v} but the zip holds {module}@{version}: PUT it as {version}.zip"
                )));
            }
        }
        let mod_bytes = match go_mod {
            Some(bytes) => {
                // As the go command reads it: a go.mod it cannot parse breaks every build that
                // needs this version.
                let text = std::str::from_utf8(&bytes)
                    .map_err(|_| UploadError::Invalid("the zip's go.mod is not UTF-8 text".into()))?;
                let declared = packyard_codecs::go::modfile::parse(text)
                    .map_err(|e| UploadError::Invalid(format!("the zip's go.mod does not parse: {e}")))?
                    .module;
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
        let record = record_text(&module, &version, &verified.h1, &mod_bytes);
        // The log the write appends to (made with its key on first need, outside the upload's
        // transaction).
        sumdb::ensure(services, repo).await.map_err(|e| UploadError::Db(log_failure(e)))?;
        let stored_mod = store_derived(services, &mod_bytes).await?;
        // (The instance's clock: `debug.clock_offset_secs` moves it in the release-age tests.)
        let now = services.policy.now_ms();
        let v = GoVersion {
            id: 0,
            repository_id: repo.id,
            module,
            version,
            time_ms: now - now.rem_euclid(1000),
            mod_sha256: stored_mod.sha256.to_string(),
            mod_size: i64::try_from(stored_mod.size).unwrap_or(i64::MAX),
            zip_sha256: zip.sha256.to_string(),
            zip_size: i64::try_from(zip.size).unwrap_or(i64::MAX),
        };
        let coordinate = format!("{}@{}", v.module, v.version);
        Ok(Inspected { artifact: GoUpload { version: v, record }, coordinate, derived: vec![stored_mod] })
    }

    fn units(&self, _repo: &Repository, u: &GoUpload) -> Vec<UnitRef> {
        vec![(KIND, u.version.module.clone())]
    }

    fn content(&self, u: &GoUpload) -> (String, packyard_core::hosted::Component) {
        super::catalogue::content(&u.version.module, &u.version.version)
    }

    fn receipt(&self, u: &GoUpload) -> serde_json::Value {
        let v = &u.version;
        serde_json::json!({"module": v.module, "version": v.version, "sha256": v.zip_sha256, "size": v.zip_size})
    }

    /// Other bytes whose hashes the checksum database logged otherwise are refused whatever
    /// the write policy (also when the version was deleted since): a record never changes.
    /// Under `allow`, other bytes with the logged hashes (another compression) replace the file.
    async fn existing(&self, t: &mut InTx<'_, '_>, u: &GoUpload) -> DbResult<Existing<Self::Removal>> {
        let v = &u.version;
        let stored = rows::version(t.db, &mut **t.tx, t.repo.id, &v.module, &v.version).await?;
        let stored = Existing::of(stored.map(|old| (old.zip_sha256 == v.zip_sha256, (old.module, old.version))));
        // A different upload `allow_once` refuses anyway, with its own reason.
        let redeploy = match &stored {
            Existing::Absent => true,
            Existing::Different(_) => t.repo.write_policy == WritePolicy::Allow,
            _ => false,
        };
        if redeploy {
            let logged = sumdb::record(t.db, &mut **t.tx, t.repo.id, &v.module, &v.version).await?;
            if let Some((id, logged)) = logged.filter(|(_, text)| *text != u.record) {
                return Ok(Existing::Refuse(logged_differently(t.repo, u, id, &logged)));
            }
        }
        Ok(stored)
    }

    async fn write(&self, t: &mut InTx<'_, '_>, u: &GoUpload, uploader: &str) -> Result<Written, TxError> {
        let v = &u.version;
        rows::insert(t.db, t.tx, v, uploader).await?;
        match sumdb::append(t.db, t.tx, t.repo.id, (&v.module, &v.version), &u.record).await {
            Ok(_) => {}
            Err(AppendError::Different { id, logged }) => {
                return Err(TxError::Refused(logged_differently(t.repo, u, id, &logged)))
            }
            Err(AppendError::Db(e)) => return Err(TxError::Db(e)),
            Err(AppendError::Sumdb(sumdb::SumdbError::Db(e))) => return Err(TxError::Db(e)),
            Err(other) => return Err(TxError::Db(DbError::Corrupt(other.to_string()))),
        }
        Ok(Written::all(super::catalogue::entry(v)))
    }

    async fn remove(&self, t: &mut InTx<'_, '_>, (module, version): &(String, String)) -> DbResult<Option<Removed>> {
        let Some(v) = rows::version(t.db, &mut **t.tx, t.repo.id, module, version).await? else { return Ok(None) };
        rows::delete(t.db, t.tx, v.id).await?;
        let (coordinate, units) = (format!("{}@{}", v.module, v.version), vec![(KIND, v.module.clone())]);
        let (detail, forget) = (serde_json::json!({"sha256": v.zip_sha256}), Forget::Component(coordinate.clone()));
        let content = Some(super::catalogue::content(&v.module, &v.version));
        Ok(Some(Removed { coordinate, units, detail, forget, content }))
    }

    /// `<module>@<version>`.
    fn removal(&self, key: &str) -> Option<(String, String)> {
        key.rsplit_once('@').map(|(m, v)| (m.to_string(), v.to_string()))
    }

    /// The version's zip (its `go.mod` and `.info` follow from it).
    async fn copy_targets(
        &self,
        _services: &Services,
        _to: &Repository,
        (key, _created_at): (&str, i64),
        assets: &[(String, StoredBlob)],
    ) -> Result<Vec<(Target, StoredBlob)>, UploadError> {
        let Some((module, version)) = key.rsplit_once('@') else {
            return Err(UploadError::Invalid(format!("{key} is not <module>@<version>")));
        };
        let zip = assets.iter().find(|(p, _)| p.ends_with(".zip")).ok_or_else(|| {
            UploadError::Invalid(format!("{key} has no module zip to copy (a proxy's .info or .mod alone)"))
        })?;
        Ok(vec![(Target::Coordinate { module: module.to_string(), version: version.to_string() }, zip.1.clone())])
    }
}

/// The record of a version in a checksum database: its two go.sum lines.
pub fn record_text(module: &str, version: &str, h1_zip: &str, go_mod: &[u8]) -> String {
    packyard_codecs::go::sumdb::record_text(module, version, h1_zip, &packyard_codecs::go::sumdb::h1_go_mod(go_mod))
}

/// The refusal of other bytes for a version its repository's checksum database logged.
fn logged_differently(repo: &Repository, u: &GoUpload, id: i64, logged: &str) -> UploadError {
    let v = &u.version;
    let hashes = |text: &str| text.lines().next().and_then(|l| l.rsplit(' ').next()).unwrap_or_default().to_string();
    UploadError::Conflict(format!(
        "{}@{} is record {id} of the checksum database of repository {} with the zip hash {}, and this zip hashes to {}: a logged version's hashes never change, whatever the write policy and also after a delete (clients verify go.sum against the log); publish a new version",
        v.module,
        v.version,
        repo.name,
        hashes(logged),
        hashes(&u.record)
    ))
}

/// A checksum database that could not be read or made, as a storage failure.
fn log_failure(e: sumdb::SumdbError) -> DbError {
    match e {
        sumdb::SumdbError::Db(e) => e,
        other => DbError::Corrupt(other.to_string()),
    }
}

/// Reads the stored zip's central directory (from its end), checks it, then reads it once in
/// order to check every entry's data; returns the module, version, root go.mod and `h1:`.
pub async fn check(
    services: &Services,
    zip: &StoredBlob,
    expected: Option<(&str, &str)>,
    limits: &Limits,
) -> Result<(String, String, Verified), UploadError> {
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
    let verified =
        read_back(services, &zip.sha256, move |r| verify_data(r, &entries, &go_mod_name)).await?.map_err(zip_error)?;
    Ok((module, version, verified))
}

/// A module zip refused: over a limit is 413, the rest 400.
fn zip_error(e: ZipError) -> UploadError {
    match e {
        ZipError::TooLarge { .. } => UploadError::TooLarge(e.to_string()),
        other => UploadError::Invalid(other.to_string()),
    }
}

/// Checks a URL's module path and version (already case-decoded).
pub fn check_coordinate(module: &str, version: &str) -> Result<(), UploadError> {
    packyard_codecs::go::check_module_path(module).map_err(|e| UploadError::Invalid(e.0))?;
    packyard_codecs::go::check_module_version(module, version).map_err(|e| UploadError::Invalid(e.0))?;
    Ok(())
}
