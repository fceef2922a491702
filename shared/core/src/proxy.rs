//! Proxy repositories, written once for every format: fetching a path from the upstream,
//! keeping the bytes in the blob store and a row in `proxy_cache`, and answering later requests
//! from there.
//!
//! - Immutable files (packages, by-hash indexes) are fetched once and kept; metadata is served
//!   for `metadata_ttl_secs`, then revalidated (`If-None-Match`/`If-Modified-Since`).
//! - Only the statuses a format names (404, and 410 for some) mean "not there"; they are
//!   remembered for `negative_ttl_secs` for immutable files, and never for metadata (which may
//!   appear upstream at any moment); any other upstream answer is an error, never cached.
//! - Concurrent misses for one path in one process make one upstream request (single-flight);
//!   the fetch runs on its own task, so a client that hangs up does not cancel it.
//! - When the upstream fails and a copy is cached, the copy is served (stale-if-error) and
//!   counted in `packyard_proxy_stale_served_total`.
//! - Outbound requests have connect and read timeouts and a per-process bound on fetches in
//!   flight; host names resolving to loopback, private or link-local addresses are refused
//!   unless `proxy.allow_private_addresses` or inside `proxy.allowed_networks` (checked at
//!   connect time, on every resolved address, also after redirects).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use reqwest::header;

use crate::outbound::{root_cause, Outbound, Settings};
use packyard_model::config::ProxyConfig;
use packyard_model::repos::{ProxySettings, Repository};
use packyard_store::blobs::{BlobStore, Sha256Hex};
use packyard_store::db::catalogue::{Entry, NewAsset};
use packyard_store::db::proxy::ProxyEntry;
use packyard_store::db::{now_ms, Db};
use packyard_store::metrics::Metrics;

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
        })
    }
}

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheState {
    /// Served from the cache without asking the upstream.
    Hit,
    /// Fetched from the upstream now.
    Miss,
    /// The upstream confirmed the cached copy (304).
    Revalidated,
    /// The upstream failed; the cached copy is served anyway.
    Stale,
}

impl CacheState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Revalidated => "revalidated",
            Self::Stale => "stale",
        }
    }
}

#[derive(Debug, Clone)]
pub enum Outcome {
    /// The bytes are in the blob store under `entry.sha256`.
    Found(ProxyEntry, CacheState),
    /// The upstream said 404 (or another remembered status).
    Missing(u16, CacheState),
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ProxyError {
    /// The upstream's address is not allowed (SSRF guard).
    #[error("{0}")]
    Blocked(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("{0}")]
    Timeout(String),
    /// The upstream answered with a status that is neither content nor a remembered miss.
    #[error("{0}")]
    Status(String),
    /// The upstream answered with a server error (5xx): it is failing, not refusing.
    #[error("{0}")]
    Failing(String),
    #[error("{0}")]
    TooLarge(String),
    /// Our own storage (the database, the blob store) is unavailable: a 503, retried later.
    #[error("{0}")]
    Unavailable(String),
    /// The upstream changed between a client's requests and the bytes it was promised are gone:
    /// a 503 — retried, the client reads the new generation.
    #[error("{0}")]
    Changing(String),
    /// A defect of ours.
    #[error("{0}")]
    Internal(String),
}

type SharedFetch = Shared<BoxFuture<'static, Result<Outcome, ProxyError>>>;

/// What a map of facts read out of immutable bytes (keyed by their digest) remembers for `key`.
fn recall<K, Q, V>(map: &Mutex<HashMap<K, V>>, key: &Q) -> Option<V>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
    V: Clone,
{
    map.lock().ok().and_then(|m| m.get(key).cloned())
}

/// Remembers `value` for `key`; a map at [`MEMORY_ENTRIES`] starts again (what it held is read
/// again when asked for).
fn remember<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    if let Ok(mut m) = map.lock() {
        if m.len() >= MEMORY_ENTRIES {
            m.clear();
        }
        m.insert(key, value);
    }
}

/// The most metadata copies a process keeps in memory (see `FetchRequest::from_memory`).
const MEMORY_ENTRIES: usize = 10_000;
/// The longest a copy is answered from memory, whatever the TTL: the blob of a copy another
/// replica replaced is kept for `worker.blob_grace_secs` (a day by default), far longer.
const MEMORY_MAX_AGE_MS: i64 = 3_600_000;

