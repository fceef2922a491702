//! Export and import for air-gapped sites (`packyard-api export`, `packyard-api import bundle`):
//! a bundle is a repository's (or one of its snapshots') components — each its catalogue key,
//! its time and its files by path and digest — in `manifest.json`, signed with the exporting
//! instance's Ed25519 key (`manifest.sig`), and the blobs it carries under
//! `blobs/<two hex>/<sha256>`. An export made `--since` an earlier one carries only the blobs
//! that one did not; its manifest still lists every component, so an import makes the target
//! what the source was: new components stored, changed ones replaced, the others deleted.
//!
//! A bundle is a directory or the same files as a tar stream (the manifest and its signature
//! first). An import checks the signature and every blob's digest and size before it stores a
//! single component; it stores them as a copy does (`hosted::Copies::import_components`: each
//! file inspected as its upload is), in batches, so that a second run after an interruption
//! goes on — what is stored already is unchanged — and running it twice changes nothing. The
//! importing instance publishes its own indexes, signed with its own keys.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ed25519_dalek::{Signer as _, Verifier as _};
use futures_util::{StreamExt, TryStreamExt};
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::blobs::{Sha256Hex, StoredBlob};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::formats::Registry;
use crate::hosted::{Actor, Listed, ListedFile};
use crate::repositories::RepositoryService;
use crate::services::Services;

pub const MANIFEST: &str = "manifest.json";
pub const SIGNATURE: &str = "manifest.sig";
/// The bundle layout this version writes and reads.
pub const VERSION: u32 = 1;
/// Where the instance's bundle key is sealed.
const KEY_NAME: &str = "instance:bundle";
/// Blobs copied at once by an export and an import.
const STORES: usize = 4;
/// Components stored per transaction on import.
const BATCH: usize = 200;
/// The largest manifest read (a million components fit).
const MAX_MANIFEST: u64 = 1 << 30;
/// The actor of an import's audit entries.
pub const IMPORTER: &str = "bundle-import";

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The request or the bundle is not usable: the message says what to change.
    #[error("{0}")]
    Invalid(String),
    /// What was asked for is not there (a snapshot).
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Io(String),
    #[error(transparent)]
    Db(#[from] packyard_store::db::DbError),
    #[error(transparent)]
    Blob(#[from] packyard_store::blobs::BlobError),
    #[error(transparent)]
    Upload(#[from] crate::hosted::UploadError),
    #[error(transparent)]
    Repository(#[from] crate::repositories::RepoError),
}

fn io(what: impl std::fmt::Display, e: impl std::fmt::Display) -> BundleError {
    BundleError::Io(format!("{what}: {e}"))
}

/// What `manifest.json` says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The layout's version ([`VERSION`]).
    pub packyard_bundle: u32,
    /// The exporting instance: its bundle key's fingerprint.
    pub instance: String,
    /// RFC 3339.
    pub created_at: String,
    pub repository: BundleRepository,
    /// The snapshot exported, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The SHA-256 of the manifest of the export this one follows (`--since`): the blobs its
    /// components list that this bundle does not carry came with that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<String>,
    /// What the repository had been written when it was listed: a count that only grows (its
    /// publication units' requested revisions; a snapshot's id), the same on every replica of
    /// the source. A follower refuses a manifest whose generation is below the last it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    pub components: Vec<BundleComponent>,
    /// The blobs this bundle carries.
    pub blobs: Vec<BundleBlob>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BundleRepository {
    pub name: String,
    pub format: Format,
    /// The format's settings block (what an import creates a missing repository with).
    #[serde(default)]
    pub settings: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BundleComponent {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub name: String,
    pub version: String,
    pub created_at: i64,
    pub files: Vec<ListedFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields)]
pub struct BundleBlob {
    pub sha256: String,
    pub size: i64,
}

/// What `manifest.sig` says: the signature of `manifest.json`'s bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub algorithm: String,
    /// The instance's public key (base64).
    pub public_key: String,
    pub signature: String,
}

/// A key's fingerprint: the first 16 bytes of its SHA-256, hex.
pub fn fingerprint(public: &ed25519_dalek::VerifyingKey) -> String {
    hex::encode(&sha2::Sha256::digest(public.as_bytes())[..16])
}

/// The instance's bundle key: made on first use, sealed in the key store.
pub async fn instance_key(services: &Services) -> Result<ed25519_dalek::SigningKey, BundleError> {
    let keystore = &services.security.keystore;
    let sealed = |e: crate::security::keystore::KeyStoreError| BundleError::Io(format!("the instance key: {e}"));
    if keystore.get(&services.db, KEY_NAME).await.map_err(sealed)?.is_none() {
        let seed: [u8; 32] = rand::random();
        keystore.put_if_absent(&services.db, KEY_NAME, &seed).await.map_err(sealed)?;
    }
    let bytes = keystore
        .get(&services.db, KEY_NAME)
        .await
        .map_err(sealed)?
        .ok_or_else(|| BundleError::Io("the instance key is gone".into()))?;
    let seed: [u8; 32] =
        bytes.as_slice().try_into().map_err(|_| BundleError::Io("the instance key is malformed".into()))?;
    Ok(ed25519_dalek::SigningKey::from_bytes(&seed))
}

/// Where a blob is in a bundle.
pub fn blob_path(sha256: &str) -> String {
    format!("blobs/{}/{sha256}", &sha256[..2])
}

/// What an export is asked.
pub struct ExportArgs {
    pub repository: String,
    pub snapshot: Option<String>,
    /// The directory of the export this one follows.
    pub since: Option<PathBuf>,
    pub to: ExportTarget,
}

pub enum ExportTarget {
    Dir(PathBuf),
    /// A tar stream (standard output).
    Tar(Box<dyn AsyncWrite + Send + Unpin>),
}

/// What an export wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExportReport {
    pub components: usize,
    /// Blobs the bundle carries, and their bytes.
    pub blobs: usize,
    pub blob_bytes: u64,
    /// Of those, found in the directory already (a resumed export).
    pub blobs_present: usize,
    pub manifest_bytes: u64,
}

impl std::fmt::Display for ExportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exported {} components: {} blobs ({} bytes; {} there already), manifest {} bytes",
            self.components, self.blobs, self.blob_bytes, self.blobs_present, self.manifest_bytes
        )
    }
}

