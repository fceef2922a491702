//! `packyard-api import apk`: an Alpine repository — a directory or a URL laid out as
//! `<branch>/<repository>/<arch>/` (a mirror, Nexus, Packyard) — into a hosted APK repository.
//! Each `APKINDEX.tar.gz` is verified against `--key` when given (the RSA public key apk trusts
//! for it); each package it lists is copied with its size checked and its `C:` (the SHA-1 of its
//! control member) compared with the package's own before it is stored as `PUT
//! <branch>/<repository>/<arch>/<file>` stores it.

use std::collections::BTreeSet;

use async_trait::async_trait;
use packyard_codecs::apk::index::{apkindex_text, index_member_text, verify_index};
use packyard_codecs::apk::signing::parse_public_keys;
use packyard_core::hosted::{self, UploadError};
use packyard_core::import::{Fetcher, ImportArgs, ImportError, Importer, Item, Location, StoreCx, Stored};
use packyard_model::repos::{FormatSettings, Repository};
use packyard_store::blobs::StoredBlob;

use super::hosted::{describe, ApkHosted, Target};
use super::settings::ApkSettings;
use super::{Unit, INDEX_FILE};

/// What to import.
pub struct ApkImport {
    pub from: Location,
    /// The PEM public key(s) the indexes must be signed by (`--key`).
    pub key: Option<String>,
    /// `--only branch=`, `repository=`, `architecture=` (each may repeat). A directory's are
    /// found under it when not chosen; a URL's branch and repository must be, its
    /// architectures default to the target repository's.
    pub branches: Vec<String>,
    pub repositories: Vec<String>,
    pub architectures: Vec<String>,
}

/// Where a package goes, and the `C:` its index gives.
#[derive(Debug, Clone)]
pub struct ApkItem {
    pub unit: Unit,
    pub file: String,
    pub checksum: String,
}

