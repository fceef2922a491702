//! `GET|PUT /api/v1/repositories/{name}/signing-key`: the public part of a repository's signing
//! key, for formats whose repositories sign what they publish (`FormatSpec::signing_keys`); PUT
//! generates a new key or imports one, as the format's keys allow (APT and APK rotate — the old
//! key stays offered and every snapshot is re-signed —; a Go checksum database's key is chosen
//! only while it holds no record). The private key is never returned.

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::formats::{KeyChange, KeyError, SigningKeys};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_model::repos::Repository;

use super::{RepoPath, Result};
use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

impl From<KeyError> for ApiError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::Invalid(m) => ApiError::bad_request(m),
            KeyError::Name(e) => e.into(),
            KeyError::Db(e) => e.into(),
            KeyError::Conflict(m) => ApiError::new(ErrorCode::Conflict, m),
            KeyError::Internal(m) => ApiError::internal(m),
        }
    }
}

/// The repository and its format's keys, or why it has none.
async fn signed_repo(services: &Services, path: &RepoPath) -> Result<(Repository, &'static dyn SigningKeys)> {
    let repo = RepositoryService::new(&services.db, packyard_formats::registry()).get(path.name.0.as_str()).await?;
    let Some(keys) = packyard_formats::registry().get(repo.format).signing_keys() else {
        let mut labels: Vec<&str> =
            packyard_formats::registry().offered().filter_map(|s| s.signing_keys()).map(|k| k.label()).collect();
        let last = labels.pop().unwrap_or_default();
        let holders = if labels.is_empty() { last.to_string() } else { format!("{} and {last}", labels.join(", ")) };
        return Err(ApiError::bad_request(format!(
            "repository {} is a {} repository; signing keys belong to {holders} repositories",
            repo.name, repo.format
        )));
    };
    if let Some(why) = keys.refuse(&repo) {
        return Err(ApiError::bad_request(why));
    }
    Ok((repo, keys))
}

fn repository_url(req: &HttpRequest, repo: &Repository) -> String {
    crate::frontage::Base::of(req).url(&format!("/repository/{}", repo.name))
}

pub async fn get(
    _admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
) -> Result<HttpResponse> {
    let (repo, keys) = signed_repo(&services, &path).await?;
    let described = keys.describe(&services, &repo, &repository_url(&req, &repo)).await?;
    Ok(HttpResponse::Ok().json(described))
}

pub async fn put(
    admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<KeyChange>,
) -> Result<HttpResponse> {
    let (repo, keys) = signed_repo(&services, &path).await?;
    let url = repository_url(&req, &repo);
    let changed = keys.change(&services, &repo, &url, &body).await?;
    services
        .security
        .audit(admin.username(), Some(admin.addr()), "repository.signing_key", repo.name.as_str(), changed.audit)
        .await;
    let described = match changed.key {
        Some(key) => key,
        None => keys.describe(&services, &repo, &url).await?,
    };
    Ok(HttpResponse::Ok().json(described))
}
