//! APT's routes: `dists/…` (published snapshot files, by-hash also from retained snapshots; a
//! proxy's from its upstream), `pool/…` (package and source files, with ranges; a group's
//! followed to the member that provided the record), `POST /` (upload: raw body, or multipart
//! `apt.asset` — a `.deb`, or a source package's `.dsc` with its files — with the optional
//! fields `apt.distribution` and `apt.component`),
//! `PUT <path>/<file>.deb;deb.distribution=…;deb.component=…;deb.architecture=…` (Artifactory's
//! upload; `pool/…` as its documentation has it), `DELETE pool/…[?distribution=]`, and `gpg.key`.

use actix_web::http::{header, Method};
use actix_web::{HttpRequest, HttpResponse};
use futures_util::StreamExt;
use packyard_core::hosted;
use packyard_core::hosted::Hosted as _;
use packyard_formats::apt::hosted::{AptHosted, AptRemoval, AptTarget};
use packyard_formats::apt::settings::AptSettings;
use packyard_formats::apt::KIND;
use packyard_model::repos::FormatSettings;
use packyard_model::repos::RepoType;
use serde::Deserialize;

use crate::error::{ApiError, FormatError};
use crate::route::{percent_decode, Access, Cx, Routes, Tail};
use packyard_core::services::Services;

pub struct Apt;

/// A path below the repository root, percent-decoded (apt sends `+` as `%2b`), without `..`,
/// empty or hidden segments, at most [`MAX_PATH`] bytes: the whole path, its route's prefix
/// (`pool/`, `dists/`) first, made in one allocation.
#[derive(Debug, Clone)]
pub struct CleanPath {
    path: String,
    /// Where the part after the prefix starts.
    start: usize,
}

/// Longest path accepted below a repository (the proxy cache keys on it).
const MAX_PATH: usize = 600;

impl CleanPath {
    /// `prefix` followed by `raw`, decoded and checked.
    fn parse(prefix: &str, raw: &str) -> Result<Self, FormatError> {
        let invalid = || FormatError::from(ApiError::bad_request(format!("invalid path {raw:?}")));
        if raw.len() > MAX_PATH {
            return Err(ApiError::bad_request(format!("path longer than {MAX_PATH} bytes")).into());
        }
        let mut path = String::with_capacity(prefix.len() + raw.len());
        path.push_str(prefix);
        if raw.contains('%') {
            path.push_str(&percent_decode(raw).ok_or_else(invalid)?);
        } else {
            path.push_str(raw);
        }
        if !clean_segments(&path[prefix.len()..]) {
            return Err(invalid());
        }
        Ok(Self { path, start: prefix.len() })
    }

    /// The part after the prefix.
    fn tail(&self) -> &str {
        &self.path[self.start..]
    }
}

