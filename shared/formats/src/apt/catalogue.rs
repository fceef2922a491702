//! APT in the catalogue: a package is a component — group its archive component (`main`), name
//! and version as its control file says, one per architecture, keyed by its pool path — with its
//! `.deb` as the asset. A proxy's `.deb`s are catalogued from their pool paths
//! (`pool/<component>/…/<name>_<version>_<arch>.deb`: the version as the file name writes it,
//! without an epoch).

use async_trait::async_trait;

use super::rows::{self, AptPackage};
use packyard_core::catalogue::{stamped, Catalogue, Stamped};
use packyard_core::hosted::{Actor, UploadError};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::catalogue::ComponentRow;
use packyard_store::db::{Db, DbResult};

pub const DEB_TYPE: &str = "application/vnd.debian.binary-package";

pub struct AptCatalogue;

/// A hosted package's entry.
pub fn entry(p: &AptPackage) -> Entry {
    let component = Component {
        key: p.pool_path.clone(),
        group: p.component.clone(),
        name: p.name.clone(),
        version: p.version.clone(),
    };
    let deb = NewAsset {
        path: p.pool_path.clone(),
        sha256: p.sha256.clone(),
        sha1: None,
        md5: Some(p.md5.clone()).filter(|m| !m.is_empty()),
        size: p.size,
        content_type: DEB_TYPE.into(),
    };
    Entry { component, assets: vec![deb] }
}

#[async_trait]
impl Catalogue for AptCatalogue {
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        Ok(stamped(rows::stamped_page(db, repo.id, after, limit).await?, |p| p.id, entry))
    }

    /// A package is a name on an architecture (the pool file's last `_` field).
    fn package(&self, c: &ComponentRow) -> String {
        let file = c.component_key.rsplit('/').next().unwrap_or_default();
        let arch = file.rsplit_once('_').map_or("", |(_, a)| a.trim_end_matches(".deb").trim_end_matches(".udeb"));
        format!("{}\0{arch}", c.name)
    }

    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apt::version::compare(a, b)
    }

    async fn delete_batch(
        &self,
        services: &Services,
        repo: &Repository,
        keys: &[String],
        actor: Actor<'_>,
    ) -> Result<(usize, Vec<(i64, i64)>), UploadError> {
        packyard_core::hosted::delete_batch(&super::hosted::AptHosted, services, repo, keys, actor).await
    }

    fn cached(&self, path: &str) -> Option<Component> {
        let rest = path.strip_prefix("pool/")?;
        let (group, _) = rest.split_once('/')?;
        let file = rest.rsplit('/').next()?;
        let stem = file.strip_suffix(".deb").or_else(|| file.strip_suffix(".udeb"))?;
        let mut parts = stem.splitn(3, '_');
        let (name, version, _arch) = (parts.next()?, parts.next()?, parts.next()?);
        if name.is_empty() || version.is_empty() || group.is_empty() {
            return None;
        }
        // An epoch's colon, where a file name keeps it, is sent percent-encoded.
        let version = version.replace("%3a", ":").replace("%3A", ":");
        Some(Component { key: path.to_string(), group: group.into(), name: name.into(), version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_path_names_its_package() {
        let path = "pool/main/s/sl/sl_5.02-1_amd64.deb";
        assert_eq!(
            AptCatalogue.cached(path),
            Some(Component {
                key: "pool/main/s/sl/sl_5.02-1_amd64.deb".into(),
                group: "main".into(),
                name: "sl".into(),
                version: "5.02-1".into()
            })
        );
        let path = "pool/main/v/vim/vim_2%3a9.0_amd64.deb";
        assert_eq!(AptCatalogue.cached(path).map(|c| c.version), Some("2:9.0".into()));
        for metadata in ["dists/bookworm/InRelease", "pool/main/s/sl/sl_5.02-1.dsc", "pool/x.deb"] {
            assert_eq!(AptCatalogue.cached(metadata), None, "{metadata}");
        }
    }
}
