use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;

use super::{RepoPath, Result};
use crate::auth::Admin;

/// Asks the worker to rebuild every publication unit of the repository.
pub async fn rebuild(admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let repo = RepositoryService::new(&services.db, packyard_formats::registry()).get(path.name.0.as_str()).await?;
    let units = services.db.request_rebuild(repo.id).await?;
    services.wake();
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "repository.rebuild",
            repo.name.as_str(),
            serde_json::json!({"units": units}),
        )
        .await;
    Ok(HttpResponse::Accepted().json(serde_json::json!({"repository": repo.name.as_str(), "units": units})))
}
