//! Administration pages: system status, repositories, users, roles, tokens, cleanup policies
//! and the audit log. Every action runs the admin API's own handler in-process, as the viewer:
//! the same privilege check, the same validation (its messages shown on the form), the same
//! audit entry.

use std::collections::BTreeMap;
use std::future::Future;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};
use packyard_core::formats::{FormField, Registry};
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{bytes, UiError, Viewer};
use crate::admin;
use crate::auth::{Admin, Authenticated};
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/admin", web::get().to(status))
        .route("/admin/repositories", web::get().to(repositories))
        .route("/admin/repositories", web::post().to(create_repository))
        .route("/admin/repositories/{name}", web::get().to(edit_repository))
        .route("/admin/repositories/{name}", web::post().to(update_repository))
        .route("/admin/repositories/{name}/signing-key", web::post().to(rotate_key))
        .route("/admin/repositories/{name}/delete", web::post().to(delete_repository))
        .route("/admin/users", web::get().to(users))
        .route("/admin/users", web::post().to(create_user))
        .route("/admin/users/{name}", web::get().to(edit_user))
        .route("/admin/users/{name}", web::post().to(update_user))
        .route("/admin/users/{name}/delete", web::post().to(delete_user))
        .route("/admin/roles", web::get().to(roles))
        .route("/admin/roles", web::post().to(create_role))
        .route("/admin/roles/{name}", web::get().to(edit_role))
        .route("/admin/roles/{name}", web::post().to(update_role))
        .route("/admin/roles/{name}/delete", web::post().to(delete_role))
        .route("/admin/tokens", web::get().to(tokens))
        .route("/admin/tokens", web::post().to(create_token))
        .route("/admin/tokens/{id}/revoke", web::post().to(revoke_token))
        .route("/admin/password", web::post().to(change_password))
        .route("/admin/cleanup", web::get().to(cleanup))
        .route("/admin/audit", web::get().to(audit));
}

/// The viewer as the admin API's extractor would have it: 401 before sign-in, 403 without the
/// global admin privilege.
fn admin_of(viewer: &Viewer) -> Result<Admin, UiError> {
    if !viewer.signed_in() {
        return Err(UiError::new(StatusCode::UNAUTHORIZED, "Sign in as an administrator to see this page."));
    }
    if !viewer.is_admin() {
        return Err(UiError::forbidden(format!("{} may not use the administration pages.", viewer.caller.username())));
    }
    Ok(Admin(Authenticated(viewer.caller.clone())))
}

fn user_of(viewer: &Viewer) -> Result<Authenticated, UiError> {
    if !viewer.signed_in() {
        return Err(UiError::new(StatusCode::UNAUTHORIZED, "Sign in to manage your tokens."));
    }
    Ok(Authenticated(viewer.caller.clone()))
}

/// Runs an admin API handler: its JSON answer (`null` for 204), or its error.
async fn api(handler: impl Future<Output = Result<HttpResponse, ApiError>>) -> Result<Value, ApiError> {
    let res = handler.await?;
    let body = actix_web::body::to_bytes(res.into_body()).await.map_err(|e| ApiError::internal(e.to_string()))?;
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&body).map_err(ApiError::internal)
}

/// A request body for a handler, from what a form sent.
fn body<T: serde::de::DeserializeOwned>(v: Value) -> Result<web::Json<T>, ApiError> {
    serde_json::from_value(v).map(web::Json).map_err(|e| ApiError::bad_request(format!("invalid form: {e}")))
}

fn data(services: &web::Data<Services>) -> web::Data<Services> {
    services.clone()
}

/// The message of a refused action, on the page.
fn refusal(e: &Option<ApiError>) -> Markup {
    html! { @if let Some(e) = e { p.error role="alert" { (e.message) } } }
}

