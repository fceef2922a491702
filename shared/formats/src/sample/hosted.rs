//! Hosted sample files over the engine: any bytes under a name and a version, checked by their
//! URL alone; the repository's index unit republished on every change.

use async_trait::async_trait;

use super::rows::{self, SampleFile};
use super::{check_part, KIND, UNIT};
use packyard_core::hosted::{
    Existing, Forget, Hosted, InTx, Inspected, Removed, TxError, UnitRef, UploadError, Written,
};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;
use packyard_store::db::DbResult;

/// The sample format's hosted rules.
pub struct SampleHosted;

/// `(name, version)`: where a file goes, and what a delete names.
pub type Coordinate = (String, String);

#[async_trait]
impl Hosted for SampleHosted {
    type Target = Coordinate;
    type Artifact = SampleFile;
    type Removal = Coordinate;

    const NAME: &'static str = KIND;
    const BODY: Option<&'static str> = Some("the file");

    fn check_target(&self, _repo: &Repository, (name, version): &Coordinate) -> Result<(), UploadError> {
        check_part("name", name).and_then(|()| check_part("version", version)).map_err(UploadError::Invalid)
    }

    async fn inspect(
        &self,
        _services: &Services,
        repo: &Repository,
        (name, version): &Coordinate,
        stored: &StoredBlob,
    ) -> Result<Inspected<SampleFile>, UploadError> {
        let file = SampleFile {
            id: 0,
            repository_id: repo.id,
            name: name.clone(),
            version: version.clone(),
            time_ms: packyard_store::db::now_ms(),
            sha256: stored.sha256.to_string(),
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
        };
        Ok(Inspected { artifact: file, coordinate: format!("{name}/{version}"), derived: Vec::new() })
    }

    fn units(&self, _repo: &Repository, _f: &SampleFile) -> Vec<UnitRef> {
        vec![(KIND, UNIT.to_string())]
    }

    fn content(&self, f: &SampleFile) -> (String, packyard_core::hosted::Component) {
        (format!("{}/{}", f.name, f.version), super::catalogue::component(&f.name, &f.version))
    }

    fn receipt(&self, f: &SampleFile) -> serde_json::Value {
        serde_json::json!({"name": f.name, "version": f.version, "sha256": f.sha256, "size": f.size})
    }

    async fn existing(&self, t: &mut InTx<'_, '_>, f: &SampleFile) -> DbResult<Existing<Coordinate>> {
        let stored = rows::file(t.db, &mut **t.tx, t.repo.id, &f.name, &f.version).await?;
        Ok(Existing::of(stored.map(|old| (old.sha256 == f.sha256, (old.name, old.version)))))
    }

    async fn write(&self, t: &mut InTx<'_, '_>, f: &SampleFile, uploader: &str) -> Result<Written, TxError> {
        rows::insert(t.db, t.tx, f, uploader).await?;
        Ok(Written::all(super::catalogue::entry(f)))
    }

    async fn remove(&self, t: &mut InTx<'_, '_>, (name, version): &Coordinate) -> DbResult<Option<Removed>> {
        let Some(f) = rows::file(t.db, &mut **t.tx, t.repo.id, name, version).await? else { return Ok(None) };
        rows::delete(t.db, t.tx, f.id).await?;
        let coordinate = format!("{}/{}", f.name, f.version);
        Ok(Some(Removed {
            coordinate: coordinate.clone(),
            units: vec![(KIND, UNIT.to_string())],
            detail: serde_json::json!({"sha256": f.sha256}),
            forget: Forget::Component(coordinate.clone()),
            content: Some((coordinate, super::catalogue::component(&f.name, &f.version))),
        }))
    }

    /// `<name>/<version>`.
    fn removal(&self, key: &str) -> Option<Coordinate> {
        key.split_once('/').map(|(n, v)| (n.to_string(), v.to_string()))
    }
}
