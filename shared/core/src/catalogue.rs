//! The catalogue's part of the engine: what a format says of its artifacts ([`Catalogue`]), and
//! the one-time backfill that catalogues what was stored before the catalogue existed — hosted
//! repositories from their rows, proxies from the files they cached — with the same functions
//! the uploads and the proxy use.

use async_trait::async_trait;

use crate::hosted::{check_writable, from_db, Actor, UploadError};
use crate::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::catalogue::{AssetRow, Component, ComponentRow, Entry, NewAsset};
use packyard_store::db::{Db, DbResult};

/// An entry as stored: with who stored it and when (ms).
pub struct Stamped {
    pub entry: Entry,
    pub uploaded_by: String,
    pub created_at: i64,
}

/// What a format tells the catalogue.
#[async_trait]
pub trait Catalogue: Send + Sync {
    /// The entries of a hosted repository's rows after row id `after`, at most `limit`, with
    /// the id of the row each comes from (the keyset of the next page).
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>>;
    /// The component a proxy's file at `path` is an asset of; `None` for metadata.
    fn cached(&self, path: &str) -> Option<Component>;
    /// The package a component is a version of (cleanup keeps the newest N versions of each);
    /// components of one package share their name.
    fn package(&self, c: &ComponentRow) -> String {
        format!("{}\0{}", c.namespace, c.name)
    }
    /// The format's order of versions.
    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        a.cmp(b)
    }
    /// A pre-release version (Go: pre-release and pseudo-versions).
    fn prerelease(&self, _version: &str) -> bool {
        false
    }
    /// A version has revisions, each its own component (Conan): its pre-releases are the
    /// revisions that are not the latest.
    fn revisions(&self) -> bool {
        false
    }
    /// What cleanup's format-specific criteria select in the format, for people (a criterion
    /// with nothing to say does not apply to it).
    fn selectable(&self) -> packyard_model::cleanup::Selectable {
        packyard_model::cleanup::Selectable::default()
    }
    /// What a component's metadata says, for people to read: what it depends on (APT
    /// `Depends`, APK `D:`, Go `require`, Conan `requires`) and facts such as a Conan package's
    /// settings. Read from the format's rows or files; what cannot be read is left out.
    async fn details(
        &self,
        _services: &Services,
        _repo: &Repository,
        _c: &ComponentRow,
        _assets: &[AssetRow],
    ) -> Details {
        Details::default()
    }
    /// What a policy's rules read of a component besides its name and version (the preview of
    /// a policy: `admin::policy::preview`): its licenses, and the architecture of each artifact
    /// judged on its own. By default from [`Catalogue::details`]' `license` (an SPDX expression)
    /// and `arch` facts.
    async fn policy_facts(
        &self,
        services: &Services,
        repo: &Repository,
        c: &ComponentRow,
        assets: &[AssetRow],
    ) -> PolicyFacts {
        let details = self.details(services, repo, c, assets).await;
        let fact = |label: &str| details.facts.iter().find(|(k, _)| k == label).map(|(_, v)| v.clone());
        PolicyFacts {
            licenses: fact("license").map(|l| packyard_model::policy::license_names(&l)).unwrap_or_default(),
            artifacts: vec![(String::new(), fact("arch"))],
        }
    }
}

/// What [`Catalogue::policy_facts`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFacts {
    pub licenses: Vec<String>,
    /// Each artifact judged on its own — a label (empty: the component itself; `package <id>`
    /// for a Conan binary) and its architecture —; a component whose artifacts have none
    /// lists itself with `None`.
    pub artifacts: Vec<(String, Option<String>)>,
}

/// What [`Catalogue::details`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    pub dependencies: Vec<String>,
    pub facts: Vec<(String, String)>,
}

/// The largest file [`Catalogue::details`] reads (a larger one is left out).
pub const DETAILS_MAX_FILE: u64 = 1 << 20;

/// The bytes of an asset's blob for [`Catalogue::details`]: `None` when it is larger than
/// [`DETAILS_MAX_FILE`] (as recorded or as stored), gone or unreadable.
pub async fn small_asset(services: &Services, asset: &AssetRow) -> Option<bytes::Bytes> {
    if !u64::try_from(asset.size).is_ok_and(|size| size <= DETAILS_MAX_FILE) {
        return None;
    }
    let digest = packyard_store::blobs::Sha256Hex::parse(asset.sha256.trim()).ok()?;
    let size = services.blobs.stat(&digest).await.ok()??;
    if size > DETAILS_MAX_FILE {
        return None;
    }
    let bytes = services.blobs.read_all(&digest).await.ok()?;
    (u64::try_from(bytes.len()).ok()? <= DETAILS_MAX_FILE).then_some(bytes)
}

/// A hosted page as [`Catalogue::hosted_page`] answers it, from rows read with who stored each
/// and when: `(row, uploaded_by, created_at)`.
pub fn stamped<R>(rows: Vec<(R, String, i64)>, id: fn(&R) -> i64, entry: fn(&R) -> Entry) -> Vec<(i64, Stamped)> {
    rows.into_iter()
        .map(|(row, uploaded_by, created_at)| (id(&row), Stamped { entry: entry(&row), uploaded_by, created_at }))
        .collect()
}

