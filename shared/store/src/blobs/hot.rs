//! A replica's memory for hot blobs: package files up to `cache.blob_cache_max_object_bytes` are
//! kept whole, up to `cache.blob_cache_bytes` in all, least recently used out first. Blobs are
//! immutable (content-addressed), so an entry never goes stale; a delete drops it. A hit serves
//! a GET or a Range as slices of the cached bytes: no file opened, no trip to the blocking pool.
//! Only reads for clients (`open_hot`) fill it; internal reads (an upload checked, a package
//! hashed by the worker) use it when it holds the blob but leave it as it is.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;

use super::{BlobError, BlobRead, BlobStore, BlobWrite, BlockingOpen, ByteStream, RangeSpec, Sha256Hex};
use crate::metrics::Metrics;

/// A cached body is handed to the HTTP layer in slices of this size, so that the server's write
/// buffer stays small and connections take turns.
const SLICE: usize = 256 * 1024;

struct Entry {
    bytes: Bytes,
    tick: u64,
}

#[derive(Default)]
struct Lru {
    entries: HashMap<String, Entry>,
    /// tick → key, oldest first.
    order: BTreeMap<u64, String>,
    used: u64,
    tick: u64,
}

impl Lru {
    fn get(&mut self, key: &str) -> Option<Bytes> {
        let e = self.entries.get_mut(key)?;
        self.tick += 1;
        self.order.remove(&e.tick);
        e.tick = self.tick;
        self.order.insert(self.tick, key.to_string());
        Some(e.bytes.clone())
    }

    fn insert(&mut self, key: &str, bytes: Bytes, budget: u64) {
        if self.entries.contains_key(key) {
            return;
        }
        let size = bytes.len() as u64;
        while self.used + size > budget {
            let Some((_, oldest)) = self.order.pop_first() else { break };
            if let Some(e) = self.entries.remove(&oldest) {
                self.used -= e.bytes.len() as u64;
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.to_string());
        self.entries.insert(key.to_string(), Entry { bytes, tick: self.tick });
        self.used += size;
    }

    fn remove(&mut self, key: &str) {
        if let Some(e) = self.entries.remove(key) {
            self.order.remove(&e.tick);
            self.used -= e.bytes.len() as u64;
        }
    }
}

/// A [`BlobStore`] that keeps small, recently read blobs in memory in front of another store.
pub struct HotCache {
    inner: Arc<dyn BlobStore>,
    lru: Arc<Mutex<Lru>>,
    budget: u64,
    max_object: u64,
    metrics: Arc<Metrics>,
}

impl HotCache {
    /// Wraps `inner`; with a zero budget (or objects capped at zero) it returns `inner` itself.
    pub fn wrap(inner: Arc<dyn BlobStore>, budget: u64, max_object: u64, metrics: Arc<Metrics>) -> Arc<dyn BlobStore> {
        if budget == 0 || max_object == 0 {
            return inner;
        }
        Arc::new(Self { inner, lru: Arc::default(), budget, max_object: max_object.min(budget), metrics })
    }

    fn count(&self, hit: bool) {
        self.metrics.cache_requests_total.with_label_values(&["blob", if hit { "hit" } else { "miss" }]).inc();
    }

    fn cached(&self, digest: &Sha256Hex) -> Option<Bytes> {
        self.lru.lock().ok().and_then(|mut l| l.get(digest.as_str()))
    }

    fn serve(&self, bytes: Bytes, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        let total_size = bytes.len() as u64;
        let range = range.map(|r| r.resolve(total_size)).transpose()?;
        let part = match range {
            // The range was resolved against this very length, so the bounds hold.
            Some(r) => bytes.slice(usize::try_from(r.start).unwrap_or(0)..usize::try_from(r.end + 1).unwrap_or(0)),
            None => bytes,
        };
        self.metrics.blob_bytes_total.with_label_values(&["out"]).inc_by(part.len() as u64);
        let slices: Vec<Result<Bytes, std::io::Error>> =
            (0..part.len()).step_by(SLICE).map(|at| Ok(part.slice(at..(at + SLICE).min(part.len())))).collect();
        let body: ByteStream = Box::pin(futures_util::stream::iter(slices));
        Ok(BlobRead { total_size, range, body })
    }
}

async fn collect(read: BlobRead) -> Result<Bytes, BlobError> {
    let mut body = read.body;
    let first = match body.next().await {
        Some(chunk) => chunk?,
        None => return Ok(Bytes::new()),
    };
    if first.len() as u64 == read.total_size {
        return Ok(first);
    }
    let mut out = Vec::with_capacity(usize::try_from(read.total_size).unwrap_or(0));
    out.extend_from_slice(&first);
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(Bytes::from(out))
}

#[async_trait]
impl BlobStore for HotCache {
    async fn writer(&self, limit: u64) -> Result<Box<dyn BlobWrite>, BlobError> {
        self.inner.writer(limit).await
    }

