use actix_web::{web, HttpResponse};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;

use super::{RepositoryView, Result};
use crate::auth::Admin;

pub async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    let repos = RepositoryService::new(&services.db, packyard_formats::registry()).list().await?;
    let views: Vec<RepositoryView> = repos.into_iter().map(RepositoryView::from).collect();
    Ok(HttpResponse::Ok().json(views))
}
