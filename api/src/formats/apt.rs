//! APT routes: `dists/…` (published snapshot files, by-hash also from retained snapshots),
//! `pool/…` (package files, with ranges), `POST /` (upload: raw body or multipart `apt.asset`),
//! `DELETE pool/…`.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use packyard_core::services::Services;
use packyard_formats::apt::hosted::{self, KIND};
use packyard_model::repos::{Format, RepoType, Repository};
use serde::Deserialize;

use crate::auth::{Delete, Read, RepoAccess, Write};
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::repository::fallback;
    cfg.service(
        web::resource("/dists/{tail:.+}")
            .route(web::get().to(dists))
            .route(web::head().to(dists))
            .default_service(web::to(fallback)),
    )
    .service(
        web::resource("/pool/{tail:.+}")
            .route(web::get().to(pool))
            .route(web::head().to(pool))
            .route(web::delete().to(delete))
            .default_service(web::to(fallback)),
    )
    .service(web::resource("/").route(web::post().to(upload)).default_service(web::to(fallback)))
    .service(
        web::resource("/gpg.key")
            .route(web::get().to(gpg_key))
            .route(web::head().to(gpg_key))
            .default_service(web::to(fallback)),
    );
}

fn apt_only(repo: &Repository, path: &str) -> Result<(), ApiError> {
    if repo.format == Format::Apt {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("not found: /{path} in repository {}", repo.name)).plain())
    }
}

/// Longest path accepted below a repository (the proxy cache keys on it).
const MAX_PATH: usize = 600;

/// A path below the repository root, percent-decoded (apt sends `+` as `%2b`), without `..`,
/// empty or hidden segments.
fn clean_tail(req: &HttpRequest) -> Result<String, ApiError> {
    let raw = req.match_info().get("tail").unwrap_or_default();
    let invalid = || ApiError::bad_request(format!("invalid path {raw:?}")).plain();
    if raw.len() > MAX_PATH {
        return Err(ApiError::bad_request(format!("path longer than {MAX_PATH} bytes")).plain());
    }
    let tail = crate::repository::percent_decode(raw).ok_or_else(invalid)?;
    if tail.split('/').any(|s| s.is_empty() || s == "." || s == ".." || s.starts_with('.')) || tail.contains('\\') {
        return Err(invalid());
    }
    Ok(tail)
}

async fn dists(
    access: RepoAccess<Read>,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let tail = clean_tail(&req)?;
    let path = format!("dists/{tail}");
    apt_only(&access.repo, &path)?;
    let dist = tail.split('/').next().unwrap_or_default();
    if access.repo.repo_type == RepoType::Proxy {
        return proxy_dists(&services, &access.repo, &req, dist, &path).await;
    }
    let found = if tail.contains("/by-hash/") {
        services
            .published
            .file_or_retained(&services.db, services.blobs.as_ref(), access.repo.id, KIND, dist, &path)
            .await
    } else {
        services.published.file(&services.db, services.blobs.as_ref(), access.repo.id, KIND, dist, &path).await
    }
    .map_err(|e| ApiError::internal(e).plain())?;
    let Some(f) = found else {
        return Err(ApiError::not_found(format!("not found: /{path} in repository {}", access.repo.name)).plain());
    };
    Ok(super::serve_published(&req, f))
}

/// A proxy's `dists/…`: only the mirrored distributions; by-hash files are immutable, the rest
/// is metadata, and a changed `InRelease`/`Release` revalidates the files it lists.
async fn proxy_dists(
    services: &Services,
    repo: &Repository,
    req: &HttpRequest,
    dist: &str,
    path: &str,
) -> Result<HttpResponse, ApiError> {
    let settings = repo.settings.apt.clone().unwrap_or_default();
    let suites = settings.suites();
    if !suites.contains(&dist) {
        return Err(ApiError::not_found(format!(
            "distribution {dist:?} is not mirrored by proxy repository {}; mirrored: {}",
            repo.name,
            suites.join(", ")
        ))
        .plain());
    }
    let fetch = packyard_formats::apt::proxy_request(repo, path).map_err(super::proxy_error)?;
    let outcome = services.proxy.fetch(fetch).await.map_err(super::proxy_error)?;
    super::serve_proxied(services, repo, req, path, outcome, "text/plain").await
}

