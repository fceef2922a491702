use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_model::time::rfc3339_ms;
use serde::Serialize;

use super::{RepoPath, Result};
use crate::auth::Admin;

#[derive(Serialize)]
struct UnitStatus {
    kind: String,
    unit: String,
    desired_revision: i64,
    published_revision: i64,
    pending: bool,
    last_error: Option<String>,
    attempts: i64,
    next_attempt_at: Option<String>,
    last_published_at: Option<String>,
    leased_by: Option<String>,
}

#[derive(Serialize)]
struct Status {
    repository: String,
    units: Vec<UnitStatus>,
}

/// Per publication unit: desired and published revision, last error, last publication.
pub async fn status(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let repo = RepositoryService::new(&services.db, packyard_formats::registry()).get(path.name.0.as_str()).await?;
    let now = packyard_store::db::now_ms();
    let units = services
        .db
        .units_of(repo.id)
        .await?
        .into_iter()
        .map(|u| UnitStatus {
            pending: u.desired_revision > u.published_revision,
            kind: u.kind,
            unit: u.unit_key,
            desired_revision: u.desired_revision,
            published_revision: u.published_revision,
            last_error: u.last_error,
            attempts: u.attempts,
            next_attempt_at: (u.next_attempt_at > now).then(|| rfc3339_ms(u.next_attempt_at)),
            last_published_at: u.last_published_at.map(rfc3339_ms),
            leased_by: u.lease_expires_at.filter(|e| *e > now).and(u.lease_owner),
        })
        .collect();
    Ok(HttpResponse::Ok().json(Status { repository: repo.name.to_string(), units }))
}
