//! APK's routes: `<branch>/<channel>/<arch>/APKINDEX.tar.gz` (the published, signed index; an
//! empty signed one for a unit nothing was uploaded to), `<branch>/<channel>/<arch>/<file>.apk`
//! (GET/HEAD with ranges, PUT to upload, DELETE), and `keys/`, `keys/<keyname>` (the index keys
//! as SPKI PEM, for `/etc/apk/keys/`).

use actix_web::http::Method;
use actix_web::HttpResponse;
use packyard_core::hosted;
use packyard_core::publication::cache::ServedFile;
use packyard_formats::apk::hosted::{ApkHosted, Target};
use packyard_formats::apk::settings::ApkSettings;
use packyard_formats::apk::{group, valid_segment, Unit, INDEX_FILE, KIND};
use packyard_model::repos::FormatSettings;
use packyard_model::repos::{RepoType, Repository};

use crate::error::{ApiError, FormatError};
use crate::route::{Access, Cx, Routes, Tail};

pub struct Apk;

/// A file of a unit: `<branch>/<channel>/<arch>/<file>`, each segment checked.
pub struct UnitFile {
    unit: Unit,
    file: String,
}

impl UnitFile {
    fn parse(branch: &str, channel: &str, arch: &str, file: &str) -> Result<Self, FormatError> {
        let unit = Unit::new(branch, channel, arch).map_err(ApiError::bad_request)?;
        if !valid_segment(file) {
            return Err(ApiError::bad_request(format!("invalid file name {file:?}")).into());
        }
        Ok(Self { unit, file: file.to_string() })
    }

    fn path(&self) -> String {
        format!("{}/{}", self.unit.key(), self.file)
    }
}

pub enum Route {
    Get(UnitFile),
    Put(UnitFile),
    Delete(UnitFile),
    Keys,
    Key(String),
    /// Nexus's components upload: `apk.asset` fields with `apk.branch`, `apk.repository` and
    /// `apk.architecture`.
    Form,
}

impl Routes for Apk {
    type Route = Route;

    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Route, Access), FormatError>> {
        let read = matches!(*method, Method::GET | Method::HEAD);
        let segments: Vec<&str> = tail.matched.split('/').collect();
        match segments.as_slice() {
            ["keys"] | ["keys", ""] if read => Some(Ok((Route::Keys, Access::READ))),
            ["keys", name] if read => Some(Ok((Route::Key((*name).to_string()), Access::READ))),
            [branch, channel, arch, file] => {
                let (route, access): (fn(UnitFile) -> Route, Access) = match *method {
                    Method::GET | Method::HEAD => (Route::Get, Access::READ),
                    Method::PUT => (Route::Put, Access::WRITE),
                    Method::DELETE => (Route::Delete, Access::DELETE),
                    _ => return None,
                };
                Some(UnitFile::parse(branch, channel, arch, file).map(|f| (route(f), access)))
            }
            _ => None,
        }
    }

    async fn serve(cx: Cx<'_>, route: Route) -> Result<HttpResponse, FormatError> {
        match route {
            Route::Get(f) => serve(&cx, &cx.repo.clone(), &f, 0).await,
            // Writes are boxed: their state is large, and the hot reads should not carry it.
            Route::Put(f) => Box::pin(put(cx, f)).await,
            Route::Form => Box::pin(form(cx)).await,
            Route::Delete(f) => {
                let path = f.path();
                match Box::pin(hosted::delete(&ApkHosted, cx.services, &cx.repo, &path, cx.caller.actor())).await? {
                    Some(_) => Ok(HttpResponse::NoContent().finish()),
                    None => Err(cx.not_found(&path)),
                }
            }
            Route::Keys => {
                let names: Vec<String> = keys(&cx).await?.into_iter().map(|(n, _)| n + "\n").collect();
                Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(names.concat()))
            }
            Route::Key(name) => {
                let all = keys(&cx).await?;
                match all.iter().find(|(n, _)| *n == name) {
                    Some((_, pem)) => Ok(HttpResponse::Ok().content_type("application/x-pem-file").body(pem.clone())),
                    None => Err(ApiError::not_found(format!(
                        "no key {name:?} in repository {}; its index key is {}",
                        cx.repo.name,
                        all.first().map_or("", |(n, _)| n.as_str())
                    ))
                    .into()),
                }
            }
        }
    }

    fn form_upload() -> Result<Route, String> {
        Ok(Route::Form)
    }

    /// A package (`<branch>/<channel>/<arch>/<name>-<version>.apk`, built once) of an
    /// architecture the proxy serves; an `APKINDEX.tar.gz` is what the snapshot holds.
    fn snapshot_fill(
        repo: &Repository,
        path: &str,
    ) -> Option<Result<packyard_core::proxy::FetchRequest, packyard_core::proxy::ProxyError>> {
        let [branch, channel, arch, file] = path.split('/').collect::<Vec<_>>()[..] else { return None };
        let f = UnitFile::parse(branch, channel, arch, file).ok()?;
        let served = ApkSettings::get(repo).architectures.contains(&f.unit.arch);
        (served && f.file.ends_with(".apk")).then(|| packyard_formats::apk::proxy_request(repo, &f.path()))
    }
}

