//! The test-only sample format's routes (`packyard_formats::sample`): `index.txt`,
//! `<name>/<version>` (GET/HEAD, PUT to upload — `?wait=true` answers once it is published —
//! and DELETE); and the publication pipeline's test units:
//! - `PUT _test/<unit>/<entry>` (body: the entry) → 201 `{"revision":n}`; `?wait=true` returns
//!   once the snapshot containing it is published;
//! - `GET _test/<unit>/<file>` → the published file (`index.txt`, `count.txt`).

use actix_web::http::Method;
use actix_web::HttpResponse;
use futures_util::StreamExt;
use packyard_core::hosted;
use packyard_formats::sample::hosted::SampleHosted;
use packyard_formats::sample::{catalogue::CONTENT_TYPE, entries, proxy_request, Request, INDEX, KIND, UNIT};
use packyard_model::repos::{RepoType, Repository};

use crate::error::{ApiError, ErrorCode, FormatError};
use crate::route::{Access, Cx, Routes, Tail};

pub struct Sample;

/// The largest test entry (as actix's default payload limit had it).
const MAX_ENTRY: usize = 256 << 10;

pub enum Route {
    PutEntry { unit: String, entry: String },
    GetEntry { unit: String, file: String },
    Read(Request),
    Put { name: String, version: String },
    Delete { name: String, version: String },
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

/// A test unit's route under `_test/`.
fn entry_route(method: &Method, rest: &str) -> Option<Result<(Route, Access), FormatError>> {
    let (unit, item) = rest.split_once('/')?;
    let parsed = || Ok::<_, FormatError>((segment("unit", unit)?, segment("item", item)?));
    Some(match *method {
        Method::PUT => parsed().map(|(unit, entry)| (Route::PutEntry { unit, entry }, Access::WRITE)),
        Method::GET | Method::HEAD => parsed().map(|(unit, file)| (Route::GetEntry { unit, file }, Access::READ)),
        _ => return None,
    })
}

impl Routes for Sample {
    type Route = Route;

    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Route, Access), FormatError>> {
        if let Some(rest) = tail.matched.strip_prefix("_test/") {
            return entry_route(method, rest);
        }
        let parsed = Request::parse(tail.matched);
        Some(match (method, parsed) {
            (&Method::GET | &Method::HEAD, Ok(r)) => Ok((Route::Read(r), Access::READ)),
            (&Method::GET | &Method::HEAD, Err(e)) => Err(ApiError::not_found(format!("not found: {e}")).into()),
            (&Method::PUT, Ok(Request::File { name, version })) => Ok((Route::Put { name, version }, Access::WRITE)),
            (&Method::DELETE, Ok(Request::File { name, version })) => {
                Ok((Route::Delete { name, version }, Access::DELETE))
            }
            (&Method::PUT | &Method::DELETE, Ok(Request::Index)) => Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{INDEX} is published from the repository's files: {method} <name>/<version> instead"),
            )
            .into()),
            (&Method::PUT | &Method::DELETE, Err(e)) => Err(ApiError::bad_request(e).into()),
            _ => return None,
        })
    }

    fn form_upload() -> Result<Route, String> {
        Err("the test-only sample format takes no form upload".into())
    }

    async fn serve(cx: Cx<'_>, route: Route) -> Result<HttpResponse, FormatError> {
        let services = cx.services;
        if !services.config.debug.test_format {
            return Err(ApiError::not_found(format!(
                "repository {} is of the test-only sample format, served only with debug.test_format = true",
                cx.repo.name
            ))
            .into());
        }
        match route {
            // Writes are boxed: their state is large, and the hot reads should not carry it.
            Route::PutEntry { unit, entry } => Box::pin(put_entry(cx, unit, entry)).await,
            Route::GetEntry { unit, file } => {
                match super::published_file(services, &cx.repo, entries::KIND, &unit, &file).await? {
                    Some(f) => Ok(super::serve_published(cx.req, f)),
                    None => Err(ApiError::not_found(format!(
                        "not found: _test/{unit}/{file} in repository {}",
                        cx.repo.name
                    ))
                    .into()),
                }
            }
            Route::Read(request) => {
                let repo = cx.repo.clone();
                match Box::pin(read(&cx, &repo, &request, 0)).await? {
                    Some(r) => Ok(r),
                    None => {
                        Err(ApiError::not_found(format!("not found: {} in repository {}", request.path(), repo.name))
                            .into())
                    }
                }
            }
            Route::Put { name, version } => {
                let q: super::WaitQuery = super::query(cx.req)?;
                let target = (name, version);
                let up =
                    Box::pin(hosted::upload(&SampleHosted, services, &cx.repo, target, cx.body, cx.caller.actor()))
                        .await?;
                super::uploaded(services, &up, q.wait).await
            }
            Route::Delete { name, version } => {
                let removal = (name, version);
                match Box::pin(hosted::delete(&SampleHosted, services, &cx.repo, &removal, cx.caller.actor())).await? {
                    Some(d) => {
                        super::wait_published(services, &d.changes).await?;
                        Ok(HttpResponse::NoContent().finish())
                    }
                    None => Err(ApiError::not_found(format!(
                        "not found: {}/{} in repository {}",
                        removal.0, removal.1, cx.repo.name
                    ))
                    .into()),
                }
            }
        }
    }
}

