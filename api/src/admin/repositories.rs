//! `/api/v1/repositories`: repositories (admin), as core's typed service has them
//! (`packyard_core::admin::repositories`); the key routes serve each format's signing keys
//! (`FormatSpec::signing_keys`).

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::admin::repositories as service;
use packyard_core::admin::snapshots;
use packyard_core::formats::KeyChange;
use packyard_core::services::Services;
use packyard_model::repos::{RepoName, RepositorySpec};
use serde::Deserialize;

use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

type Result<T> = std::result::Result<T, ApiError>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    use crate::admin::resource::resource;
    cfg.service(resource("/repositories").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            resource("/repositories/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::patch().to(patch))
                .route(web::delete().to(delete)),
        )
        .service(resource("/repositories/{name}/status").route(web::get().to(status)))
        .service(resource("/repositories/{name}/rebuild").route(web::post().to(rebuild)))
        .service(
            resource("/repositories/{name}/policy/exceptions")
                .route(web::get().to(exceptions))
                .route(web::post().to(add_exception))
                .route(web::delete().to(remove_exception)),
        )
        .service(resource("/repositories/{name}/policy/preview").route(web::post().to(preview)))
        .service(
            resource("/repositories/{name}/snapshots")
                .route(web::get().to(snapshots))
                .route(web::post().to(create_snapshot)),
        )
        .service(
            resource("/repositories/{name}/snapshots/{snapshot}")
                .route(web::get().to(snapshot))
                .route(web::delete().to(delete_snapshot)),
        )
        .service(resource("/repositories/{name}/snapshots/{snapshot}/diff").route(web::get().to(snapshot_diff)))
        .service(
            resource("/repositories/{name}/pins")
                .route(web::get().to(pins))
                .route(web::post().to(pin))
                .route(web::delete().to(unpin)),
        )
        .service(resource("/repositories/{name}/copy").route(web::post().to(copy)))
        .service(resource("/repositories/{name}/move").route(web::post().to(move_components)))
        .service(
            resource("/repositories/{name}/signing-key")
                .route(web::get().to(signing_key))
                .route(web::put().to(change_signing_key)),
        )
        .service(
            resource("/repositories/{name}/signing-keys")
                .route(web::get().to(signing_keys))
                .route(web::post().to(add_signing_key)),
        )
        .service(
            resource("/repositories/{name}/signing-keys/{fingerprint}").route(web::delete().to(retire_signing_key)),
        );
}

/// `{name}` from the path, validated before any handler sees it.
#[derive(Debug, Deserialize)]
#[serde(try_from = "String")]
struct NamePath(RepoName);

impl TryFrom<String> for NamePath {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        RepoName::parse(&s).map(Self).map_err(|e| e.to_string())
    }
}

#[derive(Debug, Deserialize)]
struct RepoPath {
    name: NamePath,
}

/// `{name}/signing-keys/{fingerprint}`.
#[derive(Debug, Deserialize)]
struct KeyPath {
    name: NamePath,
    fingerprint: String,
}

impl RepoPath {
    fn name(&self) -> &str {
        self.name.0.as_str()
    }
}

async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(service::list(&services, packyard_formats::registry()).await?))
}

async fn create(admin: Admin, services: web::Data<Services>, body: web::Json<RepositorySpec>) -> Result<HttpResponse> {
    let view = service::create(&services, packyard_formats::registry(), admin.actor(), body.into_inner()).await?;
    Ok(HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/api/v1/repositories/{}", view.name)))
        .json(view))
}

async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(service::get(&services, packyard_formats::registry(), path.name()).await?))
}

/// `PUT`: the whole definition (format settings the repository has may not be left out).
async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<RepositorySpec>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok()
        .json(service::update(&services, formats, admin.actor(), path.name(), body.into_inner()).await?))
}

/// `PATCH`: a JSON merge patch (`application/merge-patch+json`, or `application/json`) over
/// the definition as GET shows it; what the patch does not name stays as it is.
async fn patch(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let content_type = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence != "application/merge-patch+json" && essence != "application/json" {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send a JSON merge patch with Content-Type: application/merge-patch+json",
        ));
    }
    let patch: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(service::patch(&services, formats, admin.actor(), path.name(), &patch).await?))
}

async fn delete(admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    service::delete(&services, packyard_formats::registry(), admin.actor(), path.name()).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Per publication unit: desired and published revision, last error, last publication.
async fn status(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(service::status(&services, packyard_formats::registry(), path.name()).await?))
}

/// Asks the worker to rebuild every publication unit of the repository.
async fn rebuild(admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Accepted().json(service::rebuild(&services, formats, admin.actor(), path.name()).await?))
}

/// The repository's policy exceptions (expired ones marked).
async fn exceptions(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(packyard_core::admin::policy::list(&services, formats, path.name()).await?))
}

