//! Cleanup policies: each belongs to one format, names its criteria (combined with AND), an
//! optional schedule and the hosted or proxy repositories of its format it cleans; a preview of
//! what a run would remove now, a run on demand, and each repository's last run.

use base64::Engine as _;
use packyard_model::cleanup::{check_name, Criteria, PolicySpec, Schedule};
use packyard_model::repos::{RepoType, Repository};
use packyard_model::time::rfc3339_ms;
use packyard_store::db::cleanup::{PolicyRecord, PolicyWrite, RunRecord};
use packyard_store::db::DbError;
use serde::Serialize;

use super::{AdminError, AdminResult};
use crate::catalogue::Catalogue;
use crate::cleanup::{select, Compiled, Selected, Walk};
use crate::formats::Registry;
use crate::hosted::Actor;
use crate::services::Services;

/// A policy as the administration shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyView {
    pub name: String,
    pub format: String,
    pub description: String,
    pub criteria: Criteria,
    pub schedule: Option<Schedule>,
    pub repositories: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl TryFrom<PolicyRecord> for PolicyView {
    type Error = AdminError;

    fn try_from(p: PolicyRecord) -> AdminResult<Self> {
        let stored = |e: serde_json::Error| AdminError::Internal(format!("cleanup policy {}: {e}", p.row.name));
        let criteria = serde_json::from_str(&p.row.criteria).map_err(stored)?;
        let schedule = p.row.schedule.as_deref().map(serde_json::from_str).transpose().map_err(stored)?;
        Ok(Self {
            name: p.row.name,
            format: p.row.format,
            description: p.row.description,
            criteria,
            schedule,
            repositories: p.repositories,
            created_at: rfc3339_ms(p.row.created_at),
            updated_at: rfc3339_ms(p.row.updated_at),
        })
    }
}

async fn find(services: &Services, name: &str) -> AdminResult<PolicyRecord> {
    services.db.policy(name).await?.ok_or_else(|| AdminError::NotFound(format!("cleanup policy {name} not found")))
}

/// The policy's rules, then its repositories: each must exist, hold components of its own
/// (hosted or proxy: a group's cleanup would touch its members) and be of the policy's format.
/// Returns their ids.
async fn check(services: &Services, formats: &Registry, name: &str, spec: &PolicySpec) -> AdminResult<Vec<i64>> {
    spec.validate(name, &|f| formats.get(f).catalogue().selectable()).map_err(AdminError::Invalid)?;
    let mut ids = Vec::with_capacity(spec.repositories.len());
    for r in &spec.repositories {
        let repo = services
            .db
            .repository_by_name(r)
            .await?
            .ok_or_else(|| AdminError::Invalid(format!("repositories: {r} does not exist")))?;
        if repo.repo_type == RepoType::Group {
            return Err(AdminError::Invalid(format!(
                "repositories: {r} is a group, which holds nothing of its own; clean its members instead"
            )));
        }
        if repo.format != spec.format {
            return Err(AdminError::Invalid(format!(
                "repositories: {r} is a {} repository; this policy is for {}",
                repo.format, spec.format
            )));
        }
        if !ids.contains(&repo.id) {
            ids.push(repo.id);
        }
    }
    Ok(ids)
}

/// Stores `spec` under `name`: a new policy, or the existing one replaced.
async fn store(services: &Services, formats: &Registry, name: &str, spec: &PolicySpec, new: bool) -> AdminResult<()> {
    let ids = check(services, formats, name, spec).await?;
    let internal = |e: serde_json::Error| AdminError::Internal(e.to_string());
    let criteria = serde_json::to_string(&spec.criteria).map_err(internal)?;
    let schedule = spec.schedule.as_ref().map(serde_json::to_string).transpose().map_err(internal)?;
    let write = PolicyWrite {
        format: spec.format.as_str(),
        description: &spec.description,
        criteria: &criteria,
        schedule: schedule.as_deref(),
        repositories: &ids,
    };
    if new {
        services.db.insert_policy(name, &write).await.map_err(|e| match e {
            DbError::Conflict(_) => AdminError::Conflict(format!("a cleanup policy named {name} exists already")),
            other => other.into(),
        })
    } else if services.db.update_policy(name, &write).await? {
        Ok(())
    } else {
        Err(AdminError::NotFound(format!("cleanup policy {name} not found")))
    }
}

