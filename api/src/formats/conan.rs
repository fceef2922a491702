//! Conan 2 (REST v2) below `/repository/<name>/`, first part: `v1/ping` (the capabilities, to
//! anyone), `v2/users/authenticate` (Basic credentials → a bearer token that expires after
//! `conan.token_ttl_secs`, scoped to this repository, only its hash stored: an API token of the
//! security model; with an API token as the password, that token itself) and `v2/users/check_credentials` (401 when the token is missing, expired or
//! revoked, so that the client logs in again).

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::security::{tokens, Action, Principal};
use packyard_core::services::Services;
use packyard_model::repos::Format;

use crate::auth::{authorize_repo, Authenticated};
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::repository::fallback;
    cfg.service(
        web::resource("/v1/ping")
            .route(web::get().to(ping))
            .route(web::head().to(ping))
            .default_service(web::to(fallback)),
    )
    .service(
        web::resource("/v2/users/authenticate").route(web::get().to(authenticate)).default_service(web::to(fallback)),
    )
    .service(
        web::resource("/v2/users/check_credentials")
            .route(web::get().to(check_credentials))
            .default_service(web::to(fallback)),
    );
}

/// What the client checks first: the header says this remote speaks revisions.
pub const CAPABILITIES: (&str, &str) = ("X-Conan-Server-Capabilities", "revisions");

/// The repository of the path, if it is a Conan one (404 otherwise, as for any unknown path).
async fn conan_repo(
    services: &Services,
    req: &HttpRequest,
) -> Result<std::sync::Arc<packyard_model::repos::Repository>, ApiError> {
    let name = req.match_info().get("repo").unwrap_or_default();
    let path = req.match_info().unprocessed().trim_start_matches('/');
    match services.security.repository(name).await.map_err(|e| ApiError::from(e).plain())? {
        Some(r) if r.format == Format::Conan => Ok(r),
        Some(r) => Err(ApiError::not_found(format!("not found: /{path} in repository {}", r.name)).plain()),
        None => Err(ApiError::not_found(format!("repository {name} not found")).plain()),
    }
}

/// `GET v1/ping`: answered to anonymous callers too (the client pings before it logs in).
async fn ping(req: HttpRequest, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    conan_repo(&services, &req).await?;
    Ok(HttpResponse::Ok().insert_header(CAPABILITIES).finish())
}

/// `GET v2/users/authenticate` with Basic credentials: a bearer token for this repository.
async fn authenticate(
    user: Authenticated,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let repo = conan_repo(&services, &req).await?;
    // The user must be able to read the repository at all.
    authorize_repo(&req, Action::Read).await?;
    if let Principal::User { token: Some(_), .. } = user.0.principal.as_ref() {
        // Logged in with an API token as the password: the client uses that token itself (its
        // own scope and expiry); a bearer token cannot log in again.
        return match crate::auth::parse_authorization(&req)? {
            Some(packyard_core::security::service::Credentials::Basic { password, .. }) => {
                Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(password))
            }
            _ => Err(ApiError::unauthorized("log in with your user name and a password or API token").plain()),
        };
    }
    let ttl_ms = i64::try_from(services.config.conan.token_ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let new = tokens::generate();
    services
        .db
        .insert_token(
            &new.id,
            user.user_id(),
            &format!("conan login to {}", repo.name),
            &new.secret_hash,
            Some(repo.name.as_str()),
            None,
            Some(packyard_store::db::now_ms().saturating_add(ttl_ms)),
        )
        .await
        .map_err(|e| ApiError::from(e).plain())?;
    services
        .security
        .audit(
            user.username(),
            Some(user.0.addr),
            "conan.login",
            repo.name.as_str(),
            serde_json::json!({"token": new.id}),
        )
        .await;
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(new.token))
}

/// `GET v2/users/check_credentials`: 200 with the user name, or 401 (missing, expired or
/// revoked token: the client then logs in again).
async fn check_credentials(
    user: Authenticated,
    req: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    conan_repo(&services, &req).await?;
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(user.username().to_string()))
}

