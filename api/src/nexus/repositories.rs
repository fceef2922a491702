//! Nexus's repository management (`/service/rest/v1/repositories/<format>/<type>[/<name>]`,
//! `/repositories/<name>`, `/repositorySettings`), in Nexus's shapes, over the admin API's
//! service: a request is read into Packyard's definition (`create`) or a merge patch of it
//! (`update`: what Nexus's shape does not name — anonymous reads, an APT repository's
//! components — stays), and a repository is shown as Nexus shows it. Nexus's names of a format's
//! own fields come from the format (`FormatSpec::nexus`); what each field becomes is in
//! docs/nexus-api.md. Errors are Nexus's `{"id": "*", "message": …}`.

use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::admin::{cleanup, repositories as service};
use packyard_core::formats::{FormatSpec, KeyChange};
use packyard_core::hosted::Actor;
use packyard_core::services::Services;
use packyard_model::cleanup::PolicySpec;
use packyard_model::repos::{Format, RepoType, RepositorySpec};
use serde_json::{json, Map, Value};

use crate::auth::{Admin, Caller};
use crate::error::{ApiError, NexusError};

type Result<T> = std::result::Result<T, NexusError>;

/// Packyard's one blob store, as Nexus names blob stores.
pub use packyard_core::quota::BLOB_STORE;
/// Nexus's "never" for an age in minutes.
const NEVER: i64 = -1;

pub fn configure(scope: actix_web::Scope) -> actix_web::Scope {
    use super::refused::resource;
    scope
        .service(resource("/repositorySettings").route(web::get().to(settings)))
        .service(resource("/repositories/{name}").route(web::get().to(get_one)).route(web::delete().to(delete)))
        .service(resource("/repositories/{format}/{type}").route(web::post().to(create)))
        .service(
            resource("/repositories/{format}/{type}/{name}")
                .route(web::get().to(get_typed))
                .route(web::put().to(update)),
        )
}

fn invalid(message: impl Into<String>) -> NexusError {
    NexusError(ApiError::bad_request(message))
}

fn not_found() -> NexusError {
    NexusError(ApiError::not_found("Repository not found"))
}

/// The format and type a path names (`apt`, `hosted`), or 404 as Nexus answers an unknown one.
pub(crate) fn kind(format: &str, repo_type: &str) -> Result<(&'static dyn FormatSpec, RepoType)> {
    let unknown = || {
        NexusError(ApiError::not_found(format!(
            "Repository not found: Packyard serves the {} formats as hosted, proxy and group repositories, not {format}/{repo_type}",
            Format::listed("and")
        )))
    };
    let format: Format = format.parse().map_err(|_| unknown())?;
    let spec = packyard_formats::registry().offered().find(|s| s.format() == format).ok_or_else(unknown)?;
    Ok((spec, repo_type.parse().map_err(|_| unknown())?))
}

fn body_object(body: &[u8]) -> Result<Map<String, Value>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(invalid("the body must be a JSON object")),
        Err(e) => Err(invalid(format!("invalid JSON body: {e}"))),
    }
}

/// A request body read into Packyard's terms.
pub(crate) struct Read {
    pub(crate) name: String,
    /// Packyard's definition fields (`write_policy`, `proxy`, `group`, the format's block).
    fields: Map<String, Value>,
    /// `cleanup.policyNames` (`None`: not sent).
    policies: Option<Vec<String>>,
    pub(crate) signing_key: Option<String>,
}

fn minutes(v: Option<&Value>, what: &str) -> Result<Option<u64>> {
    match v.filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) => match v.as_i64() {
            Some(NEVER) => Ok(Some(10 * 365 * 24 * 3600)),
            Some(m) if m >= 0 => Ok(Some(u64::try_from(m).unwrap_or(0).saturating_mul(60))),
            _ => Err(invalid(format!("{what}: minutes, 0 or more (or -1 for never)"))),
        },
    }
}

