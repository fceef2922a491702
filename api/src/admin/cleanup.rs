//! `/api/v1/cleanup-policies`: cleanup policies (admin). A policy belongs to one format, names
//! its criteria (combined with AND), an optional schedule, and the hosted or proxy repositories
//! of its format it cleans.

use actix_web::{web, HttpResponse};
use packyard_core::services::Services;
use packyard_model::cleanup::{check_name, Criteria, PolicySpec, Schedule};
use packyard_model::repos::RepoType;
use packyard_model::time::rfc3339_ms;
use packyard_store::db::cleanup::{PolicyRecord, PolicyWrite};
use serde::Serialize;

use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::admin::resource::resource;
    cfg.service(resource("/cleanup-policies").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            resource("/cleanup-policies/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        )
        .service(resource("/cleanup-policies/{name}/preview").route(web::post().to(preview)))
        .service(resource("/cleanup-policies/{name}/run").route(web::post().to(run_now)))
        .service(resource("/cleanup-policies/{name}/runs").route(web::get().to(runs)));
}

#[derive(Serialize)]
struct PolicyView {
    name: String,
    format: String,
    description: String,
    criteria: Criteria,
    schedule: Option<Schedule>,
    repositories: Vec<String>,
    created_at: String,
    updated_at: String,
}

impl TryFrom<PolicyRecord> for PolicyView {
    type Error = ApiError;

    fn try_from(p: PolicyRecord) -> Result<Self, ApiError> {
        let criteria = serde_json::from_str(&p.row.criteria).map_err(ApiError::internal)?;
        let schedule = p.row.schedule.as_deref().map(serde_json::from_str).transpose().map_err(ApiError::internal)?;
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

async fn find(services: &Services, name: &str) -> Result<PolicyRecord, ApiError> {
    services.db.policy(name).await?.ok_or_else(|| ApiError::not_found(format!("cleanup policy {name} not found")))
}

/// The policy's rules, then its repositories: each must exist, hold components of its own
/// (hosted or proxy: a group's cleanup would touch its members) and be of the policy's format.
/// Returns their ids.
async fn check(services: &Services, name: &str, spec: &PolicySpec) -> Result<Vec<i64>, ApiError> {
    spec.validate(name, &|f| packyard_formats::registry().get(f).catalogue().selectable())
        .map_err(ApiError::bad_request)?;
    let mut ids = Vec::with_capacity(spec.repositories.len());
    for r in &spec.repositories {
        let repo = services
            .db
            .repository_by_name(r)
            .await?
            .ok_or_else(|| ApiError::bad_request(format!("repositories: {r} does not exist")))?;
        if repo.repo_type == RepoType::Group {
            return Err(ApiError::bad_request(format!(
                "repositories: {r} is a group, which holds nothing of its own; clean its members instead"
            )));
        }
        if repo.format != spec.format {
            return Err(ApiError::bad_request(format!(
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

fn write<'a>(spec: &'a PolicySpec, criteria: &'a str, schedule: Option<&'a str>, ids: &'a [i64]) -> PolicyWrite<'a> {
    PolicyWrite { format: spec.format.as_str(), description: &spec.description, criteria, schedule, repositories: ids }
}

fn json_of(spec: &PolicySpec) -> Result<(String, Option<String>), ApiError> {
    let criteria = serde_json::to_string(&spec.criteria).map_err(ApiError::internal)?;
    let schedule = spec.schedule.as_ref().map(serde_json::to_string).transpose().map_err(ApiError::internal)?;
    Ok((criteria, schedule))
}

pub(crate) async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    let all: Vec<PolicyView> =
        services.db.list_policies().await?.into_iter().map(PolicyView::try_from).collect::<Result<_, _>>()?;
    Ok(HttpResponse::Ok().json(all))
}

async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(PolicyView::try_from(find(&services, &path).await?)?))
}

async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<PolicySpec>,
) -> Result<HttpResponse, ApiError> {
    let spec = body.into_inner();
    let name = spec.name.clone().ok_or_else(|| ApiError::bad_request("missing field `name`"))?;
    let ids = check(&services, &name, &spec).await?;
    let (criteria, schedule) = json_of(&spec)?;
    services.db.insert_policy(&name, &write(&spec, &criteria, schedule.as_deref(), &ids)).await.map_err(
        |e| match e {
            packyard_store::db::DbError::Conflict(_) => {
                ApiError::new(ErrorCode::Conflict, format!("a cleanup policy named {name} exists already"))
            }
            other => other.into(),
        },
    )?;
    let detail =
        serde_json::json!({"format": spec.format, "criteria": spec.criteria, "repositories": spec.repositories});
    services.security.audit(admin.username(), Some(admin.addr()), "cleanup_policy.create", &name, detail).await;
    Ok(HttpResponse::Created().json(PolicyView::try_from(find(&services, &name).await?)?))
}

async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<PolicySpec>,
) -> Result<HttpResponse, ApiError> {
    let spec = body.into_inner();
    if spec.name.as_deref().is_some_and(|n| n != path.as_str()) {
        return Err(ApiError::bad_request("a cleanup policy cannot be renamed"));
    }
    check_name(&path).map_err(ApiError::bad_request)?;
    find(&services, &path).await?;
    let ids = check(&services, &path, &spec).await?;
    let (criteria, schedule) = json_of(&spec)?;
    if !services.db.update_policy(&path, &write(&spec, &criteria, schedule.as_deref(), &ids)).await? {
        return Err(ApiError::not_found(format!("cleanup policy {path} not found")));
    }
    let detail =
        serde_json::json!({"format": spec.format, "criteria": spec.criteria, "repositories": spec.repositories});
    services.security.audit(admin.username(), Some(admin.addr()), "cleanup_policy.update", &path, detail).await;
    Ok(HttpResponse::Ok().json(PolicyView::try_from(find(&services, &path).await?)?))
}

async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if !services.db.delete_policy(&path).await? {
        return Err(ApiError::not_found(format!("cleanup policy {path} not found")));
    }
    let detail = serde_json::json!({});
    services.security.audit(admin.username(), Some(admin.addr()), "cleanup_policy.delete", &path, detail).await;
    Ok(HttpResponse::NoContent().finish())
}

/// Rows of a preview page.
const PREVIEW_PAGE: usize = 100;
/// The catalogue rows a preview with `count=false` reads at most per request.
const PREVIEW_READ: usize = 2_000;

#[derive(serde::Deserialize)]
pub(crate) struct PreviewQuery {
    pub(crate) repository: Option<String>,
    #[serde(rename = "continuationToken")]
    pub(crate) continuation_token: Option<String>,
    /// `false`: no totals, and a page's work bounded (the web UI's preview).
    pub(crate) count: Option<bool>,
}

fn preview_item(s: &packyard_core::cleanup::Selected) -> serde_json::Value {
    let c = &s.component;
    serde_json::json!({
        "component": c.component_key, "group": c.namespace, "name": c.name, "version": c.version,
        "bytes": s.bytes, "published": rfc3339_ms(c.created_at),
        "lastDownloaded": s.last_downloaded.map(rfc3339_ms),
    })
}

fn preview_token(name: &str, id: i64) -> String {
    use base64::Engine as _;
    b64().encode(serde_json::json!([name, id]).to_string())
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

/// `POST /cleanup-policies/{name}/preview?repository=`: what a run of the policy would remove
/// from the repository now — every component's count and bytes, and a page of them (name order;
/// `continuationToken` for the next).
pub(crate) async fn preview(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    q: web::Query<PreviewQuery>,
) -> Result<HttpResponse, ApiError> {
    use base64::Engine as _;
    let policy = PolicyView::try_from(find(&services, &path).await?)?;
    let name = q
        .repository
        .as_deref()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| ApiError::bad_request("the repository parameter is required: ?repository=<name>"))?;
    let repo = services
        .db
        .repository_by_name(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("repository {name} not found")))?;
    if repo.repo_type == RepoType::Group {
        return Err(ApiError::bad_request(format!("{name} is a group, which holds nothing of its own")));
    }
    if repo.format.as_str() != policy.format {
        return Err(ApiError::bad_request(format!(
            "{name} is a {} repository; policy {} is for {}",
            repo.format, policy.name, policy.format
        )));
    }
    let bad_token = || ApiError::bad_request("continuationToken is not one this server issued for this preview");
    let after: Option<(String, i64)> = match q.continuation_token.as_deref() {
        None => None,
        Some(t) => Some(serde_json::from_slice(&b64().decode(t).map_err(|_| bad_token())?).map_err(|_| bad_token())?),
    };
    let criteria = packyard_core::cleanup::Compiled::new(&policy.criteria, packyard_store::db::now_ms())
        .map_err(ApiError::internal)?;
    let format = packyard_formats::registry().get(repo.format).catalogue();
    if q.count == Some(false) {
        return preview_page(&services, (format, &criteria), &repo, after, (policy.name.as_str(), repo.name.as_str()))
            .await;
    }
    let (mut count, mut bytes, mut more) = (0u64, 0i64, false);
    // The page starts after the token's component in the walk's own order (the database's
    // collation, which Rust's string order need not match).
    let mut past = after.is_none();
    let mut items: Vec<packyard_core::cleanup::Selected> = Vec::new();
    packyard_core::cleanup::select(&services.db, format, &criteria, repo.id, |s| {
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
    let items: Vec<serde_json::Value> = items.iter().map(preview_item).collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "policy": policy.name, "repository": repo.name.as_str(), "count": count, "bytes": bytes,
        "items": items, "continuationToken": token,
    })))
}