// ---- recipes and packages: `v2/conans/…` ----------------------------------------------------

use actix_web::http::Method;
use futures_util::StreamExt;
use packyard_codecs::conan::{check_file_path, check_revision, glob_matches, Manifest, Reference};
use packyard_formats::conan::publish as projection;
use packyard_formats::conan::rows::{ConanFile, ConanRevision, RevisionKey};
use packyard_model::repos::{RepoType, Repository};

use crate::error::ErrorCode;

pub fn configure_conans(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/v2/conans/{tail:.*}").to(conans));
}

/// What a `v2/conans/…` path names.
enum Target {
    Search,
    Latest(Reference),
    Revisions(Reference),
    /// `…/search` (latest recipe revision) or `…/revisions/{rrev}/search`.
    Packages(Reference, Option<String>),
    Revision(Reference, String),
    Files(Reference, String),
    File(Reference, String, String),
    AllPackages(Reference, String),
    PackageLatest(Reference, String, String),
    PackageRevisions(Reference, String, String),
    PackageRevision(Reference, String, String, String),
    PackageFiles(Reference, String, String, String),
    PackageFile(Reference, String, String, String, String),
}

fn bad(m: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(m.to_string()).plain()
}

fn parse(tail: &str) -> Result<Target, ApiError> {
    if tail == "search" {
        return Ok(Target::Search);
    }
    let s: Vec<&str> = tail.splitn(12, '/').collect();
    if s.len() < 5 {
        return Err(ApiError::not_found(format!("not found: v2/conans/{tail}")).plain());
    }
    let r = Reference::from_url(s[0], s[1], s[2], s[3]).map_err(bad)?;
    let rev = |i: usize, what: &str| -> Result<String, ApiError> {
        let v = s.get(i).copied().unwrap_or_default();
        check_revision(what, v).map_err(bad)?;
        Ok(v.to_string())
    };
    // The rest after `revisions/{rrev}/…` may hold a file path with `/`.
    let rest = |from: usize| -> String { tail.splitn(from + 1, '/').nth(from).unwrap_or_default().to_string() };
    let path = |from: usize| -> Result<String, ApiError> {
        let p = rest(from);
        check_file_path(&p).map_err(bad)?;
        Ok(p)
    };
    Ok(match &s[4..] {
        ["latest"] => Target::Latest(r),
        ["revisions"] => Target::Revisions(r),
        ["search"] => Target::Packages(r, None),
        ["revisions", _] => Target::Revision(r, rev(5, "recipe revision")?),
        ["revisions", _, "files"] => Target::Files(r, rev(5, "recipe revision")?),
        ["revisions", _, "files", ..] => Target::File(r, rev(5, "recipe revision")?, path(7)?),
        ["revisions", _, "search"] => Target::Packages(r, Some(rev(5, "recipe revision")?)),
        ["revisions", _, "packages"] => Target::AllPackages(r, rev(5, "recipe revision")?),
        ["revisions", _, "packages", _, "latest"] => {
            Target::PackageLatest(r, rev(5, "recipe revision")?, rev(7, "package id")?)
        }
        ["revisions", _, "packages", _, "revisions"] => {
            Target::PackageRevisions(r, rev(5, "recipe revision")?, rev(7, "package id")?)
        }
        ["revisions", _, "packages", _, "revisions", _] => {
            Target::PackageRevision(r, rev(5, "recipe revision")?, rev(7, "package id")?, rev(9, "package revision")?)
        }
        ["revisions", _, "packages", _, "revisions", _, "files"] => {
            Target::PackageFiles(r, rev(5, "recipe revision")?, rev(7, "package id")?, rev(9, "package revision")?)
        }
        ["revisions", _, "packages", _, "revisions", _, "files", ..] => Target::PackageFile(
            r,
            rev(5, "recipe revision")?,
            rev(7, "package id")?,
            rev(9, "package revision")?,
            path(11)?,
        ),
        _ => return Err(ApiError::not_found(format!("not found: v2/conans/{tail}")).plain()),
    })
}

fn db_err(e: packyard_store::db::DbError) -> ApiError {
    ApiError::from(e).plain()
}

