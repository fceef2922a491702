//! Hosted APT over the engine. An upload is a binary package (a `.deb`) or a source package (a
//! `.dsc` with the files it lists), for one distribution (the repository's default unless the
//! upload names one) and one component (the first configured by default). A package in two
//! distributions is one row and one blob with two memberships; each distribution is its own
//! publication unit.
//!
//! A `.deb` is read whole, its architecture checked, and its row (the control text, the pool
//! path, the size and SHA-256) written with its distribution's publication change. The MD5,
//! which only the `Packages` index lists, is computed once by the worker that first publishes
//! it, off the upload's path. A `.dsc`'s files are each checked against its `Files` and
//! `Checksums-*` lists (size, MD5, SHA-1, SHA-256) and each archive read to its end before
//! anything is kept; a file the repository already holds at the same pool path with the same
//! bytes (an `.orig` tarball shared by two Debian revisions) need not be sent again.

use super::settings::AptSettings;
use packyard_model::repos::FormatSettings;
use std::io::Read as _;

use async_trait::async_trait;
use md5::Digest as _;

use super::rows::{self, AptPackage, AptSource, AptSourceFile, Member};
use super::KIND;
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_codecs::apt::dsc::{pool_directory, Dsc, MAX_DSC_BYTES};
use packyard_codecs::archive::{self, Compression};
use packyard_core::hosted::{
    read_back, Component, Entry, Existing, Forget, Hosted, InTx, Inspected, NewAsset, Removed, TxError, UnitRef,
    UploadError, Written,
};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;
use packyard_store::db::DbResult;

/// APT's hosted rules.
pub struct AptHosted;

/// Where an upload goes and what it must be.
#[derive(Debug, Clone, Default)]
pub struct AptTarget {
    /// `?component=` (or Artifactory's `deb.component`); the first configured when `None`.
    pub component: Option<String>,
    /// Artifactory's `deb.architecture`: the package's own `Architecture` must be the same.
    pub architecture: Option<String>,
    /// `?distribution=` (or `deb.distribution`, or the form field `apt.distribution`); the
    /// repository's `apt.distribution` when `None`.
    pub distribution: Option<String>,
    /// The other files of a source package's upload, by file name (stored already, pending).
    pub files: Vec<(String, StoredBlob)>,
}

/// A source package as an upload makes it: its row and its files (the `.dsc` first).
#[derive(Debug, Clone)]
pub struct SourceUpload {
    pub source: AptSource,
    pub files: Vec<AptSourceFile>,
    /// Positions in `files` of those this upload brings (the rest are in the pool already).
    pub new: Vec<usize>,
}

#[derive(Debug, Clone)]
pub enum AptArtifact {
    Package(AptPackage),
    Source(SourceUpload),
}

/// What an upload becomes, and the distribution it goes to.
#[derive(Debug, Clone)]
pub struct AptUpload {
    pub artifact: AptArtifact,
    pub distribution: String,
}

/// A delete: the pool path of a package or of a source package's `.dsc`; from one
/// distribution, or (`None`) from the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptRemoval {
    pub path: String,
    pub distribution: Option<String>,
}

impl AptRemoval {
    pub fn everywhere(path: impl Into<String>) -> Self {
        Self { path: path.into(), distribution: None }
    }
}

fn settings(repo: &Repository) -> AptSettings {
    AptSettings::of(repo)
}

/// A distribution `repo` publishes, or why not.
pub fn check_distribution(repo: &Repository, dist: &str) -> Result<(), UploadError> {
    let settings = settings(repo);
    let suites = settings.suites();
    if suites.contains(&dist) {
        return Ok(());
    }
    Err(UploadError::Invalid(format!(
        "distribution {dist:?} is not a distribution of repository {}; it publishes {}",
        repo.name,
        suites.join(", ")
    )))
}

/// The content type a source package's file is served with, by its name.
pub fn source_file_type(name: &str) -> &'static str {
    if name.ends_with(".dsc") {
        "text/prs.lines.tag"
    } else if name.ends_with(".gz") {
        "application/gzip"
    } else if name.ends_with(".xz") {
        "application/x-xz"
    } else if name.ends_with(".zst") {
        "application/zstd"
    } else if name.ends_with(".asc") {
        "application/pgp-signature"
    } else {
        "application/octet-stream"
    }
}

