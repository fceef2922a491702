//! `packyard-api import go`: a Go module cache (`GOMODCACHE`, or its `cache/download` directory,
//! which is also a file `GOPROXY`) or a module proxy's URL (`GOPROXY`, the modules named with
//! `--only module=`, their versions from `@v/list`) into a hosted Go repository. Each
//! `<module>/@v/<version>.zip` is one item: the zip is checked whole, and its `h1:` must be the
//! one the cache recorded in its `.ziphash` (what the go command verified against `go.sum` and
//! the checksum database), or — from a proxy, which is trusted for what it serves — its
//! `go.mod` the `.mod` the proxy serves, before it is stored as `PUT <module>/@v/<version>.zip` stores it (the `.mod`
//! from the zip, the checksum database's record).

use async_trait::async_trait;
use packyard_codecs::go::{escape, unescape};
use packyard_core::hosted::{self, UploadError};
use packyard_core::import::{Fetcher, ImportArgs, ImportError, Importer, Item, Location, StoreCx, Stored};
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;

use super::hosted::{check, limits, GoHosted, Target};

/// What to import: a module cache, all of it or the modules chosen, or the chosen modules of a
/// module proxy.
pub struct GoImport {
    pub source: GoSource,
    /// `--only module=PATH` (each may repeat); empty: every module (of a cache).
    pub modules: Vec<String>,
}

/// Where the modules are.
pub enum GoSource {
    /// A module cache's `cache/download` directory.
    Cache(std::path::PathBuf),
    /// A module proxy (`GOPROXY`): a URL that answers `<module>/@v/list`.
    Proxy(Location),
}

/// A module version and what its zip must agree with.
#[derive(Debug, Clone)]
pub struct GoItem {
    pub module: String,
    pub version: String,
    pub expect: Expect,
}

/// What a module zip is checked against before it is stored.
#[derive(Debug, Clone)]
pub enum Expect {
    /// The `h1:` a module cache recorded (its `.ziphash`).
    H1(String),
    /// The `.mod` a proxy serves for the version: the zip's `go.mod` must be those bytes. (The
    /// proxy is trusted for both: nothing independent of it vouches for the zip.)
    GoMod(Location),
}

impl GoImport {
    /// From the command line: `--from` a module cache directory or a module proxy's URL,
    /// `--only module=PATH`.
    pub fn from_args(args: ImportArgs) -> Result<Self, String> {
        if args.key.is_some() {
            return Err("--key: Go modules are checked against the h1: hashes of a module cache (go.sum's) \
                 or the .mod files of a proxy, not a key"
                .into());
        }
        let mut modules = Vec::new();
        for (name, value) in args.only {
            match name.as_str() {
                "module" => {
                    packyard_codecs::go::check_module_path(&value)
                        .map_err(|e| format!("--only module={value}: {}", e.0))?;
                    modules.push(value);
                }
                _ => return Err(format!("--only {name}={value}: a Go import chooses module=PATH (may repeat)")),
            }
        }
        let source = match args.from {
            Location::Dir(dir) => {
                GoSource::Cache(if dir.join("cache/download").is_dir() { dir.join("cache/download") } else { dir })
            }
            Location::Url(url) if modules.is_empty() => {
                return Err(format!(
                    "--from {url}: a module proxy lists no modules: name those to copy with --only module=PATH \
                     (may repeat)"
                ))
            }
            proxy @ Location::Url(_) => GoSource::Proxy(proxy),
        };
        Ok(Self { source, modules })
    }

