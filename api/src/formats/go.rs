//! Go routes (the GOPROXY protocol) below `/repository/<name>/`: `<module>/@v/list`,
//! `<module>/@latest`, `<module>/@v/<version>.info|.mod|.zip` (module and version case-encoded),
//! `sumdb/…` (404: "go direct"); `PUT <module>/@v/<version>.zip` and the Nexus-style
//! `PUT <version>.zip`. A read the protocol does not know is a 404 with a plain-text message,
//! never a 400: the go command probes every prefix of a package path.

use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse};
use packyard_codecs::go::version::{latest, list};
use packyard_codecs::go::{escape, unescape};
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_formats::go::hosted;
use packyard_formats::go::KIND;
use packyard_model::repos::{Format, RepoType, Repository};

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
        Action::Delete => delete(services, repo, caller, &path).await,
        _ => Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{} is not part of the GOPROXY protocol; read with GET, publish with PUT <module>/@v/<version>.zip, remove with DELETE",
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
    match repo.repo_type {
        RepoType::Group => group_read(req, services, repo, &request).await,
        _ => member_read(req, services, repo, &request)
            .await?
            .ok_or_else(|| not_found(format!("not found: {} in repository {}", request.path(), repo.name))),
    }
}

impl Request {
    fn module(&self) -> &str {
        match self {
            Self::List(m) | Self::Latest(m) => m,
            Self::File { module, .. } => module,
        }
    }

    /// The request's path as the protocol writes it (case-encoded).
    fn path(&self) -> String {
        match self {
            Self::List(m) => format!("{}/@v/list", escape(m)),
            Self::Latest(m) => format!("{}/@latest", escape(m)),
            Self::File { module, version, ext } => format!("{}/@v/{}.{ext}", escape(module), escape(version)),
        }
    }

    fn content_type(&self) -> &'static str {
        match self {
            Self::List(_) | Self::File { ext: "mod", .. } => "text/plain; charset=utf-8",
            Self::Latest(_) | Self::File { ext: "info", .. } => "application/json",
            Self::File { .. } => "application/zip",
        }
    }
}

/// A hosted or proxy repository's answer, or `None` for "not here" (404/410).
async fn member_read(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    request: &Request,
) -> Result<Option<HttpResponse>, ApiError> {
    match repo.repo_type {
        RepoType::Proxy => {
            let outcome = proxy_fetch(services, repo, request).await?;
            match outcome {
                packyard_core::proxy::Outcome::Missing(..) => Ok(None),
                found => super::serve_proxied(services, repo, req, &request.path(), found, request.content_type())
                    .await
                    .map(Some),
            }
        }
        RepoType::Hosted => {
            let (module, file) = match request {
                Request::List(m) => (m.as_str(), "@v/list".to_string()),
                Request::Latest(m) => (m.as_str(), "@latest".to_string()),
                Request::File { module, version, ext: "info" } => (module.as_str(), format!("@v/{version}.info")),
                Request::File { module, version, ext } => {
                    return artifact(req, services, repo, module, version, ext).await
                }
            };
            Ok(super::published_file(services, repo, KIND, module, &file)
                .await?
                .map(|f| super::serve_published(req, f)))
        }
        RepoType::Group => Err(ApiError::internal("a nested group is read through group_read").plain()),
    }
}

/// A proxy's fetch of a request: `list` and `@latest` are metadata, the rest never changes.
async fn proxy_fetch(
    services: &Services,
    repo: &Repository,
    request: &Request,
) -> Result<packyard_core::proxy::Outcome, ApiError> {
    use packyard_core::proxy::{FetchRequest, Freshness};
    // Only a canonical version's files never change upstream; `@v/main.info` or `@v/v1.2.info`
    // (a branch, a partial version) resolve anew.
    let freshness = match request {
        Request::File { version, .. }
            if packyard_codecs::go::Version::parse(version).is_ok_and(|v| v.canonical() == *version) =>
        {
            Freshness::Immutable
        }
        _ => Freshness::Metadata,
    };
    let mut fetch = FetchRequest::new(repo, &request.path(), freshness).map_err(super::proxy_error)?;
    fetch.negative_statuses = &[404, 410];
    services.proxy.fetch(fetch).await.map_err(super::proxy_error)
}

