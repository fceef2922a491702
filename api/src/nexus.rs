//! Nexus's REST API under `/service/rest/v1` (DESIGN §5a), with Nexus's paths, parameters and
//! JSON field names, so that scripts written for Nexus work unchanged: the repositories a caller
//! may read, the status checks load balancers and scripts poll, and (in `catalogue`) search and
//! browse over the catalogue.

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::services::Services;
use packyard_model::repos::{RepoType, Repository};

use crate::auth::Caller;
use crate::error::ApiError;

mod browse;
pub(crate) mod catalogue;

/// The catalogue row a component id (as Nexus's search and components API give them) names.
pub(crate) fn component_row(id: &str) -> Option<i64> {
    catalogue::decode_id(catalogue::Kind::Component, id).map(|(_, row)| row)
}
pub mod import;
pub(crate) mod refused;
mod repositories;
mod security;
mod system;
mod upload;

pub fn configure(cfg: &mut web::ServiceConfig) {
    browse::configure(cfg);
    cfg.service(
        system::configure(security::configure(repositories::configure(crate::read_only::configure(
            catalogue::configure(web::scope("/service/rest/v1"), web::post().to(upload::upload)),
        ))))
        .service(refused::resource("/repositories").route(web::get().to(repositories)))
        .service(refused::resource("/status").route(web::get().to(status)))
        .service(refused::resource("/status/writable").route(web::get().to(writable)))
        .service(refused::resource("/status/check").route(web::get().to(check)))
        .default_service(web::to(refused::refused)),
    )
    .service(web::scope("/service/rest/beta").default_service(web::to(refused::refused)));
}

/// `GET /status/check` (admins: the messages name hosts): Nexus's health checks, each
/// `{healthy, message, …}`: the database and the blob store (what `/status/writable` asks).
async fn check(_admin: crate::auth::Admin, services: web::Data<Services>) -> HttpResponse {
    let database = match services.db.ping().await {
        Ok(()) => match services.db.migrations_applied().await {
            Ok(true) => Ok(()),
            Ok(false) => Err("migrations not applied".to_string()),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    let blobs = services.blobs.check().await.map_err(|e| e.to_string());
    let item = |r: &Result<(), String>, ok: &str| {
        serde_json::json!({"healthy": r.is_ok(), "message": r.as_ref().err().cloned().unwrap_or_else(|| ok.to_string()),
            "error": null, "details": null, "time": packyard_store::db::now_ms(), "duration": 0, "timestamp": null})
    };
    // Proxies taken offline (`proxy.offline`): healthy — it is a choice —, named.
    let offline: Vec<String> = services
        .db
        .list_repositories()
        .await
        .map(|all| {
            all.into_iter()
                .filter(|r| r.settings.proxy.as_ref().is_some_and(|p| p.offline))
                .map(|r| r.name.to_string())
                .collect()
        })
        .unwrap_or_default();
    let proxies = match offline.as_slice() {
        [] => "No proxy is offline".to_string(),
        names => format!(
            "Offline (proxy.offline: no upstream traffic; cached files served, the rest 404): {}",
            names.join(", ")
        ),
    };
    HttpResponse::Ok().json(serde_json::json!({
        "Database": item(&database, "The database answers, its migrations applied"),
        "Blob Stores": item(&blobs, "The blob store default is writable"),
        "Proxy Repositories": item(&Ok(()), &proxies),
    }))
}

/// `GET /repositories`: every repository the caller may read, in name order, as Nexus lists them
/// (`name`, `format`, `type`, `url`, `attributes`; a proxy's attributes hold its `remoteUrl`).
async fn repositories(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
) -> Result<HttpResponse, ApiError> {
    let base = crate::frontage::Base::of(&req).url("");
    let mut all = services.db.list_repositories().await.map_err(ApiError::internal)?;
    all.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    let listed: Vec<serde_json::Value> =
        all.iter().filter(|r| catalogue::readable(&caller, &services, r)).map(|r| repository(&base, r)).collect();
    Ok(HttpResponse::Ok().json(listed))
}

pub(crate) fn repository(base: &str, r: &Repository) -> serde_json::Value {
    let attributes = match (&r.repo_type, &r.settings.proxy) {
        (RepoType::Proxy, Some(p)) => serde_json::json!({"proxy": {"remoteUrl": p.remote_url}}),
        _ => serde_json::json!({}),
    };
    serde_json::json!({
        "name": r.name.as_str(),
        "format": r.format.as_str(),
        "type": r.repo_type.to_string(),
        "url": format!("{base}/repository/{}", r.name),
        "attributes": attributes,
    })
}

/// `GET /status`: 200 while the server can answer reads (its database answers), else 503.
async fn status(services: web::Data<Services>) -> HttpResponse {
    match services.db.ping().await {
        Ok(()) => HttpResponse::Ok().finish(),
        Err(e) => HttpResponse::ServiceUnavailable().content_type("text/plain").body(format!("database: {e}\n")),
    }
}

/// `GET /status/writable`: 200 while the server can answer reads and writes (database answers
/// with its migrations applied, blob store writable), else 503 with the reasons.
async fn writable(services: web::Data<Services>) -> HttpResponse {
    match services.readiness().await {
        Ok(()) => HttpResponse::Ok().finish(),
        Err(problems) => {
            HttpResponse::ServiceUnavailable().content_type("text/plain").body(format!("{}\n", problems.join("\n")))
        }
    }
}