/// Exports a repository (or one of its snapshots).
pub async fn export(services: &Services, formats: &Registry, args: ExportArgs) -> Result<ExportReport, BundleError> {
    let repo = RepositoryService::new(&services.db, formats).get(&args.repository).await?;
    let components = components_of(services, &repo, args.snapshot.as_deref()).await?;
    // What the bundle it follows carried, or the ones before it: its components' blobs.
    let (follows, known) = match &args.since {
        Some(dir) => {
            let bytes = tokio::fs::read(dir.join(MANIFEST)).await.map_err(|e| io(dir.join(MANIFEST).display(), e))?;
            let earlier: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
                BundleError::Invalid(format!("--since {}: not a bundle's manifest: {e}", dir.display()))
            })?;
            if earlier.repository.name != repo.name.as_str() || earlier.repository.format != repo.format {
                return Err(BundleError::Invalid(format!(
                    "--since {}: an export of repository {} ({}), not of {}",
                    dir.display(),
                    earlier.repository.name,
                    earlier.repository.format,
                    repo.name
                )));
            }
            let known: BTreeSet<String> =
                earlier.components.iter().flat_map(|c| c.files.iter().map(|f| f.sha256.clone())).collect();
            (Some(hex::encode(sha2::Sha256::digest(&bytes))), known)
        }
        None => (None, BTreeSet::new()),
    };
    let (manifest, text, sig) =
        signed_manifest(services, &repo, (args.snapshot.as_deref(), components), (follows, &known)).await?;
    let mut report = ExportReport {
        components: manifest.components.len(),
        blobs: manifest.blobs.len(),
        blob_bytes: manifest.blobs.iter().map(|b| u64::try_from(b.size).unwrap_or(0)).sum(),
        manifest_bytes: text.len() as u64,
        ..ExportReport::default()
    };
    match args.to {
        ExportTarget::Dir(dir) => {
            let dir = &dir;
            // A blob written whole is renamed into place; an export run again finds it there.
            // (The import checks every digest: a file the machine lost half of is refused there.)
            let present: Vec<bool> = futures_util::stream::iter(manifest.blobs.iter())
                .map(|b| async move {
                    let path = dir.join(blob_path(&b.sha256));
                    if tokio::fs::metadata(&path).await.is_ok_and(|m| i64::try_from(m.len()).ok() == Some(b.size))
                        && file_digest(&path).await.as_deref() == Some(b.sha256.as_str())
                    {
                        return Ok::<_, BundleError>(true);
                    }
                    if let Some(parent) = path.parent() {
                        tokio::fs::create_dir_all(parent).await.map_err(|e| io(parent.display(), e))?;
                    }
                    let part = path.with_extension("part");
                    let mut out = tokio::fs::File::create(&part).await.map_err(|e| io(part.display(), e))?;
                    copy_blob(services, b, &mut out).await?;
                    out.flush().await.map_err(|e| io(part.display(), e))?;
                    tokio::fs::rename(&part, &path).await.map_err(|e| io(path.display(), e))?;
                    Ok(false)
                })
                .buffer_unordered(STORES)
                .try_collect()
                .await?;
            report.blobs_present = present.iter().filter(|p| **p).count();
            // The manifest last: a directory with it is a whole bundle.
            write_atomic(&dir.join(SIGNATURE), &sig).await?;
            write_atomic(&dir.join(MANIFEST), &text).await?;
        }
        ExportTarget::Tar(mut out) => {
            tar_entry(&mut out, MANIFEST, &text).await?;
            tar_entry(&mut out, SIGNATURE, &sig).await?;
            for b in &manifest.blobs {
                let size = u64::try_from(b.size).unwrap_or(0);
                out.write_all(&tar_header(&blob_path(&b.sha256), size)?).await.map_err(|e| io("the tar stream", e))?;
                copy_blob(services, b, &mut out).await?;
                pad(&mut out, size).await?;
            }
            out.write_all(&[0u8; 1024]).await.map_err(|e| io("the tar stream", e))?;
            out.flush().await.map_err(|e| io("the tar stream", e))?;
        }
    }
    Ok(report)
}

