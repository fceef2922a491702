//! `packyard-api import conan --from URL`: every reference, recipe revision and package revision
//! of a Conan 2 remote (conan_server, Artifactory, Nexus, another Packyard: the REST v2 API) into
//! a hosted Conan repository. Each revision is one item of the ledger, its reference the chain
//! (revisions oldest first, each recipe revision before its packages: the target stamps each
//! with the time it arrives, so the latest stays the latest). A remote gives no checksums; a
//! revision's `conanmanifest.txt` lists the MD5 of every file the client unpacks, so each
//! plain file and each member of its archives is checked against it before anything is
//! stored, and the manifest goes last, as the client uploads it (the revision appears whole).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use packyard_codecs::archive::{expansion_limit, ArchiveError};
use packyard_codecs::conan::{
    archive_compression, archive_members, check_file_path, check_revision, glob_matches, FileHashes, Manifest, Member,
    Reference,
};
use packyard_core::hosted::{self, read_back, UploadError};
use packyard_core::import::{discard_all, Fetcher, ImportArgs, ImportError, Importer, Item, Location, StoreCx, Stored};
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;

use super::hosted::{ConanHosted, Revision, Target};

const MANIFEST: &str = "conanmanifest.txt";

/// A Conan remote, all of it or the references chosen.
pub struct ConanImport {
    remote: Location,
    /// `--only reference=PATTERN` (Conan's glob, e.g. `zlib/*`); empty: every reference.
    patterns: Vec<String>,
}

/// A revision to copy: where its files are on the remote.
#[derive(Debug, Clone)]
pub struct ConanItem {
    pub revision: Revision,
    /// The revision's folder on the remote (`…/revisions/<rrev>/` or
    /// `…/packages/<id>/revisions/<prev>/`).
    pub base: Location,
}

impl ConanImport {
    /// From the command line: `--from` the remote's URL (as `conan remote add` takes it),
    /// `--only reference=PATTERN`.
    pub fn from_args(args: ImportArgs) -> Result<Self, String> {
        if args.key.is_some() {
            return Err(
                "--key: a Conan remote signs nothing; each revision is checked against its conanmanifest.txt".into()
            );
        }
        let Location::Url(_) = &args.from else {
            return Err(format!(
                "--from {}: a Conan import reads a remote's URL (as `conan remote add` takes it)",
                args.from
            ));
        };
        let mut patterns = Vec::new();
        for (name, value) in args.only {
            match name.as_str() {
                "reference" => patterns.push(value),
                _ => {
                    return Err(format!(
                        "--only {name}={value}: a Conan import chooses reference=PATTERN (e.g. zlib/*; may repeat)"
                    ))
                }
            }
        }
        Ok(Self { remote: args.from, patterns })
    }

    fn at(&self, rel: &str) -> Result<Location, ImportError> {
        self.remote.join(rel)
    }