/// Lets one version through the repository's policy until `expires_at`: 201 (200 when it
/// replaced the exception of that version).
async fn add_exception(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<packyard_core::admin::policy::NewException>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let (view, created) =
        packyard_core::admin::policy::add(&services, formats, admin.actor(), path.name(), body.into_inner()).await?;
    Ok(if created { HttpResponse::Created().json(view) } else { HttpResponse::Ok().json(view) })
}

/// Which current components a policy (the body's, or with an empty body the repository's own)
/// would hold back by its rules and enforced advisories.
async fn preview(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let policy = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid policy: {e}")))?)
    };
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(packyard_core::admin::policy::preview(&services, formats, path.name(), policy).await?))
}

#[derive(Debug, Deserialize)]
struct ExceptionQuery {
    name: String,
    version: String,
}

/// `DELETE …/policy/exceptions?name=&version=`: 204.
async fn remove_exception(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<ExceptionQuery>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let which = (query.name.as_str(), query.version.as_str());
    packyard_core::admin::policy::remove(&services, formats, admin.actor(), path.name(), which).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A snapshot with the URL clients point at.
#[derive(serde::Serialize)]
struct SnapshotAnswer {
    #[serde(flatten)]
    view: snapshots::SnapshotView,
    url: String,
}

impl SnapshotAnswer {
    fn of(req: &HttpRequest, view: snapshots::SnapshotView) -> Self {
        let url = crate::frontage::Base::of(req).url(&view.path);
        Self { view, url }
    }
}

#[derive(Debug, Deserialize)]
struct SnapshotsQuery {
    /// RFC 3339: only the snapshot that was the newest then.
    at: Option<String>,
}

/// `GET …/snapshots`: the repository's snapshots, newest first; `?at=<RFC 3339>`: the one that
/// was the newest then (404 when none was).
async fn snapshots(
    _admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<SnapshotsQuery>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    if let Some(at) = &query.at {
        let view = snapshots::at(&services, formats, path.name(), at).await?;
        return Ok(HttpResponse::Ok().json(SnapshotAnswer::of(&req, view)));
    }
    let all = snapshots::list(&services, formats, path.name()).await?;
    Ok(HttpResponse::Ok().json(all.into_iter().map(|v| SnapshotAnswer::of(&req, v)).collect::<Vec<_>>()))
}

/// `POST …/snapshots` (`{"name": …}`, optional): 201 with the snapshot and its `url`.
async fn create_snapshot(
    admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let new = if body.iter().all(u8::is_ascii_whitespace) {
        snapshots::NewSnapshot::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid snapshot request: {e}")))?
    };
    let formats = packyard_formats::registry();
    let view = snapshots::create(&services, formats, admin.actor(), path.name(), new).await?;
    Ok(HttpResponse::Created().json(SnapshotAnswer::of(&req, view)))
}

#[derive(Debug, Deserialize)]
struct SnapshotPath {
    name: NamePath,
    snapshot: String,
}

async fn snapshot(
    _admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<SnapshotPath>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let view = snapshots::get(&services, formats, path.name.0.as_str(), &path.snapshot).await?;
    Ok(HttpResponse::Ok().json(SnapshotAnswer::of(&req, view)))
}

async fn delete_snapshot(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<SnapshotPath>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    snapshots::delete(&services, formats, admin.actor(), path.name.0.as_str(), &path.snapshot).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Debug, Deserialize)]
struct DiffQuery {
    to: String,
}

/// `GET …/snapshots/{a}/diff?to={b}`: the components added, removed and changed from a to b.
async fn snapshot_diff(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<SnapshotPath>,
    query: web::Query<DiffQuery>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let which = (path.snapshot.as_str(), query.to.as_str());
    Ok(HttpResponse::Ok().json(snapshots::diff(&services, formats, path.name.0.as_str(), which).await?))
}

/// `GET …/pins`: the repository's distributions (APT) or branches (APK) pointed at a snapshot.
async fn pins(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(packyard_core::admin::rollback::list(&services, formats, path.name()).await?))
}

/// `POST …/pins` (`{"snapshot", "units"}`): points units at a snapshot, published again as
/// their current index, signed anew; 200 with the repository's pins. `?wait=true` answers once
/// they are published.
async fn pin(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<WaitQuery>,
    body: web::Json<packyard_core::admin::rollback::PinRequest>,
) -> Result<HttpResponse> {
    use packyard_core::admin::rollback;
    let formats = packyard_formats::registry();
    let done = rollback::pin(&services, formats, admin.actor(), path.name(), body.into_inner()).await?;
    if query.wait {
        crate::formats::wait_published(&services, &done.changes).await.map_err(|e| e.0)?;
    }
    Ok(HttpResponse::Ok().json(rollback::list(&services, formats, path.name()).await?))
}

