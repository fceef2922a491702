//! A repository's named snapshots (`/api/v1/repositories/{name}/snapshots`): a point-in-time
//! view served read-only under `/repository/<name>/-/snapshots/<snapshot>/` (and
//! `/repository/<name>/-/at/<RFC 3339 time>/`, the newest snapshot made then), so that a client
//! pointed at it installs exactly what was there.
//!
//! A snapshot is a file list (`packyard_store::db::snapshots`), made by copying rows, never
//! bytes: the index files of every publication unit's current snapshot (each where a client asks
//! for it, [`crate::formats::FormatSpec::snapshot_path`]; what no client asks for — a group's
//! hidden files, a composite file's parts — under a hidden name, so that its blob stays
//! referenced), then every file the catalogue holds for the repository: a hosted repository's
//! artifacts, a proxy's cached packages, a group's members' (first member first, as the group
//! serves them); a proxy that publishes no index of its own (one without a policy) adds every
//! file it cached, the upstream's indexes as it last fetched them among them. A proxy's
//! snapshot thus holds what the proxy had fetched when it was made, pinned there; a package its
//! indexes list that no client had asked for is fetched on its first request through the
//! snapshot and added to it then (the API's `snapshot::fill`). Creation first waits for the
//! repository's pending publications, so the indexes
//! it copies list what the repository holds. Blobs a snapshot lists are kept by the collector
//! until the snapshot is deleted (its table is one of the store's blob references).

use std::collections::{BTreeMap, BTreeSet};

use packyard_model::repos::{RepoType, Repository};
use packyard_model::time::{parse_point_in_time, rfc3339_ms};
use packyard_store::db::now_ms;
use packyard_store::db::publication::SnapshotFile;
use packyard_store::db::snapshots::{name_taken, RepositorySnapshot, UnitFile};
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::formats::Registry;
use crate::hosted::Actor;
use crate::repositories::RepositoryService;
use crate::services::Services;

/// The request body of a creation; every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSnapshot {
    /// Letters, digits, `.`, `_`, `-` (1 to 100, not beginning with `.`); by default the time of
    /// creation, `20261206T093012Z`.
    #[serde(default)]
    pub name: Option<String>,
}

/// A snapshot as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotView {
    pub name: String,
    pub repository: String,
    pub created_at: String,
    pub created_by: Option<String>,
    pub files: i64,
    /// The bytes of the files it lists (none of them copied).
    pub bytes: i64,
    /// Where clients point at it (relative to the public URL's root).
    pub path: String,
}

impl SnapshotView {
    fn of(repo: &Repository, s: RepositorySnapshot) -> Self {
        Self {
            path: format!("/repository/{}/-/snapshots/{}/", repo.name, s.name),
            name: s.name,
            repository: repo.name.to_string(),
            created_at: rfc3339_ms(s.created_at),
            created_by: s.created_by,
            files: s.files,
            bytes: s.bytes,
        }
    }
}

/// The difference between two snapshots, by component (`name version`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SnapshotDiff {
    pub from: String,
    pub to: String,
    pub added: Vec<ComponentRef>,
    pub removed: Vec<ComponentRef>,
    /// In both, with files of other content or other files.
    pub changed: Vec<ComponentRef>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct ComponentRef {
    /// The component's group, as Nexus's API names it (a Go module's path but its last
    /// element, an APK unit, …); absent when it has none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub name: String,
    pub version: String,
}

/// The events a snapshot's creation and deletion announce.
pub const CREATED: &str = "snapshot.created";
pub const DELETED: &str = "snapshot.deleted";

const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Checks a snapshot's name: it is a path segment of the URL clients use.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "snapshot name {name:?} is not 1 to 100 letters, digits, '.', '_' or '-' (not beginning with '.'): it is a segment of the snapshot's URL"
        ))
    }
}

