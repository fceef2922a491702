//! Go routes (the GOPROXY protocol) below `/repository/<name>/`: `<module>/@v/list`,
//! `<module>/@latest`, `<module>/@v/<version>.info|.mod|.zip` (module and version case-encoded),
//! `sumdb/…` (404: "go direct"); `PUT <module>/@v/<version>.zip` and the Nexus-style
//! `PUT <version>.zip`. A read the protocol does not know is a 404 with a plain-text message,
//! never a 400: the go command probes every prefix of a package path.

use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse};
use packyard_shared::formats::go::hosted::{self, UploadError};
use packyard_shared::formats::go::zip::ZipError;
use packyard_shared::formats::go::{unescape, KIND};
use packyard_shared::repos::{Format, RepoType, Repository};
use packyard_shared::security::Action;
use packyard_shared::services::Services;

use crate::auth::{authorize_repo, Caller};
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/{tail:.+}").to(route));
}

/// Every Go request, and whatever else reached the end of the repository's routes.
async fn route(req: HttpRequest, services: web::Data<Services>, body: web::Payload) -> Result<HttpResponse, ApiError> {
    let Some(action) = crate::repository::action_for(req.method()) else {
        return crate::repository::fallback(req).await;
    };
    let (caller, repo) = authorize_repo(&req, action).await?;
    if repo.format != Format::Go {
        return crate::repository::fallback(req).await;
    }
    handle(&req, &services, &repo, &caller, action, body).await
}

/// The path below the repository, percent-decoded.
fn tail(req: &HttpRequest, repo: &Repository) -> String {
    let prefix = format!("/repository/{}/", repo.name);
    let raw = req.path().strip_prefix(&prefix).unwrap_or_default();
    crate::repository::percent_decode(raw).unwrap_or_default()
}

fn not_found(message: impl Into<String>) -> ApiError {
    ApiError::not_found(message).plain()
}

/// A Go request (also reached from routes of other formats whose shape it shares).
pub async fn handle(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    caller: &Caller,
    action: Action,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let path = tail(req, repo);
    match action {
        Action::Read => read(req, services, repo, &path).await,
        Action::Write if req.method() == Method::PUT => upload(services, repo, caller, &path, body).await,
        _ => Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{} is not part of the GOPROXY protocol; read with GET, publish with PUT <module>/@v/<version>.zip",
                req.method()
            ),
        )
        .plain()),
    }
}

