//! Nexus's blob stores, tasks and cleanup policies (`/service/rest/v1/blobstores`, `/tasks`,
//! `/cleanup-policies`) over Packyard's: its one blob store (`default`, files or S3, as
//! `blobs.*` configures it), its cleanup policies' runs and the blob reclamation as tasks (run
//! and stop), and its cleanup policies in Nexus's `CleanupPolicyResourceXO`. What maps how is in
//! docs/nexus-api.md.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use actix_web::{web, HttpResponse};
use packyard_core::admin::cleanup::{self, PolicyView};
use packyard_core::services::Services;
use packyard_model::cleanup::{Criteria, PolicySpec};
use packyard_model::config::BlobsKind;
use packyard_model::repos::Format;
use serde::Deserialize;
use serde_json::{json, Value};

use super::repositories::BLOB_STORE;
use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode, NexusError};

type Result<T> = std::result::Result<T, NexusError>;

pub fn configure(scope: actix_web::Scope) -> actix_web::Scope {
    use super::refused::resource;
    scope
        .service(resource("/blobstores").route(web::get().to(blob_stores)))
        .service(resource("/blobstores/{name}/quota-status").route(web::get().to(quota_status)))
        .service(resource("/blobstores/{kind}/{name}").route(web::get().to(blob_store)))
        .service(resource("/tasks").route(web::get().to(tasks)))
        .service(resource("/tasks/{id}").route(web::get().to(task)))
        .service(resource("/tasks/{id}/run").route(web::post().to(run_task)))
        .service(resource("/tasks/{id}/stop").route(web::post().to(stop_task)))
        .service(resource("/cleanup-policies").route(web::get().to(policies)).route(web::post().to(create_policy)))
        .service(
            resource("/cleanup-policies/{name}")
                .route(web::get().to(policy))
                .route(web::put().to(update_policy))
                .route(web::delete().to(delete_policy)),
        )
}

fn invalid(message: impl Into<String>) -> NexusError {
    NexusError(ApiError::bad_request(message))
}

fn unknown_store(name: &str) -> NexusError {
    NexusError(ApiError::not_found(format!("blob store {name} not found: Packyard has one, {BLOB_STORE}")))
}

// --- blob stores ---------------------------------------------------------------------------

/// Free bytes where a file store keeps its blobs (`None`: S3, or not known).
fn available_bytes(services: &Services) -> Option<u64> {
    if services.config.blobs.kind != BlobsKind::File {
        return None;
    }
    let s = rustix::fs::statvfs(&services.config.blobs.path).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

fn store_type(services: &Services) -> &'static str {
    match services.config.blobs.kind {
        BlobsKind::File => "File",
        BlobsKind::S3 => "S3",
    }
}

/// `GET /blobstores`: Nexus's `GenericBlobStoreApiResponse` of the one store.
async fn blob_stores(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    let (count, bytes) = services.db.blob_totals().await?;
    let unavailable = services.blobs.check().await.is_err();
    Ok(HttpResponse::Ok().json([json!({
        "softQuota": soft_quota(&services),
        "name": BLOB_STORE,
        "type": store_type(&services),
        "unavailable": unavailable,
        "blobCount": count,
        "totalSizeInBytes": bytes,
        "availableSpaceInBytes": available_bytes(&services).map_or(Value::Null, |b| json!(b)),
    })]))
}

