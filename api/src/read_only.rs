//! The instance's read-only mode (Nexus's freeze) on the HTTP side: Nexus's
//! `/service/rest/v1/read-only` routes, and the refusal of every write while frozen — a 503
//! naming who froze it, when and why — with reads going on. Writes under `/repository/` are
//! refused by the dispatcher once their route is known (a format's write routes declare it); the
//! others (admin API, Nexus API, UI forms) here, ahead of the router, by method: every request
//! that is not GET, HEAD or OPTIONS, except signing in and out, previews and the release itself.

use actix_web::dev::ServiceRequest;
use actix_web::http::Method;
use actix_web::{web, HttpResponse, ResponseError as _};
use packyard_core::services::Services;
use serde::Deserialize;

use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

/// Requests that change nothing stored although not GET: allowed while frozen.
fn allowed_while_frozen(method: &Method, path: &str) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        || path.starts_with("/service/rest/v1/read-only")
        || matches!(path, "/signin" | "/signout")
        || (path.starts_with("/api/v1/cleanup-policies/") && path.ends_with("/preview"))
}

/// `Err(503)` while frozen.
pub fn check(services: &Services) -> Result<(), ApiError> {
    match services.read_only.refusal() {
        None => Ok(()),
        Some(why) => Err(ApiError::new(ErrorCode::ServiceUnavailable, why)),
    }
}

/// The answer to a request outside `/repository/` that would write while frozen. (Answered
/// before credentials are checked: a request that carries none learns only that writes are
/// refused, not who froze the instance or why.)
pub fn refusal(req: &ServiceRequest) -> Option<HttpResponse> {
    if allowed_while_frozen(req.method(), req.path()) {
        return None;
    }
    let services = req.app_data::<web::Data<Services>>()?;
    let err = check(services).err()?;
    let credentials = req.headers().contains_key(actix_web::http::header::AUTHORIZATION)
        || req.cookie(crate::ui::SESSION_COOKIE).is_some();
    if credentials {
        return Some(err.error_response());
    }
    let generic = "Packyard is read-only: writes are refused until an administrator releases it";
    Some(ApiError::new(ErrorCode::ServiceUnavailable, generic).error_response())
}

pub fn configure(scope: actix_web::Scope) -> actix_web::Scope {
    use crate::nexus::refused::resource;
    scope
        .service(resource("/read-only").route(web::get().to(state)))
        .service(resource("/read-only/freeze").route(web::post().to(freeze)))
        .service(resource("/read-only/release").route(web::post().to(release)))
        .service(resource("/read-only/force-release").route(web::post().to(release)))
}

/// Nexus's `ReadOnlyStateXO`.
async fn state(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    let s = services.db.read_only().await?;
    let summary = if s.frozen {
        let why = if s.reason.is_empty() { String::new() } else { format!(": {}", s.reason) };
        format!("Activated by {} at {}{why}", s.frozen_by, packyard_model::time::rfc3339_ms(s.frozen_at))
    } else {
        String::new()
    };
    Ok(HttpResponse::Ok()
        .json(serde_json::json!({"systemInitiated": false, "summaryReason": summary, "frozen": s.frozen})))
}

#[derive(Deserialize)]
struct FreezeParams {
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /read-only/freeze[?reason=…]`: 204, or 404 when already frozen (Nexus's "no change").
async fn freeze(
    admin: Admin,
    services: web::Data<Services>,
    params: web::Query<FreezeParams>,
) -> Result<HttpResponse, ApiError> {
    let reason = params.reason.clone().unwrap_or_default();
    if reason.len() > 1000 {
        return Err(ApiError::bad_request("reason: at most 1000 bytes"));
    }
    change(&admin, &services, Some(reason.trim())).await
}

/// `POST /read-only/release` (and `force-release`: Packyard never freezes itself, so both
/// release what an administrator froze): 204, or 404 when not frozen.
async fn release(admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    change(&admin, &services, None).await
}

async fn change(admin: &Admin, services: &Services, freeze: Option<&str>) -> Result<HttpResponse, ApiError> {
    if !services.db.set_read_only(freeze, admin.username()).await? {
        services.read_only.apply(services.db.read_only().await?);
        return Err(ApiError::not_found(if freeze.is_some() {
            "No change to read-only state: already frozen"
        } else {
            "No change to read-only state: not frozen"
        }));
    }
    services.read_only.apply(services.db.read_only().await?);
    services.changed(packyard_core::events::Changed::Security);
    let (action, detail) = match freeze {
        Some(reason) => ("read_only.freeze", serde_json::json!({"reason": reason})),
        None => ("read_only.release", serde_json::json!({})),
    };
    services.security.audit(admin.username(), Some(admin.addr()), action, "instance", detail).await;
    Ok(HttpResponse::NoContent().finish())
}
