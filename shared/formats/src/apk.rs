//! Alpine APK over the engine: hosted uploads, the signed index snapshot per
//! `<branch>/<channel>/<arch>`, group merges, index keys in the key store, and the proxy rule.

pub mod catalogue;
pub mod chunks;
pub mod group;
pub mod hosted;
pub mod import;
pub mod keys;
pub mod publish;
pub mod rows;
pub mod settings;
pub mod spec;
pub mod ui;

pub use packyard_codecs::apk::{valid_segment, Unit, INDEX_FILE};

/// The unit kind of APK snapshots.
pub const KIND: &str = "apk";

/// How a proxy fetches an APK path: packages are immutable (a name-version is built once), an
/// `APKINDEX.tar.gz` is metadata; 404 and 410 are remembered.
pub fn proxy_request(
    repo: &packyard_model::repos::Repository,
    path: &str,
) -> Result<packyard_core::proxy::FetchRequest, packyard_core::proxy::ProxyError> {
    use packyard_core::proxy::{FetchRequest, Freshness};
    let freshness = if path.ends_with(".apk") { Freshness::Immutable } else { Freshness::Metadata };
    let mut req = FetchRequest::new(repo, path, freshness)?;
    req.negative_statuses = &[404, 410];
    req.catalogue = packyard_core::catalogue::Catalogue::cached(&catalogue::ApkCatalogue, path);
    Ok(req)
}