/// `(module, rest)` of `<escaped module>/@v/<rest>` or `<escaped module>/@latest`.
enum Request {
    List(String),
    Latest(String),
    File { module: String, version: String, ext: &'static str },
}

fn parse(path: &str) -> Result<Request, String> {
    if let Some(module) = path.strip_suffix("/@latest") {
        return Ok(Request::Latest(unescape(module).map_err(|e| e.0)?));
    }
    let (module, file) = path.split_once("/@v/").ok_or_else(|| format!("{path:?} is not a GOPROXY path"))?;
    let module = unescape(module).map_err(|e| e.0)?;
    if file == "list" {
        return Ok(Request::List(module));
    }
    for ext in ["info", "mod", "zip"] {
        if let Some(v) = file.strip_suffix(&format!(".{ext}")) {
            let version = unescape(v).map_err(|e| e.0)?;
            return Ok(Request::File { module, version, ext });
        }
    }
    Err(format!("{file:?} is not list, <version>.info, .mod or .zip"))
}

async fn read(req: &HttpRequest, services: &Services, repo: &Repository, path: &str) -> Result<HttpResponse, ApiError> {
    if path.starts_with("sumdb/") {
        return Err(not_found("this proxy does not serve a checksum database: go verifies against its own (or set GONOSUMDB for private modules)"));
    }
    let request = parse(path).map_err(|e| not_found(format!("not found: {e}")))?;
    if repo.repo_type != RepoType::Hosted {
        return Err(not_found(format!("{} repository {} does not serve Go modules yet", repo.repo_type, repo.name)));
    }
    let (module, file) = match &request {
        Request::List(m) => (m.as_str(), "@v/list".to_string()),
        Request::Latest(m) => (m.as_str(), "@latest".to_string()),
        Request::File { module, version, ext: "info" } => (module.as_str(), format!("@v/{version}.info")),
        Request::File { module, version, ext } => return artifact(req, services, repo, module, version, ext).await,
    };
    let found = services
        .published
        .file(&services.db, services.blobs.as_ref(), repo.id, KIND, module, &file)
        .await
        .map_err(|e| ApiError::internal(e).plain())?;
    match found {
        Some(f) => Ok(super::serve_published(req, f)),
        None => Err(not_found(format!("not found: {module}/{file} in repository {}", repo.name))),
    }
}

/// A version's `.mod` or `.zip`: the blob named by its row (cached per replica once read).
async fn artifact(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    module: &str,
    version: &str,
    ext: &str,
) -> Result<HttpResponse, ApiError> {
    let key = format!("{module}/@v/{version}.{ext}");
    let (sha256, size) = match services.published.artifact(repo.id, &key) {
        Some(found) => found,
        None => {
            let epoch = services.published.epoch();
            let v = services
                .db
                .go_version(repo.id, module, version)
                .await
                .map_err(|e| ApiError::from(e).plain())?
                .ok_or_else(|| not_found(format!("not found: {module}@{version} in repository {}", repo.name)))?;
            let (m, z) = (format!("{module}/@v/{version}.mod"), format!("{module}/@v/{version}.zip"));
            services.published.put_artifact(epoch, repo.id, &m, &v.mod_sha256, v.mod_size);
            services.published.put_artifact(epoch, repo.id, &z, &v.zip_sha256, v.zip_size);
            if ext == "mod" {
                (std::sync::Arc::from(v.mod_sha256.as_str()), v.mod_size)
            } else {
                (std::sync::Arc::from(v.zip_sha256.as_str()), v.zip_size)
            }
        }
    };
    let content_type = if ext == "mod" { "text/plain; charset=utf-8" } else { "application/zip" };
    super::serve_blob(req, services.blobs.as_ref(), &sha256, content_type, None, u64::try_from(size).ok(), &[]).await
}

fn upload_error(e: UploadError) -> ApiError {
    let api = match e {
        UploadError::Invalid(m) | UploadError::Interrupted(m) => ApiError::bad_request(m),
        e @ UploadError::Zip(ZipError::TooLarge { .. }) => ApiError::new(ErrorCode::PayloadTooLarge, e.to_string()),
        e @ UploadError::Zip(_) => ApiError::bad_request(e.to_string()),
        UploadError::Conflict(m) => ApiError::new(ErrorCode::Conflict, m),
        UploadError::ReadOnly(m) => ApiError::forbidden(m),
        UploadError::Blob(b) => b.into(),
        UploadError::Db(d) => d.into(),
    };
    api.plain()
}

/// `PUT <module>/@v/<version>.zip` or `PUT <version>.zip`; returns once `list` and `@latest`
/// include the version (read-your-writes).
async fn upload(
    services: &Services,
    repo: &Repository,
    caller: &Caller,
    path: &str,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    if repo.repo_type != RepoType::Hosted {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("repository {} is a {} repository; publish to a hosted one", repo.name, repo.repo_type),
        )
        .plain());
    }
    let expected = if path.contains('/') {
        match parse(path) {
            Ok(Request::File { module, version, ext: "zip" }) => Some((module, version)),
            Ok(_) => {
                return Err(ApiError::new(
                    ErrorCode::MethodNotAllowed,
                    format!("publish a module with PUT <module>/@v/<version>.zip, not PUT {path}"),
                )
                .plain())
            }
            Err(e) => return Err(ApiError::bad_request(e).plain()),
        }
    } else {
        if !path.ends_with(".zip") {
            return Err(ApiError::bad_request(format!(
                "publish with PUT <version>.zip or <module>/@v/<version>.zip, not {path:?}"
            ))
            .plain());
        }
        None
    };
    if let Some((m, v)) = &expected {
        hosted::check_coordinate(m, v).map_err(upload_error)?;
    }
    let up = hosted::upload(
        services,
        repo,
        expected.as_ref().map(|(m, v)| (m.as_str(), v.as_str())),
        body,
        caller.username(),
    )
    .await
    .map_err(upload_error)?;
    let stored = super::Stored {
        caller,
        action: "go.upload",
        target: format!("{}/{}@{}", repo.name, up.version.module, up.version.version),
        sha256: &up.version.zip_sha256,
        created: up.created,
        unit_id: up.unit_id,
        revision: up.revision,
    };
    let body = serde_json::json!({
        "module": up.version.module,
        "version": up.version.version,
        "sha256": up.version.zip_sha256,
        "size": up.version.zip_size,
    });
    super::after_upload(services, stored, true, body).await
}