/// The components a bundle of the repository (or of its snapshot) lists.
pub async fn components_of(
    services: &Services,
    repo: &Repository,
    snapshot: Option<&str>,
) -> Result<Vec<BundleComponent>, BundleError> {
    match snapshot {
        Some(name) => snapshot_components(services, repo, name).await,
        None => catalogue_components(services, repo).await,
    }
}

/// The manifest of `components` (of the repository, or its snapshot), carrying the blobs
/// outside `known`, and its text and signature file.
pub async fn signed_manifest(
    services: &Services,
    repo: &Repository,
    (snapshot, components): (Option<&str>, Vec<BundleComponent>),
    (follows, known): (Option<String>, &BTreeSet<String>),
) -> Result<(Manifest, Vec<u8>, Vec<u8>), BundleError> {
    let mut blobs: BTreeMap<String, i64> = BTreeMap::new();
    for c in &components {
        for f in &c.files {
            if !known.contains(&f.sha256) {
                blobs.insert(f.sha256.clone(), f.size);
            }
        }
    }
    let generation = match snapshot {
        Some(s) => services.db.repository_snapshot(repo.id, s).await?.map(|found| found.id),
        None => Some(services.db.repository_generation(repo.id).await?),
    };
    let key = instance_key(services).await?;
    let public = key.verifying_key();
    let manifest = Manifest {
        packyard_bundle: VERSION,
        instance: fingerprint(&public),
        created_at: packyard_model::time::rfc3339_ms(packyard_store::db::now_ms()),
        repository: BundleRepository {
            name: repo.name.to_string(),
            format: repo.format,
            settings: repo.settings.blocks.get(repo.format.as_str()).cloned().unwrap_or(serde_json::Value::Null),
        },
        snapshot: snapshot.map(str::to_string),
        follows,
        generation,
        components,
        blobs: blobs.iter().map(|(sha256, size)| BundleBlob { sha256: sha256.clone(), size: *size }).collect(),
    };
    let text = serde_json::to_vec(&manifest).map_err(|e| BundleError::Io(e.to_string()))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let signature = Signature {
        algorithm: "ed25519".into(),
        public_key: b64.encode(public.as_bytes()),
        signature: b64.encode(key.sign(&text).to_bytes()),
    };
    let sig = serde_json::to_vec_pretty(&signature).map_err(|e| BundleError::Io(e.to_string()))?;
    Ok((manifest, text, sig))
}

/// The repository's catalogued components, with their files.
async fn catalogue_components(services: &Services, repo: &Repository) -> Result<Vec<BundleComponent>, BundleError> {
    if repo.repo_type == RepoType::Group {
        return Err(BundleError::Invalid(format!(
            "repository {} is a group: export its members, or a snapshot of it (--snapshot)",
            repo.name
        )));
    }
    if repo.gate().is_some() {
        return Err(BundleError::Invalid(format!(
            "repository {} serves through a policy: its catalogue lists what the policy holds back too; export the repositories it reads from",
            repo.name
        )));
    }
    let rows = services.db.catalogue_components_named(repo.id).await?;
    let mut out = Vec::with_capacity(rows.len());
    for page in rows.chunks(500) {
        let listed = crate::hosted::listed_components(&services.db, page).await?;
        for (c, mut l) in page.iter().zip(listed) {
            l.files.sort_by(|a, b| a.path.cmp(&b.path));
            out.push(BundleComponent {
                key: l.key,
                group: c.namespace.clone(),
                name: c.name.clone(),
                version: c.version.clone(),
                created_at: l.created_at,
                files: l.files,
            });
        }
    }
    Ok(out)
}

