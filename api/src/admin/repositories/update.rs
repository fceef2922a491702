use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_model::repos::{patched, Repository, RepositorySpec};

use super::{RepoPath, RepositoryView, Result};
use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

/// `PUT`: the whole definition (format settings the repository has may not be left out).
pub async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<RepositorySpec>,
) -> Result<HttpResponse> {
    let name = path.name.0.as_str();
    let mut spec = body.into_inner();
    let service = RepositoryService::new(&services.db, packyard_formats::registry());
    let before = service.get(name).await?;
    let kept = before.settings.proxy.clone().and_then(|p| p.password_sealed);
    super::seal_proxy_password(&services, name, &mut spec, kept)?;
    let repo = service.update(name, spec).await?;
    updated(&admin, &services, &before, repo).await
}

/// `PATCH`: a JSON merge patch (`application/merge-patch+json`, or `application/json`) over
/// the definition as GET shows it; what the patch does not name stays as it is.
pub async fn patch(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let content_type = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence != "application/merge-patch+json" && essence != "application/json" {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send a JSON merge patch with Content-Type: application/merge-patch+json",
        ));
    }
    let patch: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    apply_patch(admin, &services, path.name.0.as_str(), &patch).await
}

/// Applies a merge patch to the definition as GET shows it (the web UI's edit form too).
pub(crate) async fn apply_patch(
    admin: Admin,
    services: &Services,
    name: &str,
    patch: &serde_json::Value,
) -> Result<HttpResponse> {
    let service = RepositoryService::new(&services.db, packyard_formats::registry());
    let current = service.get(name).await?;
    let kept = current.settings.proxy.as_ref().and_then(|p| p.password_sealed.clone());
    let view = serde_json::to_value(RepositoryView::from(current.clone())).map_err(ApiError::internal)?;
    let mut spec = patched(view, patch)?;
    super::seal_proxy_password(services, name, &mut spec, kept)?;
    let repo = service.apply(name, spec).await?;
    updated(&admin, services, &current, repo).await
}

async fn updated(admin: &Admin, services: &Services, before: &Repository, repo: Repository) -> Result<HttpResponse> {
    tracing::info!(repository = %repo.name, version = repo.version, "repository updated");
    services.changed(packyard_core::events::Changed::Repositories);
    let requested =
        packyard_formats::registry().get(repo.format).settings_changed(services, Some(before), &repo).await?;
    // Formats that publish snapshots publish one now (an empty repository gets signed indexes too).
    if requested > 0 {
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
