//! APK routes: `<branch>/<channel>/<arch>/APKINDEX.tar.gz` (the published, signed index),
//! `<branch>/<channel>/<arch>/<pkgname>-<pkgver>.apk` (GET/HEAD with ranges, PUT to upload,
//! DELETE), and `keys/<keyname>` (the index key as SPKI PEM, for `/etc/apk/keys/`).

use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_formats::apk::hosted;

use packyard_core::publication::wait_until_published;
use packyard_core::services::Services;
use packyard_formats::apk::{group, Unit, INDEX_FILE, KIND};
use packyard_model::repos::{Format, RepoType, Repository};
use serde::Deserialize;

use crate::auth::{Delete, Read, RepoAccess, Write};
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::repository::fallback;
    cfg.service(
        web::resource(["/keys", "/keys/"])
            .route(web::get().to(key_list))
            .route(web::head().to(key_list))
            .default_service(web::to(fallback)),
    )
    .service(
        web::resource("/keys/{keyname}")
            .route(web::get().to(key_file))
            .route(web::head().to(key_file))
            .default_service(web::to(fallback)),
    )
    .service(
        web::resource("/{branch}/{channel}/{arch}/{file}")
            .route(web::get().to(get))
            .route(web::head().to(get))
            .route(web::put().to(put))
            .route(web::delete().to(delete))
            .default_service(web::to(fallback)),
    );
}

fn not_found(repo: &Repository, path: &str) -> ApiError {
    ApiError::not_found(format!("not found: /{path} in repository {}", repo.name)).plain()
}

/// The unit and file of a request, checked; 404 for a repository of another format.
fn target(req: &HttpRequest, repo: &Repository) -> Result<(Unit, String), ApiError> {
    let m = req.match_info();
    let seg = |n: &str| m.get(n).unwrap_or_default().to_string();
    let (branch, channel, arch, file) = (seg("branch"), seg("channel"), seg("arch"), seg("file"));
    let path = format!("{branch}/{channel}/{arch}/{file}");
    if repo.format != Format::Apk {
        return Err(not_found(repo, &path));
    }
    let unit = Unit::new(&branch, &channel, &arch).map_err(|e| ApiError::bad_request(e).plain())?;
    if !packyard_codecs::apk::valid_segment(&file) {
        return Err(ApiError::bad_request(format!("invalid file name {file:?}")).plain());
    }
    Ok((unit, file))
}

/// A Go module path can have the shape of an APK file path (`example.com/m/@v/list`): such a
/// request to a Go repository is Go's.
fn is_go(repo: &Repository) -> bool {
    repo.format == Format::Go
}

async fn get(
    access: RepoAccess<Read>,
    req: HttpRequest,
    services: web::Data<Services>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if is_go(&access.repo) {
        let action = packyard_core::security::Action::Read;
        return super::go::handle(&req, &services, &access.repo, &access.caller, action, body).await;
    }
    let (unit, file) = target(&req, &access.repo)?;
    serve(&services, &req, &access.repo, &unit, &file, 0).await
}

/// Deepest group nesting followed.
const MAX_DEPTH: usize = 8;

/// A file of `repo`'s `unit`: a hosted repository's own, a proxy's upstream's (unchanged), a
/// group's index (published on first request when a member has the unit) or a package from the
/// member whose record the group's index lists.
async fn serve(
    services: &Services,
    req: &HttpRequest,
    repo: &Repository,
    unit: &Unit,
    file: &str,
    depth: usize,
) -> Result<HttpResponse, ApiError> {
    let path = format!("{}/{file}", unit.key());
    if repo.repo_type != RepoType::Hosted {
        let settings = repo.settings.apk.clone().unwrap_or_default();
        if !settings.architectures.contains(&unit.arch) {
            return Err(ApiError::not_found(format!(
                "architecture {:?} is not served by {} repository {}; served: {}",
                unit.arch,
                repo.repo_type,
                repo.name,
                settings.architectures.join(", ")
            ))
            .plain());
        }
    }
    match repo.repo_type {
        RepoType::Proxy => {
            if file != INDEX_FILE && !file.ends_with(".apk") {
                return Err(not_found(repo, &path));
            }
            let fetch = packyard_formats::apk::proxy_request(repo, &path).map_err(super::proxy_error)?;
            let outcome = services.proxy.fetch(fetch).await.map_err(super::proxy_error)?;
            let kind = if file == INDEX_FILE { "application/gzip" } else { APK_TYPE };
            super::serve_proxied(services, repo, req, &path, outcome, kind).await
        }
        RepoType::Group if file == INDEX_FILE => {
            let found = match super::published_file(services, repo, KIND, &unit.key(), &path).await? {
                Some(f) => Some(f),
                None => publish_group_unit(services, repo, unit, &path).await?,
            };
            found.map(|f| super::serve_published(req, f)).ok_or_else(|| not_found(repo, &path))
        }
        RepoType::Group => {
            if depth >= MAX_DEPTH {
                return Err(ApiError::internal(format!("group {} nests deeper than {MAX_DEPTH}", repo.name)).plain());
            }
            // Read in place: no copy of the whole `.members` file per package request.
            let members =
                super::published_file(services, repo, KIND, &unit.key(), &group::members_path(&unit.key())).await?;
            let text = members.as_ref().and_then(|f| std::str::from_utf8(&f.bytes).ok()).unwrap_or_default();
            let Some(member) = group::member_of(text, file) else { return Err(not_found(repo, &path)) };
            let member = services
                .security
                .repository(member)
                .await
                .map_err(|e| ApiError::from(e).plain())?
                .ok_or_else(|| ApiError::not_found(format!("group member {member} is gone")).plain())?;
            Box::pin(serve(services, req, &member, unit, file, depth + 1)).await
        }
        RepoType::Hosted if file == INDEX_FILE => {
            let f = match super::published_file(services, repo, KIND, &unit.key(), &path).await? {
                Some(f) => f,
                None => empty_index(services, repo, unit, &path).await?,
            };
            Ok(super::serve_published(req, f))
        }
        RepoType::Hosted => {
            // Warmed: the path's blob from the replica's cache, no query.
            let (sha256, size) = match services.published.artifact(repo.id, &path) {
                Some(found) => found,
                None => {
                    let epoch = services.published.epoch();
                    let pkg = packyard_formats::apk::rows::rows(&services.db)
                        .apk_by_path(repo.id, &path)
                        .await
                        .map_err(|e| ApiError::from(e).plain())?
                        .ok_or_else(|| not_found(repo, &path))?;
                    services.published.put_artifact(epoch, repo.id, &path, &pkg.sha256, pkg.size);
                    (std::sync::Arc::from(pkg.sha256.as_str()), pkg.size)
                }
            };
            let size = u64::try_from(size).ok();
            super::serve_blob(req, services.blobs.as_ref(), &sha256, APK_TYPE, None, size, &[]).await
        }
    }
}

