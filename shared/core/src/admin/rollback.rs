//! Rollback and switch (`/api/v1/repositories/{name}/pins`): a hosted repository's index units
//! — an APT distribution, an APK branch ([`crate::formats::FormatSpec::rollback`]) — pointed at
//! one of the repository's snapshots publish that snapshot's index files again as their current
//! index, signed anew ([`crate::publication::Builder::republish`]), until they are pointed back
//! at the repository's rows.
//!
//! While a unit is pointed at a snapshot, uploads and deletes go on as usual; they reach the
//! unit's index once it is pointed back (then built from nothing). A package its republished index
//! lists that the repository has since deleted is served from the snapshot (the snapshot's files
//! keep their blobs), and a snapshot a unit is pointed at cannot be deleted.

use std::collections::BTreeSet;

use packyard_model::repos::{RepoType, Repository};
use packyard_model::time::rfc3339_ms;
use packyard_store::db::now_ms;
use packyard_store::db::publication::UnitRecord;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::formats::{Registry, Rollback};
use crate::hosted::Actor;
use crate::repositories::RepositoryService;
use crate::services::Services;

/// The request that points units at a snapshot.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinRequest {
    /// The repository's snapshot to serve.
    pub snapshot: String,
    /// The units to point at it, by key (`bookworm`) or by a leading part of it that ends at a
    /// `/` (`v3.19` for every APK unit of branch `v3.19`); by default every unit the snapshot
    /// holds.
    #[serde(default)]
    pub units: Option<Vec<String>>,
}

/// The request that points units back at the repository's rows; by default every pinned unit.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnpinRequest {
    #[serde(default)]
    pub units: Option<Vec<String>>,
}

/// A unit pointed at a snapshot, as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PinView {
    /// The unit's key (`bookworm`, `v3.19/main/x86_64`).
    pub unit: String,
    /// What the format calls it (`distribution`, `branch`).
    pub kind: String,
    pub snapshot: String,
    pub pinned_at: String,
    pub pinned_by: Option<String>,
}

/// What a pin or an unpin changed: the units, and the revisions to wait for.
#[derive(Debug, Clone, Default)]
pub struct Pinned {
    pub units: Vec<String>,
    pub changes: Vec<(i64, i64)>,
}

/// The events a pin and an unpin announce.
pub const PINNED: &str = "repository.pinned";
pub const UNPINNED: &str = "repository.unpinned";

/// The repository and what its format calls a unit that can be pointed at a snapshot.
async fn pinnable(services: &Services, formats: &Registry, repository: &str) -> AdminResult<(Repository, Rollback)> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let Some(rollback) = formats.get(repo.format).rollback() else {
        let can: Vec<String> =
            formats.all().filter_map(|s| s.rollback().map(|r| format!("{} {}s", s.format(), r.label))).collect();
        return Err(AdminError::Invalid(format!(
            "{} repositories have no index that can be pointed at a snapshot ({} can)",
            repo.format,
            can.join(" and ")
        )));
    };
    if repo.repo_type != RepoType::Hosted {
        return Err(AdminError::Invalid(format!(
            "repository {} is a {} repository: only a hosted repository's {}s can be pointed at a snapshot (clients can use the snapshot's own URL)",
            repo.name, repo.repo_type, rollback.label
        )));
    }
    Ok((repo, rollback))
}

/// Whether `selector` names unit `key`: the key itself, or a leading part of it that ends at
/// a `/`.
fn selects(selector: &str, key: &str) -> bool {
    let selector = selector.trim_end_matches('/');
    key == selector || key.strip_prefix(selector).is_some_and(|rest| rest.starts_with('/'))
}

/// The units of `units` that the selectors name (each selector must name one), or all of them.
fn chosen<'a>(
    units: &'a [UnitRecord],
    selectors: Option<&[String]>,
    (repo, label, what): (&Repository, &str, &str),
) -> AdminResult<Vec<&'a UnitRecord>> {
    let Some(selectors) = selectors else { return Ok(units.iter().collect()) };
    if selectors.is_empty() {
        return Err(AdminError::Invalid(format!("\"units\" is empty: name at least one {label}, or leave it out")));
    }
    let mut out = BTreeSet::new();
    for s in selectors {
        let found: Vec<usize> = (0..units.len()).filter(|i| selects(s, &units[*i].unit_key)).collect();
        if found.is_empty() {
            let known: Vec<&str> = units.iter().map(|u| u.unit_key.as_str()).collect();
            return Err(AdminError::Invalid(format!(
                "repository {} has no {label} {s:?} {what} (there: {})",
                repo.name,
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )));
        }
        out.extend(found);
    }
    Ok(out.into_iter().map(|i| &units[i]).collect())
}

