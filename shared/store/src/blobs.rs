//! The blob store's contract: bytes addressed by their SHA-256 ([`Sha256Hex`]), the
//! [`BlobStore`] and [`BlobWrite`] traits, ranges, and the errors every store answers with. The
//! stores that fill it: [`FileStore`] (files on a volume), [`s3::S3Store`] (the same layout in
//! a bucket) and [`hot::HotCache`] (recently read small blobs in memory in front of another). One test
//! suite below runs against each.

use std::fmt;
use std::io;
use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};

use crate::metrics::Metrics;

mod file;
pub mod hot;
pub mod s3;

pub use file::FileStore;

/// A lowercase hex SHA-256, validated on construction so it is always safe as a path component.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Hex(String);

impl Sha256Hex {
    pub fn parse(s: &str) -> Result<Self, BlobError> {
        if s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(Self(s.to_string()))
        } else {
            Err(BlobError::InvalidDigest(s.chars().take(80).collect()))
        }
    }

    pub fn of(bytes: &[u8]) -> Self {
        Self(hex::encode(Sha256::digest(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob {0} not found")]
    NotFound(Sha256Hex),
    #[error("upload exceeds the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("range not satisfiable: the blob is {size} bytes")]
    RangeNotSatisfiable { size: u64 },
    #[error("not a SHA-256 digest: {0:?}")]
    InvalidDigest(String),
    #[error("blob store is full: {0}")]
    Full(io::Error),
    #[error("blob store I/O error: {0}")]
    Io(#[from] io::Error),
}

impl BlobError {
    fn from_write(e: io::Error) -> Self {
        // ENOSPC / EDQUOT: the store is full, which the client should hear about as 507.
        match e.raw_os_error() {
            Some(code) if code == libc::ENOSPC || code == libc::EDQUOT => Self::Full(e),
            _ => Self::Io(e),
        }
    }
}

/// What a finished write stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlob {
    pub sha256: Sha256Hex,
    pub size: u64,
    /// False when the store knows identical content was already there (the file store: the
    /// rename found the file). The S3 store does not ask (a HEAD per write would cost as much
    /// as the write): true there, and an upload learns it from the database's row instead
    /// (`hosted::settle`).
    pub created: bool,
}

/// An inclusive byte range `start..=end` within a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A requested range before the blob's size is known (from a `Range` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSpec {
    /// `bytes=a-b` or `bytes=a-`.
    From { start: u64, end: Option<u64> },
    /// `bytes=-n`: the last n bytes.
    Suffix(u64),
}

impl RangeSpec {
    /// Parses a single-range `Range` header. `None` means "ignore the header and send the whole
    /// body" (absent, another unit, several ranges, or syntactically invalid — as RFC 9110 allows).
    ///
    /// ```
    /// use packyard_store::blobs::{ByteRange, RangeSpec};
    /// let spec = RangeSpec::parse_header("bytes=-100").unwrap();
    /// assert_eq!(spec.resolve(1000).unwrap(), ByteRange { start: 900, end: 999 });
    /// assert!(RangeSpec::parse_header("bytes=0-1,5-6").is_none());
    /// ```
    pub fn parse_header(value: &str) -> Option<Self> {
        let spec = value.trim().strip_prefix("bytes=")?;
        if spec.contains(',') {
            return None;
        }
        let (a, b) = spec.trim().split_once('-')?;
        let (a, b) = (a.trim(), b.trim());
        if a.is_empty() {
            let n: u64 = b.parse().ok()?;
            return Some(Self::Suffix(n));
        }
        let start: u64 = a.parse().ok()?;
        let end = if b.is_empty() { None } else { Some(b.parse().ok()?) };
        if end.is_some_and(|e| e < start) {
            return None;
        }
        Some(Self::From { start, end })
    }

    /// Resolves against the blob size; `Err` is a 416.
    pub fn resolve(self, size: u64) -> Result<ByteRange, BlobError> {
        match self {
            Self::From { start, end } => {
                if start >= size {
                    return Err(BlobError::RangeNotSatisfiable { size });
                }
                let end = end.map_or(size - 1, |e| e.min(size - 1));
                Ok(ByteRange { start, end })
            }
            Self::Suffix(n) => {
                if n == 0 || size == 0 {
                    return Err(BlobError::RangeNotSatisfiable { size });
                }
                Ok(ByteRange { start: size.saturating_sub(n), end: size - 1 })
            }
        }
    }
}

pub type ByteStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send + 'static>>;

/// An open blob: its total size, the part being sent, and the bytes of that part.
pub struct BlobRead {
    pub total_size: u64,
    pub range: Option<ByteRange>,
    pub body: ByteStream,
}

impl BlobRead {
    /// Bytes the body will yield.
    pub fn content_length(&self) -> u64 {
        self.range.map_or(self.total_size, |r| r.len())
    }
}

/// Opens a blob for [`BlobStore::blocking_open`]'s reader; call it on the blocking thread.
pub type BlockingOpen = Box<dyn FnOnce() -> Result<Box<dyn io::Read + Send>, BlobError> + Send>;

/// A blob as the store lists it ([`BlobStore::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub digest: Sha256Hex,
    pub size: u64,
    /// When its bytes were stored (ms since the epoch): the file's or the object's time.
    pub stored_at: i64,
}

/// An upload in progress. Dropping it without [`BlobWrite::finish`] discards what was written.
#[async_trait]
pub trait BlobWrite: Send {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError>;
    /// [`Self::write`] of bytes the caller owns already (a request body's pieces): a store that
    /// batches its writes keeps them as they are rather than copying them.
    async fn write_bytes(&mut self, chunk: Bytes) -> Result<(), BlobError> {
        self.write(&chunk).await
    }
    async fn finish(self: Box<Self>) -> Result<StoredBlob, BlobError>;
    /// Bytes written so far.
    fn written(&self) -> u64;
}

#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Starts an upload that fails with [`BlobError::TooLarge`] once more than `limit` bytes arrive.
    async fn writer(&self, limit: u64) -> Result<Box<dyn BlobWrite>, BlobError>;
    /// Size of a stored blob, or `None`.
    async fn stat(&self, digest: &Sha256Hex) -> Result<Option<u64>, BlobError>;
    /// Opens a blob, optionally a range of it (resolved against the size; past the end → 416).
    async fn open(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError>;
    /// Opens a blob to send to a client: a store with a memory cache ([`hot::HotCache`]) keeps
    /// it for the next request. Internal reads (checking an upload, hashing) use [`Self::open`],
    /// which serves from the cache but does not fill it.
    async fn open_hot(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        self.open(digest, range).await
    }
    /// A blob to read on a thread that may block (the blocking pool): a local file read
    /// directly, without a trip through the async runtime for every piece. `None` where the
    /// store has no local file (S3): read it with [`Self::open`].
    fn blocking_open(&self, _digest: &Sha256Hex) -> Option<BlockingOpen> {
        None
    }
    async fn delete(&self, digest: &Sha256Hex) -> Result<(), BlobError>;
    /// Reachable and writable (readiness).
    async fn check(&self) -> Result<(), BlobError>;
    /// Up to `limit` stored blobs in digest order, after `after` (`None`: from the first): what
    /// the store holds, whatever the database says (the collector's scan for bytes no row
    /// names). Temporaries are not listed.
    async fn list(&self, after: Option<&Sha256Hex>, limit: usize) -> Result<Vec<Listed>, BlobError>;

    /// Stores bytes already in memory.
    async fn put_bytes(&self, bytes: &[u8]) -> Result<StoredBlob, BlobError> {
        let mut w = self.writer(u64::MAX).await?;
        w.write(bytes).await?;
        w.finish().await
    }

    /// Reads a part of a blob into memory (e.g. the end of a zip).
    async fn read_range(&self, digest: &Sha256Hex, range: RangeSpec) -> Result<Bytes, BlobError> {
        let read = self.open(digest, Some(range)).await?;
        let mut out = Vec::with_capacity(usize::try_from(read.content_length()).unwrap_or(0));
        let mut body = read.body;
        while let Some(chunk) = body.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(Bytes::from(out))
    }

    /// Reads a whole blob into memory (for small blobs such as index files).
    async fn read_all(&self, digest: &Sha256Hex) -> Result<Bytes, BlobError> {
        let read = self.open(digest, None).await?;
        let mut out = Vec::with_capacity(usize::try_from(read.total_size).unwrap_or(0));
        let mut body = read.body;
        while let Some(chunk) = body.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(Bytes::from(out))
    }
}

/// Counts a failed blob operation (`packyard_blob_errors_total{op}`); a missing blob or an
/// unsatisfiable range is the caller's, not the store's.
fn count_error<T>(metrics: &Metrics, op: &str, r: Result<T, BlobError>) -> Result<T, BlobError> {
    if let Err(e) = &r {
        if !matches!(
            e,
            BlobError::NotFound(_)
                | BlobError::RangeNotSatisfiable { .. }
                | BlobError::TooLarge { .. }
                | BlobError::InvalidDigest(_)
        ) {
            metrics.blob_errors_total.with_label_values(&[op]).inc();
        }
    }
    r
}
#[cfg(test)]
mod tests {
    //! One suite for every store: each case runs against the file store and, when
    //! `TEST_S3_URL` names an S3-compatible server (scripts/test.sh starts one), against S3.
    use super::*;
    use std::sync::Arc;

    enum Store {
        File(tempfile::TempDir, Arc<FileStore>),
        S3(Arc<s3::S3Store>, String),
    }

    impl Store {
        fn dyn_store(&self) -> Arc<dyn BlobStore> {
            match self {
                Self::File(_, s) => s.clone(),
                Self::S3(s, _) => s.clone(),
            }
        }

        fn metrics(&self) -> &Metrics {
            match self {
                Self::File(_, s) => &s.metrics,
                Self::S3(s, _) => &s.metrics,
            }
        }

        /// Unfinished uploads' leftovers: temporaries on disk; in the bucket, `tmp/` keys and
        /// multipart uploads neither completed nor aborted (asked of the server directly).
        async fn temporaries(&self) -> anyhow::Result<usize> {
            Ok(match self {
                Self::File(_, s) => std::fs::read_dir(s.root().join("tmp"))?.count(),
                Self::S3(s, endpoint) => {
                    let url = format!("{endpoint}/{}?uploads", s.bucket());
                    let listing = reqwest::get(&url).await?.error_for_status()?.text().await?;
                    anyhow::ensure!(listing.contains("ListMultipartUploadsResult"), "{listing}");
                    s.temporaries().await?.len() + listing.matches("<Upload>").count()
                }
            })
        }
    }

    async fn file_store() -> anyhow::Result<Option<Store>> {
        let dir = tempfile::tempdir()?;
        let metrics = Arc::new(Metrics::new()?);
        let s = FileStore::open(dir.path().join("blobs"), metrics).await?;
        Ok(Some(Store::File(dir, Arc::new(s))))
    }

    /// A fresh bucket on the test server, with 5 MiB parts (S3's smallest) so that a modest
    /// blob takes the multipart path.
    async fn s3_store() -> anyhow::Result<Option<Store>> {
        let Ok(endpoint) = std::env::var("TEST_S3_URL") else {
            eprintln!("skipped on S3: TEST_S3_URL is not set (scripts/test.sh sets it)");
            return Ok(None);
        };
        let bucket = format!("packyard-t-{}", hex::encode(rand::random::<[u8; 6]>()));
        s3::create_test_bucket(&endpoint, &bucket).await?;
        let config = packyard_model::config::S3Config {
            bucket: Some(bucket),
            endpoint: Some(endpoint.clone()),
            region: Some("us-east-1".into()),
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
        };
        let store = s3::S3Store::open(&config, Arc::new(Metrics::new()?))?.with_part_bytes(5 << 20);
        Ok(Some(Store::S3(Arc::new(store), endpoint)))
    }

    async fn read(s: &dyn BlobStore, d: &Sha256Hex, r: Option<RangeSpec>) -> anyhow::Result<Vec<u8>> {
        let mut read = s.open(d, r).await?;
        let mut out = Vec::new();
        while let Some(c) = read.body.next().await {
            out.extend_from_slice(&c?);
        }
        assert_eq!(out.len() as u64, read.content_length());
        Ok(out)
    }

    /// Declares each case once per store.
    macro_rules! suite {
        ($($case:ident),* $(,)?) => {
            mod on_file {
                $(#[tokio::test]
                async fn $case() -> anyhow::Result<()> {
                    match super::file_store().await? { Some(s) => super::$case(s).await, None => Ok(()) }
                })*
            }
            mod on_s3 {
                $(#[tokio::test]
                async fn $case() -> anyhow::Result<()> {
                    match super::s3_store().await? { Some(s) => super::$case(s).await, None => Ok(()) }
                })*
            }
        };
    }

    suite!(
        stores_by_hash_and_reads_back,
        identical_content_is_deduplicated,
        concurrent_writes_of_the_same_content,
        abandoned_write_leaves_no_blob,
        oversized_write_is_refused,
        ranges_at_the_edges,
        missing_blob_and_bad_digest,
        large_blob_streams_in_parts,
        delete_removes_and_tolerates_missing,
        pieces_of_any_size_are_kept_in_order,
        listing_pages_through_every_blob_in_order,
    );

    /// The store's own listing (#44: the scan for bytes no row names): every blob once, in
    /// digest order, page after page from a cursor, with its size; temporaries and anything
    /// else in the store's tree that is not a blob are not listed.
    async fn listing_pages_through_every_blob_in_order(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let mut want = Vec::new();
        for i in 0..7 {
            let bytes = format!("blob number {i}").into_bytes();
            let stored = s.put_bytes(&bytes).await?;
            want.push((stored.sha256, bytes.len() as u64));
        }
        want.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        // An upload in progress, and (file store) a file among the directories that is no blob.
        let mut open = s.writer(u64::MAX).await?;
        open.write(b"not finished").await?;
        if let Store::File(_, f) = &st {
            std::fs::write(f.root().join("sha256").join("README"), "not a blob")?;
        }
        let mut got = Vec::new();
        let mut after: Option<Sha256Hex> = None;
        loop {
            let page = s.list(after.as_ref(), 3).await?;
            assert!(page.len() <= 3);
            let Some(last) = page.last().map(|b| b.digest.clone()) else { break };
            for b in &page {
                assert!(b.stored_at > 1_700_000_000_000, "{b:?}");
                got.push((b.digest.clone(), b.size));
            }
            after = Some(last);
        }
        assert_eq!(got, want);
        drop(open);
        Ok(())
    }

    /// A body arrives in pieces of any size, empty ones included (a writer's empty flush), small
    /// and large interleaved, across many batches: the blob is their bytes in order.
    async fn pieces_of_any_size_are_kept_in_order(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let mut w = s.writer(u64::MAX).await?;
        let mut expected = Vec::new();
        for i in 0..3_000u32 {
            // Mostly small pieces (copied together), every seventh one large (kept as it came).
            let len = if i % 7 == 0 { 16 * 1024 + (i * 97) % 40_000 } else { i % 700 };
            let piece: Vec<u8> = (0..len).map(|j| (i.wrapping_mul(31) ^ j) as u8).collect();
            expected.extend_from_slice(&piece);
            if i % 2 == 0 {
                w.write_bytes(Bytes::from(piece)).await?;
            } else {
                w.write(&piece).await?;
            }
            if i % 100 == 0 {
                w.write(b"").await?;
                w.write_bytes(Bytes::new()).await?;
            }
        }
        assert_eq!(w.written(), expected.len() as u64);
        let stored = w.finish().await?;
        assert_eq!(stored.sha256, Sha256Hex::of(&expected));
        assert_eq!(read(&*s, &stored.sha256, None).await?, expected);
        // Nothing but empty pieces: the empty blob.
        let mut w = s.writer(u64::MAX).await?;
        w.write(b"").await?;
        w.write_bytes(Bytes::new()).await?;
        let empty = w.finish().await?;
        assert_eq!((empty.sha256, empty.size), (Sha256Hex::of(b""), 0));
        assert_eq!(st.temporaries().await?, 0);
        Ok(())
    }

    async fn stores_by_hash_and_reads_back(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let data = b"hello packyard".repeat(1000);
        let stored = s.put_bytes(&data).await?;
        assert_eq!(stored.sha256, Sha256Hex::of(&data));
        assert_eq!(stored.size, data.len() as u64);
        assert!(stored.created);
        assert_eq!(read(&*s, &stored.sha256, None).await?, data);
        assert_eq!(s.stat(&stored.sha256).await?, Some(data.len() as u64));
        if let Store::File(_, f) = &st {
            let h = stored.sha256.as_str();
            assert!(f.root().join("sha256").join(&h[0..2]).join(&h[2..4]).join(h).is_file());
        }
        assert_eq!(st.temporaries().await?, 0);
        assert_eq!(st.metrics().blob_bytes_total.with_label_values(&["in"]).get(), data.len() as u64);
        Ok(())
    }

    async fn identical_content_is_deduplicated(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let a = s.put_bytes(b"same").await?;
        let b = s.put_bytes(b"same").await?;
        assert_eq!(a.sha256, b.sha256);
        assert!(a.created);
        match &st {
            // The rename finds the file there.
            Store::File(..) => assert!(!b.created),
            // The bucket is not asked whether it holds the key (#44: a HEAD before every write):
            // the object is written again, and an upload learns from its row that it was there.
            Store::S3(..) => {
                assert!(b.created);
                let asked = |op: &str| st.metrics().blob_s3_requests_total.with_label_values(&[op]).get();
                assert_eq!((asked("head"), asked("put")), (0, 2));
            }
        }
        assert_eq!(st.temporaries().await?, 0);
        Ok(())
    }

    async fn concurrent_writes_of_the_same_content(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let data = Arc::new(data);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (s, data) = (s.clone(), data.clone());
            tasks.push(tokio::spawn(async move {
                let mut w = s.writer(u64::MAX).await?;
                for chunk in data.chunks(7_919) {
                    w.write(chunk).await?;
                    tokio::task::yield_now().await;
                }
                w.finish().await
            }));
        }
        let mut digests = Vec::new();
        for t in tasks {
            digests.push(t.await??.sha256);
        }
        assert!(digests.iter().all(|d| *d == Sha256Hex::of(&data)));
        assert_eq!(read(&*s, &digests[0], None).await?, *data);
        assert_eq!(st.temporaries().await?, 0);
        Ok(())
    }

    async fn abandoned_write_leaves_no_blob(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        // Larger than one S3 part, so that the S3 store has a multipart upload to abort.
        let data: Vec<u8> = (0..6_000_000u32).map(|i| (i % 253) as u8).collect();
        let mut w = s.writer(u64::MAX).await?;
        w.write(&data[..5_500_000]).await?;
        if let Store::File(..) = &st {
            assert_eq!(st.temporaries().await?, 1);
        }
        drop(w); // the client went away mid-stream
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(st.temporaries().await?, 0);
        assert_eq!(s.stat(&Sha256Hex::of(&data)).await?, None);
        assert_eq!(s.stat(&Sha256Hex::of(&data[..5_500_000])).await?, None);
        if let Store::File(_, f) = &st {
            assert_eq!(std::fs::read_dir(f.root().join("sha256"))?.count(), 0);
        }
        Ok(())
    }

    async fn oversized_write_is_refused(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let mut w = s.writer(10).await?;
        w.write(b"0123456789").await?;
        let err = w.write(b"x").await.err().ok_or_else(|| anyhow::anyhow!("expected TooLarge"))?;
        assert!(matches!(err, BlobError::TooLarge { limit: 10 }), "{err}");
        drop(w);
        assert_eq!(st.temporaries().await?, 0);
        assert_eq!(s.stat(&Sha256Hex::of(b"0123456789")).await?, None);
        Ok(())
    }

    async fn ranges_at_the_edges(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let data: Vec<u8> = (0..=255u8).collect();
        let d = s.put_bytes(&data).await?.sha256;
        let from = |start, end| Some(RangeSpec::From { start, end });
        assert_eq!(read(&*s, &d, from(0, Some(0))).await?, vec![0u8]);
        assert_eq!(read(&*s, &d, from(255, Some(255))).await?, vec![255u8]);
        assert_eq!(read(&*s, &d, from(255, None)).await?, vec![255u8]);
        assert_eq!(read(&*s, &d, from(250, Some(10_000))).await?, data[250..].to_vec());
        assert_eq!(read(&*s, &d, Some(RangeSpec::Suffix(3))).await?, vec![253, 254, 255]);
        assert_eq!(read(&*s, &d, Some(RangeSpec::Suffix(1000))).await?, data);
        assert_eq!(s.read_range(&d, RangeSpec::From { start: 100, end: Some(103) }).await?, data[100..=103].to_vec());
        let opened = s.open(&d, from(10, Some(19))).await?;
        assert_eq!(opened.range, Some(ByteRange { start: 10, end: 19 }));
        assert_eq!(opened.total_size, 256);
        for bad in [from(256, None), from(1000, Some(2000)), Some(RangeSpec::Suffix(0))] {
            match s.open(&d, bad).await {
                Err(BlobError::RangeNotSatisfiable { size: 256 }) => {}
                Err(e) => anyhow::bail!("{bad:?}: unexpected error {e}"),
                Ok(_) => anyhow::bail!("{bad:?}: expected 416"),
            }
        }
        Ok(())
    }

    async fn missing_blob_and_bad_digest(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let d = Sha256Hex::of(b"never stored");
        assert!(matches!(s.open(&d, None).await, Err(BlobError::NotFound(_))));
        assert!(matches!(s.open(&d, Some(RangeSpec::Suffix(1))).await, Err(BlobError::NotFound(_))));
        assert_eq!(s.stat(&d).await?, None);
        // The caller's mistakes are not the store's failures.
        assert_eq!(st.metrics().blob_errors_total.with_label_values(&["read"]).get(), 0);
        assert!(Sha256Hex::parse("../../etc/passwd").is_err());
        assert!(Sha256Hex::parse(&"A".repeat(64)).is_err());
        assert!(Sha256Hex::parse(d.as_str()).is_ok());
        s.check().await?;
        assert_eq!(st.temporaries().await?, 0);
        Ok(())
    }

    async fn large_blob_streams_in_parts(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        // 13 MB in uneven chunks: on S3, three 5 MiB parts (the last short) and a copy into place.
        let data: Vec<u8> = (0..13_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let mut w = s.writer(u64::MAX).await?;
        for chunk in data.chunks(65_537) {
            w.write(chunk).await?;
        }
        assert_eq!(w.written(), data.len() as u64);
        let stored = w.finish().await?;
        assert_eq!(stored.sha256, Sha256Hex::of(&data));
        assert!(stored.created);
        assert_eq!(s.stat(&stored.sha256).await?, Some(data.len() as u64));
        assert_eq!(Sha256Hex::of(&read(&*s, &stored.sha256, None).await?), stored.sha256);
        let tail = read(&*s, &stored.sha256, Some(RangeSpec::From { start: 12_000_000, end: None })).await?;
        assert_eq!(tail, data[12_000_000..].to_vec());
        assert_eq!(st.temporaries().await?, 0);
        // The same content again is deduplicated, on the multipart path too.
        let mut again = s.writer(u64::MAX).await?;
        again.write(&data).await?;
        // (The S3 store does not ask: see `identical_content_is_deduplicated`.)
        assert_eq!(again.finish().await?.created, matches!(st, Store::S3(..)));
        assert_eq!(st.temporaries().await?, 0);
        Ok(())
    }

    async fn delete_removes_and_tolerates_missing(st: Store) -> anyhow::Result<()> {
        let s = st.dyn_store();
        let d = s.put_bytes(b"to be collected").await?.sha256;
        s.delete(&d).await?;
        assert_eq!(s.stat(&d).await?, None);
        assert!(matches!(s.open(&d, None).await, Err(BlobError::NotFound(_))));
        s.delete(&d).await?;
        assert_eq!(st.metrics().blob_errors_total.with_label_values(&["delete"]).get(), 0);
        Ok(())
    }

    #[tokio::test]
    async fn failures_are_counted_by_operation() -> anyhow::Result<()> {
        let Some(Store::File(_dir, s)) = file_store().await? else { anyhow::bail!("file store") };
        let errors = |op: &str| s.metrics.blob_errors_total.with_label_values(&[op]).get();
        // A missing blob is the caller's: not counted.
        let missing = Sha256Hex::of(b"not stored");
        assert!(matches!(s.open(&missing, None).await, Err(BlobError::NotFound(_))));
        assert_eq!(errors("read"), 0);
        // The store's own failure: its temporaries' directory is gone.
        std::fs::remove_dir_all(s.root().join("tmp"))?;
        assert!(s.writer(1024).await.is_err());
        assert_eq!(errors("write"), 1);
        Ok(())
    }

    #[tokio::test]
    async fn s3_failures_are_counted_and_clear() -> anyhow::Result<()> {
        // A server that is not there: the store's own failure, counted, with a message that
        // names S3; nothing is retried for long.
        let config = packyard_model::config::S3Config {
            bucket: Some("absent".into()),
            endpoint: Some("http://127.0.0.1:9".into()),
            region: None,
            access_key_id: Some("k".into()),
            secret_access_key: Some("s".into()),
        };
        let s = s3::S3Store::open(&config, Arc::new(Metrics::new()?))?;
        let started = std::time::Instant::now();
        let err = s.put_bytes(b"x").await.err().ok_or_else(|| anyhow::anyhow!("expected an error"))?;
        assert!(err.to_string().contains("S3"), "{err}");
        assert!(s.check().await.is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        assert_eq!(s.metrics.blob_errors_total.with_label_values(&["write"]).get(), 1);
        Ok(())
    }

    #[test]
    fn range_header_parsing() {
        assert_eq!(RangeSpec::parse_header("bytes=0-65535"), Some(RangeSpec::From { start: 0, end: Some(65535) }));
        assert_eq!(RangeSpec::parse_header("bytes=5-"), Some(RangeSpec::From { start: 5, end: None }));
        assert_eq!(RangeSpec::parse_header("bytes=-5"), Some(RangeSpec::Suffix(5)));
        assert_eq!(RangeSpec::parse_header("bytes=5-1"), None);
        assert_eq!(RangeSpec::parse_header("bytes=0-1,3-4"), None);
        assert_eq!(RangeSpec::parse_header("items=0-1"), None);
        assert_eq!(RangeSpec::parse_header("bytes=a-b"), None);
    }
}