/// `repo`'s answer, or `None` for "not here": a proxy's from its upstream, a hosted
/// repository's index from its snapshot and a file from its row, a group's index from its
/// snapshot and a file from the member its snapshot names, or else the first member in order
/// that has it (a member whose upstream fails is passed over).
async fn read(
    cx: &Cx<'_>,
    repo: &Repository,
    request: &Request,
    depth: usize,
) -> Result<Option<HttpResponse>, FormatError> {
    let services = cx.services;
    match (repo.repo_type, request) {
        (RepoType::Proxy, _) => {
            super::fetch_proxied(services, repo, cx.req, proxy_request(repo, request)?, CONTENT_TYPE).await
        }
        (RepoType::Hosted, Request::Index) => {
            let found = super::published_file(services, repo, KIND, UNIT, INDEX).await?;
            Ok(found.map(|f| super::serve_published(cx.req, f)))
        }
        (RepoType::Group, Request::Index) => match super::published_file(services, repo, KIND, UNIT, INDEX).await? {
            Some(f) => {
                let res = super::serve_published(cx.req, f);
                Ok(Some(super::name_failed_members(services, repo, (KIND, UNIT), res).await?))
            }
            None => Ok(None),
        },
        (RepoType::Hosted, Request::File { name, version }) => file(cx, repo, name, version).await,
        (RepoType::Group, Request::File { .. }) => {
            let path = request.path();
            super::from_members((services, cx.hot), repo, depth + 1, (KIND, UNIT, &path), |member| {
                Box::pin(async move { read(cx, &member, request, depth + 1).await })
            })
            .await
        }
    }
}

/// A hosted file: the blob its row names (kept per replica once read).
async fn file(cx: &Cx<'_>, repo: &Repository, name: &str, version: &str) -> Result<Option<HttpResponse>, FormatError> {
    let db = &cx.services.db;
    super::find_hosted(cx, repo, &format!("{name}/{version}"), CONTENT_TYPE, || async {
        let found = packyard_formats::sample::rows::file(db, db.pool(), repo.id, name, version).await?;
        Ok(found.map(|f| super::ArtifactRef::new(&f.sha256, f.size, Some(f.time_ms))))
    })
    .await
}

/// A pipeline test unit's entry (UTF-8, at most 256 KiB), and its unit's change.
async fn put_entry(mut cx: Cx<'_>, unit: String, entry: String) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    super::hosted_only(&cx.repo, "write test units to")?;
    let q: super::WaitQuery = super::query(cx.req)?;
    let mut bytes = Vec::new();
    while let Some(chunk) = cx.body.next().await {
        bytes.extend_from_slice(&chunk.map_err(|e| ApiError::bad_request(e.to_string()))?);
        if bytes.len() > MAX_ENTRY {
            return Err(ApiError::new(ErrorCode::PayloadTooLarge, "an entry is at most 256 KiB").into());
        }
    }
    let body = std::str::from_utf8(&bytes).map_err(|_| ApiError::bad_request("the entry must be UTF-8 text"))?;
    let (unit_id, revision) = entries::put(&services.db, cx.repo.id, &unit, &entry, body).await?;
    services.wake();
    if q.wait {
        super::wait_published(services, &[(unit_id, revision)]).await?;
    }
    Ok(HttpResponse::Created().json(serde_json::json!({"revision": revision})))
}