/// Reads Nexus's request: what Packyard honours becomes its definition, what it cannot is a
/// 400 naming the field, the rest (Nexus's own tuning without a counterpart) is ignored.
pub(crate) fn read(spec: &dyn FormatSpec, repo_type: RepoType, body: &Map<String, Value>) -> Result<Read> {
    let name = body.get("name").and_then(Value::as_str).ok_or_else(|| invalid("name: required"))?.to_string();
    if body.get("online").and_then(Value::as_bool) == Some(false) {
        return Err(invalid(
            "online: Packyard has no offline repositories (set storage.writePolicy DENY to stop writes)",
        ));
    }
    let mut fields = Map::new();
    if let Some(storage) = body.get("storage").filter(|v| !v.is_null()) {
        if let Some(store) = storage.get("blobStoreName").and_then(Value::as_str).filter(|s| *s != BLOB_STORE) {
            return Err(invalid(format!(
                "storage.blobStoreName {store:?}: Packyard has one blob store, {BLOB_STORE:?}"
            )));
        }
        if let Some(policy) = storage.get("writePolicy").and_then(Value::as_str) {
            let policy = match policy.to_ascii_uppercase().as_str() {
                "ALLOW" => "allow",
                "ALLOW_ONCE" => "allow_once",
                "DENY" => "deny",
                _ => return Err(invalid(format!("storage.writePolicy {policy:?}: ALLOW, ALLOW_ONCE or DENY"))),
            };
            if repo_type == RepoType::Hosted {
                fields.insert("write_policy".into(), json!(policy));
            }
        }
    }
    if repo_type == RepoType::Proxy {
        let proxy = body
            .get("proxy")
            .filter(|v| !v.is_null())
            .ok_or_else(|| invalid("proxy: required for a proxy repository"))?;
        let url = proxy.get("remoteUrl").and_then(Value::as_str).ok_or_else(|| invalid("proxy.remoteUrl: required"))?;
        let mut p = Map::new();
        p.insert("remote_url".into(), json!(url));
        if let Some(secs) = minutes(proxy.get("metadataMaxAge"), "proxy.metadataMaxAge")? {
            p.insert("metadata_ttl_secs".into(), json!(secs));
        }
        if let Some(negative) = body.get("negativeCache").filter(|v| !v.is_null()) {
            let ttl = minutes(negative.get("timeToLive"), "negativeCache.timeToLive")?;
            let secs = if negative.get("enabled").and_then(Value::as_bool) == Some(false) { Some(0) } else { ttl };
            if let Some(secs) = secs {
                p.insert("negative_ttl_secs".into(), json!(secs));
            }
        }
        let client = body.get("httpClient").filter(|v| !v.is_null());
        // Nexus's "block outbound connections": Packyard's `proxy.offline`.
        if client.and_then(|c| c.get("blocked")).and_then(Value::as_bool) == Some(true) {
            p.insert("offline".into(), json!(true));
        }
        match client.and_then(|c| c.get("authentication")).filter(|v| !v.is_null()) {
            Some(auth) => {
                let kind = auth.get("type").and_then(Value::as_str).unwrap_or("username");
                if kind != "username" {
                    return Err(invalid(format!(
                        "httpClient.authentication.type {kind:?}: Packyard sends HTTP Basic credentials (\"username\")"
                    )));
                }
                p.insert("username".into(), auth.get("username").cloned().unwrap_or(Value::Null));
                p.insert("password".into(), auth.get("password").cloned().unwrap_or(Value::Null));
            }
            None => {
                p.insert("username".into(), Value::Null);
                p.insert("password".into(), Value::Null);
            }
        }
        if body.get("routingRule").and_then(Value::as_str).is_some_and(|r| !r.is_empty()) {
            return Err(invalid("routingRule: Packyard has no routing rules; leave it out"));
        }
        fields.insert("proxy".into(), Value::Object(p));
    }
    if repo_type == RepoType::Group {
        let members = body
            .get("group")
            .and_then(|g| g.get("memberNames"))
            .filter(|v| !v.is_null())
            .ok_or_else(|| invalid("group.memberNames: required for a group repository"))?;
        fields.insert("group".into(), json!({"members": members}));
    }
    let own = match spec.nexus() {
        Some(shape) => shape.read(repo_type, body).map_err(invalid)?,
        None => packyard_core::formats::NexusSettings {
            block: body.get(spec.format().as_str()).filter(|v| !v.is_null()).cloned(),
            signing_key: None,
        },
    };
    if let Some(block) = own.block {
        fields.insert(spec.format().as_str().into(), block);
    }
    let policies = match body.get("cleanup") {
        None => None,
        Some(Value::Null) => Some(Vec::new()),
        Some(c) => Some(match c.get("policyNames") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => {
                serde_json::from_value(v.clone()).map_err(|_| invalid("cleanup.policyNames: a list of names"))?
            }
        }),
    };
    Ok(Read { name, fields, policies, signing_key: own.signing_key })
}