const BACKFILL: &str = "catalogue.backfill";
const PAGE: i64 = 500;

/// Catalogues every repository's existing artifacts, once (later runs return at once): the
/// first process to start after the migration does it. Returns how many entries it wrote.
pub async fn backfill(db: &Db, of: impl Fn(Format) -> &'static dyn Catalogue) -> DbResult<u64> {
    if db.maintenance_done(BACKFILL).await? {
        return Ok(0);
    }
    let mut written = 0;
    for repo in db.list_repositories().await? {
        let format = of(repo.format);
        match repo.repo_type {
            RepoType::Hosted => {
                let mut after = 0;
                loop {
                    let page = format.hosted_page(db, &repo, after, PAGE).await?;
                    let Some((last, _)) = page.last() else { break };
                    after = *last;
                    let mut tx = db.begin().await?;
                    for (_, s) in &page {
                        let stamp = (s.uploaded_by.as_str(), s.created_at);
                        db.catalogue_put(&mut tx, repo.id, repo.format.as_str(), &s.entry, stamp).await?;
                        written += 1;
                    }
                    tx.commit().await?;
                }
            }
            RepoType::Proxy => {
                let mut after = String::new();
                loop {
                    let page = db.cached_files_page(repo.id, &after, PAGE).await?;
                    let Some(last) = page.last() else { break };
                    after = last.path.clone();
                    let mut tx = db.begin().await?;
                    for e in &page {
                        let (Some(component), Some(sha256)) = (format.cached(&e.path), &e.sha256) else { continue };
                        let asset = NewAsset {
                            path: e.path.clone(),
                            sha256: sha256.clone(),
                            sha1: None,
                            md5: None,
                            size: e.size,
                            content_type: e.content_type.clone(),
                        };
                        let entry = Entry { component, assets: vec![asset] };
                        db.catalogue_put(&mut tx, repo.id, repo.format.as_str(), &entry, ("", e.fetched_at)).await?;
                        written += 1;
                    }
                    tx.commit().await?;
                }
            }
            RepoType::Group => {}
        }
    }
    db.mark_maintenance_done(BACKFILL).await?;
    if written > 0 {
        tracing::info!(entries = written, "catalogued the artifacts stored before the catalogue");
    }
    Ok(written)
}

/// Deletes a proxy's cached component (its files are fetched again when asked for), with its
/// audit entry (`<format>.delete`). False when it was gone already.
pub async fn delete_cached(
    services: &Services,
    repo: &Repository,
    component: &ComponentRow,
    actor: Actor<'_>,
) -> Result<bool, UploadError> {
    check_writable(repo)?;
    let db = &services.db;
    packyard_store::db::retry_conflicts(|| async {
        let mut tx = db.begin().await?;
        if !db.catalogue_forget_cached(&mut tx, repo.id, component.id).await? {
            return Ok(false);
        }
        let action = format!("{}.delete", repo.format.as_str());
        let detail = serde_json::json!({"cached": true});
        crate::hosted::audit_in(&mut tx, db, actor, &action, repo, &component.component_key, &detail).await?;
        tx.commit().await?;
        Ok(true)
    })
    .await
    .map_err(from_db)
}

/// Counts what every repository holds and shows it as `packyard_repository_components`,
/// `packyard_repository_bytes` and `packyard_repository_index_bytes` (a repository deleted
/// since leaves the gauges), the blob store's size as `packyard_blob_store_bytes` and the quotas'
/// `packyard_quota_*` gauges. Returns how many repositories it counted.
pub async fn refresh_usage(services: &Services) -> DbResult<usize> {
    let db = &services.db;
    let usage = db.refresh_usage().await?;
    let repos = db.list_repositories().await?;
    let by_id: std::collections::HashMap<i64, &packyard_model::repos::Repository> =
        repos.iter().map(|r| (r.id, r)).collect();
    let m = &services.metrics;
    let store_bytes = db.blob_store_bytes().await?;
    m.blob_store_bytes.set(store_bytes);
    // The quota gauges: of what has a quota now (one removed since leaves them).
    m.quota_used_bytes.reset();
    m.quota_limit_bytes.reset();
    m.quota_standing.reset();
    let store_quota = services.config.blobs.quota;
    if store_quota.is_set() {
        let used = u64::try_from(store_bytes).unwrap_or(0);
        crate::quota::gauges(services, (crate::quota::Scope::BlobStore, crate::quota::BLOB_STORE), &store_quota, used);
    }
    m.repository_components.reset();
    m.repository_bytes.reset();
    m.repository_index_bytes.reset();
    for (repo, u) in &usage {
        let Some(r) = by_id.get(repo) else { continue };
        let name = r.name.as_str();
        m.repository_components.with_label_values(&[name]).set(u.components);
        m.repository_bytes.with_label_values(&[name]).set(u.bytes);
        m.repository_index_bytes.with_label_values(&[name]).set(u.index_bytes);
        if let Some(q) = r.quota() {
            let used = u64::try_from(u.bytes).unwrap_or(0);
            crate::quota::gauges(services, (crate::quota::Scope::Repository, name), q, used);
        }
    }
    Ok(usage.len())
}