fn admin_nav(viewer: &Viewer, current: &str) -> Markup {
    let links = [
        ("/admin", "Status"),
        ("/admin/repositories", "Repositories"),
        ("/admin/users", "Users"),
        ("/admin/roles", "Roles"),
        ("/admin/tokens", "My tokens"),
        ("/admin/cleanup", "Cleanup"),
        ("/admin/audit", "Audit log"),
    ];
    html! {
        nav aria-label="Administration" {
            ul.facets {
                @for (path, label) in links {
                    @if viewer.is_admin() || path == "/admin/tokens" {
                        li { a href=(viewer.base.link(path)) aria-current=[(path == current).then_some("page")] { (label) } }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct Csrf {
    csrf: Option<String>,
}

// --- status -------------------------------------------------------------------------------

async fn status(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    admin_of(&viewer)?;
    let ready = services.readiness().await;
    let summary = services.db.publication_summary().await?;
    let repos = services.db.list_repositories().await?;
    let pending: i64 = summary.values().map(|s| s.pending).sum();
    let failing: Vec<(String, String)> = repos
        .iter()
        .filter_map(|r| {
            let s = summary.get(&r.id)?;
            (s.failing > 0).then(|| (r.name.to_string(), s.last_error.clone().unwrap_or_default()))
        })
        .collect();
    let stored = services.db.usage_all().await?.values().map(|u| u.1).sum::<i64>();
    let redis = match &services.redis {
        None => "not configured (watermarks are read from the database)".to_string(),
        Some(_) => "configured".to_string(),
    };
    let amqp = match &services.amqp {
        None => "not configured (the worker polls the database)".to_string(),
        Some(_) => "configured".to_string(),
    };
    let body = html! {
        h1 { "Administration" }
        (admin_nav(&viewer, "/admin"))
        h2 { "System status" }
        dl.facts.panel {
            dt { "Database and blob store" }
            dd { @match &ready {
                Ok(()) => span.badge.state-ok { "reachable, migrations applied" },
                Err(problems) => span.badge.state-bad { (problems.join("; ")) },
            } }
            dt { "Database" } dd { (services.db.backend().as_str()) }
            dt { "Blob store" } dd { (format!("{:?}", services.config.blobs.kind).to_lowercase()) ", " (bytes(stored)) " in repositories" }
            dt { "Redis" } dd { (redis) }
            dt { "RabbitMQ" } dd { (amqp) }
            dt { "Worker" } dd { @if services.config.worker.embedded { "embedded in this process" } @else { "separate (packyard-worker)" } }
            dt { "Worker backlog" } dd { (pending) " publication units waiting" }
            dt { "Publication errors" } dd { (failing.len()) " repositories" }
        }
        @if !failing.is_empty() {
            h2 { "Publication errors" }
            div.table-wrap { table {
                thead { tr { th scope="col" { "Repository" } th scope="col" { "Last error" } } }
                tbody { @for (name, e) in &failing { tr { td { (name) } td { code { (e) } } } } }
            } }
        }
    };
    Ok(viewer.page("Administration", body))
}

// --- repositories -------------------------------------------------------------------------

#[derive(Deserialize, Default, Clone)]
pub struct RepoForm {
    csrf: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    format: String,
    #[serde(default, rename = "type")]
    repo_type: String,
    anonymous_read: Option<String>,
    #[serde(default)]
    write_policy: String,
    #[serde(default)]
    remote_url: String,
    #[serde(default)]
    metadata_ttl_secs: String,
    #[serde(default)]
    negative_ttl_secs: String,
    #[serde(default)]
    proxy_username: String,
    /// Empty keeps the stored password (it is never shown).
    #[serde(default)]
    proxy_password: String,
    #[serde(default)]
    members: String,
    /// The format settings' fields, named `<format>_<key>` (each format's `SettingsForm`).
    #[serde(flatten)]
    settings: BTreeMap<String, String>,
}

/// The form field of a format settings' field.
fn settings_id(format: Format, field: &FormField) -> String {
    format!("{format}_{}", field.key)
}

fn list_of(s: &str) -> Vec<String> {
    s.split([',', ' ', '\n']).map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()
}

/// The API's repository body from the form: what the form's format and type use.
fn spec_of(formats: &Registry, f: &RepoForm, creating: bool) -> Value {
    let mut spec = json!({"anonymous_read": f.anonymous_read.is_some()});
    if creating {
        spec["name"] = json!(f.name.trim());
        spec["format"] = json!(f.format);
        spec["type"] = json!(f.repo_type);
    }
    if !f.write_policy.is_empty() && f.repo_type == "hosted" {
        spec["write_policy"] = json!(f.write_policy);
    }
    // The format's block: the fields given (an empty one keeps the default, or what is stored).
    let format = f.format.parse::<Format>().ok();
    let form = format.and_then(|format| Some((format, formats.get(format).settings()?.form()?)));
    if let (Some((format, form)), Ok(t)) = (form, f.repo_type.parse::<RepoType>()) {
        let mut block = serde_json::Map::new();
        for field in form.fields.iter().filter(|_| form.types.contains(&t)) {
            let value = f.settings.get(&settings_id(format, field)).map_or("", |v| v.trim());
            if !value.is_empty() {
                block.insert(field.key.into(), if field.list { json!(list_of(value)) } else { json!(value) });
            }
        }
        if !block.is_empty() {
            spec[format.as_str()] = Value::Object(block);
        }
    }
    if f.repo_type == "proxy" {
        let mut proxy = json!({"remote_url": f.remote_url.trim()});
        // A number the API would refuse is sent as typed, so its message names the field.
        for (key, value) in [("metadata_ttl_secs", &f.metadata_ttl_secs), ("negative_ttl_secs", &f.negative_ttl_secs)] {
            let value = value.trim();
            if !value.is_empty() {
                proxy[key] = value.parse::<u64>().map_or_else(|_| json!(value), |n| json!(n));
            }
        }
        let username = f.proxy_username.trim();
        if !username.is_empty() {
            proxy["username"] = json!(username);
        } else if !creating {
            // A merge patch's null removes the credentials.
            proxy["username"] = Value::Null;
        }
        if !f.proxy_password.is_empty() {
            proxy["password"] = json!(f.proxy_password);
        }
        spec["proxy"] = proxy;
    }
    if f.repo_type == "group" {
        spec["group"] = json!({"members": list_of(&f.members)});
    }
    spec
}

fn field(id: &str, label: &str, value: &str, hint: &str) -> Markup {
    html! {
        div.field {
            label for=(id) { (label) }
            input id=(id) name=(id) value=(value) aria-describedby=[(!hint.is_empty()).then(|| format!("{id}-hint"))];
            @if !hint.is_empty() { span.hint id=(format!("{id}-hint")) { (hint) } }
        }
    }
}

fn select(id: &str, label: &str, options: &[(&str, &str)], current: &str) -> Markup {
    html! {
        div.field {
            label for=(id) { (label) }
            select id=(id) name=(id) {
                @for (v, l) in options { option value=(v) selected[*v == current] { (l) } }
            }
        }
    }
}

fn repository_fields(formats: &Registry, f: &RepoForm, creating: bool) -> Markup {
    let names: Vec<(&str, &str)> = formats.all().map(|s| (s.format().as_str(), s.ui().title())).collect();
    html! {
        @if creating {
            (field("name", "Name", &f.name, "Letters, digits, '.', '_' and '-'; used in the URL"))
            (select("format", "Format", &names, &f.format))
            (select("type", "Type", &[("hosted", "hosted"), ("proxy", "proxy"), ("group", "group")], &f.repo_type))
        }
        div.field {
            label { input type="checkbox" name="anonymous_read" value="on" checked[f.anonymous_read.is_some()]; " Anonymous readers may read it" }
        }
        @let shown = |formats: &[&str], types: &[&str]| creating || ((formats.is_empty() || formats.contains(&f.format.as_str())) && types.contains(&f.repo_type.as_str()));
        // Creating, every block is there (a script hides those the chosen format and type do
        // not use); editing, only the repository's own.
        @if shown(&[], &["hosted"]) {
            div.field data-types="hosted" {
                label for="write_policy" { "Redeploy (hosted)" }
                select #write_policy name="write_policy" {
                    @let current = if f.write_policy.is_empty() { "allow_once" } else { f.write_policy.as_str() };
                    @for (v, l) in [("allow_once", "allow once"), ("allow", "allow"), ("deny", "deny")] { option value=(v) selected[v == current] { (l) } }
                }
            }
        }
        @for spec in formats.all() {
            @if let Some(form) = spec.settings().and_then(|s| s.form()) {
                @let format = spec.format();
                @let types: Vec<&str> = form.types.iter().map(|t| t.as_str()).collect();
                @if shown(&[format.as_str()], &types) {
                    fieldset data-formats=(format) data-types=(types.join(" ")) {
                        legend { (spec.ui().title()) }
                        @for field in form.fields {
                            @let id = settings_id(format, field);
                            (self::field(&id, field.label, f.settings.get(&id).map_or("", String::as_str), field.hint))
                        }
                    }
                }
            }
        }
        @if shown(&[], &["proxy"]) {
            fieldset data-types="proxy" {
                legend { "Proxy" }
                (field("remote_url", "Upstream URL", &f.remote_url, "e.g. https://deb.debian.org/debian"))
                (field("metadata_ttl_secs", "Metadata kept for (seconds)", &f.metadata_ttl_secs, "before it is revalidated upstream; 3600 when empty"))
                (field("negative_ttl_secs", "A missing file remembered for (seconds)", &f.negative_ttl_secs, "an upstream 404 or 410; 300 when empty"))
                (field("proxy_username", "Upstream username (optional)", &f.proxy_username, "sent with HTTP Basic on every upstream request"))
                div.field {
                    label for="proxy_password" { "Upstream password" }
                    input #proxy_password name="proxy_password" type="password" autocomplete="new-password" aria-describedby="proxy_password-hint";
                    span.hint #proxy_password-hint {
                        @if creating { "stored sealed, never shown again" } @else { "empty keeps the stored one; stored sealed, never shown" }
                    }
                }
            }
        }
        @if shown(&[], &["group"]) {
            fieldset data-types="group" {
                legend { "Group" }
                (field("members", "Members", &f.members, "comma-separated repository names, in the order they are asked"))
            }
        }
    }
}

async fn repository_list(
    viewer: &Viewer,
    services: &web::Data<Services>,
    form: &RepoForm,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let listed = api(admin::repositories::list::list(admin, data(services))).await?;
    let body = html! {
        h1 { "Repositories" }
        (admin_nav(viewer, "/admin/repositories"))
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Format" } th scope="col" { "Type" } th scope="col" { "Anonymous read" } } }
            tbody { @for r in listed.as_array().cloned().unwrap_or_default() {
                @let name = r["name"].as_str().unwrap_or_default().to_string();
                tr {
                    td { a href=(viewer.base.link(&format!("/admin/repositories/{name}"))) { (name) } }
                    td { (r["format"].as_str().unwrap_or_default()) }
                    td { (r["type"].as_str().unwrap_or_default()) }
                    td { (if r["anonymous_read"] == json!(true) { "yes" } else { "no" }) }
                }
            } }
        } }
        h2 #create { "Create a repository" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/repositories")) {
            (viewer.csrf_field())
            (repository_fields(services.formats, form, true))
            div { button type="submit" { "Create repository" } }
        }
    };
    Ok(viewer.page_with(status, "Repositories", body))
}

async fn repositories(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    let form = RepoForm {
        format: services.formats.all().next().map(|s| s.format().to_string()).unwrap_or_default(),
        repo_type: "hosted".into(),
        anonymous_read: Some("on".into()),
        ..RepoForm::default()
    };
    repository_list(&viewer, &services, &form, None).await
}

async fn create_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<RepoForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let created = match body(spec_of(services.formats, &f, true)) {
        Ok(spec) => api(admin::repositories::create::create(admin, data(&services), spec)).await,
        Err(e) => Err(e),
    };
    match created {
        Ok(_) => Ok(viewer.redirect(&format!("/admin/repositories/{}", f.name.trim()))),
        Err(e) => repository_list(&viewer, &services, &f, Some(e)).await,
    }
}