/// Reads a source package's file to its end as what its name says it is: a tarball (its
/// compression and its tar to the end-of-archive block), a `.diff.gz` (the gzip stream to its
/// trailer), an `.asc` signature (text). Other kinds are refused: nothing is kept that could not
/// be checked.
fn check_source_file(name: &str, r: &mut dyn std::io::BufRead, size: u64) -> Result<(), String> {
    if let Some(compression) = Compression::from_name(name) {
        return archive::check_tar(r, compression, name, archive::expansion_limit(size))
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    if name.ends_with(".diff.gz") {
        let mut limited = std::io::Read::take(flate2::bufread::MultiGzDecoder::new(r), archive::expansion_limit(size));
        return std::io::copy(&mut limited, &mut std::io::sink())
            .map(|_| ())
            .map_err(|e| format!("{name} is not a whole gzip stream: {e}"));
    }
    if name.ends_with(".asc") {
        let mut text = String::new();
        std::io::Read::take(r, 1 << 20)
            .read_to_string(&mut text)
            .map_err(|_| format!("{name} is not an ASCII-armored signature"))?;
        return if text.contains("-----BEGIN PGP SIGNATURE-----") {
            Ok(())
        } else {
            Err(format!("{name} is not an ASCII-armored signature"))
        };
    }
    Err(format!(
        "{name}: a source package's files are accepted as .tar, .tar.gz, .tar.xz or .tar.zst tarballs, .diff.gz or .asc (each is read whole before it is kept)"
    ))
}

/// Reads a stored source file whole as [`check_source_file`] does, hashing it (MD5, SHA-1) on
/// the way.
async fn read_source_file(
    services: &Services,
    name: &str,
    stored: &StoredBlob,
) -> Result<Result<(String, String), String>, UploadError> {
    let (name, size) = (name.to_string(), stored.size);
    read_back(services, &stored.sha256, move |r| {
        let mut hashing = Hashing { inner: r, md5: md5::Md5::new(), sha1: sha1::Sha1::new() };
        check_source_file(&name, &mut hashing, size)?;
        // What the check left unread (a tar's zero padding) is hashed too.
        std::io::copy(&mut hashing, &mut std::io::sink()).map_err(|e| format!("{name}: {e}"))?;
        Ok((hex::encode(hashing.md5.finalize()), hex::encode(hashing.sha1.finalize())))
    })
    .await
}

/// A buffered reader that hashes what is consumed from it.
struct Hashing<'a> {
    inner: &'a mut dyn std::io::BufRead,
    md5: md5::Md5,
    sha1: sha1::Sha1,
}

impl std::io::Read for Hashing<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let available = std::io::BufRead::fill_buf(self)?;
            let n = available.len().min(out.len());
            out[..n].copy_from_slice(&available[..n]);
            n
        };
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl std::io::BufRead for Hashing<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let amt = amt.min(buf.len());
            self.md5.update(&buf[..amt]);
            self.sha1.update(&buf[..amt]);
        }
        self.inner.consume(amt);
    }
}

/// What the upload's body is: a `.deb`, or the `.dsc` of a source package (with its MD5 and
/// SHA-1, which the `Sources` index lists).
enum Body {
    Deb(packyard_codecs::apt::control::Control),
    Dsc(Dsc, String, String),
}

