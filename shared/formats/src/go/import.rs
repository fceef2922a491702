//! `packyard-api import go`: a Go module cache (`GOMODCACHE`, or its `cache/download` directory,
//! which is also a file `GOPROXY`) into a hosted Go repository. Each `<module>/@v/<version>.zip`
//! with its `.ziphash` (the `h1:` that `go.sum` pins) is one item: the zip is checked whole and
//! its `h1:` must be the one the cache recorded before it is stored, as `PUT
//! <module>/@v/<version>.zip` stores it (the `.mod` from the zip, the checksum database's record).

use async_trait::async_trait;
use packyard_codecs::go::unescape;
use packyard_core::hosted::{self, UploadError};
use packyard_core::import::{Fetcher, ImportArgs, ImportError, Importer, Item, Location, StoreCx};
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;

use super::hosted::{check, limits, GoHosted, Target};

/// What to import: a module cache, all of it or the modules chosen.
pub struct GoImport {
    /// The `cache/download` directory.
    pub download: std::path::PathBuf,
    /// `--only module=PATH` (each may repeat); empty: every module.
    pub modules: Vec<String>,
}

/// A module version and the `h1:` its cache recorded.
#[derive(Debug, Clone)]
pub struct GoItem {
    pub module: String,
    pub version: String,
    pub h1: String,
}

fn source_err(m: impl Into<String>) -> ImportError {
    ImportError::Source(m.into())
}

impl GoImport {
    /// From the command line: `--from` a module cache directory, `--only module=PATH`.
    pub fn from_args(args: ImportArgs) -> Result<Self, String> {
        if args.key.is_some() {
            return Err(
                "--key: a module cache's zips are checked against the h1: hashes it recorded (go.sum's), not a key"
                    .into(),
            );
        }
        let Location::Dir(dir) = &args.from else {
            return Err(format!(
                "--from {}: a Go import reads a module cache directory (GOMODCACHE, or its cache/download)",
                args.from
            ));
        };
        let download = if dir.join("cache/download").is_dir() { dir.join("cache/download") } else { dir.clone() };
        let mut modules = Vec::new();
        for (name, value) in args.only {
            match name.as_str() {
                "module" => modules.push(value),
                _ => return Err(format!("--only {name}={value}: a Go import chooses module=PATH (may repeat)")),
            }
        }
        Ok(Self { download, modules })
    }
}

/// Every `@v` directory below `dir`, with the module path its place names (escaped).
fn version_dirs(
    dir: &std::path::Path,
    prefix: &str,
    out: &mut Vec<(String, std::path::PathBuf)>,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().to_string();
        let path = e.path();
        if !path.is_dir() || name.starts_with('.') {
            continue;
        }
        if name == "@v" {
            out.push((prefix.trim_end_matches('/').to_string(), path));
        } else if name != "sumdb" || !prefix.is_empty() {
            version_dirs(&path, &format!("{prefix}{name}/"), out)?;
        }
    }
    Ok(())
}

#[async_trait]
impl Importer for GoImport {
    type Target = GoItem;

    async fn plan(&self, _fetcher: &Fetcher, _repo: &Repository) -> Result<Vec<Item<GoItem>>, ImportError> {
        let mut dirs = Vec::new();
        version_dirs(&self.download, "", &mut dirs).map_err(|e| {
            source_err(format!("{}: {e} (a module cache has cache/download/<module>/@v/)", self.download.display()))
        })?;
        let mut items = Vec::new();
        for (escaped, at) in dirs {
            let module = unescape(&escaped).map_err(|e| source_err(format!("{}: {}", at.display(), e.0)))?;
            if !self.modules.is_empty() && !self.modules.contains(&module) {
                continue;
            }
            let mut zips: Vec<_> = std::fs::read_dir(&at)
                .map_err(|e| source_err(format!("{}: {e}", at.display())))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "zip"))
                .collect();
            zips.sort();
            for zip in zips {
                let stem = zip.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
                let version = unescape(&stem).map_err(|e| source_err(format!("{}: {}", zip.display(), e.0)))?;
                let hash = zip.with_extension("ziphash");
                // A zip without its hash is a download the go command did not finish.
                let Ok(h1) = std::fs::read_to_string(&hash) else { continue };
                let size = std::fs::metadata(&zip).map(|m| m.len()).ok();
                items.push(Item {
                    key: format!("{module}@{version}"),
                    location: Location::Dir(zip.clone()),
                    sha256: None,
                    size,
                    target: GoItem { module: module.clone(), version, h1: h1.trim().to_string() },
                });
            }
        }
        if items.is_empty() {
            return Err(source_err(format!("{}: no module zip with its .ziphash", self.download.display())));
        }
        Ok(items)
    }

    async fn store(&self, cx: &StoreCx<'_>, item: &Item<GoItem>, stored: StoredBlob) -> Result<bool, UploadError> {
        let (services, t) = (cx.services, &item.target);
        let checked = check(services, &stored, Some((&t.module, &t.version)), &limits(services)).await;
        let refusal = match checked {
            Ok((_, _, verified)) if verified.h1 == t.h1 => None,
            Ok((_, _, verified)) => Some(UploadError::Invalid(format!(
                "{}@{}: the zip's hash is {}, the module cache recorded {}: not copied",
                t.module, t.version, verified.h1, t.h1
            ))),
            Err(e) => Some(e),
        };
        if let Some(e) = refusal {
            hosted::discard(services, &stored.sha256, stored.created).await;
            return Err(e);
        }
        let target = Target::Coordinate { module: t.module.clone(), version: t.version.clone() };
        Ok(hosted::upload_stored(&GoHosted, services, cx.repo, target, stored, cx.actor).await?.created)
    }
}