async fn snapshot_components(
    services: &Services,
    repo: &Repository,
    name: &str,
) -> Result<Vec<BundleComponent>, BundleError> {
    let s = services
        .db
        .repository_snapshot(repo.id, name)
        .await?
        .ok_or_else(|| BundleError::NotFound(format!("repository {} has no snapshot {name:?}", repo.name)))?;
    let listed = services.db.repository_snapshot_components(s.id).await?.ok_or_else(|| {
        BundleError::Invalid(format!(
            "snapshot {name:?} of repository {} was made before snapshots named their components: make a new one to export",
            repo.name
        ))
    })?;
    Ok(listed
        .into_iter()
        .map(|c| BundleComponent {
            key: c.key,
            group: c.namespace,
            name: c.name,
            version: c.version,
            created_at: c.created_at,
            files: c.files.into_iter().map(|(path, sha256, size)| ListedFile { path, sha256, size }).collect(),
        })
        .collect())
}

/// Streams a blob of the store into `out`, checking its digest and size on the way.
async fn copy_blob(
    services: &Services,
    b: &BundleBlob,
    out: &mut (impl AsyncWrite + Unpin + ?Sized),
) -> Result<(), BundleError> {
    let digest = Sha256Hex::parse(&b.sha256).map_err(|e| BundleError::Invalid(e.to_string()))?;
    let mut read = services.blobs.open(&digest, None).await?;
    let (mut hash, mut n) = (sha2::Sha256::new(), 0u64);
    while let Some(chunk) = read.body.next().await {
        let chunk = chunk.map_err(|e| io(format!("blob {}", b.sha256), e))?;
        hash.update(&chunk);
        n += chunk.len() as u64;
        out.write_all(&chunk).await.map_err(|e| io("the bundle", e))?;
    }
    if hex::encode(hash.finalize()) != b.sha256 || i64::try_from(n).ok() != Some(b.size) {
        return Err(BundleError::Io(format!(
            "blob {} does not read back as stored ({n} bytes): the store is damaged",
            b.sha256
        )));
    }
    Ok(())
}

/// The SHA-256 of a file (what an export run again checks of a blob it finds written).
async fn file_digest(path: &Path) -> Option<String> {
    let mut f = tokio::fs::File::open(path).await.ok()?;
    let (mut hash, mut buf) = (sha2::Sha256::new(), vec![0u8; 256 * 1024]);
    loop {
        let n = f.read(&mut buf).await.ok()?;
        if n == 0 {
            return Some(hex::encode(hash.finalize()));
        }
        hash.update(&buf[..n]);
    }
}

async fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    let part = path.with_extension("part");
    tokio::fs::write(&part, bytes).await.map_err(|e| io(part.display(), e))?;
    tokio::fs::rename(&part, path).await.map_err(|e| io(path.display(), e))
}

/// A ustar header of a regular file (our own paths: ASCII, under 100 bytes).
fn tar_header(path: &str, size: u64) -> Result<[u8; 512], BundleError> {
    if path.len() >= 100 || !path.is_ascii() {
        return Err(BundleError::Io(format!("{path}: not a bundle path")));
    }
    let mut h = [0u8; 512];
    h[..path.len()].copy_from_slice(path.as_bytes());
    let octal = |h: &mut [u8; 512], at: usize, width: usize, v: u64| {
        let s = format!("{v:0w$o}", w = width - 1);
        h[at..at + width - 1].copy_from_slice(s.as_bytes());
    };
    octal(&mut h, 100, 8, 0o644);
    octal(&mut h, 108, 8, 0);
    octal(&mut h, 116, 8, 0);
    octal(&mut h, 124, 12, size);
    octal(&mut h, 136, 12, 0);
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|b| u64::from(*b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    Ok(h)
}

async fn tar_entry(out: &mut (impl AsyncWrite + Unpin + ?Sized), path: &str, bytes: &[u8]) -> Result<(), BundleError> {
    out.write_all(&tar_header(path, bytes.len() as u64)?).await.map_err(|e| io("the tar stream", e))?;
    out.write_all(bytes).await.map_err(|e| io("the tar stream", e))?;
    pad(out, bytes.len() as u64).await
}

async fn pad(out: &mut (impl AsyncWrite + Unpin + ?Sized), size: u64) -> Result<(), BundleError> {
    let rest = (512 - size % 512) % 512;
    out.write_all(&vec![0u8; usize::try_from(rest).unwrap_or(0)]).await.map_err(|e| io("the tar stream", e))
}

/// A tar entry's header: its path and size; `None` at the end of the archive.
async fn read_tar_header(input: &mut (impl AsyncRead + Unpin)) -> Result<Option<(String, u64)>, BundleError> {
    let mut h = [0u8; 512];
    match input.read_exact(&mut h).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io("the tar stream", e)),
    }
    if h.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    let field = |at: usize, width: usize| -> String {
        let raw = &h[at..at + width];
        let end = raw.iter().position(|b| *b == 0).unwrap_or(width);
        String::from_utf8_lossy(&raw[..end]).trim().to_string()
    };
    let name = field(0, 100);
    let size = u64::from_str_radix(&field(124, 12), 8)
        .map_err(|_| BundleError::Invalid(format!("the tar stream: entry {name:?} has no size")))?;
    if !matches!(h[156], b'0' | 0) {
        return Err(BundleError::Invalid(format!("the tar stream: entry {name:?} is not a regular file")));
    }
    Ok(Some((name, size)))
}

