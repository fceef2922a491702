//! Nexus's components upload, `POST /service/rest/v1/components?repository=<name>`: a multipart
//! form of the repository format's fields (Nexus's `apt.asset`; `apk.asset`, `go.asset` named the
//! same way for the formats Nexus lacks), stored by the route of the format that takes the same
//! form (`crate::route::Routes::form_upload`), with the same checks, limits and audit entry.
//! Answered as Nexus answers: 204 once stored (and, for Go, listed).

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::services::Services;
use serde::Deserialize;

use crate::error::{ApiError, ErrorCode, FormatError};
use crate::route::{Access, Cx, Routes};

#[derive(Deserialize)]
struct Params {
    repository: Option<String>,
}

pub(crate) async fn upload(
    req: HttpRequest,
    services: web::Data<Services>,
    body: web::Payload,
) -> Result<HttpResponse, FormatError> {
    let caller = crate::auth::resolve(&req).await?;
    let params: Params = crate::formats::query(&req)?;
    let Some(name) = params.repository.filter(|n| !n.is_empty()) else {
        return Err(ApiError::new(ErrorCode::Unprocessable, "Parameter 'repository' is required").into());
    };
    let repo = services
        .security
        .repository(&name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("repository {name} not found")))?;
    crate::repository::authorize(&services, &caller, &repo, Access::WRITE, None)?;
    let res = crate::formats::with_routes!(repo.format, R => {
        let route = R::form_upload().map_err(|why| {
            ApiError::bad_request(format!("repository {} ({} {}) takes no components upload: {why}", repo.name, repo.format, repo.repo_type))
        })?;
        let hot = crate::hot::Slot::default();
        Box::pin(R::serve(Cx { req: &req, services: &services, repo: repo.clone(), caller, body, hot: &hot }, route)).await?
    });
    if res.status().is_success() {
        return Ok(HttpResponse::NoContent().finish());
    }
    Ok(res)
}
