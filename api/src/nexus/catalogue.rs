//! Nexus's search and browse API over the catalogue: `search`, `search/assets`,
//! `search/assets/download`, `components` and `assets`, with Nexus's parameters, field names and
//! `continuationToken` pages. A caller sees the repositories it may read: without `repository`,
//! every readable hosted and proxy repository's own components; with a group, its members'
//! components as the group serves them (its name, its URLs). Ids are opaque and stable: the
//! repository a row is seen through and the row's id.

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine as _;
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_core::vulnerabilities::{self, Match};
use packyard_model::osv::Level;
use packyard_model::repos::{RepoType, Repository};
use packyard_model::security::Reach;
use packyard_store::db::catalogue::{AssetRow, ComponentRow, Pattern, Search, Sort};
use packyard_store::db::Db;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::error::ApiError;

/// Rows per page.
pub const PAGE: i64 = 100;

/// `upload`: the components upload (`POST /components`), on the same resource as the listing.
pub fn configure(scope: actix_web::Scope, upload: actix_web::Route) -> actix_web::Scope {
    use super::refused::resource;
    let list = |what: (Listing, Rows)| {
        web::get().to(move |req: HttpRequest, s: web::Data<Services>, c: Caller, p: web::Query<Params>| {
            listed(req, s, c, p, what)
        })
    };
    scope
        .service(resource("/search").route(list((Listing::Search, Rows::Components))))
        .service(resource("/search/assets").route(list((Listing::Search, Rows::Assets))))
        .service(resource("/search/assets/download").route(web::get().to(download)))
        .service(resource("/components").route(list((Listing::Repository, Rows::Components))).route(upload))
        .service(resource("/components/{id}").route(web::get().to(component)).route(web::delete().to(delete_component)))
        .service(resource("/assets").route(list((Listing::Repository, Rows::Assets))))
        .service(resource("/assets/{id}").route(web::get().to(asset)).route(web::delete().to(delete_asset)))
}

/// Nexus's search parameters (others, such as a Maven coordinate, are not Packyard's and are
/// ignored).
#[derive(Debug, Default, Deserialize)]
pub struct Params {
    repository: Option<String>,
    format: Option<String>,
    group: Option<String>,
    name: Option<String>,
    version: Option<String>,
    q: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
    md5: Option<String>,
    sort: Option<String>,
    direction: Option<String>,
    #[serde(rename = "continuationToken")]
    continuation_token: Option<String>,
    /// Packyard's: only components with an advisory of this level or above (`low`, `medium`,
    /// `high`, `critical`).
    severity: Option<String>,
}

/// The repositories a request reads: those it searches, and what each is seen through.
pub(crate) struct Scope {
    /// Every repository by id (to name owners and views).
    pub(crate) by_id: HashMap<i64, Arc<Repository>>,
    /// Searched repository id → the repository its rows are shown as.
    pub(crate) view: HashMap<i64, Arc<Repository>>,
}