/// Points units of the repository at its snapshot `request.snapshot`.
pub async fn pin(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    repository: &str,
    request: PinRequest,
) -> AdminResult<Pinned> {
    let (repo, rollback) = pinnable(services, formats, repository).await?;
    let snapshot = services.db.repository_snapshot(repo.id, &request.snapshot).await?.ok_or_else(|| {
        AdminError::NotFound(format!("repository {} has no snapshot {:?}", repo.name, request.snapshot))
    })?;
    let held: BTreeSet<i64> = services.db.repository_snapshot_units(snapshot.id).await?.into_iter().collect();
    let units: Vec<UnitRecord> = services
        .db
        .units_of(repo.id)
        .await?
        .into_iter()
        .filter(|u| u.kind == rollback.kind && held.contains(&u.id))
        .collect();
    if units.is_empty() {
        return Err(AdminError::Invalid(format!(
            "snapshot {:?} of repository {} holds no {} index to publish again (a snapshot made before rollbacks existed, or of an empty repository): make a new snapshot",
            snapshot.name, repo.name, rollback.label
        )));
    }
    let at = (&repo, rollback.label, "in the snapshot");
    let chosen: Vec<(i64, String, String)> = chosen(&units, request.units.as_deref(), at)?
        .into_iter()
        .map(|u| (u.id, u.kind.clone(), u.unit_key.clone()))
        .collect();
    services.db.pin_units(repo.id, snapshot.id, &chosen, (Some(actor.username), now_ms())).await?;
    let pinned = changes(services, repo.id, &chosen).await?;
    services.wake();
    let payload = serde_json::json!({"repository": repo.name, "snapshot": snapshot.name, "units": pinned.units,
        "by": actor.username});
    services.db.enqueue_webhook_event(PINNED, Some(repo.name.as_str()), &payload.to_string()).await?;
    services.security.audit(actor.username, actor.address, "snapshot.pin", repo.name.as_str(), payload).await;
    Ok(pinned)
}

/// Points units of the repository back at its rows.
pub async fn unpin(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    repository: &str,
    request: UnpinRequest,
) -> AdminResult<Pinned> {
    let (repo, rollback) = pinnable(services, formats, repository).await?;
    let pins = services.db.unit_pins(repo.id).await?;
    let pinned_ids: BTreeSet<i64> = pins.iter().map(|p| p.unit_id).collect();
    let units: Vec<UnitRecord> =
        services.db.units_of(repo.id).await?.into_iter().filter(|u| pinned_ids.contains(&u.id)).collect();
    if units.is_empty() && request.units.is_none() {
        return Ok(Pinned::default());
    }
    let at = (&repo, rollback.label, "pointed at a snapshot");
    let chosen: Vec<(i64, String, String)> = chosen(&units, request.units.as_deref(), at)?
        .into_iter()
        .map(|u| (u.id, u.kind.clone(), u.unit_key.clone()))
        .collect();
    services.db.unpin_units(repo.id, &chosen).await?;
    let back = changes(services, repo.id, &chosen).await?;
    services.wake();
    let payload = serde_json::json!({"repository": repo.name, "units": back.units, "by": actor.username});
    services.db.enqueue_webhook_event(UNPINNED, Some(repo.name.as_str()), &payload.to_string()).await?;
    services.security.audit(actor.username, actor.address, "snapshot.unpin", repo.name.as_str(), payload).await;
    Ok(back)
}

/// The repository's units pointed at a snapshot.
pub async fn list(services: &Services, formats: &Registry, repository: &str) -> AdminResult<Vec<PinView>> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let label = formats.get(repo.format).rollback().map_or("unit", |r| r.label);
    Ok(services
        .db
        .unit_pins(repo.id)
        .await?
        .into_iter()
        .map(|p| PinView {
            unit: p.unit_key,
            kind: label.to_string(),
            snapshot: p.snapshot,
            pinned_at: rfc3339_ms(p.pinned_at),
            pinned_by: p.pinned_by,
        })
        .collect())
}

/// The units' keys and the revisions their publication reaches.
async fn changes(services: &Services, repository_id: i64, units: &[(i64, String, String)]) -> AdminResult<Pinned> {
    let mut out = Pinned::default();
    for (id, kind, key) in units {
        out.units.push(key.clone());
        if let Some(u) = services.db.unit_by_key(repository_id, kind, key).await? {
            out.changes.push((*id, u.desired_revision));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::selects;

    #[test]
    fn selectors() {
        assert!(selects("bookworm", "bookworm"));
        assert!(!selects("bookworm", "bookworm-backports"));
        assert!(selects("v3.19", "v3.19/main/x86_64"));
        assert!(selects("v3.19/", "v3.19/main/x86_64"));
        assert!(selects("v3.19/main", "v3.19/main/x86_64"));
        assert!(!selects("v3.1", "v3.19/main/x86_64"));
        assert!(!selects("v3.19/main/x86", "v3.19/main/x86_64"));
    }
}