fn form_of(formats: &Registry, v: &Value) -> RepoForm {
    let join = |x: &Value| {
        x.as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
    };
    let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
    RepoForm {
        csrf: None,
        name: s(&v["name"]),
        format: s(&v["format"]),
        repo_type: s(&v["type"]),
        anonymous_read: (v["anonymous_read"] == json!(true)).then(|| "on".to_string()),
        write_policy: s(&v["write_policy"]),
        remote_url: s(&v["proxy"]["remote_url"]),
        metadata_ttl_secs: v["proxy"]["metadata_ttl_secs"].as_u64().map(|t| t.to_string()).unwrap_or_default(),
        negative_ttl_secs: v["proxy"]["negative_ttl_secs"].as_u64().map(|t| t.to_string()).unwrap_or_default(),
        proxy_username: s(&v["proxy"]["username"]),
        proxy_password: String::new(),
        members: join(&v["group"]["members"]),
        settings: settings_of(formats, v),
    }
}

/// The form's format settings fields of a repository as the API shows it.
fn settings_of(formats: &Registry, v: &Value) -> BTreeMap<String, String> {
    let Some(format) = v["format"].as_str().and_then(|f| f.parse::<Format>().ok()) else { return BTreeMap::new() };
    let Some(form) = formats.get(format).settings().and_then(|s| s.form()) else { return BTreeMap::new() };
    let block = &v[format.as_str()];
    form.fields
        .iter()
        .map(|field| {
            let value = &block[field.key];
            let shown = match value.as_array() {
                Some(items) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "),
                None => value.as_str().unwrap_or_default().to_string(),
            };
            (settings_id(format, field), shown)
        })
        .collect()
}

