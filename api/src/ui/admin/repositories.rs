//! Repositories: the list, the form (each format's settings fields from the registry), a
//! repository's page, key rotation and deletion.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use packyard_core::admin::repositories::{self as service, RepositoryView};
use packyard_core::formats::{FieldKind, FormField, KeyChange, Registry};
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoName, RepoType, RepositorySpec};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;

use super::*;

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
    max_stale_secs: String,
    offline: Option<String>,
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
pub(super) fn settings_id(format: Format, field: &FormField) -> String {
    format!("{format}_{}", field.key)
}

pub(super) fn list_of(s: &str) -> Vec<String> {
    s.split([',', ' ', '\n']).map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()
}

/// The API's repository body from the form: what the form's format and type use.
pub(super) fn spec_of(formats: &Registry, f: &RepoForm, creating: bool) -> Value {
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
        for field in form.fields.iter().filter(|field| field.applies(form, t)) {
            let typed = f.settings.get(&settings_id(format, field)).map_or("", String::as_str);
            match field.value_of(typed) {
                Some(value) => {
                    block.insert(field.key.into(), value);
                }
                // Emptied while editing: back to the default (a merge patch's null).
                None if !creating => {
                    block.insert(field.key.into(), Value::Null);
                }
                None => {}
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
        match f.max_stale_secs.trim() {
            // A merge patch's null lifts the limit.
            "" if !creating => proxy["max_stale_secs"] = Value::Null,
            "" => {}
            v => proxy["max_stale_secs"] = v.parse::<u64>().map_or_else(|_| json!(v), |n| json!(n)),
        }
        proxy["offline"] = json!(f.offline.is_some());
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

pub(super) fn repository_fields(formats: &Registry, f: &RepoForm, creating: bool) -> Markup {
    let names: Vec<(&str, &str)> = formats.offered().map(|s| (s.format().as_str(), s.ui().title())).collect();
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
        @for spec in formats.offered() {
            @if let Some(form) = spec.settings().and_then(|s| s.form()) {
                @let format = spec.format();
                @let types: Vec<&str> = form.types.iter().map(|t| t.as_str()).collect();
                @if shown(&[format.as_str()], &types) {
                    fieldset data-formats=(format) data-types=(types.join(" ")) {
                        legend { (spec.ui().title()) }
                        @for field in form.fields {
                            @let id = settings_id(format, field);
                            @let value = f.settings.get(&id).map_or("", String::as_str);
                            @let own: Vec<&str> = field.shown_for(form).iter().map(|t| t.as_str()).collect();
                            @if shown(&[format.as_str()], &own) {
                                div data-types=[(own.len() < types.len()).then(|| own.join(" "))] {
                                    @match field.kind {
                                        FieldKind::Lines | FieldKind::Pairs { .. } => (lines(&id, field.label, value, field.hint)),
                                        _ => (self::field(&id, field.label, value, field.hint)),
                                    }
                                }
                            }
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
                (field("max_stale_secs", "Served stale for at most (seconds)", &f.max_stale_secs, "when the upstream fails, a copy past its metadata age is served this long at most; no limit when empty"))
                div.field { label { input type="checkbox" name="offline" value="on" checked[f.offline.is_some()]; " Offline: no upstream traffic at all (the cache is served, the rest is a 404)" } }
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

pub(super) async fn repository_list(
    viewer: &Viewer,
    services: &web::Data<Services>,
    form: &RepoForm,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let listed = service::list(services, packyard_formats::registry()).await?;
    let body = html! {
        h1 { "Repositories" }
        (admin_nav(viewer, "/admin/repositories"))
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Format" } th scope="col" { "Type" } th scope="col" { "Anonymous read" } } }
            tbody { @for r in &listed {
                tr {
                    td { a href=(viewer.base.link(&format!("/admin/repositories/{}", r.name))) { (r.name) } }
                    td { (r.format) }
                    td { (r.repo_type) }
                    td { (if r.anonymous_read { "yes" } else { "no" }) }
                }
            } }
        } }
        h2 #create { "Create a repository" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/repositories")) {
            (viewer.csrf_field())
            (repository_fields(packyard_formats::registry(), form, true))
            div { button type="submit" { "Create repository" } }
        }
    };
    Ok(viewer.page_with(status, "Repositories", body))
}

pub(super) async fn repositories(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    let form = RepoForm {
        format: packyard_formats::registry().offered().next().map(|s| s.format().to_string()).unwrap_or_default(),
        repo_type: "hosted".into(),
        anonymous_read: Some("on".into()),
        ..RepoForm::default()
    };
    repository_list(&viewer, &services, &form, None).await
}

pub(super) async fn create_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<RepoForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let formats = packyard_formats::registry();
    let created = match serde_json::from_value::<RepositorySpec>(spec_of(formats, &f, true)) {
        Ok(spec) => service::create(&services, formats, admin.actor(), spec).await.map_err(ApiError::from),
        Err(e) => Err(ApiError::bad_request(format!("invalid form: {e}"))),
    };
    match created {
        Ok(_) => Ok(viewer.redirect(&format!("/admin/repositories/{}", f.name.trim()))),
        Err(e) => repository_list(&viewer, &services, &f, Some(e)).await,
    }
}

pub(super) fn form_of(formats: &Registry, v: &RepositoryView) -> RepoForm {
    let proxy = v.proxy.as_ref();
    RepoForm {
        csrf: None,
        name: v.name.clone(),
        format: v.format.to_string(),
        repo_type: v.repo_type.to_string(),
        anonymous_read: v.anonymous_read.then(|| "on".to_string()),
        write_policy: v.write_policy.to_string(),
        remote_url: proxy.map(|p| p.remote_url.clone()).unwrap_or_default(),
        metadata_ttl_secs: proxy.map(|p| p.metadata_ttl_secs.to_string()).unwrap_or_default(),
        negative_ttl_secs: proxy.map(|p| p.negative_ttl_secs.to_string()).unwrap_or_default(),
        max_stale_secs: proxy.and_then(|p| p.max_stale_secs.map(|s| s.to_string())).unwrap_or_default(),
        offline: proxy.filter(|p| p.offline).map(|_| "on".to_string()),
        proxy_username: proxy.and_then(|p| p.username.clone()).unwrap_or_default(),
        proxy_password: String::new(),
        members: v.group.as_ref().map(|g| g.members.join(", ")).unwrap_or_default(),
        settings: settings_of(formats, v),
    }
}

/// The form's format settings fields of a repository.
pub(super) fn settings_of(formats: &Registry, v: &RepositoryView) -> BTreeMap<String, String> {
    let Ok(format) = v.format.parse::<Format>() else { return BTreeMap::new() };
    let Some(form) = formats.get(format).settings().and_then(|s| s.form()) else { return BTreeMap::new() };
    let block = v.formats.get(format.as_str()).unwrap_or(&Value::Null);
    form.fields.iter().map(|field| (settings_id(format, field), field.shown(&block[field.key]))).collect()
}

/// The repository's name from the page's path; an impossible one is a page not found.
fn repo_name(name: &str) -> Result<RepoName, UiError> {
    RepoName::parse(name).map_err(|e| UiError::not_found(e.to_string()))
}

pub(super) async fn repository_page(
    viewer: &Viewer,
    services: &web::Data<Services>,
    name: &str,
    notice: Option<String>,
    error: Option<ApiError>,
    form: Option<RepoForm>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let view = service::get(services, packyard_formats::registry(), repo_name(name)?.as_str()).await?;
    let form = form.unwrap_or_else(|| form_of(packyard_formats::registry(), &view));
    // Where clients fetch a rotated key, for a repository that has one the UI rotates.
    let rotation = form
        .format
        .parse::<Format>()
        .ok()
        .and_then(|f| packyard_formats::registry().get(f).signing_keys())
        .filter(|_| form.repo_type != "proxy")
        .and_then(|keys| keys.rotation_note());
    // The signing key as the admin API describes it (`GET …/signing-key`), for a repository
    // that signs what it publishes.
    let formats = packyard_formats::registry();
    let signs = form.format.parse::<Format>().ok().and_then(|f| formats.get(f).signing_keys()).is_some();
    let key = if signs && form.repo_type != "proxy" {
        service::signing_key(services, formats, &viewer.base.url(""), name).await.ok()
    } else {
        None
    };
    // Every key (`GET …/signing-keys`) of a repository whose keys rotate with an overlap.
    let all_keys = if rotation.is_some() && key.is_some() {
        service::signing_keys(services, formats, name).await.unwrap_or_default()
    } else {
        Vec::new()
    };
    let now_secs = packyard_store::db::now_ms() / 1000;
    // Its publication units (`GET …/status`): those pending or failing first.
    let mut units = service::status(services, formats, name).await?.units;
    units.sort_by_key(|u| (u.last_error.is_none(), !u.pending));
    let (pending, failing) =
        (units.iter().filter(|u| u.pending).count(), units.iter().filter(|u| u.last_error.is_some()).count());
    const UNITS_SHOWN: usize = 20;
    // Its snapshots (`GET …/snapshots`), newest first.
    let snapshots = packyard_core::admin::snapshots::list(services, formats, name).await?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/repositories")) { "Repositories" } " / " }
        h1 { (name) " " span.badge { (form.format) } " " span.badge { (form.repo_type) } }
        @if let Some(n) = &notice { p.notice role="status" { (n) } }
        (refusal(&error))
        p { a href=(viewer.base.link(&format!("/browse/{name}"))) { "Browse its contents" } " · " a href=(viewer.base.link(&format!("/browse/{name}/files/"))) { "its files" } }
        form.stack method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}"))) {
            (viewer.csrf_field())
            input type="hidden" name="format" value=(form.format);
            input type="hidden" name="type" value=(form.repo_type);
            (repository_fields(packyard_formats::registry(), &form, false))
            div { button type="submit" { "Save changes" } }
        }
        h2 #publication { "Publication" }
        p {
            (super::super::count(units.len() as i64, "publication unit", "publication units"))
            @if pending > 0 { ", " (pending) " to publish" }
            @if failing > 0 { ", " span.error-text { (failing) " failing" } }
            @if pending == 0 && failing == 0 && !units.is_empty() { ", all published" }
            "."
        }
        @if !units.is_empty() {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Unit" } th.num scope="col" { "Revision" } th scope="col" { "Last published" } th scope="col" { "Last error" } } }
                tbody { @for u in units.iter().take(UNITS_SHOWN) { tr {
                    td.wrap { code { (u.unit) } " " span.badge { (u.kind) } }
                    td.num { (u.published_revision) @if u.pending { " → " (u.desired_revision) } }
                    td { @if let Some(t) = &u.last_published_at { (super::super::at(t)) } @else { "never" } }
                    td.wrap { @if let Some(e) = &u.last_error {
                        (e) br; span.muted { (super::super::count(u.attempts, "attempt", "attempts"))
                            @if let Some(t) = &u.next_attempt_at { "; next " (super::super::at(t)) } }
                    } @else { "–" } }
                } } }
            } }
            @if units.len() > UNITS_SHOWN {
                @let rest = &units[UNITS_SHOWN..];
                @let (rest_pending, rest_failing) = (rest.iter().filter(|u| u.pending).count(), rest.iter().filter(|u| u.last_error.is_some()).count());
                p.muted {
                    "and " (rest.len()) " more"
                    @if rest_failing > 0 { ", " (rest_failing) " of them failing" }
                    @if rest_pending > 0 { ", " (rest_pending) " to publish" }
                    @if rest_pending == 0 && rest_failing == 0 { " (all published)" }
                    "; " code { "GET /api/v1/repositories/" (name) "/status" } " lists every one."
                }
            }
        }
        form method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/rebuild"))) {
            (viewer.csrf_field())
            button.secondary type="submit" { "Rebuild every unit" }
            " " span.muted { "publishes each of its indexes again from what it holds" }
        }
        h2 #snapshots { "Snapshots" }
        p.muted { "A snapshot is the repository as it is now, under a URL of its own that clients install from (the repository's set-up with the snapshot's URL); it copies no package." }
        @if !snapshots.is_empty() {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Snapshot" } th scope="col" { "Made" } th.num scope="col" { "Files" } th.num scope="col" { "Size" } th scope="col" { "Delete" } } }
                tbody { @for s in &snapshots { tr {
                    td.wrap { (s.name) br; code { (viewer.base.url(&s.path)) } }
                    td { (super::super::at(&s.created_at)) @if let Some(by) = &s.created_by { br; span.muted { "by " (by) } } }
                    td.num { (s.files) }
                    td.num { (super::super::bytes(s.bytes)) }
                    td { form method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/snapshots/{}/delete", s.name))) {
                        (viewer.csrf_field())
                        button.secondary type="submit" aria-label=(format!("Delete snapshot {}", s.name)) { "Delete" }
                    } }
                } } }
            } }
        }
        form.stack method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/snapshots"))) {
            (viewer.csrf_field())
            (field("snapshot_name", "Snapshot name (optional)", "", "letters, digits, '.', '_', '-'; empty: named by the time, 20261206T093012Z"))
            div { button.secondary type="submit" { "Make a snapshot" } }
        }
        @if let Some(key) = key.as_ref().and_then(|k| k.as_object()) {
            h2 { "Signing key" }
            dl.facts {
                @for (k, v) in key.iter().filter(|(k, v)| k.as_str() != "repository" && !v.is_null()) {
                    @let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    dt { (k.replace('_', " ")) }
                    dd { @if text.contains('\n') || text.len() > 120 {
                        details { summary { (text.lines().next().unwrap_or_default()) " …" } pre { code { (text) } } }
                    } @else { code { (text) } } }
                }
            }
            @let file = match (rotation, key.get("key_name").and_then(|n| n.as_str())) {
                (Some(dir), Some(file)) if dir.ends_with('/') => Some(format!("{dir}{file}")),
                (Some(note), _) if !note.ends_with('/') => Some(note.to_string()),
                _ => None,
            };
            @if let Some(file) = file {
                p { a.button href=(viewer.base.link(&format!("/repository/{name}/{file}"))) download { "Download the public key" } }
            }
        }
        @if !all_keys.is_empty() {
            h2 { "Signing keys" }
            @for k in all_keys.iter().filter(|k| k.expires_soon(now_secs)) {
                p.warning.key-expiry role="alert" {
                    "Key " code { (k.fingerprint) } " expires on " (k.expires_at.as_deref().unwrap_or_default())
                    ": add its successor beside it and retire it before then."
                }
            }
            div.table-wrap { table.signing-keys { thead { tr {
                th scope="col" { "Fingerprint" } th scope="col" { "Algorithm" } th scope="col" { "Role" }
                th scope="col" { "Expires" } th scope="col" { span.visually-hidden { "Retire" } }
            } } tbody { @for k in &all_keys { tr {
                td { code { (k.fingerprint) } @if let Some(n) = k.public.get("key_name").and_then(|n| n.as_str()) { br; span.muted { (n) } } }
                td { (k.public.get("algorithm").and_then(|a| a.as_str()).unwrap_or_default()) }
                td { (match k.slot {
                    packyard_core::security::keystore::KeySlot::Current => "signs (newest)",
                    packyard_core::security::keystore::KeySlot::Overlap => "signs (overlap)",
                    packyard_core::security::keystore::KeySlot::Previous => "offered to clients",
                }) }
                td { (k.expires_at.as_deref().unwrap_or("never")) }
                td { @if all_keys.len() > 1 {
                    form method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/signing-keys/{}/retire", k.fingerprint))) {
                        (viewer.csrf_field())
                        button.secondary type="submit" aria-label=(format!("Retire key {}", k.fingerprint)) { "Retire" }
                    }
                } }
            } } } } }
            @if all_keys.iter().filter(|k| k.signs).count() < 2 {
                form.stack method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/signing-keys"))) {
                    (viewer.csrf_field())
                    p.muted { "A key added beside the current one signs with it until one is retired: clients that trust either keep verifying while they move to the new one." }
                    (lines("private_key", "Import a private key (optional)", "", "empty: a new one is generated"))
                    div { button.secondary type="submit" { "Add a key beside the current one" } }
                }
            }
        }
        @if let Some(note) = rotation {
            @if key.is_none() { h2 { "Signing key" } }
            p { "A new key signs every index from now on; clients need the new public key (" code { (note) } ")." }
            form.stack method="post" action=(viewer.base.link(&format!("/admin/repositories/{name}/signing-key"))) {
                (viewer.csrf_field())
                (lines("private_key", "Or import a private key (optional)", "", "the key to sign with from now on, in the format's own encoding (APT: an armored OpenPGP secret key; APK: a PEM RSA key); empty: a new one is generated"))
                div { button.secondary type="submit" { "Rotate the signing key" } }
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

pub(super) async fn edit_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    repository_page(&viewer, &services, &name, None, None, None).await
}

pub(super) async fn update_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<RepoForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let patch = spec_of(packyard_formats::registry(), &f, false);
    match service::patch(&services, packyard_formats::registry(), admin.actor(), &name, &patch).await {
        Ok(_) => repository_page(&viewer, &services, &name, Some("Saved.".into()), None, None).await,
        Err(e) => repository_page(&viewer, &services, &name, None, Some(e.into()), Some(f.into_inner())).await,
    }
}