    /// A JSON answer of the remote.
    async fn json(&self, fetcher: &Fetcher, at: &Location) -> Result<Option<serde_json::Value>, ImportError> {
        let Some(body) = fetcher.read(at).await? else { return Ok(None) };
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| ImportError::source(format!("{at}: not the JSON of a Conan remote: {e}")))
    }

    /// A list of revisions (`{"revisions": [{"revision": …, "time": …}]}`, newest first), oldest
    /// first: by their times when each has one (ISO 8601, the same form), else in the reverse
    /// of the list's order.
    async fn revisions(&self, fetcher: &Fetcher, at: &Location) -> Result<Vec<String>, ImportError> {
        let Some(v) = self.json(fetcher, at).await? else { return Ok(Vec::new()) };
        let mut out: Vec<(Option<String>, String)> = Vec::new();
        for r in v["revisions"].as_array().into_iter().flatten() {
            let rev = r["revision"].as_str().unwrap_or_default();
            check_revision("revision", rev).map_err(|e| ImportError::source(format!("{at}: {e}")))?;
            out.push((r["time"].as_str().map(str::to_string), rev.to_string()));
        }
        out.reverse();
        if out.iter().all(|(t, _)| t.is_some()) {
            out.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(out.into_iter().map(|(_, r)| r).collect())
    }

    /// With credentials: Conan's token for them (`GET /v2/users/authenticate`), sent from now
    /// on (and had again when it expires).
    async fn sign_in(&self, fetcher: &Fetcher) -> Result<(), ImportError> {
        fetcher.trade_for_token(&self.at("v2/users/authenticate")?).await
    }

    /// Every reference the remote's search lists.
    async fn references(&self, fetcher: &Fetcher) -> Result<Vec<Reference>, ImportError> {
        let Location::Url(mut url) = self.at("v2/conans/search")? else {
            return Err(ImportError::source("a Conan remote is a URL"));
        };
        url.set_query(Some("q=*"));
        let at = Location::Url(url);
        let v = self.json(fetcher, &at).await?.ok_or_else(|| {
            ImportError::source(format!(
                "{at}: not found: is {} a Conan 2 remote's URL (as `conan remote add` takes it)?",
                self.remote
            ))
        })?;
        let mut out = Vec::new();
        for r in v["results"].as_array().into_iter().flatten() {
            let text = r.as_str().unwrap_or_default();
            let reference = Reference::parse(text).map_err(|e| ImportError::source(format!("{at}: {e}")))?;
            if self.patterns.is_empty() || self.patterns.iter().any(|p| glob_matches(p, text)) {
                out.push(reference);
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Importer for ConanImport {
    type Target = ConanItem;

    async fn plan(&self, fetcher: &Fetcher, _repo: &Repository) -> Result<Vec<Item<ConanItem>>, ImportError> {
        self.sign_in(fetcher).await?;
        let mut items = Vec::new();
        for reference in self.references(fetcher).await? {
            let root = format!("v2/conans/{}", reference.url_path());
            let display = reference.display();
            for rrev in self.revisions(fetcher, &self.at(&format!("{root}/revisions"))?).await? {
                let base = self.at(&format!("{root}/revisions/{rrev}/"))?;
                let revision = Revision { reference: display.clone(), rrev: rrev.clone(), package: None };
                items.push(item(revision, base.clone())?);
                let search = base.join("search")?;
                let packages = self.json(fetcher, &search).await?.unwrap_or_default();
                let mut ids: Vec<&String> = packages.as_object().into_iter().flat_map(|m| m.keys()).collect();
                ids.sort();
                for id in ids {
                    check_revision("package id", id).map_err(|e| ImportError::source(format!("{search}: {e}")))?;
                    let pkg = format!("{root}/revisions/{rrev}/packages/{id}/revisions");
                    for prev in self.revisions(fetcher, &self.at(&pkg)?).await? {
                        let base = self.at(&format!("{pkg}/{prev}/"))?;
                        let package = Some((id.clone(), prev));
                        let revision = Revision { reference: display.clone(), rrev: rrev.clone(), package };
                        items.push(item(revision, base)?);
                    }
                }
            }
        }
        if items.is_empty() {
            let chosen = if self.patterns.is_empty() {
                String::new()
            } else {
                format!(" matching {}", self.patterns.join(", "))
            };
            return Err(ImportError::source(format!(
                "{}: the remote lists no revision of a reference{chosen}",
                self.remote
            )));
        }
        Ok(items)
    }

    fn chain<'a>(&self, item: &'a Item<ConanItem>) -> Option<&'a str> {
        Some(&item.target.revision.reference)
    }

    /// A recipe revision that is not copied holds back the later ones (they would become
    /// older than it when it comes); a package revision holds back nothing.
    fn breaks_chain(&self, item: &Item<ConanItem>) -> bool {
        item.target.revision.package.is_none()
    }

    async fn store(
        &self,
        cx: &StoreCx<'_>,
        item: &Item<ConanItem>,
        manifest: StoredBlob,
    ) -> Result<Stored, UploadError> {
        let services = cx.services;
        let mut fetched: Vec<(String, StoredBlob, FileHashes)> = Vec::new();
        let outcome = fetch_revision(cx, &item.target, &manifest, &mut fetched).await;
        let stored = match outcome {
            Ok(hashes) => store_revision(cx, &item.target, fetched, (manifest, hashes)).await,
            Err(e) => {
                let received: Vec<StoredBlob> =
                    fetched.into_iter().map(|(_, blob, _)| blob).chain([manifest]).collect();
                discard_all(services, &received).await;
                Err(e)
            }
        };
        stored
    }
}

fn message(e: UploadError) -> String {
    match e {
        UploadError::Invalid(m) => m,
        other => other.to_string(),
    }
}

fn item(revision: Revision, base: Location) -> Result<Item<ConanItem>, ImportError> {
    Ok(Item {
        key: revision.coordinate(),
        location: base.join(&format!("files/{MANIFEST}"))?,
        sha256: None,
        size: None,
        target: ConanItem { revision, base },
    })
}

/// The MD5 and SHA-1 of a stored file, and the MD5 of each member when it is an archive.
async fn hash(
    cx: &StoreCx<'_>,
    path: &str,
    blob: &StoredBlob,
) -> Result<(FileHashes, BTreeMap<String, Member>), UploadError> {
    let (name, limit) = (path.to_string(), expansion_limit(blob.size));
    let archive = archive_compression(path).is_some() && !path.contains('/');
    read_back(cx.services, &blob.sha256, move |r| {
        let mut hashes = FileHashes::default();
        let mut tee = Tee { inner: r, hashes: &mut hashes };
        let members = if archive {
            archive_members(&mut tee, &name, limit)?
        } else {
            std::io::copy(&mut tee, &mut std::io::sink()).map_err(|e| ArchiveError::Corrupt(e.to_string()))?;
            BTreeMap::new()
        };
        // What the archive check left unread (padding after the end blocks) counts too.
        std::io::copy(&mut tee, &mut std::io::sink()).map_err(|e| ArchiveError::Corrupt(e.to_string()))?;
        Ok::<_, ArchiveError>((hashes, members))
    })
    .await?
    .map_err(|e| match e {
        e @ ArchiveError::TooLarge { .. } => UploadError::TooLarge(e.to_string()),
        e => UploadError::Invalid(format!("{path} is not a whole archive: {e}")),
    })
}

/// A reader that hashes what passes through it.
struct Tee<'a, R> {
    inner: R,
    hashes: &'a mut FileHashes,
}

impl<R: std::io::Read> std::io::Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hashes.update(&buf[..n]);
        Ok(n)
    }
}

