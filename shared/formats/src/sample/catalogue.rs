//! The sample format in the catalogue: a file is a component (name, version, keyed
//! `<name>/<version>`, no group) with one asset at that path. A proxy's files are catalogued
//! from their paths.

use async_trait::async_trait;

use super::rows::{self, SampleFile};
use super::Request;
use packyard_core::catalogue::{Catalogue, Stamped};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_model::repos::Repository;
use packyard_store::db::{Db, DbResult};

pub struct SampleCatalogue;

/// The content type of every file.
pub const CONTENT_TYPE: &str = "application/octet-stream";

pub fn component(name: &str, version: &str) -> Component {
    Component {
        key: format!("{name}/{version}"),
        group: String::new(),
        name: name.to_string(),
        version: version.to_string(),
    }
}

/// A hosted file's entry.
pub fn entry(f: &SampleFile) -> Entry {
    let asset = NewAsset {
        path: format!("{}/{}", f.name, f.version),
        sha256: f.sha256.clone(),
        sha1: None,
        md5: None,
        size: f.size,
        content_type: CONTENT_TYPE.into(),
    };
    Entry { component: component(&f.name, &f.version), assets: vec![asset] }
}

#[async_trait]
impl Catalogue for SampleCatalogue {
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        let page = rows::stamped_page(db, repo.id, after, limit).await?;
        Ok(page
            .into_iter()
            .map(|(f, by)| (f.id, Stamped { entry: entry(&f), uploaded_by: by, created_at: f.time_ms }))
            .collect())
    }

    fn cached(&self, path: &str) -> Option<Component> {
        match Request::parse(path).ok()? {
            Request::File { name, version } => Some(component(&name, &version)),
            Request::Index => None,
        }
    }

    /// Versions in the order of their numeric dot-separated parts, then as text ("1.10" after
    /// "1.9").
    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        let parts = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
        parts(a).cmp(&parts(b)).then_with(|| a.cmp(b))
    }
}