/// Where an import reads a bundle from.
pub enum ImportSource {
    Dir(PathBuf),
    /// A tar stream: a file or standard input.
    Tar(Box<dyn AsyncRead + Send + Unpin>),
}

/// What an import is asked.
pub struct ImportArgs {
    pub from: ImportSource,
    /// Another repository name than the bundle's.
    pub into: Option<String>,
    /// The exporting instance's public key (base64) or fingerprint the bundle must be signed
    /// by; without it, any valid signature is accepted and its fingerprint reported.
    pub key: Option<String>,
    /// Check everything, store nothing.
    pub dry_run: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    pub repository: String,
    pub instance: String,
    pub created_repository: bool,
    pub blobs: usize,
    pub blob_bytes: u64,
    pub copied: usize,
    pub unchanged: usize,
    pub deleted: usize,
    #[serde(skip)]
    pub changes: Vec<(i64, i64)>,
}

impl std::fmt::Display for ImportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "imported into repository {}{} (signed by instance {}): {} blobs ({} bytes), {} components stored, {} unchanged, {} deleted",
            self.repository,
            if self.created_repository { " (created)" } else { "" },
            self.instance,
            self.blobs,
            self.blob_bytes,
            self.copied,
            self.unchanged,
            self.deleted
        )
    }
}

/// Checks a manifest's signature (and the key asked for); returns the manifest and the
/// signer's fingerprint.
pub fn verify(manifest: &[u8], signature: &[u8], key: Option<&str>) -> Result<(Manifest, String), BundleError> {
    let bad = |why: String| BundleError::Invalid(format!("the bundle's signature: {why}"));
    let sig: Signature =
        serde_json::from_slice(signature).map_err(|e| bad(format!("{SIGNATURE} is malformed: {e}")))?;
    if sig.algorithm != "ed25519" {
        return Err(bad(format!("unknown algorithm {:?}", sig.algorithm)));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let public: [u8; 32] = b64
        .decode(sig.public_key.trim())
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or_else(|| bad("the public key is malformed".into()))?;
    let public = ed25519_dalek::VerifyingKey::from_bytes(&public).map_err(|e| bad(e.to_string()))?;
    let signature: [u8; 64] = b64
        .decode(sig.signature.trim())
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| bad("the signature is malformed".into()))?;
    public
        .verify(manifest, &ed25519_dalek::Signature::from_bytes(&signature))
        .map_err(|_| bad(format!("{MANIFEST} does not match its signature: it was changed after export")))?;
    let print = fingerprint(&public);
    if let Some(k) = key.map(str::trim) {
        if k != print && k != sig.public_key.trim() {
            return Err(bad(format!("signed by instance {print}, not by the key given ({k})")));
        }
    }
    let parsed: Manifest =
        serde_json::from_slice(manifest).map_err(|e| BundleError::Invalid(format!("{MANIFEST} is malformed: {e}")))?;
    if parsed.packyard_bundle != VERSION {
        return Err(BundleError::Invalid(format!(
            "a bundle of layout {} (this version reads {VERSION})",
            parsed.packyard_bundle
        )));
    }
    if parsed.instance != print {
        return Err(bad(format!("the manifest names instance {} but is signed by {print}", parsed.instance)));
    }
    Ok((parsed, print))
}