impl ApkImport {
    pub fn from_args(args: ImportArgs) -> Result<Self, String> {
        if let Some(key) = &args.key {
            parse_public_keys(key).map_err(|e| format!("--key: {e}"))?;
        }
        let mut out = Self {
            from: args.from,
            key: args.key,
            branches: Vec::new(),
            repositories: Vec::new(),
            architectures: Vec::new(),
        };
        for (name, value) in args.only {
            match name.as_str() {
                "branch" => out.branches.push(value),
                "repository" => out.repositories.push(value),
                "architecture" => out.architectures.push(value),
                _ => {
                    return Err(format!(
                        "--only {name}={value}: an APK import chooses branch=, repository=, architecture= (each may repeat)"
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The `branch/repository/arch` units to read.
    fn units(&self, repo: &Repository) -> Result<Vec<Unit>, ImportError> {
        let chosen = |list: &[String], name: &str| list.is_empty() || list.iter().any(|c| c == name);
        match &self.from {
            Location::Dir(root) => {
                let mut out = Vec::new();
                let dirs = |d: &std::path::Path| -> Vec<String> {
                    let mut v: Vec<String> = std::fs::read_dir(d)
                        .map(|rd| {
                            rd.filter_map(Result::ok)
                                .filter(|e| e.path().is_dir())
                                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    v.sort();
                    v
                };
                for b in dirs(root).into_iter().filter(|b| chosen(&self.branches, b)) {
                    for r in dirs(&root.join(&b)).into_iter().filter(|r| chosen(&self.repositories, r)) {
                        for a in dirs(&root.join(&b).join(&r)).into_iter().filter(|a| chosen(&self.architectures, a)) {
                            if root.join(&b).join(&r).join(&a).join(INDEX_FILE).is_file() {
                                out.push(Unit::new(&b, &r, &a).map_err(ImportError::source)?);
                            }
                        }
                    }
                }
                if out.is_empty() {
                    return Err(ImportError::source(format!(
                        "{}: no <branch>/<repository>/<arch>/{INDEX_FILE} below it",
                        root.display()
                    )));
                }
                Ok(out)
            }
            Location::Url(url) => {
                if self.branches.is_empty() || self.repositories.is_empty() {
                    return Err(ImportError::source(format!(
                        "--from {url}: name the branches and repositories to import with --only branch=v3.20 --only repository=main"
                    )));
                }
                let archs = if self.architectures.is_empty() {
                    ApkSettings::of(repo).architectures
                } else {
                    self.architectures.clone()
                };
                let mut out = Vec::new();
                for b in &self.branches {
                    for r in &self.repositories {
                        for a in &archs {
                            out.push(Unit::new(b, r, a).map_err(ImportError::source)?);
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

#[async_trait]
impl Importer for ApkImport {
    type Target = ApkItem;

    async fn plan(&self, fetcher: &Fetcher, repo: &Repository) -> Result<Vec<Item<ApkItem>>, ImportError> {
        let configured = ApkSettings::of(repo).architectures;
        let mut missing = BTreeSet::new();
        let keys = match &self.key {
            Some(k) => Some(parse_public_keys(k).map_err(|e| ImportError::source(format!("--key: {e}")))?),
            None => None,
        };
        let mut items = Vec::new();
        for unit in self.units(repo)? {
            let dir = self.from.join(&format!("{}/", unit.key()))?.as_dir();
            let at = dir.join(INDEX_FILE)?;
            let Some(bytes) = fetcher.read(&at).await? else {
                return Err(ImportError::source(format!("{at} is missing")));
            };
            let text = match &keys {
                Some(keys) => {
                    let member = verify_index(&bytes, keys).map_err(|e| {
                        ImportError::source(format!(
                            "{at} is not signed by the key given with --key: {e}; nothing was copied"
                        ))
                    })?;
                    index_member_text(&member)
                }
                None => apkindex_text(&bytes),
            }
            .map_err(|e| ImportError::source(format!("{at}: {e}")))?;
            if !configured.contains(&unit.arch) {
                missing.insert(unit.arch.clone());
            }
            for record in text.split("\n\n").map(|r| r.trim_matches('\n')).filter(|r| !r.is_empty()) {
                let field = |k: &str| record.lines().find_map(|l| l.strip_prefix(k)).map(str::to_string);
                let (Some(name), Some(version), Some(checksum)) = (field("P:"), field("V:"), field("C:")) else {
                    return Err(ImportError::source(format!("{at}: a record without P:, V: or C:")));
                };
                let file = format!("{name}-{version}.apk");
                items.push(Item {
                    key: format!("{}/{file}", unit.key()),
                    location: dir.join(&file)?,
                    sha256: None,
                    size: field("S:").and_then(|s| s.parse().ok()),
                    target: ApkItem { unit: unit.clone(), file, checksum },
                });
            }
        }
        if !missing.is_empty() {
            return Err(ImportError::source(format!(
                "repository {} does not publish the architectures {} the source has: add them to apk.architectures (PATCH /api/v1/repositories/{}) and import again — nothing was copied",
                repo.name,
                missing.into_iter().collect::<Vec<_>>().join(", "),
                repo.name
            )));
        }
        Ok(items)
    }

    async fn store(&self, cx: &StoreCx<'_>, item: &Item<ApkItem>, stored: StoredBlob) -> Result<Stored, UploadError> {
        let (services, t) = (cx.services, &item.target);
        let refusal = match describe(services, &stored).await {
            Ok(d) if d.checksum == t.checksum => None,
            Ok(d) => Some(UploadError::Invalid(format!(
                "{}: the package's checksum is {}, its index lists {}: not copied",
                item.key, d.checksum, t.checksum
            ))),
            Err(e) => Some(e),
        };
        if let Some(e) = refusal {
            hosted::discard(services, &stored.sha256, stored.created).await;
            return Err(e);
        }
        let target = Target { unit: t.unit.clone(), file: t.file.clone() };
        Ok(Stored::alone(hosted::upload_stored(&ApkHosted, services, cx.repo, target, stored, cx.actor).await?.created))
    }
}
