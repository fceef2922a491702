//! `/api/v1/cleanup-policies`: cleanup policies (admin), as core's typed service has them
//! (`packyard_core::admin::cleanup`).

use actix_web::{web, HttpResponse};
use packyard_core::admin::cleanup::{self as service, PreviewRequest};
use packyard_core::services::Services;
use packyard_model::cleanup::PolicySpec;
use serde::Deserialize;

use crate::auth::Admin;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::admin::resource::resource;
    cfg.service(resource("/cleanup-policies").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            resource("/cleanup-policies/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        )
        .service(resource("/cleanup-policies/{name}/preview").route(web::post().to(preview)))
        .service(resource("/cleanup-policies/{name}/run").route(web::post().to(run_now)))
        .service(resource("/cleanup-policies/{name}/runs").route(web::get().to(runs)));
}

async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(service::list(&services).await?))
}

async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(service::get(&services, &path).await?))
}

async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<PolicySpec>,
) -> Result<HttpResponse, ApiError> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Created().json(service::create(&services, formats, admin.actor(), body.into_inner()).await?))
}

async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<PolicySpec>,
) -> Result<HttpResponse, ApiError> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(service::update(&services, formats, admin.actor(), &path, body.into_inner()).await?))
}

async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    service::delete(&services, admin.actor(), &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize)]
struct PreviewQuery {
    repository: Option<String>,
    #[serde(rename = "continuationToken")]
    continuation_token: Option<String>,
    /// `false`: no totals, and a page's work bounded (the web UI's preview).
    count: Option<bool>,
}

/// `POST /cleanup-policies/{name}/preview?repository=`: what a run of the policy would remove
/// from the repository now — every component's count and bytes, and a page of them (name order;
/// `continuationToken` for the next).
async fn preview(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    q: web::Query<PreviewQuery>,
) -> Result<HttpResponse, ApiError> {
    let request = PreviewRequest {
        repository: q.repository.as_deref(),
        continuation_token: q.continuation_token.as_deref(),
        count: q.count != Some(false),
    };
    Ok(HttpResponse::Ok().json(service::preview(&services, packyard_formats::registry(), &path, request).await?))
}

#[derive(Deserialize)]
struct RunQuery {
    repository: Option<String>,
}

/// `POST /cleanup-policies/{name}/run[?repository=]`: asks the worker to run the policy now on
/// the repository (or on each of its repositories); 202 with the runs' state.
async fn run_now(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    q: web::Query<RunQuery>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Accepted().json(service::run_now(&services, admin.actor(), &path, q.repository.as_deref()).await?))
}

/// `GET /cleanup-policies/{name}/runs`: the last (or current) run on each of the policy's
/// repositories.
async fn runs(_admin: Admin, services: web::Data<Services>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(service::runs(&services, &path).await?))
}
