//! `/api/v1/roles`: roles holding privileges on repository-name patterns.

use actix_web::{web, HttpResponse};
use packyard_core::admin::roles::{self, RoleBody};
use packyard_core::services::Services;

use crate::auth::Admin;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/roles").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            crate::admin::resource::resource("/roles/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        );
}

pub(crate) async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(roles::list(&services).await?))
}

pub(crate) async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<RoleBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Created().json(roles::create(&services, admin.actor(), body.into_inner()).await?))
}

pub(crate) async fn get(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(roles::get(&services, &path).await?))
}

pub(crate) async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<RoleBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(roles::update(&services, admin.actor(), &path, body.into_inner()).await?))
}

pub(crate) async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    roles::delete(&services, admin.actor(), &path).await?;
    Ok(HttpResponse::NoContent().finish())
}
