//! Go's routes (the GOPROXY protocol): `<module>/@v/list`, `<module>/@latest`,
//! `<module>/@v/<version>.info|.mod|.zip` (module and version case-encoded), the checksum
//! databases under `sumdb/<name>/…` (see `go/sumdb.rs`); `PUT <module>/@v/<version>.zip` and
//! the Nexus-style `PUT <version>.zip`;
//! `DELETE <module>/@v/<version>.zip` (or `.mod`, `.info`). A read the protocol does not know is
//! a 404 with a plain-text message, never a 400: the go command probes every prefix of a
//! package path.

use actix_web::http::Method;
use actix_web::HttpResponse;
use packyard_codecs::go::unescape;
use packyard_codecs::go::version::{latest, list};
use packyard_core::groups::{self, GroupError};
use packyard_core::hosted;
use packyard_core::policy::{Candidate, Verdict};
use packyard_formats::go::group::any_member_has;
use packyard_formats::go::hosted::{GoHosted, Target};
use packyard_formats::go::sumdb::SumdbRequest;
use packyard_formats::go::vulndb::{self, VulnPath};
use packyard_formats::go::{proxy_request, Request, KIND};
use packyard_model::policy::{PolicySettings, Subject};
use packyard_model::repos::{RepoType, Repository};

use super::gate;
use crate::error::{ApiError, ErrorCode, FormatError};
use crate::route::{percent_decode, Access, Cx, Routes, Tail};

mod sumdb;

pub struct Go;

pub enum Route {
    Sumdb(SumdbRequest),
    /// The Go vulnerability database (`GOVULNDB`) of the imported OSV data: a file, gzipped?
    Vulndb(VulnPath, bool),
    Read(Request),
    Put(Target),
    Delete {
        module: String,
        version: String,
    },
    /// Nexus's components upload: `go.asset` (the module zip), optionally `go.module` and
    /// `go.version` (checked against the zip's).
    Form,
}

fn not_allowed(message: String) -> FormatError {
    ApiError::new(ErrorCode::MethodNotAllowed, message).into()
}

