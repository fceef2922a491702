//! Hosted APK over the engine: a package is uploaded to `<branch>/<channel>/<arch>/<file>`; the
//! whole package is read, checked against its path and architecture, and its index record
//! written with its unit's publication change.

use super::settings::ApkSettings;
use async_trait::async_trait;
use packyard_model::repos::FormatSettings;

use super::rows::{self, ApkPackage};
use super::{Unit, KIND};
use packyard_codecs::apk::package::{index_record, read_package, ApkInfo, Limits};
use packyard_codecs::archive::expansion_limit;
use packyard_core::hosted::{
    read_back, Existing, Forget, Hosted, InTx, Inspected, Removed, TxError, UnitRef, UploadError, Written,
};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;
use packyard_store::db::DbResult;

/// APK's hosted rules.
pub struct ApkHosted;

/// Where a package goes: its unit and its file name (`<pkgname>-<pkgver>.apk`).
pub struct Target {
    pub unit: Unit,
    pub file: String,
}

#[async_trait]
impl Hosted for ApkHosted {
    type Target = Target;
    type Artifact = ApkPackage;
    /// `<unit>/<file>`.
    type Removal = String;

    const NAME: &'static str = KIND;
    const BODY: Option<&'static str> = Some("the .apk");

    fn check_target(&self, repo: &Repository, t: &Target) -> Result<(), UploadError> {
        let settings = ApkSettings::of(repo);
        if !settings.architectures.contains(&t.unit.arch) {
            return Err(UploadError::Invalid(format!(
                "architecture {:?} is not configured for repository {}; configured: {}",
                t.unit.arch,
                repo.name,
                settings.architectures.join(", ")
            )));
        }
        if !t.file.ends_with(".apk") {
            return Err(UploadError::Invalid(format!(
                "upload to <branch>/<channel>/<arch>/<pkgname>-<pkgver>.apk, not {:?}",
                t.file
            )));
        }
        Ok(())
    }

    async fn inspect(
        &self,
        services: &Services,
        repo: &Repository,
        t: &Target,
        stored: &StoredBlob,
    ) -> Result<Inspected<ApkPackage>, UploadError> {
        let info = check(repo, t, read(services, stored).await?)?;
        let package = ApkPackage {
            id: 0,
            repository_id: repo.id,
            unit_key: t.unit.key(),
            name: info.pkginfo.name.clone(),
            version: info.pkginfo.version.clone(),
            path: format!("{}/{}", t.unit.key(), t.file),
            record: index_record(&info, &t.unit.arch, stored.size),
            checksum: info.checksum.clone(),
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
            sha256: stored.sha256.to_string(),
        };
        let coordinate = package.path.clone();
        Ok(Inspected { artifact: package, coordinate, derived: Vec::new() })
    }

    fn units(&self, _repo: &Repository, p: &ApkPackage) -> Vec<UnitRef> {
        vec![(KIND, p.unit_key.clone())]
    }

    fn content(&self, p: &ApkPackage) -> (String, packyard_core::hosted::Component) {
        super::catalogue::content(p)
    }

    fn receipt(&self, p: &ApkPackage) -> serde_json::Value {
        serde_json::json!({"package": p.name, "version": p.version, "path": p.path, "checksum": p.checksum,
            "sha256": p.sha256, "size": p.size})
    }

    async fn existing(&self, t: &mut InTx<'_, '_>, p: &ApkPackage) -> DbResult<Existing<Self::Removal>> {
        let stored = rows::by_path(t.db, &mut **t.tx, t.repo.id, &p.path).await?;
        Ok(Existing::of(stored.map(|old| (old.sha256 == p.sha256, old.path))))
    }

    async fn write(&self, t: &mut InTx<'_, '_>, p: &ApkPackage, uploader: &str) -> Result<Written, TxError> {
        rows::insert(t.db, t.tx, p, uploader).await?;
        Ok(Written::all(super::catalogue::entry(p)))
    }

    async fn remove(&self, t: &mut InTx<'_, '_>, path: &String) -> DbResult<Option<Removed>> {
        let Some(p) = rows::by_path(t.db, &mut **t.tx, t.repo.id, path).await? else { return Ok(None) };
        rows::delete(t.db, t.tx, p.id).await?;
        let units = vec![(KIND, p.unit_key.clone())];
        let detail = serde_json::json!({"sha256": p.sha256});
        let content = Some(super::catalogue::content(&p));
        Ok(Some(Removed {
            coordinate: p.path.clone(),
            units,
            detail,
            forget: Forget::Component(p.path.clone()),
            content,
        }))
    }

    /// A package's path.
    fn removal(&self, key: &str) -> Option<String> {
        Some(key.to_string())
    }

    /// The package into the same `<branch>/<repository>/<arch>` of the target.
    async fn copy_targets(
        &self,
        _services: &Services,
        _to: &Repository,
        _component: (&str, i64),
        assets: &[(String, StoredBlob)],
    ) -> Result<Vec<(Target, StoredBlob)>, UploadError> {
        let mut out = Vec::new();
        for (path, blob) in assets.iter().filter(|(p, _)| p.ends_with(".apk")) {
            let parts: Vec<&str> = path.split('/').collect();
            let [branch, channel, arch, file] = parts[..] else {
                return Err(UploadError::Invalid(format!("{path} is not <branch>/<repository>/<arch>/<file>.apk")));
            };
            let unit = Unit::new(branch, channel, arch).map_err(UploadError::Invalid)?;
            out.push((Target { unit, file: file.to_string() }, blob.clone()));
        }
        Ok(out)
    }
}

/// The package, read whole (every member checked).
async fn read(services: &Services, stored: &StoredBlob) -> Result<ApkInfo, UploadError> {
    let limits = Limits { max_data: expansion_limit(stored.size), ..Limits::default() };
    read_back(services, &stored.sha256, move |r| read_package(r, limits))
        .await?
        .map_err(|e| UploadError::Invalid(format!("not a valid apk v2 package: {e}")))
}

/// What a package says it is, for an upload whose path does not say (a form), or to check it
/// against an index (an import).
pub struct Described {
    /// `<pkgname>-<pkgver>.apk`.
    pub file: String,
    pub arch: String,
    /// The index's `C:` of it.
    pub checksum: String,
}

/// Reads a stored package's `.PKGINFO` (the whole archive checked) for the path it goes to.
pub async fn describe(services: &Services, stored: &StoredBlob) -> Result<Described, UploadError> {
    let info = read(services, stored).await?;
    let p = info.pkginfo;
    Ok(Described { file: format!("{}-{}.apk", p.name, p.version), arch: p.arch, checksum: info.checksum })
}

/// The path must name the package: `<pkgname>-<pkgver>.apk`, under the package's architecture
/// (a `noarch` package goes under any configured one).
fn check(repo: &Repository, t: &Target, info: ApkInfo) -> Result<ApkInfo, UploadError> {
    let p = &info.pkginfo;
    let expected = format!("{}-{}.apk", p.name, p.version);
    if t.file != expected {
        return Err(UploadError::Invalid(format!(
            "the path names {:?} but the package's .PKGINFO says {expected:?} (pkgname {}, pkgver {})",
            t.file, p.name, p.version
        )));
    }
    if p.arch != t.unit.arch && p.arch != "noarch" {
        return Err(UploadError::Invalid(format!(
            "the package is built for {:?} but was uploaded under {:?} in repository {}",
            p.arch, t.unit.arch, repo.name
        )));
    }
    Ok(info)
}