async fn repository_page(
    viewer: &Viewer,
    services: &web::Data<Services>,
    name: &str,
    notice: Option<String>,
    error: Option<ApiError>,
    form: Option<RepoForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(viewer)?;
    let path = web::Path::from(admin::repositories::RepoPath {
        name: admin::repositories::NamePath::try_from(name.to_string()).map_err(UiError::not_found)?,
    });
    let view = api(admin::repositories::get::get(admin, data(services), path)).await?;
    let form = form.unwrap_or_else(|| form_of(services.formats, &view));
    // Where clients fetch a rotated key, for a repository that has one the UI rotates.
    let rotation = form
        .format
        .parse::<Format>()
        .ok()
        .and_then(|f| services.formats.get(f).signing_keys())
        .filter(|_| form.repo_type != "proxy")
        .and_then(|keys| keys.rotation_note());
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/repositories")) { "Repositories" } " / " }
        h1 { (name) " " span.badge { (form.format) } " " span.badge { (form.repo_type) } }
        @if let Some(n) = &notice { p.notice role="status" { (n) } }
        (refusal(&error))
        p { a href=(viewer.base.link(&format!("/browse/{name}"))) { "Browse its contents" } }
        form.stack method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}"))) {
            (viewer.csrf_field())
            input type="hidden" name="format" value=(form.format);
            input type="hidden" name="type" value=(form.repo_type);
            (repository_fields(services.formats, &form, false))
            div { button type="submit" { "Save changes" } }
        }
        @if let Some(note) = rotation {
            h2 { "Signing key" }
            p { "A new key signs every index from now on; clients need the new public key (" code { (note) } ")." }
            form method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/signing-key"))) {
                (viewer.csrf_field())
                button.secondary type="submit" { "Rotate the signing key" }
            }
        }
        h2 { "Delete" }
        form method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/delete"))) {
            (viewer.csrf_field())
            div.field { label { input type="checkbox" name="confirm" value="yes" required; " Delete " (name) " and everything in it" } }
            div.actions { button.danger type="submit" { "Delete repository" } }
        }
    };
    Ok(viewer.page_with(status, name, body))
}

async fn edit_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    repository_page(&viewer, &services, &name, None, None, None).await
}

async fn update_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<RepoForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let patch = spec_of(services.formats, &f, false);
    match api(admin::repositories::update::apply_patch(admin, &services, &name, &patch)).await {
        Ok(_) => repository_page(&viewer, &services, &name, Some("Saved.".into()), None, None).await,
        Err(e) => repository_page(&viewer, &services, &name, None, Some(e), Some(f.into_inner())).await,
    }
}

async fn rotate_key(
    viewer: Viewer,
    req: HttpRequest,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let path = web::Path::from(admin::repositories::RepoPath {
        name: admin::repositories::NamePath::try_from(name.to_string()).map_err(UiError::not_found)?,
    });
    let put =
        admin::repositories::signing_key::put(admin, req, data(&services), path, body(json!({"generate": true}))?);
    match api(put).await {
        Ok(v) => {
            let fp = v["fingerprint"].as_str().unwrap_or_default().to_string();
            repository_page(
                &viewer,
                &services,
                &name,
                Some(format!("A new signing key signs the indexes: {fp}")),
                None,
                None,
            )
            .await
        }
        Err(e) => repository_page(&viewer, &services, &name, None, Some(e), None).await,
    }
}

#[derive(Deserialize)]
pub struct Confirm {
    csrf: Option<String>,
    confirm: Option<String>,
}

async fn delete_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Confirm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    if f.confirm.as_deref() != Some("yes") {
        return repository_page(
            &viewer,
            &services,
            &name,
            None,
            Some(ApiError::bad_request("Tick the box to confirm the delete.")),
            None,
        )
        .await;
    }
    let path = web::Path::from(admin::repositories::RepoPath {
        name: admin::repositories::NamePath::try_from(name.to_string()).map_err(UiError::not_found)?,
    });
    match api(admin::repositories::delete::delete(admin, data(&services), path)).await {
        Ok(_) => Ok(viewer.redirect("/admin/repositories")),
        Err(e) => repository_page(&viewer, &services, &name, None, Some(e), None).await,
    }
}

// --- users and roles ----------------------------------------------------------------------

#[derive(Deserialize)]
pub struct UserForm {
    csrf: Option<String>,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    roles: String,
}