struct InflightGuard {
    proxy: Proxy,
    key: (i64, String),
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if let Ok(mut m) = self.proxy.inner.inflight.lock() {
            m.remove(&self.key);
        }
    }
}

struct Inner {
    /// The guarded client: the address policy, the outbound proxy, extra CAs, redirects.
    outbound: Outbound,
    timeouts: Timeouts,
    max_negative_entries: u64,
    /// Misses remembered by this process since it last trimmed them.
    negatives_since_trim: std::sync::atomic::AtomicU64,
    max_object_bytes: u64,
    permits: tokio::sync::Semaphore,
    inflight: Mutex<HashMap<(i64, String), SharedFetch>>,
    /// Fresh metadata of requests `from_memory`, by repository and path, with the upstream it
    /// came from (a copy from before a change of `remote_url` is not used).
    memory: Mutex<HashMap<(i64, String), (String, ProxyEntry)>>,
    /// The expiry each cached copy's bytes carry ([`FetchRequest::expires`]), by its SHA-256.
    expiries: Mutex<HashMap<String, Option<i64>>>,
    /// What a cached index root lists for a file ([`ListedIn::expected`]), by the root's SHA-256
    /// and the file's path: read once, not on every request for the file.
    listings: Mutex<HashMap<(String, String), Listing>>,
    db: Db,
    blobs: Arc<dyn BlobStore>,
    metrics: Arc<Metrics>,
    /// Opens sealed upstream passwords.
    keystore: Option<Arc<crate::security::keystore::KeyStore>>,
}

/// The configured limits, named in the messages of the fetches that hit them.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    connect_ms: u64,
    read_ms: u64,
    deadline_ms: u64,
}

/// The upstream fetcher of one process; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

fn internal(e: impl std::fmt::Display) -> ProxyError {
    ProxyError::Internal(e.to_string())
}

