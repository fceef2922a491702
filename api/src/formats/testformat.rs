//! The internal test format over HTTP (only with `debug.test_format = true`): lets the pipeline
//! be exercised across processes before the real formats exist.
//!
//! - `PUT /repository/<name>/_test/<unit>/<entry>` (body: the entry) → 201 `{"revision":n}`;
//!   `?wait=true` returns once the snapshot containing it is published.
//! - `GET /repository/<name>/_test/<unit>/<file>` → the published file (`index.txt`, `count.txt`).

use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::publication::testformat::KIND;
use packyard_core::publication::wait_until_published;
use packyard_core::services::Services;
use serde::Deserialize;

use crate::auth::{Read, RepoAccess, Write};
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/_test/{unit}/{item}")
            .route(web::put().to(put))
            .route(web::get().to(get))
            .route(web::head().to(get)),
    );
}

#[derive(Deserialize)]
pub struct WaitQuery {
    #[serde(default)]
    wait: bool,
}

fn segment(req: &HttpRequest, name: &str) -> Result<String, ApiError> {
    let v = req.match_info().get(name).unwrap_or_default();
    if v.is_empty()
        || v.len() > 200
        || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        || v == "."
        || v == ".."
    {
        return Err(ApiError::bad_request(format!("invalid {name} {v:?}")).plain());
    }
    Ok(v.to_string())
}

async fn put(
    access: RepoAccess<Write>,
    req: HttpRequest,
    services: web::Data<Services>,
    q: web::Query<WaitQuery>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (unit, entry) = (segment(&req, "unit")?, segment(&req, "item")?);
    let body = std::str::from_utf8(&body).map_err(|_| ApiError::bad_request("the entry must be UTF-8 text").plain())?;
    let (unit_id, revision) =
        services.db.put_test_entry(access.repo.id, &unit, &entry, body).await.map_err(|e| ApiError::from(e).plain())?;
    services.wake();
    if q.wait {
        let published = wait_until_published(&services.db, unit_id, revision, Duration::from_secs(30))
            .await
            .map_err(|e| ApiError::from(e).plain())?;
        if !published {
            return Err(
                ApiError::new(ErrorCode::ServiceUnavailable, "stored, but not yet published after 30 s").plain()
            );
        }
        services.published.invalidate();
    }
    Ok(HttpResponse::Created().json(serde_json::json!({"revision": revision})))
}

async fn get(
    access: RepoAccess<Read>,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let (unit, file) = (segment(&req, "unit")?, segment(&req, "item")?);
    let found = services
        .published
        .file(&services.db, services.blobs.as_ref(), access.repo.id, KIND, &unit, &file)
        .await
        .map_err(|e| ApiError::internal(e).plain())?;
    let Some(f) = found else {
        return Err(
            ApiError::not_found(format!("not found: _test/{unit}/{file} in repository {}", access.repo.name)).plain()
        );
    };
    Ok(super::serve_published(&req, f))
}
