//! Conan groups, merged at publication time. Per reference (published on its first request when
//! a member has it; rebuilt after a member publishes it, and when a proxy member's upstream
//! `latest` moved on after its metadata TTL) the first member in order that has the reference
//! wins: a hosted or nested group member's projection is listed again file by file (the same
//! blobs, nothing copied), so the group's reads are its own snapshot's, and named in a hidden
//! `.from` file (a member with a policy answers the group's reads itself); a proxy member is
//! named in a hidden `.member` file and the group's reads of the reference go to it. The group's search
//! index merges its members' references (a proxy member's from its upstream's `search?q=*`).

use std::collections::BTreeSet;

use super::proxy_request;
use super::{KIND, SEARCH_FILE, SEARCH_KIND, SEARCH_UNIT};
use packyard_codecs::conan::Reference;
use packyard_core::groups::{self, members_of, Reader, Sources};
use packyard_core::publication::{BuildContext, BuildError};
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::Db;

/// The hidden snapshot file naming the proxy member a group's reads of a reference go to.
pub const MEMBER_FILE: &str = ".member";
/// The hidden snapshot file naming the hosted or group member whose files a group's snapshot
/// of a reference lists (so that the member's policy can hold for what the group serves).
pub const FROM_FILE: &str = ".from";
pub use packyard_core::groups::SOURCES_FILE;

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// The upstream search a proxy member's references come from.
const UPSTREAM_SEARCH: &str = "v2/conans/search?q=*";

/// A proxy member's upstream search, by hash.
pub(super) async fn upstream_search(reader: &Reader, member: &Repository) -> Result<Option<String>, BuildError> {
    Ok(reader.fetch(member, proxy_request(member, UPSTREAM_SEARCH, false)).await?.map(|(sha, _)| sha))
}

/// A proxy member's upstream `latest` of `reference`, by hash.
pub(super) async fn upstream_latest(
    reader: &Reader,
    member: &Repository,
    reference: &str,
) -> Result<Option<String>, BuildError> {
    let r = Reference::parse(reference).map_err(BuildError::other)?;
    let path = format!("v2/conans/{}/latest", r.url_path());
    Ok(reader.fetch(member, proxy_request(member, &path, false)).await?.map(|(sha, _)| sha))
}

/// Builds group `repo`'s snapshot of `reference`.
pub async fn merge_reference(
    ctx: &mut BuildContext<'_>,
    reader: &Reader,
    repo: &Repository,
    reference: &str,
) -> Result<(), BuildError> {
    let db = ctx.db;
    for m in members_of(db, repo).await? {
        match m.repo_type {
            RepoType::Proxy => {
                if let Some(sha) = upstream_latest(reader, &m, reference).await? {
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
                for f in files.iter().filter(|f| f.path != SOURCES_FILE && f.path != FROM_FILE) {
                    ctx.reference(&f.path, &f.sha256, f.size, &f.content_type);
                }
                ctx.put(FROM_FILE, TEXT, m.name.as_str().as_bytes()).await?;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Builds group `repo`'s search index: every member's references.
pub async fn merge_search(ctx: &mut BuildContext<'_>, reader: &Reader, repo: &Repository) -> Result<(), BuildError> {
    let db = ctx.db;
    let mut all = BTreeSet::new();
    let mut sources = Sources::new();
    for m in members_of(db, repo).await? {
        let found = reader
            .file(db, &m, (SEARCH_KIND, SEARCH_UNIT, SEARCH_FILE), || proxy_request(&m, UPSTREAM_SEARCH, false))
            .await?;
        let Some((sha, _)) = found else { continue };
        if m.repo_type == RepoType::Proxy {
            sources.insert(m.name.to_string(), sha.clone());
        }
        let v: serde_json::Value = serde_json::from_slice(&reader.bytes(&sha).await?).unwrap_or_default();
        for found in v["results"].as_array().into_iter().flatten().filter_map(|x| x.as_str()) {
            // A result the client cannot read as a reference would fail the whole search.
            match packyard_codecs::conan::Reference::parse(found) {
                Ok(_) => {
                    all.insert(found.to_string());
                }
                Err(why) => ctx.skip(m.name.as_str(), || format!("search result {found:?}: {why}")),
            }
        }
    }
    ctx.put(SEARCH_FILE, JSON, serde_json::json!({ "results": all }).to_string().as_bytes()).await?;
    ctx.put(SOURCES_FILE, TEXT, groups::render_sources(&sources).as_bytes()).await
}

/// Whether a member of group `repo` has `reference`: a hosted member published it, a proxy
/// member's upstream has a `latest` of it.
pub async fn any_member_has(db: &Db, reader: &Reader, repo: &Repository, reference: &str) -> Result<bool, BuildError> {
    groups::any_member_has(db, repo, KIND, reference, |m| async move {
        Ok(upstream_latest(reader, &m, reference).await?.is_some())
    })
    .await
}
