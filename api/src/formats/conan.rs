//! Conan 2's routes (REST v2): `v1/ping` (the capabilities, to anyone), `v2/users/authenticate`
//! (Basic credentials → a bearer token that expires after `conan.token_ttl_secs`, scoped to this
//! repository, only its hash stored: an API token of the security model; with an API token as
//! the password, that token itself), `v2/users/check_credentials` (401 when the token is
//! missing, expired or revoked, so that the client logs in again) and `v2/conans/…`: recipe and
//! package revisions, their files, searches; PUT of a revision's file, DELETE of a revision.

use std::sync::{Arc, Mutex};

use actix_web::http::Method;
use actix_web::HttpResponse;
use futures_util::StreamExt;
use packyard_codecs::conan::{check_file_path, check_revision, glob_matches, FileHashes, Reference};
use packyard_core::groups::{self, GroupError};
use packyard_core::hosted;
use packyard_core::policy::{Candidate, Verdict};
use packyard_core::security::{tokens, Principal};
use packyard_formats::conan::group::{any_member_has, FROM_FILE, MEMBER_FILE};
use packyard_formats::conan::hosted::{ConanHosted, Removal, Revision, Target as FileTarget};
use packyard_formats::conan::{KIND, SEARCH_FILE, SEARCH_KIND, SEARCH_UNIT};
use packyard_model::policy::{PolicySettings, Subject};
use packyard_model::repos::{RepoType, Repository};

use super::gate;
use crate::error::{ApiError, ErrorCode, FormatError};
use crate::route::{Access, Cx, Routes, Tail};

pub struct Conan;

/// What the client checks first: the header says this remote speaks revisions.
pub const CAPABILITIES: (&str, &str) = ("X-Conan-Server-Capabilities", "revisions");

pub enum Route {
    Ping,
    Authenticate,
    CheckCredentials,
    /// `conan audit`'s private provider: the vulnerabilities of a reference, from the imported
    /// OSV data.
    Audit,
    Read(Target),
    Put(Target),
    Delete(Target),
}

/// What a `v2/conans/…` path names.
#[derive(Clone)]
pub enum Target {
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

impl Target {
    fn reference(&self) -> Option<&Reference> {
        match self {
            Self::Search => None,
            Self::Latest(r)
            | Self::Revisions(r)
            | Self::Packages(r, _)
            | Self::Revision(r, _)
            | Self::Files(r, _)
            | Self::File(r, _, _)
            | Self::AllPackages(r, _)
            | Self::PackageLatest(r, _, _)
            | Self::PackageRevisions(r, _, _)
            | Self::PackageRevision(r, _, _, _)
            | Self::PackageFiles(r, _, _, _)
            | Self::PackageFile(r, _, _, _, _) => Some(r),
        }
    }

    /// A revision's file never changes (`metadata/…` excepted): what a proxy fetches once.
    fn immutable(&self) -> bool {
        match self {
            Self::File(_, _, p) | Self::PackageFile(_, _, _, _, p) => !p.starts_with("metadata/"),
            _ => false,
        }
    }
}

fn bad(m: impl std::fmt::Display) -> FormatError {
    ApiError::bad_request(m.to_string()).into()
}

fn not_found(what: impl std::fmt::Display) -> FormatError {
    ApiError::not_found(format!("{what} not found")).into()
}

fn parse(tail: &str) -> Result<Target, FormatError> {
    if tail == "search" {
        return Ok(Target::Search);
    }
    let s: Vec<&str> = tail.splitn(12, '/').collect();
    if s.len() < 5 {
        return Err(not_found(format!("v2/conans/{tail}")));
    }
    let r = Reference::from_url(s[0], s[1], s[2], s[3]).map_err(bad)?;
    let rev = |i: usize, what: &str| -> Result<String, FormatError> {
        let v = s.get(i).copied().unwrap_or_default();
        check_revision(what, v).map_err(bad)?;
        Ok(v.to_string())
    };
    // What follows `…/files/` is a file path, `/` included.
    let path = |from: usize| -> Result<String, FormatError> {
        let p = tail.splitn(from + 1, '/').nth(from).unwrap_or_default().to_string();
        check_file_path(&p).map_err(bad)?;
        Ok(p)
    };
    let (rrev, pkgid, prev) = (|| rev(5, "recipe revision"), || rev(7, "package id"), || rev(9, "package revision"));
    Ok(match &s[4..] {
        ["latest"] => Target::Latest(r),
        ["revisions"] => Target::Revisions(r),
        ["search"] => Target::Packages(r, None),
        ["revisions", _] => Target::Revision(r, rrev()?),
        ["revisions", _, "files"] => Target::Files(r, rrev()?),
        ["revisions", _, "files", ..] => Target::File(r, rrev()?, path(7)?),
        ["revisions", _, "search"] => Target::Packages(r, Some(rrev()?)),
        ["revisions", _, "packages"] => Target::AllPackages(r, rrev()?),
        ["revisions", _, "packages", _, "latest"] => Target::PackageLatest(r, rrev()?, pkgid()?),
        ["revisions", _, "packages", _, "revisions"] => Target::PackageRevisions(r, rrev()?, pkgid()?),
        ["revisions", _, "packages", _, "revisions", _] => Target::PackageRevision(r, rrev()?, pkgid()?, prev()?),
        ["revisions", _, "packages", _, "revisions", _, "files"] => Target::PackageFiles(r, rrev()?, pkgid()?, prev()?),
        ["revisions", _, "packages", _, "revisions", _, "files", ..] => {
            Target::PackageFile(r, rrev()?, pkgid()?, prev()?, path(11)?)
        }
        _ => return Err(not_found(format!("v2/conans/{tail}"))),
    })
}

impl Routes for Conan {
    type Route = Route;

    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Route, Access), FormatError>> {
        let read = matches!(*method, Method::GET | Method::HEAD);
        match tail.matched {
            // The client pings before it logs in.
            "v1/ping" if read => return Some(Ok((Route::Ping, Access::Anyone))),
            "v2/users/authenticate" if *method == Method::GET => {
                return Some(Ok((Route::Authenticate, Access::SignedIn(Some(packyard_core::security::Action::Read)))))
            }
            "v2/users/check_credentials" if *method == Method::GET => {
                return Some(Ok((Route::CheckCredentials, Access::SignedIn(None))))
            }
            AUDIT_PATH if *method == Method::POST => return Some(Ok((Route::Audit, Access::READ))),
            _ => {}
        }
        let rest = tail.matched.strip_prefix("v2/conans/")?;
        let (route, access): (fn(Target) -> Route, Access) = match *method {
            Method::GET | Method::HEAD => (Route::Read, Access::READ),
            Method::PUT => (Route::Put, Access::WRITE),
            Method::DELETE => (Route::Delete, Access::DELETE),
            _ => {
                let m = format!("{method} is not part of Conan's API");
                return Some(Err(ApiError::new(ErrorCode::MethodNotAllowed, m).into()));
            }
        };
        Some(parse(rest).map(|t| (route(t), access)))
    }

