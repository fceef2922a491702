//! Format routes under `/repository/{repo}/`, one module per format.

use actix_web::web;
use packyard_shared::config::Config;

pub mod apt;
pub mod testformat;

/// Mounts the routes of every format (inside the `/repository/{repo}` scope).
pub fn configure(cfg: &mut web::ServiceConfig, config: &Config) {
    apt::configure(cfg);
    if config.debug.test_format {
        testformat::configure(cfg);
    }
}

/// Answers with a published file: `ETag`/`If-None-Match` and `Last-Modified`/`If-Modified-Since`
/// (304), `Content-Length`, the bytes from memory.
pub fn serve_published(
    req: &actix_web::HttpRequest,
    f: packyard_shared::publication::cache::ServedFile,
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