impl Routes for Go {
    type Route = Route;

    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Route, Access), FormatError>> {
        let path = percent_decode(tail.raw).unwrap_or_default();
        Some(match *method {
            Method::GET | Method::HEAD if path.starts_with("sumdb/") => match SumdbRequest::parse(&path) {
                Ok(r) => Ok((Route::Sumdb(r), Access::READ)),
                Err(e) => Err(ApiError::not_found(format!("not found: {e}")).into()),
            },
            Method::GET | Method::HEAD if path.starts_with("vulndb/") => {
                match path.strip_prefix("vulndb/").and_then(vulndb::parse) {
                    Some((p, gz)) => Ok((Route::Vulndb(p, gz), Access::READ)),
                    None => Err(ApiError::not_found(format!(
                        "not found: {path} (the vulnerability database has index.json, <module>.json, aliases.json, ID/index.json, ID/<id>.json, index/db.json, index/modules.json, index/vulns.json, each also .json.gz)"
                    ))
                    .into()),
                }
            }
            Method::GET | Method::HEAD => match Request::parse(&path) {
                Ok(r) => Ok((Route::Read(r), Access::READ)),
                Err(e) => Err(ApiError::not_found(format!("not found: {e}")).into()),
            },
            Method::PUT => put_target(&path).map(|t| (Route::Put(t), Access::WRITE)),
            Method::DELETE => match Request::parse(&path) {
                Ok(Request::File { module, version, .. }) => Ok((Route::Delete { module, version }, Access::DELETE)),
                Ok(_) => Err(not_allowed(format!(
                    "delete a version with DELETE <module>/@v/<version>.zip, not DELETE {path}"
                ))),
                Err(e) => Err(ApiError::bad_request(e).into()),
            },
            _ => Err(not_allowed(format!(
                "{method} is not part of the GOPROXY protocol; read with GET, publish with PUT <module>/@v/<version>.zip, remove with DELETE"
            ))),
        })
    }

    async fn serve(cx: Cx<'_>, route: Route) -> Result<HttpResponse, FormatError> {
        match route {
            Route::Sumdb(request) => Box::pin(sumdb::serve(&cx, &request)).await,
            Route::Vulndb(path, gz) => {
                let rows = cx.services.db.advisories_in("Go").await.map_err(ApiError::from)?;
                let entries: Vec<vulndb::Entry> = rows.into_iter().map(|(r, m)| vulndb::Entry::new(r, m)).collect();
                let Some(value) = vulndb::file(&entries, &path) else {
                    return Err(ApiError::not_found(format!(
                        "not found: no advisory of the Go vulnerability database names {path:?}"
                    ))
                    .into());
                };
                let body = vulndb::bytes(&value, gz).map_err(ApiError::internal)?;
                let kind = if gz { "application/gzip" } else { "application/json" };
                Ok(HttpResponse::Ok().content_type(kind).body(body))
            }
            Route::Read(request) => {
                let repo = cx.repo.clone();
                if let Some(policy) = repo.gate() {
                    return Box::pin(gated(&cx, &repo, Some(policy), &request)).await;
                }
                // A group over a member that gates lists what each member lets through.
                if repo.repo_type == RepoType::Group
                    && !matches!(request, Request::File { .. })
                    && Box::pin(gate::gates_below(cx.services, &repo, 0)).await?
                {
                    return Box::pin(gated(&cx, &repo, None, &request)).await;
                }
                match read(&cx, &repo, &request, 0).await? {
                    Some(r) => Ok(r),
                    None => Err(missing(&repo, &request)),
                }
            }
            Route::Put(target) => {
                // Writes are boxed: their state is large, and the hot reads should not carry it.
                let up = Box::pin(hosted::upload(&GoHosted, cx.services, &cx.repo, target, cx.body, cx.caller.actor()))
                    .await?;
                // Always read-your-writes: the go command asks for the list right after.
                super::uploaded(cx.services, &up, true).await
            }
            Route::Form => Box::pin(form(cx)).await,
            Route::Delete { module, version } => {
                let removal = (module, version);
                match Box::pin(hosted::delete(&GoHosted, cx.services, &cx.repo, &removal, cx.caller.actor())).await? {
                    Some(d) => {
                        super::wait_published(cx.services, &d.changes).await?;
                        Ok(HttpResponse::NoContent().finish())
                    }
                    None => Err(ApiError::not_found(format!(
                        "not found: {}@{} in repository {}",
                        removal.0, removal.1, cx.repo.name
                    ))
                    .into()),
                }
            }
        }
    }

    fn form_upload() -> Result<Route, String> {
        Ok(Route::Form)
    }

    /// A canonical version's `.info`, `.mod` or `.zip` (never changed upstream); a list,
    /// `@latest` and a branch's files are what the snapshot holds.
    fn snapshot_fill(
        repo: &Repository,
        path: &str,
    ) -> Option<Result<packyard_core::proxy::FetchRequest, packyard_core::proxy::ProxyError>> {
        match Request::parse(path) {
            Ok(r @ Request::File { .. }) => Some(proxy_request(repo, &r)),
            _ => None,
        }
    }
}

/// Where a `PUT` goes: `<module>/@v/<version>.zip`, or Nexus's `<version>.zip` (the module from
/// the zip).
fn put_target(path: &str) -> Result<Target, FormatError> {
    if path.contains('/') {
        return match Request::parse(path) {
            Ok(Request::File { module, version, ext: "zip" }) => Ok(Target::Coordinate { module, version }),
            Ok(_) => Err(not_allowed(format!("publish a module with PUT <module>/@v/<version>.zip, not PUT {path}"))),
            Err(e) => Err(ApiError::bad_request(e).into()),
        };
    }
    let Some(v) = path.strip_suffix(".zip") else {
        return Err(ApiError::bad_request(format!(
            "publish with PUT <version>.zip or <module>/@v/<version>.zip, not {path:?}"
        ))
        .into());
    };
    Ok(Target::Version(unescape(v).map_err(|e| ApiError::bad_request(e.0))?))
}

/// The form fields of a Go upload (Nexus has no Go upload: named as its formats' are).
const ASSET_FIELD: &str = "go.asset";
const MODULE_FIELD: &str = "go.module";
const VERSION_FIELD: &str = "go.version";

