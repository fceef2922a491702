//! The APT snapshot of one distribution: per component and architecture `Packages`,
//! `Packages.gz` and `Packages.xz` (with `Architecture: all` packages in every architecture's index), their
//! `by-hash` names, and `Release` with MD5Sum/SHA1/SHA256/SHA512 sections. Rows stream in keyset
//! pages; only one page and the compressor's buffer are in memory at a time.

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use super::hosted::KIND;
use packyard_codecs::apt::packages::{render_stanza, PoolFile};
use packyard_core::publication::{BuildContext, BuildError, Builder, FileSink};
use packyard_model::repos::RepoType;
use packyard_store::db::publication::UnitRecord;

pub struct AptBuilder {
    pub page_size: i64,
    /// Where each repository's signing key is sealed.
    pub keystore: std::sync::Arc<packyard_core::security::keystore::KeyStore>,
    /// Where members' published and proxied indexes are read from (groups).
    pub blobs: std::sync::Arc<dyn packyard_store::blobs::BlobStore>,
    /// Fetches proxy members' upstream indexes (groups).
    pub proxy: Option<packyard_core::proxy::Proxy>,
}

/// The four digests and the size of one index file, as Release lists them.
pub(super) struct Hashed {
    path: String,
    size: u64,
    md5: String,
    sha1: String,
    sha256: String,
    sha512: String,
}

#[derive(Default)]
pub(super) struct Hashers {
    md5: Md5,
    sha1: Sha1,
    sha256: Sha256,
    sha512: Sha512,
    size: u64,
}

impl Hashers {
    fn update(&mut self, b: &[u8]) {
        self.md5.update(b);
        self.sha1.update(b);
        self.sha256.update(b);
        self.sha512.update(b);
        self.size += b.len() as u64;
    }