/// The database or the blob store failed on the proxy path: logged with its cause, answered 503.
fn unavailable(e: impl std::fmt::Display) -> ProxyError {
    tracing::error!(error = %e, "proxy cache storage unavailable");
    ProxyError::Unavailable("the proxy cache's storage (database or blob store) is unavailable; retry later".into())
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

impl Proxy {
    /// From the configuration and the process's environment (`HTTPS_PROXY` and the like).
    pub fn new(config: &ProxyConfig, db: Db, blobs: Arc<dyn BlobStore>, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        Self::with_env(config, db, blobs, metrics, |name| std::env::var(name).ok())
    }

    pub fn with_env(
        config: &ProxyConfig,
        db: Db,
        blobs: Arc<dyn BlobStore>,
        metrics: Arc<Metrics>,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let outbound = Outbound::new(Settings {
            policy: config.address_policy().map_err(anyhow::Error::msg)?,
            whom: "upstream host",
            show_addresses: true,
            remedy: "proxy.allowed_networks (e.g. [\"10.0.0.0/8\"]) or proxy.allow_private_addresses = true",
            outbound: config.outbound(env).map_err(anyhow::Error::msg)?,
            ca_certificates: &config.ca_certificates,
            user_agent: concat!("Packyard/", env!("CARGO_PKG_VERSION")),
            connect_timeout: Duration::from_millis(config.connect_timeout_ms),
            read_timeout: Some(Duration::from_millis(config.read_timeout_ms)),
            timeout: Duration::from_millis(config.fetch_deadline_ms),
            max_idle_per_host: config.max_idle_per_host,
            follow_redirects: true,
        })?;
        if outbound.outbound().is_configured() {
            tracing::info!(proxy = %outbound.outbound().source, "upstream fetches go through an outbound proxy");
        }
        let timeouts = Timeouts {
            connect_ms: config.connect_timeout_ms,
            read_ms: config.read_timeout_ms,
            deadline_ms: config.fetch_deadline_ms,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                outbound,
                timeouts,
                max_negative_entries: config.max_negative_entries,
                negatives_since_trim: std::sync::atomic::AtomicU64::new(0),
                max_object_bytes: config.max_object_bytes,
                permits: tokio::sync::Semaphore::new(config.max_concurrent_fetches.max(1)),
                inflight: Mutex::new(HashMap::new()),
                memory: Mutex::new(HashMap::new()),
                expiries: Mutex::new(HashMap::new()),
                listings: Mutex::new(HashMap::new()),
                db,
                blobs,
                metrics,
                keystore: None,
            }),
        })
    }

    /// The key store that opens sealed upstream passwords (set once, before use).
    pub fn with_keystore(mut self, keystore: Arc<crate::security::keystore::KeyStore>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.keystore = Some(keystore);
        }
        self
    }

    /// The cached answer for `req.path` if it is fresh, else the upstream's (one request per
    /// path in flight), else the stale copy if the upstream fails. Boxed: its state is large,
    /// and a request that never goes to a proxy should not carry it (a route's future is moved
    /// into a box on every request).
    pub fn fetch(&self, req: FetchRequest) -> futures_util::future::BoxFuture<'_, Result<Outcome, ProxyError>> {
        Box::pin(async move {
            match req.listed_in.clone() {
                None => self.fetch_unboxed(req).await,
                Some(listed) => {
                    let outcome = self.fetch_unboxed(req.clone()).await?;
                    self.as_listed(&req, &listed, outcome).await
                }
            }
        })
    }

    /// `outcome` for a file its index root lists: as it is when it has the bytes the cached root
    /// names; else those bytes — kept here from an earlier fetch, or by hash from the upstream —;
    /// else (the upstream moved on and no longer has them) a 503 that asks the client to retry,
    /// with the root made stale so that the retry reads the new generation.
    async fn as_listed(&self, req: &FetchRequest, listed: &ListedIn, outcome: Outcome) -> Result<Outcome, ProxyError> {
        let Outcome::Found(entry, state) = outcome else { return Ok(outcome) };
        let root = self.inner.db.proxy_entry(req.repository_id, &listed.root).await.map_err(unavailable)?;
        let Some(root_sha) = root.as_ref().and_then(|r| r.sha256.clone()) else {
            return Ok(Outcome::Found(entry, state));
        };
        let key = (root_sha, req.path.clone());
        let listing = match recall(&self.inner.listings, &key) {
            Some(listing) => listing,
            None => {
                let digest = Sha256Hex::parse(&key.0).map_err(internal)?;
                let Ok(root_bytes) = self.inner.blobs.read_all(&digest).await else {
                    return Ok(Outcome::Found(entry, state));
                };
                let listing = (listed.expected)(&root_bytes, &req.path);
                remember(&self.inner.listings, key, listing.clone());
                listing
            }
        };
        let Some((expected, by_hash)) = listing else {
            return Ok(Outcome::Found(entry, state));
        };
        if expected.len() != 64 || !expected.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Ok(Outcome::Found(entry, state));
        }
        let matches = |e: &ProxyEntry| e.sha256.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(&expected));
        if matches(&entry) {
            return Ok(Outcome::Found(entry, state));
        }
        // The cached copy may be the stale side (fetched before the root moved on): ask again.
        let (entry, state) = if state == CacheState::Hit {
            self.inner.db.expire_proxy_entries(req.repository_id, &req.path, "").await.map_err(unavailable)?;
            match self.fetch_unboxed(req.clone()).await? {
                Outcome::Found(e, s) if matches(&e) => return Ok(Outcome::Found(e, s)),
                Outcome::Found(e, s) => (e, s),
                missing => return Ok(missing),
            }
        } else {
            (entry, state)
        };
        // The bytes the root names, as this repository's cache holds them under another path
        // (never another repository's: an upstream may not name them into this one).
        let other = |e: ProxyEntry| ProxyEntry {
            upstream_etag: None,
            upstream_last_modified: None,
            content_type: entry.content_type.clone(),
            ..e
        };
        if let Some(kept) =
            self.inner.db.proxy_entry_with_sha(req.repository_id, &expected).await.map_err(unavailable)?
        {
            tracing::debug!(repository = %req.repository, path = %req.path, "serving the copy the cached index root lists");
            return Ok(Outcome::Found(ProxyEntry { path: entry.path.clone(), ..other(kept) }, state));
        }
        if let Some(path) = by_hash {
            let mut by = req.clone();
            by.path = path;
            by.freshness = Freshness::Immutable;
            by.expect_sha256 = Some(expected.clone());
            by.listed_in = None;
            by.catalogue = None;
            if let Ok(Outcome::Found(e, s)) = self.fetch_unboxed(by).await {
                return Ok(Outcome::Found(ProxyEntry { path: entry.path.clone(), ..other(e) }, s));
            }
        }
        for stale in [listed.root.as_str(), req.path.as_str()] {
            self.inner.db.expire_proxy_entries(req.repository_id, stale, "").await.map_err(unavailable)?;
        }
        if let Ok(mut m) = self.inner.memory.lock() {
            m.remove(&(req.repository_id, listed.root.clone()));
        }
        tracing::warn!(repository = %req.repository, path = %req.path, "the upstream changed this index after its root was served; asking the client to retry");
        Err(ProxyError::Changing(format!(
            "the upstream changed /{} after the index that lists it was fetched, and no longer has the listed copy: retry (the next attempt reads the new generation)",
            req.path
        )))
    }

    /// Whether a cached copy is past the expiry its bytes carry ([`FetchRequest::expires`]);
    /// each copy's expiry is read once and remembered by its digest.
    async fn expired(&self, req: &FetchRequest, e: &ProxyEntry) -> bool {
        let (Some(read), Some(sha)) = (req.expires, e.sha256.as_deref()) else { return false };
        let until = match recall(&self.inner.expiries, sha) {
            Some(u) => u,
            None => {
                let Ok(digest) = Sha256Hex::parse(sha) else { return false };
                let Ok(bytes) = self.inner.blobs.read_all(&digest).await else { return false };
                let until = read(&bytes);
                remember(&self.inner.expiries, sha.to_string(), until);
                until
            }
        };
        until.is_some_and(|u| u <= now_ms())
    }

    async fn fetch_unboxed(&self, req: FetchRequest) -> Result<Outcome, ProxyError> {
        let key = (req.repository_id, req.path.clone());
        let remember = req.from_memory && req.freshness == Freshness::Metadata;
        if remember {
            let now = now_ms();
            let usable =
                |e: &ProxyEntry| is_fresh(e, &req, now) && now.saturating_sub(e.fetched_at) < MEMORY_MAX_AGE_MS;
            if let Some(e) = self.remembered(&key, &req.settings.remote_url).filter(usable) {
                self.count_cache("hit");
                return Ok(answer(e, CacheState::Hit));
            }
        }
        let cached = self.inner.db.proxy_entry(req.repository_id, &req.path).await.map_err(unavailable)?;
        if let Some(e) = &cached {
            if is_fresh(e, &req, now_ms()) && !self.expired(&req, e).await {
                self.count_cache("hit");
                if remember {
                    self.remember(&key, &req.settings.remote_url, Some(e));
                }
                return Ok(answer(e.clone(), CacheState::Hit));
            }
        }
        self.count_cache("miss");
        let remote_url = req.settings.remote_url.clone();
        let outcome = self.fetch_upstream(key.clone(), req, cached).await;
        if remember {
            match &outcome {
                Ok(Outcome::Found(e, CacheState::Miss | CacheState::Revalidated)) => {
                    self.remember(&key, &remote_url, Some(e));
                }
                // A stale copy is not fresh; a miss is not remembered for metadata.
                _ => self.remember(&key, &remote_url, None),
            }
        }
        outcome
    }

    /// The copy of `key` fetched from `remote_url` this process keeps in memory, if any.
    fn remembered(&self, key: &(i64, String), remote_url: &str) -> Option<ProxyEntry> {
        let m = self.inner.memory.lock().ok()?;
        m.get(key).filter(|(from, _)| from == remote_url).map(|(_, e)| e.clone())
    }

    /// Keeps (or, with `None`, drops) the copy of `key` in memory; bounded against many paths.
    fn remember(&self, key: &(i64, String), remote_url: &str, entry: Option<&ProxyEntry>) {
        let Ok(mut m) = self.inner.memory.lock() else { return };
        match entry.filter(|e| !e.is_negative()) {
            Some(e) => {
                if m.len() >= MEMORY_ENTRIES && !m.contains_key(key) {
                    m.clear();
                }
                m.insert(key.clone(), (remote_url.to_string(), e.clone()));
            }
            None => {
                m.remove(key);
            }
        }
    }

    /// One upstream request per path in flight in this process (single-flight).
    async fn fetch_upstream(
        &self,
        key: (i64, String),
        req: FetchRequest,
        cached: Option<ProxyEntry>,
    ) -> Result<Outcome, ProxyError> {
        // A fetch from another upstream (the repository's remote_url changed meanwhile) is
        // another fetch: joined only by requests for the same upstream.
        let key = (key.0, format!("{}\n{}", req.settings.remote_url, key.1));
        let shared = {
            let mut inflight = self.inner.inflight.lock().map_err(|_| internal("proxy in-flight map poisoned"))?;
            match inflight.get(&key) {
                Some(f) => f.clone(),
                None => {
                    let this = self.clone();
                    let k = key.clone();
                    let task = tokio::spawn(async move {
                        // Removed however the fetch ends (also a panic or a cancelled task), so a
                        // failed fetch is never answered again from the map.
                        let _guard = InflightGuard { proxy: this.clone(), key: k };
                        this.refresh(req, cached).await
                    });
                    let f: SharedFetch =
                        async move { task.await.unwrap_or_else(|e| Err(internal(format!("proxy fetch task: {e}")))) }
                            .boxed()
                            .shared();
                    inflight.insert(key, f.clone());
                    f
                }
            }
        };
        shared.await
    }

    fn count_cache(&self, result: &str) {
        self.inner.metrics.cache_requests_total.with_label_values(&["proxy", result]).inc();
    }

    fn count_upstream(&self, repository: &str, result: &str) {
        self.inner.metrics.proxy_upstream_requests_total.with_label_values(&[repository, result]).inc();
    }

    /// Asks the upstream (conditionally when a copy is cached) and records the answer.
    async fn refresh(&self, req: FetchRequest, cached: Option<ProxyEntry>) -> Result<Outcome, ProxyError> {
        let stale = cached.filter(|e| !e.is_negative());
        let url = match &req.elsewhere {
            Some(e) => upstream_url(&e.base_url, &e.path)?,
            None => upstream_url(&req.settings.remote_url, &req.path)?,
        };
        if let Err(b) = self.inner.outbound.preflight(&url).await {
            self.count_upstream(&req.repository, "blocked");
            return Err(ProxyError::Blocked(b.0));
        }
        let via = self.inner.outbound.via(&url).cloned();
        let _permit = self.inner.permits.acquire().await.map_err(internal)?;
        let mut request = self.inner.outbound.client().get(url.clone());
        let credentials = if req.elsewhere.is_none() { req.settings.username.as_ref() } else { None };
        if let Some(user) = credentials {
            let password = match (&req.settings.password_sealed, &self.inner.keystore) {
                (Some((nonce, ct)), Some(ks)) => {
                    let bytes = ks
                        .open(&packyard_model::repos::ProxySettings::password_key(&req.repository), nonce, ct)
                        .map_err(|e| internal(format!("the upstream password of {}: {e}", req.repository)))?;
                    Some(String::from_utf8_lossy(&bytes).into_owned())
                }
                _ => None,
            };
            request = request.basic_auth(user, password);
        }
        if let (Freshness::Metadata, Some(s)) = (req.freshness, &stale) {
            if let Some(etag) = &s.upstream_etag {
                request = request.header(header::IF_NONE_MATCH, etag);
            }
            if let Some(lm) = &s.upstream_last_modified {
                request = request.header(header::IF_MODIFIED_SINCE, lm);
            }
        }
        let started = std::time::Instant::now();
        let again = request.try_clone();
        let mut sent = request.send().await;
        // A pooled connection the upstream closed while idle (its keep-alive ran out just as
        // we reused it) fails a request that never reached it: a GET is asked once more, on
        // a new connection. Timeouts and refused connections are not retried.
        if let (Err(e), Some(again)) = (&sent, again) {
            if is_stale_connection(e) {
                tracing::debug!(url = %redact(&url), error = %root_cause(e), "upstream connection was closed; asking again");
                sent = again.send().await;
            }
        }
        self.inner
            .metrics
            .proxy_upstream_duration_seconds
            .with_label_values(&[req.repository.as_str()])
            .observe(started.elapsed().as_secs_f64());
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                let err = classify(&e, &url, &Attempt { via: via.as_ref(), started, timeouts: self.inner.timeouts });
                tracing::warn!(repository = %req.repository, path = %req.path, error = %err, "upstream fetch failed");
                self.count_upstream(&req.repository, error_label(&err));
                return self.fall_back(&req, stale, err);
            }
        };
        let status = response.status().as_u16();
        match status {
            200 => match self
                .store(
                    &req,
                    response,
                    stale.as_ref(),
                    &Attempt { via: via.as_ref(), started, timeouts: self.inner.timeouts },
                )
                .await
            {
                Ok(entry) => {
                    self.count_upstream(&req.repository, "ok");
                    Ok(Outcome::Found(entry, CacheState::Miss))
                }
                Err(e @ (ProxyError::Internal(_) | ProxyError::Unavailable(_))) => Err(e),
                Err(e) => {
                    self.count_upstream(&req.repository, error_label(&e));
                    self.fall_back(&req, stale, e)
                }
            },
            304 if stale.is_some() => {
                self.count_upstream(&req.repository, "not_modified");
                let mut entry = stale.ok_or_else(|| internal("stale entry vanished"))?;
                entry.fetched_at = now_ms();
                self.inner
                    .db
                    .touch_proxy_entry(req.repository_id, &req.path, entry.fetched_at)
                    .await
                    .map_err(unavailable)?;
                Ok(Outcome::Found(entry, CacheState::Revalidated))
            }
            s if req.negative_statuses.contains(&s) && req.freshness == Freshness::Metadata => {
                // Metadata that is not there now (a package's `latest` before its upload, a
                // module's list before its first version) may be there at the next request:
                // never remembered, and a copy from before is dropped.
                self.count_upstream(&req.repository, "not_found");
                if stale.is_some() {
                    self.inner.db.delete_proxy_entry(req.repository_id, &req.path).await.map_err(unavailable)?;
                }
                Ok(Outcome::Missing(s, CacheState::Miss))
            }
            s if req.negative_statuses.contains(&s) => {
                self.count_upstream(&req.repository, "not_found");
                if req.catalogue.is_some() && stale.as_ref().is_some_and(|e| !e.is_negative()) {
                    self.inner.db.catalogue_forget_path(req.repository_id, &req.path).await.map_err(unavailable)?;
                }
                let entry = ProxyEntry {
                    repository_id: req.repository_id,
                    path: req.path.clone(),
                    status: i32::from(s),
                    sha256: None,
                    size: 0,
                    content_type: String::new(),
                    upstream_etag: None,
                    upstream_last_modified: None,
                    fetched_at: now_ms(),
                };
                self.inner.db.put_proxy_entry(&entry).await.map_err(unavailable)?;
                self.trim_negatives(req.repository_id).await;
                Ok(Outcome::Missing(s, CacheState::Miss))
            }
            s => {
                self.count_upstream(&req.repository, "error");
                let message = format!("upstream {} answered {s} for /{}", redact(&url), req.path);
                let err = if s >= 500 { ProxyError::Failing(message) } else { ProxyError::Status(message) };
                self.fall_back(&req, stale, err)
            }
        }
    }

    /// Keeps about `proxy.max_negative_entries` remembered misses per repository: every so many
    /// new ones (a sixteenth of the bound, at most 256) this process deletes the oldest beyond it.
    async fn trim_negatives(&self, repository_id: i64) {
        let max = self.inner.max_negative_entries;
        let every = (max / 16).clamp(1, 256);
        let n = self.inner.negatives_since_trim.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if !n.is_multiple_of(every) {
            return;
        }
        match self.inner.db.trim_negative_proxy_entries(repository_id, max).await {
            Ok(0) => {}
            Ok(gone) => tracing::debug!(repository_id, gone, "forgot the oldest remembered upstream misses"),
            Err(e) => tracing::warn!(repository_id, error = %e, "cannot trim the remembered upstream misses"),
        }
    }

    /// Stale-if-error: the cached copy when there is one, else the error.
    fn fall_back(&self, req: &FetchRequest, stale: Option<ProxyEntry>, err: ProxyError) -> Result<Outcome, ProxyError> {
        match stale {
            Some(entry) if !matches!(err, ProxyError::Blocked(_)) => {
                tracing::warn!(repository = %req.repository, path = %req.path, error = %err, "upstream failed; serving the cached copy");
                self.inner.metrics.proxy_stale_served_total.with_label_values(&[&req.repository]).inc();
                Ok(Outcome::Found(entry, CacheState::Stale))
            }
            _ => Err(err),
        }
    }

    /// Streams a 200 body into the blob store and records it.
    async fn store(
        &self,
        req: &FetchRequest,
        mut response: reqwest::Response,
        previous: Option<&ProxyEntry>,
        attempt: &Attempt<'_>,
    ) -> Result<ProxyEntry, ProxyError> {
        let max = self.inner.max_object_bytes;
        let too_large = || {
            ProxyError::TooLarge(format!(
                "upstream file /{} is larger than proxy.max_object_bytes ({max} bytes)",
                req.path
            ))
        };
        if response.content_length().is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let header_text = |name: header::HeaderName, cap: usize| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).filter(|v| v.len() <= cap).map(str::to_string)
        };
        let content_type = header_text(header::CONTENT_TYPE, 255).unwrap_or_else(|| "application/octet-stream".into());
        let etag = header_text(header::ETAG, 255);
        let last_modified = header_text(header::LAST_MODIFIED, 64);
        let mut writer = self.inner.blobs.writer(max).await.map_err(unavailable)?;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if writer.written() + chunk.len() as u64 > max {
                        return Err(too_large());
                    }
                    writer.write_bytes(chunk).await.map_err(unavailable)?;
                }
                Ok(None) => break,
                Err(e) => {
                    let url = response.url().clone();
                    let err = classify(&e, &url, attempt);
                    tracing::warn!(repository = %req.repository, path = %req.path, error = %err, "upstream fetch failed");
                    return Err(err);
                }
            }
        }
        let stored = writer.finish().await.map_err(unavailable)?;
        if let Some(want) = &req.expect_sha256 {
            if !stored.sha256.as_str().eq_ignore_ascii_case(want) {
                // Not recorded: the blob stays unreferenced, the path is asked again next time.
                return Err(ProxyError::Status(format!(
                    "the upstream served /{} with SHA-256 {} instead of {want}",
                    req.path, stored.sha256
                )));
            }
        }
        self.inner.db.record_blob(&stored.sha256, stored.size).await.map_err(unavailable)?;
        // Recording the row waited for a collector that held it: the bytes may have gone.
        if self.inner.blobs.stat(&stored.sha256).await.map_err(unavailable)?.is_none() {
            return Err(ProxyError::Unavailable(format!(
                "the bytes fetched for /{} were removed by the blob collector at the same instant; retry",
                req.path
            )));
        }
        let entry = ProxyEntry {
            repository_id: req.repository_id,
            path: req.path.clone(),
            status: 200,
            sha256: Some(stored.sha256.to_string()),
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
            content_type,
            upstream_etag: etag,
            upstream_last_modified: last_modified,
            fetched_at: now_ms(),
        };
        self.inner.db.put_proxy_entry(&entry).await.map_err(unavailable)?;
        if let Some(component) = &req.catalogue {
            let asset = NewAsset {
                path: req.path.clone(),
                sha256: stored.sha256.to_string(),
                sha1: None,
                md5: None,
                size: entry.size,
                content_type: entry.content_type.clone(),
            };
            let catalogued = Entry { component: component.clone(), assets: vec![asset] };
            self.inner
                .db
                .catalogue_put_cached(req.repository_id, req.format, &catalogued)
                .await
                .map_err(unavailable)?;
        }
        let changed = previous.and_then(|p| p.sha256.as_deref()) != entry.sha256.as_deref();
        if let (true, Some(prefix)) = (changed, &req.on_change_expire) {
            self.inner.db.expire_proxy_entries(req.repository_id, prefix, &req.path).await.map_err(unavailable)?;
            if let Ok(mut m) = self.inner.memory.lock() {
                m.retain(|(repo, path), _| *repo != req.repository_id || !path.starts_with(prefix.as_str()));
            }
        }
        Ok(entry)
    }
}