/// A multipart form with one module zip (`go.asset`): stored as `PUT <module>/@v/<version>.zip`
/// stores it, the module and version those the zip's paths name (`go.module` and `go.version`,
/// when given before it, must be the same). Answered once the version is listed.
async fn form(cx: Cx<'_>) -> Result<HttpResponse, FormatError> {
    use futures_util::StreamExt as _;
    let Cx { req, services, repo, caller, body, .. } = cx;
    if !super::form::is_multipart(req) {
        return Err(ApiError::bad_request(format!(
            "send a multipart/form-data form with the module zip as {ASSET_FIELD:?} (or PUT it to <module>/@v/<version>.zip)"
        ))
        .into());
    }
    let (mut module, mut version, mut up) = (None, None, None);
    let mut form = actix_multipart::Multipart::new(req.headers(), body);
    while let Some(field) = form.next().await {
        let field = field.map_err(super::form::malformed)?;
        let name = field.name().unwrap_or_default().to_string();
        let mut field = Box::pin(field);
        match name.as_str() {
            MODULE_FIELD => module = Some(super::form::text(&mut field, &name).await?),
            VERSION_FIELD => version = Some(super::form::text(&mut field, &name).await?),
            ASSET_FIELD if up.is_some() => {
                return Err(ApiError::bad_request(format!(
                    "the form has two {ASSET_FIELD:?} fields: upload one module version per form"
                ))
                .into())
            }
            ASSET_FIELD => {
                let target = match (module.take(), version.take()) {
                    (Some(module), Some(version)) => Target::Coordinate { module, version },
                    (None, Some(version)) => Target::Version(version),
                    (Some(_), None) => {
                        return Err(ApiError::bad_request(format!(
                            "{MODULE_FIELD:?} without {VERSION_FIELD:?}: send both or neither (the zip names them)"
                        ))
                        .into())
                    }
                    (None, None) => Target::Zip,
                };
                up = Some(hosted::upload(&GoHosted, services, &repo, target, &mut field, caller.actor()).await?);
            }
            _ => super::form::skip(&mut field).await?,
        }
    }
    let Some(up) = up else {
        return Err(ApiError::bad_request(format!(
            "the form has no field named {ASSET_FIELD:?}: send the module zip as it"
        ))
        .into());
    };
    super::uploaded(services, &up, true).await
}

fn missing(repo: &Repository, request: &Request) -> FormatError {
    ApiError::not_found(format!("not found: {} in repository {}", request.path(), repo.name)).into()
}

/// `repo`'s answer, or `None` for "not here". A hosted repository answers from its projection
/// and rows; a proxy with its upstream's bytes; a group's `list` and `@latest` come from its own
/// snapshot of the module (published on the module's first request when a member has it), a
/// version's files from the member its snapshot names — or, for a version no member lists (a
/// pseudo-version, a branch), from the first member in order that has it; a member whose upstream
/// fails is passed over for the next that has the file (`MemberFailures`).
async fn read(
    cx: &Cx<'_>,
    repo: &Repository,
    request: &Request,
    depth: usize,
) -> Result<Option<HttpResponse>, FormatError> {
    let services = cx.services;
    let module = request.module();
    match (repo.repo_type, request) {
        (RepoType::Proxy, _) => {
            let fetch = proxy_request(repo, request)?;
            super::fetch_proxied(services, repo, cx.req, fetch, request.content_type()).await
        }
        (RepoType::Hosted, Request::File { version, ext: ext @ ("mod" | "zip"), .. }) => {
            artifact(cx, repo, module, version, ext).await
        }
        (RepoType::Hosted, _) => published(cx, repo, request).await,
        (RepoType::Group, Request::List(_) | Request::Latest(_)) => {
            if let Some(r) = published(cx, repo, request).await? {
                return Ok(Some(super::name_failed_members(services, repo, (KIND, module), r).await?));
            }
            groups::check_depth(repo, depth)?;
            let has = || async {
                let reader = groups::Reader::of(services);
                any_member_has(&services.db, &reader, repo, module)
                    .await
                    .map_err(|e| GroupError::Upstream(e.to_string()))
            };
            if !groups::publish_on_first_request(services, repo, KIND, module, has).await? {
                return Ok(None);
            }
            match published(cx, repo, request).await? {
                Some(r) => Ok(Some(super::name_failed_members(services, repo, (KIND, module), r).await?)),
                None => Ok(None),
            }
        }
        (RepoType::Group, Request::File { version, .. }) => {
            // A member's own policy holds for what the group hands out from it: a member that
            // refuses the version is passed over for the next that has it, and its refusal is
            // the answer only when none does.
            let refused: std::cell::RefCell<Option<FormatError>> = std::cell::RefCell::new(None);
            let refused_ref = &refused;
            let found = super::from_members((services, cx.hot), repo, depth + 1, (KIND, module, version), |member| {
                Box::pin(async move {
                    if let Some(policy) = member.gate() {
                        let verdict = judge(cx, &member, policy, module, version, None).await?;
                        if let Some(refusal) = gate::refusal(cx.services, &verdict, module, version, &member) {
                            refused_ref.borrow_mut().get_or_insert(refusal);
                            return Ok(None);
                        }
                    }
                    read(cx, &member, request, depth + 1).await
                })
            })
            .await?;
            match (found, refused.into_inner()) {
                (Some(r), _) => Ok(Some(r)),
                (None, Some(refusal)) => Err(refusal),
                (None, None) => Ok(None),
            }
        }
    }
}