/// Whether no segment of `path` is empty or hidden (`.`, `..`, `.x`) and no `\\` is in it:
/// one pass over the pairs of bytes, with few branches (every package request parses its path).
fn clean_segments(path: &str) -> bool {
    let b = path.as_bytes();
    // An empty path, or one ending in `/`, ends on an empty segment.
    let ends = matches!((b.first(), b.last()), (Some(f), Some(l)) if *f != b'/' && *f != b'.' && *l != b'/');
    ends && !b.contains(&b'\\') && !b.windows(2).any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

pub enum Route {
    /// `dists/<distribution>/…`.
    Dists(CleanPath),
    /// `pool/…`.
    Pool(CleanPath),
    Delete(CleanPath),
    Upload,
    /// Artifactory's `PUT` with matrix parameters.
    Put(Matrix),
    GpgKey,
}

impl Routes for Apt {
    type Route = Route;

    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Route, Access), FormatError>> {
        let read = matches!(*method, Method::GET | Method::HEAD);
        let t = tail.matched;
        let clean = |prefix: &str, rest: &str, f: fn(CleanPath) -> Route, access| {
            Some(CleanPath::parse(prefix, rest).map(|p| (f(p), access)))
        };
        // Artifactory's upload: any path to a `.deb` (`pool/…` in its documentation).
        if *method == Method::PUT && !t.is_empty() {
            return Some(Matrix::parse(t).map(|m| (Route::Put(m), Access::WRITE)));
        }
        if let Some(rest) = t.strip_prefix("dists/").filter(|r| !r.is_empty()) {
            return if read { clean("dists/", rest, Route::Dists, Access::READ) } else { None };
        }
        if let Some(rest) = t.strip_prefix("pool/").filter(|r| !r.is_empty()) {
            return match *method {
                Method::GET | Method::HEAD => clean("pool/", rest, Route::Pool, Access::READ),
                Method::DELETE => clean("pool/", rest, Route::Delete, Access::DELETE),
                _ => None,
            };
        }
        match (method, t) {
            (&Method::POST, "") => Some(Ok((Route::Upload, Access::WRITE))),
            (&Method::GET | &Method::HEAD, "gpg.key") => Some(Ok((Route::GpgKey, Access::READ))),
            _ => None,
        }
    }

    async fn serve(cx: Cx<'_>, route: Route) -> Result<HttpResponse, FormatError> {
        match route {
            Route::Dists(p) => dists(&cx, p).await,
            Route::Pool(p) => pool(&cx, p.path).await,
            // Writes are boxed: their state is large, and the hot reads should not carry it.
            Route::Delete(p) => Box::pin(delete(&cx, p.path)).await,
            Route::Upload => Box::pin(upload(cx)).await,
            Route::Put(m) => Box::pin(put(cx, m)).await,
            Route::GpgKey => gpg_key(&cx).await,
        }
    }

    /// The multipart upload of `POST /`: `apt.asset` (a `.deb`, or a `.dsc` with its files),
    /// `apt.distribution`, `apt.component`.
    fn form_upload() -> Result<Route, String> {
        Ok(Route::Upload)
    }

    /// A package (`pool/…`, as the proxy's route takes it) or an index of a mirrored
    /// distribution by its SHA-256 (`dists/<dist>/…/by-hash/SHA256/<hex>`, checked against its
    /// name): both name their bytes. The rest of `dists/` is what the snapshot holds, and nothing
    /// else of the upstream's is served.
    fn snapshot_fill(
        repo: &packyard_model::repos::Repository,
        path: &str,
    ) -> Option<Result<packyard_core::proxy::FetchRequest, packyard_core::proxy::ProxyError>> {
        if !clean_segments(path) || path.len() > MAX_PATH {
            return None;
        }
        let by_hash = path.strip_prefix("dists/").and_then(|rest| {
            let (dist, _) = rest.split_once('/')?;
            let (_, hex) = rest.split_once("/by-hash/SHA256/")?;
            let mirrored = AptSettings::get(repo).suites().contains(&dist);
            (mirrored && hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())
        });
        (path.starts_with("pool/") || by_hash.is_some()).then(|| packyard_formats::apt::proxy_request(repo, path))
    }
}