    async fn serve(cx: Cx<'_>, route: Route) -> Result<HttpResponse, FormatError> {
        match route {
            Route::Ping => Ok(HttpResponse::Ok().insert_header(CAPABILITIES).finish()),
            Route::Authenticate => Box::pin(authenticate(&cx)).await,
            Route::Audit => Box::pin(audit(cx)).await,
            Route::CheckCredentials => {
                Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(cx.caller.username().to_string()))
            }
            Route::Read(target) => {
                let repo = cx.repo.clone();
                if let Some(policy) = repo.gate() {
                    return Box::pin(gated(&cx, &repo, policy, target)).await;
                }
                read(&cx, &repo, target, 0).await
            }
            // Writes are boxed: their state is large, and the hot reads should not carry it.
            Route::Put(target) => Box::pin(put(cx, target)).await,
            Route::Delete(target) => Box::pin(delete(&cx, target)).await,
        }
    }

    fn form_upload() -> Result<Route, String> {
        Err("a Conan recipe or package is uploaded with `conan upload` (its files, revision by revision), not as a form".into())
    }

    /// The ping and the sign-in answer under a snapshot's URL as under the repository's.
    fn outside_snapshot(path: &str) -> bool {
        matches!(path, "v1/ping" | "v2/users/authenticate" | "v2/users/check_credentials")
    }

    /// A file of a recipe or package revision (a revision never changes; `metadata/…` aside);
    /// revision lists, `latest` and searches are what the snapshot holds.
    fn snapshot_fill(
        repo: &Repository,
        path: &str,
    ) -> Option<Result<packyard_core::proxy::FetchRequest, packyard_core::proxy::ProxyError>> {
        let target = parse(path.strip_prefix("v2/conans/")?).ok()?;
        target.immutable().then(|| packyard_formats::conan::proxy_request(repo, path, true))
    }
}

/// `GET v2/users/authenticate` with Basic credentials: a bearer token for this repository.
async fn authenticate(cx: &Cx<'_>) -> Result<HttpResponse, FormatError> {
    let (services, repo) = (cx.services, &cx.repo);
    let Principal::User { id, token, .. } = cx.caller.principal.as_ref() else {
        return Err(ApiError::unauthorized("authentication required").into());
    };
    if token.is_some() {
        // Logged in with an API token as the password: the client uses that token itself (its
        // own scope and expiry); a bearer token cannot log in again.
        return match crate::auth::parse_authorization(cx.req)? {
            Some(packyard_core::security::service::Credentials::Basic { password, .. }) => {
                Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(password))
            }
            _ => Err(ApiError::unauthorized("log in with your user name and a password or API token").into()),
        };
    }
    let ttl_ms = i64::try_from(services.config.conan.token_ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let new = tokens::generate();
    let expires = packyard_store::db::now_ms().saturating_add(ttl_ms);
    let label = format!("conan login to {}", repo.name);
    services
        .db
        .insert_token(&new.id, *id, &label, &new.secret_hash, Some(repo.name.as_str()), None, Some(expires))
        .await?;
    let detail = serde_json::json!({"token": new.id});
    services
        .security
        .audit(cx.caller.username(), Some(cx.caller.addr), "conan.login", repo.name.as_str(), detail)
        .await;
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(new.token))
}