/// A file of the module's published snapshot (`@v/list`, `@latest`, `@v/<version>.info`).
async fn published(cx: &Cx<'_>, repo: &Repository, request: &Request) -> Result<Option<HttpResponse>, FormatError> {
    let file = match request {
        Request::List(_) => "@v/list".to_string(),
        Request::Latest(_) => "@latest".to_string(),
        Request::File { version, ext, .. } => format!("@v/{version}.{ext}"),
    };
    let found = super::published_file(cx.services, repo, KIND, request.module(), &file).await?;
    Ok(found.map(|f| super::serve_published(cx.req, f)))
}

/// A hosted version's `.mod` or `.zip`: the blob its row names (kept per replica once read).
async fn artifact(
    cx: &Cx<'_>,
    repo: &Repository,
    module: &str,
    version: &str,
    ext: &str,
) -> Result<Option<HttpResponse>, FormatError> {
    let services = cx.services;
    let key = format!("{module}/@v/{version}.{ext}");
    let artifact = match services.published.artifact(repo.id, &key) {
        Some(found) => found,
        None => {
            let epoch = services.published.epoch();
            let Some(v) =
                packyard_formats::go::rows::version(&services.db, services.db.pool(), repo.id, module, version).await?
            else {
                return Ok(None);
            };
            let (m, z) = (format!("{module}/@v/{version}.mod"), format!("{module}/@v/{version}.zip"));
            // A version's files are as old as the version (its `.info` time).
            let mod_file = super::ArtifactRef::new(&v.mod_sha256, v.mod_size, Some(v.time_ms));
            let zip_file = super::ArtifactRef::new(&v.zip_sha256, v.zip_size, Some(v.time_ms));
            services.published.put_artifact(epoch, repo.id, &m, mod_file.clone());
            services.published.put_artifact(epoch, repo.id, &z, zip_file.clone());
            if ext == "mod" {
                mod_file
            } else {
                zip_file
            }
        }
    };
    let content_type = if ext == "mod" { "text/plain; charset=utf-8" } else { "application/zip" };
    let res = super::serve_artifact(cx.req, services, &artifact, content_type).await?;
    let path = format!("{}/@v/{}.{ext}", packyard_codecs::go::escape(module), packyard_codecs::go::escape(version));
    super::count_download(services, cx.req, &res, repo.id, &path);
    Ok(Some(res))
}