async fn pool(
    access: RepoAccess<Read>,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let tail = clean_tail(&req)?;
    let mut path = format!("pool/{tail}");
    apt_only(&access.repo, &path)?;
    // A group's Filename is `pool/<member>/<the member's Filename>`: follow it to the member
    // that provided the record (through nested groups too).
    let mut repo = access.repo.clone();
    while repo.repo_type == RepoType::Group {
        let rest = path.strip_prefix("pool/").unwrap_or_default();
        let (member, inner) = rest.split_once('/').unwrap_or((rest, ""));
        if inner.is_empty() || !repo.members.iter().any(|m| m == member) {
            return Err(ApiError::not_found(format!("not found: /{path} in repository {}", access.repo.name)).plain());
        }
        repo = services
            .security
            .repository(member)
            .await
            .map_err(|e| ApiError::from(e).plain())?
            .ok_or_else(|| ApiError::not_found(format!("group member {member} is gone")).plain())?;
        path = inner.to_string();
    }
    if repo.repo_type == RepoType::Proxy {
        // Only package files go through here; a proxy's metadata has its own route and rules.
        if path.starts_with("dists/") {
            return Err(ApiError::not_found(format!("not found: /{path} in repository {}", access.repo.name)).plain());
        }
        let fetch = packyard_formats::apt::proxy_request(&repo, &path).map_err(super::proxy_error)?;
        let outcome = services.proxy.fetch(fetch).await.map_err(super::proxy_error)?;
        return super::serve_proxied(&services, &repo, &req, &path, outcome, DEB_TYPE).await;
    }
    // Warmed: the path's blob from the replica's cache, no query.
    let (sha256, size) = match services.published.artifact(repo.id, &path) {
        Some(found) => found,
        None => {
            let epoch = services.published.epoch();
            let not_found = || ApiError::not_found(format!("not found: /{path} in repository {}", repo.name)).plain();
            let pkg = packyard_formats::apt::rows::rows(&services.db)
                .apt_by_pool_path(repo.id, &path)
                .await
                .map_err(|e| ApiError::from(e).plain())?
                .ok_or_else(not_found)?;
            services.published.put_artifact(epoch, repo.id, &path, &pkg.sha256, pkg.size);
            (std::sync::Arc::from(pkg.sha256.as_str()), pkg.size)
        }
    };
    let size = u64::try_from(size).ok();
    super::serve_blob(&req, services.blobs.as_ref(), &sha256, DEB_TYPE, None, size, &[]).await
}

const DEB_TYPE: &str = "application/vnd.debian.binary-package";

#[derive(Deserialize)]
pub struct UploadQuery {
    #[serde(default)]
    component: Option<String>,
    #[serde(default)]
    wait: bool,
}

/// The form field that carries the package in a multipart upload (Nexus's name for it).
const ASSET_FIELD: &str = "apt.asset";

fn is_multipart(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}

/// Streams a `.deb` either from the raw body or from the `apt.asset` field of a multipart form.
async fn store(
    services: &Services,
    repo: &Repository,
    component: Option<&str>,
    req: &HttpRequest,
    body: web::Payload,
    uploader: &str,
) -> Result<hosted::Uploaded, ApiError> {
    if !is_multipart(req) {
        return hosted::upload(services, repo, component, body, uploader).await.map_err(super::upload_error);
    }
    let mut form = actix_multipart::Multipart::new(req.headers(), body);
    while let Some(field) = form.next().await {
        let field = field.map_err(|e| ApiError::bad_request(format!("malformed multipart upload: {e}")).plain())?;
        if field.name() == Some(ASSET_FIELD) {
            return hosted::upload(services, repo, component, Box::pin(field), uploader)
                .await
                .map_err(super::upload_error);
        }
        // Another field: skip its content.
        let mut field = Box::pin(field);
        while let Some(chunk) = field.next().await {
            chunk.map_err(|e| ApiError::bad_request(format!("malformed multipart upload: {e}")).plain())?;
        }
    }
    Err(ApiError::bad_request(format!(
        "the multipart upload has no field named {ASSET_FIELD:?}; send the .deb as that field or as the raw body"
    ))
    .plain())
}

