//! The S3 blob store (`blobs.kind = "s3"`): the same content-addressed layout as the file store,
//! `sha256/<aa>/<bb>/<hex>`, in a bucket.
//!
//! A blob's key is its hash, which is known only once the last byte has arrived. A small upload
//! (up to one part) is held in memory, hashed, and stored with one PUT under its final key. A
//! larger one streams as a multipart upload to a temporary key (`tmp/<random>`), never more than
//! [`PARTS_IN_FLIGHT`] parts in memory, and is then copied server-side to its final key and the
//! temporary deleted — so a final key only ever holds a complete blob, as with the file store.
//! An abandoned upload is aborted, which discards its parts, and a temporary left by an upload
//! that ended between completing and copying is deleted in the background. (A process killed at
//! that moment leaves them: the bucket's lifecycle rules in docs/operations.md sweep `tmp/`.)
//! One CopyObject copies at most 5 GiB, so this store refuses larger blobs as they arrive.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectStore, PutPayload, RetryConfig, WriteMultipart,
};
use sha2::{Digest, Sha256};

use super::{count_error, BlobError, BlobRead, BlobStore, BlobWrite, ByteStream, RangeSpec, Sha256Hex, StoredBlob};
use crate::metrics::Metrics;
use packyard_model::config::S3Config;

/// Part size of a multipart upload (S3 requires at least 5 MiB for every part but the last).
pub const DEFAULT_PART_BYTES: usize = 8 << 20;
/// Parts uploading at once: with the part being filled, the memory an upload holds.
const PARTS_IN_FLIGHT: usize = 2;
/// The largest object one CopyObject may copy, and so the largest blob this store takes.
pub const MAX_COPY_BYTES: u64 = 5 << 30;

pub struct S3Store {
    store: Arc<AmazonS3>,
    bucket: String,
    part_bytes: usize,
    pub(crate) metrics: Arc<Metrics>,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store").field("bucket", &self.bucket).finish_non_exhaustive()
    }
}

/// Counts one request to the bucket (`packyard_blob_s3_requests_total{op}`): what the store costs.
fn asked(metrics: &Metrics, op: &str) {
    metrics.blob_s3_requests_total.with_label_values(&[op]).inc();
}

fn store_error(e: object_store::Error) -> BlobError {
    BlobError::Io(io::Error::other(format!("S3: {e}")))
}

fn final_key(digest: &Sha256Hex) -> Path {
    let h = digest.as_str();
    Path::from(format!("sha256/{}/{}/{h}", &h[0..2], &h[2..4]))
}

impl S3Store {
    /// Connects to the bucket named by `blobs.s3` (credentials from the configuration, or the
    /// usual `AWS_*` environment when the configuration has none). Nothing is sent yet: the
    /// readiness check ([`BlobStore::check`]) is the first request.
    pub fn open(config: &S3Config, metrics: Arc<Metrics>) -> Result<Self, BlobError> {
        let bucket = config
            .bucket
            .clone()
            .ok_or_else(|| BlobError::Io(io::Error::other("blobs.s3.bucket is required when blobs.kind = \"s3\"")))?;
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&bucket)
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 3,
                retry_timeout: Duration::from_secs(15),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_timeout(Duration::from_secs(120)),
            );
        // Unset: the `AWS_REGION` of the environment (e.g. IRSA on EKS), else us-east-1.
        if let Some(region) = &config.region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = &config.endpoint {
            // An S3-compatible server (MinIO, Ceph, a test server): path-style addressing, and
            // plain HTTP allowed only when the endpoint itself says so.
            builder = builder
                .with_endpoint(endpoint)
                .with_virtual_hosted_style_request(false)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        if let Some(key) = &config.access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = &config.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        let store = builder.build().map_err(store_error)?;
        Ok(Self { store: Arc::new(store), bucket, part_bytes: DEFAULT_PART_BYTES, metrics })
    }

    /// Uses parts of this size for multipart uploads (at least 5 MiB on real S3).
    pub fn with_part_bytes(mut self, part_bytes: usize) -> Self {
        self.part_bytes = part_bytes.max(1);
        self
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Keys of unfinished uploads' temporaries (tests: nothing may be left behind).
    pub async fn temporaries(&self) -> Result<Vec<String>, BlobError> {
        let mut list = self.store.list(Some(&Path::from("tmp")));
        let mut out = Vec::new();
        while let Some(meta) = list.next().await {
            out.push(meta.map_err(store_error)?.location.to_string());
        }
        Ok(out)
    }

    async fn size_of(&self, key: &Path) -> Result<Option<u64>, BlobError> {
        asked(&self.metrics, "head");
        match self.store.head(key).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error(e)),
        }
    }

    async fn open_inner(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        let key = final_key(digest);
        // A range is resolved against the size first, so that past-the-end is our 416 and not
        // the server's error; a whole blob is one GET.
        let (range, get_range) = match range {
            None => (None, None),
            Some(spec) => {
                let size = self.size_of(&key).await?.ok_or_else(|| BlobError::NotFound(digest.clone()))?;
                let r = spec.resolve(size)?;
                (Some(r), Some(GetRange::Bounded(Range { start: r.start, end: r.end + 1 })))
            }
        };
        let options = GetOptions { range: get_range, ..GetOptions::default() };
        asked(&self.metrics, "get");
        let got = match self.store.get_opts(&key, options).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Err(BlobError::NotFound(digest.clone())),
            Err(e) => return Err(store_error(e)),
        };
        let total_size = got.meta.size;
        let metrics = self.metrics.clone();
        let body: ByteStream = Box::pin(got.into_stream().map(move |chunk| match chunk {
            Ok(c) => {
                metrics.blob_bytes_total.with_label_values(&["out"]).inc_by(c.len() as u64);
                Ok(c)
            }
            Err(e) => {
                metrics.blob_errors_total.with_label_values(&["read"]).inc();
                Err(io::Error::other(format!("S3: {e}")))
            }
        }));
        Ok(BlobRead { total_size, range, body })
    }
}

