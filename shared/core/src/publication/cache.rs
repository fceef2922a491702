//! Replicas' node-local view of published snapshots: which snapshot is current per unit
//! (dropped when the `publications` watermark moves) and the bytes of snapshot files (keyed by
//! the immutable snapshot id and path, bounded in total size). A warmed read makes no query.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::HeaderValue;

use packyard_store::blobs::BlobStore;
use packyard_store::db::publication::SnapshotFile;
use packyard_store::db::{Db, DbError};
use packyard_store::metrics::Metrics;

/// A published snapshot's file list.
#[derive(Debug)]
pub struct Manifest {
    pub snapshot_id: i64,
    pub revision: i64,
    /// The `Last-Modified` of its files (ms, a whole second no earlier snapshot of the unit
    /// had: `UnitRecord::modified_at`).
    pub published_at: Option<i64>,
    /// From when a copy's date tells this snapshot from every earlier one (see
    /// [`ServedFile::settled`]).
    pub settled_at: Option<i64>,
    pub files: hashbrown::HashMap<String, SnapshotFile>,
}

/// A file ready to serve: bytes plus what the headers need, each made once (a clone copies no
/// text).
#[derive(Debug, Clone)]
pub struct ServedFile {
    pub bytes: Bytes,
    /// Milliseconds since the epoch, for `Last-Modified` (see [`Manifest::published_at`]); not
    /// sent when unknown.
    pub modified: Option<i64>,
    /// `modified` as an HTTP date (`Wed, 02 Dec 2026 04:09:27 GMT`), whole seconds.
    pub last_modified: Option<HeaderValue>,
    pub content_type: HeaderValue,
    /// Strong ETag: the content hash, quoted (`None`: none).
    pub etag: Option<HeaderValue>,
    /// The earliest date (ms, a whole second) no earlier snapshot's copy can carry: an
    /// `If-Modified-Since` at or after it is answered 304. It is `modified`, unless a burst of
    /// publications dated the snapshot ahead of the clock — whose second is not sent until the
    /// clock gets there (the current second is) — then the second after the latest date a
    /// replica may have sent for its predecessor (the publication's, plus the replicas'
    /// staleness: the cache's `date_margin_ms`).
    pub settled: Option<i64>,
}

impl ServedFile {
    /// The header values are made (and checked) here, once, not on each request that sends them.
    pub fn new(bytes: Bytes, modified: Option<i64>, content_type: &str, etag: &str) -> Self {
        let last_modified = modified.and_then(|ms| header(packyard_model::time::http_date(ms.div_euclid(1000))));
        let content_type =
            header(content_type.to_string()).unwrap_or_else(|| HeaderValue::from_static("application/octet-stream"));
        let etag = Some(etag).filter(|e| !e.is_empty()).and_then(|e| header(e.to_string()));
        Self { bytes, modified, last_modified, content_type, etag, settled: modified }
    }

    /// The same, settled from `settled` rather than from its date (see [`Self::settled`]).
    pub fn settled_at(mut self, settled: Option<i64>) -> Self {
        self.settled = settled.or(self.modified);
        self
    }
}

/// A header value of `text` (`None` for text no header may carry).
fn header(text: String) -> Option<HeaderValue> {
    HeaderValue::from_maybe_shared(Bytes::from(text)).ok()
}

/// Which node-local cache a lookup asked (the `cache` label of `packyard_cache_requests_total`).
#[derive(Debug, Clone, Copy)]
enum Which {
    Snapshot = 0,
    SnapshotFile = 1,
    Artifact = 2,
    Made = 3,
    Kept = 4,
}

/// The counters of each cache's hits and misses, their labels resolved once (a lookup by
/// label values hashes them on every request).
struct Counters {
    hit: [packyard_store::metrics::IntCounter; 5],
    miss: [packyard_store::metrics::IntCounter; 5],
}

impl Counters {
    fn new(metrics: &Metrics) -> Self {
        let names = ["snapshot", "snapshot_file", "artifact", "made", "kept"];
        let of = |result: &str| names.map(|n| metrics.cache_requests_total.with_label_values(&[n, result]));
        Self { hit: of("hit"), miss: of("miss") }
    }
}