fn is_fresh(e: &ProxyEntry, req: &FetchRequest, now: i64) -> bool {
    let age = now.saturating_sub(e.fetched_at);
    let secs = |s: u64| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
    if e.is_negative() {
        age < secs(req.settings.negative_ttl_secs)
    } else {
        match req.freshness {
            Freshness::Immutable => true,
            Freshness::Metadata => age < secs(req.settings.metadata_ttl_secs),
        }
    }
}

fn answer(e: ProxyEntry, state: CacheState) -> Outcome {
    if e.is_negative() {
        Outcome::Missing(u16::try_from(e.status).unwrap_or(404), state)
    } else {
        Outcome::Found(e, state)
    }
}

/// The URL without credentials or query, for messages and logs.
fn redact(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// One upstream request, for naming why it failed.
struct Attempt<'a> {
    /// The outbound proxy it went through, if any.
    via: Option<&'a reqwest::Url>,
    started: std::time::Instant,
    timeouts: Timeouts,
}

/// Why an upstream request failed, as an operator can act on it: the name did not resolve, the
/// connection was refused or found no route, a timeout (which one), the TLS handshake, or the
/// outbound proxy; the same text goes to the client's 502/504 and to the log.
fn classify(e: &reqwest::Error, url: &reqwest::Url, attempt: &Attempt<'_>) -> ProxyError {
    use crate::outbound::Cause;
    let base = redact(url);
    let through = attempt.via.map(|p| format!(" (through the outbound proxy {})", redact(p))).unwrap_or_default();
    let t = attempt.timeouts;
    match crate::outbound::cause(e) {
        Cause::Blocked(b) => ProxyError::Blocked(b.0.clone()),
        Cause::Dns(d) => {
            let whose = if attempt.via.is_some_and(|p| p.host_str() == Some(d.host.as_str())) {
                "the outbound proxy's host"
            } else {
                "upstream host"
            };
            ProxyError::Unreachable(format!("DNS: cannot resolve {whose} {} ({})", d.host, d.cause))
        }
        Cause::Tls(tls) => {
            let hint = match tls {
                rustls::Error::InvalidCertificate(_) => {
                    "; if it is signed by a private certificate authority, add that CA to proxy.ca_certificates"
                }
                _ => "",
            };
            ProxyError::Unreachable(format!("TLS: the handshake with upstream {base} failed{through}: {tls}{hint}"))
        }
        Cause::Connection(kind) => {
            use std::io::ErrorKind;
            let what = match kind {
                ErrorKind::ConnectionRefused => "refused the connection",
                ErrorKind::ConnectionReset => "reset the connection",
                _ => "is unreachable (no route)",
            };
            let who = match attempt.via {
                Some(p) if e.is_connect() => format!("the outbound proxy {} (for upstream {base})", redact(p)),
                _ => format!("upstream {base}"),
            };
            ProxyError::Unreachable(format!("connection: {who} {what}"))
        }
        Cause::ConnectTimeout => ProxyError::Timeout(format!(
            "timeout: no connection to upstream {base}{through} within proxy.connect_timeout_ms ({} ms)",
            t.connect_ms
        )),
        Cause::Timeout => {
            let elapsed = u64::try_from(attempt.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            ProxyError::Timeout(if elapsed + 50 >= t.deadline_ms {
                format!(
                    "timeout: the fetch from upstream {base}{through} took longer than proxy.fetch_deadline_ms ({} ms)",
                    t.deadline_ms
                )
            } else {
                format!("timeout: upstream {base}{through} sent nothing for proxy.read_timeout_ms ({} ms)", t.read_ms)
            })
        }
        Cause::Connect => ProxyError::Unreachable(format!(
            "connection: cannot connect to upstream {base}{through}: {}",
            root_cause(e)
        )),
        Cause::Other => ProxyError::Unreachable(format!("upstream {base} failed{through}: {}", root_cause(e))),
    }
}

/// A request that failed on the connection rather than in the upstream's answer: neither a
/// timeout nor a failed connect, and no status came back.
fn is_stale_connection(e: &reqwest::Error) -> bool {
    !e.is_timeout() && !e.is_connect() && e.status().is_none() && (e.is_request() || e.is_body())
}

fn error_label(e: &ProxyError) -> &'static str {
    match e {
        ProxyError::Blocked(_) => "blocked",
        ProxyError::Timeout(_) => "timeout",
        ProxyError::TooLarge(_) => "too_large",
        ProxyError::Changing(_) => "changing",
        ProxyError::Unreachable(_)
        | ProxyError::Status(_)
        | ProxyError::Failing(_)
        | ProxyError::Unavailable(_)
        | ProxyError::Internal(_) => "error",
    }
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
