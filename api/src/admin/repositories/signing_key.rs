//! `GET|PUT /api/v1/repositories/{name}/signing-key`: the public part of an APT repository's
//! signing key; PUT generates a new key or imports one (rotation: the old key stays offered in
//! `gpg.key`, and every snapshot is re-signed). The private key is never returned.

use actix_web::{web, HttpResponse};
use packyard_shared::formats::apt::signing::{self, Signer};
use packyard_shared::repos::{Format, Repository, RepositoryService};
use packyard_shared::services::Services;
use serde::Deserialize;

use super::{RepoPath, Result};
use crate::auth::Admin;
use crate::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyChange {
    #[serde(default)]
    generate: bool,
    /// For `generate`: `ed25519` (default), `rsa3072` or `rsa4096`.
    #[serde(default)]
    algorithm: Option<signing::Algorithm>,
    /// An armored OpenPGP secret key without a passphrase.
    #[serde(default)]
    private_key: Option<String>,
}

fn uid(repo: &Repository) -> String {
    let label = repo.settings.apt.clone().unwrap_or_default().label.unwrap_or_else(|| repo.name.to_string());
    format!("{label} (Packyard repository {}) <packyard@{}>", repo.name, repo.name)
}

async fn apt_repo(services: &Services, path: &RepoPath) -> Result<Repository> {
    let repo = RepositoryService::new(&services.db).get(path.name.0.as_str()).await?;
    if repo.format != Format::Apt {
        return Err(ApiError::bad_request(format!(
            "repository {} is a {} repository; signing keys belong to APT repositories",
            repo.name, repo.format
        )));
    }
    if repo.repo_type == packyard_shared::repos::RepoType::Proxy {
        return Err(ApiError::bad_request(format!(
            "repository {} is a proxy: it serves its upstream's signatures and has no signing key",
            repo.name
        )));
    }
    Ok(repo)
}

async fn describe(services: &Services, repo: &Repository) -> Result<HttpResponse> {
    let ks = &services.security.keystore;
    let current = Signer::for_repository(&services.db, ks, repo.id, &uid(repo)).await.map_err(ApiError::internal)?;
    let previous = signing::previous(&services.db, ks, repo.id).await.map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "repository": repo.name.as_str(),
        "fingerprint": current.fingerprint(),
        "algorithm": current.algorithm_name(),
        "public_key": current.public_armored().map_err(ApiError::internal)?,
        "previous_fingerprint": previous.map(|p| p.fingerprint()),
    })))
}

pub async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let repo = apt_repo(&services, &path).await?;
    describe(&services, &repo).await
}

pub async fn put(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<KeyChange>,
) -> Result<HttpResponse> {
    let repo = apt_repo(&services, &path).await?;
    let new = match (body.generate, body.private_key.as_deref()) {
        (true, None) => {
            let id = uid(&repo);
            let algorithm = body.algorithm.unwrap_or_default();
            tokio::task::spawn_blocking(move || Signer::generate_with(&id, algorithm))
                .await
                .map_err(ApiError::internal)?
                .map_err(ApiError::internal)?
        }
        (false, Some(_)) if body.algorithm.is_some() => {
            return Err(ApiError::bad_request("`algorithm` applies to {\"generate\":true}, not to an imported key"))
        }
        (false, Some(armored)) => Signer::import(armored).map_err(|e| {
            ApiError::bad_request(format!("private_key is not a usable OpenPGP secret key without passphrase: {e}"))
        })?,
        _ => {
            return Err(ApiError::bad_request(
                "send either {\"generate\":true} (optionally with \"algorithm\": \"ed25519\", \"rsa3072\" or \"rsa4096\") or {\"private_key\":\"<armored secret key>\"}",
            ))
        }
    };
    signing::rotate(&services.db, &services.security.keystore, repo.id, &new).await.map_err(ApiError::internal)?;
    let units = services.db.request_rebuild(repo.id).await?;
    services.wake();
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "repository.signing_key",
            repo.name.as_str(),
            serde_json::json!({"fingerprint": new.fingerprint(), "units_rebuilt": units}),
        )
        .await;
    describe(&services, &repo).await
}
