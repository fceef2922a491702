//! The file store: content-addressed files under one root. A write goes to a temporary file
//! while hashing, is fsynced and renamed into place, so a final name only ever holds a complete
//! blob.

use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::fs::{self, File};
use tokio::io::AsyncReadExt;

use super::{
    count_error, BlobError, BlobRead, BlobStore, BlobWrite, BlockingOpen, ByteRange, ByteStream, RangeSpec, Sha256Hex,
    StoredBlob,
};
use crate::metrics::Metrics;

/// Content-addressed files: `<root>/sha256/<aa>/<bb>/<hex>`, temporaries in `<root>/tmp`.
pub struct FileStore {
    root: PathBuf,
    pub(super) metrics: Arc<Metrics>,
}

impl FileStore {
    /// Opens (creating) the store and removes temporaries abandoned more than a day ago (a
    /// younger one may belong to another process sharing the volume).
    pub async fn open(root: impl Into<PathBuf>, metrics: Arc<Metrics>) -> Result<Self, BlobError> {
        let root = root.into();
        fs::create_dir_all(root.join("tmp")).await?;
        fs::create_dir_all(root.join("sha256")).await?;
        let store = Self { root, metrics };
        store.sweep_temporaries(std::time::Duration::from_secs(86_400)).await?;
        Ok(store)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn final_path(&self, digest: &Sha256Hex) -> PathBuf {
        let h = digest.as_str();
        self.root.join("sha256").join(&h[0..2]).join(&h[2..4]).join(h)
    }

    async fn sweep_temporaries(&self, older_than: std::time::Duration) -> Result<(), BlobError> {
        let mut entries = fs::read_dir(self.root.join("tmp")).await?;
        while let Some(entry) = entries.next_entry().await? {
            let old = entry
                .metadata()
                .await
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > older_than);
            if old {
                let _ = fs::remove_file(entry.path()).await;
            }
        }
        Ok(())
    }
}

/// Bytes gathered before one trip to the blocking pool hashes and writes them: a 4 MiB upload is
/// four trips, not one per network read.
const WRITE_BATCH: usize = 1024 * 1024;

/// A piece smaller than this is copied into the batch's tail rather than kept as it arrived: a
/// batch holds at most `2 × WRITE_BATCH / SMALL_PIECE` pieces whatever the client sends.
const SMALL_PIECE: usize = 16 * 1024;

struct FileWrite {
    /// The temporary and the running hash; taken by each blocking step and handed back.
    state: Option<(std::fs::File, Sha256)>,
    /// Pieces received and not yet hashed and written: a large piece as it arrived (no copy),
    /// small ones copied together into `tail` first (a client sending tiny chunks must not make
    /// a handle, and keep a buffer alive, per byte).
    pending: Vec<Bytes>,
    tail: bytes::BytesMut,
    /// Bytes in `pending` and `tail`.
    pending_len: usize,
    temp: PathBuf,
    written: u64,
    limit: u64,
    store_root: PathBuf,
    pub(super) metrics: Arc<Metrics>,
    /// `packyard_blob_bytes_total{direction="in"}`, resolved once.
    bytes_in: crate::metrics::IntCounter,
    done: bool,
}

impl Drop for FileWrite {
    fn drop(&mut self) {
        if !self.done {
            // Unfinished: the temporary must not outlive the upload.
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Runs file work on the blocking pool; a full disk is [`BlobError::Full`].
async fn blocking_write<T: Send + 'static>(f: impl FnOnce() -> io::Result<T> + Send + 'static) -> Result<T, BlobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BlobError::Io(io::Error::other(e.to_string())))?
        .map_err(BlobError::from_write)
}

impl FileWrite {
    /// Hashes and writes what is pending, off the async executor: one vectored write per batch.
    async fn flush_pending(&mut self) -> Result<(), BlobError> {
        if !self.tail.is_empty() {
            self.pending.push(self.tail.split().freeze());
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let (mut file, mut hasher) = self.state.take().ok_or_else(|| io::Error::other("write after a failed write"))?;
        let pieces = std::mem::take(&mut self.pending);
        self.pending_len = 0;
        let (file, hasher, mut pieces) = blocking_write(move || {
            for p in &pieces {
                hasher.update(p);
            }
            write_all_pieces(&mut file, &pieces)?;
            Ok((file, hasher, pieces))
        })
        .await?;
        pieces.clear();
        self.pending = pieces;
        self.state = Some((file, hasher));
        Ok(())
    }
}

/// Writes every piece, in order, with as few system calls as the kernel allows (`writev` takes
/// at most 1,024 slices).
fn write_all_pieces(file: &mut std::fs::File, pieces: &[Bytes]) -> io::Result<()> {
    use std::io::{IoSlice, Write as _};
    for group in pieces.chunks(1024) {
        // An empty piece would make a write of nothing look like a full disk.
        let mut slices: Vec<IoSlice<'_>> = group.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            let n = match file.write_vectored(rest) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            IoSlice::advance_slices(&mut rest, n);
        }
    }
    Ok(())
}