/// A unit of a repository: the key of its current snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct UnitKey {
    repo: i64,
    kind: String,
    unit: String,
}

/// A [`UnitKey`] to look up without making one (hashed the same way).
#[derive(Hash)]
struct UnitKeyRef<'a> {
    repo: i64,
    kind: &'a str,
    unit: &'a str,
}

impl hashbrown::Equivalent<UnitKey> for UnitKeyRef<'_> {
    fn equivalent(&self, k: &UnitKey) -> bool {
        self.repo == k.repo && self.kind == k.kind && self.unit == k.unit
    }
}

/// A file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey {
    snapshot: i64,
    path: String,
}

#[derive(Hash)]
struct FileKeyRef<'a> {
    snapshot: i64,
    path: &'a str,
}

impl hashbrown::Equivalent<FileKey> for FileKeyRef<'_> {
    fn equivalent(&self, k: &FileKey) -> bool {
        self.snapshot == k.snapshot && self.path == k.path
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Blob(#[from] packyard_store::blobs::BlobError),
}

/// An artifact's blob and when it was stored (its `Last-Modified`, when the format knows it),
/// with the text of its validators made once, when it is cached: a HEAD or a 304 of a package
/// formats nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    pub sha256: Arc<str>,
    pub size: i64,
    pub modified_ms: Option<i64>,
    /// The strong `ETag`: the SHA-256, quoted (`None`: a digest no header may carry).
    pub etag: Option<HeaderValue>,
    /// `modified_ms` as an HTTP date, whole seconds.
    pub last_modified: Option<HeaderValue>,
}

impl ArtifactRef {
    pub fn new(sha256: &str, size: i64, modified_ms: Option<i64>) -> Self {
        let etag = header(format!("\"{sha256}\""));
        let last_modified = modified_ms.and_then(|ms| header(packyard_model::time::http_date(ms.div_euclid(1000))));
        Self { sha256: Arc::from(sha256), size, modified_ms, etag, last_modified }
    }
}

pub struct PublishedCache {
    /// This cache among others in one process (tests run several replicas on one thread).
    id: u64,
    /// Told of each publication made or seen: read-your-writes waits on it.
    dropped: tokio::sync::Notify,
    version: AtomicI64,
    /// Bumped by every drop of pointers: a lookup begun before it does not store its result.
    epoch: std::sync::atomic::AtomicU64,
    /// Each repository's watermark (`repositories.version`) as last seen.
    repo_versions: RwLock<HashMap<i64, i64>>,
    current: RwLock<hashbrown::HashMap<UnitKey, Option<Arc<Manifest>>>>,
    files: RwLock<hashbrown::HashMap<FileKey, ServedFile>>,
    files_bytes: AtomicI64,
    max_bytes: i64,
    counters: Counters,
    /// Artifact paths (e.g. an APT pool path) → (SHA-256, size): dropped with the repository's
    /// snapshot pointers, so a package file is served from the mapping its index was built from.
    artifacts: RwLock<hashbrown::HashMap<i64, hashbrown::HashMap<String, ArtifactRef>>>,
    /// Files a replica made for units that have no snapshot (an empty APK index, signed), by
    /// repository and path: dropped with the repository's pointers (a publication or a new
    /// signing key moves its watermark).
    made: RwLock<HashMap<i64, HashMap<String, ServedFile>>>,
    /// Immutable bytes a format read or made from the database (a checksum database's records
    /// and tiles, its signed head of a given size), by repository and key: they never change, so
    /// they stay across watermark moves and go only with their repository, or when the map is
    /// over its bound (a quarter of `cache.snapshot_cache_bytes`).
    kept: RwLock<HashMap<i64, HashMap<String, Bytes>>>,
    kept_bytes: AtomicI64,
    /// How long after a publication a replica may still serve the snapshot before it, plus a
    /// second (ms, whole seconds): `cache.watermark_ttl_ms` rounded up, plus 1 s.
    date_margin_ms: i64,
}

/// Files made per repository before the map is emptied and refilled.
const MAX_MADE: usize = 256;

/// Entries kept in the artifact map before it is emptied and refilled.
const MAX_ARTIFACTS: usize = 100_000;

