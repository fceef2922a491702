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
    // The entity tag: what the manifest is made of (the repository's definition and its files,
    // or the snapshot, which never changes), the same on every replica. A follower that took
    // the manifest asks again with it and gets a 304 while nothing changed; a replica builds it
    // once per change.
    let made_of = match snapshot {
        Some(s) => match services.db.repository_snapshot(repo.id, s).await? {
            Some(found) => format!("snapshot {} {}", found.id, found.created_at),
            None => return Err(ApiError::not_found(format!("repository {} has no snapshot {s:?}", repo.name)).into()),
        },
        None => format!(
            "{} {:?}",
            services.db.repository_generation(repo.id).await?,
            services.db.assets_fingerprint(repo.id).await?
        ),
    };
    let tag = {
        use sha2::Digest as _;
        let of = format!("{}\n{}\n{}\n{made_of}", packyard_core::bundle::VERSION, repo.id, repo.version);
        format!("\"{}\"", hex::encode(&sha2::Sha256::digest(of.as_bytes())[..16]))
    };
    let answer = |status: actix_web::http::StatusCode, body: Option<bytes::Bytes>| {
        let mut res = HttpResponse::build(status);
        res.insert_header(("ETag", tag.as_str())).insert_header(("Cache-Control", "no-cache"));
        match body {
            Some(b) => res.content_type("application/json").body(b),
            None => res.finish(),
        }
    };
    // Compared weakly, as `If-None-Match` is (a proxy between may have weakened the tag).
    let asked = req.headers().get(actix_web::http::header::IF_NONE_MATCH).and_then(|v| v.to_str().ok());
    let matches = |t: &str| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag;
    if asked.is_some_and(|a| a.split(',').any(|t| matches(t.trim()))) {
        return Ok(answer(actix_web::http::StatusCode::NOT_MODIFIED, None));
    }
    let key = (repo.id, snapshot.map(str::to_string));
    let cached = BUILT.lock().ok().and_then(|b| b.get(&key).filter(|(t, _)| *t == tag).map(|(_, body)| body.clone()));
    if let Some(body) = cached {
        return Ok(answer(actix_web::http::StatusCode::OK, Some(body)));
    }
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
    let body = bytes::Bytes::from(serde_json::to_vec(&body).map_err(|e| ApiError::internal(e.to_string()))?);
    if let Ok(mut built) = BUILT.lock() {
        let held: usize = built.values().map(|(_, b)| b.len()).sum();
        if (built.len() >= KEPT || held + body.len() > KEPT_BYTES) && !built.contains_key(&key) {
            built.clear();
        }
        if body.len() <= KEPT_BYTES {
            built.insert(key, (tag.clone(), body.clone()));
        }
    }
    Ok(answer(actix_web::http::StatusCode::OK, Some(body)))
}

/// The manifests built last, by repository and snapshot: their entity tag and body.
type Built = std::collections::HashMap<(i64, Option<String>), (String, bytes::Bytes)>;
static BUILT: std::sync::LazyLock<std::sync::Mutex<Built>> = std::sync::LazyLock::new(Default::default);
/// At most this many are kept (followed repositories are few), of at most this many bytes.
const KEPT: usize = 64;
const KEPT_BYTES: usize = 128 << 20;