#[async_trait]
impl BlobWrite for FileWrite {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        self.write_bytes(Bytes::copy_from_slice(chunk)).await
    }

    async fn write_bytes(&mut self, chunk: Bytes) -> Result<(), BlobError> {
        let new_len = self.written + chunk.len() as u64;
        if new_len > self.limit {
            return Err(BlobError::TooLarge { limit: self.limit });
        }
        if chunk.is_empty() {
            return Ok(());
        }
        self.written = new_len;
        self.bytes_in.inc_by(chunk.len() as u64);
        self.pending_len += chunk.len();
        if chunk.len() < SMALL_PIECE {
            self.tail.extend_from_slice(&chunk);
            if self.tail.len() >= SMALL_PIECE {
                self.pending.push(self.tail.split().freeze());
            }
        } else {
            if !self.tail.is_empty() {
                self.pending.push(self.tail.split().freeze());
            }
            self.pending.push(chunk);
        }
        if self.pending_len >= WRITE_BATCH {
            let flushed = self.flush_pending().await;
            count_error(&self.metrics, "write", flushed)?;
        }
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> Result<StoredBlob, BlobError> {
        let metrics = self.metrics.clone();
        let done = self.finish_inner().await;
        count_error(&metrics, "write", done)
    }

    fn written(&self) -> u64 {
        self.written
    }
}

impl FileWrite {
    async fn finish_inner(mut self: Box<Self>) -> Result<StoredBlob, BlobError> {
        self.flush_pending().await?;
        let (file, hasher) = self.state.take().ok_or_else(|| io::Error::other("finish after a failed write"))?;
        let (temp, root, written) = (self.temp.clone(), self.store_root.clone(), self.written);
        // One trip: fsync, hash, rename into place (over identical content, atomically: should
        // a collector have removed it a moment ago, this write puts it back), fsync the directory.
        let (digest, existed) = blocking_write(move || {
            file.sync_all()?;
            drop(file);
            let digest = Sha256Hex(hex::encode(hasher.finalize()));
            let h = digest.as_str();
            let dir = root.join("sha256").join(&h[0..2]).join(&h[2..4]);
            let target = dir.join(h);
            let existed = std::fs::metadata(&target).is_ok_and(|m| m.len() == written);
            std::fs::create_dir_all(&dir)?;
            std::fs::rename(&temp, &target)?;
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok((digest, existed))
        })
        .await?;
        self.done = true;
        Ok(StoredBlob { sha256: digest, size: self.written, created: !existed })
    }
}

/// Parts up to this size are read in one go on the blocking pool and sent as one chunk.
const SMALL_READ: u64 = 256 * 1024;
/// Read size for larger bodies.
const LARGE_READ: usize = 1024 * 1024;

struct Opened {
    total_size: u64,
    range: Option<ByteRange>,
    len: u64,
    content: Content,
}

enum Content {
    Bytes(Bytes),
    File(std::fs::File),
}

/// `FileStore::open` itself (the trait method counts its failures).
async fn file_open(store: &FileStore, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
    // One trip to the blocking pool: open, size, seek — and for a small part (a Range of a
    // package, a small file) the bytes themselves, sent as one chunk.
    let path = store.final_path(digest);
    let missing = digest.clone();
    let opened = tokio::task::spawn_blocking(move || -> Result<Opened, BlobError> {
        use std::io::{Read, Seek};
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(BlobError::NotFound(missing)),
            Err(e) => return Err(e.into()),
        };
        let total_size = file.metadata()?.len();
        let range = range.map(|r| r.resolve(total_size)).transpose()?;
        let (start, len) = range.map_or((0, total_size), |r| (r.start, r.len()));
        if start > 0 {
            file.seek(SeekFrom::Start(start))?;
        }
        if len <= SMALL_READ {
            let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
            file.read_exact(&mut buf)?;
            return Ok(Opened { total_size, range, len, content: Content::Bytes(Bytes::from(buf)) });
        }
        Ok(Opened { total_size, range, len, content: Content::File(file) })
    })
    .await
    .map_err(|e| BlobError::Io(io::Error::other(e.to_string())))??;
    let metrics = store.metrics.clone();
    let Opened { total_size, range, len, content } = opened;
    let body: ByteStream = match content {
        Content::Bytes(b) => {
            metrics.blob_bytes_total.with_label_values(&["out"]).inc_by(b.len() as u64);
            Box::pin(futures_util::stream::once(async move { Ok(b) }))
        }
        Content::File(f) => {
            // 1 MiB reads: a 4 MiB package is four trips to the blocking pool, and no
            // blocking thread waits on a slow client.
            let reader = File::from_std(f).take(len);
            Box::pin(tokio_util::io::ReaderStream::with_capacity(reader, LARGE_READ).map(move |chunk| {
                if let Ok(c) = &chunk {
                    metrics.blob_bytes_total.with_label_values(&["out"]).inc_by(c.len() as u64);
                }
                chunk
            }))
        }
    };
    Ok(BlobRead { total_size, range, body })
}