pub async fn list(services: &Services) -> AdminResult<Vec<PolicyView>> {
    services.db.list_policies().await?.into_iter().map(PolicyView::try_from).collect()
}

pub async fn get(services: &Services, name: &str) -> AdminResult<PolicyView> {
    find(services, name).await?.try_into()
}

pub async fn create(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    spec: PolicySpec,
) -> AdminResult<PolicyView> {
    let name = spec.name.clone().ok_or_else(|| AdminError::Invalid("missing field `name`".into()))?;
    store(services, formats, &name, &spec, true).await?;
    let detail =
        serde_json::json!({"format": spec.format, "criteria": spec.criteria, "repositories": spec.repositories});
    services.security.audit(actor.username, actor.address, "cleanup_policy.create", &name, detail).await;
    get(services, &name).await
}

/// Replaces the policy's definition; a policy cannot be renamed.
pub async fn update(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    name: &str,
    spec: PolicySpec,
) -> AdminResult<PolicyView> {
    if spec.name.as_deref().is_some_and(|n| n != name) {
        return Err(AdminError::Invalid("a cleanup policy cannot be renamed".into()));
    }
    check_name(name).map_err(AdminError::Invalid)?;
    find(services, name).await?;
    store(services, formats, name, &spec, false).await?;
    let detail =
        serde_json::json!({"format": spec.format, "criteria": spec.criteria, "repositories": spec.repositories});
    services.security.audit(actor.username, actor.address, "cleanup_policy.update", name, detail).await;
    get(services, name).await
}

pub async fn delete(services: &Services, actor: Actor<'_>, name: &str) -> AdminResult<()> {
    if !services.db.delete_policy(name).await? {
        return Err(AdminError::NotFound(format!("cleanup policy {name} not found")));
    }
    services.security.audit(actor.username, actor.address, "cleanup_policy.delete", name, serde_json::json!({})).await;
    Ok(())
}

/// Rows of a preview page.
const PREVIEW_PAGE: usize = 100;
/// The catalogue rows a preview without totals reads at most per request.
const PREVIEW_READ: usize = 2_000;

/// What a preview asks: the repository, a continuation token, and whether to count the totals.
#[derive(Debug, Clone, Default)]
pub struct PreviewRequest<'a> {
    pub repository: Option<&'a str>,
    pub continuation_token: Option<&'a str>,
    /// `false`: no totals, and a page's work bounded (the web UI's preview).
    pub count: bool,
}

/// A component a run would remove.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewItem {
    pub component: String,
    pub group: String,
    pub name: String,
    pub version: String,
    pub bytes: i64,
    pub published: String,
    pub last_downloaded: Option<String>,
}

impl From<&Selected> for PreviewItem {
    fn from(s: &Selected) -> Self {
        let c = &s.component;
        Self {
            component: c.component_key.clone(),
            group: c.namespace.clone(),
            name: c.name.clone(),
            version: c.version.clone(),
            bytes: s.bytes,
            published: rfc3339_ms(c.created_at),
            last_downloaded: s.last_downloaded.map(rfc3339_ms),
        }
    }
}

/// A page of a preview: the totals (when counted), the page's items, and the token of the next.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub policy: String,
    pub repository: String,
    pub count: Option<u64>,
    pub bytes: Option<i64>,
    pub items: Vec<PreviewItem>,
    pub continuation_token: Option<String>,
}