/// The cleanup policies of `format` that clean `repository`, by name.
async fn policies_of(services: &Services, format: Format, repository: &str) -> Result<Vec<String>> {
    let all = cleanup::list(services).await?;
    Ok(all
        .into_iter()
        .filter(|p| p.format == format.as_str() && p.repositories.iter().any(|r| r == repository))
        .map(|p| p.name)
        .collect())
}

/// Checks that each named policy exists and is of the format (before anything changes).
async fn check_policies(services: &Services, format: Format, names: &[String]) -> Result<()> {
    for name in names {
        let p = cleanup::get(services, name)
            .await
            .map_err(|_| invalid(format!("cleanup.policyNames: no cleanup policy {name}")))?;
        if p.format != format.as_str() {
            return Err(invalid(format!(
                "cleanup.policyNames: policy {name} cleans {} repositories, not {format}",
                p.format
            )));
        }
    }
    Ok(())
}

/// Makes exactly `names` of the format's policies clean `repository`.
async fn set_policies(
    actor: Actor<'_>,
    services: &Services,
    format: Format,
    repository: &str,
    names: &[String],
) -> Result<()> {
    for p in cleanup::list(services).await? {
        if p.format != format.as_str() {
            continue;
        }
        let listed = p.repositories.iter().any(|r| r == repository);
        let wanted = names.contains(&p.name);
        if listed == wanted {
            continue;
        }
        let mut repositories: Vec<String> = p.repositories.iter().filter(|r| *r != repository).cloned().collect();
        if wanted {
            repositories.push(repository.to_string());
        }
        let spec = PolicySpec {
            name: Some(p.name.clone()),
            format,
            description: p.description,
            criteria: p.criteria,
            schedule: p.schedule,
            repositories,
        };
        cleanup::update(services, packyard_formats::registry(), actor, &p.name, spec).await?;
    }
    Ok(())
}

async fn import_key(actor: Actor<'_>, site: &str, services: &Services, name: &str, key: String) -> Result<()> {
    let change = KeyChange { private_key: Some(key), ..KeyChange::default() };
    service::change_signing_key(services, packyard_formats::registry(), actor, site, name, &change).await?;
    Ok(())
}

/// `POST /repositories/<format>/<type>`: 201 without a body. (Nexus's per-repository actions
/// share the path's shape: `POST /repositories/<name>/rebuild-index` asks for a rebuild.)
async fn create(
    admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let (format, repo_type) = path.into_inner();
    match repo_type.as_str() {
        "rebuild-index" => {
            service::rebuild(&services, packyard_formats::registry(), admin.actor(), &format).await?;
            return Ok(HttpResponse::NoContent().finish());
        }
        "invalidate-cache" | "health-check" => {
            return Err(invalid(format!(
                "{repo_type}: Packyard has no such action (a proxy revalidates what it cached by proxy.metadataMaxAge)"
            )))
        }
        _ => {}
    }
    let (spec, repo_type) = kind(&format, &repo_type)?;
    let body = body_object(&body)?;
    let read = read(spec, repo_type, &body)?;
    let site = crate::frontage::Base::of(&req).url("");
    create_read(&services, admin.actor(), &site, (spec, repo_type), read).await?;
    Ok(HttpResponse::Created().finish())
}

