//! Users and roles: lists, forms, pages and deletion.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::admin::roles::{self, RoleBody};
use packyard_core::admin::users::{self, NewUser, UserUpdate};
use packyard_core::security::Privilege;
use packyard_core::services::Services;
use serde::Deserialize;

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
    admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let listed = users::list(services).await.map_err(ApiError::from)?;
    let role_names: Vec<String> =
        roles::list(services).await.map_err(ApiError::from)?.into_iter().map(|r| r.name).collect();
    let body = html! {
        h1 { "Users" }
        (admin_nav(viewer, "/admin/users"))
        div.table-wrap { table {
            thead { tr { th scope="col" { "Username" } th scope="col" { "Roles" } th scope="col" { "Signs in" } th scope="col" { "Created" } th scope="col" { span.muted { "Actions" } } } }
            tbody { @for u in &listed {
                @let name = &u.username;
                tr {
                    td { a href=(viewer.base.link(&format!("/admin/users/{name}"))) { (name) } }
                    td { (u.roles.join(", ")) }
                    td { (u.source) }
                    td { (super::super::at(&u.created_at)) }
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
    let new = NewUser {
        username: f.username.trim().to_string(),
        password: f.password.clone(),
        roles: list_of(&f.roles),
        email: None,
        display_name: None,
    };
    match users::create(&services, admin.actor(), new).await {
        Ok(_) => Ok(viewer.redirect("/admin/users")),
        Err(e) => user_list(&viewer, &services, Some(e.into())).await,
    }
}

pub(super) async fn user_page(
    viewer: &Viewer,
    services: &web::Data<Services>,
    name: &str,
    notice: Option<&str>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let user = users::get(services, name).await.map_err(ApiError::from)?;
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/users")) { "Users" } " / " }
        h1 { (name) }
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        (refusal(&error))
        p.muted { "Created " (super::super::at(&user.created_at)) }
        @if !user.is_local() {
            p { "Signs in through " strong { (user.source) } "; roles come from there: " (user.roles.join(", ")) "." }
            @if let Some(email) = &user.email { p.muted { (email) } }
        } @else {
        form.stack method="post" action=(viewer.base.link(&format!("/admin/users/{name}"))) {
            (viewer.csrf_field())
            (field("roles", "Roles", &user.roles.join(", "), "comma-separated role names"))
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
    let change = UserUpdate {
        roles: Some(list_of(&f.roles)),
        password: (!f.password.is_empty()).then(|| f.password.clone()),
        ..UserUpdate::default()
    };
    match users::update(&services, admin.actor(), &name, change).await {
        Ok(_) => user_page(&viewer, &services, &name, Some("Saved."), None).await,
        Err(e) => user_page(&viewer, &services, &name, None, Some(e.into())).await,
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
    match users::delete(&services, admin.actor(), &name).await {
        Ok(()) => Ok(viewer.redirect("/admin/users")),
        Err(e) => user_list(&viewer, &services, Some(e.into())).await,
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

/// `debs* read, write` per line → privileges; `… @team-a` at the end narrows one by a content
/// selector.
pub(super) fn privileges_of(text: &str) -> Result<Vec<Privilege>, ApiError> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (line, selector) = match line.rsplit_once('@') {
            Some((rest, s)) => (rest.trim(), Some(s.trim().to_string())),
            None => (line, None),
        };
        let (pattern, actions) = line.split_once(char::is_whitespace).ok_or_else(|| {
            ApiError::bad_request(format!(
                "privilege {line:?}: write a repository pattern, then its actions, e.g. debs* read, write"
            ))
        })?;
        let actions = list_of(actions)
            .iter()
            .map(|a| a.parse())
            .collect::<Result<_, _>>()
            .map_err(|e| ApiError::bad_request(format!("privilege {line:?}: {e}")))?;
        out.push(Privilege {
            repositories: pattern.to_string(),
            actions,
            content_selector: selector,
            ..Default::default()
        });
    }
    Ok(out)
}

/// Privileges as the form writes them, one per line.
fn privilege_lines(privileges: &[Privilege]) -> String {
    privileges.iter().map(|p| format!("{} {}", p.repositories, actions_of(p))).collect::<Vec<_>>().join("\n")
}

/// The actions, and the content selector that narrows them (` @name`).
fn actions_of(p: &Privilege) -> String {
    let actions = p.actions.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ");
    match &p.content_selector {
        Some(s) => format!("{actions} @{s}"),
        None => actions,
    }
}

pub(super) async fn role_list(
    viewer: &Viewer,
    services: &web::Data<Services>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let roles = roles::list(services).await.map_err(ApiError::from)?;
    let body = html! {
        h1 { "Roles and privileges" }
        (admin_nav(viewer, "/admin/roles"))
        div.table-wrap { table {
            thead { tr { th scope="col" { "Role" } th scope="col" { "Description" } th scope="col" { "Privileges" } th scope="col" { span.muted { "Actions" } } } }
            tbody { @for r in &roles {
                @let name = &r.name;
                tr {
                    td { a href=(viewer.base.link(&format!("/admin/roles/{name}"))) { (name) } @if r.builtin { " " span.badge { "built-in" } } }
                    td { (r.description) }
                    td { ul.plain { @for p in &r.privileges {
                        li { code { (p.repositories) } ": " (actions_of(p)) }
                    } } }
                    td { @if !r.builtin {
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
                span.hint #privileges-hint { "One per line: a repository pattern (* matches any text), then its actions — read, write, delete, admin. For example: debs* read, write — and, to narrow one by a content selector, @ and its name at the end: shared* read @team-a" }
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
        Ok(privileges) => {
            let body =
                RoleBody { name: Some(f.name.trim().to_string()), description: f.description.clone(), privileges };
            roles::create(&services, admin.actor(), body).await.map_err(ApiError::from)
        }
        Err(e) => Err(e),
    };
    match made {
        Ok(_) => Ok(viewer.redirect("/admin/roles")),
        Err(e) => role_list(&viewer, &services, Some(e)).await,
    }
}

pub(super) async fn role_page(
    viewer: &Viewer,
    services: &web::Data<Services>,
    name: &str,
    notice: Option<&str>,
    error: Option<ApiError>,
    typed: Option<&RoleForm>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let role = roles::get(services, name).await.map_err(ApiError::from)?;
    let (description, privileges) = match typed {
        Some(f) => (f.description.clone(), f.privileges.clone()),
        None => (role.description.clone(), privilege_lines(&role.privileges)),
    };
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/roles")) { "Roles" } " / " }
        h1 { (name) @if role.builtin { " " span.badge { "built-in" } } }
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
    let done = match privileges_of(&f.privileges) {
        Ok(privileges) => {
            let body = RoleBody { name: None, description: f.description.clone(), privileges };
            roles::update(&services, admin.actor(), &name, body).await.map_err(ApiError::from)
        }
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
    match roles::delete(&services, admin.actor(), &name).await {
        Ok(()) => Ok(viewer.redirect("/admin/roles")),
        Err(e) => role_list(&viewer, &services, Some(e.into())).await,
    }
}