/// Imports a bundle.
pub async fn import(services: &Services, formats: &Registry, args: ImportArgs) -> Result<ImportReport, BundleError> {
    let (mut tar, mut dir_of) = (None, None);
    let (manifest, signature) = match args.from {
        ImportSource::Dir(dir) => {
            dir_of = Some(dir.clone());
            let read = |name: &str| {
                let path = dir.join(name);
                async move {
                    let meta = tokio::fs::metadata(&path).await.map_err(|e| io(path.display(), e))?;
                    if meta.len() > MAX_MANIFEST {
                        return Err(BundleError::Invalid(format!("{}: larger than a manifest can be", path.display())));
                    }
                    tokio::fs::read(&path).await.map_err(|e| io(path.display(), e))
                }
            };
            (read(MANIFEST).await?, read(SIGNATURE).await?)
        }
        ImportSource::Tar(mut input) => {
            let mut first = Vec::new();
            for expected in [MANIFEST, SIGNATURE] {
                let (name, size) = read_tar_header(&mut input)
                    .await?
                    .ok_or_else(|| BundleError::Invalid(format!("the tar stream ends before its {expected}")))?;
                let cap = if expected == SIGNATURE { 64 << 10 } else { MAX_MANIFEST };
                if name != expected || size > cap {
                    return Err(BundleError::Invalid(format!(
                        "the tar stream begins with {name:?}, not {expected}: not a Packyard bundle"
                    )));
                }
                let mut bytes = vec![0u8; usize::try_from(size).unwrap_or(0)];
                input.read_exact(&mut bytes).await.map_err(|e| io("the tar stream", e))?;
                skip(&mut input, (512 - size % 512) % 512).await?;
                first.push(bytes);
            }
            tar = Some(input);
            let sig = first.pop().unwrap_or_default();
            (first.pop().unwrap_or_default(), sig)
        }
    };
    let (manifest, instance) = verify(&manifest, &signature, args.key.as_deref())?;
    check_manifest(&manifest)?;
    let name = args.into.clone().unwrap_or_else(|| manifest.repository.name.clone());
    let mut report = ImportReport { repository: name.clone(), instance, ..ImportReport::default() };
    let format = manifest.repository.format;
    let existing = services.db.repository_by_name(&name).await?;
    if let Some(r) = &existing {
        if r.format != format || r.repo_type != RepoType::Hosted {
            return Err(BundleError::Invalid(format!(
                "repository {name} is a {} {} repository: a bundle of {format} goes into a hosted {format} one",
                r.format, r.repo_type
            )));
        }
    }
    // Every blob the bundle carries, stored and checked before any component is.
    let carried: BTreeMap<&str, i64> = manifest.blobs.iter().map(|b| (b.sha256.as_str(), b.size)).collect();
    let mut stored: BTreeMap<String, StoredBlob> = BTreeMap::new();
    match (dir_of, tar.take()) {
        (Some(dir), _) => {
            let dir = &dir;
            let dry_run = args.dry_run;
            let done: Vec<(String, StoredBlob)> = futures_util::stream::iter(manifest.blobs.iter().cloned())
                .map(|b| async move {
                    let path = dir.join(blob_path(&b.sha256));
                    let file = tokio::fs::File::open(&path).await.map_err(|e| {
                        BundleError::Invalid(format!("{}: {e} (the bundle is incomplete)", path.display()))
                    })?;
                    let blob = store_blob(services, &b, file, dry_run).await?;
                    Ok::<_, BundleError>((b.sha256, blob))
                })
                .buffer_unordered(STORES)
                .try_collect()
                .await?;
            stored.extend(done);
        }
        (None, Some(mut input)) => {
            while let Some((path, size)) = read_tar_header(&mut input).await? {
                let sha = path.rsplit('/').next().unwrap_or_default();
                let Some(expected) = carried.get(sha).filter(|_| path == blob_path(sha)) else {
                    return Err(BundleError::Invalid(format!(
                        "the tar stream holds {path:?}, which its manifest does not list"
                    )));
                };
                if i64::try_from(size).ok() != Some(*expected) {
                    return Err(BundleError::Invalid(format!("{path}: {size} bytes, the manifest says {expected}")));
                }
                let b = BundleBlob { sha256: sha.to_string(), size: *expected };
                let mut entry = (&mut input).take(size);
                let blob = store_blob(services, &b, &mut entry, args.dry_run).await?;
                // What was not read of it (a blob the store holds already).
                tokio::io::copy(&mut entry, &mut tokio::io::sink()).await.map_err(|e| io("the tar stream", e))?;
                skip(&mut input, (512 - size % 512) % 512).await?;
                stored.insert(b.sha256, blob);
            }
            if let Some(missing) = manifest.blobs.iter().find(|b| !stored.contains_key(&b.sha256)) {
                return Err(BundleError::Invalid(format!(
                    "the tar stream ends without blob {} (the bundle is incomplete)",
                    missing.sha256
                )));
            }
        }
        (None, None) => return Err(BundleError::Io("the tar stream was not read".into())),
    }
    report.blobs = stored.len();
    report.blob_bytes = stored.values().map(|b| b.size).sum();
    // What the bundle does not carry came with the one it follows: it must be here.
    for c in &manifest.components {
        for f in &c.files {
            if carried.contains_key(f.sha256.as_str()) {
                continue;
            }
            let digest = Sha256Hex::parse(&f.sha256).map_err(|e| BundleError::Invalid(e.to_string()))?;
            if services.blobs.stat(&digest).await?.is_none() {
                return Err(BundleError::Invalid(format!(
                    "{} of {} is in the bundle this one follows ({}), which is not imported here: import that one first",
                    f.path,
                    c.key,
                    manifest.follows.as_deref().unwrap_or("none named")
                )));
            }
        }
    }
    if args.dry_run {
        report.unchanged = manifest.components.len();
        if let Some(r) = &existing {
            let wanted: BTreeSet<&str> = manifest.components.iter().map(|c| c.key.as_str()).collect();
            let held = services.db.catalogue_components_named(r.id).await?;
            report.deleted = held.iter().filter(|c| !wanted.contains(c.component_key.as_str())).count();
        }
        return Ok(report);
    }
    let repo = match existing {
        Some(r) => r,
        None => {
            let mut spec_json = serde_json::json!({"name": name, "format": format, "type": "hosted"});
            if !manifest.repository.settings.is_null() {
                spec_json[format.as_str()] = manifest.repository.settings.clone();
            }
            let spec_value: packyard_model::repos::RepositorySpec = serde_json::from_value(spec_json)
                .map_err(|e| BundleError::Invalid(format!("the bundle's repository settings: {e}")))?;
            let made = RepositoryService::new(&services.db, formats).create(spec_value).await.map_err(|e| {
                BundleError::Invalid(format!(
                    "cannot create repository {name} as the bundle describes it ({e}): create a hosted {format} repository {name} first"
                ))
            })?;
            report.created_repository = true;
            made
        }
    };
    let label = format!("bundle of {} from instance {}", manifest.repository.name, report.instance);
    apply(services, formats, &repo, &label, &manifest.components, &mut report).await?;
    Ok(report)
}