async fn dists(cx: &Cx<'_>, clean: CleanPath) -> Result<HttpResponse, FormatError> {
    let (services, repo) = (cx.services, &cx.repo);
    let (path, tail) = (clean.path.as_str(), clean.tail());
    let dist = tail.split('/').next().unwrap_or_default();
    // A gated proxy serves the index it published (what its policy lets through, signed).
    if repo.repo_type == RepoType::Proxy && repo.gate().is_none() {
        // Only the mirrored distributions; by-hash files are immutable, the rest is metadata,
        // and a changed `InRelease`/`Release` revalidates the files it lists.
        let settings = AptSettings::get(repo);
        let suites = settings.suites();
        if !suites.contains(&dist) {
            return Err(ApiError::not_found(format!(
                "distribution {dist:?} is not mirrored by proxy repository {}; mirrored: {}",
                repo.name,
                suites.join(", ")
            ))
            .into());
        }
        let fetch = packyard_formats::apt::proxy_request(repo, path)?;
        return super::serve_proxied(services, repo, cx.req, fetch, "text/plain").await;
    }
    // A distribution taken out of the repository's list is no longer served.
    if !repo.settings.format_ref::<AptSettings>().is_some_and(|a| a.suites().contains(&dist)) {
        return Err(cx.not_found(path));
    }
    let published = &services.published;
    if tail.contains("/by-hash/") {
        // Not offered to the hot answers: it may be a retained snapshot's, which goes after its
        // grace without moving an epoch.
        let found =
            published.file_or_retained(&services.db, services.blobs.as_ref(), repo.id, KIND, dist, path).await?;
        return found.map(|f| super::serve_published(cx.req, f)).ok_or_else(|| cx.not_found(path));
    }
    let found = published.file(&services.db, services.blobs.as_ref(), repo.id, KIND, dist, path).await?;
    found.map(|f| cx.serve_current(f)).ok_or_else(|| cx.not_found(path))
}

const DEB_TYPE: &str = "application/vnd.debian.binary-package";

async fn pool(cx: &Cx<'_>, path: String) -> Result<HttpResponse, FormatError> {
    let mut advisories = None;
    let res = pool_file(cx, path, &mut advisories).await?;
    Ok(super::gate::with_advisories(res, advisories))
}

/// What gated `repo`'s published suites (a group's, a proxy's) say of `path` (as it serves
/// it): the refusal, or the advisories of an audited package.
async fn gated(
    cx: &Cx<'_>,
    repo: &packyard_model::repos::Repository,
    path: &str,
) -> Result<Option<String>, FormatError> {
    let units: Vec<(String, String)> = packyard_formats::apt::published_suites(repo)
        .into_iter()
        .map(|dist| {
            let report = packyard_formats::apt::group::policy_path(&dist);
            (dist, report)
        })
        .collect();
    super::gate::reported(cx.services, repo, KIND, &units, (path, path)).await
}

async fn pool_file(
    cx: &Cx<'_>,
    mut path: String,
    advisories: &mut Option<String>,
) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    // A group's Filename is `pool/<member>/<the member's Filename>`: follow it to the member
    // that provided the record (through nested groups too), each gated group's policy applied.
    let mut repo = cx.repo.clone();
    let mut depth = 0;
    while repo.repo_type == RepoType::Group {
        if repo.gate().is_some() {
            if let Some(found) = gated(cx, &repo, &path).await? {
                advisories.get_or_insert(found);
            }
        }
        let rest = path.strip_prefix("pool/").unwrap_or_default();
        let (member, inner) = rest.split_once('/').unwrap_or((rest, ""));
        if inner.is_empty() || !repo.members.iter().any(|m| m == member) {
            return Err(cx.not_found(&path));
        }
        depth += 1;
        repo = packyard_core::groups::member(services, &repo, member, depth).await?;
        path = inner.to_string();
    }
    if repo.repo_type == RepoType::Proxy {
        // Only package files go through here; a proxy's metadata has its own route and rules.
        if path.starts_with("dists/") {
            return Err(cx.not_found(&path));
        }
        if repo.gate().is_some() {
            if let Some(found) = gated(cx, &repo, &path).await? {
                advisories.get_or_insert(found);
            }
        }
        let fetch = packyard_formats::apt::proxy_request(&repo, &path)?;
        return super::serve_proxied(services, &repo, cx.req, fetch, DEB_TYPE).await;
    }
    let db = &services.db;
    let content_type = if path.ends_with(".deb") || path.ends_with(".udeb") {
        DEB_TYPE
    } else {
        packyard_formats::apt::hosted::source_file_type(&path)
    };
    super::serve_hosted(cx, &repo, &path, content_type, || async {
        let found = packyard_formats::apt::rows::served_any(db, repo.id, &path).await?;
        Ok(found.map(|(sha256, size, at)| super::ArtifactRef::new(&sha256, size, Some(at))))
    })
    .await
}

