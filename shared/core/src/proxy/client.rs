//! The upstream fetcher of one process: the guarded client, the limits, the caches in memory,
//! and the fetch itself (cache, revalidation, stale-if-error, single flight).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::FutureExt;
use reqwest::header;

use crate::outbound::{root_cause, Outbound, Settings};
use packyard_model::config::ProxyConfig;
use packyard_store::blobs::{BlobStore, Sha256Hex};
use packyard_store::db::catalogue::{Entry, NewAsset};
use packyard_store::db::proxy::ProxyEntry;
use packyard_store::db::{now_ms, Db};
use packyard_store::metrics::Metrics;

use super::*;

pub(super) struct Inner {
    /// The guarded client: the address policy, the outbound proxy, extra CAs, redirects.
    pub(super) outbound: Outbound,
    pub(super) timeouts: Timeouts,
    pub(super) max_negative_entries: u64,
    /// Per proxy repository: misses remembered by this process since it last trimmed them.
    pub(super) negatives_since_trim: std::sync::Mutex<HashMap<i64, u64>>,
    pub(super) max_object_bytes: u64,
    pub(super) permits: tokio::sync::Semaphore,
    pub(super) inflight: Mutex<HashMap<(i64, String), SharedFetch>>,
    /// Fresh metadata of requests `from_memory`, by repository and path, with the upstream it
    /// came from (a copy from before a change of `remote_url` is not used).
    pub(super) memory: Mutex<HashMap<(i64, String), (String, ProxyEntry)>>,
    /// The expiry each cached copy's bytes carry ([`FetchRequest::expires`]), by its SHA-256.
    pub(super) expiries: Mutex<HashMap<String, Option<i64>>>,
    /// What a cached index root lists for a file ([`ListedIn::expected`]), by the root's SHA-256
    /// and the file's path: read once, not on every request for the file.
    pub(super) listings: Mutex<HashMap<(String, String), Listing>>,
    pub(super) db: Db,
    pub(super) blobs: Arc<dyn BlobStore>,
    pub(super) metrics: Arc<Metrics>,
    /// Opens sealed upstream passwords.
    pub(super) keystore: Option<Arc<crate::security::keystore::KeyStore>>,
    /// The blob store's quota (`blobs.quota.*`): at its hard limit no artifact is cached.
    pub(super) store_quota: Option<packyard_model::quota::Quota>,
}