/// A page of the preview without totals, reading at most [`PREVIEW_READ`] rows: when the
/// criteria select little, the page may hold fewer items (or none) and still name a
/// `continuationToken` from which the walk goes on.
async fn preview_page(
    services: &Services,
    (format, criteria): (&dyn packyard_core::catalogue::Catalogue, &packyard_core::cleanup::Compiled),
    repo: &packyard_model::repos::Repository,
    after: Option<(String, i64)>,
    (policy, repository): (&str, &str),
) -> Result<HttpResponse, ApiError> {
    let mut walk = packyard_core::cleanup::Walk::new(&services.db, format, criteria, repo.id, i64::MAX);
    // A token is an item's (name, id): the walk starts at that name and skips through the item;
    // or a name walked whole with nothing after it shown: (name, i64::MAX).
    let mut skip_through = None;
    if let Some((name, id)) = &after {
        walk = walk.starting_at(name, *id == i64::MAX);
        skip_through = (*id != i64::MAX).then_some((name.as_str(), *id));
    }
    let mut items: Vec<packyard_core::cleanup::Selected> = Vec::new();
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
    let items: Vec<serde_json::Value> = items.iter().map(preview_item).collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "policy": policy, "repository": repository, "count": null, "bytes": null,
        "items": items, "continuationToken": token,
    })))
}