/// Makes hosted repository `repo` hold `components` (their blobs in the store already), as a
/// copy stores them, in batches, and no other component: what is new or changed is stored, the
/// rest deleted. Counted into `report`.
pub async fn apply(
    services: &Services,
    formats: &Registry,
    repo: &Repository,
    label: &str,
    components: &[BundleComponent],
    report: &mut ImportReport,
) -> Result<(), BundleError> {
    let spec = formats.get(repo.format);
    let actor = Actor::system(IMPORTER);
    let held = services.db.catalogue_components_named(repo.id).await?;
    if components.is_empty() && !held.is_empty() {
        return Err(BundleError::Invalid(format!(
            "{label} lists no component, and repository {} holds {}: nothing is deleted on an empty list (delete them yourself if that is meant)",
            repo.name,
            held.len()
        )));
    }
    let listed: Vec<Listed> = components
        .iter()
        .map(|c| Listed { key: c.key.clone(), created_at: c.created_at, files: c.files.clone() })
        .collect();
    for batch in listed.chunks(BATCH) {
        let done = spec.copies().import_components(services, repo, label, batch, actor).await?;
        report.copied += done.copied;
        report.unchanged += done.unchanged;
        report.changes.extend(done.changes);
    }
    // The components the source no longer has.
    let wanted: BTreeSet<&str> = components.iter().map(|c| c.key.as_str()).collect();
    let gone: Vec<String> =
        held.into_iter().map(|c| c.component_key).filter(|k| !wanted.contains(k.as_str())).collect();
    for batch in gone.chunks(BATCH) {
        let (removed, changes) = spec.deletes().delete_components(services, repo, batch, actor).await?;
        report.deleted += removed.len();
        report.changes.extend(changes);
    }
    Ok(())
}

/// The manifest's own consistency: digests are digests, paths are relative, every carried
/// blob is listed by a component.
pub(crate) fn check_manifest(m: &Manifest) -> Result<(), BundleError> {
    let listed: BTreeSet<&str> = m.components.iter().flat_map(|c| c.files.iter().map(|f| f.sha256.as_str())).collect();
    for b in &m.blobs {
        Sha256Hex::parse(&b.sha256).map_err(|e| BundleError::Invalid(format!("{MANIFEST}: blob {}: {e}", b.sha256)))?;
        if b.size < 0 || !listed.contains(b.sha256.as_str()) {
            return Err(BundleError::Invalid(format!("{MANIFEST}: blob {} is not a file of a component", b.sha256)));
        }
    }
    for c in &m.components {
        for f in &c.files {
            Sha256Hex::parse(&f.sha256).map_err(|e| BundleError::Invalid(format!("{MANIFEST}: {}: {e}", f.path)))?;
            let safe = !f.path.is_empty()
                && !f.path.starts_with('/')
                && f.path.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
            if !safe {
                return Err(BundleError::Invalid(format!("{MANIFEST}: {} names an unsafe path {:?}", c.key, f.path)));
            }
        }
    }
    Ok(())
}