/// A read of `repo`. A hosted repository answers from its published projections (warm: no
/// query); a proxy with its upstream's answer for the same path, unchanged. A group answers from
/// its own snapshot of the reference (published on the reference's first request when a member
/// has it: the first member in order that has the reference wins, so every file of a revision
/// comes from the member that listed it) — or, when that member is a proxy, from it; its search
/// from its own merged index.
async fn read(cx: &Cx<'_>, repo: &Repository, target: Target, depth: usize) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    match repo.repo_type {
        RepoType::Proxy => return proxy_read(cx, repo, &target).await,
        RepoType::Hosted => {}
        RepoType::Group => {
            groups::check_depth(repo, depth)?;
            let (kind, key) = match target.reference() {
                Some(r) => (KIND, r.display()),
                None => (SEARCH_KIND, SEARCH_UNIT.to_string()),
            };
            // A unit the group published is read from its snapshot (warm: from memory, no
            // query); only one it never published is requested here.
            let published =
                services.published.manifest(&services.db, repo.id, kind, &key).await.map_err(ApiError::from)?;
            let has = || async {
                if kind == SEARCH_KIND {
                    return Ok(true);
                }
                let reader = groups::Reader::of(services);
                any_member_has(&services.db, &reader, repo, &key).await.map_err(|e| GroupError::Upstream(e.to_string()))
            };
            if published.is_none() && !groups::publish_on_first_request(services, repo, kind, &key, has).await? {
                return Err(not_found(format!("{key} in group {}", repo.name)));
            }
            if kind == KIND {
                if let Some(m) = super::published_file(services, repo, KIND, &key, MEMBER_FILE).await? {
                    let name = String::from_utf8_lossy(&m.bytes).into_owned();
                    let member = groups::member(services, repo, &name, depth + 1).await?;
                    // A member's own policy holds for what the group hands out from it.
                    if let Some(policy) = member.gate() {
                        return Box::pin(gated(cx, &member, policy, target)).await;
                    }
                    return Box::pin(read(cx, &member, target, depth + 1)).await;
                }
                // A hosted or group member whose files the snapshot lists: when it (or a member
                // below it) has a policy, it answers itself.
                if let Some(f) = super::published_file(services, repo, KIND, &key, FROM_FILE).await? {
                    let name = String::from_utf8_lossy(&f.bytes).into_owned();
                    let member = groups::member(services, repo, &name, depth + 1).await?;
                    if let Some(policy) = member.gate() {
                        return Box::pin(gated(cx, &member, policy, target)).await;
                    }
                    if member.repo_type == RepoType::Group
                        && Box::pin(gate::gates_below(services, &member, depth + 1)).await?
                    {
                        return Box::pin(read(cx, &member, target, depth + 1)).await;
                    }
                }
            }
        }
    }
    projected(cx, repo, target).await
}

/// A proxy: the upstream's answer for the same path (and query), unchanged.
async fn proxy_read(cx: &Cx<'_>, repo: &Repository, target: &Target) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    // The path below the repository the request named (a group's, when a group forwards).
    let prefix = format!("/repository/{}/", cx.repo.name);
    let mut path = cx.req.path().strip_prefix(&prefix).unwrap_or_default().to_string();
    // A revision list the policy reads to answer another request: its own path.
    if let Target::Revisions(r) = target {
        path = format!("v2/conans/{}/revisions", r.url_path());
    } else if let Target::File(r, rrev, file) = target {
        // (A recipe file the policy reads for another request: its licenses.)
        path = format!("v2/conans/{}/revisions/{rrev}/files/{file}", r.url_path());
    } else if let Target::PackageFile(r, rrev, pkgid, prev, file) = target {
        // (A package's `conaninfo.txt` the policy reads for another request: its architecture.)
        path = format!("v2/conans/{}/revisions/{rrev}/packages/{pkgid}/revisions/{prev}/files/{file}", r.url_path());
    } else if let Target::PackageRevisions(r, rrev, pkgid) = target {
        path = format!("v2/conans/{}/revisions/{rrev}/packages/{pkgid}/revisions", r.url_path());
    } else if let (Target::Packages(r, Some(rrev)), true) = (target, path.ends_with("/search")) {
        // (A policy's answer to `…/search`: the packages of the revision it lets through.)
        path = format!("v2/conans/{}/revisions/{rrev}/search", r.url_path());
        if !cx.req.query_string().is_empty() {
            path.push('?');
            path.push_str(cx.req.query_string());
        }
    } else if !cx.req.query_string().is_empty() {
        path.push('?');
        path.push_str(cx.req.query_string());
    }
    let immutable = target.immutable();
    let fetch = packyard_formats::conan::proxy_request(repo, &path, immutable)?;
    let content_type = if immutable { "application/octet-stream" } else { "application/json" };
    super::serve_proxied(services, repo, cx.req, fetch, content_type).await
}