/// The index of a hosted unit without packages (an empty repository, or a branch nothing was
/// uploaded to yet): empty and signed, so that `apk update` works before the first upload. Made
/// once per replica and kept until the repository's watermark moves; only for the configured
/// architectures.
async fn empty_index(
    services: &Services,
    repo: &Repository,
    unit: &Unit,
    path: &str,
) -> Result<packyard_core::publication::cache::ServedFile, ApiError> {
    let settings = repo.settings.apk.clone().unwrap_or_default();
    if !settings.architectures.contains(&unit.arch) {
        return Err(ApiError::not_found(format!(
            "architecture {:?} is not configured for repository {}; configured: {}",
            unit.arch,
            repo.name,
            settings.architectures.join(", ")
        ))
        .plain());
    }
    if let Some(f) = services.published.made(repo.id, path) {
        return Ok(f);
    }
    let epoch = services.published.epoch();
    let internal = |e: &dyn std::fmt::Display| ApiError::internal(e).plain();
    let key = packyard_formats::apk::keys::current(&services.db, &services.security.keystore, repo.id)
        .await
        .map_err(|e| internal(&e))?;
    let key_file = key.file_name(repo.name.as_str()).map_err(|e| internal(&e))?;
    let description = format!("{} {}", repo.name, unit.key());
    let now = packyard_store::db::now_ms();
    let mtime = u64::try_from(now / 1000).unwrap_or(0);
    let bytes = tokio::task::spawn_blocking(move || {
        packyard_codecs::apk::index::signed_index(&description, "", &key, &key_file, mtime)
    })
    .await
    .map_err(|e| ApiError::internal(e).plain())?
    .map_err(|e| ApiError::internal(e).plain())?;
    use sha2::Digest as _;
    let file = packyard_core::publication::cache::ServedFile {
        etag: format!("\"{}\"", hex::encode(sha2::Sha256::digest(&bytes))),
        bytes: bytes.into(),
        modified: now,
        content_type: "application/gzip".into(),
    };
    services.published.put_made(epoch, repo.id, path, file.clone());
    Ok(file)
}

/// A group's unit asked for the first time: published now (and waited for, up to 30 s) when a
/// member has it, so that `apk update` against a group needs no set-up per branch.
async fn publish_group_unit(
    services: &Services,
    repo: &Repository,
    unit: &Unit,
    path: &str,
) -> Result<Option<packyard_core::publication::cache::ServedFile>, ApiError> {
    let db = &services.db;
    let db_err = |e: packyard_store::db::DbError| ApiError::from(e).plain();
    if db.unit_by_key(repo.id, KIND, &unit.key()).await.map_err(db_err)?.is_none() {
        let has = group::any_member_has(db, services.blobs.as_ref(), &services.proxy, repo, unit)
            .await
            .map_err(|e| ApiError::new(ErrorCode::BadGateway, e.to_string()).plain())?;
        if !has {
            return Ok(None);
        }
        db.request_changes(repo.id, &[(KIND.to_string(), unit.key())]).await.map_err(db_err)?;
        services.wake();
    }
    let Some(u) = db.unit_by_key(repo.id, KIND, &unit.key()).await.map_err(db_err)? else { return Ok(None) };
    if u.current_snapshot_id.is_none() {
        let done = wait_until_published(db, u.id, u.desired_revision, Duration::from_secs(30)).await.map_err(db_err)?;
        if !done {
            return Err(ApiError::new(
                ErrorCode::ServiceUnavailable,
                format!("group {} is building its {} index; retry shortly", repo.name, unit.key()),
            )
            .plain());
        }
    }
    services.published.invalidate();
    super::published_file(services, repo, KIND, &unit.key(), path).await
}

