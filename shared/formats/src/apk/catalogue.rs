//! APK in the catalogue: a package is a component — group its unit (`<branch>/<repository>/<arch>`,
//! e.g. `v3.20/main/x86_64`), name and version as its `.PKGINFO` says, keyed by its path — with
//! its `.apk` as the asset. A proxy's packages are catalogued from their paths
//! (`<unit>/<name>-<version>-r<n>.apk`).

use async_trait::async_trait;

use super::rows::{self, ApkPackage};
use packyard_codecs::apk::package::{index_record, read_package, Limits};
use packyard_core::catalogue::{small_asset, stamped, Catalogue, Details, Stamped};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::catalogue::{AssetRow, ComponentRow};
use packyard_store::db::{Db, DbResult};

pub const APK_TYPE: &str = "application/octet-stream";

pub struct ApkCatalogue;

/// What a content selector sees of a package: its path and its component.
pub fn content(p: &ApkPackage) -> (String, Component) {
    (p.path.clone(), entry(p).component)
}

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

/// How much of a cached `.apk` is unpacked to read its `.PKGINFO` (it is at most
/// [`packyard_core::catalogue::DETAILS_MAX_FILE`] bytes).
const DETAILS_LIMITS: Limits = Limits { max_control: 4 << 20, max_data: 64 << 20 };

/// The index record of a component without a row (a proxy's): from its `.apk`, if small.
async fn apk_record(services: &Services, assets: &[AssetRow]) -> Option<String> {
    let apk = assets.iter().find(|a| a.path.ends_with(".apk"))?;
    let bytes = small_asset(services, apk).await?;
    tokio::task::spawn_blocking(move || apk_record_of(&bytes)).await.ok().flatten()
}

/// The index record of an `.apk` in memory (its own architecture as `A:`), if it reads as one.
fn apk_record_of(apk: &[u8]) -> Option<String> {
    let info = read_package(apk, DETAILS_LIMITS).ok()?;
    Some(index_record(&info, &info.pkginfo.arch, info.size))
}

/// A field of an APKINDEX record (`K:value`, the key case-sensitive); `None` when absent or empty.
fn record_field(record: &str, key: char) -> Option<&str> {
    record.lines().find_map(|l| {
        let value = l.strip_prefix(key)?.strip_prefix(':')?.trim();
        (!value.is_empty()).then_some(value)
    })
}

/// What an APKINDEX record says for people: its `D:` dependencies (`so:libc.musl-x86_64.so.1`,
/// `busybox>=1.36`, a conflict `!foo`), its architecture, license and origin.
fn record_details(record: &str) -> Details {
    let dependencies =
        record_field(record, 'D').map(|d| d.split_whitespace().map(str::to_string).collect()).unwrap_or_default();
    let facts = [('A', "arch"), ('L', "license"), ('o', "origin")]
        .into_iter()
        .filter_map(|(key, label)| Some((label.to_string(), record_field(record, key)?.to_string())))
        .collect();
    Details { dependencies, facts }
}

#[async_trait]
impl Catalogue for ApkCatalogue {
    /// From the package's row (its APKINDEX record) when hosted, else from the `.PKGINFO` of
    /// its `.apk`.
    async fn details(&self, services: &Services, repo: &Repository, c: &ComponentRow, assets: &[AssetRow]) -> Details {
        let db = &services.db;
        let record = match rows::by_path(db, db.pool(), repo.id, &c.component_key).await {
            Ok(Some(p)) => p.record,
            _ => match apk_record(services, assets).await {
                Some(record) => record,
                None => return Details::default(),
            },
        };
        record_details(&record)
    }

    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        Ok(stamped(rows::stamped_page(db, repo.id, after, limit).await?, |p| p.id, entry))
    }

    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apk::version::compare(a, b)
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
    fn a_record_gives_its_dependencies_and_facts() {
        let record = "C:Q1abc=\nP:curl\nV:8.9.1-r0\nA:x86_64\nS:1234\nL:curl\no:curl\nm:Someone <s@example.org>\nD:ca-certificates-bundle so:libc.musl-x86_64.so.1  so:libcurl.so.4\np:cmd:curl=8.9.1-r0\n";
        let d = record_details(record);
        assert_eq!(d.dependencies, ["ca-certificates-bundle", "so:libc.musl-x86_64.so.1", "so:libcurl.so.4"]);
        let facts: Vec<(&str, &str)> = d.facts.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(facts, [("arch", "x86_64"), ("license", "curl"), ("origin", "curl")]);
        // `p:` is not `P:`, and an empty field is none.
        assert_eq!(record_field(record, 'p'), Some("cmd:curl=8.9.1-r0"));
        assert_eq!(record_field("D:\nA:noarch\n", 'D'), None);
        assert_eq!(record_details(""), Details::default());
    }

    #[test]
    fn an_apk_gives_its_record() -> anyhow::Result<()> {
        use packyard_codecs::apk::testing::{build_apk, Fixture};
        let built = build_apk(&Fixture::new("hello", "2.12-r1", "x86_64"))?;
        let d = record_details(&apk_record_of(&built.bytes).unwrap_or_default());
        assert_eq!(d.dependencies, ["so:libc.musl-x86_64.so.1", "busybox"]);
        assert_eq!(d.facts.first(), Some(&("arch".to_string(), "x86_64".to_string())));
        assert_eq!(apk_record_of(b"not a package"), None);
        Ok(())
    }

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