async fn upload(
    access: RepoAccess<Write>,
    services: web::Data<Services>,
    q: web::Query<UploadQuery>,
    req: HttpRequest,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let repo = &access.repo;
    apt_only(repo, "")?;
    if repo.repo_type != RepoType::Hosted {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("repository {} is a {} repository; upload to a hosted one", repo.name, repo.repo_type),
        )
        .plain());
    }
    let up = store(&services, repo, q.component.as_deref(), &req, body, access.caller.username()).await?;
    let stored = super::Stored {
        caller: &access.caller,
        action: "apt.upload",
        target: format!("{}/{}", repo.name, up.package.pool_path),
        sha256: &up.package.sha256,
        created: up.created,
        unit_id: up.unit_id,
        revision: up.revision,
    };
    let body = serde_json::json!({
        "package": up.package.name,
        "version": up.package.version,
        "architecture": up.package.architecture,
        "component": up.package.component,
        "filename": up.package.pool_path,
        "sha256": up.package.sha256,
        "size": up.package.size,
    });
    super::after_upload(&services, stored, q.wait, body).await
}

async fn delete(
    access: RepoAccess<Delete>,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let tail = clean_tail(&req)?;
    let path = format!("pool/{tail}");
    apt_only(&access.repo, &path)?;
    if access.repo.repo_type != RepoType::Hosted {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "repository {} is a {} repository; delete from a hosted one",
                access.repo.name, access.repo.repo_type
            ),
        )
        .plain());
    }
    match hosted::delete(&services, &access.repo, &path).await.map_err(super::upload_error)? {
        Some(_) => {
            services
                .security
                .audit(
                    access.caller.username(),
                    Some(access.caller.addr),
                    "apt.delete",
                    &format!("{}/{path}", access.repo.name),
                    serde_json::json!({}),
                )
                .await;
            Ok(HttpResponse::NoContent().finish())
        }
        None => Err(ApiError::not_found(format!("not found: /{path} in repository {}", access.repo.name)).plain()),
    }
}

/// The armored public signing key (generated on first need), for `/etc/apt/keyrings/`.
async fn gpg_key(access: RepoAccess<Read>, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    apt_only(&access.repo, "gpg.key")?;
    if access.repo.repo_type == RepoType::Proxy {
        return Err(ApiError::not_found(format!(
            "proxy repository {} serves its upstream's signatures unchanged; trust the upstream archive's key",
            access.repo.name
        ))
        .plain());
    }
    let label =
        access.repo.settings.apt.clone().unwrap_or_default().label.unwrap_or_else(|| access.repo.name.to_string());
    let uid = format!("{label} (Packyard repository {}) <packyard@{}>", access.repo.name, access.repo.name);
    let signer = packyard_formats::apt::keys::signer(&services.db, &services.security.keystore, access.repo.id, &uid)
        .await
        .map_err(|e| ApiError::internal(e).plain())?;
    let previous = packyard_formats::apt::keys::previous(&services.db, &services.security.keystore, access.repo.id)
        .await
        .map_err(|e| ApiError::internal(e).plain())?;
    let keyring = packyard_codecs::apt::signing::keyring_armored(&signer, previous.as_ref())
        .map_err(|e| ApiError::internal(e).plain())?;
    Ok(HttpResponse::Ok().content_type("application/pgp-keys").body(keyring))
}