/// The name a snapshot made at `ms` gets when none is asked for: `20261206T093012Z`.
pub fn time_name(ms: i64) -> String {
    let t = rfc3339_ms(ms);
    // `2026-12-06T09:30:12.000Z` → `20261206T093012Z`.
    let (date, time) = t.split_once('T').unwrap_or((t.as_str(), ""));
    let time = time.split('.').next().unwrap_or_default().trim_end_matches('Z');
    format!("{}T{}Z", date.replace('-', ""), time.replace(':', ""))
}

pub async fn list(services: &Services, formats: &Registry, repository: &str) -> AdminResult<Vec<SnapshotView>> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let all = services.db.repository_snapshots(repo.id).await?;
    Ok(all.into_iter().map(|s| SnapshotView::of(&repo, s)).collect())
}

pub async fn get(services: &Services, formats: &Registry, repository: &str, name: &str) -> AdminResult<SnapshotView> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let s = find(services, &repo, name).await?;
    Ok(SnapshotView::of(&repo, s))
}

/// The snapshot that was the newest at `at` (RFC 3339).
pub async fn at(services: &Services, formats: &Registry, repository: &str, at: &str) -> AdminResult<SnapshotView> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let ms = parse_point_in_time(at).ok_or_else(|| {
        AdminError::Invalid(format!("{at:?} is not an RFC 3339 time (2026-12-01T12:00Z or 2026-12-01T12:00:00Z)"))
    })?;
    let s = services.db.repository_snapshot_at(repo.id, ms).await?.ok_or_else(|| {
        AdminError::NotFound(format!("repository {} has no snapshot made at or before {at}", repo.name))
    })?;
    Ok(SnapshotView::of(&repo, s))
}

async fn find(services: &Services, repo: &Repository, name: &str) -> AdminResult<RepositorySnapshot> {
    services
        .db
        .repository_snapshot(repo.id, name)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("repository {} has no snapshot {name:?}", repo.name)))
}

/// Makes a snapshot of the repository as it is once its pending publications are out.
pub async fn create(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    repository: &str,
    new: NewSnapshot,
) -> AdminResult<SnapshotView> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let spec = formats.get(repo.format);
    if let Some(name) = &new.name {
        check_name(name).map_err(AdminError::Invalid)?;
    }
    let sources = asset_sources(services, &repo).await?;
    if let Some(gated) = sources.gated.first() {
        return Err(AdminError::Invalid(format!(
            "repository {} serves through a policy (repository {gated}): a snapshot lists files as they are stored, and would hand out what the policy holds back; snapshot the repositories below it instead",
            repo.name
        )));
    }
    let now = now_ms();
    let mut round = 0;
    let snapshot = loop {
        round += 1;
        // The members first: a group's rebuild is asked for when a member publishes.
        for id in sources.all.iter().chain([&repo.id]) {
            settle(services, *id).await?;
        }
        let before = published_state(services, &sources.all, repo.id).await?;
        // Settled: every change published. A change between the reading of the indexes and
        // the copy of the files would leave the indexes listing what the copy lacks (or the
        // other way round): then it is made again from the new state.
        let settled = before.iter().all(|(_, desired, published, _)| desired <= published);
        if settled {
            let files = index_files(services, spec, &repo).await?;
            let made = make(services, &repo, (&new, actor.username, now), &files, &sources).await?;
            if published_state(services, &sources.all, repo.id).await? == before {
                break made;
            }
            services.db.delete_repository_snapshot(made.id).await?;
        }
        if round >= 5 {
            return Err(AdminError::Conflict(format!(
                "repository {} kept publishing while its snapshot was made; try again",
                repo.name
            )));
        }
    };
    let view = SnapshotView::of(&repo, snapshot);
    let payload = serde_json::json!({"repository": repo.name, "snapshot": view.name, "files": view.files,
        "bytes": view.bytes, "by": actor.username});
    services.db.enqueue_webhook_event(CREATED, Some(repo.name.as_str()), &payload.to_string()).await?;
    services.security.audit(actor.username, actor.address, "snapshot.create", repo.name.as_str(), payload).await;
    Ok(view)
}