/// Fetches every file of the revision but its manifest into `fetched` and checks them all
/// against the manifest: the manifest's own hashes when they agree.
async fn fetch_revision(
    cx: &StoreCx<'_>,
    t: &ConanItem,
    manifest_blob: &StoredBlob,
    fetched: &mut Vec<(String, StoredBlob, FileHashes)>,
) -> Result<FileHashes, UploadError> {
    let (manifest_hashes, _) = hash(cx, MANIFEST, manifest_blob).await?;
    if manifest_blob.size > 4 << 20 {
        return Err(UploadError::Invalid(format!("{MANIFEST} is larger than 4 MiB")));
    }
    let text = cx.services.blobs.read_all(&manifest_blob.sha256).await?;
    let text = std::str::from_utf8(&text).map_err(|_| UploadError::Invalid(format!("{MANIFEST} is not UTF-8 text")))?;
    let manifest = Manifest::parse(text).map_err(|e| UploadError::Invalid(e.to_string()))?;

    let listing = t.base.join("files").map_err(|e| UploadError::Invalid(e.to_string()))?;
    let body = cx.fetcher.read(&listing).await.map_err(|e| UploadError::Invalid(e.to_string()))?;
    let body = body.ok_or_else(|| UploadError::Invalid(format!("{listing}: the remote lists no files")))?;
    let listed: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| UploadError::Invalid(format!("{listing}: not the JSON of a Conan remote: {e}")))?;
    let mut paths: Vec<String> =
        listed["files"].as_object().into_iter().flat_map(|m| m.keys().cloned()).filter(|p| p != MANIFEST).collect();
    paths.sort();
    let mut files: BTreeMap<String, Member> = BTreeMap::new();
    for path in paths {
        check_file_path(&path).map_err(|e| UploadError::Invalid(format!("{listing}: {e}")))?;
        let at = t.base.join(&format!("files/{path}")).map_err(|e| UploadError::Invalid(e.to_string()))?;
        // (An empty file is one: a header-only package's `conaninfo.txt`.)
        let blob = cx.fetch(&at, "the remote").await?;
        let checked = hash(cx, &path, &blob).await;
        let (hashes, members) = match checked {
            Ok(h) => h,
            Err(e) => {
                hosted::discard(cx.services, &blob.sha256, blob.created).await;
                return Err(e);
            }
        };
        // The manifest lists what the client unpacks: the archives' members and the plain
        // files beside them, not the archives themselves nor `metadata/`.
        if archive_compression(&path).is_none() && !path.starts_with("metadata/") {
            files.insert(path.clone(), Member::File(hashes_md5(&hashes)));
        }
        files.extend(members);
        fetched.push((path, blob, hashes));
    }
    manifest.check_files(&files).map_err(|e| UploadError::Invalid(format!("{e}: not copied")))?;
    Ok(manifest_hashes)
}

/// A file's MD5 so far, leaving the hashes to go on.
fn hashes_md5(h: &FileHashes) -> String {
    h.clone().finish().0
}

/// Uploads the checked files as the client does: the recipe's `conanfile.py` or the package's
/// `conaninfo.txt` first, the manifest last.
async fn store_revision(
    cx: &StoreCx<'_>,
    t: &ConanItem,
    mut fetched: Vec<(String, StoredBlob, FileHashes)>,
    manifest: (StoredBlob, FileHashes),
) -> Result<Stored, UploadError> {
    fetched.sort_by_key(|(path, _, _)| !matches!(path.as_str(), "conanfile.py" | "conaninfo.txt"));
    let with = fetched.iter().map(|(_, blob, _)| blob.size).sum();
    fetched.push((MANIFEST.to_string(), manifest.0, manifest.1));
    let mut created = false;
    let mut rest = fetched.into_iter();
    while let Some((path, blob, hashes)) = rest.next() {
        let target = Target {
            revision: t.revision.clone(),
            path: path.clone(),
            hashes: Arc::new(Mutex::new(Some(hashes))),
            sha1_header: None,
            time_ms: None,
        };
        match hosted::upload_stored(&ConanHosted, cx.services, cx.repo, target, blob, cx.actor).await {
            Ok(u) => created = u.created,
            Err(e) => {
                // Not yet recorded: what is left is not kept (what is recorded waits, invisible
                // without its manifest, for the next run).
                let left: Vec<StoredBlob> = rest.map(|(_, blob, _)| blob).collect();
                discard_all(cx.services, &left).await;
                return Err(UploadError::Invalid(format!("{path}: {}", message(e))));
            }
        }
    }
    Ok(Stored { created, with })
}