fn preview_token(name: &str, id: i64) -> String {
    b64().encode(serde_json::json!([name, id]).to_string())
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

/// What a run of the policy would remove from the repository now — with `count`, every
/// component's count and bytes, and a page of them (name order; `continuation_token` for the next).
pub async fn preview(
    services: &Services,
    formats: &Registry,
    name: &str,
    request: PreviewRequest<'_>,
) -> AdminResult<Preview> {
    let policy = get(services, name).await?;
    let repository = request
        .repository
        .filter(|r| !r.is_empty())
        .ok_or_else(|| AdminError::Invalid("the repository parameter is required: ?repository=<name>".into()))?;
    let repo = services
        .db
        .repository_by_name(repository)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("repository {repository} not found")))?;
    if repo.repo_type == RepoType::Group {
        return Err(AdminError::Invalid(format!("{repository} is a group, which holds nothing of its own")));
    }
    if repo.format.as_str() != policy.format {
        return Err(AdminError::Invalid(format!(
            "{repository} is a {} repository; policy {} is for {}",
            repo.format, policy.name, policy.format
        )));
    }
    let bad_token = || AdminError::Invalid("continuationToken is not one this server issued for this preview".into());
    let after: Option<(String, i64)> = match request.continuation_token {
        None => None,
        Some(t) => Some(serde_json::from_slice(&b64().decode(t).map_err(|_| bad_token())?).map_err(|_| bad_token())?),
    };
    let criteria = Compiled::new(&policy.criteria, packyard_store::db::now_ms())
        .map_err(|e| AdminError::Internal(format!("cleanup policy {}: {e}", policy.name)))?;
    let format = formats.get(repo.format).catalogue();
    let (items, count, bytes, token) = if request.count {
        counted(services, format, &criteria, &repo, after).await?
    } else {
        let (items, token) = page(services, format, &criteria, &repo, after).await?;
        (items, None, None, token)
    };
    Ok(Preview {
        policy: policy.name,
        repository: repo.name.to_string(),
        count,
        bytes,
        items: items.iter().map(PreviewItem::from).collect(),
        continuation_token: token,
    })
}

type Counted = (Vec<Selected>, Option<u64>, Option<i64>, Option<String>);

/// The whole walk, counted, and the page after `after`.
async fn counted(
    services: &Services,
    format: &dyn Catalogue,
    criteria: &Compiled,
    repo: &Repository,
    after: Option<(String, i64)>,
) -> AdminResult<Counted> {
    let (mut count, mut bytes, mut more) = (0u64, 0i64, false);
    // The page starts after the token's component in the walk's own order (the database's
    // collation, which Rust's string order need not match).
    let mut past = after.is_none();
    let mut items: Vec<Selected> = Vec::new();
    select(&services.db, format, criteria, repo.id, |s| {
        count += 1;
        bytes += s.bytes;
        if !past {
            past = after.as_ref().is_some_and(|(_, id)| s.component.id == *id);
        } else if items.len() < PREVIEW_PAGE {
            items.push(s);
        } else {
            more = true;
        }
        true
    })
    .await?;
    let token = if more { items.last().map(|s| preview_token(&s.component.name, s.component.id)) } else { None };
    Ok((items, Some(count), Some(bytes), token))
}

/// A page without totals, reading at most [`PREVIEW_READ`] rows: when the criteria select
/// little, the page may hold fewer items (or none) and still name a continuation token from
/// which the walk goes on.
async fn page(
    services: &Services,
    format: &dyn Catalogue,
    criteria: &Compiled,
    repo: &Repository,
    after: Option<(String, i64)>,
) -> AdminResult<(Vec<Selected>, Option<String>)> {
    let mut walk = Walk::new(&services.db, format, criteria, repo.id, i64::MAX);
    // A token is an item's (name, id): the walk starts at that name and skips through the item;
    // or a name walked whole with nothing after it shown: (name, i64::MAX).
    let mut skip_through = None;
    if let Some((name, id)) = &after {
        walk = walk.starting_at(name, *id == i64::MAX);
        skip_through = (*id != i64::MAX).then_some((name.as_str(), *id));
    }
    let mut items: Vec<Selected> = Vec::new();
    let mut more = false;
    loop {
        // A single name larger than the budget is still decided whole.
        let budget = if walk.decided().is_some() { PREVIEW_READ } else { walk.read() + PREVIEW_READ };
        let batch = walk.next_within(PREVIEW_PAGE + 1 - items.len(), budget).await?;
        for s in batch {
            // Within the token's name only: an item gone since stops the skipping at the next name.
            if let Some((name, id)) = skip_through {
                if s.component.name == name {
                    if s.component.id == id {
                        skip_through = None;
                    }
                    continue;
                }
                skip_through = None;
            }
            if items.len() < PREVIEW_PAGE {
                items.push(s);
            } else {
                more = true;
            }
        }
        if more || walk.finished() || (walk.read() >= PREVIEW_READ && walk.decided().is_some()) {
            break;
        }
    }
    let token = if more {
        items.last().map(|s| preview_token(&s.component.name, s.component.id))
    } else if walk.finished() {
        None
    } else {
        walk.decided().map(|name| preview_token(name, i64::MAX))
    };
    Ok((items, token))
}