async fn user_list(
    viewer: &Viewer,
    services: &web::Data<Services>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let listed = api(admin::users::list(admin.clone(), data(services))).await?;
    let roles = api(admin::roles::list(admin, data(services))).await?;
    let role_names: Vec<String> = roles
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    let body = html! {
        h1 { "Users" }
        (admin_nav(viewer, "/admin/users"))
        div.table-wrap { table {
            thead { tr { th scope="col" { "Username" } th scope="col" { "Roles" } th scope="col" { "Signs in" } th scope="col" { "Created" } th scope="col" { span.muted { "Actions" } } } }
            tbody { @for u in listed.as_array().cloned().unwrap_or_default() {
                @let name = u["username"].as_str().unwrap_or_default().to_string();
                tr {
                    td { a href=(viewer.base.link(&format!("/admin/users/{name}"))) { (name) } }
                    td { (u["roles"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()) }
                    td { (u["source"].as_str().unwrap_or_default()) }
                    td { (u["created_at"].as_str().unwrap_or_default()) }
                    td { @if name != viewer.caller.username() {
                        form.inline method="post" action=(viewer.base.link(&format!("/admin/users/{name}/delete"))) {
                            (viewer.csrf_field())
                            button.link type="submit" aria-label=(format!("Delete user {name}")) { "Delete" }
                        }
                    } }
                }
            } }
        } }
        h2 { "Create a user" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/users")) {
            (viewer.csrf_field())
            (field("username", "Username", "", ""))
            div.field { label for="new-password" { "Password" } input #new-password name="password" type="password" autocomplete="new-password" aria-describedby="pw-hint"; span.hint #pw-hint { "8 characters or more" } }
            (field("roles", "Roles", "", &format!("comma-separated, of: {}", role_names.join(", "))))
            div { button type="submit" { "Create user" } }
        }
    };
    Ok(viewer.page_with(status, "Users", body))
}

async fn users(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    user_list(&viewer, &services, None).await
}

async fn create_user(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<UserForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let new = json!({"username": f.username.trim(), "password": f.password, "roles": list_of(&f.roles)});
    match body(new) {
        Ok(b) => match api(admin::users::create(admin, data(&services), b)).await {
            Ok(_) => Ok(viewer.redirect("/admin/users")),
            Err(e) => user_list(&viewer, &services, Some(e)).await,
        },
        Err(e) => user_list(&viewer, &services, Some(e)).await,
    }
}

fn joined(v: &Value) -> String {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

async fn user_page(
    viewer: &Viewer,
    services: &web::Data<Services>,
    name: &str,
    notice: Option<&str>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let user = api(admin::users::get(admin, data(services), web::Path::from(name.to_string()))).await?;
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/users")) { "Users" } " / " }
        h1 { (name) }
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        (refusal(&error))
        p.muted { "Created " (user["created_at"].as_str().unwrap_or_default()) }
        @let source = user["source"].as_str().unwrap_or("local");
        @if source != "local" {
            p { "Signs in through " strong { (source) } "; roles come from there: " (joined(&user["roles"])) "." }
            @if let Some(email) = user["email"].as_str() { p.muted { (email) } }
        } @else {
        form.stack method="post" action=(viewer.base.link(&format!("/admin/users/{name}"))) {
            (viewer.csrf_field())
            (field("roles", "Roles", &joined(&user["roles"]), "comma-separated role names"))
            div.field {
                label for="new-password" { "New password (optional)" }
                input #new-password name="password" type="password" autocomplete="new-password" aria-describedby="pw-hint";
                span.hint #pw-hint { "8 characters or more; empty keeps the current one" }
            }
            div { button type="submit" { "Save changes" } }
        }
        }
    };
    Ok(viewer.page_with(status, name, body))
}

async fn edit_user(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    user_page(&viewer, &services, &name, None, None).await
}

async fn update_user(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<UserForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let mut change = json!({"roles": list_of(&f.roles)});
    if !f.password.is_empty() {
        change["password"] = json!(f.password);
    }
    let path = web::Path::from(name.to_string());
    let done = match body(change) {
        Ok(b) => api(admin::users::update(admin, data(&services), path, b)).await,
        Err(e) => Err(e),
    };
    match done {
        Ok(_) => user_page(&viewer, &services, &name, Some("Saved."), None).await,
        Err(e) => user_page(&viewer, &services, &name, None, Some(e)).await,
    }
}

async fn delete_user(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    match api(admin::users::delete(admin, data(&services), web::Path::from(name.into_inner()))).await {
        Ok(_) => Ok(viewer.redirect("/admin/users")),
        Err(e) => user_list(&viewer, &services, Some(e)).await,
    }
}

#[derive(Deserialize)]
pub struct RoleForm {
    csrf: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    privileges: String,
}

/// `debs* read, write` per line → the API's privileges.
fn privileges_of(text: &str) -> Result<Value, ApiError> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (pattern, actions) = line.split_once(char::is_whitespace).ok_or_else(|| {
            ApiError::bad_request(format!(
                "privilege {line:?}: write a repository pattern, then its actions, e.g. debs* read, write"
            ))
        })?;
        out.push(json!({"repositories": pattern, "actions": list_of(actions)}));
    }
    Ok(Value::Array(out))
}