    async fn list(&self, after: Option<&Sha256Hex>, limit: usize) -> Result<Vec<super::Listed>, BlobError> {
        self.inner.list(after, limit).await
    }

    async fn stat(&self, digest: &Sha256Hex) -> Result<Option<u64>, BlobError> {
        match self.cached(digest) {
            Some(b) => Ok(Some(b.len() as u64)),
            None => self.inner.stat(digest).await,
        }
    }

    async fn open(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        match self.cached(digest) {
            Some(bytes) => self.serve(bytes, range),
            None => self.inner.open(digest, range).await,
        }
    }

    fn blocking_open(&self, digest: &Sha256Hex) -> Option<BlockingOpen> {
        match self.cached(digest) {
            Some(bytes) => {
                self.metrics.blob_bytes_total.with_label_values(&["out"]).inc_by(bytes.len() as u64);
                Some(Box::new(move || Ok(Box::new(std::io::Cursor::new(bytes)) as Box<dyn std::io::Read + Send>)))
            }
            None => self.inner.blocking_open(digest),
        }
    }

    async fn open_hot(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        if let Some(bytes) = self.cached(digest) {
            self.count(true);
            return self.serve(bytes, range);
        }
        self.count(false);
        if range.is_some() {
            // Serve the part now; when the whole blob is small enough, read it in the background
            // for the next request.
            let read = self.inner.open(digest, range).await?;
            if read.total_size <= self.max_object {
                let (inner, lru, digest, budget) = (self.inner.clone(), self.lru.clone(), digest.clone(), self.budget);
                tokio::spawn(async move {
                    if let Ok(bytes) = inner.open(&digest, None).await.map(collect) {
                        if let (Ok(bytes), Ok(mut l)) = (bytes.await, lru.lock()) {
                            l.insert(digest.as_str(), bytes, budget);
                        }
                    }
                });
            }
            return Ok(read);
        }
        let read = self.inner.open(digest, None).await?;
        if read.total_size > self.max_object {
            return Ok(read);
        }
        let bytes = collect(read).await?;
        if let Ok(mut l) = self.lru.lock() {
            l.insert(digest.as_str(), bytes.clone(), self.budget);
        }
        // `inner` already counted these bytes out; `serve` counts them for this response.
        self.serve(bytes, None)
    }

    async fn delete(&self, digest: &Sha256Hex) -> Result<(), BlobError> {
        if let Ok(mut l) = self.lru.lock() {
            l.remove(digest.as_str());
        }
        self.inner.delete(digest).await
    }

    async fn check(&self) -> Result<(), BlobError> {
        self.inner.check().await
    }

