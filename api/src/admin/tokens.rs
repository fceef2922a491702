//! `/api/v1/tokens`: the caller's API tokens. The secret is shown once, at creation; only its
//! hash is stored.

use actix_web::{web, HttpResponse};
use packyard_core::admin::tokens::{self, NewToken};
use packyard_core::services::Services;
use serde::Deserialize;

use crate::auth::Authenticated;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/tokens").route(web::get().to(list)).route(web::post().to(create)))
        .service(crate::admin::resource::resource("/tokens/{id}").route(web::delete().to(revoke)));
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    all: bool,
}

pub(crate) async fn create(
    user: Authenticated,
    services: web::Data<Services>,
    body: web::Json<NewToken>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Created().json(tokens::create(&services, user.owner(), body.into_inner()).await?))
}

pub(crate) async fn list(
    user: Authenticated,
    services: web::Data<Services>,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(tokens::list(&services, user.owner(), q.all).await?))
}

pub(crate) async fn revoke(
    user: Authenticated,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    tokens::revoke(&services, user.owner(), &path).await?;
    Ok(HttpResponse::NoContent().finish())
}