/// Deletes a snapshot; its URL answers 404 at once.
pub async fn delete(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    repository: &str,
    name: &str,
) -> AdminResult<()> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let s = find(services, &repo, name).await?;
    let pins = services.db.snapshot_pins(s.id).await?;
    if pins > 0 {
        return Err(AdminError::Conflict(format!(
            "snapshot {:?} of repository {} is served as the current index of {pins} of its units: point them back first (DELETE /api/v1/repositories/{}/pins)",
            s.name, repo.name, repo.name
        )));
    }
    if !services.db.delete_repository_snapshot(s.id).await? {
        return Err(AdminError::Conflict(format!(
            "snapshot {:?} of repository {} was pointed at or deleted meanwhile: list its pins and snapshots again",
            s.name, repo.name
        )));
    }
    let payload = serde_json::json!({"repository": repo.name, "snapshot": s.name, "by": actor.username});
    services.db.enqueue_webhook_event(DELETED, Some(repo.name.as_str()), &payload.to_string()).await?;
    services.security.audit(actor.username, actor.address, "snapshot.delete", repo.name.as_str(), payload).await;
    Ok(())
}

/// What changed from snapshot `from` to snapshot `to`, by component.
pub async fn diff(
    services: &Services,
    formats: &Registry,
    repository: &str,
    (from, to): (&str, &str),
) -> AdminResult<SnapshotDiff> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let (a, b) = (find(services, &repo, from).await?, find(services, &repo, to).await?);
    let by_component = |assets: Vec<packyard_store::db::snapshots::ListedAsset>| {
        let mut m: BTreeMap<ComponentRef, BTreeSet<(String, String)>> = BTreeMap::new();
        for x in assets {
            m.entry(ComponentRef { group: x.namespace, name: x.name, version: x.version })
                .or_default()
                .insert((x.path, x.sha256));
        }
        m
    };
    let before = by_component(services.db.repository_snapshot_assets(a.id).await?);
    let after = by_component(services.db.repository_snapshot_assets(b.id).await?);
    let mut d = SnapshotDiff { from: a.name, to: b.name, ..SnapshotDiff::default() };
    for (c, files) in &after {
        match before.get(c) {
            None => d.added.push(c.clone()),
            Some(old) if old != files => d.changed.push(c.clone()),
            Some(_) => {}
        }
    }
    d.removed = before.keys().filter(|c| !after.contains_key(*c)).cloned().collect();
    Ok(d)
}

/// The maker of scheduled snapshots: their `created_by`, and the actor of their audit entries.
pub const SCHEDULER: &str = "snapshot-schedule";