    async fn read_all(&self, digest: &Sha256Hex) -> Result<Bytes, BlobError> {
        match self.cached(digest) {
            Some(b) => Ok(b),
            None => collect(self.inner.open(digest, None).await?).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blobs::FileStore;

    /// The body, checking that it arrives in slices of at most `max` bytes.
    async fn sliced(read: BlobRead, max: usize) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut b = read.body;
        while let Some(c) = b.next().await {
            let c = c?;
            assert!(c.len() <= max, "a slice of {} bytes", c.len());
            out.extend_from_slice(&c);
        }
        Ok(out)
    }

    async fn body(read: BlobRead) -> anyhow::Result<Vec<u8>> {
        sliced(read, SLICE).await
    }

    fn hits(m: &Metrics, result: &str) -> u64 {
        m.cache_requests_total.with_label_values(&["blob", result]).get()
    }

    #[tokio::test]
    async fn serves_hits_and_ranges_from_memory_and_evicts_the_least_recently_used() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let metrics = Arc::new(Metrics::new()?);
        let files: Arc<dyn BlobStore> = Arc::new(FileStore::open(dir.path(), metrics.clone()).await?);
        // Room for two 600 KiB blobs, not three; a 2 MiB blob is never cached.
        let hot = HotCache::wrap(files.clone(), 1300 << 10, 1 << 20, metrics.clone());
        let data: Vec<Vec<u8>> = (0..3u8).map(|i| (0..600 * 1024).map(|j| (j % 251) as u8 ^ i).collect()).collect();
        let mut digests = Vec::new();
        for d in &data {
            digests.push(hot.put_bytes(d).await?.sha256);
        }
        let big: Vec<u8> = (0..2 << 20).map(|j| (j % 7) as u8).collect();
        let big_digest = hot.put_bytes(&big).await?.sha256;

        assert_eq!(body(hot.open_hot(&digests[0], None).await?).await?, data[0]);
        assert_eq!((hits(&metrics, "hit"), hits(&metrics, "miss")), (0, 1));
        assert_eq!(body(hot.open_hot(&digests[0], None).await?).await?, data[0]);
        let part = hot
            .open_hot(
                &digests[0],
                Some(RangeSpec::parse_header("bytes=1000-70535").ok_or_else(|| anyhow::anyhow!("range"))?),
            )
            .await?;
        assert_eq!((part.total_size, part.content_length()), (600 * 1024, 69536));
        assert_eq!(body(part).await?, data[0][1000..70536]);
        assert_eq!((hits(&metrics, "hit"), hits(&metrics, "miss")), (2, 1));
        // A range past the end is refused as from the file store.
        let past = hot
            .open(&digests[0], Some(RangeSpec::parse_header("bytes=700000-").ok_or_else(|| anyhow::anyhow!("range"))?))
            .await;
        assert!(matches!(past, Err(BlobError::RangeNotSatisfiable { .. })), "{:?}", past.map(|r| r.total_size));

        // Reading 1 then 2 evicts 0, the least recently used.
        body(hot.open_hot(&digests[1], None).await?).await?;
        body(hot.open_hot(&digests[2], None).await?).await?;
        let before = hits(&metrics, "hit");
        assert_eq!(body(hot.open_hot(&digests[2], None).await?).await?, data[2]);
        assert_eq!(body(hot.open_hot(&digests[0], None).await?).await?, data[0]);
        assert_eq!(hits(&metrics, "hit"), before + 1, "0 was evicted, 2 was not");

        // Too large to cache: streamed from the store each time, byte for byte.
        assert_eq!(sliced(hot.open_hot(&big_digest, None).await?, usize::MAX).await?, big);
        assert_eq!(sliced(hot.open_hot(&big_digest, None).await?, usize::MAX).await?, big);
        assert_eq!(hits(&metrics, "hit"), before + 1);

        // Internal reads are served from memory but do not fill it.
        let misses = hits(&metrics, "miss");
        assert_eq!(sliced(hot.open(&digests[1], None).await?, usize::MAX).await?, data[1]);
        assert_eq!(sliced(hot.open(&digests[1], None).await?, usize::MAX).await?, data[1]);
        assert_eq!((hits(&metrics, "hit"), hits(&metrics, "miss")), (before + 1, misses), "not counted, not cached");
        assert_eq!(body(hot.open(&digests[0], None).await?).await?, data[0], "a cached blob is served from memory");

        // A delete drops the cached copy too.
        hot.delete(&digests[0]).await?;
        assert!(matches!(hot.open_hot(&digests[0], None).await, Err(BlobError::NotFound(_))));
        assert_eq!(hot.stat(&digests[0]).await?, None);
        Ok(())
    }

    #[tokio::test]
    async fn a_zero_budget_is_the_store_itself() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let metrics = Arc::new(Metrics::new()?);
        let files: Arc<dyn BlobStore> = Arc::new(FileStore::open(dir.path(), metrics.clone()).await?);
        let same = HotCache::wrap(files.clone(), 0, 1 << 20, metrics);
        assert!(Arc::ptr_eq(&files, &same));
        Ok(())
    }
}
