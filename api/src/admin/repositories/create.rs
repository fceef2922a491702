use actix_web::http::header;
use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_model::repos::RepositorySpec;

use super::{RepositoryView, Result};
use crate::auth::Admin;

pub async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<RepositorySpec>,
) -> Result<HttpResponse> {
    let mut spec = body.into_inner();
    let name = spec.name.clone().unwrap_or_default();
    super::seal_proxy_password(&services, &name, &mut spec, None)?;
    let repo = RepositoryService::new(&services.db, packyard_formats::registry())
        .with_test_formats(services.config.debug.test_format)
        .create(spec)
        .await?;
    tracing::info!(repository = %repo.name, format = %repo.format, kind = %repo.repo_type, "repository created");
    services.changed(packyard_core::events::Changed::Repositories);
    // Formats that publish snapshots publish one now (an empty repository gets signed indexes too).
    if packyard_formats::registry().get(repo.format).settings_changed(&services, None, &repo).await? > 0 {
        services.wake();
    }
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "repository.create",
            repo.name.as_str(),
            serde_json::json!({"format": repo.format.as_str(), "type": repo.repo_type.as_str()}),
        )
        .await;
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/api/v1/repositories/{}", repo.name)))
        .json(RepositoryView::from(repo)))
}
