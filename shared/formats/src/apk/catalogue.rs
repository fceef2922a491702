//! APK in the catalogue: a package is a component — group its unit (`<branch>/<repository>/<arch>`,
//! e.g. `v3.20/main/x86_64`), name and version as its `.PKGINFO` says, keyed by its path — with
//! its `.apk` as the asset. A proxy's packages are catalogued from their paths
//! (`<unit>/<name>-<version>-r<n>.apk`).

use async_trait::async_trait;

use super::rows::{self, ApkPackage};
use packyard_core::catalogue::{stamped, Catalogue, Stamped};
use packyard_core::hosted::{Actor, UploadError};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::{Db, DbResult};

pub const APK_TYPE: &str = "application/octet-stream";

pub struct ApkCatalogue;

/// A hosted package's entry.
pub fn entry(p: &ApkPackage) -> Entry {
    let component =
        Component { key: p.path.clone(), group: p.unit_key.clone(), name: p.name.clone(), version: p.version.clone() };
    let apk = NewAsset {
        path: p.path.clone(),
        sha256: p.sha256.clone(),
        sha1: None,
        md5: None,
        size: p.size,
        content_type: APK_TYPE.into(),
    };
    Entry { component, assets: vec![apk] }
}

#[async_trait]
impl Catalogue for ApkCatalogue {
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        Ok(stamped(rows::stamped_page(db, repo.id, after, limit).await?, |p| p.id, entry))
    }

    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apk::version::compare(a, b)
    }

    async fn delete_batch(
        &self,
        services: &Services,
        repo: &Repository,
        keys: &[String],
        actor: Actor<'_>,
    ) -> Result<(usize, Vec<(i64, i64)>), UploadError> {
        packyard_core::hosted::delete_batch(&super::hosted::ApkHosted, services, repo, keys, actor).await
    }

    fn cached(&self, path: &str) -> Option<Component> {
        let (unit, file) = path.rsplit_once('/')?;
        let stem = file.strip_suffix(".apk")?;
        // `<name>-<version>-r<n>`: the version is the last two dash-separated parts.
        let (rest, release) = stem.rsplit_once('-')?;
        let (name, version) = rest.rsplit_once('-')?;
        let release_ok =
            release.strip_prefix('r').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !release_ok || name.is_empty() || !version.starts_with(|c: char| c.is_ascii_digit()) || unit.is_empty() {
            return None;
        }
        Some(Component {
            key: path.to_string(),
            group: unit.to_string(),
            name: name.to_string(),
            version: format!("{version}-{release}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_path_names_its_package() {
        let path = "v3.20/main/x86_64/py3-foo-bar-1.2.3-r0.apk";
        assert_eq!(
            ApkCatalogue.cached(path),
            Some(Component {
                key: "v3.20/main/x86_64/py3-foo-bar-1.2.3-r0.apk".into(),
                group: "v3.20/main/x86_64".into(),
                name: "py3-foo-bar".into(),
                version: "1.2.3-r0".into()
            })
        );
        for metadata in ["v3.20/main/x86_64/APKINDEX.tar.gz", "x/foo-r0.apk", "x/foo-1.0-rc.apk"] {
            assert_eq!(ApkCatalogue.cached(metadata), None, "{metadata}");
        }
    }
}