#[async_trait]
impl BlobStore for FileStore {
    async fn writer(&self, limit: u64) -> Result<Box<dyn BlobWrite>, BlobError> {
        let name = format!("{}.part", hex::encode(rand::random::<[u8; 16]>()));
        let temp = self.root.join("tmp").join(name);
        let file = blocking_write({
            let temp = temp.clone();
            move || std::fs::File::create(temp)
        })
        .await;
        let file = count_error(&self.metrics, "write", file)?;
        Ok(Box::new(FileWrite {
            state: Some((file, Sha256::new())),
            pending: Vec::new(),
            tail: bytes::BytesMut::new(),
            pending_len: 0,
            temp,
            written: 0,
            limit,
            store_root: self.root.clone(),
            metrics: self.metrics.clone(),
            bytes_in: self.metrics.blob_bytes_total.with_label_values(&["in"]),
            done: false,
        }))
    }

    async fn stat(&self, digest: &Sha256Hex) -> Result<Option<u64>, BlobError> {
        match fs::metadata(self.final_path(digest)).await {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn open(&self, digest: &Sha256Hex, range: Option<RangeSpec>) -> Result<BlobRead, BlobError> {
        count_error(&self.metrics, "read", file_open(self, digest, range).await)
    }

    fn blocking_open(&self, digest: &Sha256Hex) -> Option<BlockingOpen> {
        let path = self.final_path(digest);
        let missing = digest.clone();
        let metrics = self.metrics.clone();
        Some(Box::new(move || {
            let opened = match std::fs::File::open(&path) {
                Ok(f) => Ok(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(BlobError::NotFound(missing)),
                Err(e) => Err(e.into()),
            };
            let inner = count_error(&metrics, "read", opened)?;
            let out = metrics.blob_bytes_total.with_label_values(&["out"]);
            Ok(Box::new(Counted { inner, out }) as Box<dyn io::Read + Send>)
        }))
    }

    async fn list(&self, after: Option<&Sha256Hex>, limit: usize) -> Result<Vec<super::Listed>, BlobError> {
        let root = self.root.join("sha256");
        let after = after.map(|d| d.as_str().to_string()).unwrap_or_default();
        let listed = blocking_write(move || list_files(&root, &after, limit)).await;
        count_error(&self.metrics, "read", listed)
    }

    async fn delete(&self, digest: &Sha256Hex) -> Result<(), BlobError> {
        let path = self.final_path(digest);
        let done = match fs::remove_file(path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        };
        count_error(&self.metrics, "delete", done)
    }

    async fn check(&self) -> Result<(), BlobError> {
        let probe = self.root.join("tmp").join(format!(".probe-{}", hex::encode(rand::random::<[u8; 8]>())));
        fs::write(&probe, b"ok").await.map_err(BlobError::from_write)?;
        fs::remove_file(&probe).await?;
        Ok(())
    }
}

/// The blob files under `root` (`<aa>/<bb>/<hex>`) whose digests sort after `after`, in digest
/// order, up to `limit`: the directories before `after`'s are skipped unread.
fn list_files(root: &Path, after: &str, limit: usize) -> io::Result<Vec<super::Listed>> {
    /// The names in `dir`, sorted: the directories' (`dirs`) or the files'; anything else there
    /// (a stray file among the directories) is not a blob's and is passed over.
    fn sorted(dir: &Path, dirs: bool) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type().is_ok_and(|t| t.is_dir() == dirs) {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort_unstable();
        Ok(names)
    }
    let (a, b) = (after.get(0..2).unwrap_or(""), after.get(2..4).unwrap_or(""));
    let mut out = Vec::new();
    for first in sorted(root, true)?.into_iter().filter(|n| n.as_str() >= a) {
        for second in sorted(&root.join(&first), true)?.into_iter().filter(|n| first.as_str() > a || n.as_str() >= b) {
            let dir = root.join(&first).join(&second);
            for name in sorted(&dir, false)?.into_iter().filter(|n| n.as_str() > after) {
                // A file that is not a blob's (or went meanwhile) is not listed.
                let Ok(digest) = Sha256Hex::parse(&name) else { continue };
                if !(name.starts_with(&first) && name[2..].starts_with(&second)) {
                    continue;
                }
                let Ok(meta) = std::fs::metadata(dir.join(&name)) else { continue };
                let stored_at = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                out.push(super::Listed { digest, size: meta.len(), stored_at });
                if out.len() >= limit {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

/// A file read that counts its bytes as read out of the store.
struct Counted<R> {
    inner: R,
    out: prometheus::IntCounter,
}

impl<R: io::Read> io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.inc_by(n as u64);
        Ok(n)
    }
}