/// A read under the repository's policy: `@v/list` without the versions it holds back,
/// `@latest` the latest version it lets through, a version's files refused when it holds the
/// version back (404 until a young version's age passes, 403 for a rule or advisories).
async fn gated(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: Option<&PolicySettings>,
    request: &Request,
) -> Result<HttpResponse, FormatError> {
    let module = request.module();
    match request {
        Request::List(_) => {
            // The answer made a moment ago from the same published list (`PolicyCache::answer`).
            let snapshot = list_snapshot(cx, repo, module, 0).await?;
            if let Some(body) = snapshot.as_deref().and_then(|key| cx.services.policy.answer(repo, key)) {
                return Ok(gate::filtered("text/plain; charset=utf-8", body));
            }
            let stamp = cx.services.policy.stamp();
            let Some(kept) = Box::pin(served_list(cx, repo, module, 0)).await? else {
                return Err(missing(repo, request));
            };
            let body = bytes::Bytes::from(list(kept.iter().map(String::as_str)));
            if let Some(key) = snapshot {
                cx.services.policy.remember_answer(repo, &key, stamp, body.clone());
            }
            Ok(gate::filtered("text/plain; charset=utf-8", body))
        }
        Request::Latest(_) => {
            let Some(res) = gate::plain(read(cx, repo, request, 0)).await? else { return Err(missing(repo, request)) };
            let bytes = gate::body(res).await?;
            let info = Info::of(&bytes).ok_or_else(|| {
                ApiError::new(ErrorCode::BadGateway, format!("{module}'s @latest is not a version's .info"))
            })?;
            let first = match policy {
                Some(p) => judge(cx, repo, p, module, &info.version, info.time_ms).await?,
                None => Verdict::Pass(Vec::new()),
            };
            let kept = Box::pin(served_list(cx, repo, module, 0)).await?.unwrap_or_default();
            // Nothing listed at all (only pseudo-versions): the @latest itself, when it passes.
            let nothing_listed = kept.is_empty()
                && match gate::plain(read(cx, repo, &Request::List(module.to_string()), 0)).await? {
                    Some(res) => gate::body(res).await?.iter().all(u8::is_ascii_whitespace),
                    None => true,
                };
            // The @latest when it is served, else the latest listed version served, as the go
            // command would pick it.
            if first.passes() && (nothing_listed || kept.contains(&info.version)) {
                return Ok(gate::audited(gate::filtered(JSON, bytes), &first));
            }
            let Some(best) = latest(kept.iter().map(String::as_str)) else {
                return Err(gate::refusal(cx.services, &first, module, &info.version, repo).unwrap_or_else(|| {
                    ApiError::not_found(format!(
                        "not found: no version of {module} that repository {} lets through (its members' policies hold back the rest)",
                        repo.name
                    ))
                    .into()
                }));
            };
            let file = Request::File { module: module.to_string(), version: best.to_string(), ext: "info" };
            let Some(res) = gate::plain(read(cx, repo, &file, 0)).await? else { return Err(missing(repo, &file)) };
            let info = gate::body(res).await?;
            let verdict = match policy {
                Some(p) => judge(cx, repo, p, module, best, None).await?,
                None => Verdict::Pass(Vec::new()),
            };
            Ok(gate::audited(gate::filtered(JSON, info), &verdict))
        }
        Request::File { version, .. } => {
            // Judged before anything is fetched: a held version's files are not even cached.
            let verdict = match policy {
                Some(p) => judge(cx, repo, p, module, version, None).await?,
                None => Verdict::Pass(Vec::new()),
            };
            // A version without a `.info` does not exist (nothing is recorded for it).
            if matches!(verdict, Verdict::Held(packyard_model::policy::Hold::Undated { .. })) {
                return Err(missing(repo, request));
            }
            if let Some(refused) = gate::refusal(cx.services, &verdict, module, version, repo) {
                return Err(refused);
            }
            let Some(res) = read(cx, repo, request, 0).await? else { return Err(missing(repo, request)) };
            Ok(gate::audited(res, &verdict))
        }
    }
}