#[derive(serde::Deserialize)]
struct RunQuery {
    repository: Option<String>,
}

/// A policy's run on one repository, as `GET …/runs` shows it.
fn run_view(r: &packyard_store::db::cleanup::RunRecord) -> serde_json::Value {
    let state = if r.running_until.is_some() {
        "running"
    } else if r.requested_at.is_some() {
        "requested"
    } else if r.started_at.is_some() && r.finished_at.is_none() {
        "interrupted"
    } else {
        "idle"
    };
    serde_json::json!({
        "repository": r.repository, "state": state,
        "requestedAt": r.requested_at.map(rfc3339_ms), "requestedBy": r.requested_by.as_deref().filter(|_| r.requested_at.is_some()),
        "lastStarted": r.started_at.map(rfc3339_ms), "lastFinished": r.finished_at.map(rfc3339_ms),
        "durationMs": r.duration_ms, "components": r.components, "bytes": r.bytes, "error": r.error,
    })
}

/// `POST /cleanup-policies/{name}/run[?repository=]`: asks the worker to run the policy now on
/// the repository (or on each of its repositories); 202 with the runs' state. A repository that
/// another run is cleaning gets this one after it.
async fn run_now(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    q: web::Query<RunQuery>,
) -> Result<HttpResponse, ApiError> {
    let policy = find(&services, &path).await?;
    let wanted: Vec<String> = match q.repository.as_deref().filter(|r| !r.is_empty()) {
        Some(r) if policy.repositories.iter().any(|p| p == r) => vec![r.to_string()],
        Some(r) => {
            return Err(ApiError::bad_request(format!(
                "policy {} does not clean {r}; add the repository to the policy first",
                policy.row.name
            )))
        }
        None if policy.repositories.is_empty() => {
            return Err(ApiError::bad_request(format!("policy {} cleans no repository", policy.row.name)))
        }
        None => policy.repositories.clone(),
    };
    let records = services.db.cleanup_runs_of(policy.row.id).await?;
    for r in records.iter().filter(|r| wanted.contains(&r.repository)) {
        services.db.request_cleanup_run(policy.row.id, r.repository_id, admin.username()).await?;
    }
    let detail = serde_json::json!({ "repositories": wanted });
    services.security.audit(admin.username(), Some(admin.addr()), "cleanup_policy.run", &policy.row.name, detail).await;
    let items: Vec<serde_json::Value> = services
        .db
        .cleanup_runs_of(policy.row.id)
        .await?
        .iter()
        .filter(|r| wanted.contains(&r.repository))
        .map(run_view)
        .collect();
    Ok(HttpResponse::Accepted().json(serde_json::json!({ "policy": policy.row.name, "items": items })))
}

/// `GET /cleanup-policies/{name}/runs`: the last (or current) run on each of the policy's
/// repositories — state, start, finish, duration, what it removed, its error.
pub(crate) async fn runs(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let policy = find(&services, &path).await?;
    let items: Vec<serde_json::Value> =
        services.db.cleanup_runs_of(policy.row.id).await?.iter().map(run_view).collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "policy": policy.row.name, "items": items })))
}