#[derive(Deserialize)]
pub struct KeyForm {
    csrf: Option<String>,
    #[serde(default)]
    private_key: String,
}

pub(super) async fn rotate_key(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<KeyForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let name = repo_name(&name)?;
    let change = key_change(&f);
    let site = viewer.base.url("");
    let formats = packyard_formats::registry();
    match service::change_signing_key(&services, formats, admin.actor(), &site, name.as_str(), &change).await {
        Ok(v) => {
            let fp = v["fingerprint"].as_str().unwrap_or_default().to_string();
            repository_page(
                &viewer,
                &services,
                name.as_str(),
                Some(format!("A new signing key signs the indexes: {fp}")),
                None,
                None,
            )
            .await
        }
        Err(e) => repository_page(&viewer, &services, name.as_str(), None, Some(e.into()), None).await,
    }
}

/// The key form's change: a generated key, or the one pasted.
fn key_change(f: &KeyForm) -> KeyChange {
    let import = f.private_key.trim();
    if import.is_empty() {
        KeyChange { generate: true, ..KeyChange::default() }
    } else {
        KeyChange { private_key: Some(format!("{}\n", import.replace("\r\n", "\n"))), ..KeyChange::default() }
    }
}

pub(super) async fn add_key(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<KeyForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let name = repo_name(&name)?;
    let formats = packyard_formats::registry();
    let (notice, error) = match service::add_signing_key(
        &services,
        formats,
        admin.actor(),
        name.as_str(),
        &key_change(&f),
    )
    .await
    {
        Ok(keys) => {
            let fp = keys.first().map(|k| k.fingerprint.clone()).unwrap_or_default();
            (Some(format!("Key {fp} signs the indexes beside the current one; retire the old one once clients trust the new one")), None)
        }
        Err(e) => (None, Some(e.into())),
    };
    repository_page(&viewer, &services, name.as_str(), notice, error, None).await
}

