//! Hosted Conan over the engine. Every file of a recipe or package revision is one upload; the
//! revision stays invisible until its `conanmanifest.txt` arrives and every uploaded file it
//! lists has the listed MD5. A package archive is read to its end first. A complete revision's
//! files never change (only `metadata/…` may be added or replaced). The file's row, the
//! revision's completion, and the changes of the reference's projection and of the search index
//! are one transaction.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::rows::{self, ConanFile, RevisionKey};
use super::{KIND, SEARCH_KIND, SEARCH_UNIT};
use packyard_codecs::archive::{check_tar, expansion_limit, ArchiveError};
use packyard_codecs::conan::{archive_compression, check_conaninfo, FileHashes, Manifest};

/// `conanmanifest.txt` and `conaninfo.txt` are a few KiB; larger is not one.
const MAX_TEXT_BYTES: u64 = 4 << 20;
use packyard_core::hosted::{
    read_back, Existing, Hosted, InTx, Inspected, Removed, TxError, UnitRef, UploadError, Written,
};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;
use packyard_store::db::DbResult;

/// Conan's hosted rules.
pub struct ConanHosted;

/// A revision: the recipe revision, or a package revision of it.
#[derive(Debug, Clone)]
pub struct Revision {
    pub reference: String,
    pub rrev: String,
    /// `(package id, package revision)`.
    pub package: Option<(String, String)>,
}

impl Revision {
    fn key(&self, repo: i64) -> RevisionKey<'_> {
        let (pkgid, prev) = self.package.as_ref().map_or(("", ""), |(p, v)| (p.as_str(), v.as_str()));
        RevisionKey { repo, reference: &self.reference, rrev: &self.rrev, pkgid, prev }
    }

    /// `ref#rrev` or `ref#rrev:pkgid#prev`.
    pub fn coordinate(&self) -> String {
        match &self.package {
            None => format!("{}#{}", self.reference, self.rrev),
            Some((p, v)) => format!("{}#{}:{p}#{v}", self.reference, self.rrev),
        }
    }
}

/// Where a file goes, with the digests taken as its body streamed in (`hashes`, complete once
/// the engine inspects it) and the client's `X-Checksum-Sha1`.
pub struct Target {
    pub revision: Revision,
    pub path: String,
    pub hashes: Arc<Mutex<Option<FileHashes>>>,
    pub sha1_header: Option<String>,
    /// The revision's time when it is not the upload's (a copy keeps its source's: `latest`
    /// orders by it).
    pub time_ms: Option<i64>,
}

/// One file of a revision, checked.
pub struct Upload {
    revision: Revision,
    file: ConanFile,
    /// The parsed manifest, when the file is `conanmanifest.txt`.
    manifest: Option<Manifest>,
    /// When it arrived, by the instance's clock (`debug.clock_offset_secs` moves it in the
    /// release-age tests): a revision it completes is timed so.
    at_ms: i64,
}

/// What a `DELETE` names: a revision (with its packages), only its packages, or a package
/// revision.
pub struct Removal {
    pub revision: Revision,
    pub packages_only: bool,
}

fn units(reference: &str) -> Vec<UnitRef> {
    vec![(KIND, reference.to_string()), (SEARCH_KIND, SEARCH_UNIT.to_string())]
}

#[async_trait]
impl Hosted for ConanHosted {
    type Target = Target;
    type Artifact = Upload;
    type Removal = Removal;

    const NAME: &'static str = "conan";
    const BODY: Option<&'static str> = None;