enum Stage {
    /// Up to one part, in memory.
    Small(Vec<u8>),
    /// Streaming to a temporary key.
    Multipart {
        key: Path,
        upload: WriteMultipart,
    },
    Done,
}

struct S3Write {
    store: Arc<AmazonS3>,
    metrics: Arc<Metrics>,
    part_bytes: usize,
    stage: Stage,
    hasher: Sha256,
    written: u64,
    limit: u64,
}

impl Drop for S3Write {
    fn drop(&mut self) {
        // Unfinished: abort the multipart upload so its parts do not linger (and cost).
        if let Stage::Multipart { upload, key } = std::mem::replace(&mut self.stage, Stage::Done) {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Err(e) = upload.abort().await {
                        tracing::warn!(key = %key, error = %e, "could not abort an abandoned S3 multipart upload");
                    }
                });
            }
        }
    }
}

impl S3Write {
    async fn write_inner(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        let new_len = self.written + chunk.len() as u64;
        if new_len > self.limit {
            return Err(BlobError::TooLarge { limit: self.limit });
        }
        self.hasher.update(chunk);
        self.written = new_len;
        self.metrics.blob_bytes_total.with_label_values(&["in"]).inc_by(chunk.len() as u64);
        match &mut self.stage {
            Stage::Small(buf) if buf.len() + chunk.len() <= self.part_bytes => buf.extend_from_slice(chunk),
            Stage::Small(buf) => {
                let first = std::mem::take(buf);
                let key = Path::from(format!("tmp/{}", hex::encode(rand::random::<[u8; 16]>())));
                asked(&self.metrics, "multipart");
                let upload = self.store.put_multipart(&key).await.map_err(store_error)?;
                let mut upload = WriteMultipart::new_with_chunk_size(upload, self.part_bytes);
                upload.write(&first);
                upload.write(chunk);
                self.stage = Stage::Multipart { key, upload };
            }
            Stage::Multipart { upload, .. } => {
                upload.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(store_error)?;
                upload.write(chunk);
            }
            Stage::Done => return Err(BlobError::Io(io::Error::other("write after finish"))),
        }
        Ok(())
    }

    async fn finish_inner(&mut self) -> Result<StoredBlob, BlobError> {
        // Every part uploaded while the upload is still ours: should one fail, dropping this
        // writer aborts the upload (`WriteMultipart::finish` would return without aborting).
        if let Stage::Multipart { upload, .. } = &mut self.stage {
            upload.wait_for_capacity(0).await.map_err(store_error)?;
        }
        let digest = Sha256Hex(hex::encode(std::mem::take(&mut self.hasher).finalize()));
        let target = final_key(&digest);
        // The blob is written even when it is there, as the file store renames over it, so that
        // a collector that removed it a moment ago does not win. Whether it was there is not
        // asked (a HEAD before every write): the database's row tells the callers that need it
        // (an upload: `hosted::settle`), so `created` is true here.
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Small(buf) => {
                asked(&self.metrics, "put");
                self.store.put(&target, PutPayload::from(buf)).await.map_err(store_error)?;
            }
            Stage::Multipart { key, upload } => {
                // From here the temporary is deleted however this ends (an error, or this
                // future dropped by a client that went away).
                let temporary = Temporary { store: self.store.clone(), key: Some(key) };
                upload.finish().await.map_err(store_error)?;
                let key = temporary.key.as_ref().ok_or_else(|| io::Error::other("temporary key taken"))?;
                asked(&self.metrics, "copy");
                self.store.copy(key, &target).await.map_err(store_error)?;
                temporary.delete().await;
            }
            Stage::Done => return Err(BlobError::Io(io::Error::other("finish after finish"))),
        }
        Ok(StoredBlob { sha256: digest, size: self.written, created: true })
    }
}