impl Scope {
    pub(crate) fn searched(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.view.keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}

/// Whether the caller may read `r`, or part of it through a content selector, as the
/// repository routes decide it (what a selector leaves out is filtered from each listing:
/// [`visible`]).
pub(crate) fn readable(caller: &Caller, services: &Services, r: &Repository) -> bool {
    crate::content::reach(caller, services, r, Action::Read) != Reach::Nothing
}

/// The rows of a page the caller may read ([`visible`]), their assets fetched only where a
/// content selector decides.
pub(crate) async fn visible_rows(
    caller: &Caller,
    services: &Services,
    scope: &Scope,
    rows: Vec<ComponentRow>,
) -> Result<Vec<ComponentRow>, ApiError> {
    let partial = scope.view.values().any(|v| crate::content::reach(caller, services, v, Action::Read) == Reach::Part);
    if !partial {
        return Ok(rows);
    }
    let ids: Vec<i64> = rows.iter().map(|c| c.id).collect();
    let assets = services.db.catalogue_assets_of(&ids).await?;
    Ok(visible(caller, services, scope, rows, assets).0)
}

/// What of a page the caller may read: the components (seen through their view) with at least
/// one readable asset, and the readable assets. Nothing is filtered where the caller reads
/// whole repositories.
pub(crate) fn visible(
    caller: &Caller,
    services: &Services,
    scope: &Scope,
    rows: Vec<ComponentRow>,
    assets: Vec<AssetRow>,
) -> (Vec<ComponentRow>, Vec<AssetRow>) {
    let partial = |c: &ComponentRow| {
        scope
            .view
            .get(&c.repository_id)
            .filter(|v| crate::content::reach(caller, services, v, Action::Read) == Reach::Part)
    };
    if !rows.iter().any(|c| partial(c).is_some()) {
        return (rows, assets);
    }
    let rows: Vec<ComponentRow> = rows
        .into_iter()
        .filter(|c| {
            partial(c).is_none_or(|v| crate::content::allows_component(caller, services, v, Action::Read, c, &assets))
        })
        .collect();
    let by_id: HashMap<i64, &ComponentRow> = rows.iter().map(|c| (c.id, c)).collect();
    let assets: Vec<AssetRow> = assets
        .into_iter()
        .filter(|a| {
            by_id.get(&a.component_id).is_some_and(|c| {
                partial(c).is_none_or(|v| crate::content::allows_asset(caller, services, v, Action::Read, c, a))
            })
        })
        .collect();
    (rows, assets)
}

/// The hosted and proxy repositories a group serves, nested groups followed (each once).
pub(crate) use packyard_core::groups::leaf_members as members_of;

pub(crate) async fn scope(services: &Services, caller: &Caller, repository: Option<&str>) -> Result<Scope, ApiError> {
    let all: Vec<Arc<Repository>> =
        services.db.list_repositories().await.map_err(ApiError::internal)?.into_iter().map(Arc::new).collect();
    let by_id: HashMap<i64, Arc<Repository>> = all.iter().map(|r| (r.id, r.clone())).collect();
    let mut view = HashMap::new();
    match repository {
        Some(name) => {
            if let Some(r) = all.iter().find(|r| r.name.as_str() == name).filter(|r| readable(caller, services, r)) {
                if r.repo_type == RepoType::Group {
                    let by_name: HashMap<String, Arc<Repository>> =
                        all.iter().map(|r| (r.name.to_string(), r.clone())).collect();
                    for m in members_of(r, &by_name) {
                        view.insert(m.id, r.clone());
                    }
                } else {
                    view.insert(r.id, r.clone());
                }
            }
        }
        None => {
            for r in all.iter().filter(|r| r.repo_type != RepoType::Group && readable(caller, services, r)) {
                view.insert(r.id, r.clone());
            }
        }
    }
    Ok(Scope { by_id, view })
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

/// What an id names: a component (`c`) or an asset (`a`), so that one is never taken for the
/// other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Component,
    Asset,
}

impl Kind {
    fn letter(self) -> &'static str {
        match self {
            Self::Component => "c",
            Self::Asset => "a",
        }
    }
}

/// An opaque id: what it names, the repository the row is seen through, and the row.
pub(crate) fn encode_id(kind: Kind, view: i64, row: i64) -> String {
    b64().encode(format!("{}:{view}:{row}", kind.letter()))
}

pub(crate) fn decode_id(kind: Kind, id: &str) -> Option<(i64, i64)> {
    let text = String::from_utf8(b64().decode(id).ok()?).ok()?;
    let rest = text.strip_prefix(kind.letter())?.strip_prefix(':')?;
    let (view, row) = rest.split_once(':')?;
    Some((view.parse().ok()?, row.parse().ok()?))
}

pub(crate) fn encode_token(value: &str, id: i64) -> String {
    b64().encode(json!([value, id]).to_string())
}

pub(crate) fn decode_token(token: &str) -> Result<(String, i64), ApiError> {
    let bad = || ApiError::bad_request("continuationToken is not one this server issued for this search");
    let bytes = b64().decode(token).map_err(|_| bad())?;
    let (value, id): (String, i64) = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok((value, id))
}

/// Where `downloadUrl`s point: `server.public_url`, else the request's scheme and host.
fn base_url(req: &HttpRequest) -> String {
    crate::frontage::Base::of(req).url("")
}

