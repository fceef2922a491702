use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;

use super::{RepoPath, RepositoryView, Result, Usage};
use crate::auth::Admin;

pub async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let repo = RepositoryService::new(&services.db, packyard_formats::registry()).get(path.name.0.as_str()).await?;
    let usage = services.db.usage(repo.id).await?;
    let mut view = RepositoryView::from(repo);
    view.usage = usage.map(|(components, bytes, at)| Usage {
        components,
        bytes,
        counted_at: packyard_model::time::rfc3339_ms(at),
    });
    Ok(HttpResponse::Ok().json(view))
}