    async fn inspect(
        &self,
        services: &Services,
        _repo: &Repository,
        t: &Target,
        stored: &StoredBlob,
    ) -> Result<Inspected<Upload>, UploadError> {
        let hashes = t.hashes.lock().ok().and_then(|mut h| h.take());
        let (md5, sha1) =
            hashes.map(FileHashes::finish).ok_or_else(|| UploadError::Invalid("the upload was not hashed".into()))?;
        if let Some(want) = &t.sha1_header {
            if !want.trim().eq_ignore_ascii_case(&sha1) {
                return Err(UploadError::Invalid(format!(
                    "X-Checksum-Sha1 says {want} but the body's SHA-1 is {sha1}: the upload was corrupted"
                )));
            }
        }
        if let Some(compression) = archive_compression(&t.path) {
            let (what, limit) = (t.path.clone(), expansion_limit(stored.size));
            match read_back(services, &stored.sha256, move |r| check_tar(r, compression, &what, limit)).await? {
                Ok(_) => {}
                Err(e @ ArchiveError::TooLarge { .. }) => return Err(UploadError::TooLarge(e.to_string())),
                Err(e) => return Err(UploadError::Invalid(format!("{} is not a whole archive: {e}", t.path))),
            }
        }
        // The two files the client reads as text: by its grammar, whole, before they count.
        let text = if matches!(t.path.as_str(), "conanmanifest.txt" | "conaninfo.txt") {
            if stored.size > MAX_TEXT_BYTES {
                return Err(UploadError::Invalid(format!("{} is larger than {MAX_TEXT_BYTES} bytes", t.path)));
            }
            let bytes = services.blobs.read_all(&stored.sha256).await?;
            Some(
                String::from_utf8(bytes.to_vec())
                    .map_err(|_| UploadError::Invalid(format!("{} is not UTF-8 text", t.path)))?,
            )
        } else {
            None
        };
        if t.path == "conaninfo.txt" {
            check_conaninfo(text.as_deref().unwrap_or_default()).map_err(|e| UploadError::Invalid(e.to_string()))?;
        }
        let manifest = if t.path == "conanmanifest.txt" {
            Some(
                Manifest::parse(text.as_deref().unwrap_or_default())
                    .map_err(|e| UploadError::Invalid(e.to_string()))?,
            )
        } else {
            None
        };
        let file = ConanFile {
            path: t.path.clone(),
            sha256: stored.sha256.to_string(),
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
            md5,
            sha1,
        };
        let coordinate = t.revision.coordinate();
        Ok(Inspected {
            artifact: Upload {
                revision: t.revision.clone(),
                file,
                manifest,
                at_ms: t.time_ms.unwrap_or_else(|| services.policy.now_ms()),
            },
            coordinate,
            derived: Vec::new(),
        })
    }

    fn units(&self, _repo: &Repository, u: &Upload) -> Vec<UnitRef> {
        units(&u.revision.reference)
    }

    fn content(&self, u: &Upload) -> (String, packyard_core::hosted::Component) {
        let r = &u.revision;
        match packyard_codecs::conan::Reference::parse(&r.reference) {
            Ok(reference) => {
                let package = r.package.as_ref().map(|(p, v)| (p.as_str(), v.as_str()));
                let path = format!("{}files/{}", super::catalogue::base(&reference, &r.rrev, package), u.file.path);
                (path, super::catalogue::component(&reference, &r.rrev))
            }
            // Checked when the route was parsed: never reached. Selects nothing a path names.
            Err(_) => (
                String::new(),
                packyard_core::hosted::Component {
                    key: r.reference.clone(),
                    group: String::new(),
                    name: r.reference.clone(),
                    version: String::new(),
                },
            ),
        }
    }

    fn receipt(&self, u: &Upload) -> serde_json::Value {
        serde_json::json!({"revision": u.revision.coordinate(), "path": u.file.path, "sha256": u.file.sha256,
            "size": u.file.size})
    }

    async fn existing(&self, t: &mut InTx<'_, '_>, u: &Upload) -> DbResult<Existing<Self::Removal>> {
        let rev = rows::ensure_revision_in(t.db, t.tx, u.revision.key(t.repo.id)).await?;
        if !rev.complete || u.file.path.starts_with("metadata/") {
            return Ok(Existing::Overwrite);
        }
        let files = rows::files_in(t.db, t.tx, rev.id).await?;
        Ok(if files.iter().any(|f| f.path == u.file.path && f.sha256 == u.file.sha256) {
            Existing::Same
        } else {
            Existing::Refuse(UploadError::Conflict(format!(
                "{} is already uploaded with other content for {}; a revision never changes",
                u.revision.coordinate(),
                u.file.path
            )))
        })
    }

    async fn write(&self, t: &mut InTx<'_, '_>, u: &Upload, _uploader: &str) -> Result<Written, TxError> {
        let (db, tx) = (t.db, &mut *t.tx);
        let rev = rows::ensure_revision_in(db, tx, u.revision.key(t.repo.id)).await?;
        let completes = u.manifest.is_some() && !rev.complete;
        if let (Some(manifest), true) = (&u.manifest, completes) {
            let existing = rows::files_in(db, tx, rev.id).await?;
            for f in existing.iter().filter(|f| f.path != u.file.path) {
                if let Some(want) = manifest.files.get(&f.path) {
                    if *want != f.md5 {
                        return Err(TxError::Refused(UploadError::Invalid(format!(
                            "{} does not match conanmanifest.txt (MD5 {} listed, {} uploaded)",
                            f.path, want, f.md5
                        ))));
                    }
                }
            }
            let needed = if u.revision.package.is_some() { "conaninfo.txt" } else { "conanfile.py" };
            if !existing.iter().any(|f| f.path == needed) {
                return Err(TxError::Refused(UploadError::Invalid(format!(
                    "conanmanifest.txt arrived before {needed}: upload {needed} first"
                ))));
            }
        }
        rows::put_file_in(db, tx, rev.id, &u.file).await?;
        if completes {
            rows::complete_in(db, tx, rev.id, u.at_ms).await?;
        }
        // A complete revision's projection and catalogue entry change with it (completed now,
        // or a metadata file).
        let visible = completes || rev.complete;
        let catalogue = if visible {
            let files = rows::files_in(db, tx, rev.id).await?;
            let package = u.revision.package.as_ref().map(|(p, v)| (p.as_str(), v.as_str()));
            super::catalogue::entry(&u.revision.reference, &u.revision.rrev, package, &files)
        } else {
            None
        };
        Ok(Written { republish: visible, audit: completes, catalogue })
    }