async fn conans(req: HttpRequest, services: web::Data<Services>, body: web::Payload) -> Result<HttpResponse, ApiError> {
    let Some(action) = crate::repository::action_for(req.method()) else {
        return crate::repository::fallback(req).await;
    };
    let (caller, repo) = authorize_repo(&req, action).await?;
    if repo.format != Format::Conan {
        return crate::repository::fallback(req).await;
    }
    let tail = req.match_info().get("tail").unwrap_or_default().to_string();
    let target = parse(&tail)?;
    if repo.repo_type != RepoType::Hosted && !matches!(*req.method(), Method::GET | Method::HEAD) {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "repository {} is a {} repository: upload to and delete from a hosted one",
                repo.name, repo.repo_type
            ),
        )
        .plain());
    }
    match *req.method() {
        Method::GET | Method::HEAD => read_any(&req, &services, &repo, &tail, target, 0).await,
        Method::PUT => upload(&req, &services, &repo, &caller, target, body).await,
        Method::DELETE => delete(&services, &repo, &caller, target).await,
        _ => {
            Err(ApiError::new(ErrorCode::MethodNotAllowed, format!("{} is not part of Conan's API", req.method()))
                .plain())
        }
    }
}

/// Deepest group nesting followed.
const MAX_DEPTH: usize = 8;

/// A read of a hosted, proxy or group repository. A group asks its members in order and answers
/// with the first that has what was asked (so every file of a revision comes from the member
/// that listed it); its search merges the members' results.
async fn read_any(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    tail: &str,
    target: Target,
    depth: usize,
) -> Result<HttpResponse, ApiError> {
    match repo.repo_type {
        RepoType::Hosted => read(req, services, repo, target).await,
        RepoType::Proxy => proxy_read(req, services, repo, tail, &target).await,
        RepoType::Group => {
            if depth >= MAX_DEPTH {
                return Err(ApiError::internal(format!("group {} nests deeper than {MAX_DEPTH}", repo.name)).plain());
            }
            let members = group_members(services, repo).await?;
            if matches!(target, Target::Search) {
                let mut all = std::collections::BTreeSet::new();
                for m in &members {
                    let r = Box::pin(read_any(req, services, m, tail, Target::Search, depth + 1)).await?;
                    let body = actix_web::body::to_bytes(r.into_body())
                        .await
                        .map_err(|_| ApiError::internal("reading a member's search").plain())?;
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    all.extend(
                        v["results"].as_array().into_iter().flatten().filter_map(|x| x.as_str().map(str::to_string)),
                    );
                }
                return Ok(HttpResponse::Ok().json(serde_json::json!({ "results": all })));
            }
            for m in &members {
                let target = parse(tail)?;
                match Box::pin(read_any(req, services, m, tail, target, depth + 1)).await {
                    Ok(r) => return Ok(r),
                    Err(e) if e.code == ErrorCode::NotFound => continue,
                    // A member's failure is the group's: no falling through.
                    Err(e) => return Err(e),
                }
            }
            Err(not_found(format!("v2/conans/{tail} in group {}", repo.name)))
        }
    }
}