    /// A proxy's modules: every version each `@v/list` names.
    async fn proxy_plan(&self, fetcher: &Fetcher, proxy: &Location) -> Result<Vec<Item<GoItem>>, ImportError> {
        let mut items = Vec::new();
        for module in &self.modules {
            let at = |file: &str| proxy.join(&format!("{}/@v/{file}", escape(module)));
            let list = at("list")?;
            let Some(text) = fetcher.read(&list).await? else {
                return Err(ImportError::source(format!("{list}: the proxy has no module {module}")));
            };
            let text =
                std::str::from_utf8(&text).map_err(|_| ImportError::source(format!("{list}: not UTF-8 text")))?;
            for version in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                packyard_codecs::go::check_module_version(module, version)
                    .map_err(|e| ImportError::source(format!("{list}: {version}: {}", e.0)))?;
                let file = escape(version);
                items.push(Item {
                    key: format!("{module}@{version}"),
                    location: at(&format!("{file}.zip"))?,
                    sha256: None,
                    size: None,
                    target: GoItem {
                        module: module.clone(),
                        version: version.to_string(),
                        expect: Expect::GoMod(at(&format!("{file}.mod"))?),
                    },
                });
            }
        }
        if items.is_empty() {
            return Err(ImportError::source(format!("{proxy}: no version of {} is listed", self.modules.join(", "))));
        }
        Ok(items)
    }

    /// A module cache's zips that have their `.ziphash`.
    fn cache_plan(&self, download: &std::path::Path) -> Result<Vec<Item<GoItem>>, ImportError> {
        let mut dirs = Vec::new();
        version_dirs(download, "", &mut dirs).map_err(|e| {
            ImportError::source(format!("{}: {e} (a module cache has cache/download/<module>/@v/)", download.display()))
        })?;
        let mut items = Vec::new();
        for (escaped, at) in dirs {
            let module = unescape(&escaped).map_err(|e| ImportError::source(format!("{}: {}", at.display(), e.0)))?;
            if !self.modules.is_empty() && !self.modules.contains(&module) {
                continue;
            }
            let mut zips: Vec<_> = std::fs::read_dir(&at)
                .map_err(|e| ImportError::source(format!("{}: {e}", at.display())))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "zip"))
                .collect();
            zips.sort();
            for zip in zips {
                let stem = zip.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
                let version =
                    unescape(&stem).map_err(|e| ImportError::source(format!("{}: {}", zip.display(), e.0)))?;
                let hash = zip.with_extension("ziphash");
                // A zip without its hash is a download the go command did not finish.
                let Ok(h1) = std::fs::read_to_string(&hash) else { continue };
                let size = std::fs::metadata(&zip).map(|m| m.len()).ok();
                items.push(Item {
                    key: format!("{module}@{version}"),
                    location: Location::Dir(zip.clone()),
                    sha256: None,
                    size,
                    target: GoItem { module: module.clone(), version, expect: Expect::H1(h1.trim().to_string()) },
                });
            }
        }
        if items.is_empty() {
            return Err(ImportError::source(format!("{}: no module zip with its .ziphash", download.display())));
        }
        Ok(items)
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

    async fn plan(&self, fetcher: &Fetcher, _repo: &Repository) -> Result<Vec<Item<GoItem>>, ImportError> {
        match &self.source {
            GoSource::Cache(download) => self.cache_plan(download),
            GoSource::Proxy(proxy) => self.proxy_plan(fetcher, proxy).await,
        }
    }

    async fn store(&self, cx: &StoreCx<'_>, item: &Item<GoItem>, stored: StoredBlob) -> Result<Stored, UploadError> {
        let (services, t) = (cx.services, &item.target);
        let checked = check(services, &stored, Some((&t.module, &t.version)), &limits(services)).await;
        let refusal = match checked {
            Ok((_, _, verified)) => disagrees(cx.fetcher, t, verified).await,
            Err(e) => Some(e),
        };
        if let Some(e) = refusal {
            hosted::discard(services, &stored.sha256, stored.created).await;
            return Err(e);
        }
        let target = Target::Coordinate { module: t.module.clone(), version: t.version.clone() };
        Ok(Stored::alone(hosted::upload_stored(&GoHosted, services, cx.repo, target, stored, cx.actor).await?.created))
    }
}

/// Why a checked zip is not the one its source vouches for, if it is not.
async fn disagrees(fetcher: &Fetcher, t: &GoItem, verified: packyard_codecs::go::zip::Verified) -> Option<UploadError> {
    let at = format!("{}@{}", t.module, t.version);
    match &t.expect {
        Expect::H1(h1) if verified.h1 == *h1 => None,
        Expect::H1(h1) => Some(UploadError::Invalid(format!(
            "{at}: the zip's hash is {}, the module cache recorded {h1}: not copied",
            verified.h1
        ))),
        Expect::GoMod(mod_at) => {
            let served = match fetcher.read(mod_at).await {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return Some(UploadError::Invalid(format!("{at}: the proxy has no {mod_at}: not copied"))),
                Err(e) => return Some(UploadError::Invalid(format!("{at}: {e}"))),
            };
            // A zip without a go.mod has the one the go command synthesizes.
            let zipped = verified.go_mod.unwrap_or_else(|| format!("module {}\n", t.module).into_bytes());
            (served != zipped).then(|| {
                let h1 = packyard_codecs::go::sumdb::h1_go_mod;
                UploadError::Invalid(format!(
                    "{at}: the zip's go.mod ({}) is not the .mod the proxy serves ({}): not copied",
                    h1(&zipped),
                    h1(&served)
                ))
            })
        }
    }
}