/// Creates the repository a Nexus definition was read into ([`read`]), with its cleanup
/// policies and signing key, or nothing.
pub(crate) async fn create_read(
    services: &Services,
    actor: Actor<'_>,
    site: &str,
    (spec, repo_type): (&dyn FormatSpec, RepoType),
    read: Read,
) -> Result<()> {
    if let Some(names) = &read.policies {
        check_policies(services, spec.format(), names).await?;
    }
    let mut definition = read.fields.clone();
    definition.insert("name".into(), json!(read.name));
    definition.insert("format".into(), json!(spec.format().as_str()));
    definition.insert("type".into(), json!(repo_type.as_str()));
    let definition: RepositorySpec =
        serde_json::from_value(Value::Object(definition)).map_err(|e| invalid(format!("invalid definition: {e}")))?;
    service::create(services, packyard_formats::registry(), actor, definition).await?;
    let finish = async {
        if let Some(names) = &read.policies {
            set_policies(actor, services, spec.format(), &read.name, names).await?;
        }
        if let Some(key) = read.signing_key.clone() {
            import_key(actor, site, services, &read.name, key).await?;
        }
        Ok::<_, NexusError>(())
    };
    if let Err(e) = finish.await {
        // All or nothing: a repository whose key or policies were refused is not left behind.
        let _ = service::delete(services, packyard_formats::registry(), actor, &read.name).await;
        return Err(e);
    }
    Ok(())
}

/// `PUT /repositories/<format>/<type>/<name>`: 204. Nexus's request is the whole definition as
/// Nexus knows it; Packyard's fields it does not know stay as they are.
async fn update(
    admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<(String, String, String)>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let (format, repo_type, name) = path.into_inner();
    let (spec, repo_type) = kind(&format, &repo_type)?;
    let existing = service::get(&services, packyard_formats::registry(), &name).await.map_err(|_| not_found())?;
    if existing.format != spec.format().as_str() || existing.repo_type != repo_type.as_str() {
        return Err(not_found());
    }
    let body = body_object(&body)?;
    let read = read(spec, repo_type, &body)?;
    if read.name != name {
        return Err(invalid(format!("name: a repository cannot be renamed ({name} → {})", read.name)));
    }
    if let Some(names) = &read.policies {
        check_policies(&services, spec.format(), names).await?;
    }
    let patch = Value::Object(read.fields);
    service::patch(&services, packyard_formats::registry(), admin.actor(), &name, &patch).await?;
    set_policies(admin.actor(), &services, spec.format(), &name, read.policies.as_deref().unwrap_or_default()).await?;
    if let Some(key) = read.signing_key {
        let site = crate::frontage::Base::of(&req).url("");
        import_key(admin.actor(), &site, &services, &name, key).await?;
    }
    Ok(HttpResponse::NoContent().finish())
}