/// A policy's run on one repository.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub repository: String,
    /// `running`, `requested`, `interrupted` or `idle`.
    pub state: &'static str,
    pub requested_at: Option<String>,
    pub requested_by: Option<String>,
    pub last_started: Option<String>,
    pub last_finished: Option<String>,
    pub duration_ms: Option<i64>,
    pub components: i64,
    pub bytes: i64,
    pub error: Option<String>,
}

impl From<&RunRecord> for RunView {
    fn from(r: &RunRecord) -> Self {
        let state = if r.running_until.is_some() {
            "running"
        } else if r.requested_at.is_some() {
            "requested"
        } else if r.started_at.is_some() && r.finished_at.is_none() {
            "interrupted"
        } else {
            "idle"
        };
        Self {
            repository: r.repository.clone(),
            state,
            requested_at: r.requested_at.map(rfc3339_ms),
            requested_by: r.requested_by.clone().filter(|_| r.requested_at.is_some()),
            last_started: r.started_at.map(rfc3339_ms),
            last_finished: r.finished_at.map(rfc3339_ms),
            duration_ms: r.duration_ms,
            components: r.components,
            bytes: r.bytes,
            error: r.error.clone(),
        }
    }
}

/// A policy's runs, one per repository it cleans.
#[derive(Debug, Clone, Serialize)]
pub struct Runs {
    pub policy: String,
    pub items: Vec<RunView>,
}

/// Asks the workers to run the policy now on `repository` (or on each of its repositories); a
/// repository that another run is cleaning gets this one after it. Returns the runs' state.
pub async fn run_now(services: &Services, actor: Actor<'_>, name: &str, repository: Option<&str>) -> AdminResult<Runs> {
    let policy = find(services, name).await?;
    let wanted: Vec<String> = match repository.filter(|r| !r.is_empty()) {
        Some(r) if policy.repositories.iter().any(|p| p == r) => vec![r.to_string()],
        Some(r) => {
            return Err(AdminError::Invalid(format!(
                "policy {} does not clean {r}; add the repository to the policy first",
                policy.row.name
            )))
        }
        None if policy.repositories.is_empty() => {
            return Err(AdminError::Invalid(format!("policy {} cleans no repository", policy.row.name)))
        }
        None => policy.repositories.clone(),
    };
    let records = services.db.cleanup_runs_of(policy.row.id).await?;
    for r in records.iter().filter(|r| wanted.contains(&r.repository)) {
        services.db.request_cleanup_run(policy.row.id, r.repository_id, actor.username).await?;
    }
    let detail = serde_json::json!({ "repositories": wanted });
    services.security.audit(actor.username, actor.address, "cleanup_policy.run", &policy.row.name, detail).await;
    let records = services.db.cleanup_runs_of(policy.row.id).await?;
    let items = records.iter().filter(|r| wanted.contains(&r.repository)).map(RunView::from).collect();
    Ok(Runs { policy: policy.row.name, items })
}

/// Stops the policy's runs in progress: each after its batch in progress (what that batch
/// removed stays removed). Returns how many were running.
pub async fn stop(services: &Services, actor: Actor<'_>, name: &str) -> AdminResult<u64> {
    let policy = find(services, name).await?;
    let stopped = services.db.stop_cleanup(policy.row.id).await?;
    let detail = serde_json::json!({ "runs": stopped });
    services.security.audit(actor.username, actor.address, "cleanup_policy.stop", &policy.row.name, detail).await;
    Ok(stopped)
}

/// The last (or current) run on each of the policy's repositories — state, start, finish,
/// duration, what it removed, its error.
pub async fn runs(services: &Services, name: &str) -> AdminResult<Runs> {
    let policy = find(services, name).await?;
    let items = services.db.cleanup_runs_of(policy.row.id).await?.iter().map(RunView::from).collect();
    Ok(Runs { policy: policy.row.name, items })
}
