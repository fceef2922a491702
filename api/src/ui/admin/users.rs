//! Users and roles: lists, forms, pages and deletion.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::admin;
use crate::error::ApiError;

use super::*;

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

pub(super) async fn user_list(
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

pub(super) async fn users(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    user_list(&viewer, &services, None).await
}

pub(super) async fn create_user(
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

pub(super) fn joined(v: &Value) -> String {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

pub(super) async fn user_page(
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

pub(super) async fn edit_user(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    user_page(&viewer, &services, &name, None, None).await
}

pub(super) async fn update_user(
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

pub(super) async fn delete_user(
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
pub(super) fn privileges_of(text: &str) -> Result<Value, ApiError> {
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

pub(super) async fn role_list(
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

pub(super) async fn roles(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    role_list(&viewer, &services, None).await
}

pub(super) async fn create_role(
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
pub(super) fn privilege_lines(privileges: &Value) -> String {
    privileges
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| format!("{} {}", p["repositories"].as_str().unwrap_or_default(), joined(&p["actions"])))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) async fn role_page(
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

pub(super) async fn edit_role(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    role_page(&viewer, &services, &name, None, None, None).await
}

pub(super) async fn update_role(
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

pub(super) async fn delete_role(
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