async fn group_members(services: &Services, group: &Repository) -> Result<Vec<std::sync::Arc<Repository>>, ApiError> {
    let mut out = Vec::new();
    for name in &group.members {
        if let Some(m) = services.security.repository(name).await.map_err(|e| ApiError::from(e).plain())? {
            if m.format == Format::Conan {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// A proxy: the upstream's answer for the same path, unchanged. Revision files never change
/// (a revision is immutable; `metadata/…` excepted); lists, `latest` and searches are metadata.
async fn proxy_read(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    tail: &str,
    target: &Target,
) -> Result<HttpResponse, ApiError> {
    use packyard_core::proxy::{FetchRequest, Freshness};
    let immutable = match target {
        Target::File(_, _, p) | Target::PackageFile(_, _, _, _, p) => !p.starts_with("metadata/"),
        _ => false,
    };
    let mut path = format!("v2/conans/{tail}");
    if !req.query_string().is_empty() {
        path.push('?');
        path.push_str(req.query_string());
    }
    let freshness = if immutable { Freshness::Immutable } else { Freshness::Metadata };
    let mut fetch = FetchRequest::new(repo, &path, freshness).map_err(super::proxy_error)?;
    fetch.negative_statuses = &[404];
    let outcome = services.proxy.fetch(fetch).await.map_err(super::proxy_error)?;
    let content_type = if immutable { "application/octet-stream" } else { "application/json" };
    super::serve_proxied(services, repo, req, &path, outcome, content_type).await
}

fn not_found(what: impl std::fmt::Display) -> ApiError {
    ApiError::not_found(format!("{what} not found")).plain()
}

/// A complete revision (recipe when `package` is `None`).
async fn complete(
    services: &Services,
    repo: &Repository,
    r: &Reference,
    rrev: &str,
    package: Option<(&str, &str)>,
) -> Result<ConanRevision, ApiError> {
    let (pkgid, prev) = package.unwrap_or(("", ""));
    let found = packyard_formats::conan::rows::rows(&services.db)
        .conan_revision(repo.id, &r.display(), rrev, pkgid, prev)
        .await
        .map_err(db_err)?;
    match found {
        Some(rev) if rev.complete => Ok(rev),
        _ => Err(match package {
            None => not_found(format!("recipe {}#{rrev}", r.display())),
            Some((p, v)) => not_found(format!("package {}#{rrev}:{p}#{v}", r.display())),
        }),
    }
}

async fn projected_json(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    r: &Reference,
    path: &str,
) -> Result<HttpResponse, ApiError> {
    match super::published_file(services, repo, projection::KIND, &r.display(), path).await? {
        Some(f) => Ok(super::serve_published(req, f)),
        None => Err(not_found(format!("{}: {path}", r.display()))),
    }
}

/// A file of a revision, streamed from its blob (listed by the projection, so no query).
async fn projected_file(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    r: &Reference,
    path: &str,
) -> Result<HttpResponse, ApiError> {
    let entry = services
        .published
        .entry(&services.db, repo.id, projection::KIND, &r.display(), path)
        .await
        .map_err(|e| ApiError::internal(e).plain())?
        .ok_or_else(|| not_found(format!("{}: {path}", r.display())))?;
    let size = u64::try_from(entry.size).ok();
    super::serve_blob(req, services.blobs.as_ref(), &entry.sha256, "application/octet-stream", None, size, &[]).await
}

/// A hosted repository's reads, all from published projections (warm: no query).
async fn read(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    target: Target,
) -> Result<HttpResponse, ApiError> {
    match target {
        Target::Search => {
            let q = web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
                .map(|q| q.get("q").cloned().unwrap_or_default())
                .unwrap_or_default();
            let found = super::published_file(
                services,
                repo,
                projection::SEARCH_KIND,
                projection::SEARCH_UNIT,
                projection::SEARCH_FILE,
            )
            .await?;
            let all: serde_json::Value =
                found.map(|f| serde_json::from_slice(&f.bytes).unwrap_or_default()).unwrap_or_default();
            // A pattern without `/` names the package (`conan search zlib`): match the name.
            let results: Vec<&str> = all["results"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
                .filter(|r| {
                    if q.contains('/') {
                        glob_matches(&q, r)
                    } else {
                        glob_matches(&q, r.split('/').next().unwrap_or(r))
                    }
                })
                .collect();
            Ok(HttpResponse::Ok().json(serde_json::json!({ "results": results })))
        }
        Target::Latest(r) => projected_json(req, services, repo, &r, "latest").await,
        Target::Revisions(r) => projected_json(req, services, repo, &r, "revisions").await,
        Target::Packages(r, rrev) => {
            let rrev = match rrev {
                Some(v) => v,
                None => {
                    let latest = super::published_file(services, repo, projection::KIND, &r.display(), "latest")
                        .await?
                        .ok_or_else(|| not_found(format!("recipe {}", r.display())))?;
                    let v: serde_json::Value = serde_json::from_slice(&latest.bytes).unwrap_or_default();
                    v["revision"].as_str().unwrap_or_default().to_string()
                }
            };
            projected_json(req, services, repo, &r, &format!("revisions/{rrev}/search")).await
        }
        Target::Files(r, rrev) => projected_json(req, services, repo, &r, &format!("revisions/{rrev}/files")).await,
        Target::File(r, rrev, path) => {
            projected_file(req, services, repo, &r, &format!("revisions/{rrev}/files/{path}")).await
        }
        Target::PackageLatest(r, rrev, pkgid) => {
            projected_json(req, services, repo, &r, &format!("revisions/{rrev}/packages/{pkgid}/latest")).await
        }
        Target::PackageRevisions(r, rrev, pkgid) => {
            projected_json(req, services, repo, &r, &format!("revisions/{rrev}/packages/{pkgid}/revisions")).await
        }
        Target::PackageFiles(r, rrev, pkgid, prev) => {
            projected_json(
                req,
                services,
                repo,
                &r,
                &format!("revisions/{rrev}/packages/{pkgid}/revisions/{prev}/files"),
            )
            .await
        }
        Target::PackageFile(r, rrev, pkgid, prev, path) => {
            let p = format!("revisions/{rrev}/packages/{pkgid}/revisions/{prev}/files/{path}");
            projected_file(req, services, repo, &r, &p).await
        }
        Target::Revision(..) | Target::AllPackages(..) | Target::PackageRevision(..) => {
            Err(ApiError::new(ErrorCode::MethodNotAllowed, "read a revision through its files; DELETE removes it")
                .plain())
        }
    }
}

/// After a committed change of `reference`: waits until its projection and the repository's
/// search index include it (read-your-writes for the client that uploaded).
async fn wait_republished(services: &Services, changes: &[(i64, i64)]) -> Result<(), ApiError> {
    services.wake();
    for (unit_id, revision) in changes {
        super::wait_published(services, *unit_id, *revision).await?;
    }
    Ok(())
}

/// The two units a change of `reference` republishes: its projection and the search index.
fn units_of(reference: &str) -> [(&'static str, String); 2] {
    [(projection::KIND, reference.to_string()), (projection::SEARCH_KIND, projection::SEARCH_UNIT.to_string())]
}

/// What an upload's transaction decided.
enum Recorded {
    /// The same bytes at a path of a complete revision: nothing changed.
    Same,
    /// Stored; `changes` are the publication changes recorded with it (none while the revision
    /// is incomplete); `completed` when this file completed the revision.
    Stored { changes: Vec<(i64, i64)>, completed: bool },
}

/// PUT of one file of a recipe or package revision. The revision stays invisible until its
/// `conanmanifest.txt` arrives and every uploaded file it lists has its MD5; a completed
/// revision's files never change (only `metadata/…` may be added or replaced). The file's row,
/// the revision's completion and the publication changes are one transaction; a refused upload
/// leaves nothing behind.
async fn upload(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    caller: &crate::auth::Caller,
    target: Target,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    use packyard_core::upload::{check_writable, discard, receive};
    let (r, rrev, package, path) = match target {
        Target::File(r, rrev, path) => (r, rrev, None, path),
        Target::PackageFile(r, rrev, pkgid, prev, path) => (r, rrev, Some((pkgid, prev)), path),
        _ => return Err(ApiError::new(ErrorCode::MethodNotAllowed, "upload with PUT …/files/<path>").plain()),
    };
    check_writable(repo).map_err(super::upload_error)?;
    let reference = r.display();
    if package.is_some() {
        // A package belongs to a complete recipe revision.
        complete(services, repo, &r, &rrev, None).await?;
    }
    let hashers = std::sync::Mutex::new(packyard_codecs::conan::FileHashes::default());
    let stream = body.inspect(|chunk| {
        if let (Ok(c), Ok(mut h)) = (chunk, hashers.lock()) {
            h.update(c);
        }
    });
    let limit = services.config.server.max_upload_bytes;
    let stored = receive(services, Box::pin(stream), limit, None).await.map_err(super::upload_error)?;
    let (md5, sha1) = match hashers.into_inner() {
        Ok(h) => h.finish(),
        Err(_) => {
            discard(services, &stored.sha256, stored.created).await;
            return Err(ApiError::internal("hashing the upload failed").plain());
        }
    };
    let file = ConanFile {
        path: path.clone(),
        sha256: stored.sha256.to_string(),
        size: i64::try_from(stored.size).unwrap_or(i64::MAX),
        md5,
        sha1,
    };
    let (pkgid, prev) = package.as_ref().map_or(("", ""), |(p, v)| (p.as_str(), v.as_str()));
    let key = RevisionKey { repo: repo.id, reference: &reference, rrev: &rrev, pkgid, prev };
    let recorded = record_file(req, services, key, &stored, &file, package.is_some()).await;
    let recorded = match recorded {
        Ok(r) => r,
        Err(e) => {
            discard(services, &stored.sha256, stored.created).await;
            return Err(e);
        }
    };
    if let Recorded::Stored { changes, completed } = recorded {
        if !changes.is_empty() {
            wait_republished(services, &changes).await?;
        }
        if completed {
            services
                .security
                .audit(
                    caller.username(),
                    Some(caller.addr),
                    "conan.upload",
                    &format!(
                        "{}/{reference}#{rrev}{}",
                        repo.name,
                        package.as_ref().map(|(p, v)| format!(":{p}#{v}")).unwrap_or_default()
                    ),
                    serde_json::json!({}),
                )
                .await;
        }
    }
    Ok(HttpResponse::Created().finish())
}

/// Checks a stored file (its `X-Checksum-Sha1`, a package archive read to its end, a manifest
/// against the revision's files) and records it in one transaction.
async fn record_file(
    req: &HttpRequest,
    services: &Services,
    key: RevisionKey<'_>,
    stored: &packyard_store::blobs::StoredBlob,
    file: &ConanFile,
    is_package: bool,
) -> Result<Recorded, ApiError> {
    if let Some(want) = req.headers().get("x-checksum-sha1").and_then(|v| v.to_str().ok()) {
        if !want.trim().eq_ignore_ascii_case(&file.sha1) {
            return Err(bad(format!(
                "X-Checksum-Sha1 says {want} but the body's SHA-1 is {}: the upload was corrupted",
                file.sha1
            )));
        }
    }
    if let Some(compression) = packyard_codecs::conan::archive_compression(&file.path) {
        check_archive(services, stored, compression, &file.path).await?;
    }
    let manifest = if file.path == "conanmanifest.txt" {
        let bytes = services.blobs.read_all(&stored.sha256).await.map_err(|e| ApiError::from(e).plain())?;
        Some(Manifest::parse(&String::from_utf8_lossy(&bytes)).map_err(bad)?)
    } else {
        None
    };
    let db = &services.db;
    let decided = packyard_store::db::retry_conflicts(|| async {
        let mut tx = db.pool().begin().await?;
        let rev = packyard_formats::conan::rows::rows(db).conan_ensure_revision_in(&mut tx, key).await?;
        let existing = packyard_formats::conan::rows::rows(db).conan_files_in(&mut tx, rev.id).await?;
        if rev.complete && !file.path.starts_with("metadata/") {
            let same = existing.iter().any(|f| f.path == file.path && f.sha256 == file.sha256);
            let outcome = if same {
                Ok(Recorded::Same)
            } else {
                Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "{}#{} is already uploaded with other content for {}; a revision never changes",
                        key.reference, key.rrev, file.path
                    ),
                )
                .plain())
            };
            return Ok(outcome);
        }
        let completes = manifest.is_some() && !rev.complete;
        if let (Some(manifest), true) = (&manifest, completes) {
            for f in existing.iter().filter(|f| f.path != file.path) {
                if let Some(want) = manifest.files.get(&f.path) {
                    if *want != f.md5 {
                        return Ok(Err(bad(format!(
                            "{} does not match conanmanifest.txt (MD5 {} listed, {} uploaded)",
                            f.path, want, f.md5
                        ))));
                    }
                }
            }
            let needed = if is_package { "conaninfo.txt" } else { "conanfile.py" };
            if !existing.iter().any(|f| f.path == needed) {
                return Ok(Err(bad(format!("conanmanifest.txt arrived before {needed}: upload {needed} first"))));
            }
        }
        db.claim_blob(&mut tx, &stored.sha256).await?;
        packyard_formats::conan::rows::rows(db).conan_put_file_in(&mut tx, rev.id, file).await?;
        if completes {
            packyard_formats::conan::rows::rows(db).conan_complete_in(&mut tx, rev.id).await?;
        }
        // A complete revision's projection changes with it (completed now, or a metadata file).
        let mut changes = Vec::new();
        if completes || rev.complete {
            for (kind, unit) in units_of(key.reference) {
                changes.push(db.record_change(&mut tx, key.repo, kind, &unit).await?);
            }
        }
        tx.commit().await?;
        Ok(Ok(Recorded::Stored { changes, completed: completes }))
    })
    .await
    .map_err(db_err)?;
    decided
}

/// A package archive (`conan_package.tgz`, `conan_export.tgz`, `conan_sources.tgz`, or their
/// xz and zstd forms) read to its end: every tar entry there and every checksum right.
async fn check_archive(
    services: &Services,
    stored: &packyard_store::blobs::StoredBlob,
    compression: packyard_codecs::archive::Compression,
    path: &str,
) -> Result<(), ApiError> {
    use packyard_codecs::archive::{check_tar, expansion_limit, ArchiveError};
    let (what, limit) = (path.to_string(), expansion_limit(stored.size));
    let checked =
        packyard_core::upload::read_back(services, &stored.sha256, move |r| check_tar(r, compression, &what, limit))
            .await
            .map_err(super::upload_error)?;
    match checked {
        Ok(_) => Ok(()),
        Err(e @ ArchiveError::TooLarge { .. }) => Err(ApiError::new(ErrorCode::PayloadTooLarge, e.to_string()).plain()),
        Err(e) => Err(bad(format!("{path} is not a whole archive: {e}"))),
    }
}

async fn delete(
    services: &Services,
    repo: &Repository,
    caller: &crate::auth::Caller,
    target: Target,
) -> Result<HttpResponse, ApiError> {
    let (r, rrev, package, packages_only) = match target {
        Target::Revision(r, rrev) => (r, rrev, None, false),
        Target::AllPackages(r, rrev) => (r, rrev, None, true),
        Target::PackageRevision(r, rrev, pkgid, prev) => (r, rrev, Some((pkgid, prev)), false),
        _ => {
            return Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                "DELETE a revision, its packages, or a package revision",
            )
            .plain())
        }
    };
    packyard_core::upload::check_writable(repo).map_err(super::upload_error)?;
    let reference = r.display();
    let pkg = package.as_ref().map(|(p, v)| (p.as_str(), v.as_str()));
    let db = &services.db;
    // The rows and the publication changes in one transaction: a deleted revision is never
    // left listed.
    let deleted = packyard_store::db::retry_conflicts(|| async {
        let mut tx = db.pool().begin().await?;
        let n = packyard_formats::conan::rows::rows(db)
            .conan_delete_in(&mut tx, repo.id, &reference, &rrev, pkg, packages_only)
            .await?;
        if n == 0 && !packages_only {
            return Ok(None);
        }
        let mut changes = Vec::new();
        for (kind, unit) in units_of(&reference) {
            changes.push(db.record_change(&mut tx, repo.id, kind, &unit).await?);
        }
        tx.commit().await?;
        Ok(Some((n, changes)))
    })
    .await
    .map_err(db_err)?;
    let Some((n, changes)) = deleted else { return Err(not_found(format!("{reference}#{rrev}"))) };
    services
        .security
        .audit(
            caller.username(),
            Some(caller.addr),
            "conan.delete",
            &format!("{}/{reference}#{rrev}", repo.name),
            serde_json::json!({"rows": n}),
        )
        .await;
    wait_republished(services, &changes).await?;
    Ok(HttpResponse::Ok().finish())
}
