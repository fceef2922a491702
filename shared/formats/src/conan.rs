//! Conan 2 over the engine: revisions and their files, and the projections (per reference, and
//! the search index) published as snapshots.

/// The unit kind of a reference's projection (one unit per reference of a repository).
pub const KIND: &str = "conan";
/// The unit kind of a repository's search index (unit [`SEARCH_UNIT`], file [`SEARCH_FILE`]).
pub const SEARCH_KIND: &str = "conan-search";
pub const SEARCH_UNIT: &str = "all";
pub const SEARCH_FILE: &str = "search.json";

pub mod catalogue;
pub mod group;
pub mod hosted;
pub mod import;
pub mod nexus;
pub mod publish;
pub mod rows;
pub mod spec;
pub mod ui;

use packyard_core::proxy::{FetchRequest, Freshness, ProxyError};
use packyard_model::repos::Repository;

/// How a proxy fetches a Conan path (`v2/conans/…`, with its query): a revision's files never
/// change (`immutable`; a revision is immutable, `metadata/…` excepted), lists, `latest` and
/// searches are metadata — each answer stands alone (no other file's change expires it), so a
/// fresh one is answered from memory —; a 404 means "not there".
pub fn proxy_request(repo: &Repository, path: &str, immutable: bool) -> Result<FetchRequest, ProxyError> {
    let freshness = if immutable { Freshness::Immutable } else { Freshness::Metadata };
    let mut fetch = FetchRequest::new(repo, path, freshness)?;
    fetch.negative_statuses = &[404];
    if immutable {
        fetch.catalogue = packyard_core::catalogue::Catalogue::cached(&catalogue::ConanCatalogue, path);
    } else {
        fetch.from_memory = true;
    }
    Ok(fetch)
}