    fn finish(self, path: String) -> Hashed {
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

const TEXT: &str = "text/plain; charset=utf-8";

/// xz preset for `Packages.xz`: preset 1 compresses a 100,000-package index about ten times
/// faster than preset 6 for about a fifth more bytes (docs/perf/apt-build.md).
const XZ_PRESET: u32 = 1;

#[async_trait]
impl Builder for AptBuilder {
    fn kind(&self) -> &'static str {
        KIND
    }

    async fn build(&self, ctx: &mut BuildContext<'_>, unit: &UnitRecord) -> Result<(), BuildError> {
        let repo = ctx
            .db
            .repository_by_id(unit.repository_id)
            .await?
            .ok_or_else(|| BuildError::Other(format!("repository {} is gone", unit.repository_id)))?;
        let settings = repo.settings.apt.clone().unwrap_or_default();
        let dist = unit.unit_key.as_str();
        let mut archs: Vec<&str> = settings.architectures.iter().map(String::as_str).filter(|a| *a != "all").collect();
        if archs.is_empty() {
            archs.push("all");
        }
        let mut indexes = Vec::new();
        let mut sources = std::collections::BTreeMap::new();
        for component in &settings.components {
            for arch in &archs {
                let base = format!("{component}/binary-{arch}");
                let id = IndexId { component, arch, dist, base: &base };
                let files = match repo.repo_type {
                    RepoType::Hosted => self.index(ctx, repo.id, &id).await?,
                    RepoType::Group => self.group_index(ctx, &repo, &id, &mut sources).await?,
                    RepoType::Proxy => {
                        return Err(BuildError::Other(format!("proxy repository {} publishes nothing", repo.name)))
                    }
                };
                indexes.extend(files);
            }
        }
        let now = packyard_store::db::now_ms();
        let mut release = String::new();
        let origin = settings.origin.clone().unwrap_or_else(|| repo.name.to_string());
        let label = settings.label.clone().unwrap_or_else(|| repo.name.to_string());
        let _ = write!(
            release,
            "Origin: {origin}\nLabel: {label}\nSuite: {dist}\nCodename: {dist}\nDate: {}\nArchitectures: {}\nComponents: {}\nDescription: {} served by Packyard\nAcquire-By-Hash: yes\n",
            packyard_model::time::rfc1123_utc(now),
            archs.join(" "),
            settings.components.join(" "),
            repo.name
        );
        for (section, pick) in [
            ("MD5Sum", (|h: &Hashed| h.md5.clone()) as fn(&Hashed) -> String),
            ("SHA1", |h: &Hashed| h.sha1.clone()),
            ("SHA256", |h: &Hashed| h.sha256.clone()),
            ("SHA512", |h: &Hashed| h.sha512.clone()),
        ] {
            let _ = writeln!(release, "{section}:");
            for h in &indexes {
                let _ = writeln!(release, " {} {:>16} {}", pick(h), h.size, h.path);
            }
        }
        let signer = crate::apt::keys::signer(
            ctx.db,
            &self.keystore,
            repo.id,
            &format!("{label} (Packyard repository {}) <packyard@{}>", repo.name, repo.name),
        )
        .await
        .map_err(|e| BuildError::Other(format!("signing key: {e}")))?;
        let inrelease = signer.clearsign(&release).map_err(|e| BuildError::Other(e.to_string()))?;
        let detached = signer.detached(release.as_bytes()).map_err(|e| BuildError::Other(e.to_string()))?;
        if repo.repo_type == RepoType::Group {
            let text = super::group::render_sources(&sources);
            ctx.put(&super::group::sources_path(dist), TEXT, text.as_bytes()).await?;
        }
        ctx.put(&format!("dists/{dist}/Release"), TEXT, release.as_bytes()).await?;
        ctx.put(&format!("dists/{dist}/InRelease"), TEXT, inrelease.as_bytes()).await?;
        ctx.put(&format!("dists/{dist}/Release.gpg"), "application/pgp-signature", detached.as_bytes()).await?;
        Ok(())
    }

    async fn after_publish(&self, db: &packyard_store::db::Db, unit: &UnitRecord) -> Result<bool, BuildError> {
        use super::group::GroupHooks;
        self.groups_after_publish(db, unit).await
    }

    async fn refresh(&self, db: &packyard_store::db::Db) -> Result<bool, BuildError> {
        use super::group::GroupHooks;
        self.groups_refresh(db).await
    }
}

/// One index of a distribution: `dists/<dist>/<component>/binary-<arch>/`.
#[derive(Clone, Copy)]
pub(super) struct IndexId<'a> {
    pub component: &'a str,
    pub arch: &'a str,
    pub dist: &'a str,
    /// `<component>/binary-<arch>`
    pub base: &'a str,
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
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> std::io::Result<T> + Send + 'static) -> Result<T, BuildError> {
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

/// The three files of one architecture's index, written as text arrives: `Packages` and its
/// gzip and xz forms, each hashed on the way (the three forms of a chunk in parallel).
pub(super) struct IndexWriter {
    base: String,
    dist: String,
    plain: FileSink,
    gz: FileSink,
    xz: FileSink,
    plain_hash: Option<Hashers>,
    gz_state: Option<GzState>,
    xz_state: Option<XzState>,
}

fn other(e: impl std::fmt::Display) -> BuildError {
    BuildError::Other(e.to_string())
}

fn gone() -> BuildError {
    BuildError::Other("an index writer was used after a failed write".into())
}

impl IndexWriter {
    pub(super) async fn open(ctx: &BuildContext<'_>, dist: &str, base: &str) -> Result<Self, BuildError> {
        Ok(Self {
            plain: ctx.file(&format!("dists/{dist}/{base}/Packages"), TEXT).await?,
            gz: ctx.file(&format!("dists/{dist}/{base}/Packages.gz"), "application/gzip").await?,
            xz: ctx.file(&format!("dists/{dist}/{base}/Packages.xz"), "application/x-xz").await?,
            base: base.to_string(),
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
    pub(super) async fn push(&mut self, text: &str) -> Result<(), BuildError> {
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
    pub(super) async fn finish(mut self, ctx: &mut BuildContext<'_>) -> Result<[Hashed; 3], BuildError> {
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
        let base = &self.base;
        let hashed = [
            plain_hash.finish(format!("{base}/Packages")),
            gz_hash.finish(format!("{base}/Packages.gz")),
            xz_hash.finish(format!("{base}/Packages.xz")),
        ];
        for h in &hashed {
            let full = format!("dists/{}/{}", self.dist, h.path);
            ctx.alias(&format!("dists/{}/{base}/by-hash/SHA256/{}", self.dist, h.sha256), &full)?;
            ctx.alias(&format!("dists/{}/{base}/by-hash/SHA512/{}", self.dist, h.sha512), &full)?;
        }
        Ok(hashed)
    }
}

impl AptBuilder {
    /// Fills in the MD5 that uploads leave to the worker: read from the blob (two at a time,
    /// hashed on the blocking pool) and stored, so each package is hashed once.
    async fn complete_digests(
        &self,
        db: &packyard_store::db::Db,
        page: &mut [crate::apt::rows::AptPackage],
    ) -> Result<(), BuildError> {
        use futures_util::StreamExt as _;
        let missing: Vec<usize> = page.iter().enumerate().filter(|(_, p)| p.md5.is_empty()).map(|(i, _)| i).collect();
        let blobs = self.blobs.clone();
        let jobs = missing.into_iter().map(|i| {
            let blobs = blobs.clone();
            let sha256 = page[i].sha256.clone();
            async move {
                // Streamed: a package of any size costs a chunk of memory, not its size.
                let mut read = blobs.open(&packyard_store::blobs::Sha256Hex::parse(&sha256)?, None).await?;
                let mut md5 = Md5::new();
                while let Some(chunk) = read.body.next().await {
                    let chunk = chunk.map_err(other)?;
                    md5 = blocking(move || {
                        md5.update(&chunk);
                        Ok(md5)
                    })
                    .await?;
                }
                Ok::<_, BuildError>((i, hex::encode(md5.finalize())))
            }
        });
        let done: Vec<Result<(usize, String), BuildError>> =
            futures_util::stream::iter(jobs).buffer_unordered(2).collect().await;
        for d in done {
            let (i, md5) = d?;
            crate::apt::rows::rows(db).set_apt_md5(page[i].id, &md5).await?;
            page[i].md5 = md5;
        }
        Ok(())
    }

    /// Streams one architecture's index of a hosted repository from its rows, a page at a time.
    async fn index(&self, ctx: &mut BuildContext<'_>, repo: i64, id: &IndexId<'_>) -> Result<[Hashed; 3], BuildError> {
        let IndexId { component, arch, dist, base } = *id;
        let mut out = IndexWriter::open(ctx, dist, base).await?;
        let db = ctx.db;
        let mut text = String::new();
        let rows = crate::apt::rows::rows(db);
        let mut page = rows.apt_index_page(repo, component, arch, 0, self.page_size).await?;
        while let Some(after) = page.last().map(|p| p.id) {
            self.complete_digests(db, &mut page).await?;
            text.clear();
            for p in &page {
                let file = PoolFile {
                    filename: &p.pool_path,
                    size: u64::try_from(p.size).unwrap_or(0),
                    md5: &p.md5,
                    sha256: &p.sha256,
                };
                render_stanza(&mut text, &p.control, &file);
            }
            // The next page is read while this one is compressed.
            let (pushed, next) =
                tokio::join!(out.push(&text), rows.apt_index_page(repo, component, arch, after, self.page_size));
            pushed?;
            page = next?;
        }
        out.finish(ctx).await
    }
}
