//! Go in the catalogue: a module version is a component — name the module path's last element
//! (a major-version suffix `/vN` aside: `github.com/acme/yaml/v2` is `yaml`), group the path
//! before it (`github.com/acme`), version the module version, keyed by `<module>@<version>` —
//! with its `.info`, `.mod` and `.zip` as assets at their GOPROXY paths. A proxy's files are
//! catalogued from their paths (canonical versions only: what never changes upstream).

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::rows::{self, GoVersion};
use super::{hosted::info_json, Request};
use packyard_codecs::go::{escape, Version};
use packyard_core::catalogue::{Catalogue, Stamped};
use packyard_core::hosted::{Actor, UploadError};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::catalogue::ComponentRow;
use packyard_store::db::{Db, DbResult};

pub struct GoCatalogue;

/// How people name a module version: `(group, name)`.
fn naming(module: &str) -> (String, String) {
    let (head, last) = module.rsplit_once('/').unwrap_or(("", module));
    let is_major = last.len() > 1 && last.starts_with('v') && last[1..].bytes().all(|b| b.is_ascii_digit());
    match (is_major, head.rsplit_once('/')) {
        (true, Some((group, name))) => (group.to_string(), name.to_string()),
        (true, None) if !head.is_empty() => (String::new(), head.to_string()),
        _ => (head.to_string(), last.to_string()),
    }
}

pub fn component(module: &str, version: &str) -> Component {
    let (group, name) = naming(module);
    Component { key: format!("{module}@{version}"), group, name, version: version.to_string() }
}

/// A hosted version's entry.
pub fn entry(v: &GoVersion) -> Entry {
    let base = format!("{}/@v/{}", escape(&v.module), escape(&v.version));
    let info = info_json(&v.version, v.time_ms);
    let asset = |ext: &str, sha256: String, size: i64, content_type: &str| NewAsset {
        path: format!("{base}.{ext}"),
        sha256,
        sha1: None,
        md5: None,
        size,
        content_type: content_type.into(),
    };
    let info_size = i64::try_from(info.len()).unwrap_or(i64::MAX);
    let assets = vec![
        asset("info", hex::encode(Sha256::digest(info.as_bytes())), info_size, "application/json"),
        asset("mod", v.mod_sha256.clone(), v.mod_size, "text/plain; charset=utf-8"),
        asset("zip", v.zip_sha256.clone(), v.zip_size, "application/zip"),
    ];
    Entry { component: component(&v.module, &v.version), assets }
}

#[async_trait]
impl Catalogue for GoCatalogue {
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        let page = rows::stamped_page(db, repo.id, after, limit).await?;
        Ok(page
            .into_iter()
            .map(|(v, by)| {
                let stamped = Stamped { entry: entry(&v), uploaded_by: by, created_at: v.time_ms };
                (v.id, stamped)
            })
            .collect())
    }

    /// A package is a module: the key before its `@version`.
    fn package(&self, c: &ComponentRow) -> String {
        c.component_key.rsplit_once('@').map_or(c.component_key.as_str(), |(m, _)| m).to_string()
    }

    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        match (Version::parse(a), Version::parse(b)) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.cmp(b),
        }
    }

    fn prerelease(&self, version: &str) -> bool {
        Version::parse(version).is_ok_and(|v| !v.is_release() || v.is_pseudo())
    }

    async fn delete_batch(
        &self,
        services: &Services,
        repo: &Repository,
        keys: &[String],
        actor: Actor<'_>,
    ) -> Result<(usize, Vec<(i64, i64)>), UploadError> {
        let removals: Vec<(String, String)> =
            keys.iter().filter_map(|k| k.rsplit_once('@').map(|(m, v)| (m.to_string(), v.to_string()))).collect();
        packyard_core::hosted::delete_batch(&super::hosted::GoHosted, services, repo, &removals, actor).await
    }

    fn cached(&self, path: &str) -> Option<Component> {
        match Request::parse(path).ok()? {
            Request::File { module, version, .. }
                if Version::parse(&version).is_ok_and(|v| v.canonical() == version) =>
            {
                Some(component(&module, &version))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_is_named_by_its_last_element() {
        assert_eq!(naming("github.com/acme/yaml"), ("github.com/acme".into(), "yaml".into()));
        assert_eq!(naming("github.com/acme/yaml/v2"), ("github.com/acme".into(), "yaml".into()));
        assert_eq!(naming("gopkg.in/yaml.v3"), ("gopkg.in".into(), "yaml.v3".into()));
        assert_eq!(naming("example.com/v2"), (String::new(), "example.com".into()));
        assert_eq!(naming("rsc.io"), (String::new(), "rsc.io".into()));
    }

    #[test]
    fn a_proxy_path_names_its_version() {
        let path = "github.com/!acme/yaml/@v/v1.2.0.zip";
        assert_eq!(
            GoCatalogue.cached(path),
            Some(Component {
                key: "github.com/Acme/yaml@v1.2.0".into(),
                group: "github.com/Acme".into(),
                name: "yaml".into(),
                version: "v1.2.0".into()
            })
        );
        for metadata in
            ["github.com/acme/yaml/@v/list", "github.com/acme/yaml/@latest", "github.com/acme/yaml/@v/main.info"]
        {
            assert_eq!(GoCatalogue.cached(metadata), None, "{metadata}");
        }
    }
}