pub(super) async fn retire_key(
    viewer: Viewer,
    services: web::Data<Services>,
    path: web::Path<(String, String)>,
    f: web::Form<KeyForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let (name, fingerprint) = path.into_inner();
    let name = repo_name(&name)?;
    let formats = packyard_formats::registry();
    let (notice, error) =
        match service::retire_signing_key(&services, formats, admin.actor(), name.as_str(), &fingerprint).await {
            Ok(_) => {
                (Some(format!("Key {fingerprint} is retired: it no longer signs nor is offered to clients")), None)
            }
            Err(e) => (None, Some(e.into())),
        };
    repository_page(&viewer, &services, name.as_str(), notice, error, None).await
}

pub(super) async fn delete_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Confirm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    if let Some(e) = f.unticked() {
        return repository_page(&viewer, &services, &name, None, Some(e), None).await;
    }
    let name = repo_name(&name)?;
    match service::delete(&services, packyard_formats::registry(), admin.actor(), name.as_str()).await {
        Ok(()) => Ok(viewer.redirect("/admin/repositories")),
        Err(e) => repository_page(&viewer, &services, name.as_str(), None, Some(e.into()), None).await,
    }
}

#[derive(Deserialize)]
pub struct SnapshotForm {
    csrf: Option<String>,
    #[serde(default, rename = "snapshot_name")]
    name: String,
}