/// Reads the body whole: an `ar` archive is a `.deb`; text that parses as a source control
/// file is a `.dsc`.
fn read_body(r: &mut dyn std::io::BufRead, size: u64, source_files: bool) -> Result<Body, String> {
    let head = r.fill_buf().map_err(|e| e.to_string())?;
    let dsc_like = !head.starts_with(b"!<arch>\n")
        && (source_files
            || head.starts_with(b"-----BEGIN PGP SIGNED MESSAGE-----")
            || head.starts_with(b"Format:")
            || head.starts_with(b"Source:"));
    if !dsc_like || size > MAX_DSC_BYTES as u64 {
        return read_package(r, Limits::default()).map(Body::Deb).map_err(|e| format!("not a valid .deb: {e}"));
    }
    let mut bytes = Vec::new();
    r.take(MAX_DSC_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    let dsc = Dsc::parse(&bytes).map_err(|e| format!("not a valid .dsc: {e}"))?;
    Ok(Body::Dsc(dsc, hex::encode(md5::Md5::digest(&bytes)), hex::encode(sha1::Sha1::digest(&bytes))))
}

#[async_trait]
impl Hosted for AptHosted {
    type Target = AptTarget;
    type Artifact = AptUpload;
    type Removal = AptRemoval;

    const NAME: &'static str = KIND;
    const BODY: Option<&'static str> = Some("the .deb (or a source package's .dsc)");

    fn check_target(&self, repo: &Repository, t: &AptTarget) -> Result<(), UploadError> {
        let settings = settings(repo);
        if let Some(c) = t.component.as_ref().filter(|c| !settings.components.contains(c)) {
            return Err(UploadError::Invalid(format!(
                "component {c:?} is not configured for repository {}; configured: {}",
                repo.name,
                settings.components.join(", ")
            )));
        }
        match &t.distribution {
            Some(d) => check_distribution(repo, d),
            None => Ok(()),
        }
    }

    async fn inspect(
        &self,
        services: &Services,
        repo: &Repository,
        t: &AptTarget,
        stored: &StoredBlob,
    ) -> Result<Inspected<AptUpload>, UploadError> {
        let settings = settings(repo);
        let component = t
            .component
            .clone()
            .unwrap_or_else(|| settings.components.first().cloned().unwrap_or_else(|| "main".into()));
        let distribution = t.distribution.clone().unwrap_or_else(|| settings.distribution.clone());
        let (size, sources) = (stored.size, !t.files.is_empty());
        let body = read_back(services, &stored.sha256, move |r| read_body(r, size, sources))
            .await?
            .map_err(UploadError::Invalid)?;
        let control = match body {
            Body::Deb(control) => control,
            Body::Dsc(dsc, md5, sha1) => {
                let upload = inspect_source(services, repo, t, stored, (dsc, md5, sha1), component).await?;
                let coordinate = format!("{}_{}_source", upload.source.name, upload.source.version);
                let derived = t.files.iter().map(|(_, s)| s.clone()).collect();
                return Ok(Inspected {
                    artifact: AptUpload { artifact: AptArtifact::Source(upload), distribution },
                    coordinate,
                    derived,
                });
            }
        };
        if !t.files.is_empty() {
            return Err(UploadError::Invalid(
                "several files were sent with a .deb: send one .deb per upload, or a source package's .dsc with the files it lists".into(),
            ));
        }
        if let Some(said) = t.architecture.as_deref().filter(|a| *a != control.architecture) {
            return Err(UploadError::Invalid(format!(
                "deb.architecture={said} but the package's control file says Architecture: {}",
                control.architecture
            )));
        }
        if control.architecture != "all" && !settings.architectures.contains(&control.architecture) {
            return Err(UploadError::Invalid(format!(
                "architecture {:?} is not configured for repository {}; configured: {}",
                control.architecture,
                repo.name,
                settings.architectures.join(", ")
            )));
        }
        let package = AptPackage {
            id: 0,
            repository_id: repo.id,
            pool_path: control.pool_path(&component),
            component,
            name: control.package.clone(),
            version: control.version.clone(),
            architecture: control.architecture.clone(),
            control: control.text,
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
            md5: String::new(),
            sha256: stored.sha256.to_string(),
        };
        let coordinate = coordinate(&package);
        Ok(Inspected {
            artifact: AptUpload { artifact: AptArtifact::Package(package), distribution },
            coordinate,
            derived: Vec::new(),
        })
    }

    fn units(&self, _repo: &Repository, upload: &AptUpload) -> Vec<UnitRef> {
        vec![(KIND, upload.distribution.clone())]
    }

    fn content(&self, upload: &AptUpload) -> (String, Component) {
        match &upload.artifact {
            AptArtifact::Package(p) => package_content(p),
            AptArtifact::Source(s) => source_content(&s.source),
        }
    }

    fn receipt(&self, upload: &AptUpload) -> serde_json::Value {
        match &upload.artifact {
            AptArtifact::Package(p) => serde_json::json!({"package": p.name, "version": p.version,
                "architecture": p.architecture, "component": p.component, "distribution": upload.distribution,
                "filename": p.pool_path, "sha256": p.sha256, "size": p.size}),
            AptArtifact::Source(s) => serde_json::json!({"source": s.source.name, "version": s.source.version,
                "component": s.source.component, "distribution": upload.distribution,
                "directory": s.source.directory, "dsc": s.source.dsc_path,
                "files": s.files.iter().map(|f| serde_json::json!({"name": f.name(), "size": f.size, "sha256": f.sha256}))
                    .collect::<Vec<_>>()}),
        }
    }

    async fn existing(&self, t: &mut InTx<'_, '_>, upload: &AptUpload) -> DbResult<Existing<AptRemoval>> {
        let dist = &upload.distribution;
        match &upload.artifact {
            AptArtifact::Package(p) => {
                let stored =
                    rows::by_coordinate(t.db, &mut **t.tx, t.repo.id, &p.name, &p.version, &p.architecture).await?;
                let Some(old) = stored else { return Ok(Existing::Absent) };
                if old.sha256 != p.sha256 || old.component != p.component {
                    return Ok(Existing::Different(AptRemoval::everywhere(old.pool_path)));
                }
                let in_dist = rows::distributions(t.db, &mut **t.tx, Member::Package(old.id)).await?.contains(dist);
                // The same package into another distribution: a membership more.
                Ok(if in_dist { Existing::Same } else { Existing::Overwrite })
            }
            AptArtifact::Source(s) => {
                let old =
                    rows::source_by_coordinate(t.db, &mut **t.tx, t.repo.id, &s.source.name, &s.source.version).await?;
                // A file of this upload at a pool path another source holds with other bytes.
                for &i in &s.new {
                    let f = &s.files[i];
                    if let Some(there) = rows::source_file_at(t.db, &mut **t.tx, t.repo.id, &f.pool_path).await? {
                        let own = old.as_ref().is_some_and(|o| o.id == there.source_id);
                        if there.sha256 != f.sha256 && !own {
                            return Ok(Existing::Refuse(UploadError::Conflict(format!(
                                "{} is already in repository {} with other content (a file of another source package); a pool file never changes",
                                f.pool_path, t.repo.name
                            ))));
                        }
                    }
                }
                // The files it reuses from the pool must still be there.
                for (i, f) in s.files.iter().enumerate().filter(|(i, _)| !s.new.contains(i) && *i > 0) {
                    let there = rows::source_file_at(t.db, &mut **t.tx, t.repo.id, &f.pool_path).await?;
                    if there.is_none_or(|x| x.sha256 != f.sha256) {
                        return Ok(Existing::Refuse(UploadError::Invalid(format!(
                            "{} (file {i} of the .dsc) is no longer in the repository: send it with the .dsc",
                            f.name()
                        ))));
                    }
                }
                let Some(old) = old else { return Ok(Existing::Absent) };
                let old_files = rows::source_files(t.db, &mut **t.tx, old.id).await?;
                let same = old.component == s.source.component
                    && old_files
                        .iter()
                        .map(|f| (&f.pool_path, &f.sha256))
                        .eq(s.files.iter().map(|f| (&f.pool_path, &f.sha256)));
                if !same {
                    return Ok(Existing::Different(AptRemoval::everywhere(old.dsc_path)));
                }
                let in_dist = rows::distributions(t.db, &mut **t.tx, Member::Source(old.id)).await?.contains(dist);
                Ok(if in_dist { Existing::Same } else { Existing::Overwrite })
            }
        }
    }

    async fn write(&self, t: &mut InTx<'_, '_>, upload: &AptUpload, uploader: &str) -> Result<Written, TxError> {
        let dist = &upload.distribution;
        match &upload.artifact {
            AptArtifact::Package(p) => {
                let there =
                    rows::by_coordinate(t.db, &mut **t.tx, t.repo.id, &p.name, &p.version, &p.architecture).await?;
                let (id, entry) = match there {
                    // In the catalogue already: a membership more.
                    Some(old) => (old.id, None),
                    None => (rows::insert(t.db, t.tx, p, uploader).await?, Some(super::catalogue::entry(p))),
                };
                rows::join(t.db, t.tx, Member::Package(id), t.repo.id, dist).await?;
                Ok(Written { republish: true, audit: true, catalogue: entry })
            }
            AptArtifact::Source(s) => {
                let there =
                    rows::source_by_coordinate(t.db, &mut **t.tx, t.repo.id, &s.source.name, &s.source.version).await?;
                let (id, entry) = match there {
                    Some(old) => (old.id, None),
                    None => (
                        rows::insert_source(t.db, t.tx, &s.source, &s.files, uploader).await?,
                        Some(source_entry(&s.source, s.new.iter().map(|&i| &s.files[i]))),
                    ),
                };
                rows::join(t.db, t.tx, Member::Source(id), t.repo.id, dist).await?;
                Ok(Written { republish: true, audit: true, catalogue: entry })
            }
        }
    }

    async fn remove(&self, t: &mut InTx<'_, '_>, removal: &AptRemoval) -> DbResult<Option<Removed>> {
        let (repo, path) = (t.repo, removal.path.as_str());
        let (member, coordinate, detail, content) =
            if let Some(p) = rows::by_pool_path(t.db, &mut **t.tx, repo.id, path).await? {
                let content = package_content(&p);
                (
                    Member::Package(p.id),
                    coordinate(&p),
                    serde_json::json!({"sha256": p.sha256, "filename": p.pool_path}),
                    content,
                )
            } else if let Some(s) = rows::source_by_dsc_path(t.db, &mut **t.tx, repo.id, path).await? {
                let content = source_content(&s);
                (
                    Member::Source(s.id),
                    format!("{}_{}_source", s.name, s.version),
                    serde_json::json!({"dsc": s.dsc_path}),
                    content,
                )
            } else {
                return Ok(None);
            };
        // Out of one distribution (the row stays while another lists it), or of all.
        let (units, gone) = match &removal.distribution {
            Some(d) => {
                if !rows::leave(t.db, t.tx, member, d).await? {
                    return Ok(None);
                }
                (vec![d.clone()], rows::distributions(t.db, &mut **t.tx, member).await?.is_empty())
            }
            None => (rows::distributions(t.db, &mut **t.tx, member).await?, true),
        };
        let forget = match (gone, member) {
            (false, _) => Forget::Nothing,
            (true, Member::Package(id)) => {
                rows::delete(t.db, t.tx, id).await?;
                Forget::Component(path.to_string())
            }
            (true, Member::Source(id)) => {
                rows::delete_source(t.db, t.tx, id).await?;
                Forget::Component(path.to_string())
            }
        };
        let units = units.into_iter().map(|d| (KIND, d)).collect();
        Ok(Some(Removed { coordinate, units, detail, forget, content: Some(content) }))
    }

    /// A package's or source package's pool path: removed from every distribution.
    fn removal(&self, key: &str) -> Option<AptRemoval> {
        Some(AptRemoval::everywhere(key))
    }

    /// A binary package, or a source package with every file its `.dsc` lists, into the
    /// target's distribution (its `apt.distribution`) and the same component when the target
    /// has it (its first otherwise).
    async fn copy_targets(
        &self,
        _services: &Services,
        to: &Repository,
        (key, _created_at): (&str, i64),
        assets: &[(String, StoredBlob)],
    ) -> Result<Vec<(AptTarget, StoredBlob)>, UploadError> {
        let settings = settings(to);
        let component = key
            .strip_prefix("pool/")
            .and_then(|rest| rest.split('/').next())
            .filter(|c| settings.components.iter().any(|x| x == c))
            .map(str::to_string);
        let target = |files| AptTarget { component: component.clone(), architecture: None, distribution: None, files };
        if let Some((dsc, blob)) = assets.iter().find(|(p, _)| p.ends_with(".dsc")) {
            let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
            let files = assets.iter().filter(|(p, _)| p != dsc).map(|(p, b)| (name(p), b.clone())).collect();
            return Ok(vec![(target(files), blob.clone())]);
        }
        Ok(assets
            .iter()
            .filter(|(p, _)| p.ends_with(".deb") || p.ends_with(".udeb"))
            .map(|(_, b)| (target(Vec::new()), b.clone()))
            .collect())
    }
}