/// A multipart upload's temporary object: deleted now ([`Temporary::delete`]) or, if the
/// upload ends otherwise, in the background when this is dropped.
struct Temporary {
    store: Arc<AmazonS3>,
    key: Option<Path>,
}

impl Temporary {
    async fn delete(mut self) {
        if let Some(key) = self.key.take() {
            if let Err(e) = self.store.delete(&key).await {
                tracing::warn!(key = %key, error = %e, "could not delete an S3 upload's temporary");
            }
        }
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if let (Some(key), Ok(rt)) = (self.key.take(), tokio::runtime::Handle::try_current()) {
            let store = self.store.clone();
            rt.spawn(async move {
                if let Err(e) = store.delete(&key).await {
                    tracing::warn!(key = %key, error = %e, "could not delete an S3 upload's temporary");
                }
            });
        }
    }
}

#[async_trait]
impl BlobWrite for S3Write {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        let r = self.write_inner(chunk).await;
        count_error(&self.metrics, "write", r)
    }

    async fn finish(mut self: Box<Self>) -> Result<StoredBlob, BlobError> {
        let r = self.finish_inner().await;
        count_error(&self.metrics, "write", r)
    }

    fn written(&self) -> u64 {
        self.written
    }
}

#[async_trait]
impl BlobStore for S3Store {
    async fn writer(&self, limit: u64) -> Result<Box<dyn BlobWrite>, BlobError> {
        // A multipart upload lands under its hash with one CopyObject, which S3 limits to 5 GiB:
        // a larger upload is refused as it arrives (413), not after the last byte.
        let limit = limit.min(MAX_COPY_BYTES);
        Ok(Box::new(S3Write {
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            part_bytes: self.part_bytes,
            stage: Stage::Small(Vec::with_capacity(64 * 1024)),
            hasher: Sha256::new(),
            written: 0,
            limit,
        }))
    }

    async fn stat(&self, digest: &Sha256Hex) -> Result<Option<u64>, BlobError> {
        let r = self.size_of(&final_key(digest)).await;
        count_error(&self.metrics, "read", r)
    }

    async fn open(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        let r = self.open_inner(digest, range).await;
        count_error(&self.metrics, "read", r)
    }

    async fn list(&self, after: Option<&Sha256Hex>, limit: usize) -> Result<Vec<super::Listed>, BlobError> {
        // Keys sort as their digests do (`sha256/<aa>/<bb>/<hex>`): one listing from the offset.
        let prefix = Path::from("sha256");
        let offset = after.map_or_else(|| Path::from("sha256/"), final_key);
        asked(&self.metrics, "list");
        let mut listing = self.store.list_with_offset(Some(&prefix), &offset);
        let mut out = Vec::with_capacity(limit.min(1024));
        while out.len() < limit {
            let Some(meta) = listing.next().await else { break };
            let meta = match meta {
                Ok(m) => m,
                Err(e) => return count_error(&self.metrics, "read", Err(store_error(e))),
            };
            // Anything else under the prefix is not a blob of this store's.
            let Some(Ok(digest)) = meta.location.filename().map(Sha256Hex::parse) else { continue };
            // (A server that ignored the offset would list the first keys again: never again.)
            if meta.location != final_key(&digest) || after.is_some_and(|a| digest.as_str() <= a.as_str()) {
                continue;
            }
            out.push(super::Listed { digest, size: meta.size, stored_at: meta.last_modified.timestamp_millis() });
        }
        Ok(out)
    }

    async fn delete(&self, digest: &Sha256Hex) -> Result<(), BlobError> {
        asked(&self.metrics, "delete");
        let r = match self.store.delete(&final_key(digest)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error(e)),
        };
        count_error(&self.metrics, "delete", r)
    }

    async fn check(&self) -> Result<(), BlobError> {
        let probe = Path::from(format!("tmp/.probe-{}", hex::encode(rand::random::<[u8; 8]>())));
        self.store.put(&probe, PutPayload::from_static(b"ok")).await.map_err(store_error)?;
        self.store.delete(&probe).await.map_err(store_error)?;
        Ok(())
    }
}

/// Creates a bucket on an S3-compatible test server (which accepts unsigned requests); tests
/// and the local cluster use it, production buckets are made by their operators.
pub async fn create_test_bucket(endpoint: &str, bucket: &str) -> anyhow::Result<()> {
    let url = format!("{}/{bucket}", endpoint.trim_end_matches('/'));
    let resp = reqwest::Client::new().put(&url).send().await?;
    anyhow::ensure!(
        resp.status().is_success() || resp.status() == reqwest::StatusCode::CONFLICT,
        "creating bucket {bucket} at {endpoint}: {}",
        resp.status()
    );
    Ok(())
}
