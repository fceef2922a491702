//! Hosted APT over the engine: a `.deb` goes to a component (the first configured by default);
//! the whole package is read, its architecture checked, and its row (the control text, the
//! pool path, the size and SHA-256) written with its distribution's publication change. The MD5,
//! which only the `Packages` index lists, is computed once by the worker that first publishes it,
//! off the upload's path.

use async_trait::async_trait;

use super::rows::{rows, AptPackage};
use super::KIND;
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_core::hosted::{read_back, Existing, Hosted, Inspected, Removed, TxError, Tx, UnitRef, UploadError, Written};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;
use packyard_store::db::{Db, DbResult};

/// APT's hosted rules.
pub struct AptHosted;

/// The distribution a hosted repository publishes.
fn distribution(repo: &Repository) -> String {
    repo.settings.apt.clone().unwrap_or_default().distribution
}

#[async_trait]
impl Hosted for AptHosted {
    /// The component (`?component=`), or the first configured.
    type Target = Option<String>;
    type Artifact = AptPackage;
    /// A pool path.
    type Removal = String;

    fn name(&self) -> &'static str {
        KIND
    }

    fn body(&self) -> Option<&'static str> {
        Some("the .deb")
    }

    fn check_target(&self, repo: &Repository, component: &Option<String>) -> Result<(), UploadError> {
        let settings = repo.settings.apt.clone().unwrap_or_default();
        match component {
            Some(c) if !settings.components.contains(c) => Err(UploadError::Invalid(format!(
                "component {c:?} is not configured for repository {}; configured: {}",
                repo.name,
                settings.components.join(", ")
            ))),
            _ => Ok(()),
        }
    }

    async fn inspect(
        &self,
        services: &Services,
        repo: &Repository,
        component: &Option<String>,
        stored: &StoredBlob,
    ) -> Result<Inspected<AptPackage>, UploadError> {
        let settings = repo.settings.apt.clone().unwrap_or_default();
        let component = component.clone().unwrap_or_else(|| settings.components.first().cloned().unwrap_or_else(|| "main".into()));
        let control = read_back(services, &stored.sha256, |r| read_package(r, Limits::default()))
            .await?
            .map_err(|e| UploadError::Invalid(format!("not a valid .deb: {e}")))?;
        if control.architecture != "all" && !settings.architectures.contains(&control.architecture) {
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
            control: control.text,
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
            md5: String::new(),
            sha256: stored.sha256.to_string(),
        };
        let coordinate = coordinate(&package);
        Ok(Inspected { artifact: package, coordinate, derived: Vec::new() })
    }

    fn units(&self, repo: &Repository, _package: &AptPackage) -> Vec<UnitRef> {
        vec![(KIND, distribution(repo))]
    }

    async fn existing(&self, tx: &mut Tx<'_>, db: &Db, repo: &Repository, p: &AptPackage) -> DbResult<Existing> {
        let old = rows(db).by_coordinate(&mut **tx, repo.id, &p.name, &p.version, &p.architecture).await?;
        Ok(match old {
            None => Existing::Absent,
            Some(old) if old.sha256 == p.sha256 && old.component == p.component => Existing::Same,
            Some(_) => Existing::Different,
        })
    }

    async fn write(
        &self,
        tx: &mut Tx<'_>,
        db: &Db,
        _repo: &Repository,
        p: &AptPackage,
        uploader: &str,
        replace: bool,
    ) -> Result<Written, TxError> {
        rows(db).put(tx, p, uploader, replace).await?;
        Ok(Written::ALL)
    }

    async fn remove(&self, tx: &mut Tx<'_>, db: &Db, repo: &Repository, pool_path: &String) -> DbResult<Option<Removed>> {
        let rows = rows(db);
        let Some(p) = rows.by_pool_path(&mut **tx, repo.id, pool_path).await? else { return Ok(None) };
        rows.delete(tx, p.id).await?;
        Ok(Some(Removed {
            coordinate: coordinate(&p),
            units: vec![(KIND, distribution(repo))],
            detail: serde_json::json!({"sha256": p.sha256, "filename": p.pool_path}),
        }))
    }
}

/// How people name a package: `<name>_<version>_<architecture>`.
fn coordinate(p: &AptPackage) -> String {
    format!("{}_{}_{}", p.name, p.version, p.architecture)
}
