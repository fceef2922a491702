//! What a following repository reads of its source (`packyard_core::replication`):
//! `/repository/<name>/-/export/manifest` (`…/-/export/snapshots/<snapshot>/manifest`), the
//! repository's bundle manifest signed with this instance's key, and
//! `/repository/<name>/-/export/blobs/<sha256>`, a blob one of its components lists. Both need
//! read access to the repository.

use actix_web::http::header::HeaderValue;
use actix_web::http::Method;
use actix_web::{HttpRequest, HttpResponse};
use packyard_core::services::Services;
use packyard_model::repos::Repository;

use crate::error::{ApiError, ErrorCode, FormatError};

/// The prefix of these routes below the repository's URL.
pub const PREFIX: &str = "-/export/";

pub async fn serve(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    rest: &str,
) -> Result<HttpResponse, FormatError> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(ApiError::new(ErrorCode::MethodNotAllowed, "the export of a repository is read-only").into());
    }
    let bundle_error = |e: packyard_core::bundle::BundleError| -> FormatError {
        match e {
            packyard_core::bundle::BundleError::Invalid(m) => ApiError::bad_request(m).into(),
            packyard_core::bundle::BundleError::NotFound(m) => ApiError::not_found(m).into(),
            other => ApiError::internal(other.to_string()).into(),
        }
    };
    if let Some(sha) = rest.strip_prefix("blobs/") {
        let listed = match packyard_store::blobs::Sha256Hex::parse(sha) {
            Ok(_) => services.db.repository_blob(repo.id, sha).await?,
            Err(_) => None,
        };
        let size = listed.ok_or_else(|| {
            ApiError::not_found(format!("no component of repository {} has a file {sha:?}", repo.name))
        })?;
        let artifact = packyard_core::publication::cache::ArtifactRef::new(sha, size, None);
        return crate::formats::serve_stored(
            req,
            services,
            &artifact,
            HeaderValue::from_static("application/octet-stream"),
        )
        .await;
    }
    let snapshot = match rest {
        "manifest" => None,
        _ => match rest.strip_prefix("snapshots/").and_then(|r| r.strip_suffix("/manifest")) {
            Some(s) if !s.contains('/') => Some(s),
            _ => return Err(ApiError::not_found(format!("no such export route: {rest}")).into()),
        },
    };
    let components = packyard_core::bundle::components_of(services, repo, snapshot).await.map_err(bundle_error)?;
    let none = std::collections::BTreeSet::new();
    let (_, text, sig) = packyard_core::bundle::signed_manifest(services, repo, (snapshot, components), (None, &none))
        .await
        .map_err(bundle_error)?;
    let signature: packyard_core::bundle::Signature =
        serde_json::from_slice(&sig).map_err(|e| ApiError::internal(e.to_string()))?;
    let body = packyard_core::replication::SignedManifest {
        manifest: String::from_utf8(text).map_err(|e| ApiError::internal(e.to_string()))?,
        signature,
    };
    Ok(HttpResponse::Ok().insert_header(("Cache-Control", "no-store")).json(body))
}
