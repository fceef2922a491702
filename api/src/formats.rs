//! Format routes under `/repository/{repo}/`, one module per format.

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::proxy::{CacheState, Outcome, ProxyError};
use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_model::repos::Repository;

use crate::error::{ApiError, ErrorCode};

pub mod apk;
pub mod apt;
pub mod conan;
pub mod go;
pub mod testformat;

/// Mounts the routes of every format (inside the `/repository/{repo}` scope).
pub fn configure(cfg: &mut web::ServiceConfig, config: &Config) {
    apt::configure(cfg);
    if config.debug.test_format {
        testformat::configure(cfg);
    }
    apk::configure(cfg);
    conan::configure(cfg);
    conan::configure_conans(cfg);
    // Last: a module path may have any number of segments.
    go::configure(cfg);
}

/// A file of a unit's current snapshot (`None`: not published, so not there), from the
/// replica's memory when warm: the one projection read every format's routes share.
pub async fn published_file(
    services: &Services,
    repo: &Repository,
    kind: &str,
    unit: &str,
    path: &str,
) -> Result<Option<packyard_core::publication::cache::ServedFile>, ApiError> {
    services
        .published
        .file(&services.db, services.blobs.as_ref(), repo.id, kind, unit, path)
        .await
        .map_err(|e| ApiError::internal(e).plain())
}

/// Answers with a published file: `ETag`/`If-None-Match` and `Last-Modified`/`If-Modified-Since`
/// (304), `Content-Length`, the bytes from memory.
pub fn serve_published(
    req: &actix_web::HttpRequest,
    f: packyard_core::publication::cache::ServedFile,
) -> actix_web::HttpResponse {
    use actix_web::http::header::{self, Header, IfModifiedSince, LastModified};
    use actix_web::HttpResponse;
    use std::time::{Duration, SystemTime};
    let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(f.modified / 1000).unwrap_or(0));
    let etag_matches = req.headers().get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == f.etag.as_bytes());
    let not_modified_since = !req.headers().contains_key(header::IF_NONE_MATCH)
        && IfModifiedSince::parse(req).is_ok_and(|IfModifiedSince(since)| SystemTime::from(since) >= modified);
    if etag_matches || not_modified_since {
        return HttpResponse::NotModified()
            .insert_header((header::ETAG, f.etag))
            .insert_header(LastModified(modified.into()))
            .finish();
    }
    HttpResponse::Ok()
        .content_type(f.content_type)
        .insert_header((header::ETAG, f.etag))
        .insert_header(LastModified(modified.into()))
        .body(f.bytes)
}

