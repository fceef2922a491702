//! One index's files, written as text arrives: `Packages` (or `Sources`) and its gzip and xz
//! forms, each hashed on the way for `Release` (the three forms of a chunk in parallel), with
//! their `by-hash` names. Hosted builds and group merges both write through it.

use std::sync::Arc;

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use packyard_core::publication::{BuildContext, BuildError, FileSink};

/// The four digests and the size of one index file, as Release lists them.
pub(crate) struct Hashed {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) md5: String,
    pub(crate) sha1: String,
    pub(crate) sha256: String,
    pub(crate) sha512: String,
}

#[derive(Default, Clone)]
pub(crate) struct Hashers {
    md5: Md5,
    sha1: Sha1,
    sha256: Sha256,
    sha512: Sha512,
    size: u64,
}

impl Hashers {
    pub(crate) fn update(&mut self, b: &[u8]) {
        self.md5.update(b);
        self.sha1.update(b);
        self.sha256.update(b);
        self.sha512.update(b);
        self.size += b.len() as u64;
    }

    pub(crate) fn finish(self, path: String) -> Hashed {
        Hashed {
            path,
            size: self.size,
            md5: hex::encode(self.md5.finalize()),
            sha1: hex::encode(self.sha1.finalize()),
            sha256: hex::encode(self.sha256.finalize()),
            sha512: hex::encode(self.sha512.finalize()),
        }
    }
}

pub(crate) const TEXT: &str = "text/plain; charset=utf-8";

/// xz preset for `Packages.xz`: preset 1 compresses a 100,000-package index about ten times
/// faster than preset 6 for about a fifth more bytes (docs/perf/apt-build.md).
pub(crate) const XZ_PRESET: u32 = 1;

/// One index of a distribution: `dists/<dist>/<component>/binary-<arch>/Packages`, or
/// `dists/<dist>/<component>/source/Sources` (`arch` is `source`).
#[derive(Clone, Copy)]
pub(crate) struct IndexId<'a> {
    pub component: &'a str,
    pub arch: &'a str,
    pub dist: &'a str,
    /// `<component>/binary-<arch>` or `<component>/source`
    pub base: &'a str,
    /// `Packages` or `Sources`
    pub stem: &'a str,
}

impl<'a> IndexId<'a> {
    /// The component's `Sources` index (`base` is `<component>/source`).
    pub(crate) fn sources(dist: &'a str, component: &'a str, base: &'a str) -> Self {
        Self { component, arch: "source", dist, base, stem: "Sources" }
    }
}

/// An encoder of one compressed index form whose output is taken after every chunk.
trait Encoder: std::io::Write + Send + 'static {
    fn take_output(&mut self) -> Vec<u8>;
    fn finish_output(self) -> std::io::Result<Vec<u8>>;
}

impl Encoder for flate2::write::GzEncoder<Vec<u8>> {
    fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(self.get_mut())
    }
    fn finish_output(self) -> std::io::Result<Vec<u8>> {
        self.finish()
    }
}

impl Encoder for liblzma::write::XzEncoder<Vec<u8>> {
    fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(self.get_mut())
    }
    fn finish_output(self) -> std::io::Result<Vec<u8>> {
        self.finish()
    }
}

/// Runs CPU work (compression, hashing) on a blocking thread, so that the forms of one chunk
/// are produced in parallel and the executor keeps reading the next page.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, BuildError> {
    tokio::task::spawn_blocking(f).await.map_err(other)?.map_err(other)
}

/// Compresses one chunk and hashes the compressed bytes; returns the state and the bytes.
async fn compress<E: Encoder>(state: (E, Hashers), text: Arc<str>) -> Result<((E, Hashers), Vec<u8>), BuildError> {
    blocking(move || {
        let (mut encoder, mut hash) = state;
        encoder.write_all(text.as_bytes())?;
        let out = encoder.take_output();
        hash.update(&out);
        Ok(((encoder, hash), out))
    })
    .await
}

type GzState = (flate2::write::GzEncoder<Vec<u8>>, Hashers);
type XzState = (liblzma::write::XzEncoder<Vec<u8>>, Hashers);

