//! The UI's own style sheet, script and icon, embedded in the binary and served with a
//! long-lived cache: their links carry a digest of the content, so a new build is a new URL.

use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

use super::UiError;

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "packyard.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../ui/packyard.css"),
    },
    Asset {
        name: "packyard.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/packyard.js"),
    },
    Asset { name: "packyard.svg", content_type: "image/svg+xml", body: include_str!("../../ui/packyard.svg") },
];

/// Each asset's digest (the first 16 hex digits of its SHA-256), computed once.
fn digests() -> &'static [String] {
    static DIGESTS: OnceLock<Vec<String>> = OnceLock::new();
    DIGESTS.get_or_init(|| ASSETS.iter().map(|a| hex::encode(&Sha256::digest(a.body.as_bytes())[..8])).collect())
}

/// The link of an asset, its digest in the query.
pub fn href(name: &str) -> String {
    let v = ASSETS.iter().position(|a| a.name == name).and_then(|i| digests().get(i)).map_or("", String::as_str);
    format!("/static/{name}?v={v}")
}

pub async fn serve(req: HttpRequest, file: web::Path<String>) -> Result<HttpResponse, UiError> {
    let Some(i) = ASSETS.iter().position(|a| a.name == file.as_str()) else {
        return Err(UiError::not_found(format!("no such file: /static/{file}")));
    };
    let (asset, digest) = (&ASSETS[i], digests().get(i).cloned().unwrap_or_default());
    let etag = format!("\"{digest}\"");
    let fresh = req.headers().get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str());
    let mut res = if fresh { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    res.insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, "public, max-age=86400"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .content_type(asset.content_type);
    if fresh {
        Ok(res.finish())
    } else {
        Ok(res.body(asset.body))
    }
}