/// The search a request's parameters ask for, over `searched`.
fn search_of(p: &Params, searched: Vec<i64>) -> Result<Search, ApiError> {
    let sort = match p.sort.as_deref() {
        None => Sort::Id,
        Some("group") => Sort::Group,
        Some("name") => Sort::Name,
        Some("version") => Sort::Version,
        Some("repository") => Sort::Repository,
        Some(other) => {
            return Err(ApiError::bad_request(format!("sort {other:?} is not one of group, name, version, repository")))
        }
    };
    let descending = match p.direction.as_deref() {
        None => sort == Sort::Version,
        Some("asc") => false,
        Some("desc") => true,
        Some(other) => return Err(ApiError::bad_request(format!("direction {other:?} is not asc or desc"))),
    };
    let pattern = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(Pattern::parse);
    let after = p.continuation_token.as_deref().map(decode_token).transpose()?;
    Ok(Search {
        repositories: searched,
        format: p.format.clone().filter(|s| !s.is_empty()),
        group: pattern(&p.group),
        name: pattern(&p.name),
        version: pattern(&p.version),
        keyword: pattern(&p.q),
        sha256: p.sha256.clone().filter(|s| !s.is_empty()),
        sha1: p.sha1.clone().filter(|s| !s.is_empty()),
        md5: p.md5.clone().filter(|s| !s.is_empty()),
        sort,
        descending,
        after,
        limit: PAGE,
    })
}

fn asset_json(base: &str, view: &Repository, format: &str, a: &AssetRow) -> Value {
    let mut checksum = serde_json::Map::new();
    for (k, v) in [("sha1", &a.sha1), ("md5", &a.md5)] {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            checksum.insert(k.into(), json!(v));
        }
    }
    checksum.insert("sha256".into(), json!(a.sha256));
    let time = packyard_model::time::rfc3339_ms;
    json!({
        "downloadUrl": format!("{base}/repository/{}/{}", view.name, a.path),
        "path": a.path,
        "id": encode_id(Kind::Asset, view.id, a.id),
        "repository": view.name.as_str(),
        "format": format,
        "checksum": checksum,
        "contentType": a.content_type,
        "lastModified": time(a.created_at),
        "lastDownloaded": a.last_downloaded.map(time),
        "uploader": Some(&a.uploaded_by).filter(|u| !u.is_empty()),
        "fileSize": a.size,
        "blobCreated": time(a.created_at),
        "downloadCount": a.download_count,
    })
}