pub(super) async fn create_snapshot(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<SnapshotForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let name = repo_name(&name)?;
    let wanted = Some(f.name.trim()).filter(|n| !n.is_empty()).map(str::to_string);
    let new = packyard_core::admin::snapshots::NewSnapshot { name: wanted };
    let made = packyard_core::admin::snapshots::create(
        &services,
        packyard_formats::registry(),
        admin.actor(),
        name.as_str(),
        new,
    )
    .await;
    match made {
        Ok(v) => {
            let notice = format!("Snapshot {} made: {}", v.name, viewer.base.url(&v.path));
            repository_page(&viewer, &services, name.as_str(), Some(notice), None, None).await
        }
        Err(e) => repository_page(&viewer, &services, name.as_str(), None, Some(e.into()), None).await,
    }
}

pub(super) async fn delete_snapshot(
    viewer: Viewer,
    services: web::Data<Services>,
    path: web::Path<(String, String)>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let (name, snapshot) = path.into_inner();
    let name = repo_name(&name)?;
    let formats = packyard_formats::registry();
    match packyard_core::admin::snapshots::delete(&services, formats, admin.actor(), name.as_str(), &snapshot).await {
        Ok(()) => {
            let notice = format!("Snapshot {snapshot} deleted.");
            repository_page(&viewer, &services, name.as_str(), Some(notice), None, None).await
        }
        Err(e) => repository_page(&viewer, &services, name.as_str(), None, Some(e.into()), None).await,
    }
}

pub(super) async fn rebuild_repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let name = repo_name(&name)?;
    match service::rebuild(&services, packyard_formats::registry(), admin.actor(), name.as_str()).await {
        Ok(r) => {
            let notice = format!(
                "{} requested; the worker publishes them within moments.",
                super::super::count(r.units as i64, "rebuild", "rebuilds")
            );
            repository_page(&viewer, &services, name.as_str(), Some(notice), None, None).await
        }
        Err(e) => repository_page(&viewer, &services, name.as_str(), None, Some(e.into()), None).await,
    }
}
