use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;

use super::{RepoPath, RepositoryView, Result};
use crate::auth::Admin;

pub async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let repo = RepositoryService::new(&services.db).get(path.name.0.as_str()).await?;
    Ok(HttpResponse::Ok().json(RepositoryView::from(repo)))
}
