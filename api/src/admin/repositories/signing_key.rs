//! `GET|PUT /api/v1/repositories/{name}/signing-key`: the public part of an APT or APK
//! repository's signing key; PUT generates a new key or imports one (rotation: the old key stays
//! offered — in `gpg.key`, or under `keys/` — and every snapshot is re-signed). For a hosted or
//! group Go repository, the verifier key of its checksum database and the `GOSUMDB` line that
//! names it; PUT chooses the database's name or key only while it holds no record (a log's key is
//! never rotated: clients pin it). The private key is never returned.

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_codecs::apk::signing::ApkKey;
use packyard_codecs::apt::signing::{self, Signer};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_formats::go::sumdb;
use packyard_model::repos::{Format, Repository};
use serde::Deserialize;

use super::{RepoPath, Result};
use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyChange {
    #[serde(default)]
    generate: bool,
    /// For `generate`: APT `ed25519` (default), `rsa3072` or `rsa4096`; APK `rsa2048`,
    /// `rsa3072` or `rsa4096` (default).
    #[serde(default)]
    algorithm: Option<String>,
    /// APT: an armored OpenPGP secret key without a passphrase. APK: an unencrypted RSA private
    /// key in PEM (PKCS#8 or PKCS#1). Go: a note key, `PRIVATE+KEY+<name>+<hash>+<key>`.
    #[serde(default)]
    private_key: Option<String>,
    /// Go, with `generate`: the checksum database's name (default: the one it has).
    #[serde(default)]
    name: Option<String>,
}

fn uid(repo: &Repository) -> String {
    let label = repo.settings.apt.clone().unwrap_or_default().label.unwrap_or_else(|| repo.name.to_string());
    format!("{label} (Packyard repository {}) <packyard@{}>", repo.name, repo.name)
}

async fn signed_repo(services: &Services, path: &RepoPath) -> Result<Repository> {
    let repo = RepositoryService::new(&services.db).get(path.name.0.as_str()).await?;
    if !matches!(repo.format, Format::Apt | Format::Apk | Format::Go) {
        return Err(ApiError::bad_request(format!(
            "repository {} is a {} repository; signing keys belong to APT, APK and Go (checksum database) repositories",
            repo.name, repo.format
        )));
    }
    if repo.repo_type == packyard_model::repos::RepoType::Proxy && repo.format == Format::Go {
        return Err(ApiError::bad_request(format!(
            "repository {} is a proxy: it serves the checksum databases of go.checksum_databases, and has no key of its own",
            repo.name
        )));
    }
    if repo.repo_type == packyard_model::repos::RepoType::Proxy {
        return Err(ApiError::bad_request(format!(
            "repository {} is a proxy: it serves its upstream's signatures and has no signing key",
            repo.name
        )));
    }
    Ok(repo)
}

async fn describe(services: &Services, repo: &Repository) -> Result<HttpResponse> {
    let ks = &services.security.keystore;
    let current =
        packyard_formats::apt::keys::signer(&services.db, ks, repo.id, &uid(repo)).await.map_err(ApiError::internal)?;
    let previous =
        packyard_formats::apt::keys::previous(&services.db, ks, repo.id).await.map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "repository": repo.name.as_str(),
        "fingerprint": current.fingerprint(),
        "algorithm": current.algorithm_name(),
        "public_key": current.public_armored().map_err(ApiError::internal)?,
        "previous_fingerprint": previous.map(|p| p.fingerprint()),
    })))
}

pub async fn get(
    _admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
) -> Result<HttpResponse> {
    let repo = signed_repo(&services, &path).await?;
    match repo.format {
        Format::Apk => describe_apk(&services, &repo).await,
        Format::Go => {
            let head = sumdb::ensure(&services, &repo).await.map_err(ApiError::internal)?;
            describe_go(&req, &repo, &head)
        }
        _ => describe(&services, &repo).await,
    }
}

/// A Go repository's checksum database: its name, verifier key, size, and the `GOSUMDB` value
/// that verifies through it.
fn describe_go(req: &HttpRequest, repo: &Repository, head: &sumdb::LogHead) -> Result<HttpResponse> {
    let base = crate::frontage::Base::of(req);
    let url = base.url(&format!("/repository/{}/sumdb/{}", repo.name, head.name));
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "repository": repo.name.as_str(),
        "algorithm": "ed25519",
        "name": head.name,
        "verifier_key": head.verifier_key,
        "gosumdb": format!("{} {url}", head.verifier_key),
        "size": head.size,
    })))
}