/// A read from `repo`'s own published projections (a hosted repository's, or a group's merge).
async fn projected(cx: &Cx<'_>, repo: &Repository, target: Target) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    let json = |r: Reference, path: String| async move {
        match super::published_file(services, repo, KIND, &r.display(), &path).await? {
            Some(f) => Ok(super::serve_published(cx.req, f)),
            None => Err(not_found(format!("{}: {path}", r.display()))),
        }
    };
    match target {
        Target::Search => {
            #[derive(serde::Deserialize)]
            struct Q {
                #[serde(default)]
                q: String,
            }
            let q = super::query::<Q>(cx.req).map(|q| q.q).unwrap_or_default();
            let found = super::published_file(services, repo, SEARCH_KIND, SEARCH_UNIT, SEARCH_FILE).await?;
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
        Target::Latest(r) => json(r, "latest".into()).await,
        Target::Revisions(r) => json(r, "revisions".into()).await,
        Target::Packages(r, rrev) => {
            let rrev = match rrev {
                Some(v) => v,
                None => {
                    let latest = super::published_file(services, repo, KIND, &r.display(), "latest")
                        .await?
                        .ok_or_else(|| not_found(format!("recipe {}", r.display())))?;
                    let v: serde_json::Value = serde_json::from_slice(&latest.bytes).unwrap_or_default();
                    v["revision"].as_str().unwrap_or_default().to_string()
                }
            };
            json(r, format!("revisions/{rrev}/search")).await
        }
        Target::Files(r, rrev) => json(r, format!("revisions/{rrev}/files")).await,
        Target::PackageLatest(r, rrev, pkgid) => json(r, format!("revisions/{rrev}/packages/{pkgid}/latest")).await,
        Target::PackageRevisions(r, rrev, pkgid) => {
            json(r, format!("revisions/{rrev}/packages/{pkgid}/revisions")).await
        }
        Target::PackageFiles(r, rrev, pkgid, prev) => {
            json(r, format!("revisions/{rrev}/packages/{pkgid}/revisions/{prev}/files")).await
        }
        Target::File(r, rrev, path) => file(cx, repo, &r, &format!("revisions/{rrev}/files/{path}")).await,
        Target::PackageFile(r, rrev, pkgid, prev, path) => {
            file(cx, repo, &r, &format!("revisions/{rrev}/packages/{pkgid}/revisions/{prev}/files/{path}")).await
        }
        Target::Revision(..) | Target::AllPackages(..) | Target::PackageRevision(..) => {
            Err(ApiError::new(ErrorCode::MethodNotAllowed, "read a revision through its files; DELETE removes it")
                .into())
        }
    }
}

/// A file of a revision, streamed from the blob the projection lists (no query).
async fn file(cx: &Cx<'_>, repo: &Repository, r: &Reference, path: &str) -> Result<HttpResponse, FormatError> {
    let services = cx.services;
    let entry = services
        .published
        .entry(&services.db, repo.id, KIND, &r.display(), path)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| not_found(format!("{}: {path}", r.display())))?;
    let artifact = super::ArtifactRef::new(&entry.sha256, entry.size, None);
    let res = super::serve_artifact(cx.req, services, &artifact, "application/octet-stream").await?;
    super::count_download(services, cx.req, &res, repo.id, &format!("v2/conans/{}/{path}", r.url_path()));
    Ok(res)
}

/// `PUT …/files/<path>` of a recipe or package revision, through the engine (see
/// `packyard_formats::conan::hosted`); answers once the reference is republished when the file
/// completed a revision or changed a complete one.
async fn put(cx: Cx<'_>, target: Target) -> Result<HttpResponse, FormatError> {
    let (reference, rrev, package, path) = match target {
        Target::File(r, rrev, path) => (r, rrev, None, path),
        Target::PackageFile(r, rrev, pkgid, prev, path) => (r, rrev, Some((pkgid, prev)), path),
        _ => return Err(ApiError::new(ErrorCode::MethodNotAllowed, "upload with PUT …/files/<path>").into()),
    };
    let services = cx.services;
    hosted::check_hosted(&cx.repo, "upload to")?;
    let revision = Revision { reference: reference.display(), rrev, package };
    if revision.package.is_some() {
        // A package belongs to a complete recipe revision.
        let recipe = packyard_formats::conan::rows::revision(
            &services.db,
            cx.repo.id,
            &revision.reference,
            &revision.rrev,
            "",
            "",
        )
        .await?;
        if !recipe.is_some_and(|r| r.complete) {
            return Err(not_found(format!("recipe {}#{}", revision.reference, revision.rrev)));
        }
    }
    let hashes = Arc::new(Mutex::new(Some(FileHashes::default())));
    let sha1_header = cx.req.headers().get("x-checksum-sha1").and_then(|v| v.to_str().ok()).map(str::to_string);
    let target = FileTarget { revision, path, hashes: hashes.clone(), sha1_header, time_ms: None };
    let body = cx.body.inspect(move |chunk| {
        if let (Ok(c), Ok(mut h)) = (chunk, hashes.lock()) {
            if let Some(h) = h.as_mut() {
                h.update(c);
            }
        }
    });
    let up = hosted::upload(&ConanHosted, services, &cx.repo, target, body, cx.caller.actor()).await?;
    super::wait_published(services, &up.changes).await?;
    Ok(HttpResponse::Created().finish())
}

