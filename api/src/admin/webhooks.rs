//! `/api/v1/webhooks`: subscriptions to events (global or per repository) and each one's
//! delivery log (admin), as core's typed service has them (`packyard_core::admin::webhooks`).

use actix_web::{web, HttpResponse};
use packyard_core::admin::webhooks::{self as service, WebhookBody};
use packyard_core::services::Services;
use serde::Deserialize;

use crate::auth::Admin;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/webhooks").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            crate::admin::resource::resource("/webhooks/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        )
        .service(crate::admin::resource::resource("/webhooks/{name}/deliveries").route(web::get().to(deliveries)))
        .service(crate::admin::resource::resource("/webhooks/{name}/test").route(web::post().to(send_test)));
}

/// 202: a `webhook.test` event is queued for this subscription alone; its delivery is in the log.
async fn send_test(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let delivery = service::send_test(&services, admin.actor(), &path).await?;
    Ok(HttpResponse::Accepted().json(serde_json::json!({"delivery": delivery, "event": service::TEST_EVENT})))
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
    body: web::Json<WebhookBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Created().json(service::create(&services, admin.actor(), body.into_inner()).await?))
}

async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<WebhookBody>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(service::update(&services, admin.actor(), &path, body.into_inner()).await?))
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
pub struct Page {
    #[serde(default)]
    before: Option<i64>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn deliveries(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    q: web::Query<Page>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(service::deliveries(&services, &path, q.before, q.limit).await?))
}