/// A source package's upload checked against its `.dsc`: every listed file sent with it (or
/// in the pool already with the same bytes), of the listed size and checksums, and read whole;
/// nothing sent that the `.dsc` does not list.
async fn inspect_source(
    services: &Services,
    repo: &Repository,
    t: &AptTarget,
    stored: &StoredBlob,
    (dsc, dsc_md5, dsc_sha1): (Dsc, String, String),
    component: String,
) -> Result<SourceUpload, UploadError> {
    if t.architecture.is_some() {
        return Err(UploadError::Invalid("deb.architecture applies to a .deb, not to a source package".into()));
    }
    let directory = pool_directory(&component, &dsc.source);
    let dsc_name = dsc.file_name();
    for (name, _) in &t.files {
        if !dsc.files.iter().any(|f| f.name == *name) {
            return Err(UploadError::Invalid(format!(
                "{name} was sent but {dsc_name} does not list it (listed: {})",
                dsc.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let file = |name: &str, size: u64, md5: String, sha1: String, sha256: String| AptSourceFile {
        source_id: 0,
        repository_id: repo.id,
        position: 0,
        pool_path: format!("{directory}/{name}"),
        size: i64::try_from(size).unwrap_or(i64::MAX),
        md5,
        sha1,
        sha256,
    };
    let mut files = vec![file(&dsc_name, stored.size, dsc_md5, dsc_sha1, stored.sha256.to_string())];
    let mut new = vec![0];
    for listed in &dsc.files {
        let sent = t.files.iter().find(|(name, _)| *name == listed.name).map(|(_, s)| s);
        let (md5, sha1) = match sent {
            Some(s) => {
                if s.size != listed.size || s.sha256.as_str() != listed.sha256 {
                    return Err(UploadError::Invalid(format!(
                        "{} differs from {dsc_name}: sent {} bytes with SHA-256 {}, the .dsc lists {} bytes with SHA-256 {}",
                        listed.name, s.size, s.sha256, listed.size, listed.sha256
                    )));
                }
                let (md5, sha1) = read_source_file(services, &listed.name, s).await?.map_err(UploadError::Invalid)?;
                new.push(files.len());
                (md5, sha1)
            }
            None => {
                let path = format!("{directory}/{}", listed.name);
                let db = &services.db;
                match rows::source_file_at(db, db.pool(), repo.id, &path).await? {
                    Some(f) if f.sha256 == listed.sha256 && u64::try_from(f.size).ok() == Some(listed.size) => {
                        (f.md5, f.sha1)
                    }
                    _ => {
                        return Err(UploadError::Invalid(format!(
                        "{} is listed in {dsc_name} but was not sent: send it as another apt.asset field with the .dsc",
                        listed.name
                    )))
                    }
                }
            }
        };
        if md5 != listed.md5 || listed.sha1.as_ref().is_some_and(|s| *s != sha1) {
            return Err(UploadError::Invalid(format!(
                "{} does not match the MD5 or SHA-1 that {dsc_name} lists for it",
                listed.name
            )));
        }
        files.push(file(&listed.name, listed.size, md5, sha1, listed.sha256.clone()));
    }
    for (i, f) in files.iter_mut().enumerate() {
        f.position = i64::try_from(i).unwrap_or(i64::MAX);
    }
    let source = AptSource {
        id: 0,
        repository_id: repo.id,
        component,
        name: dsc.source.clone(),
        version: dsc.version.clone(),
        control: dsc.text,
        dsc_path: format!("{directory}/{dsc_name}"),
        directory,
    };
    Ok(SourceUpload { source, files, new })
}

/// What a content selector sees of a binary package: its pool path and its component.
fn package_content(p: &AptPackage) -> (String, Component) {
    (p.pool_path.clone(), super::catalogue::entry(p).component)
}

/// What a content selector sees of a source package: its `.dsc`'s pool path and its component.
fn source_content(s: &AptSource) -> (String, Component) {
    (s.dsc_path.clone(), source_entry(s, std::iter::empty()).component)
}

/// A source package's catalogue entry: a component keyed by its `.dsc`'s pool path, with the
/// files it brought as assets (a file it shares with an earlier source stays that one's).
pub fn source_entry<'a>(s: &AptSource, files: impl Iterator<Item = &'a AptSourceFile>) -> Entry {
    let component = Component {
        key: s.dsc_path.clone(),
        group: s.component.clone(),
        name: s.name.clone(),
        version: s.version.clone(),
    };
    let assets = files
        .map(|f| NewAsset {
            path: f.pool_path.clone(),
            sha256: f.sha256.clone(),
            sha1: Some(f.sha1.clone()).filter(|s| !s.is_empty()),
            md5: Some(f.md5.clone()).filter(|m| !m.is_empty()),
            size: f.size,
            content_type: source_file_type(f.name()).into(),
        })
        .collect();
    Entry { component, assets }
}

/// How people name a package: `<name>_<version>_<architecture>`.
fn coordinate(p: &AptPackage) -> String {
    format!("{}_{}_{}", p.name, p.version, p.architecture)
}