/// `DELETE` of a recipe revision (with its packages), of its packages, or of a package revision.
async fn delete(cx: &Cx<'_>, target: Target) -> Result<HttpResponse, FormatError> {
    let (reference, rrev, package, packages_only) = match target {
        Target::Revision(r, rrev) => (r, rrev, None, false),
        Target::AllPackages(r, rrev) => (r, rrev, None, true),
        Target::PackageRevision(r, rrev, pkgid, prev) => (r, rrev, Some((pkgid, prev)), false),
        _ => {
            return Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                "DELETE a revision, its packages, or a package revision",
            )
            .into())
        }
    };
    let revision = Revision { reference: reference.display(), rrev, package };
    let what = format!("{}#{}", revision.reference, revision.rrev);
    let removal = Removal { revision, packages_only };
    match hosted::delete(&ConanHosted, cx.services, &cx.repo, &removal, cx.caller.actor()).await? {
        Some(d) => {
            super::wait_published(cx.services, &d.changes).await?;
            Ok(HttpResponse::Ok().finish())
        }
        None => Err(not_found(what)),
    }
}

/// Where `conan audit provider add <name> --url <repository URL>/ --type private` posts its
/// query (the JFrog Catalog's GraphQL path, which the client appends to the URL).
const AUDIT_PATH: &str = "catalog/api/v0/public/graphql";

/// The largest query the client sends (its one query is under 2 KiB).
const MAX_AUDIT_QUERY: usize = 64 << 10;

/// `conan audit list|scan` with a private provider: the client's one query,
/// `packageVersion(name: "<name>", type: "conan", version: "<version>") { vulnerabilities … }`,
/// answered in the shape it reads from the imported OSV data of `ConanCenter` (no GraphQL
/// beyond that query: another is a 400 that says so).
async fn audit(mut cx: Cx<'_>) -> Result<HttpResponse, FormatError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = cx.body.next().await {
        bytes.extend_from_slice(&chunk.map_err(|e| ApiError::bad_request(e.to_string()))?);
        if bytes.len() > MAX_AUDIT_QUERY {
            return Err(ApiError::new(ErrorCode::PayloadTooLarge, "a query is at most 64 KiB").into());
        }
    }
    let body: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("not a GraphQL request: {e}")))?;
    let query = body["query"].as_str().unwrap_or_default();
    let argument = |name: &str| {
        let at = query.find("packageVersion(")?;
        let args = &query[at..];
        let args = &args[..args.find(')')?];
        let start = args.find(&format!("{name}:"))? + name.len() + 1;
        let rest = args[start..].trim_start().strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_string())
    };
    let (Some(name), Some(version)) = (argument("name"), argument("version")) else {
        return Err(ApiError::bad_request(
            "Packyard answers conan audit's query, packageVersion(name: \"…\", type: \"conan\", version: \"…\") { vulnerabilities … }",
        )
        .into());
    };
    let formats = packyard_formats::registry();
    let found = packyard_core::vulnerabilities::matches(cx.services, formats, &cx.repo, ("", "", &name, &version))
        .await
        .map_err(ApiError::internal)?;
    let edges: Vec<serde_json::Value> = found
        .iter()
        .map(|m| {
            // The client reads a score that is there (a `null` one breaks it).
            let cvss = match m.score {
                Some(s) => serde_json::json!({"preferredBaseScore": s, "v3": {"baseScore": s}}),
                None => serde_json::json!({}),
            };
            serde_json::json!({"node": {
                "name": m.id,
                "description": m.summary,
                "severity": capitalized(&m.severity),
                "cvss": cvss,
                "aliases": m.aliases,
                "withdrawn": false,
                "publishedAt": null,
                "advisories": [],
                "references": [],
                "vulnerablePackages": {"totalCount": 0, "edges": []},
            }})
        })
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "data": {"query": {"vulnerabilities": {"totalCount": edges.len(), "edges": edges}}}
    })))
}