/// The upstream fetcher of one process; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    pub(super) inner: Arc<Inner>,
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
                negatives_since_trim: std::sync::Mutex::new(HashMap::new()),
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
                store_quota: None,
            }),
        })
    }

    /// The blob store's quota, checked before an artifact is cached (set once, before use).
    pub fn with_store_quota(mut self, quota: packyard_model::quota::Quota) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.store_quota = quota.is_set().then_some(quota);
        }
        self
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
        let (entry, state) = if state == CacheState::Hit && !req.settings.offline {
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
        // Offline, no retry can read another generation: the listed bytes are not here.
        if req.settings.offline {
            return Ok(Outcome::Missing(404, CacheState::Miss));
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
        if req.settings.offline {
            return Ok(self.offline(&req, cached));
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

    /// A proxy taken offline (`proxy.offline`) asks its upstream nothing: a copy it cached is
    /// served however old (counted as stale), the rest is not there.
    fn offline(&self, req: &FetchRequest, cached: Option<ProxyEntry>) -> Outcome {
        match cached {
            Some(e) if !e.is_negative() => {
                self.count_cache("hit");
                self.inner.metrics.proxy_stale_served_total.with_label_values(&[&req.repository]).inc();
                Outcome::Found(e, CacheState::Stale)
            }
            Some(e) => answer(e, CacheState::Hit),
            None => {
                self.count_cache("miss");
                self.inner.metrics.proxy_offline_misses_total.with_label_values(&[&req.repository]).inc();
                tracing::info!(repository = %req.repository, path = %req.path,
                    "proxy is offline (proxy.offline): not cached, not asked of the upstream");
                Outcome::Missing(404, CacheState::Miss)
            }
        }
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
                return self.fall_back(&req, stale, err).await;
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
                    self.fall_back(&req, stale, e).await
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
                self.fall_back(&req, stale, err).await
            }
        }
    }

    /// Keeps about `proxy.max_negative_entries` remembered misses per repository: every so many
    /// new ones of a repository (a sixteenth of the bound, at most 256) this process deletes its
    /// oldest beyond it. Counted per repository: with one count for all, a repository whose
    /// misses never fell on the multiple was never trimmed.
    async fn trim_negatives(&self, repository_id: i64) {
        let max = self.inner.max_negative_entries;
        let every = (max / 16).clamp(1, 256);
        let due = {
            let mut counts = self.inner.negatives_since_trim.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = counts.entry(repository_id).or_insert(0);
            *n += 1;
            if *n >= every {
                *n = 0;
                true
            } else {
                false
            }
        };
        if !due {
            return;
        }
        match self.inner.db.trim_negative_proxy_entries(repository_id, max).await {
            Ok(0) => {}
            Ok(gone) => tracing::debug!(repository_id, gone, "forgot the oldest remembered upstream misses"),
            Err(e) => tracing::warn!(repository_id, error = %e, "cannot trim the remembered upstream misses"),
        }
    }

    /// Stale-if-error: the cached copy when there is one — no older than `proxy.max_stale_secs`
    /// and, for an index with an expiry (APT's `Valid-Until`), not past it —, else the error.
    async fn fall_back(
        &self,
        req: &FetchRequest,
        stale: Option<ProxyEntry>,
        err: ProxyError,
    ) -> Result<Outcome, ProxyError> {
        // How long past its freshness (`metadata_ttl_secs`) the copy is; an entry marked for
        // revalidation (its time set to 0 when its index root moved on) has no known age.
        let ms = |s: u64| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
        let past = |e: &ProxyEntry| {
            (e.fetched_at > 0).then(|| now_ms().saturating_sub(e.fetched_at) - ms(req.settings.metadata_ttl_secs))
        };
        let limit = req.settings.max_stale_secs.map(ms);
        let stale = match stale {
            Some(e) if limit.is_some_and(|l| past(&e).is_some_and(|p| p > l)) => {
                tracing::warn!(repository = %req.repository, path = %req.path,
                    past_freshness_secs = past(&e).unwrap_or_default() / 1000,
                    "upstream failed; the cached copy is stale for longer than proxy.max_stale_secs, not served");
                None
            }
            Some(e) if self.expired(req, &e).await => {
                tracing::warn!(repository = %req.repository, path = %req.path,
                    "upstream failed; the cached copy is past its Valid-Until, not served");
                None
            }
            other => other,
        };
        match stale {
            Some(entry) if !matches!(err, ProxyError::Blocked(_)) => {
                tracing::warn!(repository = %req.repository, path = %req.path, error = %err, "upstream failed; serving the cached copy");
                self.inner.metrics.proxy_stale_served_total.with_label_values(&[&req.repository]).inc();
                Ok(Outcome::Found(entry, CacheState::Stale))
            }
            _ => Err(err),
        }
    }

    /// Refuses to cache an artifact (a component's file) that would take the repository past its
    /// hard quota (`length`: what the upstream says the file holds, when it does); metadata is
    /// never refused, and neither is a file of unknown length while the use is below the limit.
    async fn check_quota(&self, req: &FetchRequest, length: Option<u64>) -> Result<(), ProxyError> {
        use crate::quota::Scope;
        if req.catalogue.is_none() {
            return Ok(());
        }
        let full = |quota: &packyard_model::quota::Quota, (what, key): (&str, &str), used: u64| {
            let after = used.saturating_add(length.unwrap_or(0));
            (quota.refuses(used, after) || quota.hard_bytes.is_some_and(|h| used >= h)).then(|| {
                ProxyError::Full(format!(
                    "/{} is not fetched: {}",
                    req.path,
                    quota.refusal(what, key, used, after.max(used.saturating_add(1)))
                ))
            })
        };
        if let Some(quota) = req.quota.filter(|q| q.hard_bytes.is_some()) {
            let used = self.inner.db.repository_bytes(req.repository_id).await.map_err(unavailable)?;
            if let Some(e) = full(&quota, (&Scope::Repository.named(&req.repository), "quota"), used) {
                return Err(e);
            }
        }
        if let Some(quota) = self.inner.store_quota.filter(|q| q.hard_bytes.is_some()) {
            let used = self.inner.db.blob_store_bytes().await.map_err(unavailable)?;
            let what = Scope::BlobStore.named(crate::quota::BLOB_STORE);
            if let Some(e) = full(&quota, (&what, "blobs.quota"), u64::try_from(used).unwrap_or(0)) {
                return Err(e);
            }
        }
        Ok(())
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
        self.check_quota(req, response.content_length()).await?;
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