/// `GET /blobstores/file/default` (or `s3/default`): the store's configuration.
async fn blob_store(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse> {
    let (kind, name) = path.into_inner();
    if !kind.eq_ignore_ascii_case("file") && !kind.eq_ignore_ascii_case("s3") {
        let reason = super::refused::reason("GET", &format!("/v1/blobstores/{kind}/{name}"));
        return Err(NexusError(ApiError::not_found(reason)));
    }
    if name != BLOB_STORE || !kind.eq_ignore_ascii_case(store_type(&services)) {
        return Err(unknown_store(&name));
    }
    let b = &services.config.blobs;
    Ok(HttpResponse::Ok().json(match b.kind {
        BlobsKind::File => json!({"softQuota": soft_quota(&services), "path": b.path.display().to_string()}),
        BlobsKind::S3 => json!({"name": BLOB_STORE, "softQuota": soft_quota(&services),
            "bucketConfiguration": {"bucket": {"region": b.s3.region, "name": b.s3.bucket, "prefix": "", "expiration": -1}, "advancedBucketConnection": {"endpoint": b.s3.endpoint}}}),
    }))
}

/// `GET /blobstores/{name}/quota-status`: where the blob store stands against `blobs.quota.*`
/// (a violation: past its soft limit, or at its hard one).
async fn quota_status(_admin: Admin, services: web::Data<Services>, name: web::Path<String>) -> Result<HttpResponse> {
    if name.as_str() != BLOB_STORE {
        return Err(unknown_store(&name));
    }
    let (violation, message) = match packyard_core::quota::blob_store_status(&services).await? {
        Some(s) => (s.warns(), s.message),
        None => (false, format!("Blob store {BLOB_STORE} has no quota")),
    };
    Ok(HttpResponse::Ok().json(json!({"isViolation": violation, "message": message, "blobStoreName": BLOB_STORE})))
}

/// Nexus's `softQuota` of the blob store: its `blobs.quota.soft_bytes` as a space-used limit.
fn soft_quota(services: &Services) -> Value {
    match services.config.blobs.quota.soft_bytes {
        Some(limit) => json!({"type": "spaceUsedQuota", "limit": limit}),
        None => Value::Null,
    }
}

// --- tasks ---------------------------------------------------------------------------------

/// The blob reclamation task's id (a cleanup policy's is `cleanup-<policy>`).
const RECLAIM: &str = "blobstore-reclaim";
const CLEANUP: &str = "cleanup-";

/// A reclamation sweep this process runs (asked for through the task), and when the last
/// began and how it ended.
static RECLAIMING: AtomicBool = AtomicBool::new(false);
static RECLAIMED_AT: AtomicI64 = AtomicI64::new(0);
static RECLAIM_FAILED: AtomicBool = AtomicBool::new(false);

fn at(ms: i64) -> Value {
    if ms == 0 {
        Value::Null
    } else {
        json!(packyard_model::time::rfc3339_ms(ms))
    }
}

fn reclaim_task() -> Value {
    let last = RECLAIMED_AT.load(Ordering::Acquire);
    let result = match (last, RECLAIM_FAILED.load(Ordering::Acquire)) {
        (0, _) => Value::Null,
        (_, true) => json!("FAILED"),
        (_, false) => json!("OK"),
    };
    json!({"id": RECLAIM, "name": "Reclaim the blobs nothing refers to", "type": "blobstore.compact",
        "message": "the worker runs it every worker.blob_gc_secs; run here, it sweeps once now",
        "currentState": if RECLAIMING.load(Ordering::Acquire) { "RUNNING" } else { "WAITING" },
        "lastRunResult": result, "nextRun": null, "lastRun": at(last)})
}

/// A cleanup policy as a task: running while a run of it is, its last run's result.
async fn cleanup_task(services: &Services, p: &PolicyView) -> Result<Value> {
    let runs = cleanup::runs(services, &p.name).await?.items;
    let running = runs.iter().any(|r| r.state == "running");
    let last = runs.iter().filter_map(|r| r.last_started.clone()).max();
    let result = match (last.is_some(), runs.iter().any(|r| r.error.is_some())) {
        (false, _) => Value::Null,
        (true, true) => json!("FAILED"),
        (true, false) => json!("OK"),
    };
    let removed: i64 = runs.iter().map(|r| r.components).sum();
    Ok(
        json!({"id": format!("{CLEANUP}{}", p.name), "name": format!("Cleanup policy {}", p.name), "type": "repository.cleanup",
        "message": format!("{} repositories, {removed} components removed by their last runs", runs.len()),
        "currentState": if running { "RUNNING" } else { "WAITING" },
        "lastRunResult": result, "nextRun": null, "lastRun": last}),
    )
}

async fn all_tasks(services: &Services) -> Result<Vec<Value>> {
    let mut out = vec![reclaim_task()];
    for p in cleanup::list(services).await? {
        out.push(cleanup_task(services, &p).await?);
    }
    Ok(out)
}

#[derive(Deserialize)]
struct TaskQuery {
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// `GET /tasks[?type=]`: Nexus's `PageTaskXO` (one page).
async fn tasks(_admin: Admin, services: web::Data<Services>, q: web::Query<TaskQuery>) -> Result<HttpResponse> {
    let items: Vec<Value> =
        all_tasks(&services).await?.into_iter().filter(|t| q.kind.as_deref().is_none_or(|k| t["type"] == k)).collect();
    Ok(HttpResponse::Ok().json(json!({"items": items, "continuationToken": null})))
}

fn no_task(id: &str) -> NexusError {
    NexusError(ApiError::not_found(format!("Task {id} not found")))
}

async fn task(_admin: Admin, services: web::Data<Services>, id: web::Path<String>) -> Result<HttpResponse> {
    if id.as_str() == "templates" {
        return Err(NexusError(ApiError::not_found(super::refused::reason("GET", "/v1/tasks/templates"))));
    }
    let found = all_tasks(&services).await?.into_iter().find(|t| t["id"] == id.as_str());
    Ok(HttpResponse::Ok().json(found.ok_or_else(|| no_task(&id))?))
}

/// `POST /tasks/{id}/run`: 204. A cleanup policy runs on each of its repositories (by the
/// workers, as "run now"); the reclamation sweeps once, here, now.
async fn run_task(admin: Admin, services: web::Data<Services>, id: web::Path<String>) -> Result<HttpResponse> {
    if let Some(policy) = id.strip_prefix(CLEANUP) {
        cleanup::run_now(&services, admin.actor(), policy, None).await.map_err(|e| match e {
            packyard_core::admin::AdminError::NotFound(_) => no_task(&id),
            other => other.into(),
        })?;
        return Ok(HttpResponse::NoContent().finish());
    }
    if id.as_str() != RECLAIM {
        return Err(no_task(&id));
    }
    if RECLAIMING.swap(true, Ordering::AcqRel) {
        return Err(NexusError(ApiError::new(ErrorCode::Conflict, "the reclamation is running already")));
    }
    RECLAIMED_AT.store(packyard_store::db::now_ms(), Ordering::Release);
    let services = services.into_inner();
    services.security.audit(admin.username(), Some(admin.addr()), "task.run", RECLAIM, json!({})).await;
    tokio::spawn(async move {
        let outcome = packyard_core::reclaim::sweep(&services, packyard_formats::registry(), false, |_, _| {}).await;
        if let Err(e) = &outcome {
            tracing::warn!(error = %e, "the reclamation asked for through the tasks API failed");
        }
        RECLAIM_FAILED.store(outcome.is_err(), Ordering::Release);
        RECLAIMING.store(false, Ordering::Release);
    });
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /tasks/{id}/stop`: 204 when a cleanup policy's runs were told to stop (each ends after
/// its batch in progress); 409 when nothing of it runs, or for the reclamation (a sweep is not
/// stopped midway: it ends by itself).
async fn stop_task(admin: Admin, services: web::Data<Services>, id: web::Path<String>) -> Result<HttpResponse> {
    let conflict = |m: String| NexusError(ApiError::new(ErrorCode::Conflict, m));
    if let Some(policy) = id.strip_prefix(CLEANUP) {
        let stopped = cleanup::stop(&services, admin.actor(), policy).await.map_err(|e| match e {
            packyard_core::admin::AdminError::NotFound(_) => no_task(&id),
            other => other.into(),
        })?;
        if stopped == 0 {
            return Err(conflict(format!("Unable to stop task: no run of cleanup policy {policy} is in progress")));
        }
        return Ok(HttpResponse::NoContent().finish());
    }
    if id.as_str() == RECLAIM {
        return Err(conflict(
            "Unable to stop task: a reclamation sweep is not stopped midway; it ends by itself".into(),
        ));
    }
    Err(no_task(&id))
}

// --- cleanup policies ----------------------------------------------------------------------

/// Nexus's `CleanupPolicyResourceXO`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NexusPolicy {
    name: Option<String>,
    format: Option<String>,
    #[serde(default)]
    notes: Option<String>,
    #[serde(default)]
    criteria_last_blob_updated: Option<u32>,
    #[serde(default)]
    criteria_last_downloaded: Option<u32>,
    #[serde(default)]
    criteria_release_type: Option<String>,
    #[serde(default)]
    criteria_asset_regex: Option<String>,
    #[serde(default)]
    retain: Option<u32>,
}

impl NexusPolicy {
    /// Packyard's policy over `current` criteria (what Nexus's shape does not name — name and
    /// version patterns, revisions to keep — stays), its repositories kept.
    fn spec(&self, name: &str, current: Criteria, repositories: Vec<String>) -> Result<PolicySpec> {
        let format: Format = self
            .format
            .as_deref()
            .ok_or_else(|| invalid("format: required"))?
            .parse()
            .map_err(|f| invalid(format!("format {f:?}: {}", Format::listed("or"))))?;
        let prereleases_only = match self.criteria_release_type.as_deref() {
            None | Some("RELEASES_AND_PRERELEASES") => false,
            Some("PRERELEASES") => true,
            Some(other) => {
                return Err(invalid(format!(
                    "criteriaReleaseType {other:?}: Packyard's policies select pre-releases (PRERELEASES) or every version (RELEASES_AND_PRERELEASES)"
                )))
            }
        };
        if self.criteria_asset_regex.as_deref().is_some_and(|r| !r.is_empty()) {
            return Err(invalid(
                "criteriaAssetRegex: Packyard selects by component name and version (name_regex, version_regex in /api/v1/cleanup-policies), not by asset path",
            ));
        }
        Ok(PolicySpec {
            name: Some(name.to_string()),
            format,
            description: self.notes.clone().unwrap_or_default(),
            criteria: Criteria {
                published_before_days: self.criteria_last_blob_updated,
                last_downloaded_before_days: self.criteria_last_downloaded,
                prereleases_only,
                keep_latest: self.retain,
                ..current
            },
            schedule: None,
            repositories,
        })
    }
}

fn nexus_policy(p: &PolicyView) -> Value {
    let c = &p.criteria;
    json!({
        "name": p.name,
        "format": p.format,
        "notes": p.description,
        "criteriaLastBlobUpdated": c.published_before_days,
        "criteriaLastDownloaded": c.last_downloaded_before_days,
        "criteriaReleaseType": if c.prereleases_only { json!("PRERELEASES") } else { Value::Null },
        "criteriaAssetRegex": null,
        "retain": c.keep_latest,
    })
}

async fn policies(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(cleanup::list(&services).await?.iter().map(nexus_policy).collect::<Vec<_>>()))
}

async fn policy(_admin: Admin, services: web::Data<Services>, name: web::Path<String>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(nexus_policy(&cleanup::get(&services, &name).await?)))
}

fn parse(body: &[u8]) -> Result<NexusPolicy> {
    serde_json::from_slice(body).map_err(|e| invalid(format!("invalid JSON body: {e}")))
}

/// `POST /cleanup-policies`: 201.
async fn create_policy(admin: Admin, services: web::Data<Services>, body: web::Bytes) -> Result<HttpResponse> {
    let p = parse(&body)?;
    let name = p.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| invalid("name: required"))?;
    let spec = p.spec(&name, Criteria::default(), Vec::new())?;
    let view = cleanup::create(&services, packyard_formats::registry(), admin.actor(), spec).await?;
    Ok(HttpResponse::Created().json(nexus_policy(&view)))
}

/// `PUT /cleanup-policies/{name}`: 204; the repositories it cleans stay.
async fn update_policy(
    admin: Admin,
    services: web::Data<Services>,
    name: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let p = parse(&body)?;
    if p.name.as_deref().is_some_and(|n| n != name.as_str()) {
        return Err(invalid("name: a cleanup policy cannot be renamed"));
    }
    let current = cleanup::get(&services, &name).await?;
    let mut spec = p.spec(&name, current.criteria.clone(), current.repositories.clone())?;
    spec.schedule = current.schedule.clone();
    cleanup::update(&services, packyard_formats::registry(), admin.actor(), &name, spec).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn delete_policy(admin: Admin, services: web::Data<Services>, name: web::Path<String>) -> Result<HttpResponse> {
    cleanup::delete(&services, admin.actor(), &name).await?;
    Ok(HttpResponse::NoContent().finish())
}