async fn role_list(
    viewer: &Viewer,
    services: &web::Data<Services>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let roles = api(admin::roles::list(admin, data(services))).await?;
    let body = html! {
        h1 { "Roles and privileges" }
        (admin_nav(viewer, "/admin/roles"))
        div.table-wrap { table {
            thead { tr { th scope="col" { "Role" } th scope="col" { "Description" } th scope="col" { "Privileges" } th scope="col" { span.muted { "Actions" } } } }
            tbody { @for r in roles.as_array().cloned().unwrap_or_default() {
                @let name = r["name"].as_str().unwrap_or_default().to_string();
                tr {
                    td { a href=(viewer.base.link(&format!("/admin/roles/{name}"))) { (name) } @if r["builtin"] == json!(true) { " " span.badge { "built-in" } } }
                    td { (r["description"].as_str().unwrap_or_default()) }
                    td { ul.plain { @for p in r["privileges"].as_array().cloned().unwrap_or_default() {
                        li { code { (p["repositories"].as_str().unwrap_or_default()) } ": "
                            (p["actions"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()) }
                    } } }
                    td { @if r["builtin"] != json!(true) {
                        form.inline method="post" action=(viewer.base.link(&format!("/admin/roles/{name}/delete"))) {
                            (viewer.csrf_field())
                            button.link type="submit" aria-label=(format!("Delete role {name}")) { "Delete" }
                        }
                    } }
                }
            } }
        } }
        h2 { "Create a role" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/roles")) {
            (viewer.csrf_field())
            (field("name", "Name", "", ""))
            (field("description", "Description", "", ""))
            div.field {
                label for="privileges" { "Privileges" }
                textarea #privileges name="privileges" aria-describedby="privileges-hint" {}
                span.hint #privileges-hint { "One per line: a repository pattern (* matches any text), then its actions — read, write, delete, admin. For example: debs* read, write" }
            }
            div { button type="submit" { "Create role" } }
        }
    };
    Ok(viewer.page_with(status, "Roles", body))
}

async fn roles(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    role_list(&viewer, &services, None).await
}

async fn create_role(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<RoleForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let made = match privileges_of(&f.privileges) {
        Ok(p) => match body(json!({"name": f.name.trim(), "description": f.description, "privileges": p})) {
            Ok(b) => api(admin::roles::create(admin, data(&services), b)).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match made {
        Ok(_) => Ok(viewer.redirect("/admin/roles")),
        Err(e) => role_list(&viewer, &services, Some(e)).await,
    }
}

/// The API's privileges as the form writes them, one per line.
fn privilege_lines(privileges: &Value) -> String {
    privileges
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| format!("{} {}", p["repositories"].as_str().unwrap_or_default(), joined(&p["actions"])))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn role_page(
    viewer: &Viewer,
    services: &web::Data<Services>,
    name: &str,
    notice: Option<&str>,
    error: Option<ApiError>,
    typed: Option<&RoleForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let role = api(admin::roles::get(admin, data(services), web::Path::from(name.to_string()))).await?;
    let (description, privileges) = match typed {
        Some(f) => (f.description.clone(), f.privileges.clone()),
        None => (role["description"].as_str().unwrap_or_default().to_string(), privilege_lines(&role["privileges"])),
    };
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/roles")) { "Roles" } " / " }
        h1 { (name) @if role["builtin"] == json!(true) { " " span.badge { "built-in" } } }
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link(&format!("/admin/roles/{name}"))) {
            (viewer.csrf_field())
            (field("description", "Description", &description, ""))
            div.field {
                label for="privileges" { "Privileges" }
                textarea #privileges name="privileges" aria-describedby="privileges-hint" { (privileges) }
                span.hint #privileges-hint { "One per line: a repository pattern (* matches any text), then its actions — read, write, delete, admin." }
            }
            div { button type="submit" { "Save changes" } }
        }
    };
    Ok(viewer.page_with(status, name, body))
}

async fn edit_role(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    role_page(&viewer, &services, &name, None, None, None).await
}

async fn update_role(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<RoleForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let path = web::Path::from(name.to_string());
    let done = match privileges_of(&f.privileges) {
        Ok(p) => match body(json!({"description": f.description, "privileges": p})) {
            Ok(b) => api(admin::roles::update(admin, data(&services), path, b)).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match done {
        Ok(_) => role_page(&viewer, &services, &name, Some("Saved."), None, None).await,
        Err(e) => role_page(&viewer, &services, &name, None, Some(e), Some(&f)).await,
    }
}

async fn delete_role(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    match api(admin::roles::delete(admin, data(&services), web::Path::from(name.into_inner()))).await {
        Ok(_) => Ok(viewer.redirect("/admin/roles")),
        Err(e) => role_list(&viewer, &services, Some(e)).await,
    }
}

// --- tokens -------------------------------------------------------------------------------

#[derive(Deserialize)]
pub struct TokenForm {
    csrf: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    expires: String,
    #[serde(default)]
    repositories: String,
    read: Option<String>,
    write: Option<String>,
    delete: Option<String>,
}

async fn token_list(
    viewer: &Viewer,
    services: &web::Data<Services>,
    created: Option<Value>,
    notice: Option<&str>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    let user = user_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let q = web::Query(serde_json::from_value(json!({})).map_err(ApiError::internal)?);
    let listed = api(admin::tokens::list(user, data(services), q)).await?;
    let body = html! {
        h1 { "My tokens" }
        (admin_nav(viewer, "/admin/tokens"))
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if let Some(c) = &created {
            div.notice role="status" {
                p { "Token " strong { (c["name"].as_str().unwrap_or_default()) } " created. Copy it now: it is shown only this once." }
                (super::snippet("The token", c["token"].as_str().unwrap_or_default()))
            }
        }
        p { "Use a token as the password of your username with apt, apk, go, conan and the API, or as " code { "Authorization: Bearer …" } "." }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Scope" } th scope="col" { "Expires" } th scope="col" { "Created" } th scope="col" { "State" } } }
            tbody { @for t in listed.as_array().cloned().unwrap_or_default() {
                @let id = t["id"].as_str().unwrap_or_default().to_string();
                tr {
                    td { (t["name"].as_str().unwrap_or_default()) }
                    td { (t["repositories"].as_str().unwrap_or("all repositories")) " · "
                        (t["actions"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_else(|| "all of my actions".into())) }
                    td { (t["expires_at"].as_str().unwrap_or("never")) }
                    td { (t["created_at"].as_str().unwrap_or_default()) }
                    td { @if t["revoked_at"].is_string() { span.badge { "revoked" } } @else {
                        form.inline method="post" action=(viewer.base.link(&format!("/admin/tokens/{id}/revoke"))) {
                            (viewer.csrf_field())
                            button.link type="submit" aria-label=(format!("Revoke token {}", t["name"].as_str().unwrap_or_default())) { "Revoke" }
                        }
                    } }
                }
            } }
        } }
        h2 { "Create a token" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/tokens")) {
            (viewer.csrf_field())
            (field("name", "Name", "", "what it is for, e.g. ci"))
            div.field { label for="expires" { "Expires on (optional)" } input #expires name="expires" type="date"; }
            (field("repositories", "Repositories (optional)", "", "a pattern such as debs*; empty for all you may use"))
            fieldset {
                legend { "Actions (none ticked: all of yours)" }
                @for a in ["read", "write", "delete"] { label { input type="checkbox" name=(a) value="on"; " " (a) } " " }
            }
            div { button type="submit" { "Create token" } }
        }
        h2 #password { "Change my password" }
        form.stack method="post" action=(viewer.base.link("/admin/password")) {
            (viewer.csrf_field())
            div.field { label for="current-password" { "Current password" } input #current-password name="current_password" type="password" autocomplete="current-password" required; }
            div.field {
                label for="changed-password" { "New password" }
                input #changed-password name="new_password" type="password" autocomplete="new-password" required aria-describedby="changed-hint";
                span.hint #changed-hint { "8 characters or more" }
            }
            div { button type="submit" { "Change password" } }
        }
    };
    Ok(viewer.page_with(status, "My tokens", body))
}

async fn tokens(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    token_list(&viewer, &services, None, None, None).await
}

async fn create_token(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<TokenForm>,
) -> Result<HttpResponse, UiError> {
    let user = user_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let mut new = json!({"name": f.name.trim()});
    if !f.expires.trim().is_empty() {
        new["expires_at"] = json!(format!("{}T00:00:00Z", f.expires.trim()));
    }
    if !f.repositories.trim().is_empty() {
        new["repositories"] = json!(f.repositories.trim());
    }
    let actions: Vec<&str> = [("read", &f.read), ("write", &f.write), ("delete", &f.delete)]
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(a, _)| *a)
        .collect();
    if !actions.is_empty() {
        new["actions"] = json!(actions);
    }
    let made = match body(new) {
        Ok(b) => api(admin::tokens::create(user, data(&services), b)).await,
        Err(e) => Err(e),
    };
    match made {
        Ok(created) => token_list(&viewer, &services, Some(created), None, None).await,
        Err(e) => token_list(&viewer, &services, None, None, Some(e)).await,
    }
}

async fn revoke_token(
    viewer: Viewer,
    services: web::Data<Services>,
    id: web::Path<String>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let user = user_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    match api(admin::tokens::revoke(user, data(&services), web::Path::from(id.into_inner()))).await {
        Ok(_) => Ok(viewer.redirect("/admin/tokens")),
        Err(e) => token_list(&viewer, &services, None, None, Some(e)).await,
    }
}

#[derive(Deserialize)]
pub struct PasswordForm {
    csrf: Option<String>,
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    new_password: String,
}

/// A user changes their own password, the current one first (as the API asks of non-admins;
/// here of everyone, since a session left open should not be enough to change it). Their other
/// sessions end; this one goes on.
async fn change_password(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<PasswordForm>,
) -> Result<HttpResponse, UiError> {
    let user = user_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let done = async {
        admin::users::check_password(&f.new_password)?;
        let record = services
            .db
            .user_by_name(user.username())
            .await?
            .ok_or_else(|| ApiError::not_found(format!("user {} not found", user.username())))?;
        if !record.is_local() {
            return Err(ApiError::bad_request(format!(
                "{} signs in through {}: the password is changed there, not here",
                record.username, record.source
            )));
        }
        let ended = services
            .security
            .change_password(&record, Some(&f.current_password), &f.new_password, user.0.session_id(), user.0.addr)
            .await
            .map_err(|e| match e {
                packyard_core::security::service::PasswordChangeError::WrongCurrent => {
                    ApiError::bad_request("The current password is wrong; nothing was changed.")
                }
                other => other.into(),
            })?;
        services.changed(packyard_core::events::Changed::Security);
        services
            .security
            .audit(
                user.username(),
                Some(user.0.addr),
                "user.password",
                user.username(),
                json!({"sessions_ended": ended}),
            )
            .await;
        Ok::<_, ApiError>(ended)
    }
    .await;
    match done {
        Ok(0) => token_list(&viewer, &services, None, Some("Your password is changed."), None).await,
        Ok(n) => {
            let notice = format!(
                "Your password is changed, and your {n} other {} ended.",
                if n == 1 { "session" } else { "sessions" }
            );
            token_list(&viewer, &services, None, Some(&notice), None).await
        }
        Err(e) => token_list(&viewer, &services, None, None, Some(e)).await,
    }
}

// --- cleanup ------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
pub struct PreviewForm {
    policy: Option<String>,
    repository: Option<String>,
    /// The preview's continuation token: a later page.
    after: Option<String>,
}

async fn cleanup(
    viewer: Viewer,
    services: web::Data<Services>,
    q: web::Query<PreviewForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    let policies = api(admin::cleanup::list(admin.clone(), data(&services))).await?;
    let policies = policies.as_array().cloned().unwrap_or_default();
    let repos = services.db.list_repositories().await?;
    let mut runs = Vec::new();
    for p in &policies {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let r = api(admin::cleanup::runs(admin.clone(), data(&services), web::Path::from(name.clone()))).await?;
        runs.push((name, r));
    }
    let (preview, error) =
        match (q.policy.as_deref().filter(|p| !p.is_empty()), q.repository.as_deref().filter(|r| !r.is_empty())) {
            (Some(policy), Some(repository)) => {
                // Pages whose work is bounded: no totals (those walk the whole repository).
                let query = admin::cleanup::PreviewQuery {
                    repository: Some(repository.to_string()),
                    continuation_token: q.after.clone(),
                    count: Some(false),
                };
                match api(admin::cleanup::preview(
                    admin,
                    data(&services),
                    web::Path::from(policy.to_string()),
                    web::Query(query),
                ))
                .await
                {
                    Ok(v) => (Some(v), None),
                    Err(e) => (None, Some(e)),
                }
            }
            _ => (None, None),
        };
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let body = html! {
        h1 { "Cleanup policies" }
        (admin_nav(&viewer, "/admin/cleanup"))
        @if policies.is_empty() {
            p { "No cleanup policy yet: create one with " code { "POST /api/v1/cleanup-policies" } "." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Policy" } th scope="col" { "Format" } th scope="col" { "Criteria" } th scope="col" { "Last runs" } } }
                tbody { @for (p, (_, r)) in policies.iter().zip(&runs) {
                    tr {
                        td { (p["name"].as_str().unwrap_or_default()) }
                        td { (p["format"].as_str().unwrap_or_default()) }
                        td { code { (p["criteria"].to_string()) } }
                        td { ul.plain { @for run in r["runs"].as_array().or(r.as_array()).cloned().unwrap_or_default() {
                            li { (run["repository"].as_str().unwrap_or_default()) ": " (run["state"].as_str().unwrap_or_default())
                                @if let Some(n) = run["components"].as_i64() { ", " (n) " removed" }
                                @if let Some(at) = run["finished_at"].as_str() { " · " (at) } }
                        } } }
                    }
                } }
            } }
            h2 { "Preview" }
            form.search method="get" action=(viewer.base.link("/admin/cleanup")) {
                (select("policy", "Policy", &policies.iter().filter_map(|p| p["name"].as_str()).map(|n| (n, n)).collect::<Vec<_>>(), q.policy.as_deref().unwrap_or_default()))
                div.field {
                    label for="repository" { "Repository" }
                    select #repository name="repository" {
                        @for r in repos.iter().filter(|r| r.repo_type != packyard_model::repos::RepoType::Group) {
                            option value=(r.name.as_str()) selected[q.repository.as_deref() == Some(r.name.as_str())] { (r.name.as_str()) " (" (r.format.as_str()) ")" }
                        }
                    }
                }
                button type="submit" { "Preview" }
            }
            (refusal(&error))
            @if let Some(p) = &preview {
                @let items = p["items"].as_array().cloned().unwrap_or_default();
                @let next = p["continuationToken"].as_str();
                @let repository = p["repository"].as_str().unwrap_or_default();
                @let total: i64 = items.iter().filter_map(|i| i["bytes"].as_i64()).sum();
                @if q.after.is_none() && next.is_none() {
                    p role="status" { "A run now would remove " strong { (items.len()) @if items.len() == 1 { " component" } @else { " components" } } " (" (bytes(total)) ") from " (repository) "." }
                } @else if items.is_empty() {
                    p role="status" { "Nothing more in this stretch of " (repository) "'s names; the walk goes on from there." }
                } @else {
                    p role="status" { "A run now would remove these " strong { (items.len()) " components" } " (" (bytes(total)) ") from " (repository) @if next.is_some() { ", and more on the next pages" } "." }
                }
                @if !items.is_empty() {
                    div.table-wrap { table {
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Version" } th.num scope="col" { "Size" } th scope="col" { "Published" } th scope="col" { "Last downloaded" } } }
                        tbody { @for i in &items { tr {
                            td { (i["name"].as_str().unwrap_or_default()) } td { (i["version"].as_str().unwrap_or_default()) }
                            td.num { (bytes(i["bytes"].as_i64().unwrap_or(0))) } td { (i["published"].as_str().unwrap_or_default()) }
                            td { (i["lastDownloaded"].as_str().unwrap_or("never")) }
                        } } }
                    } }
                }
                @let here = format!("/admin/cleanup?policy={}&repository={}", super::browse::urlencode(q.policy.as_deref().unwrap_or_default()), super::browse::urlencode(repository));
                nav.pager aria-label="Preview pages" {
                    @if q.after.is_some() { a href=(viewer.base.link(&here)) { "First page" } }
                    @if let Some(n) = next { a href=(viewer.base.link(&format!("{here}&after={}", super::browse::urlencode(n)))) { "Next page" } }
                }
                @if next.is_some() || q.after.is_some() {
                    p.muted { "The totals of a whole run: " code { "POST /api/v1/cleanup-policies/…/preview?repository=…" } " counts them, and each run's report gives what it removed." }
                }
            }
        }
    };
    Ok(viewer.page_with(status, "Cleanup", body))
}

// --- audit --------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    actor: Option<String>,
    action: Option<String>,
    target: Option<String>,
    before: Option<i64>,
}