#[derive(Deserialize)]
struct UploadQuery {
    #[serde(default)]
    component: Option<String>,
    #[serde(default)]
    distribution: Option<String>,
    #[serde(default)]
    wait: bool,
}

fn target(q: &UploadQuery) -> AptTarget {
    AptTarget { component: q.component.clone(), distribution: q.distribution.clone(), ..AptTarget::default() }
}

/// The form field that carries the package in a multipart upload (Nexus's name for it); a
/// source package's `.dsc` and its files are each one such field.
const ASSET_FIELD: &str = "apt.asset";
/// Form fields naming the distribution and the component (as `?distribution=` and
/// `?component=` do).
const DISTRIBUTION_FIELD: &str = "apt.distribution";
const COMPONENT_FIELD: &str = "apt.component";

/// Streams a `.deb` (or a source package's `.dsc`) from the raw body, or the `apt.asset`
/// fields of a multipart form: one `.deb`, or a `.dsc` with the files it lists.
async fn upload(cx: Cx<'_>) -> Result<HttpResponse, FormatError> {
    let q: UploadQuery = super::query(cx.req)?;
    let Cx { req, services, repo, caller, body, .. } = cx;
    let (repo, actor) = (&*repo, caller.actor());
    let up = if super::form::is_multipart(req) {
        let mut target = target(&q);
        hosted::check_upload(&AptHosted, repo, &target)?;
        let mut files: Vec<(String, packyard_store::blobs::StoredBlob)> = Vec::new();
        let form = receive_form((services, req, body), &mut target, &mut files).await;
        let received = files.clone();
        let outcome = match form.and_then(|()| choose_upload(&mut files)) {
            Ok(stored) => {
                target.files = files;
                hosted::upload_stored(&AptHosted, services, repo, target, stored, actor)
                    .await
                    .map_err(FormatError::from)
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(up) => up,
            Err(e) => {
                // Every file the form brought goes with a refusal (the engine removed those it
                // knew of already).
                for (_, f) in &received {
                    hosted::discard(services, &f.sha256, f.created).await;
                }
                return Err(e);
            }
        }
    } else {
        hosted::upload(&AptHosted, services, repo, target(&q), body, actor).await?
    };
    super::uploaded(services, &up, q.wait).await
}

/// Reads a multipart form: each `apt.asset` field into the blob store (pending, at most
/// `server.max_upload_bytes` in all), `apt.distribution` and `apt.component` into the target;
/// other fields are skipped.
async fn receive_form(
    (services, req, body): (&Services, &HttpRequest, actix_web::web::Payload),
    target: &mut AptTarget,
    files: &mut Vec<(String, packyard_store::blobs::StoredBlob)>,
) -> Result<(), FormatError> {
    let mut form = actix_multipart::Multipart::new(req.headers(), body);
    let mut budget = AptHosted.max_bytes(services);
    while let Some(field) = form.next().await {
        let field = field.map_err(super::form::malformed)?;
        let name = field.name().unwrap_or_default().to_string();
        let mut field = Box::pin(field);
        match name.as_str() {
            ASSET_FIELD => {
                let file = field.content_disposition().and_then(|d| d.get_filename()).unwrap_or_default().to_string();
                let stored = hosted::receive(services, &mut field, budget, Some("a .deb or .dsc")).await?;
                budget = budget.saturating_sub(stored.size);
                files.push((file, stored));
            }
            DISTRIBUTION_FIELD | COMPONENT_FIELD => {
                let value = super::form::text(&mut field, &name).await?;
                let slot = if name == DISTRIBUTION_FIELD { &mut target.distribution } else { &mut target.component };
                *slot = Some(value);
            }
            _ => super::form::skip(&mut field).await?,
        }
    }
    Ok(())
}

/// Which received file is the upload: the only one, or the one `.dsc` among a source
/// package's files (the others are its files).
fn choose_upload(
    files: &mut Vec<(String, packyard_store::blobs::StoredBlob)>,
) -> Result<packyard_store::blobs::StoredBlob, FormatError> {
    let index = match files.len() {
        0 => {
            return Err(ApiError::bad_request(format!(
            "the multipart upload has no field named {ASSET_FIELD:?}; send the .deb as that field or as the raw body"
        ))
            .into())
        }
        1 => 0,
        _ => {
            let dscs: Vec<usize> =
                files.iter().enumerate().filter(|(_, (name, _))| name.ends_with(".dsc")).map(|(i, _)| i).collect();
            match dscs.as_slice() {
                [one] => *one,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "{} {ASSET_FIELD:?} fields, {} of them a .dsc: send one .deb per upload, or one source package — its .dsc with the files it lists, each field with its file name",
                        files.len(),
                        dscs.len()
                    ))
                    .into())
                }
            }
        }
    };
    Ok(files.remove(index).1)
}