/// The versions of `module` that `repo` lists to a client: its list as its own policy lets it
/// through; a group over members that gate, the union of what each member lists so (`None`:
/// nothing has the module).
async fn served_list(
    cx: &Cx<'_>,
    repo: &Repository,
    module: &str,
    depth: usize,
) -> Result<Option<Vec<String>>, FormatError> {
    let raw: Vec<String> = if repo.repo_type == RepoType::Group
        && Box::pin(gate::gates_below(cx.services, repo, depth)).await?
    {
        let mut union = std::collections::BTreeSet::new();
        let (mut any, mut failure) = (false, None);
        for m in groups::members(cx.services, repo, depth).await? {
            // A member that fails is passed over (its failure the answer only when no member
            // lists the module), as the group's own lists pass over it.
            match Box::pin(served_list(cx, &m, module, depth + 1)).await {
                Ok(Some(versions)) => {
                    any = true;
                    union.extend(versions);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(group = %repo.name, member = %m.name, error = %e, "a member's list failed; listed without it");
                    failure.get_or_insert(e);
                }
            }
        }
        if !any {
            return match failure {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
        union.into_iter().collect()
    } else {
        // A hosted repository's or a group's list is its published snapshot's: while that is
        // current, what passed of it a moment ago is taken again without reading it.
        let snapshot = list_snapshot(cx, repo, module, depth).await?;
        if let Some(kept) = snapshot.as_deref().and_then(|key| cx.services.policy.filtered(repo, key, &[])) {
            return Ok(Some(kept.as_ref().clone()));
        }
        let stamp = cx.services.policy.stamp();
        let Some(res) = gate::plain(read(cx, repo, &Request::List(module.to_string()), depth)).await? else {
            return Ok(None);
        };
        let bytes = gate::body(res).await?;
        let raw: Vec<String> = String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if let (Some(key), Some(policy)) = (snapshot, repo.gate()) {
            let kept = passing(cx, repo, policy, module, &raw).await?;
            cx.services.policy.remember_filtered((repo, &key, stamp), Vec::new(), std::sync::Arc::new(kept.clone()));
            return Ok(Some(kept));
        }
        raw
    };
    match repo.gate() {
        Some(policy) => Ok(Some(passing(cx, repo, policy, module, &raw).await?)),
        None => Ok(Some(raw)),
    }
}

const JSON: &str = "application/json";

/// What a gated hosted repository's or group's filtered list is kept under while the published
/// snapshot it was read from is current: `module` and the snapshot's id; `None` for a proxy, a group
/// whose members gate (its list is theirs), a repository without a policy or not published yet.
async fn list_snapshot(
    cx: &Cx<'_>,
    repo: &Repository,
    module: &str,
    depth: usize,
) -> Result<Option<String>, FormatError> {
    if repo.gate().is_none() || repo.repo_type == RepoType::Proxy {
        return Ok(None);
    }
    if repo.repo_type == RepoType::Group && Box::pin(gate::gates_below(cx.services, repo, depth)).await? {
        return Ok(None);
    }
    let manifest = cx.services.published.manifest(&cx.services.db, repo.id, KIND, module).await;
    // (A space: a module path has none; a list's own key starts with `\u{1}`.)
    Ok(manifest.ok().flatten().map(|m| format!("{module} {}", m.snapshot_id)))
}

/// What the policy reads of a `.info`: its version and time.
struct Info {
    version: String,
    time_ms: Option<i64>,
}

impl Info {
    fn of(bytes: &[u8]) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Raw {
            #[serde(rename = "Version")]
            version: String,
            #[serde(rename = "Time", default)]
            time: Option<String>,
        }
        let raw: Raw = serde_json::from_slice(bytes).ok()?;
        let time_ms = raw.time.as_deref().and_then(packyard_model::time::parse_rfc3339);
        Some(Self { version: raw.version, time_ms })
    }
}

/// The versions of a `@v/list` the policy lets through, in the list's order.
async fn passing(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    module: &str,
    listed: &[String],
) -> Result<Vec<String>, FormatError> {
    use futures_util::StreamExt as _;
    // The same list filtered a moment ago (`PolicyCache::filtered`; `\u{1}` tags a list's
    // key, which a snapshot's never has).
    let key = format!("\u{1}{module}");
    if let Some(kept) = cx.services.policy.filtered(repo, &key, listed) {
        return Ok(kept.as_ref().clone());
    }
    let stamp = cx.services.policy.stamp();
    let versions: Vec<&str> = listed.iter().map(String::as_str).collect();
    if policy.ages(module) && module.len() <= 400 {
        let versions: Vec<&str> = versions.iter().copied().filter(|v| v.len() <= 200).collect();
        // Recorded (and kept) together: one query for the list, none once warm.
        cx.services.policy.first_seen(cx.services, repo.id, module, &versions).await.map_err(ApiError::from)?;
    }
    // A few at once: a version's time may be an upstream request for its `.info` (then kept).
    let verdicts: Vec<Result<Verdict, FormatError>> = futures_util::stream::iter(versions.iter().copied())
        .map(|v| judge(cx, repo, policy, module, v, None))
        .buffered(8)
        .collect()
        .await;
    let mut kept = Vec::with_capacity(versions.len());
    for (v, verdict) in versions.iter().zip(verdicts) {
        if verdict?.passes() {
            kept.push((*v).to_string());
        }
    }
    cx.services.policy.remember_filtered((repo, &key, stamp), listed.to_vec(), std::sync::Arc::new(kept.clone()));
    Ok(kept)
}

/// The verdict on `module@version`; its time (when the policy ages the module) from `time_ms`
/// or the version's `.info`, read through the repository and kept.
async fn judge(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    module: &str,
    version: &str,
    time_ms: Option<i64>,
) -> Result<Verdict, FormatError> {
    // The same version judged a moment ago (`PolicyCache::verdict`).
    let key = format!("{module}@{version} {time_ms:?}");
    if let Some(v) = cx.services.policy.verdict(repo, &key) {
        return Ok(v);
    }
    let stamp = cx.services.policy.stamp();
    let published_ms = if policy.ages(module) {
        let own = match time_ms {
            Some(t) => Some(t),
            None => version_time(cx, repo, module, version).await?,
        };
        // Only a version that exists (it has a time) is recorded, with names the table holds.
        let recordable = own.is_some() && module.len() <= 400 && version.len() <= 200;
        if recordable && !cx.services.policy.knows_unit(repo.id, module) {
            // The versions listed when the repository first sees a module predate it; any that
            // appear later are aged from when they appeared: the list first, then the version.
            let listed = match Box::pin(gate::plain(read(cx, repo, &Request::List(module.to_string()), 0))).await? {
                Some(res) => gate::body(res).await?,
                None => bytes::Bytes::new(),
            };
            let text = String::from_utf8_lossy(&listed);
            let versions: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && l.len() <= 200).collect();
            cx.services.policy.first_seen(cx.services, repo.id, module, &versions).await.map_err(ApiError::from)?;
        }
        // The later of its own time and when this repository saw it appear (an upstream cannot
        // make a new version old by dating it back).
        let seen = if recordable {
            cx.services.policy.first_seen(cx.services, repo.id, module, &[version]).await.map_err(ApiError::from)?
        } else {
            std::collections::HashMap::new()
        };
        own.map(|t| t.max(seen.get(version).copied().unwrap_or(0)))
    } else {
        None
    };
    let component = packyard_formats::go::catalogue::component(module, version);
    let subject = Subject { name: module, version, published_ms, licenses: &[], architecture: None };
    let c = Candidate { subject, component: (&component.key, &component.group, &component.name) };
    let verdict = gate::judge(cx.services, repo, policy, &c).await?;
    cx.services.policy.remember_verdict(repo, &key, stamp, &verdict);
    Ok(verdict)
}

/// A version's `.info` time, from the replica's memory once read (a version's time does not
/// change); `None` when the repository has no `.info` for it.
async fn version_time(cx: &Cx<'_>, repo: &Repository, module: &str, version: &str) -> Result<Option<i64>, FormatError> {
    let key = format!("{module}@{version}");
    if let Some(t) = cx.services.policy.time(repo.id, &key) {
        return Ok(Some(t));
    }
    let file = Request::File { module: module.to_string(), version: version.to_string(), ext: "info" };
    let Some(res) = Box::pin(gate::plain(read(cx, repo, &file, 0))).await? else { return Ok(None) };
    let bytes = gate::body(res).await?;
    let time = Info::of(&bytes).and_then(|i| i.time_ms);
    if let Some(t) = time {
        cx.services.policy.remember_time(repo.id, &key, t);
    }
    Ok(time)
}