/// The text a proxy fetched for a request (`None`: the upstream does not have it).
async fn proxied_text(services: &Services, repo: &Repository, request: &Request) -> Result<Option<String>, ApiError> {
    match proxy_fetch(services, repo, request).await? {
        packyard_core::proxy::Outcome::Found(entry, _) => {
            let digest = packyard_store::blobs::Sha256Hex::parse(entry.sha256.as_deref().unwrap_or_default())
                .map_err(|e| ApiError::from(e).plain())?;
            let bytes = services.blobs.read_all(&digest).await.map_err(|e| ApiError::from(e).plain())?;
            Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
        }
        packyard_core::proxy::Outcome::Missing(..) => Ok(None),
    }
}

/// Deepest group nesting followed.
const MAX_DEPTH: usize = 8;

/// The text of a member's `list` or `@latest` (`None`: the member does not have the module).
async fn member_text(
    services: &Services,
    repo: &Repository,
    request: &Request,
    depth: usize,
) -> Result<Option<String>, ApiError> {
    match repo.repo_type {
        RepoType::Hosted => {
            let file = if matches!(request, Request::List(_)) { "@v/list" } else { "@latest" };
            Ok(super::published_file(services, repo, KIND, request.module(), file)
                .await?
                .map(|f| String::from_utf8_lossy(&f.bytes).into_owned()))
        }
        RepoType::Proxy => proxied_text(services, repo, request).await,
        RepoType::Group => {
            if depth >= MAX_DEPTH {
                return Err(ApiError::internal(format!("group {} nests deeper than {MAX_DEPTH}", repo.name)).plain());
            }
            let merged = Box::pin(merged_versions(services, repo, request.module(), depth + 1)).await?;
            match (request, merged) {
                (Request::List(_), Some(merged)) => Ok(Some(list(merged.iter().map(String::as_str)))),
                (Request::List(_), None) => Ok(None),
                (_, merged) => {
                    let merged = merged.unwrap_or_default();
                    Ok(Box::pin(group_latest_info(services, repo, request.module(), &merged, depth + 1)).await?)
                }
            }
        }
    }
}

/// Every version the group's members list for `module`, or `None` when no member knows the
/// module. A member's failure is the group's: it never falls through to the next member.
async fn merged_versions(
    services: &Services,
    group: &Repository,
    module: &str,
    depth: usize,
) -> Result<Option<Vec<String>>, ApiError> {
    let mut all: Option<Vec<String>> = None;
    for member in members(services, group).await? {
        if let Some(text) = member_text(services, &member, &Request::List(module.to_string()), depth).await? {
            all.get_or_insert_with(Vec::new)
                .extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string));
        }
    }
    Ok(all)
}

/// The group's `@latest`: the latest listed version's `.info` from the first member that has it;
/// when no member lists a version, the highest of the members' own `@latest`.
async fn group_latest_info(
    services: &Services,
    group: &Repository,
    module: &str,
    listed: &[String],
    depth: usize,
) -> Result<Option<String>, ApiError> {
    let mut candidates: Vec<(String, String)> = Vec::new();
    if let Some(v) = latest(listed.iter().map(String::as_str)) {
        let info = Request::File { module: module.to_string(), version: v.to_string(), ext: "info" };
        for member in members(services, group).await? {
            if let Some(text) = member_info(services, &member, &info, depth).await? {
                return Ok(Some(text));
            }
        }
    }
    for member in members(services, group).await? {
        if let Some(text) = member_text(services, &member, &Request::Latest(module.to_string()), depth).await? {
            let version = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["Version"].as_str().map(str::to_string));
            if let Some(version) = version {
                candidates.push((version, text));
            }
        }
    }
    let best = latest(candidates.iter().map(|(v, _)| v.as_str())).map(str::to_string);
    Ok(best.and_then(|b| candidates.into_iter().find(|(v, _)| *v == b).map(|(_, t)| t)))
}

/// A member's `.info` text for a version.
async fn member_info(
    services: &Services,
    member: &Repository,
    info: &Request,
    depth: usize,
) -> Result<Option<String>, ApiError> {
    let Request::File { module, version, .. } = info else { return Ok(None) };
    match member.repo_type {
        RepoType::Hosted => Ok(super::published_file(services, member, KIND, module, &format!("@v/{version}.info"))
            .await?
            .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())),
        RepoType::Proxy => proxied_text(services, member, info).await,
        RepoType::Group => {
            for m in members(services, member).await? {
                if depth < MAX_DEPTH {
                    if let Some(t) = Box::pin(member_info(services, &m, info, depth + 1)).await? {
                        return Ok(Some(t));
                    }
                }
            }
            Ok(None)
        }
    }
}