/// Stores one blob of the bundle, checking its digest and size; a dry run only checks. A blob
/// the store holds already is not read (what the bundle holds of it would not be used).
pub(crate) async fn store_blob(
    services: &Services,
    b: &BundleBlob,
    mut input: impl AsyncRead + Unpin,
    dry_run: bool,
) -> Result<StoredBlob, BundleError> {
    let size = u64::try_from(b.size).unwrap_or(0);
    let parsed = Sha256Hex::parse(&b.sha256).map_err(|e| BundleError::Invalid(e.to_string()))?;
    if services.blobs.stat(&parsed).await? == Some(size) {
        if dry_run {
            return Ok(StoredBlob { sha256: parsed, size, created: false });
        }
        // Noted again, so that the collector does not take it before a component claims it;
        // then looked at again, as an upload is (`hosted::settle`): a collector that held the
        // blob's row meanwhile (a stray's, or an unreferenced one's) may have deleted the bytes,
        // and then they are written from the bundle after all.
        services.db.note_upload(&parsed, size).await?;
        if services.blobs.stat(&parsed).await? == Some(size) {
            return Ok(StoredBlob { sha256: parsed, size, created: false });
        }
    }
    let mut writer = if dry_run { None } else { Some(services.blobs.writer(size).await?) };
    let (mut hash, mut n) = (sha2::Sha256::new(), 0u64);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let got = input.read(&mut buf).await.map_err(|e| io(format!("blob {}", b.sha256), e))?;
        if got == 0 {
            break;
        }
        n += got as u64;
        if n > size {
            return Err(BundleError::Invalid(format!(
                "blob {}: larger than the manifest says ({size} bytes)",
                b.sha256
            )));
        }
        hash.update(&buf[..got]);
        if let Some(w) = writer.as_mut() {
            w.write(&buf[..got]).await?;
        }
    }
    let digest = hex::encode(hash.finalize());
    if digest != b.sha256 || n != size {
        return Err(BundleError::Invalid(format!(
            "blob {} is damaged: {n} bytes with SHA-256 {digest} (the manifest says {size} bytes)",
            b.sha256
        )));
    }
    let Some(w) = writer else { return Ok(StoredBlob { sha256: parsed, size, created: false }) };
    let stored = w.finish().await?;
    // Pending until a component claims it; collected after the grace period otherwise.
    services.db.note_upload(&stored.sha256, stored.size).await?;
    if services.blobs.stat(&stored.sha256).await?.is_none() {
        return Err(BundleError::Upload(crate::hosted::UploadError::Again(format!(
            "the blob {} was removed by the blob collector at the same instant; run the import again",
            stored.sha256
        ))));
    }
    Ok(stored)
}

async fn skip(input: &mut (impl AsyncRead + Unpin), n: u64) -> Result<(), BundleError> {
    tokio::io::copy(&mut input.take(n), &mut tokio::io::sink()).await.map_err(|e| io("the tar stream", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tar_header_reads_back() -> Result<(), BundleError> {
        let h = tar_header("blobs/ab/abc", 1234)?;
        let mut input: &[u8] = &h;
        assert_eq!(read_tar_header(&mut input).await?, Some(("blobs/ab/abc".to_string(), 1234)));
        let zero = [0u8; 512];
        let mut input: &[u8] = &zero;
        assert_eq!(read_tar_header(&mut input).await?, None);
        Ok(())
    }

    #[test]
    fn a_changed_manifest_fails_its_signature() -> Result<(), BundleError> {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
        let manifest = Manifest {
            packyard_bundle: VERSION,
            instance: fingerprint(&key.verifying_key()),
            created_at: "2026-12-06T00:00:00Z".into(),
            repository: BundleRepository {
                name: "packages".into(),
                // Whichever format: the signature covers the manifest's bytes alone.
                format: Format::ALL[0],
                settings: serde_json::Value::Null,
            },
            snapshot: None,
            follows: None,
            generation: Some(1),
            components: Vec::new(),
            blobs: Vec::new(),
        };
        let text = serde_json::to_vec(&manifest).map_err(|e| BundleError::Io(e.to_string()))?;
        let b64 = base64::engine::general_purpose::STANDARD;
        let sig = serde_json::json!({"algorithm": "ed25519", "public_key": b64.encode(key.verifying_key().as_bytes()),
            "signature": b64.encode(key.sign(&text).to_bytes())})
        .to_string();
        let (read, print) = verify(&text, sig.as_bytes(), None)?;
        assert_eq!((read, print.clone()), (manifest, fingerprint(&key.verifying_key())));
        assert!(verify(&text, sig.as_bytes(), Some(&print)).is_ok());
        let other = verify(&text, sig.as_bytes(), Some("0123"));
        assert!(matches!(&other, Err(BundleError::Invalid(m)) if m.contains("not by the key given")), "{other:?}");
        let mut changed = text.clone();
        changed.extend_from_slice(b" ");
        let e = verify(&changed, sig.as_bytes(), None);
        assert!(matches!(&e, Err(BundleError::Invalid(m)) if m.contains("changed after export")), "{e:?}");
        Ok(())
    }
}