/// `high` → `High`, as the client prints severities.
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// A read under the repository's policy: revision lists without the revisions it holds back
/// (too young, or a version a rule or an enforced advisory refuses), `latest` the newest it lets
/// through, searches without the references it lets no revision of through, and a held
/// revision's files refused (404 until a young revision's age passes, else 403).
async fn gated(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    target: Target,
) -> Result<HttpResponse, FormatError> {
    const JSON: &str = "application/json";
    match &target {
        Target::Search => {
            let res = gate::plain(read(cx, repo, target.clone(), 0)).await?;
            let bytes = gate::body(res).await?;
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let mut kept = Vec::new();
            for text in v["results"].as_array().into_iter().flatten().filter_map(|r| r.as_str()) {
                let Ok(r) = Reference::parse(text) else { continue };
                if !passing(cx, repo, policy, (&r, None), None).await?.is_empty() {
                    kept.push(text.to_string());
                }
            }
            Ok(gate::filtered(JSON, serde_json::json!({ "results": kept }).to_string()))
        }
        Target::Revisions(r) => {
            let mut list = revision_list(cx, repo, target.clone()).await?;
            let kept = passing(cx, repo, policy, (r, Some(&list)), None).await?;
            list["revisions"] = serde_json::Value::Array(kept.into_iter().map(|(_, json, _)| json).collect());
            Ok(gate::filtered(JSON, list.to_string()))
        }
        Target::Latest(r) => {
            let kept = passing(cx, repo, policy, (r, None), None).await?;
            match kept.into_iter().next() {
                Some((_, json, verdict)) => Ok(gate::audited(gate::filtered(JSON, json.to_string()), &verdict)),
                None => Err(held_latest(cx, repo, policy, (r, None), None).await?),
            }
        }
        Target::PackageRevisions(r, rrev, _) | Target::PackageLatest(r, rrev, _) => {
            let recipe = recipe_verdict(cx, repo, policy, (r, rrev), None).await?;
            if let Some(refused) = gate::refusal(cx.services, &recipe, &r.name, &reference_version(r, rrev), repo) {
                return Err(refused);
            }
            let (r, rrev, pkgid) = match &target {
                Target::PackageRevisions(r, v, p) | Target::PackageLatest(r, v, p) => (r, v, p),
                _ => return Err(not_found("package")),
            };
            let lists = Target::PackageRevisions(r.clone(), rrev.clone(), pkgid.clone());
            let mut list = revision_list(cx, repo, lists).await?;
            // A rule on architectures judges the binary by its `conaninfo.txt`.
            let newest = list["revisions"][0]["revision"].as_str().map(str::to_string);
            let arch = match newest {
                Some(prev) => binary_architecture(cx, repo, policy, (r, rrev, pkgid, &prev)).await?,
                None => None,
            };
            let kept = passing(cx, repo, policy, (r, Some(&list)), arch.as_deref()).await?;
            if matches!(target, Target::PackageLatest(..)) {
                return match kept.into_iter().next() {
                    Some((_, json, verdict)) => Ok(gate::audited(gate::filtered(JSON, json.to_string()), &verdict)),
                    None => Err(held_latest(cx, repo, policy, (r, Some(&list)), arch.as_deref()).await?),
                };
            }
            list["revisions"] = serde_json::Value::Array(kept.into_iter().map(|(_, json, _)| json).collect());
            Ok(gate::filtered(JSON, list.to_string()))
        }
        Target::Revision(r, rrev)
        | Target::Files(r, rrev)
        | Target::File(r, rrev, _)
        | Target::AllPackages(r, rrev)
        | Target::Packages(r, Some(rrev)) => {
            let verdict = recipe_verdict(cx, repo, policy, (r, rrev), None).await?;
            if let Some(refused) = gate::refusal(cx.services, &verdict, &r.name, &reference_version(r, rrev), repo) {
                return Err(refused);
            }
            if let Target::Packages(..) = target {
                return Ok(gate::audited(packages(cx, repo, policy, (r, rrev)).await?, &verdict));
            }
            let res = read(cx, repo, target.clone(), 0).await?;
            Ok(gate::audited(res, &verdict))
        }
        Target::PackageRevision(r, rrev, pkgid, prev)
        | Target::PackageFiles(r, rrev, pkgid, prev)
        | Target::PackageFile(r, rrev, pkgid, prev, _) => {
            let verdict = recipe_verdict(cx, repo, policy, (r, rrev), None).await?;
            if let Some(refused) = gate::refusal(cx.services, &verdict, &r.name, &reference_version(r, rrev), repo) {
                return Err(refused);
            }
            // The package revision is aged by its own time (a binary rebuilt just now).
            let lists = Target::PackageRevisions(r.clone(), rrev.clone(), pkgid.clone());
            let list = revision_list(cx, repo, lists).await?;
            let time = list["revisions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["revision"] == prev.as_str())
                .and_then(|v| v["time"].as_str())
                .and_then(revision_time);
            let arch = binary_architecture(cx, repo, policy, (r, rrev, pkgid, prev)).await?;
            let package = judge(cx, repo, policy, r, (prev, time), arch.as_deref()).await?;
            let what = format!("{} (package {pkgid} revision {prev})", r.version);
            if let Some(refused) = gate::refusal(cx.services, &package, &r.name, &what, repo) {
                return Err(refused);
            }
            let res = read(cx, repo, target.clone(), 0).await?;
            Ok(gate::audited(res, &verdict))
        }
        Target::Packages(r, None) => {
            // The packages of the latest recipe revision the policy lets through.
            let Some((rrev, _, verdict)) = passing(cx, repo, policy, (r, None), None).await?.into_iter().next() else {
                return Err(held_latest(cx, repo, policy, (r, None), None).await?);
            };
            Ok(gate::audited(packages(cx, repo, policy, (r, &rrev)).await?, &verdict))
        }
    }
}

/// `name/version#rrev` as a refusal names it (the policy judges the version).
fn reference_version(r: &Reference, rrev: &str) -> String {
    format!("{} (revision {rrev})", r.version)
}

/// A revision list (`{"reference", "revisions": [{"revision", "time"}, …]}`, newest first) as
/// the repository answers it; an empty one when it has none.
async fn revision_list(cx: &Cx<'_>, repo: &Repository, list: Target) -> Result<serde_json::Value, FormatError> {
    let res = match gate::plain(read(cx, repo, list, 0)).await {
        Ok(res) => res,
        Err(e) if e.0.code == ErrorCode::NotFound => return Ok(serde_json::json!({ "revisions": [] })),
        Err(e) => return Err(e),
    };
    let bytes = gate::body(res).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(ErrorCode::BadGateway, format!("a revision list of {} is not JSON: {e}", repo.name)).into()
    })
}