/// What an Artifactory-style `PUT` says in the path's matrix parameters
/// (`…/hello_1.0_amd64.deb;deb.distribution=stable;deb.component=main;deb.architecture=amd64`).
/// The package is stored where its control file puts it (`pool/<component>/…`), whatever
/// directories the path names; the receipt and `Location` say where.
pub struct Matrix {
    distribution: Option<String>,
    component: Option<String>,
    architecture: Option<String>,
}

impl Matrix {
    fn parse(rest: &str) -> Result<Self, FormatError> {
        let bad = |m: String| FormatError::from(ApiError::bad_request(m));
        let mut parts = rest.split(';');
        let path = CleanPath::parse("", parts.next().unwrap_or_default())?;
        let file = path.path.rsplit('/').next().unwrap_or_default();
        if !file.ends_with(".deb") {
            return Err(bad(format!("PUT a .deb file (…/<name>_<version>_<arch>.deb), not {file:?}")));
        }
        let mut m = Self { distribution: None, component: None, architecture: None };
        for param in parts.filter(|p| !p.is_empty()) {
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            let value = percent_decode(value).ok_or_else(|| bad(format!("invalid matrix parameter {param:?}")))?;
            let slot = match key {
                "deb.distribution" => &mut m.distribution,
                "deb.component" => &mut m.component,
                "deb.architecture" => &mut m.architecture,
                // Other properties (Artifactory keeps them as metadata) are not kept here.
                _ => continue,
            };
            if value.is_empty() || value.contains(',') {
                return Err(bad(format!(
                    "{key}={value:?}: give exactly one value (one upload goes to one {})",
                    key.trim_start_matches("deb.")
                )));
            }
            *slot = Some(value);
        }
        Ok(m)
    }
}