/// The three files of one index, written as text arrives: `Packages` (or `Sources`) and its
/// gzip and xz forms, each hashed on the way (the three forms of a chunk in parallel).
pub(crate) struct IndexWriter {
    base: String,
    stem: String,
    dist: String,
    plain: FileSink,
    gz: FileSink,
    xz: FileSink,
    plain_hash: Option<Hashers>,
    gz_state: Option<GzState>,
    xz_state: Option<XzState>,
}

pub(crate) fn other(e: impl std::fmt::Display) -> BuildError {
    BuildError::Other(e.to_string())
}

fn gone() -> BuildError {
    BuildError::Other("an index writer was used after a failed write".into())
}

impl IndexWriter {
    pub(crate) async fn open(ctx: &BuildContext<'_>, id: &IndexId<'_>) -> Result<Self, BuildError> {
        let IndexId { dist, base, stem, .. } = *id;
        Ok(Self {
            plain: ctx.file(&format!("dists/{dist}/{base}/{stem}"), TEXT).await?,
            gz: ctx.file(&format!("dists/{dist}/{base}/{stem}.gz"), "application/gzip").await?,
            xz: ctx.file(&format!("dists/{dist}/{base}/{stem}.xz"), "application/x-xz").await?,
            base: base.to_string(),
            stem: stem.to_string(),
            dist: dist.to_string(),
            plain_hash: Some(Hashers::default()),
            gz_state: Some((
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()),
                Hashers::default(),
            )),
            xz_state: Some((liblzma::write::XzEncoder::new(Vec::new(), XZ_PRESET), Hashers::default())),
        })
    }

    /// Appends whole stanzas.
    pub(crate) async fn push(&mut self, text: &str) -> Result<(), BuildError> {
        if text.is_empty() {
            return Ok(());
        }
        let text: Arc<str> = Arc::from(text);
        let gz = self.gz_state.take().ok_or_else(gone)?;
        let xz = self.xz_state.take().ok_or_else(gone)?;
        let mut hash = self.plain_hash.take().ok_or_else(gone)?;
        let t = text.clone();
        let hashed = blocking(move || {
            hash.update(t.as_bytes());
            Ok(hash)
        });
        let (gz, xz, hashed) = tokio::join!(compress(gz, text.clone()), compress(xz, text.clone()), hashed);
        let ((gz_state, gz_out), (xz_state, xz_out)) = (gz?, xz?);
        self.plain_hash = Some(hashed?);
        self.gz_state = Some(gz_state);
        self.xz_state = Some(xz_state);
        self.plain.write(text.as_bytes()).await?;
        self.gz.write(&gz_out).await?;
        self.xz.write(&xz_out).await?;
        Ok(())
    }

    /// Finishes the three files, adds them and their by-hash names, and returns what Release
    /// lists for them.
    pub(crate) async fn finish(mut self, ctx: &mut BuildContext<'_>) -> Result<[Hashed; 3], BuildError> {
        let (gz, mut gz_hash) = self.gz_state.take().ok_or_else(gone)?;
        let tail = gz.finish_output().map_err(other)?;
        self.gz.write(&tail).await?;
        gz_hash.update(&tail);
        let (xz, mut xz_hash) = self.xz_state.take().ok_or_else(gone)?;
        let tail = blocking(move || xz.finish_output()).await?;
        self.xz.write(&tail).await?;
        xz_hash.update(&tail);
        let plain_hash = self.plain_hash.take().ok_or_else(gone)?;
        ctx.add(self.plain).await?;
        ctx.add(self.gz).await?;
        ctx.add(self.xz).await?;
        let (base, stem) = (&self.base, &self.stem);
        let hashed = [
            plain_hash.finish(format!("{base}/{stem}")),
            gz_hash.finish(format!("{base}/{stem}.gz")),
            xz_hash.finish(format!("{base}/{stem}.xz")),
        ];
        for h in &hashed {
            let full = format!("dists/{}/{}", self.dist, h.path);
            ctx.alias(&format!("dists/{}/{base}/by-hash/SHA256/{}", self.dist, h.sha256), &full)?;
            ctx.alias(&format!("dists/{}/{base}/by-hash/SHA512/{}", self.dist, h.sha512), &full)?;
        }
        Ok(hashed)
    }
}
