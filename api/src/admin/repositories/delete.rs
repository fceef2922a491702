use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;

use super::{RepoPath, Result};
use crate::auth::Admin;

pub async fn delete(admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    RepositoryService::new(&services.db, packyard_formats::registry()).delete(path.name.0.as_str()).await?;
    tracing::info!(repository = %path.name.0, "repository deleted");
    services.changed(packyard_core::events::Changed::Repositories);
    services
        .security
        .audit(admin.username(), Some(admin.addr()), "repository.delete", path.name.0.as_str(), serde_json::json!({}))
        .await;
    Ok(HttpResponse::NoContent().finish())
}