/// Answers with a stored blob: `ETag` (the SHA-256), `If-None-Match` and, when `last_modified`
/// is known, `If-Modified-Since` (304); a single `Range` (206/416); the bytes streamed. HEAD
/// opens nothing when the size is known.
pub async fn serve_blob(
    req: &actix_web::HttpRequest,
    blobs: &dyn packyard_store::blobs::BlobStore,
    sha256: &str,
    content_type: &str,
    last_modified: Option<std::time::SystemTime>,
    known_size: Option<u64>,
    extra: &[(&'static str, String)],
) -> Result<actix_web::HttpResponse, crate::error::ApiError> {
    use actix_web::http::header::{self, Header, IfModifiedSince, LastModified};
    use actix_web::HttpResponse;
    use packyard_store::blobs::{RangeSpec, Sha256Hex};
    let etag = format!("\"{sha256}\"");
    let etag_matches = req.headers().get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let not_modified_since = !req.headers().contains_key(header::IF_NONE_MATCH)
        && last_modified.is_some_and(|m| {
            IfModifiedSince::parse(req).is_ok_and(|IfModifiedSince(since)| std::time::SystemTime::from(since) >= m)
        });
    if etag_matches || not_modified_since {
        let mut res = HttpResponse::NotModified();
        res.insert_header((header::ETAG, etag));
        for (k, v) in extra {
            res.insert_header((*k, v.as_str()));
        }
        return Ok(res.finish());
    }
    let digest = Sha256Hex::parse(sha256).map_err(|e| crate::error::ApiError::from(e).plain())?;
    if req.method() == actix_web::http::Method::HEAD {
        // The headers of a GET without opening the file: actix would read a streamed body to
        // its end only to drop it.
        let size = match known_size {
            Some(s) => s,
            None => blobs
                .stat(&digest)
                .await
                .map_err(|e| crate::error::ApiError::from(e).plain())?
                .ok_or_else(|| crate::error::ApiError::internal(format!("blob {digest} is missing")).plain())?,
        };
        let mut res = HttpResponse::Ok();
        res.content_type(content_type)
            .insert_header((header::ETAG, etag))
            .insert_header((header::ACCEPT_RANGES, "bytes"))
            .no_chunking(size);
        if let Some(m) = last_modified {
            res.insert_header(LastModified(m.into()));
        }
        for (k, v) in extra {
            res.insert_header((*k, v.as_str()));
        }
        return Ok(res.streaming(futures_util::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
    }
    let range = req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()).and_then(RangeSpec::parse_header);
    let read = blobs.open_hot(&digest, range).await.map_err(|e| crate::error::ApiError::from(e).plain())?;
    let mut res = match read.range {
        Some(r) => {
            let mut b = HttpResponse::PartialContent();
            b.insert_header((header::CONTENT_RANGE, format!("bytes {}-{}/{}", r.start, r.end, read.total_size)));
            b
        }
        None => HttpResponse::Ok(),
    };
    res.content_type(content_type)
        .insert_header((header::ETAG, etag))
        .insert_header((header::ACCEPT_RANGES, "bytes"))
        .no_chunking(read.content_length());
    if let Some(m) = last_modified {
        res.insert_header(LastModified(m.into()));
    }
    for (k, v) in extra {
        res.insert_header((*k, v.as_str()));
    }
    Ok(res.streaming(read.body))
}

/// Maps a proxy failure to the status a client and an operator can act on.
pub fn proxy_error(e: ProxyError) -> ApiError {
    let code = match &e {
        ProxyError::Timeout(_) => ErrorCode::GatewayTimeout,
        ProxyError::Internal(_) => return ApiError::internal(e).plain(),
        _ => ErrorCode::BadGateway,
    };
    ApiError::new(code, e.to_string()).plain()
}

/// Answers with what the proxy fetched: the upstream's bytes unchanged, with `X-Packyard-Cache`
/// (hit, miss, revalidated, stale) and, for a stale copy, a `Warning`.
pub async fn serve_proxied(
    services: &Services,
    repo: &Repository,
    req: &HttpRequest,
    path: &str,
    outcome: Outcome,
    fallback_type: &str,
) -> Result<HttpResponse, ApiError> {
    let (entry, state) = match outcome {
        Outcome::Found(e, s) => (e, s),
        Outcome::Missing(status, _) => {
            return Err(ApiError::not_found(format!(
                "not found: /{path} in repository {} (the upstream answered {status})",
                repo.name
            ))
            .plain())
        }
    };
    let mut extra = vec![(CACHE_HEADER, state.as_str().to_string())];
    if state == CacheState::Stale {
        extra.push(("warning", "110 packyard \"Response is Stale\"".to_string()));
    }
    let content_type =
        if entry.content_type.is_empty() { fallback_type.to_string() } else { entry.content_type.clone() };
    let modified = entry
        .upstream_last_modified
        .as_deref()
        .and_then(|v| v.parse::<actix_web::http::header::HttpDate>().ok())
        .map(std::time::SystemTime::from);
    let sha = entry.sha256.as_deref().unwrap_or_default();
    let size = u64::try_from(entry.size).ok();
    serve_blob(req, services.blobs.as_ref(), sha, &content_type, modified, size, &extra).await
}

/// Says where a proxied answer came from.
pub const CACHE_HEADER: &str = "x-packyard-cache";

/// What every format's upload does once the package is stored: audit a new one, wait for its
/// publication when asked (`?wait=true`, always for Go; at most 30 s: then 503, the package
/// stays stored) and, on a shared database, for every replica to have seen it; and answer 201
/// for a new package or 200 for an identical retry with `body`.
pub struct Stored<'a> {
    pub caller: &'a crate::auth::Caller,
    pub action: &'static str,
    pub target: String,
    pub sha256: &'a str,
    pub created: bool,
    pub unit_id: i64,
    pub revision: i64,
}

pub async fn after_upload(
    services: &Services,
    stored: Stored<'_>,
    wait: bool,
    body: serde_json::Value,
) -> Result<HttpResponse, ApiError> {
    if stored.created {
        services
            .security
            .audit(
                stored.caller.username(),
                Some(stored.caller.addr),
                stored.action,
                &stored.target,
                serde_json::json!({"sha256": stored.sha256}),
            )
            .await;
    }
    if wait && stored.unit_id > 0 {
        wait_published(services, stored.unit_id, stored.revision).await?;
    }
    let status = if stored.created { actix_web::http::StatusCode::CREATED } else { actix_web::http::StatusCode::OK };
    Ok(HttpResponse::build(status).json(body))
}

/// Read-your-writes: waits (at most 30 s: then 503, the change stays recorded) until the unit's
/// published revision reaches `revision` and, on a shared database, for every replica to have
/// seen it.
pub async fn wait_published(services: &Services, unit_id: i64, revision: i64) -> Result<(), ApiError> {
    let done = packyard_core::publication::wait_until_published(
        &services.db,
        unit_id,
        revision,
        std::time::Duration::from_secs(30),
    )
    .await
    .map_err(|e| ApiError::from(e).plain())?;
    if !done {
        return Err(ApiError::new(ErrorCode::ServiceUnavailable, "stored, but not yet published after 30 s").plain());
    }
    services.published.invalidate();
    // Other replicas drop their view within one watermark period (sooner with Redis); on a
    // shared database, answer only after it, so that every replica serves the new version.
    // The embedded default (SQLite) is one process: nothing to wait for.
    if services.db.backend() != packyard_store::db::Backend::Sqlite {
        let c = &services.config;
        let ms = c.cache.watermark_ttl_ms.min(c.security.watermark_ttl_ms);
        tokio::time::sleep(std::time::Duration::from_millis(ms + 50)).await;
    }
    Ok(())
}

/// How a refused upload is answered, for every format.
pub fn upload_error(e: packyard_core::upload::UploadError) -> ApiError {
    use packyard_core::upload::UploadError;
    let api = match e {
        UploadError::Invalid(m) | UploadError::Interrupted(m) => ApiError::bad_request(m),
        UploadError::TooLarge(m) => ApiError::new(ErrorCode::PayloadTooLarge, m),
        UploadError::Stalled(m) => ApiError::new(ErrorCode::RequestTimeout, m),
        UploadError::Conflict(m) => ApiError::new(ErrorCode::Conflict, m),
        UploadError::ReadOnly(m) => ApiError::forbidden(m),
        UploadError::Blob(b) => b.into(),
        UploadError::Db(d) => d.into(),
    };
    api.plain()
}