/// Makes every repository's scheduled snapshot that is due at `now` (ms) — one per period of
/// `snapshots.every_secs`, named by the period's start — and deletes the scheduled snapshots
/// beyond the newest `snapshots.keep`. Several workers may run it at once: a period's snapshot
/// has one name, so the second to make it finds it taken. Returns how many it made.
pub async fn run_schedules(services: &Services, formats: &Registry, now: i64) -> AdminResult<usize> {
    let actor = Actor::system(SCHEDULER);
    let mut made = 0;
    for repo in services.db.list_repositories().await? {
        let Some(schedule) = repo.settings.snapshots.clone() else { continue };
        let scheduled = |all: Vec<RepositorySnapshot>| -> Vec<RepositorySnapshot> {
            all.into_iter().filter(|s| s.created_by.as_deref() == Some(SCHEDULER)).collect()
        };
        if let Some(every) = schedule.every_secs {
            let period = i64::try_from(every).unwrap_or(i64::MAX / 2).saturating_mul(1000).max(1);
            let slot = now - now.rem_euclid(period);
            let made_then =
                scheduled(services.db.repository_snapshots(repo.id).await?).iter().any(|s| s.created_at >= slot);
            if !made_then {
                let new = NewSnapshot { name: Some(time_name(slot)) };
                match create(services, formats, actor, repo.name.as_str(), new).await {
                    Ok(_) => made += 1,
                    // Made by another worker already, or publications pending: the next round.
                    Err(AdminError::Conflict(why)) => {
                        tracing::debug!(repository = %repo.name, %why, "scheduled snapshot not made")
                    }
                    Err(e) => {
                        tracing::warn!(repository = %repo.name, error = %e, "cannot make the scheduled snapshot; trying again later")
                    }
                }
            }
        }
        if let Some(keep) = schedule.keep {
            let old = scheduled(services.db.repository_snapshots(repo.id).await?);
            for s in old.into_iter().skip(usize::try_from(keep).unwrap_or(usize::MAX)) {
                match delete(services, formats, actor, repo.name.as_str(), &s.name).await {
                    Ok(()) | Err(AdminError::NotFound(_)) => {}
                    // Served as a unit's current index (a rollback): kept while it is.
                    Err(AdminError::Conflict(why)) => {
                        tracing::debug!(repository = %repo.name, snapshot = %s.name, %why, "an old scheduled snapshot is kept")
                    }
                    Err(e) => {
                        tracing::warn!(repository = %repo.name, snapshot = %s.name, error = %e, "cannot delete an old scheduled snapshot")
                    }
                }
            }
        }
    }
    Ok(made)
}

/// The index files of the repository's units' current snapshots, at the paths clients ask
/// for them (hidden ones under `.units/<unit id>/`).
async fn index_files(
    services: &Services,
    spec: &dyn crate::formats::FormatSpec,
    repo: &Repository,
) -> AdminResult<Vec<UnitFile>> {
    let mut files = Vec::new();
    for unit in services.db.units_of(repo.id).await? {
        let Some(current) = unit.current_snapshot_id else { continue };
        for f in services.db.snapshot_files(current).await? {
            let path = match spec.snapshot_path(&unit.kind, &unit.unit_key, &f.path) {
                Some(p) => p,
                // Kept for its blob, under a name no request reaches (a segment begins with '.').
                None => format!(".units/{}/{}", unit.id, f.path),
            };
            if path.len() > 700 {
                return Err(AdminError::Invalid(format!(
                    "repository {}: the path {}… is longer than a snapshot keeps (700 bytes)",
                    repo.name,
                    &path[..path.floor_char_boundary(80)]
                )));
            }
            let unit_path = f.path.clone();
            files.push(UnitFile { file: SnapshotFile { path, ..f }, unit_id: unit.id, unit_path });
        }
    }
    // The first file a path names wins.
    let mut seen = BTreeSet::new();
    files.retain(|f| seen.insert(f.file.path.clone()));
    Ok(files)
}