/// `DELETE …/pins` (`{"units"}`, optional: all): points units back at the repository's
/// packages; 200 with the pins left. `?wait=true` answers once they are published.
async fn unpin(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<WaitQuery>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    use packyard_core::admin::rollback;
    let request = if body.iter().all(u8::is_ascii_whitespace) {
        rollback::UnpinRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid request: {e}")))?
    };
    let formats = packyard_formats::registry();
    let done = rollback::unpin(&services, formats, admin.actor(), path.name(), request).await?;
    if query.wait {
        crate::formats::wait_published(&services, &done.changes).await.map_err(|e| e.0)?;
    }
    Ok(HttpResponse::Ok().json(rollback::list(&services, formats, path.name()).await?))
}

/// The body of a copy or a move.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CopyBody {
    to: String,
    /// Component ids, as Nexus's search and components API give them.
    #[serde(default)]
    components: Vec<String>,
    #[serde(default)]
    snapshot_diff: Option<packyard_core::admin::promotion::DiffSelection>,
    #[serde(default)]
    search: Option<packyard_core::admin::promotion::SearchSelection>,
    #[serde(default)]
    with_dependencies: bool,
}

#[derive(Debug, Deserialize)]
struct WaitQuery {
    #[serde(default)]
    wait: bool,
}

/// `POST …/copy`: 200 with `{copied, unchanged, removed}`; `?wait=true` answers once the
/// target has published them.
async fn copy(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<WaitQuery>,
    body: web::Json<CopyBody>,
) -> Result<HttpResponse> {
    promote(admin, services, path, query, body, false).await
}

/// `POST …/move`: a copy that removes the components from the source in the same transaction.
async fn move_components(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<WaitQuery>,
    body: web::Json<CopyBody>,
) -> Result<HttpResponse> {
    promote(admin, services, path, query, body, true).await
}

async fn promote(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    query: web::Query<WaitQuery>,
    body: web::Json<CopyBody>,
    moving: bool,
) -> Result<HttpResponse> {
    use packyard_core::admin::promotion::{self, PromotionError, Selection};
    let body = body.into_inner();
    let mut rows = Vec::with_capacity(body.components.len());
    for id in &body.components {
        let row = crate::nexus::component_row(id)
            .ok_or_else(|| ApiError::bad_request(format!("{id:?} is not a component id this server issued")))?;
        rows.push(row);
    }
    let selection = Selection {
        to: body.to,
        component_rows: rows,
        snapshot_diff: body.snapshot_diff.map(|d| (d.from, d.to)),
        search: body.search,
        with_dependencies: body.with_dependencies,
    };
    let formats = packyard_formats::registry();
    let done = match promotion::copy(&services, formats, admin.actor(), path.name(), selection, moving).await {
        Ok(done) => done,
        Err(PromotionError::Admin(e)) => return Err(e.into()),
        Err(PromotionError::Upload(e)) => return Err(e.into()),
    };
    if query.wait {
        crate::formats::wait_published(&services, &done.changes).await.map_err(|e| e.0)?;
    }
    Ok(HttpResponse::Ok().json(done))
}

/// This server's URL as the client sees it.
fn site(req: &HttpRequest) -> String {
    crate::frontage::Base::of(req).url("")
}

/// `GET …/signing-key`: the public part of the repository's signing key.
async fn signing_key(
    _admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(service::signing_key(&services, formats, &site(&req), path.name()).await?))
}

/// `PUT …/signing-key`: generates a new key or imports one, as the format's keys allow (APT
/// and APK rotate — the old key stays offered and every snapshot is re-signed —; a Go checksum
/// database's key is chosen only while it holds no record). The private key is never returned.
async fn change_signing_key(
    admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<KeyChange>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let key = service::change_signing_key(&services, formats, admin.actor(), &site(&req), path.name(), &body).await?;
    Ok(HttpResponse::Ok().json(key))
}

/// `GET …/signing-keys`: every key of the repository, the signing ones first.
async fn signing_keys(_admin: Admin, services: web::Data<Services>, path: web::Path<RepoPath>) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    Ok(HttpResponse::Ok().json(service::signing_keys(&services, formats, path.name()).await?))
}

/// `POST …/signing-keys`: a generated or imported key added beside the current one; both sign
/// until one is retired (201, the repository's keys).
async fn add_signing_key(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<RepoPath>,
    body: web::Json<KeyChange>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let keys = service::add_signing_key(&services, formats, admin.actor(), path.name(), &body).await?;
    Ok(HttpResponse::Created().json(keys))
}

/// `DELETE …/signing-keys/{fingerprint}`: the key retired (200, the repository's keys).
async fn retire_signing_key(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<KeyPath>,
) -> Result<HttpResponse> {
    let formats = packyard_formats::registry();
    let keys =
        service::retire_signing_key(&services, formats, admin.actor(), path.name.0.as_str(), &path.fingerprint).await?;
    Ok(HttpResponse::Ok().json(keys))
}
