//! `/api/v1/content-selectors`: named CSEL expressions a role's privilege narrows itself to
//! (`"content_selector": "<name>"`), and `…/preview`: what one selects in a repository. Nexus's
//! `/service/rest/v1/security/content-selectors` answers the same (`crate::nexus::security`).

use actix_web::{web, HttpResponse};
use packyard_core::admin::selectors::{self, PreviewBody, SelectorBody};
use packyard_core::services::Services;

use crate::auth::Admin;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        crate::admin::resource::resource("/content-selectors").route(web::get().to(list)).route(web::post().to(create)),
    )
    .service(crate::admin::resource::resource("/content-selectors/preview").route(web::post().to(preview)))
    .service(
        crate::admin::resource::resource("/content-selectors/{name}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    );
}

pub(crate) async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(selectors::list(&services).await?))
}

pub(crate) async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<SelectorBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Created().json(selectors::create(&services, admin.actor(), body.into_inner()).await?))
}

pub(crate) async fn get(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(selectors::get(&services, &path).await?))
}

pub(crate) async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<SelectorBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(selectors::update(&services, admin.actor(), &path, body.into_inner()).await?))
}

pub(crate) async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    selectors::delete(&services, admin.actor(), &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn preview(
    _admin: Admin,
    services: web::Data<Services>,
    body: web::Json<PreviewBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(selectors::preview(&services, body.into_inner()).await?))
}
