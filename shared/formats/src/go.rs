//! Go modules over the engine: hosted uploads and deletes, and the per-module projection
//! (`@v/list`, `@latest`, `@v/<version>.info`) published as a snapshot.

pub mod catalogue;
pub mod group;
pub mod hosted;
pub mod import;
pub mod publish;
pub mod rows;
pub mod settings;
pub mod spec;
pub mod sumdb;
pub mod ui;
pub mod vulndb;

use packyard_codecs::go::{escape, unescape, Version};
use packyard_core::proxy::{FetchRequest, Freshness, ProxyError};
use packyard_model::repos::Repository;

/// The unit kind of Go projections (one unit per module of a repository).
pub const KIND: &str = "go";

/// The `.info` of a version: its version and time, as the go command reads them.
pub fn info_json(version: &str, time_ms: i64) -> String {
    serde_json::json!({"Version": version, "Time": packyard_model::time::rfc3339_ms(time_ms).replace(".000Z", "Z")})
        .to_string()
}

/// A read of the GOPROXY protocol: `<module>/@v/list`, `<module>/@latest`,
/// `<module>/@v/<version>.info|.mod|.zip` (module and version case-decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    List(String),
    Latest(String),
    File { module: String, version: String, ext: &'static str },
}

impl Request {
    /// From a path below the repository (already percent-decoded, still case-encoded).
    pub fn parse(path: &str) -> Result<Self, String> {
        if let Some(module) = path.strip_suffix("/@latest") {
            return Ok(Self::Latest(unescape(module).map_err(|e| e.0)?));
        }
        let (module, file) = path.split_once("/@v/").ok_or_else(|| format!("{path:?} is not a GOPROXY path"))?;
        let module = unescape(module).map_err(|e| e.0)?;
        if file == "list" {
            return Ok(Self::List(module));
        }
        for ext in ["info", "mod", "zip"] {
            if let Some(v) = file.strip_suffix(&format!(".{ext}")) {
                let version = unescape(v).map_err(|e| e.0)?;
                return Ok(Self::File { module, version, ext });
            }
        }
        Err(format!("{file:?} is not list, <version>.info, .mod or .zip"))
    }

    pub fn module(&self) -> &str {
        match self {
            Self::List(m) | Self::Latest(m) => m,
            Self::File { module, .. } => module,
        }
    }

    /// The request's path as the protocol writes it (case-encoded).
    pub fn path(&self) -> String {
        match self {
            Self::List(m) => format!("{}/@v/list", escape(m)),
            Self::Latest(m) => format!("{}/@latest", escape(m)),
            Self::File { module, version, ext } => format!("{}/@v/{}.{ext}", escape(module), escape(version)),
        }
    }

    pub fn content_type(&self) -> &'static str {
        match self {
            Self::List(_) | Self::File { ext: "mod", .. } => "text/plain; charset=utf-8",
            Self::Latest(_) | Self::File { ext: "info", .. } => "application/json",
            Self::File { .. } => "application/zip",
        }
    }
}

/// How a proxy fetches a Go path: a canonical version's files never change upstream (fetched
/// once); `list`, `@latest` and files of a branch or partial version (`@v/main.info`) are
/// metadata; 404 and 410 mean "not there".
pub fn proxy_request(repo: &Repository, request: &Request) -> Result<FetchRequest, ProxyError> {
    let freshness = match request {
        Request::File { version, .. } if Version::parse(version).is_ok_and(|v| v.canonical() == *version) => {
            Freshness::Immutable
        }
        _ => Freshness::Metadata,
    };
    let mut fetch = FetchRequest::new(repo, &request.path(), freshness)?;
    fetch.negative_statuses = &[404, 410];
    if let (Request::File { module, version, .. }, Freshness::Immutable) = (request, freshness) {
        fetch.catalogue = Some(catalogue::component(module, version));
    }
    Ok(fetch)
}