/// Conan's revision time (`2026-12-05T10:00:00.000+0000` or RFC 3339) in ms.
fn revision_time(text: &str) -> Option<i64> {
    packyard_model::time::parse_rfc3339(text).or_else(|| {
        // `+0000`: the zone without its colon (ASCII only, so every index is a boundary).
        if !text.is_ascii() || text.len() < 5 {
            return None;
        }
        let (head, zone) = text.split_at(text.len() - 5);
        if !zone.starts_with(['+', '-']) {
            return None;
        }
        packyard_model::time::parse_rfc3339(&format!("{head}{}:{}", &zone[..3], &zone[3..]))
    })
}

/// `list`, or (`None`) the recipe's revision list read through the repository.
async fn given_or_read<'a>(
    cx: &Cx<'_>,
    repo: &Repository,
    r: &Reference,
    list: Option<&'a serde_json::Value>,
) -> Result<std::borrow::Cow<'a, serde_json::Value>, FormatError> {
    Ok(match list {
        Some(l) => std::borrow::Cow::Borrowed(l),
        None => std::borrow::Cow::Owned(revision_list(cx, repo, Target::Revisions(r.clone())).await?),
    })
}

/// The revisions of `list` (a recipe's, or `None`: read it) the policy lets through, newest
/// first: `(revision, its JSON, verdict)`.
async fn passing(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    (r, list): (&Reference, Option<&serde_json::Value>),
    architecture: Option<&str>,
) -> Result<Vec<(String, serde_json::Value, Verdict)>, FormatError> {
    let list = given_or_read(cx, repo, r, list).await?;
    let list = list.as_ref();
    let mut kept = Vec::new();
    for rev in list["revisions"].as_array().into_iter().flatten() {
        let id = rev["revision"].as_str().unwrap_or_default();
        let time = rev["time"].as_str().and_then(revision_time);
        let verdict = judge(cx, repo, policy, r, (id, time), architecture).await?;
        if verdict.passes() {
            kept.push((id.to_string(), rev.clone(), verdict));
        }
    }
    Ok(kept)
}

/// The refusal of a `latest` whose every revision is held: the newest one's reason.
async fn held_latest(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    (r, list): (&Reference, Option<&serde_json::Value>),
    architecture: Option<&str>,
) -> Result<FormatError, FormatError> {
    let list = given_or_read(cx, repo, r, list).await?;
    let list = list.as_ref();
    let Some(newest) = list["revisions"].as_array().and_then(|a| a.first()) else {
        return Ok(not_found(format!("recipe {}", r.display())));
    };
    let id = newest["revision"].as_str().unwrap_or_default();
    let time = newest["time"].as_str().and_then(revision_time);
    let verdict = judge(cx, repo, policy, r, (id, time), architecture).await?;
    Ok(gate::refusal(cx.services, &verdict, &r.name, &reference_version(r, id), repo)
        .unwrap_or_else(|| not_found(format!("recipe {}", r.display()))))
}