/// A group's Go members, in order.
async fn members(services: &Services, group: &Repository) -> Result<Vec<std::sync::Arc<Repository>>, ApiError> {
    let mut out = Vec::with_capacity(group.members.len());
    for name in &group.members {
        if let Some(m) = services.security.repository(name).await.map_err(|e| ApiError::from(e).plain())? {
            if m.format == Format::Go {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// A group: `list` merged, de-duplicated and sorted; `@latest` over the merge; a concrete file
/// from the first member that has it.
async fn group_read(
    req: &HttpRequest,
    services: &Services,
    group: &Repository,
    request: &Request,
) -> Result<HttpResponse, ApiError> {
    let missing = || not_found(format!("not found: {} in repository {}", request.path(), group.name));
    match request {
        Request::List(_) | Request::Latest(_) => {
            let text = member_text(services, group, request, 0).await?.ok_or_else(missing)?;
            if matches!(request, Request::Latest(_)) && text.is_empty() {
                return Err(missing());
            }
            Ok(HttpResponse::Ok().content_type(request.content_type()).body(text))
        }
        Request::File { .. } => {
            for member in members(services, group).await? {
                let found = if member.repo_type == RepoType::Group {
                    match Box::pin(group_read(req, services, &member, request)).await {
                        Ok(r) => Some(r),
                        Err(e) if e.code == ErrorCode::NotFound => None,
                        Err(e) => return Err(e),
                    }
                } else {
                    member_read(req, services, &member, request).await?
                };
                if let Some(r) = found {
                    return Ok(r);
                }
            }
            Err(missing())
        }
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
) -> Result<Option<HttpResponse>, ApiError> {
    let key = format!("{module}/@v/{version}.{ext}");
    let (sha256, size) = match services.published.artifact(repo.id, &key) {
        Some(found) => found,
        None => {
            let epoch = services.published.epoch();
            let found = packyard_formats::go::rows::rows(&services.db)
                .go_version(repo.id, module, version)
                .await
                .map_err(|e| ApiError::from(e).plain())?;
            let Some(v) = found else { return Ok(None) };
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
    super::serve_blob(req, services.blobs.as_ref(), &sha256, content_type, None, u64::try_from(size).ok(), &[])
        .await
        .map(Some)
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
        hosted::check_coordinate(m, v).map_err(super::upload_error)?;
    }
    // Nexus style: the URL names the version, the zip the module.
    let url_version = if expected.is_none() {
        let v = path.strip_suffix(".zip").unwrap_or(path);
        Some(unescape(v).map_err(|e| ApiError::bad_request(e.0).plain())?)
    } else {
        None
    };
    let up = hosted::upload(
        services,
        repo,
        expected.as_ref().map(|(m, v)| (m.as_str(), v.as_str())),
        url_version.as_deref(),
        body,
        caller.username(),
    )
    .await
    .map_err(super::upload_error)?;
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

/// `DELETE <module>/@v/<version>.zip` (or `.mod`, `.info`: each names the version): the version
/// is removed and the module's projection republished; returns once `list` no longer has it.
async fn delete(services: &Services, repo: &Repository, caller: &Caller, path: &str) -> Result<HttpResponse, ApiError> {
    if repo.repo_type != RepoType::Hosted {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("repository {} is a {} repository; delete from a hosted one", repo.name, repo.repo_type),
        )
        .plain());
    }
    let (module, version) = match parse(path) {
        Ok(Request::File { module, version, .. }) => (module, version),
        Ok(_) => {
            return Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("delete a version with DELETE <module>/@v/<version>.zip, not DELETE {path}"),
            )
            .plain())
        }
        Err(e) => return Err(ApiError::bad_request(e).plain()),
    };
    let missing = || not_found(format!("not found: {module}@{version} in repository {}", repo.name));
    let Some((v, unit_id, revision)) =
        hosted::delete(services, repo, &module, &version).await.map_err(super::upload_error)?
    else {
        return Err(missing());
    };
    services
        .security
        .audit(
            caller.username(),
            Some(caller.addr),
            "go.delete",
            &format!("{}/{}@{}", repo.name, v.module, v.version),
            serde_json::json!({"sha256": v.zip_sha256}),
        )
        .await;
    super::wait_published(services, unit_id, revision).await?;
    Ok(HttpResponse::NoContent().finish())
}
