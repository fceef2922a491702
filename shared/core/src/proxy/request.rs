//! What is asked of an upstream: one path of one proxy repository, how long its answer stays
//! fresh, and how it is checked against an index root that lists it.

use packyard_model::repos::{ProxySettings, Repository};

use super::*;

/// How long a fetched file stays fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Never changes upstream (content-addressed or versioned): fetched once.
    Immutable,
    /// Served for the repository's `metadata_ttl_secs`, then revalidated.
    Metadata,
}

/// One path of one proxy repository.
#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub repository_id: i64,
    pub repository: String,
    pub settings: ProxySettings,
    /// Below the upstream base URL, without a leading `/`, already checked for `..`.
    pub path: String,
    pub freshness: Freshness,
    /// Upstream statuses that mean "not there" and are remembered (e.g. `&[404]`).
    pub negative_statuses: &'static [u16],
    /// When this file changes, the cached entries under this prefix are revalidated too (an
    /// index root that lists them, e.g. APT's `InRelease` for `dists/<suite>/`).
    pub on_change_expire: Option<String>,
    /// The SHA-256 the bytes must have (a content-addressed path such as APT's
    /// `by-hash/SHA256/<hex>`): other bytes are refused and not cached.
    pub expect_sha256: Option<String>,
    /// The repository's format (the catalogue's).
    pub format: &'static str,
    /// The component a cached copy of this file is an asset of (an artifact; metadata has none).
    pub catalogue: Option<packyard_store::db::catalogue::Component>,
    /// Metadata that no other file's change expires early (nothing under another request's
    /// `on_change_expire`): while fresh, this process answers it from memory, asking neither
    /// the upstream nor the database (invariant 5). Another replica's newer fetch is seen once
    /// the copy in memory is no longer fresh.
    pub from_memory: bool,
    /// Fetched from another upstream than the repository's (a checksum database a Go proxy
    /// serves): `path` stays the cache's key; the upstream credentials are not sent there.
    pub elsewhere: Option<Elsewhere>,
    /// A file an index root lists by hash (APT: a `Packages` file its `InRelease` lists): served
    /// only as the bytes the cached root names, so a client never gets a pair that disagrees.
    pub listed_in: Option<ListedIn>,
    /// Reads an expiry out of the file's bytes (APT: `InRelease`'s `Valid-Until`, in ms since
    /// the epoch): a cached copy past it is never fresh, whatever the metadata TTL.
    pub expires: Option<ExpiryOf>,
    /// The repository's quota (`quota.*`): at its hard limit no artifact is cached any more.
    pub quota: Option<packyard_model::quota::Quota>,
}

/// Reads an expiry (ms since the epoch) out of a file's bytes.
pub type ExpiryOf = fn(&[u8]) -> Option<i64>;

/// Reads, out of an index root's bytes, what it lists for a file: its SHA-256 and a path that
/// serves exactly those bytes (`…/by-hash/SHA256/<hex>`), if any.
pub type ListingOf = fn(&[u8], &str) -> Listing;

/// What an index root lists for a file: its SHA-256 (hex) and a path serving exactly those bytes.
pub type Listing = Option<(String, Option<String>)>;

/// The index root a file is listed in, and how to read the listing (see
/// [`FetchRequest::listed_in`]).
#[derive(Debug, Clone)]
pub struct ListedIn {
    /// The root's path (`dists/<dist>/InRelease`).
    pub root: String,
    /// From the root's bytes and the file's path: the SHA-256 the root lists for it (hex), and
    /// a path that serves exactly those bytes (`…/by-hash/SHA256/<hex>`) where the upstream
    /// offers one. `None`: the root does not list the file.
    pub expected: ListingOf,
}

/// Another upstream for one path: its base URL and the path below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elsewhere {
    pub base_url: String,
    pub path: String,
}

impl FetchRequest {
    /// A request for `path` of proxy repository `repo` (which must carry proxy settings).
    pub fn new(repo: &Repository, path: &str, freshness: Freshness) -> Result<Self, ProxyError> {
        let settings = repo
            .settings
            .proxy
            .clone()
            .ok_or_else(|| ProxyError::Internal(format!("repository {} has no proxy settings", repo.name)))?;
        Ok(Self {
            repository_id: repo.id,
            repository: repo.name.to_string(),
            settings,
            path: path.to_string(),
            freshness,
            negative_statuses: &[404],
            on_change_expire: None,
            expect_sha256: None,
            format: repo.format.as_str(),
            catalogue: None,
            from_memory: false,
            elsewhere: None,
            listed_in: None,
            expires: None,
            quota: repo.quota().copied(),
        })
    }
}

/// `remote_url` with `path`'s segments appended (each percent-encoded as needed).
pub fn upstream_url(remote_url: &str, path: &str) -> Result<reqwest::Url, ProxyError> {
    // A query (Conan's `search?q=`) travels as it came; it is part of the cache key too.
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut url = reqwest::Url::parse(remote_url).map_err(|e| internal(format!("proxy.remote_url: {e}")))?;
    {
        let mut segments = url.path_segments_mut().map_err(|()| internal("proxy.remote_url cannot be a base"))?;
        segments.pop_if_empty();
        segments.extend(path.split('/'));
    }
    url.set_query(query);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_encode_segments() -> Result<(), ProxyError> {
        let u = upstream_url("http://deb.example.org/debian", "pool/main/h/hello/hello_1:2.10+b1_amd64.deb")?;
        assert_eq!(u.as_str(), "http://deb.example.org/debian/pool/main/h/hello/hello_1:2.10+b1_amd64.deb");
        let u = upstream_url("http://deb.example.org/debian/", "dists/stable/InRelease")?;
        assert_eq!(u.as_str(), "http://deb.example.org/debian/dists/stable/InRelease");
        let u = upstream_url("http://deb.example.org/", "a b/%")?;
        assert_eq!(u.as_str(), "http://deb.example.org/a%20b/%25");
        let u = upstream_url("http://c.example.org/repo/", "v2/conans/search?q=zlib%2F*")?;
        assert_eq!(u.as_str(), "http://c.example.org/repo/v2/conans/search?q=zlib%2F*");
        Ok(())
    }
}