    async fn remove(&self, t: &mut InTx<'_, '_>, r: &Removal) -> DbResult<Option<Removed>> {
        let rev = &r.revision;
        let package = rev.package.as_ref().map(|(p, v)| (p.as_str(), v.as_str()));
        let n = rows::delete_in(t.db, t.tx, t.repo.id, &rev.reference, &rev.rrev, package, r.packages_only).await?;
        if n == 0 && !r.packages_only {
            return Ok(None);
        }
        if n == 0 {
            // No packages to remove: fine for a complete recipe revision (the client asks again
            // after a 404 anyway), a 404 for one that is not there.
            let recipe =
                RevisionKey { repo: t.repo.id, reference: &rev.reference, rrev: &rev.rrev, pkgid: "", prev: "" };
            if !rows::revision_in(t.db, t.tx, recipe).await?.is_some_and(|r| r.complete) {
                return Ok(None);
            }
        }
        let content = packyard_codecs::conan::Reference::parse(&rev.reference).ok().map(|reference| {
            let path = super::catalogue::base(&reference, &rev.rrev, package);
            (path, super::catalogue::component(&reference, &rev.rrev))
        });
        Ok(Some(Removed {
            coordinate: rev.coordinate(),
            units: units(&rev.reference),
            detail: serde_json::json!({"rows": n}),
            forget: super::catalogue::forget(&rev.reference, &rev.rrev, package, r.packages_only),
            content,
        }))
    }

    /// `<reference>#<rrev>`: the recipe revision and its packages.
    fn removal(&self, key: &str) -> Option<Removal> {
        let (reference, rrev) = key.rsplit_once('#')?;
        let revision = Revision { reference: reference.into(), rrev: rrev.into(), package: None };
        Some(Removal { revision, packages_only: false })
    }

    /// Every file of the recipe revision and of its package revisions, uploaded as the client
    /// does: the recipe first, each revision's `conanfile.py` or `conaninfo.txt` first and its
    /// manifest last (which completes it); each file's hashes read from its blob.
    async fn copy_targets(
        &self,
        services: &Services,
        _to: &Repository,
        (key, created_at): (&str, i64),
        assets: &[(String, StoredBlob)],
    ) -> Result<Vec<(Target, StoredBlob)>, UploadError> {
        let Some((reference, rrev)) = key.rsplit_once('#') else {
            return Err(UploadError::Invalid(format!("{key} is not <reference>#<revision>")));
        };
        let mut files = Vec::new();
        for (path, blob) in assets {
            let (package, file) = match path.split_once(&format!("/revisions/{rrev}/")).map(|(_, rest)| rest) {
                Some(rest) => match rest.strip_prefix("files/") {
                    Some(file) => (None, file),
                    None => {
                        let (pkgid, rest) = rest
                            .strip_prefix("packages/")
                            .and_then(|r| r.split_once("/revisions/"))
                            .ok_or_else(|| UploadError::Invalid(format!("{path} is not a file of {key}")))?;
                        let (prev, file) = rest
                            .split_once("/files/")
                            .ok_or_else(|| UploadError::Invalid(format!("{path} is not a file of {key}")))?;
                        (Some((pkgid.to_string(), prev.to_string())), file)
                    }
                },
                None => return Err(UploadError::Invalid(format!("{path} is not a file of {key}"))),
            };
            // The recipe's files first; within a revision its first file first, the manifest last.
            let rank = match file {
                "conanfile.py" | "conaninfo.txt" => 0,
                "conanmanifest.txt" => 2,
                _ => 1,
            };
            files.push(((package.is_some(), package.clone(), rank), package, file.to_string(), blob.clone()));
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Vec::with_capacity(files.len());
        for (_, package, file, blob) in files {
            let hashes = read_back(services, &blob.sha256, |r| {
                let mut h = FileHashes::default();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match std::io::Read::read(r, &mut buf) {
                        Ok(0) => return Ok(h),
                        Ok(n) => h.update(&buf[..n]),
                        Err(e) => return Err(e.to_string()),
                    }
                }
            })
            .await?
            .map_err(|e| UploadError::Invalid(format!("cannot read {file}: {e}")))?;
            let revision = Revision { reference: reference.to_string(), rrev: rrev.to_string(), package };
            let hashes = Arc::new(Mutex::new(Some(hashes)));
            let target = Target { revision, path: file, hashes, sha1_header: None, time_ms: Some(created_at) };
            out.push((target, blob));
        }
        Ok(out)
    }
}