const APK_TYPE: &str = "application/octet-stream";

/// A file of `repo`'s unit: a hosted repository's own, a proxy's upstream's (unchanged), a
/// group's index (published on first request when a member has the unit) or a package from the
/// member whose record the group's index lists.
async fn serve(cx: &Cx<'_>, repo: &Repository, f: &UnitFile, depth: usize) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    let (unit, file, path) = (&f.unit, f.file.as_str(), f.path());
    let missing = || FormatError::from(ApiError::not_found(format!("not found: /{path} in repository {}", repo.name)));
    if repo.repo_type != RepoType::Hosted {
        let settings = ApkSettings::get(repo);
        if !settings.architectures.contains(&unit.arch) {
            return Err(ApiError::not_found(format!(
                "architecture {:?} is not served by {} repository {}; served: {}",
                unit.arch,
                repo.repo_type,
                repo.name,
                settings.architectures.join(", ")
            ))
            .into());
        }
    }
    // A gated proxy publishes its own index of what its policy lets through (like a group of
    // its upstream alone), and answers a held package with the reason.
    let merged_index = file == INDEX_FILE && repo.publishes_merge();
    match repo.repo_type {
        RepoType::Proxy if !merged_index => {
            if file != INDEX_FILE && !file.ends_with(".apk") {
                return Err(missing());
            }
            let advisories = match repo.gate() {
                Some(_) => {
                    let units = [(unit.key(), group::policy_path(&unit.key()))];
                    super::gate::reported(services, repo, KIND, &units, (file, &path)).await?
                }
                None => None,
            };
            let fetch = packyard_formats::apk::proxy_request(repo, &path)?;
            let kind = if file == INDEX_FILE { "application/gzip" } else { APK_TYPE };
            let res = super::serve_proxied(services, repo, cx.req, fetch, kind).await?;
            Ok(super::gate::with_advisories(res, advisories))
        }
        RepoType::Group | RepoType::Proxy if file == INDEX_FILE => {
            let key = unit.key();
            if let Some(f) = super::published_file(services, repo, KIND, &key, &path).await? {
                return Ok(cx.serve_current(f));
            }
            let has = || async {
                group::any_member_has(&services.db, &packyard_core::groups::Reader::of(services), repo, unit)
                    .await
                    .map_err(|e| packyard_core::groups::GroupError::Upstream(e.to_string()))
            };
            if !packyard_core::groups::publish_on_first_request(services, repo, KIND, &key, has).await? {
                return Err(missing());
            }
            let found = super::published_file(services, repo, KIND, &key, &path).await?;
            found.map(|f| cx.serve_current(f)).ok_or_else(missing)
        }
        RepoType::Group | RepoType::Proxy => {
            // A gated group's policy first: it says why a package is not in its index.
            let mut advisories = None;
            if repo.gate().is_some() {
                let units = [(unit.key(), group::policy_path(&unit.key()))];
                advisories = super::gate::reported(services, repo, KIND, &units, (file, &path)).await?;
            }
            // Read in place: no copy of the whole `.members` file per package request.
            let members =
                super::published_file(services, repo, KIND, &unit.key(), &group::members_path(&unit.key())).await?;
            let text = members.as_ref().and_then(|f| std::str::from_utf8(&f.bytes).ok()).unwrap_or_default();
            let Some(member) = group::member_of(text, file) else { return Err(missing()) };
            let member = packyard_core::groups::member(services, repo, member, depth + 1).await?;
            let res = Box::pin(serve(cx, &member, f, depth + 1)).await?;
            Ok(super::gate::with_advisories(res, advisories))
        }
        RepoType::Hosted if file == INDEX_FILE => {
            let f = match super::published_file(services, repo, KIND, &unit.key(), &path).await? {
                Some(f) => f,
                None => empty_index(cx, repo, unit, &path).await?,
            };
            Ok(cx.serve_current(f))
        }
        RepoType::Hosted => {
            let db = &services.db;
            super::serve_hosted(cx, repo, &path, APK_TYPE, || async {
                let found = packyard_formats::apk::rows::served(db, repo.id, &path).await?;
                Ok(found.map(|(sha256, size, at)| super::ArtifactRef::new(&sha256, size, Some(at))))
            })
            .await
        }
    }
}