/// Artifactory's upload: the body is the `.deb`; the matrix parameters name the distribution
/// (it must be the repository's), the component and the architecture (checked against the
/// package before anything is acknowledged).
async fn put(cx: Cx<'_>, m: Matrix) -> Result<HttpResponse, FormatError> {
    let q: UploadQuery = super::query(cx.req)?;
    let (services, repo, actor) = (cx.services, &cx.repo, cx.caller.actor());
    if let Some(d) = &m.distribution {
        let served = packyard_formats::apt::published_suites(repo);
        if !served.contains(d) {
            return Err(ApiError::bad_request(format!(
                "deb.distribution={d} is not a distribution of repository {}; it publishes {}",
                repo.name,
                served.join(", ")
            ))
            .into());
        }
    }
    if m.component.is_some() && q.component.is_some() && m.component != q.component {
        return Err(ApiError::bad_request("deb.component and ?component= name different components").into());
    }
    if m.distribution.is_some() && q.distribution.is_some() && m.distribution != q.distribution {
        return Err(ApiError::bad_request("deb.distribution and ?distribution= name different distributions").into());
    }
    let target = AptTarget {
        component: m.component.or(q.component),
        architecture: m.architecture,
        distribution: m.distribution.or(q.distribution),
        files: Vec::new(),
    };
    let up = hosted::upload(&AptHosted, services, repo, target, cx.body, actor).await?;
    let mut res = super::uploaded(services, &up, q.wait).await?;
    if let Some(filename) = up.receipt.get("filename").and_then(|f| f.as_str()) {
        // Where the package is, under `server.public_url`'s prefix when set.
        let location = crate::frontage::Base::of(cx.req).link(&format!("/repository/{}/{filename}", repo.name));
        if let Ok(v) = header::HeaderValue::from_str(&location) {
            res.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(res)
}

#[derive(Deserialize)]
struct DeleteQuery {
    #[serde(default)]
    distribution: Option<String>,
}

/// Deletes a package (or a source package, by its `.dsc`) from the repository, or with
/// `?distribution=` from that distribution only (the package stays while another lists it).
async fn delete(cx: &Cx<'_>, path: String) -> Result<HttpResponse, FormatError> {
    let q: DeleteQuery = super::query(cx.req)?;
    if let Some(d) = &q.distribution {
        packyard_formats::apt::hosted::check_distribution(&cx.repo, d)?;
    }
    let removal = AptRemoval { path: path.clone(), distribution: q.distribution };
    match hosted::delete(&AptHosted, cx.services, &cx.repo, &removal, cx.caller.actor()).await? {
        Some(_) => Ok(HttpResponse::NoContent().finish()),
        None => Err(cx.not_found(&path)),
    }
}

/// The armored public signing key (generated on first need), for `/etc/apt/keyrings/`. A
/// proxy serves its upstream's signatures, so its `gpg.key` is the upstream's key it was given
/// (`apt.signed_by`): what clients of the proxy verify with.
async fn gpg_key(cx: &Cx<'_>) -> Result<HttpResponse, FormatError> {
    // A gated proxy signs its own index: its key, like a group's.
    if cx.repo.repo_type == packyard_model::repos::RepoType::Proxy && cx.repo.gate().is_none() {
        use packyard_model::repos::FormatSettings as _;
        if let Some(key) = packyard_formats::apt::settings::AptSettings::of(&cx.repo).signed_by {
            return Ok(HttpResponse::Ok().content_type("application/pgp-keys").body(key));
        }
    }
    let (services, repo) = (
        cx.services,
        cx.signing_repository("the upstream archive's key (or set apt.signed_by, which gpg.key then serves)")?,
    );
    let uid = packyard_formats::apt::keys::user_id(repo);
    let ks = &services.security.keystore;
    // Every key that signs (two during a rotation's overlap) and the previous one.
    let offered =
        packyard_formats::apt::keys::offered(&services.db, ks, repo.id, &uid).await.map_err(ApiError::internal)?;
    let offered: Vec<&packyard_codecs::apt::signing::Signer> = offered.iter().collect();
    let keyring = packyard_codecs::apt::signing::keyring_of(&offered).map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok().content_type("application/pgp-keys").body(keyring))
}

#[cfg(test)]
mod tests {
    use super::clean_segments;

    #[test]
    fn a_path_with_an_empty_or_hidden_segment_is_refused() {
        let old = |p: &str| !(p.split('/').any(|s| s.is_empty() || s.starts_with('.')) || p.contains('\\'));
        let cases = [
            "main/h/hello/hello_2.10_amd64.deb",
            "stable/InRelease",
            "a",
            "",
            "/",
            "a/",
            "/a",
            "a//b",
            "a/./b",
            "a/../b",
            "..",
            ".",
            ".hidden",
            "a/.hidden",
            "a/b.c/d..e",
            "a\\b",
            "a/b\\",
            "x./y.",
        ];
        for p in cases {
            assert_eq!(clean_segments(p), old(p), "{p:?}");
        }
        assert!(clean_segments("main/h/hello/hello_2.10_amd64.deb"));
        assert!(!clean_segments("main/../../etc/passwd"));
    }
}