const APK_TYPE: &str = "application/octet-stream";

#[derive(Deserialize)]
pub struct UploadQuery {
    #[serde(default)]
    wait: bool,
}

fn hosted_only(repo: &Repository, what: &str) -> Result<(), ApiError> {
    if repo.repo_type == RepoType::Hosted {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("repository {} is a {} repository; {what} a hosted one", repo.name, repo.repo_type),
    )
    .plain())
}

async fn put(
    access: RepoAccess<Write>,
    req: HttpRequest,
    services: web::Data<Services>,
    q: web::Query<UploadQuery>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if is_go(&access.repo) {
        let action = packyard_core::security::Action::Write;
        return super::go::handle(&req, &services, &access.repo, &access.caller, action, body).await;
    }
    let repo = &access.repo;
    let (unit, file) = target(&req, repo)?;
    hosted_only(repo, "upload to")?;
    let up = hosted::upload(&services, repo, &unit, &file, body, access.caller.username())
        .await
        .map_err(super::upload_error)?;
    let stored = super::Stored {
        caller: &access.caller,
        action: "apk.upload",
        target: format!("{}/{}", repo.name, up.package.path),
        sha256: &up.package.sha256,
        created: up.created,
        unit_id: up.unit_id,
        revision: up.revision,
    };
    let body = serde_json::json!({
        "package": up.package.name,
        "version": up.package.version,
        "path": up.package.path,
        "checksum": up.package.checksum,
        "sha256": up.package.sha256,
        "size": up.package.size,
    });
    super::after_upload(&services, stored, q.wait, body).await
}

async fn delete(
    access: RepoAccess<Delete>,
    req: HttpRequest,
    services: web::Data<Services>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if is_go(&access.repo) {
        let action = packyard_core::security::Action::Delete;
        return super::go::handle(&req, &services, &access.repo, &access.caller, action, body).await;
    }
    let repo = &access.repo;
    let (unit, file) = target(&req, repo)?;
    hosted_only(repo, "delete from")?;
    let path = format!("{}/{file}", unit.key());
    match hosted::delete(&services, repo, &path).await.map_err(super::upload_error)? {
        Some(_) => {
            services
                .security
                .audit(
                    access.caller.username(),
                    Some(access.caller.addr),
                    "apk.delete",
                    &format!("{}/{path}", repo.name),
                    serde_json::json!({}),
                )
                .await;
            Ok(HttpResponse::NoContent().finish())
        }
        None => Err(not_found(repo, &path)),
    }
}

/// The repository's index keys: the current one and, after a rotation, the previous one.
async fn keys(services: &Services, repo: &Repository) -> Result<Vec<(String, String)>, ApiError> {
    if repo.format != Format::Apk {
        return Err(not_found(repo, "keys/"));
    }
    if repo.repo_type == RepoType::Proxy {
        return Err(ApiError::not_found(format!(
            "proxy repository {} serves its upstream's signatures unchanged; trust the upstream's key",
            repo.name
        ))
        .plain());
    }
    let ks = &services.security.keystore;
    let internal = |e: &dyn std::fmt::Display| ApiError::internal(e).plain();
    let mut out = Vec::new();
    let current = packyard_formats::apk::keys::current(&services.db, ks, repo.id).await.map_err(|e| internal(&e))?;
    out.push((
        current.file_name(repo.name.as_str()).map_err(|e| internal(&e))?,
        current.public_pem().map_err(|e| internal(&e))?,
    ));
    if let Some(p) = packyard_formats::apk::keys::previous(&services.db, ks, repo.id).await.map_err(|e| internal(&e))? {
        out.push((
            p.file_name(repo.name.as_str()).map_err(|e| internal(&e))?,
            p.public_pem().map_err(|e| internal(&e))?,
        ));
    }
    Ok(out)
}

/// `keys/`: the key file names, one per line (the first signs the indexes).
async fn key_list(access: RepoAccess<Read>, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    let names: Vec<String> = keys(&services, &access.repo).await?.into_iter().map(|(n, _)| n + "\n").collect();
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(names.concat()))
}

/// `keys/<keyname>`: the SPKI PEM public key to save as `/etc/apk/keys/<keyname>`.
async fn key_file(
    access: RepoAccess<Read>,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let name = req.match_info().get("keyname").unwrap_or_default();
    let all = keys(&services, &access.repo).await?;
    match all.iter().find(|(n, _)| n == name) {
        Some((_, pem)) => Ok(HttpResponse::Ok().content_type("application/x-pem-file").body(pem.clone())),
        None => Err(ApiError::not_found(format!(
            "no key {name:?} in repository {}; its index key is {}",
            access.repo.name,
            all.first().map_or("", |(n, _)| n.as_str())
        ))
        .plain()),
    }
}