/// The index of a hosted unit without packages (an empty repository, or a branch nothing was
/// uploaded to yet): empty and signed, so that `apk update` works before the first upload. Made
/// once per replica and kept until the repository's watermark moves; only for the configured
/// architectures.
async fn empty_index(cx: &Cx<'_>, repo: &Repository, unit: &Unit, path: &str) -> Result<ServedFile, FormatError> {
    let services = cx.services;
    let settings = ApkSettings::get(repo);
    if !settings.architectures.contains(&unit.arch) {
        return Err(ApiError::not_found(format!(
            "architecture {:?} is not configured for repository {}; configured: {}",
            unit.arch,
            repo.name,
            settings.architectures.join(", ")
        ))
        .into());
    }
    if let Some(f) = services.published.made(repo.id, path) {
        return Ok(f);
    }
    let epoch = services.published.epoch();
    let named = packyard_formats::apk::keys::signing_named(&services.db, &services.security.keystore, repo)
        .await
        .map_err(ApiError::internal)?;
    let description = format!("{} {}", repo.name, unit.key());
    let now = packyard_store::db::now_ms();
    let mtime = u64::try_from(now / 1000).unwrap_or(0);
    let bytes = tokio::task::spawn_blocking(move || {
        packyard_codecs::apk::index::signed_index_all(&description, "", &named, mtime)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::internal)?;
    use sha2::Digest as _;
    let etag = format!("\"{}\"", hex::encode(sha2::Sha256::digest(&bytes)));
    let file = ServedFile::new(bytes.into(), Some(now), "application/gzip", &etag);
    services.published.put_made(epoch, repo.id, path, file.clone());
    Ok(file)
}

async fn put(cx: Cx<'_>, f: UnitFile) -> Result<HttpResponse, FormatError> {
    let q: super::WaitQuery = super::query(cx.req)?;
    let (services, actor) = (cx.services, cx.caller.actor());
    let target = Target { unit: f.unit, file: f.file };
    let up = hosted::upload(&ApkHosted, services, &cx.repo, target, cx.body, actor).await?;
    super::uploaded(services, &up, q.wait).await
}

/// The form fields of an APK upload (Nexus has no APK format: named as its formats' are).
const ASSET_FIELD: &str = "apk.asset";
const BRANCH_FIELD: &str = "apk.branch";
const CHANNEL_FIELD: &str = "apk.repository";
const ARCH_FIELD: &str = "apk.architecture";

/// A multipart form of `.apk` files (`apk.asset`, one or more), each stored under
/// `<apk.branch>/<apk.repository>/<arch>/<pkgname>-<pkgver>.apk` — the architecture its
/// `.PKGINFO` names, or `apk.architecture` (a `noarch` package needs it). The text fields come
/// before the files they apply to. Every package is checked whole before it is acknowledged; the
/// first refused one ends the form (those before it stay stored), and the answer names it.
async fn form(cx: Cx<'_>) -> Result<HttpResponse, FormatError> {
    use futures_util::StreamExt as _;
    let q: super::WaitQuery = super::query(cx.req)?;
    let Cx { req, services, repo, caller, body, .. } = cx;
    if !super::form::is_multipart(req) {
        return Err(ApiError::bad_request(format!(
            "send a multipart/form-data form with the .apk as {ASSET_FIELD:?} and the fields {BRANCH_FIELD:?} (e.g. v3.20) and {CHANNEL_FIELD:?} (e.g. main)"
        ))
        .into());
    }
    let (mut branch, mut channel, mut arch) = (None, None, None);
    let mut form = actix_multipart::Multipart::new(req.headers(), body);
    let (mut changes, mut receipts) = (Vec::new(), Vec::new());
    let mut budget = packyard_core::hosted::Hosted::max_bytes(&ApkHosted, services);
    while let Some(field) = form.next().await {
        let field = field.map_err(super::form::malformed)?;
        let name = field.name().unwrap_or_default().to_string();
        let mut field = Box::pin(field);
        match name.as_str() {
            BRANCH_FIELD => branch = Some(super::form::text(&mut field, &name).await?),
            CHANNEL_FIELD => channel = Some(super::form::text(&mut field, &name).await?),
            ARCH_FIELD => arch = Some(super::form::text(&mut field, &name).await?).filter(|a| !a.is_empty()),
            ASSET_FIELD => {
                let (Some(branch), Some(channel)) = (&branch, &channel) else {
                    return Err(ApiError::bad_request(format!(
                        "the form names no {}: send {BRANCH_FIELD:?} and {CHANNEL_FIELD:?} before the {ASSET_FIELD:?} files",
                        if branch.is_none() { BRANCH_FIELD } else { CHANNEL_FIELD }
                    ))
                    .into());
                };
                hosted::check_hosted(&repo, "upload to").map_err(|e| FormatError(e.into()))?;
                let stored = hosted::receive(services, &mut field, budget, Some("an .apk")).await?;
                budget = budget.saturating_sub(stored.size);
                let described = match packyard_formats::apk::hosted::describe(services, &stored).await {
                    Ok(d) => d,
                    Err(e) => {
                        hosted::discard(services, &stored.sha256, stored.created).await;
                        return Err(e.into());
                    }
                };
                let arch = match (&arch, described.arch.as_str()) {
                    (Some(a), _) => a.clone(),
                    (None, "noarch") => {
                        hosted::discard(services, &stored.sha256, stored.created).await;
                        return Err(ApiError::bad_request(format!(
                            "{} is a noarch package: name the architecture index it goes into with {ARCH_FIELD:?}",
                            described.file
                        ))
                        .into());
                    }
                    (None, a) => a.to_string(),
                };
                let unit = match Unit::new(branch, channel, &arch) {
                    Ok(u) => u,
                    Err(e) => {
                        hosted::discard(services, &stored.sha256, stored.created).await;
                        return Err(ApiError::bad_request(e).into());
                    }
                };
                let target = Target { unit, file: described.file };
                let up = hosted::upload_stored(&ApkHosted, services, &repo, target, stored, caller.actor()).await?;
                changes.extend(up.changes.iter().copied());
                receipts.push(up.receipt);
            }
            _ => super::form::skip(&mut field).await?,
        }
    }
    if receipts.is_empty() {
        return Err(ApiError::bad_request(format!(
            "the form has no field named {ASSET_FIELD:?}: send each .apk as one"
        ))
        .into());
    }
    if q.wait {
        super::wait_published(services, &changes).await?;
    }
    Ok(HttpResponse::Created().json(receipts))
}

/// The repository's index keys: the current one and, after a rotation, the previous one. A
/// proxy's are its upstream's: the `apk.signed_by` key that signs the upstream's index, under the
/// name the index's signature gives it ([`proxy_key`]).
async fn keys(cx: &Cx<'_>) -> Result<Vec<(String, String)>, FormatError> {
    // A gated proxy signs its own index: its keys, like a group's.
    if cx.repo.repo_type == RepoType::Proxy
        && cx.repo.gate().is_none()
        && ApkSettings::get(&cx.repo).signed_by.is_some()
    {
        return proxy_key(cx).await;
    }
    let (services, repo) = (cx.services, cx.signing_repository("the upstream's key (or set apk.signed_by)")?);
    let ks = &services.security.keystore;
    // Every key that signs (two during a rotation's overlap) and the previous one.
    let mut out = Vec::new();
    for key in packyard_formats::apk::keys::offered(&services.db, ks, repo.id).await.map_err(ApiError::internal)? {
        out.push((
            key.file_name(repo.name.as_str()).map_err(ApiError::internal)?,
            key.public_pem().map_err(ApiError::internal)?,
        ));
    }
    Ok(out)
}

/// A proxy's upstream keys, named as the upstream's indexes name them: read from the indexes
/// its cache holds (`group::upstream_keys`).
async fn proxy_key(cx: &Cx<'_>) -> Result<Vec<(String, String)>, FormatError> {
    let (services, repo) = (cx.services, &cx.repo);
    let reader = packyard_core::groups::Reader::of(services);
    match group::upstream_keys(&services.db, &reader, repo).await {
        Ok(keys) if !keys.is_empty() => Ok(keys),
        Ok(_) => Err(ApiError::not_found(format!(
            "proxy repository {} holds no upstream APKINDEX.tar.gz yet: its keys are named by the upstream index's signatures (run `apk update` through it once; it fails until the key is installed)",
            repo.name
        ))
        .into()),
        Err(e) => {
            tracing::warn!(repository = %repo.name, error = %e, "cannot read the upstream's index keys");
            Err(ApiError::new(
                crate::error::ErrorCode::BadGateway,
                format!("proxy repository {}: the upstream's index keys cannot be read now; the cause is in the server log", repo.name),
            )
            .into())
        }
    }
}