/// Go: a new key (named as asked, or as the database is) or an imported one, while the log is
/// empty.
async fn put_go(
    admin: &Admin,
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    body: &KeyChange,
) -> Result<HttpResponse> {
    use packyard_codecs::go::sumdb::Signer;
    if body.algorithm.as_deref().is_some_and(|a| a != "ed25519") {
        return Err(ApiError::bad_request("a checksum database key is an Ed25519 note key: algorithm ed25519"));
    }
    let signer = match (body.generate, body.private_key.as_deref()) {
        (true, None) => {
            let name = match &body.name {
                Some(n) => {
                    packyard_model::repos::check_checksum_database_name("name", n)?;
                    n.clone()
                }
                None => sumdb::ensure(services, repo).await.map_err(ApiError::internal)?.name,
            };
            Signer::generate(&name).map_err(|e| ApiError::bad_request(e.to_string()))?
        }
        (false, Some(_)) if body.name.is_some() => {
            return Err(ApiError::bad_request("an imported note key carries its name: leave out `name`"))
        }
        (false, Some(key)) => {
            let signer = Signer::parse(key.trim())
                .map_err(|e| ApiError::bad_request(format!("private_key is not a note signing key: {e}")))?;
            packyard_model::repos::check_checksum_database_name("key name", signer.name())?;
            signer
        }
        _ => {
            return Err(ApiError::bad_request(
                "send either {\"generate\":true} (optionally with \"name\") or {\"private_key\":\"PRIVATE+KEY+<name>+<hash>+<key>\"}",
            ))
        }
    };
    let head = match sumdb::replace_key(services, repo, &signer).await {
        Ok(head) => head,
        Err(sumdb::RekeyError::NotEmpty(m)) => return Err(ApiError::new(ErrorCode::Conflict, m)),
        Err(sumdb::RekeyError::Sumdb(e)) => return Err(ApiError::internal(e)),
    };
    // Replicas drop the signed head they keep.
    services.db.touch_repository(repo.id).await?;
    services.changed(packyard_core::events::Changed::Publications);
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "repository.signing_key",
            repo.name.as_str(),
            serde_json::json!({"name": head.name, "verifier_key": head.verifier_key}),
        )
        .await;
    describe_go(req, repo, &head)
}

async fn describe_apk(services: &Services, repo: &Repository) -> Result<HttpResponse> {
    let ks = &services.security.keystore;
    let current = packyard_formats::apk::keys::current(&services.db, ks, repo.id).await.map_err(ApiError::internal)?;
    let previous =
        packyard_formats::apk::keys::previous(&services.db, ks, repo.id).await.map_err(ApiError::internal)?;
    let name = |k: &ApkKey| k.file_name(repo.name.as_str()).map_err(ApiError::internal);
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "repository": repo.name.as_str(),
        "fingerprint": current.fingerprint().map_err(ApiError::internal)?,
        "algorithm": format!("rsa{}", current.bits()),
        "key_name": name(&current)?,
        "public_key": current.public_pem().map_err(ApiError::internal)?,
        "previous_key_name": previous.as_ref().map(name).transpose()?,
    })))
}

/// APK: generate (RSA, 4096 bits unless asked) or import a PEM key, install it, re-sign.
async fn put_apk(admin: &Admin, services: &Services, repo: &Repository, body: &KeyChange) -> Result<HttpResponse> {
    let new = match (body.generate, body.private_key.as_deref()) {
        (true, None) => {
            let bits = match body.algorithm.as_deref() {
                None | Some("rsa4096") => 4096,
                Some("rsa3072") => 3072,
                Some("rsa2048") => 2048,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "algorithm {other:?} is not available for APK index keys: use rsa2048, rsa3072 or rsa4096"
                    )))
                }
            };
            tokio::task::spawn_blocking(move || ApkKey::generate(bits))
                .await
                .map_err(ApiError::internal)?
                .map_err(ApiError::internal)?
        }
        (false, Some(_)) if body.algorithm.is_some() => {
            return Err(ApiError::bad_request("`algorithm` applies to {\"generate\":true}, not to an imported key"))
        }
        (false, Some(pem)) => ApkKey::import(pem)
            .map_err(|e| ApiError::bad_request(format!("private_key is not a usable APK index key: {e}")))?,
        _ => {
            return Err(ApiError::bad_request(
                "send either {\"generate\":true} (optionally with \"algorithm\": \"rsa2048\", \"rsa3072\" or \"rsa4096\") or {\"private_key\":\"<PEM RSA private key>\"}",
            ))
        }
    };
    packyard_formats::apk::keys::install(&new, &services.db, &services.security.keystore, repo.id)
        .await
        .map_err(ApiError::internal)?;
    let units = services.db.request_rebuild(repo.id).await?;
    // Replicas drop the indexes they signed for units without a snapshot.
    services.db.touch_repository(repo.id).await?;
    services.changed(packyard_core::events::Changed::Publications);
    services.wake();
    let fingerprint = new.fingerprint().map_err(ApiError::internal)?;
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "repository.signing_key",
            repo.name.as_str(),
            serde_json::json!({"fingerprint": fingerprint, "units_rebuilt": units}),
        )
        .await;
    describe_apk(services, repo).await
}

pub async fn put(
    admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<KeyChange>,
) -> Result<HttpResponse> {
    let repo = signed_repo(&services, &path).await?;
    if repo.format == Format::Go {
        return put_go(&admin, &req, &services, &repo, &body).await;
    }
    if body.name.is_some() {
        return Err(ApiError::bad_request("`name` applies to the checksum database key of a Go repository"));
    }
    if repo.format == Format::Apk {
        return put_apk(&admin, &services, &repo, &body).await;
    }
    let new = match (body.generate, body.private_key.as_deref()) {
        (true, None) => {
            let id = uid(&repo);
            let algorithm = match body.algorithm.as_deref() {
                None | Some("ed25519") => signing::Algorithm::Ed25519,
                Some("rsa3072") => signing::Algorithm::Rsa3072,
                Some("rsa4096") => signing::Algorithm::Rsa4096,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "algorithm {other:?} is not available for APT signing keys: use ed25519, rsa3072 or rsa4096"
                    )))
                }
            };
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
    packyard_formats::apt::keys::rotate(&services.db, &services.security.keystore, repo.id, &new)
        .await
        .map_err(ApiError::internal)?;
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