/// The verdict on recipe revision `rrev` (for a binary of `architecture`), timed by the
/// recipe's revision list.
async fn recipe_verdict(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    (r, rrev): (&Reference, &str),
    architecture: Option<&str>,
) -> Result<Verdict, FormatError> {
    let key = format!("{}#{rrev}", r.display());
    let mut time = cx.services.policy.time(repo.id, &key);
    if time.is_none() && policy.ages(&r.name) {
        let list = revision_list(cx, repo, Target::Revisions(r.clone())).await?;
        time = list["revisions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["revision"] == rrev)
            .and_then(|v| v["time"].as_str())
            .and_then(revision_time);
        if let Some(t) = time {
            cx.services.policy.remember_time(repo.id, &key, t);
        }
    }
    judge(cx, repo, policy, r, (rrev, time), architecture).await
}

/// The gate's verdict on a revision of `r` published at `time` (the version is what rules,
/// exceptions and advisories name), of a binary for `architecture` (`None`: a recipe, which
/// rules on architectures leave to its binaries).
async fn judge(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    r: &Reference,
    (rrev, time): (&str, Option<i64>),
    architecture: Option<&str>,
) -> Result<Verdict, FormatError> {
    // The same revision judged a moment ago (`PolicyCache::verdict`).
    let key = format!("{}#{rrev} {time:?} {architecture:?}", r.display());
    if let Some(v) = cx.services.policy.verdict(repo, &key) {
        return Ok(v);
    }
    let stamp = cx.services.policy.stamp();
    let component = packyard_formats::conan::catalogue::component(r, rrev);
    let published_ms = time.filter(|_| policy.ages(&r.name));
    let licenses = if packyard_model::policy::wants_licenses(policy) {
        recipe_licenses(cx, repo, r, rrev).await?
    } else {
        std::sync::Arc::default()
    };
    let subject = Subject { name: &r.name, version: &r.version, published_ms, licenses: &licenses, architecture };
    let c = Candidate { subject, component: (&component.key, &component.group, &component.name) };
    let verdict = gate::judge(cx.services, repo, policy, &c).await?;
    cx.services.policy.remember_verdict(repo, &key, stamp, &verdict);
    Ok(verdict)
}

/// The licenses recipe revision `rrev` of `r` declares (its `conanfile.py`'s `license`, read
/// through the repository once, then kept); none when it declares none or has no such file.
async fn recipe_licenses(
    cx: &Cx<'_>,
    repo: &Repository,
    r: &Reference,
    rrev: &str,
) -> Result<std::sync::Arc<Vec<String>>, FormatError> {
    let key = format!("{}#{rrev}", r.display());
    if let Some(known) = cx.services.policy.licenses(repo.id, &key) {
        return Ok(known);
    }
    let target = Target::File(r.clone(), rrev.to_string(), "conanfile.py".to_string());
    let text = match gate::plain(read(cx, repo, target, 0)).await {
        Ok(res) => {
            let bytes = gate::body(res).await?;
            let end = bytes.len().min(packyard_codecs::conan::recipe::MAX_CONANFILE);
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        }
        Err(e) if e.0.code == ErrorCode::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let licenses: Vec<String> = packyard_codecs::conan::recipe::declared_licenses(&text)
        .iter()
        .flat_map(|l| packyard_model::policy::license_names(l))
        .collect();
    let licenses = std::sync::Arc::new(licenses);
    cx.services.policy.remember_licenses(repo.id, &key, licenses.clone());
    Ok(licenses)
}

/// The packages of recipe revision `rrev` (`…/search`: package id → its `conaninfo.txt`) but
/// those of an architecture the policy's rules hold back.
async fn packages(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    (r, rrev): (&Reference, &str),
) -> Result<HttpResponse, FormatError> {
    let target = Target::Packages(r.clone(), Some(rrev.to_string()));
    if !packyard_model::policy::wants_architectures(policy) {
        return read(cx, repo, target, 0).await;
    }
    let bytes = gate::body(gate::plain(read(cx, repo, target, 0)).await?).await?;
    let mut all: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes).map_err(|e| {
        FormatError::from(ApiError::new(
            ErrorCode::BadGateway,
            format!("the package search of {} in {} is not a JSON object: {e}", r.display(), repo.name),
        ))
    })?;
    let mut held = Vec::new();
    for (pkgid, info) in &all {
        // Conan's server gives the `conaninfo.txt` as `content`; some give the settings parsed.
        let arch = info["content"]
            .as_str()
            .and_then(|text| packyard_codecs::conan::conaninfo_setting(text, "arch"))
            .or_else(|| info["settings"]["arch"].as_str());
        if !recipe_verdict(cx, repo, policy, (r, rrev), arch).await?.passes() {
            held.push(pkgid.clone());
        }
    }
    for pkgid in held {
        all.remove(&pkgid);
    }
    Ok(gate::filtered("application/json", serde_json::Value::Object(all).to_string()))
}

/// The architecture package `pkgid` of recipe revision `rrev` is built for (its
/// `conaninfo.txt`'s `arch` setting, read at package revision `prev` through the repository
/// once, then kept: a package id's settings never change), when a rule of the policy names
/// architectures; else, and for a package that says none, `None`.
async fn binary_architecture(
    cx: &Cx<'_>,
    repo: &Repository,
    policy: &PolicySettings,
    (r, rrev, pkgid, prev): (&Reference, &str, &str, &str),
) -> Result<Option<std::sync::Arc<str>>, FormatError> {
    if !packyard_model::policy::wants_architectures(policy) {
        return Ok(None);
    }
    let key = format!("{}#{rrev}:{pkgid}", r.display());
    if let Some(known) = cx.services.policy.architecture(repo.id, &key) {
        return Ok(known);
    }
    let target = Target::PackageFile(r.clone(), rrev.into(), pkgid.into(), prev.into(), "conaninfo.txt".into());
    let text = match gate::plain(read(cx, repo, target, 0)).await {
        Ok(res) => {
            let bytes = gate::body(res).await?;
            let end = bytes.len().min(packyard_codecs::conan::recipe::MAX_CONANFILE);
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        }
        // Judged again on the next request (the package may be on its way).
        Err(e) if e.0.code == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let arch: Option<std::sync::Arc<str>> = packyard_codecs::conan::conaninfo_setting(&text, "arch").map(Into::into);
    cx.services.policy.remember_architecture(repo.id, &key, arch.clone());
    Ok(arch)
}

#[cfg(test)]
mod tests {
    #[test]
    fn revision_times() {
        assert_eq!(super::revision_time("1970-01-01T00:00:01.000+0000"), Some(1000));
        assert_eq!(super::revision_time("1970-01-01T01:00:01+0100"), Some(1000));
        assert_eq!(super::revision_time("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(super::revision_time("1970-01-01T00:00:01.000+aé"), None);
        assert_eq!(super::revision_time("+0000"), None);
        assert_eq!(super::revision_time(""), None);
    }
}
