//! Conan 2 (REST v2) below `/repository/<name>/`, first part: `v1/ping` (the capabilities, to
//! anyone), `v2/users/authenticate` (Basic credentials → a bearer token that expires after
//! `conan.token_ttl_secs`, scoped to this repository, only its hash stored: an API token of the
//! security model) and `v2/users/check_credentials` (401 when the token is missing, expired or
//! revoked, so that the client logs in again).

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_shared::repos::Format;
use packyard_shared::security::{tokens, Action, Principal};
use packyard_shared::services::Services;

use crate::auth::{authorize_repo, Authenticated};
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::repository::fallback;
    cfg.service(
        web::resource("/v1/ping")
            .route(web::get().to(ping))
            .route(web::head().to(ping))
            .default_service(web::to(fallback)),
    )
    .service(
        web::resource("/v2/users/authenticate").route(web::get().to(authenticate)).default_service(web::to(fallback)),
    )
    .service(
        web::resource("/v2/users/check_credentials")
            .route(web::get().to(check_credentials))
            .default_service(web::to(fallback)),
    );
}

/// What the client checks first: the header says this remote speaks revisions.
pub const CAPABILITIES: (&str, &str) = ("X-Conan-Server-Capabilities", "revisions");

/// The repository of the path, if it is a Conan one (404 otherwise, as for any unknown path).
async fn conan_repo(
    services: &Services,
    req: &HttpRequest,
) -> Result<std::sync::Arc<packyard_shared::repos::Repository>, ApiError> {
    let name = req.match_info().get("repo").unwrap_or_default();
    let path = req.match_info().unprocessed().trim_start_matches('/');
    match services.security.repository(name).await.map_err(|e| ApiError::from(e).plain())? {
        Some(r) if r.format == Format::Conan => Ok(r),
        Some(r) => Err(ApiError::not_found(format!("not found: /{path} in repository {}", r.name)).plain()),
        None => Err(ApiError::not_found(format!("repository {name} not found")).plain()),
    }
}

/// `GET v1/ping`: answered to anonymous callers too (the client pings before it logs in).
async fn ping(req: HttpRequest, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    conan_repo(&services, &req).await?;
    Ok(HttpResponse::Ok().insert_header(CAPABILITIES).finish())
}

/// `GET v2/users/authenticate` with Basic credentials: a bearer token for this repository.
async fn authenticate(
    user: Authenticated,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let repo = conan_repo(&services, &req).await?;
    if let Principal::User { token: Some(_), .. } = user.0.principal.as_ref() {
        return Err(ApiError::unauthorized("log in with your user name and password, not a token").plain());
    }
    // The user must be able to read the repository at all.
    authorize_repo(&req, Action::Read).await?;
    let ttl_ms = i64::try_from(services.config.conan.token_ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let new = tokens::generate();
    services
        .db
        .insert_token(
            &new.id,
            user.user_id(),
            &format!("conan login to {}", repo.name),
            &new.secret_hash,
            Some(repo.name.as_str()),
            None,
            Some(packyard_shared::db::now_ms().saturating_add(ttl_ms)),
        )
        .await
        .map_err(|e| ApiError::from(e).plain())?;
    services
        .security
        .audit(
            user.username(),
            Some(user.0.addr),
            "conan.login",
            repo.name.as_str(),
            serde_json::json!({"token": new.id}),
        )
        .await;
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(new.token))
}

/// `GET v2/users/check_credentials`: 200 with the user name, or 401 (missing, expired or
/// revoked token: the client then logs in again).
async fn check_credentials(
    user: Authenticated,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    conan_repo(&services, &req).await?;
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(user.username().to_string()))
}