/// A repository as Nexus's typed GET and `repositorySettings` show it.
async fn shown(services: &Services, base: &str, name: &str) -> Result<Value> {
    let view = service::get(services, packyard_formats::registry(), name).await.map_err(|_| not_found())?;
    let format: Format = view.format.parse().map_err(|_| not_found())?;
    let repo_type: RepoType = view.repo_type.parse().map_err(|_| not_found())?;
    let spec = packyard_formats::registry().get(format);
    let mut out = Map::new();
    out.insert("name".into(), json!(view.name));
    out.insert("format".into(), json!(view.format));
    out.insert("type".into(), json!(view.repo_type));
    out.insert("url".into(), json!(format!("{base}/repository/{}", view.name)));
    out.insert("online".into(), json!(true));
    let mut storage = json!({"blobStoreName": BLOB_STORE, "strictContentTypeValidation": true});
    if repo_type == RepoType::Hosted {
        storage["writePolicy"] = json!(view.write_policy.to_ascii_uppercase());
    }
    out.insert("storage".into(), storage);
    let policies = policies_of(services, format, &view.name).await?;
    if repo_type != RepoType::Group {
        let cleanup = if policies.is_empty() { Value::Null } else { json!({"policyNames": policies}) };
        out.insert("cleanup".into(), cleanup);
    }
    if repo_type == RepoType::Hosted {
        out.insert("component".into(), json!({"proprietaryComponents": false}));
    }
    if let Some(p) = &view.proxy {
        let mins = |secs: u64| i64::try_from(secs / 60).unwrap_or(i64::MAX);
        out.insert(
            "proxy".into(),
            json!({"remoteUrl": p.remote_url, "contentMaxAge": NEVER, "metadataMaxAge": mins(p.metadata_ttl_secs)}),
        );
        out.insert(
            "negativeCache".into(),
            json!({"enabled": p.negative_ttl_secs > 0, "timeToLive": mins(p.negative_ttl_secs)}),
        );
        let authentication = match &p.username {
            Some(u) => {
                json!({"type": "username", "username": u, "password": null, "ntlmHost": null, "ntlmDomain": null})
            }
            None => Value::Null,
        };
        out.insert(
            "httpClient".into(),
            json!({"blocked": p.offline, "autoBlock": false, "connection": null, "authentication": authentication}),
        );
        out.insert("routingRuleName".into(), Value::Null);
        out.insert("replication".into(), Value::Null);
    }
    if let Some(g) = &view.group {
        out.insert("group".into(), json!({"memberNames": g.members}));
    }
    let block = view.formats.get(format.as_str()).cloned().unwrap_or(Value::Null);
    match spec.nexus() {
        Some(shape) => out.extend(shape.show(repo_type, &block)),
        None if !block.is_null() => {
            out.insert(format.as_str().into(), block);
        }
        None => {}
    }
    Ok(Value::Object(out))
}

fn base(req: &HttpRequest) -> String {
    crate::frontage::Base::of(req).url("")
}

/// `GET /repositories/<format>/<type>/<name>`.
async fn get_typed(
    _admin: Admin,
    req: HttpRequest,
    services: web::Data<Services>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse> {
    let (format, repo_type, name) = path.into_inner();
    let (spec, repo_type) = kind(&format, &repo_type)?;
    let shown = shown(&services, &base(&req), &name).await?;
    if shown["format"] != spec.format().as_str() || shown["type"] != repo_type.as_str() {
        return Err(not_found());
    }
    Ok(HttpResponse::Ok().json(shown))
}

/// `GET /repositorySettings`: every repository, each as its typed GET shows it.
async fn settings(_admin: Admin, req: HttpRequest, services: web::Data<Services>) -> Result<HttpResponse> {
    let base = base(&req);
    let mut all = Vec::new();
    for r in service::list(&services, packyard_formats::registry()).await? {
        if packyard_formats::registry().offered().any(|s| s.format().as_str() == r.format) {
            all.push(shown(&services, &base, &r.name).await?);
        }
    }
    Ok(HttpResponse::Ok().json(all))
}

/// `GET /repositories/<name>`: as the list shows it, for a caller who may read it.
async fn get_one(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
    name: web::Path<String>,
) -> Result<HttpResponse> {
    let repo = services.security.repository(&name).await?.ok_or_else(not_found)?;
    if !super::catalogue::readable(&caller, &services, &repo) {
        return Err(not_found());
    }
    Ok(HttpResponse::Ok().json(super::repository(&base(&req), &repo)))
}

/// `DELETE /repositories/<name>`: 204.
async fn delete(admin: Admin, services: web::Data<Services>, name: web::Path<String>) -> Result<HttpResponse> {
    service::delete(&services, packyard_formats::registry(), admin.actor(), &name).await?;
    Ok(HttpResponse::NoContent().finish())
}