impl PublishedCache {
    pub fn new(max_bytes: i64, watermark_ttl_ms: u64, metrics: Arc<Metrics>) -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            dropped: tokio::sync::Notify::new(),
            version: AtomicI64::new(0),
            epoch: std::sync::atomic::AtomicU64::new(0),
            repo_versions: RwLock::new(HashMap::new()),
            current: RwLock::new(hashbrown::HashMap::new()),
            files: RwLock::new(hashbrown::HashMap::new()),
            files_bytes: AtomicI64::new(0),
            max_bytes,
            counters: Counters::new(&metrics),
            artifacts: RwLock::new(hashbrown::HashMap::new()),
            made: RwLock::new(HashMap::new()),
            kept: RwLock::new(HashMap::new()),
            kept_bytes: AtomicI64::new(0),
            date_margin_ms: i64::try_from(watermark_ttl_ms.div_ceil(1000).saturating_add(1).saturating_mul(1000))
                .unwrap_or(i64::MAX / 4),
        }
    }

    /// Immutable bytes kept for `key` of a repository (see [`Self::keep`]).
    pub fn kept(&self, repo: i64, key: &str) -> Option<Bytes> {
        let hit = self.kept.read().ok().and_then(|m| m.get(&repo).and_then(|r| r.get(key)).cloned());
        self.count(Which::Kept, hit.is_some());
        hit
    }

    /// Keeps bytes that never change for `key` of a repository (no epoch: a watermark move
    /// changes nothing about them).
    pub fn keep(&self, repo: i64, key: &str, bytes: Bytes) {
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let bound = self.max_bytes / 4;
        if size > bound {
            return;
        }
        if let Ok(mut m) = self.kept.write() {
            if self.kept_bytes.load(Ordering::Acquire) + size > bound {
                m.clear();
                self.kept_bytes.store(0, Ordering::Release);
            }
            if m.entry(repo).or_default().insert(key.to_string(), bytes).is_none() {
                self.kept_bytes.fetch_add(size, Ordering::AcqRel);
            }
        }
    }

    /// A file made for `path` of a repository without a snapshot of it (see
    /// [`Self::put_made`]).
    pub fn made(&self, repo: i64, path: &str) -> Option<ServedFile> {
        let hit = self.made.read().ok().and_then(|m| m.get(&repo).and_then(|r| r.get(path)).cloned());
        self.count(Which::Made, hit.is_some());
        hit
    }

    /// Remembers a made file, unless pointers were dropped since `epoch`.
    pub fn put_made(&self, epoch: u64, repo: i64, path: &str, file: ServedFile) {
        if let Ok(mut m) = self.made.write() {
            if self.epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            let files = m.entry(repo).or_default();
            if files.len() >= MAX_MADE {
                files.clear();
            }
            files.insert(path.to_string(), file);
        }
    }

    /// Which cache this is, among those of one process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The epoch to pass to [`Self::put_artifact`] after a lookup begun now.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The cached (SHA-256, size) of an artifact path of a repository.
    pub fn artifact(&self, repo: i64, path: &str) -> Option<ArtifactRef> {
        let hit = self.artifacts.read().ok().and_then(|m| m.get(&repo).and_then(|r| r.get(path)).cloned());
        self.count(Which::Artifact, hit.is_some());
        hit
    }

    /// Remembers an artifact looked up in the database, unless pointers were dropped since
    /// `epoch` (the lookup may predate the change that dropped them).
    pub fn put_artifact(&self, epoch: u64, repo: i64, path: &str, artifact: ArtifactRef) {
        if let Ok(mut m) = self.artifacts.write() {
            if self.epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            if m.values().map(hashbrown::HashMap::len).sum::<usize>() >= MAX_ARTIFACTS {
                m.clear();
            }
            m.entry(repo).or_default().insert(path.to_string(), artifact);
        }
    }

    fn count(&self, which: Which, hit: bool) {
        let counters = if hit { &self.counters.hit } else { &self.counters.miss };
        counters[which as usize].inc();
    }

    /// Whether the global `publications` watermark differs from the one last applied (then the
    /// caller reads the per-repository watermarks, hands them to
    /// [`Self::observe_repositories`], and only then [`Self::applied`] this version).
    pub fn publications_moved(&self, version: i64) -> bool {
        self.version.load(Ordering::Acquire) != version
    }

    pub fn applied(&self, version: i64) {
        self.version.store(version, Ordering::Release);
    }

    /// Drops the current-snapshot pointers of the repositories whose watermark moved (or that
    /// are gone). Returns how many repositories changed.
    pub fn observe_repositories(&self, versions: &[(i64, i64)]) -> usize {
        let fresh: HashMap<i64, i64> = versions.iter().copied().collect();
        let changed: Vec<i64> = match self.repo_versions.read() {
            Ok(seen) => {
                let mut c: Vec<i64> =
                    fresh.iter().filter(|(id, v)| seen.get(id) != Some(v)).map(|(id, _)| *id).collect();
                c.extend(seen.keys().filter(|id| !fresh.contains_key(id)));
                c
            }
            Err(_) => fresh.keys().copied().collect(),
        };
        if !changed.is_empty() {
            if let Ok(mut m) = self.current.write() {
                self.epoch.fetch_add(1, Ordering::AcqRel);
                m.retain(|k, _| !changed.contains(&k.repo));
            }
            if let Ok(mut a) = self.artifacts.write() {
                a.retain(|repo, _| !changed.contains(repo));
            }
            if let Ok(mut m) = self.made.write() {
                m.retain(|repo, _| !changed.contains(repo));
            }
            // Again once the artifacts and made files are gone too: what was read from them
            // after the first bump is not taken for current (the API's hot answers compare
            // epochs only).
            self.epoch.fetch_add(1, Ordering::AcqRel);
            // What is kept goes only with a repository that is gone.
            if let Ok(mut m) = self.kept.write() {
                m.retain(|repo, _| fresh.contains_key(repo));
                let left: usize = m.values().flat_map(HashMap::values).map(Bytes::len).sum();
                self.kept_bytes.store(i64::try_from(left).unwrap_or(i64::MAX), Ordering::Release);
            }
        }
        if let Ok(mut seen) = self.repo_versions.write() {
            *seen = fresh;
        }
        if !changed.is_empty() {
            self.dropped.notify_waiters();
        }
        changed.len()
    }

    /// What tells of a publication this process made ([`crate::services::Services::changed`])
    /// or saw another replica's watermark move for: [`crate::publication::wait_until_published`]
    /// waits on it rather than only polling.
    pub fn publications(&self) -> &tokio::sync::Notify {
        &self.dropped
    }

    /// Drops the current-snapshot pointers (file bytes stay: they are immutable).
    pub fn invalidate(&self) {
        if let Ok(mut m) = self.current.write() {
            self.epoch.fetch_add(1, Ordering::AcqRel);
            m.clear();
        }
        if let Ok(mut a) = self.artifacts.write() {
            a.clear();
        }
        if let Ok(mut m) = self.made.write() {
            m.clear();
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The current snapshot of a unit, or `None` if it was never published.
    pub async fn manifest(
        &self,
        db: &Db,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
    ) -> Result<Option<Arc<Manifest>>, ReadError> {
        let lookup = UnitKeyRef { repo: repository_id, kind, unit: unit_key };
        if let Some(found) = self.current.read().ok().and_then(|m| m.get(&lookup).cloned()) {
            self.count(Which::Snapshot, true);
            return Ok(found);
        }
        self.count(Which::Snapshot, false);
        // Boxed: a warm read should not carry the queries' state (see `Proxy::fetch`).
        Box::pin(self.load_manifest(db, repository_id, kind, unit_key)).await
    }

    async fn load_manifest(
        &self,
        db: &Db,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
    ) -> Result<Option<Arc<Manifest>>, ReadError> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let manifest = match db.unit_by_key(repository_id, kind, unit_key).await? {
            Some(unit) => match unit.current_snapshot_id {
                Some(sid) => {
                    let files = db.snapshot_files(sid).await?;
                    let published_at = unit.modified_at.or(unit.last_published_at);
                    // Ahead of the clock (a burst): settled once no replica may still serve the
                    // predecessor with a date as late.
                    let settled_at = match (published_at, unit.last_published_at) {
                        (Some(m), Some(p)) => Some(m.min(p - p.rem_euclid(1000) + self.date_margin_ms)),
                        (m, _) => m,
                    };
                    Some(Arc::new(Manifest {
                        snapshot_id: sid,
                        revision: unit.published_revision,
                        published_at,
                        settled_at,
                        files: files.into_iter().map(|f| (f.path.clone(), f)).collect(),
                    }))
                }
                None => None,
            },
            None => None,
        };
        if let Ok(mut m) = self.current.write() {
            if self.epoch.load(Ordering::Acquire) == epoch {
                // Unknown units are remembered too; bound the map against random names.
                if m.len() >= 10_000 {
                    m.clear();
                }
                let key = UnitKey { repo: repository_id, kind: kind.to_string(), unit: unit_key.to_string() };
                m.insert(key, manifest.clone());
            }
        }
        Ok(manifest)
    }

    /// A file of the current snapshot or, failing that, of an older snapshot still retained
    /// (a client midway through an update may ask for what the previous index promised). The
    /// fallback reads the database; the current snapshot's files come from memory when warm.
    pub async fn file_or_retained(
        &self,
        db: &Db,
        blobs: &dyn BlobStore,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
        path: &str,
    ) -> Result<Option<ServedFile>, ReadError> {
        if let Some(f) = self.file(db, blobs, repository_id, kind, unit_key, path).await? {
            return Ok(Some(f));
        }
        let Some(unit) = db.unit_by_key(repository_id, kind, unit_key).await? else { return Ok(None) };
        for (snapshot_id, _, _) in db.snapshot_ids(unit.id).await? {
            let key = FileKeyRef { snapshot: snapshot_id, path };
            if let Some(f) = self.files.read().ok().and_then(|m| m.get(&key).cloned()) {
                return Ok(Some(f));
            }
            if let Some(entry) = db.snapshot_files(snapshot_id).await?.into_iter().find(|f| f.path == path) {
                let bytes = super::read_file(blobs, &entry).await?;
                let etag = format!("\"{}\"", entry.sha256);
                // Immutable (by-hash) files of an older snapshot: the ETag tells.
                return Ok(Some(ServedFile::new(bytes, None, entry.served_type(), &etag)));
            }
        }
        Ok(None)
    }

    /// The entry (blob, size, type) of a file of the current snapshot, without reading it: for
    /// artifacts a snapshot lists, streamed by the caller.
    pub async fn entry(
        &self,
        db: &Db,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
        path: &str,
    ) -> Result<Option<SnapshotFile>, ReadError> {
        let Some(manifest) = self.manifest(db, repository_id, kind, unit_key).await? else { return Ok(None) };
        Ok(manifest.files.get(path).cloned())
    }

    /// A file of the current snapshot, from memory when warm; `None` if absent.
    pub async fn file(
        &self,
        db: &Db,
        blobs: &dyn BlobStore,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
        path: &str,
    ) -> Result<Option<ServedFile>, ReadError> {
        let Some(manifest) = self.manifest(db, repository_id, kind, unit_key).await? else { return Ok(None) };
        let Some(entry) = manifest.files.get(path) else { return Ok(None) };
        let lookup = FileKeyRef { snapshot: manifest.snapshot_id, path };
        if let Some(f) = self.files.read().ok().and_then(|m| m.get(&lookup).cloned()) {
            self.count(Which::SnapshotFile, true);
            return Ok(Some(f));
        }
        self.count(Which::SnapshotFile, false);
        let bytes = Box::pin(super::read_file(blobs, entry)).await?;
        let etag = format!("\"{}\"", entry.sha256);
        let served =
            ServedFile::new(bytes, manifest.published_at, entry.served_type(), &etag).settled_at(manifest.settled_at);
        let key = FileKey { snapshot: manifest.snapshot_id, path: path.to_string() };
        let size = i64::try_from(served.bytes.len()).unwrap_or(i64::MAX);
        if let Ok(mut m) = self.files.write() {
            if self.files_bytes.load(Ordering::Acquire) + size > self.max_bytes {
                m.clear();
                self.files_bytes.store(0, Ordering::Release);
            }
            if size <= self.max_bytes {
                self.files_bytes.fetch_add(size, Ordering::AcqRel);
                m.insert(key, served.clone());
            }
        }
        Ok(Some(served))
    }
}
