//! The internal test format over HTTP (only with `debug.test_format = true`, on any
//! repository): lets the pipeline be exercised across processes.
//!
//! - `PUT /repository/<name>/_test/<unit>/<entry>` (body: the entry) → 201 `{"revision":n}`;
//!   `?wait=true` returns once the snapshot containing it is published.
//! - `GET /repository/<name>/_test/<unit>/<file>` → the published file (`index.txt`, `count.txt`).

use actix_web::http::Method;
use actix_web::HttpResponse;
use futures_util::StreamExt;
use packyard_core::publication::testformat::KIND;

use crate::error::{ApiError, FormatError};
use crate::route::{Access, Cx, Routes, Tail};

pub struct TestRoutes;

/// The largest entry (as actix's default payload limit had it).
const MAX_ENTRY: usize = 256 << 10;

pub enum Route {
    Put { unit: String, entry: String },
    Get { unit: String, file: String },
}

fn segment(what: &str, v: &str) -> Result<String, FormatError> {
    let ok = !v.is_empty()
        && v.len() <= 200
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && v != "."
        && v != "..";
    if !ok {
        return Err(ApiError::bad_request(format!("invalid {what} {v:?}")).into());
    }
    Ok(v.to_string())
}

impl Routes for TestRoutes {
    type Route = Route;

    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Route, Access), FormatError>> {
        let rest = tail.matched.strip_prefix("_test/")?;
        let (unit, item) = rest.split_once('/')?;
        let parsed = || Ok::<_, FormatError>((segment("unit", unit)?, segment("item", item)?));
        Some(match *method {
            Method::PUT => parsed().map(|(unit, entry)| (Route::Put { unit, entry }, Access::WRITE)),
            Method::GET | Method::HEAD => parsed().map(|(unit, file)| (Route::Get { unit, file }, Access::READ)),
            _ => return None,
        })
    }

    async fn serve(mut cx: Cx<'_>, route: Route) -> Result<HttpResponse, FormatError> {
        let services = cx.services;
        match route {
            Route::Put { unit, entry } => {
                let q: super::WaitQuery = super::query(cx.req)?;
                let mut bytes = Vec::new();
                while let Some(chunk) = cx.body.next().await {
                    bytes.extend_from_slice(&chunk.map_err(|e| ApiError::bad_request(e.to_string()))?);
                    if bytes.len() > MAX_ENTRY {
                        return Err(ApiError::new(
                            crate::error::ErrorCode::PayloadTooLarge,
                            "an entry is at most 256 KiB",
                        )
                        .into());
                    }
                }
                let body =
                    std::str::from_utf8(&bytes).map_err(|_| ApiError::bad_request("the entry must be UTF-8 text"))?;
                let (unit_id, revision) = services.db.put_test_entry(cx.repo.id, &unit, &entry, body).await?;
                services.wake();
                if q.wait {
                    super::wait_published(services, &[(unit_id, revision)]).await?;
                }
                Ok(HttpResponse::Created().json(serde_json::json!({"revision": revision})))
            }
            Route::Get { unit, file } => {
                let found = super::published_file(services, &cx.repo, KIND, &unit, &file).await?;
                match found {
                    Some(f) => Ok(super::serve_published(cx.req, f)),
                    None => Err(ApiError::not_found(format!(
                        "not found: _test/{unit}/{file} in repository {}",
                        cx.repo.name
                    ))
                    .into()),
                }
            }
        }
    }
}
