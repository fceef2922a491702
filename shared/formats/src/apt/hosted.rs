//! Hosted APT over the engine: a `.deb` goes to a component (the first configured by default);
//! the whole package is read, its architecture checked, and its row (the control text, the
//! pool path, the size and SHA-256) written with its distribution's publication change. The MD5,
//! which only the `Packages` index lists, is computed once by the worker that first publishes it,
//! off the upload's path.

use async_trait::async_trait;

use super::rows::{self, AptPackage};
use super::KIND;
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_core::hosted::{
    read_back, Existing, Forget, Hosted, InTx, Inspected, Removed, TxError, UnitRef, UploadError, Written,
};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;
use packyard_store::db::DbResult;

/// APT's hosted rules.
pub struct AptHosted;

/// Where an upload goes and what it must be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AptTarget {
    /// `?component=` (or Artifactory's `deb.component`); the first configured when `None`.
    pub component: Option<String>,
    /// Artifactory's `deb.architecture`: the package's own `Architecture` must be the same.
    pub architecture: Option<String>,
}

/// The distribution a hosted repository publishes.
fn distribution(repo: &Repository) -> String {
    repo.settings.apt.clone().unwrap_or_default().distribution
}

#[async_trait]
impl Hosted for AptHosted {
    type Target = AptTarget;
    type Artifact = AptPackage;
    /// A pool path.
    type Removal = String;

    const NAME: &'static str = KIND;
    const BODY: Option<&'static str> = Some("the .deb");

    fn check_target(&self, repo: &Repository, t: &AptTarget) -> Result<(), UploadError> {
        let settings = repo.settings.apt.clone().unwrap_or_default();
        match &t.component {
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
        t: &AptTarget,
        stored: &StoredBlob,
    ) -> Result<Inspected<AptPackage>, UploadError> {
        let component = &t.component;
        let settings = repo.settings.apt.clone().unwrap_or_default();
        let component =
            component.clone().unwrap_or_else(|| settings.components.first().cloned().unwrap_or_else(|| "main".into()));
        let control = read_back(services, &stored.sha256, |r| read_package(r, Limits::default()))
            .await?
            .map_err(|e| UploadError::Invalid(format!("not a valid .deb: {e}")))?;
        if let Some(said) = t.architecture.as_deref().filter(|a| *a != control.architecture) {
            return Err(UploadError::Invalid(format!(
                "deb.architecture={said} but the package's control file says Architecture: {}",
                control.architecture
            )));
        }
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

    fn receipt(&self, p: &AptPackage) -> serde_json::Value {
        serde_json::json!({"package": p.name, "version": p.version, "architecture": p.architecture,
            "component": p.component, "filename": p.pool_path, "sha256": p.sha256, "size": p.size})
    }

    async fn existing(&self, t: &mut InTx<'_, '_>, p: &AptPackage) -> DbResult<Existing<Self::Removal>> {
        let stored = rows::by_coordinate(t.db, &mut **t.tx, t.repo.id, &p.name, &p.version, &p.architecture).await?;
        Ok(Existing::of(stored.map(|old| (old.sha256 == p.sha256 && old.component == p.component, old.pool_path))))
    }

    async fn write(&self, t: &mut InTx<'_, '_>, p: &AptPackage, uploader: &str) -> Result<Written, TxError> {
        rows::insert(t.db, t.tx, p, uploader).await?;
        Ok(Written::all(super::catalogue::entry(p)))
    }

    async fn remove(&self, t: &mut InTx<'_, '_>, pool_path: &String) -> DbResult<Option<Removed>> {
        let Some(p) = rows::by_pool_path(t.db, &mut **t.tx, t.repo.id, pool_path).await? else { return Ok(None) };
        rows::delete(t.db, t.tx, p.id).await?;
        let detail = serde_json::json!({"sha256": p.sha256, "filename": p.pool_path});
        let (units, forget) = (vec![(KIND, distribution(t.repo))], Forget::Component(p.pool_path.clone()));
        Ok(Some(Removed { coordinate: coordinate(&p), units, detail, forget }))
    }
}

/// How people name a package: `<name>_<version>_<architecture>`.
fn coordinate(p: &AptPackage) -> String {
    format!("{}_{}_{}", p.name, p.version, p.architecture)
}
