use actix_web::{web, HttpResponse};
use packyard_shared::repos::{RepositoryService, RepositorySpec};
use packyard_shared::services::Services;

use super::{RepoPath, RepositoryView, Result};
use crate::auth::Admin;

pub async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<RepositorySpec>,
) -> Result<HttpResponse> {
    let mut spec = body.into_inner();
    let service = RepositoryService::new(&services.db);
    let kept =
        service.get(path.name.0.as_str()).await.ok().and_then(|r| r.settings.proxy).and_then(|p| p.password_sealed);
    super::seal_proxy_password(&services, path.name.0.as_str(), &mut spec, kept)?;
    let repo = service.update(path.name.0.as_str(), spec).await?;
    tracing::info!(repository = %repo.name, version = repo.version, "repository updated");
    services.changed(packyard_shared::events::Changed::Repositories);
    // Formats that publish snapshots publish one now (an empty repository gets signed indexes too).
    if packyard_shared::formats::apt::request_publication(&services.db, &repo).await? > 0 {
        services.wake();
    }
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "repository.update",
            repo.name.as_str(),
            serde_json::json!({"version": repo.version}),
        )
        .await;
    Ok(HttpResponse::Ok().json(RepositoryView::from(repo)))
}