/// Stores the snapshot: its name, or a name of its time (another when taken).
async fn make(
    services: &Services,
    repo: &Repository,
    (new, by, now): (&NewSnapshot, &str, i64),
    files: &[UnitFile],
    sources: &Sources,
) -> AdminResult<RepositorySnapshot> {
    let mut attempt = 0;
    loop {
        let name = match &new.name {
            Some(n) => n.clone(),
            None if attempt == 0 => time_name(now),
            None => format!("{}-{}", time_name(now), attempt + 1),
        };
        let made = services
            .db
            .create_repository_snapshot(
                repo.id,
                &name,
                Some(by),
                now,
                files,
                (&sources.assets, &sources.pinned),
                sources.cache,
            )
            .await;
        match made {
            Ok(s) => return Ok(s),
            Err(e) if name_taken(&e) && new.name.is_none() && attempt < 20 => attempt += 1,
            Err(e) if name_taken(&e) => {
                return Err(AdminError::Conflict(format!("repository {} has a snapshot {name:?} already", repo.name)))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Where the units of the repository and its sources are: `(unit, desired revision, published
/// revision, current snapshot)` of each.
async fn published_state(
    services: &Services,
    sources: &[i64],
    repo: i64,
) -> AdminResult<Vec<(i64, i64, i64, Option<i64>)>> {
    let mut out = Vec::new();
    for id in sources.iter().chain([&repo]) {
        for u in services.db.units_of(*id).await? {
            out.push((u.id, u.desired_revision, u.published_revision, u.current_snapshot_id));
        }
    }
    Ok(out)
}

/// Waits until every unit of the repository published what it was asked to; a unit whose
/// publication failed is a 409 at once, with its error.
async fn settle(services: &Services, repository_id: i64) -> AdminResult<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    for unit in services.db.units_of(repository_id).await? {
        if unit.desired_revision <= unit.published_revision {
            continue;
        }
        if let (Some(error), true) = (&unit.last_error, unit.attempts > 0) {
            return Err(AdminError::Conflict(format!(
                "the publication of {} {} is failing ({error}); a snapshot copies published indexes, so it waits for that",
                unit.kind, unit.unit_key
            )));
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let told = Some(services.published.publications());
        let done =
            crate::publication::wait_until_published(&services.db, told, unit.id, unit.desired_revision, left).await?;
        if !done {
            return Err(AdminError::Conflict(format!(
                "the publication of {} {} is still pending after {} s; a snapshot copies published indexes, try again",
                unit.kind,
                unit.unit_key,
                WAIT.as_secs()
            )));
        }
    }
    Ok(())
}

/// Where a snapshot's files come from besides the repository's own indexes.
struct Sources {
    /// The repositories whose catalogued files it lists, in the order a request would find
    /// them: the repository itself, or a group's members depth first (each once).
    assets: Vec<i64>,
    /// Every repository below it (nested groups too) and the repository itself.
    all: Vec<i64>,
    /// The proxy whose cached files it lists: the repository itself when it is a proxy that
    /// publishes nothing of its own.
    cache: Option<i64>,
    /// Repositories among them that serve through a policy.
    gated: Vec<String>,
    /// The snapshots the repository's units are pointed at (a rollback): their packages too.
    pinned: Vec<i64>,
}

async fn asset_sources(services: &Services, repo: &Repository) -> AdminResult<Sources> {
    let mut pinned: Vec<i64> = services.db.unit_pins(repo.id).await?.into_iter().map(|p| p.snapshot_id).collect();
    pinned.sort_unstable();
    pinned.dedup();
    let mut sources = Sources { assets: Vec::new(), all: Vec::new(), cache: None, gated: Vec::new(), pinned };
    let units = services.db.units_of(repo.id).await?;
    // A proxy that publishes nothing of its own (no policy) is what it cached: the upstream's
    // indexes and files as they were when it last fetched them.
    if repo.repo_type == RepoType::Proxy && units.iter().all(|u| u.current_snapshot_id.is_none()) {
        sources.cache = Some(repo.id);
    }
    let mut stack = vec![(repo.clone(), 0usize)];
    let mut seen = BTreeSet::new();
    // Depth first, members in order: a stack of what is left, reversed.
    while let Some((r, depth)) = stack.pop() {
        if !seen.insert(r.id) || depth > 8 {
            continue;
        }
        if r.gate().is_some() {
            sources.gated.push(r.name.to_string());
        }
        if r.id != repo.id {
            sources.all.push(r.id);
        }
        if r.repo_type != RepoType::Group {
            sources.assets.push(r.id);
            continue;
        }
        let mut members = Vec::new();
        for name in &r.members {
            if let Some(m) = services.db.repository_by_name(name).await? {
                if m.format == r.format {
                    members.push((m, depth + 1));
                }
            }
        }
        stack.extend(members.into_iter().rev());
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(time_name(1_796_549_412_000), "20261206T093012Z");
        assert!(check_name("2026-12-06.release_1").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", "ü", &"x".repeat(101)] {
            let e = check_name(bad);
            assert!(e.as_ref().is_err_and(|e| e.contains("segment of the snapshot's URL")), "{bad:?}: {e:?}");
        }
    }
}