/// The advisories that affect a component (OSV data, `packyard-api vulnerabilities import`).
/// `owner`: the repository that holds the component (its release decides which advisories of
/// the ecosystem apply).
async fn advisories(services: &Services, owner: &Repository, c: &ComponentRow) -> Result<Vec<Match>, ApiError> {
    let key = (c.component_key.as_str(), c.namespace.as_str(), c.name.as_str(), c.version.as_str());
    vulnerabilities::matches(services, packyard_formats::registry(), owner, key)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// `?severity=`: the lowest level a listed component's advisories must reach.
fn min_severity(p: &Params) -> Result<Option<Level>, ApiError> {
    p.severity
        .as_deref()
        .map(|s| {
            Level::parse(s)
                .ok_or_else(|| ApiError::bad_request(format!("severity {s:?}: one of low, medium, high, critical")))
        })
        .transpose()
}

fn component_json(base: &str, view: &Repository, c: &ComponentRow, assets: &[AssetRow], found: &[Match]) -> Value {
    json!({
        "id": encode_id(Kind::Component, view.id, c.id),
        "repository": view.name.as_str(),
        "format": c.format,
        "group": c.namespace,
        "name": c.name,
        "version": c.version,
        "assets": assets.iter().filter(|a| a.component_id == c.id).map(|a| asset_json(base, view, &c.format, a)).collect::<Vec<_>>(),
        "advisories": found,
    })
}

/// A page of components with their assets, and the token of the next page.
async fn component_page(
    (req, caller): (&HttpRequest, &Caller),
    services: &Services,
    scope: &Scope,
    search: &Search,
    min: Option<Level>,
) -> Result<Value, ApiError> {
    let db = &services.db;
    let rows = db.catalogue_search(search).await?;
    let ids: Vec<i64> = rows.iter().map(|c| c.id).collect();
    let assets = db.catalogue_assets_of(&ids).await?;
    let base = base_url(req);
    let last = rows.last().cloned();
    let full = rows.len() as i64 == search.limit;
    let (rows, assets) = visible(caller, services, scope, rows, assets);
    let mut items = Vec::with_capacity(rows.len());
    for c in &rows {
        let Some(view) = scope.view.get(&c.repository_id) else { continue };
        let owner = scope.by_id.get(&c.repository_id).unwrap_or(view);
        let found = advisories(services, owner, c).await?;
        let worst = found.iter().filter_map(|m| Level::parse(&m.severity)).max();
        if min.is_some_and(|min| worst.is_none_or(|w| w < min)) {
            continue;
        }
        items.push(component_json(&base, view, c, &assets, &found));
    }
    // The page's last row, seen or not, is where the next page starts.
    let token = last.filter(|_| full).map(|c| {
        let owner = scope.by_id.get(&c.repository_id).map_or("", |r| r.name.as_str());
        encode_token(&Db::catalogue_sort_value(search.sort, &c, owner), c.id)
    });
    Ok(json!({"items": items, "continuationToken": token}))
}

/// A page of assets, and the token of the next page (for a sorted search, the sort value of
/// each asset's component).
async fn asset_page(
    (req, caller): (&HttpRequest, &Caller),
    services: &Services,
    scope: &Scope,
    search: &Search,
) -> Result<Value, ApiError> {
    let db = &services.db;
    let rows = db.catalogue_search_assets(search).await?;
    let base = base_url(req);
    // The page's components in one query (their format, and the sort value of the token).
    let mut ids: Vec<i64> = rows.iter().map(|a| a.component_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let components: HashMap<i64, ComponentRow> =
        db.catalogue_components(&ids).await?.into_iter().map(|c| (c.id, c)).collect();
    let mut items = Vec::with_capacity(rows.len());
    for a in &rows {
        let (Some(view), Some(c)) = (scope.view.get(&a.repository_id), components.get(&a.component_id)) else {
            continue;
        };
        if !crate::content::allows_asset(caller, services, view, Action::Read, c, a) {
            continue;
        }
        items.push(asset_json(&base, view, &c.format, a));
    }
    let token = (rows.len() as i64 == search.limit).then(|| rows.last()).flatten().map(|a| {
        let value = components.get(&a.component_id).map_or(String::new(), |c| {
            let owner = scope.by_id.get(&c.repository_id).map_or("", |r| r.name.as_str());
            Db::catalogue_sort_value(search.sort, c, owner)
        });
        encode_token(&value, a.id)
    });
    Ok(json!({"items": items, "continuationToken": token}))
}

/// Which list a request asks for: a search (`/search`, `/search/assets`) or a repository's
/// contents (`/components`, `/assets`), of components or of assets.
#[derive(Clone, Copy)]
enum Listing {
    Search,
    Repository,
}

#[derive(Clone, Copy)]
enum Rows {
    Components,
    Assets,
}

/// `GET /search` (components matching every parameter given), `/search/assets` (their assets,
/// checksums matched too), `/components?repository=` and `/assets?repository=` (a repository's
/// contents in catalogue order).
async fn listed(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
    p: web::Query<Params>,
    (listing, rows): (Listing, Rows),
) -> Result<HttpResponse, ApiError> {
    let (scope, search) = match listing {
        Listing::Search => {
            let scope = scope(&services, &caller, p.repository.as_deref()).await?;
            let search = search_of(&p, scope.searched())?;
            (scope, search)
        }
        Listing::Repository => {
            let scope = listed_scope(&services, &caller, &p).await?;
            let after = p.continuation_token.as_deref().map(decode_token).transpose()?;
            let search = Search { repositories: scope.searched(), after, limit: PAGE, ..Search::default() };
            (scope, search)
        }
    };
    let min = min_severity(&p)?;
    let page = match rows {
        Rows::Components => component_page((&req, &caller), &services, &scope, &search, min).await?,
        Rows::Assets => asset_page((&req, &caller), &services, &scope, &search).await?,
    };
    Ok(HttpResponse::Ok().json(page))
}

/// `GET /search/assets/download`: a redirect to the one asset matching; 400 when several do,
/// 404 when none.
async fn download(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
    p: web::Query<Params>,
) -> Result<HttpResponse, ApiError> {
    let scope = scope(&services, &caller, p.repository.as_deref()).await?;
    let mut search = search_of(&p, scope.searched())?;
    search.limit = 2;
    let page = asset_page((&req, &caller), &services, &scope, &search).await?;
    let items = page["items"].as_array().cloned().unwrap_or_default();
    match items.as_slice() {
        [] => Err(ApiError::not_found("no asset matches the search")),
        [one] => {
            let url = one["downloadUrl"].as_str().unwrap_or_default().to_string();
            Ok(HttpResponse::Found().insert_header((actix_web::http::header::LOCATION, url)).finish())
        }
        _ => Err(ApiError::bad_request(
            "the search matches several assets; refine it (repository, name, version, sha256 …) to match one",
        )),
    }
}

/// The named repository for `components` and `assets`, which Nexus requires.
fn required_repository(p: &Params) -> Result<&str, ApiError> {
    p.repository
        .as_deref()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| ApiError::bad_request("the repository parameter is required: ?repository=<name>"))
}

async fn listed_scope(services: &Services, caller: &Caller, p: &Params) -> Result<Scope, ApiError> {
    let name = required_repository(p)?;
    let scope = scope(services, caller, Some(name)).await?;
    let known = scope.view.values().next().is_some()
        || scope.by_id.values().any(|r| r.name.as_str() == name && readable(caller, services, r));
    if !known {
        return Err(ApiError::not_found(format!("repository {name} not found")));
    }
    Ok(scope)
}

/// What an id names, when the caller may read it: the repository it is seen through and the
/// repository that holds it.
async fn resolve(
    services: &Services,
    caller: &Caller,
    (kind, id): (Kind, &str),
    owner_of: i64,
) -> Result<(Arc<Repository>, Arc<Repository>), ApiError> {
    let gone = || ApiError::not_found(format!("{id} not found"));
    let (view_id, _) = decode_id(kind, id).ok_or_else(gone)?;
    let all: Vec<Arc<Repository>> =
        services.db.list_repositories().await.map_err(ApiError::internal)?.into_iter().map(Arc::new).collect();
    let view = all.iter().find(|r| r.id == view_id).filter(|r| readable(caller, services, r)).ok_or_else(gone)?;
    let owner = all.iter().find(|r| r.id == owner_of).ok_or_else(gone)?;
    if view.id != owner.id {
        let by_name: HashMap<String, Arc<Repository>> = all.iter().map(|r| (r.name.to_string(), r.clone())).collect();
        if view.repo_type != RepoType::Group || !members_of(view, &by_name).iter().any(|m| m.id == owner.id) {
            return Err(gone());
        }
    }
    Ok((view.clone(), owner.clone()))
}

pub(crate) async fn component_by_id(
    services: &Services,
    caller: &Caller,
    id: &str,
) -> Result<(Arc<Repository>, Arc<Repository>, ComponentRow), ApiError> {
    let gone = || ApiError::not_found(format!("component {id} not found"));
    let (_, row) = decode_id(Kind::Component, id).ok_or_else(gone)?;
    let c = services.db.catalogue_component(row).await?.ok_or_else(gone)?;
    let (view, owner) = resolve(services, caller, (Kind::Component, id), c.repository_id).await.map_err(|_| gone())?;
    if crate::content::reach(caller, services, &view, Action::Read) == Reach::Part {
        let assets = services.db.catalogue_assets_of(&[c.id]).await?;
        if !crate::content::allows_component(caller, services, &view, Action::Read, &c, &assets) {
            return Err(gone());
        }
    }
    Ok((view, owner, c))
}

async fn asset_by_id(
    services: &Services,
    caller: &Caller,
    id: &str,
) -> Result<(Arc<Repository>, Arc<Repository>, AssetRow), ApiError> {
    let gone = || ApiError::not_found(format!("asset {id} not found"));
    let (_, row) = decode_id(Kind::Asset, id).ok_or_else(gone)?;
    let a = services.db.catalogue_asset(row).await?.ok_or_else(gone)?;
    let (view, owner) = resolve(services, caller, (Kind::Asset, id), a.repository_id).await.map_err(|_| gone())?;
    if crate::content::reach(caller, services, &view, Action::Read) == Reach::Part {
        let c = services.db.catalogue_component(a.component_id).await?.ok_or_else(gone)?;
        if !crate::content::allows_asset(caller, services, &view, Action::Read, &c, &a) {
            return Err(gone());
        }
    }
    Ok((view, owner, a))
}

/// `GET /components/{id}`.
async fn component(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (view, owner, c) = component_by_id(&services, &caller, &id).await?;
    let assets: Vec<AssetRow> = services
        .db
        .catalogue_assets_of(&[c.id])
        .await?
        .into_iter()
        .filter(|a| crate::content::allows_asset(&caller, &services, &view, Action::Read, &c, a))
        .collect();
    let found = advisories(&services, &owner, &c).await?;
    Ok(HttpResponse::Ok().json(component_json(&base_url(&req), &view, &c, &assets, &found)))
}

/// `GET /assets/{id}`.
async fn asset(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (view, _, a) = asset_by_id(&services, &caller, &id).await?;
    let format = services.db.catalogue_component(a.component_id).await?.map(|c| c.format).unwrap_or_default();
    Ok(HttpResponse::Ok().json(asset_json(&base_url(&req), &view, &format, &a)))
}

/// Whether the caller may delete component `c` (with its `assets`) from `owner`: all of the
/// repository, or, through a content selector, one of the component's files.
pub(crate) fn check_delete(
    services: &Services,
    caller: &Caller,
    owner: &Repository,
    (c, assets): (&ComponentRow, &[AssetRow]),
) -> Result<(), ApiError> {
    match crate::content::reach(caller, services, owner, Action::Delete) {
        Reach::All => return Ok(()),
        // A delete removes the whole component: every file of it must be selected.
        Reach::Part if crate::content::allows_whole_component(caller, services, owner, Action::Delete, c, assets) => {
            return Ok(())
        }
        Reach::Part => {
            let what = format!("{} {}", c.name, c.version);
            return Err(crate::content::refusal(caller, services, owner, Action::Delete, &what));
        }
        Reach::Nothing => {}
    }
    if caller.principal.is_anonymous() {
        return Err(ApiError::unauthorized(format!("deleting from repository {} needs credentials", owner.name)));
    }
    Err(ApiError::forbidden(format!("user {} may not delete from repository {}", caller.username(), owner.name)))
}

/// Deletes a component as its format's own delete does (a hosted repository's rows, indexes
/// republished — answered once they are —, audit entry), or a proxy's cached copy of it.
pub(crate) async fn delete_catalogued(
    services: &Services,
    caller: &Caller,
    owner: &Repository,
    c: &ComponentRow,
    asset: Option<&str>,
) -> Result<HttpResponse, ApiError> {
    let assets = match crate::content::reach(caller, services, owner, Action::Delete) {
        Reach::Part => services.db.catalogue_assets_of(&[c.id]).await?,
        _ => Vec::new(),
    };
    check_delete(services, caller, owner, (c, &assets))?;
    let deleted = match owner.repo_type {
        RepoType::Proxy => packyard_core::catalogue::delete_cached(services, owner, c, caller.actor()).await?,
        _ => match packyard_formats::registry()
            .get(owner.format)
            .delete_catalogued(services, owner, &c.component_key, asset, caller.actor())
            .await?
        {
            Some(changes) => {
                // As the formats' own deletes of Go and Conan do, and an upload with
                // `?wait=true`: answered once the indexes without it are served.
                crate::formats::wait_published(services, &changes).await.map_err(|e| e.0)?;
                true
            }
            None => false,
        },
    };
    if deleted {
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(ApiError::not_found(format!("{} is not in repository {} any more", c.component_key, owner.name)))
    }
}

/// `DELETE /components/{id}`.
async fn delete_component(
    services: web::Data<Services>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (_, owner, c) = component_by_id(&services, &caller, &id).await?;
    delete_catalogued(&services, &caller, &owner, &c, None).await
}

/// `DELETE /assets/{id}`: deletes what the asset belongs to (its component; for Conan, the
/// package revision a package file belongs to).
async fn delete_asset(
    services: web::Data<Services>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (_, owner, a) = asset_by_id(&services, &caller, &id).await?;
    let c = services
        .db
        .catalogue_component(a.component_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("asset {id} not found")))?;
    delete_catalogued(&services, &caller, &owner, &c, Some(&a.path)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_tokens_round_trip() {
        assert_eq!(decode_id(Kind::Component, &encode_id(Kind::Component, 3, 123_456)), Some((3, 123_456)));
        assert_eq!(
            decode_id(Kind::Asset, &encode_id(Kind::Component, 3, 123_456)),
            None,
            "a component's id names no asset"
        );
        assert_eq!(decode_id(Kind::Asset, "not-an-id"), None);
        assert_eq!(decode_token(&encode_token("zlib", 9)).ok(), Some(("zlib".to_string(), 9)));
        assert!(decode_token("garbage").is_err());
    }
}