async fn audit(
    viewer: Viewer,
    services: web::Data<Services>,
    q: web::Query<AuditQuery>,
) -> Result<HttpResponse, UiError> {
    admin_of(&viewer)?;
    let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    let filter = packyard_store::db::security::AuditFilter {
        actor: given(&q.actor),
        action: given(&q.action),
        target: given(&q.target),
    };
    const PAGE: i64 = 50;
    let rows = services.db.list_audit_filtered(q.before, PAGE + 1, &filter).await?;
    let more = rows.len() as i64 > PAGE;
    let rows: Vec<_> = rows.into_iter().take(PAGE as usize).collect();
    let next = if more { rows.last().map(|r| r.id) } else { None };
    let keep = |v: &Option<String>| v.clone().unwrap_or_default();
    let mut filters = Vec::new();
    for (k, v) in [("actor", &filter.actor), ("action", &filter.action), ("target", &filter.target)] {
        if let Some(v) = v {
            filters.push(format!("{k}={}", super::browse::urlencode(v)));
        }
    }
    let body = html! {
        h1 { "Audit log" }
        (admin_nav(&viewer, "/admin/audit"))
        form.search method="get" action=(viewer.base.link("/admin/audit")) {
            (field("actor", "Who", &keep(&q.actor), ""))
            (field("action", "Action starts with", &keep(&q.action), "e.g. user. or repository.delete"))
            (field("target", "Target contains", &keep(&q.target), ""))
            button type="submit" { "Filter" }
        }
        div.table-wrap { table {
            thead { tr { th scope="col" { "When" } th scope="col" { "Who" } th scope="col" { "From" } th scope="col" { "Action" } th scope="col" { "Target" } th scope="col" { "Detail" } } }
            tbody { @for r in &rows { tr {
                td { (super::time(r.at)) } td { (r.actor) } td { (r.address) } td { code { (r.action) } } td { (r.target) } td { code.hash { (r.detail) } }
            } } }
        } }
        nav.pager aria-label="Pages" {
            @if q.before.is_some() { a href=(viewer.base.link(&format!("/admin/audit?{}", filters.join("&")))) { "Newest" } }
            @if let Some(n) = next { a href=(viewer.base.link(&format!("/admin/audit?{}&before={n}", filters.join("&")))) { "Older" } }
        }
    };
    Ok(viewer.page("Audit log", body))
}
