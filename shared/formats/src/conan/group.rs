//! Conan groups, merged at publication time. Per reference (published on its first request when
//! a member has it; rebuilt after a member publishes it, and when a proxy member's upstream
//! `latest` moved on after its metadata TTL) the first member in order that has the reference
//! wins: a hosted or nested group member's projection is listed again file by file (the same
//! blobs, nothing copied), so the group's reads are its own snapshot's; a proxy member is named
//! in a hidden `.member` file and the group's reads of the reference go to it. The group's search
//! index merges its members' references (a proxy member's from its upstream's `search?q=*`).

use std::collections::BTreeSet;

use super::publish::{KIND, SEARCH_FILE, SEARCH_KIND, SEARCH_UNIT};
use super::proxy_request;
use packyard_codecs::conan::Reference;
use packyard_core::groups::{self, members_of, published_entry, Sources, UpstreamSources};
use packyard_core::proxy::{Outcome, Proxy};
use packyard_core::publication::{BuildContext, BuildError};
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::blobs::{BlobStore, Sha256Hex};
use packyard_store::db::Db;

/// The hidden snapshot file naming the proxy member a group's reads of a reference go to.
pub const MEMBER_FILE: &str = ".member";
/// The hidden snapshot file recording each proxy member's upstream metadata merged.
pub const SOURCES_FILE: &str = ".sources";

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

fn other(e: impl std::fmt::Display) -> BuildError {
    BuildError::Other(e.to_string())
}

/// Where a group's build reads members from.
pub struct Upstream<'a> {
    pub proxy: Option<&'a Proxy>,
    pub blobs: &'a dyn BlobStore,
}

impl Upstream<'_> {
    /// A proxy member's answer for `path` (metadata) through the proxy cache: its SHA-256, or
    /// `None` for an upstream 404.
    async fn fetch(&self, member: &Repository, path: &str) -> Result<Option<String>, BuildError> {
        let proxy = self.proxy.ok_or_else(|| other("no proxy client in this worker"))?;
        let req = proxy_request(member, path, false).map_err(other)?;
        match proxy.fetch(req).await.map_err(|e| other(format!("member {}: {e}", member.name)))? {
            Outcome::Found(entry, _) => Ok(entry.sha256),
            Outcome::Missing(..) => Ok(None),
        }
    }

    /// A proxy member's upstream `latest` of `reference`, by hash.
    async fn upstream_latest(&self, member: &Repository, reference: &str) -> Result<Option<String>, BuildError> {
        let r = Reference::parse(reference).map_err(other)?;
        self.fetch(member, &format!("v2/conans/{}/latest", r.url_path())).await
    }
}

/// Builds group `repo`'s snapshot of `reference`.
pub async fn merge_reference(
    ctx: &mut BuildContext<'_>,
    up: &Upstream<'_>,
    repo: &Repository,
    reference: &str,
) -> Result<(), BuildError> {
    let db = ctx.db;
    for m in members_of(db, repo).await? {
        match m.repo_type {
            RepoType::Proxy => {
                if let Some(sha) = up.upstream_latest(&m, reference).await? {
                    let mut sources = Sources::new();
                    sources.insert(m.name.to_string(), sha);
                    ctx.put(MEMBER_FILE, TEXT, m.name.as_str().as_bytes()).await?;
                    ctx.put(SOURCES_FILE, TEXT, groups::render_sources(&sources).as_bytes()).await?;
                    return Ok(());
                }
            }
            RepoType::Hosted | RepoType::Group => {
                let Some(unit) = db.unit_by_key(m.id, KIND, reference).await? else { continue };
                let Some(snapshot) = unit.current_snapshot_id else { continue };
                let files = db.snapshot_files(snapshot).await?;
                if !files.iter().any(|f| f.path == "latest" || f.path == MEMBER_FILE) {
                    continue;
                }
                // A nested group's own upstream record stays its own (its refresh covers it).
                for f in files.iter().filter(|f| f.path != SOURCES_FILE) {
                    ctx.reference(&f.path, &f.sha256, f.size, &f.content_type);
                }
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Builds group `repo`'s search index: every member's references.
pub async fn merge_search(ctx: &mut BuildContext<'_>, up: &Upstream<'_>, repo: &Repository) -> Result<(), BuildError> {
    let db = ctx.db;
    let mut all = BTreeSet::new();
    let mut sources = Sources::new();
    for m in members_of(db, repo).await? {
        let sha = match m.repo_type {
            RepoType::Proxy => {
                let sha = up.fetch(&m, "v2/conans/search?q=*").await?;
                if let Some(s) = &sha {
                    sources.insert(m.name.to_string(), s.clone());
                }
                sha
            }
            RepoType::Hosted | RepoType::Group => {
                published_entry(db, &m, SEARCH_KIND, SEARCH_UNIT, SEARCH_FILE).await?.map(|f| f.sha256)
            }
        };
        let Some(sha) = sha else { continue };
        let v: serde_json::Value = serde_json::from_slice(&up.blobs.read_all(&Sha256Hex::parse(&sha)?).await?).unwrap_or_default();
        all.extend(v["results"].as_array().into_iter().flatten().filter_map(|x| x.as_str().map(str::to_string)));
    }
    ctx.put(SEARCH_FILE, JSON, serde_json::json!({ "results": all }).to_string().as_bytes()).await?;
    ctx.put(SOURCES_FILE, TEXT, groups::render_sources(&sources).as_bytes()).await
}

/// Whether a member of group `repo` has `reference`: a hosted member published it, a proxy
/// member's upstream has a `latest` of it, a nested group's member has it.
pub async fn any_member_has(db: &Db, proxy: &Proxy, repo: &Repository, reference: &str, depth: usize) -> Result<bool, BuildError> {
    groups::check_depth(repo, depth).map_err(other)?;
    let r = Reference::parse(reference).map_err(other)?;
    for member in members_of(db, repo).await? {
        let found = match member.repo_type {
            RepoType::Hosted => db.unit_by_key(member.id, KIND, reference).await?.is_some(),
            RepoType::Proxy => {
                let req = proxy_request(&member, &format!("v2/conans/{}/latest", r.url_path()), false).map_err(other)?;
                matches!(proxy.fetch(req).await.map_err(|e| other(format!("member {}: {e}", member.name)))?, Outcome::Found(..))
            }
            RepoType::Group => Box::pin(any_member_has(db, proxy, &member, reference, depth + 1)).await?,
        };
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Proxy members' upstream `latest` of a reference, for the refresh of reference units.
pub struct References<'a>(pub Upstream<'a>);

#[async_trait::async_trait]
impl UpstreamSources for References<'_> {
    fn format(&self) -> Format {
        Format::Conan
    }

    fn kind(&self) -> &'static str {
        KIND
    }

    fn sources_path(&self, _reference: &str) -> String {
        SOURCES_FILE.to_string()
    }

    async fn source(&self, member: &Repository, reference: &str) -> Result<Option<String>, BuildError> {
        self.0.upstream_latest(member, reference).await
    }
}

/// Proxy members' upstream search (`q=*`), for the refresh of a group's search index.
pub struct Searches<'a>(pub Upstream<'a>);

#[async_trait::async_trait]
impl UpstreamSources for Searches<'_> {
    fn format(&self) -> Format {
        Format::Conan
    }

    fn kind(&self) -> &'static str {
        SEARCH_KIND
    }

    fn sources_path(&self, _unit: &str) -> String {
        SOURCES_FILE.to_string()
    }

    async fn source(&self, member: &Repository, _unit: &str) -> Result<Option<String>, BuildError> {
        self.0.fetch(member, "v2/conans/search?q=*").await
    }
}
