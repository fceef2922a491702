//! The viewer's own tokens and password.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::admin::users::{self, PasswordCaller, PasswordChange};
use packyard_core::admin::AdminError;
use packyard_core::security::service::PasswordChangeError;
use packyard_core::services::Services;
use packyard_model::repos::Format;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::admin;
use crate::error::ApiError;

use super::*;

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

pub(super) async fn token_list(
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
                (super::super::snippet("The token", c["token"].as_str().unwrap_or_default()))
            }
        }
        p { "Use a token as the password of your username with " (Format::listed("or")) " clients and the API, or as " code { "Authorization: Bearer …" } "." }
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

pub(super) async fn tokens(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    token_list(&viewer, &services, None, None, None).await
}

pub(super) async fn create_token(
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

pub(super) async fn revoke_token(
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
pub(super) async fn change_password(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<PasswordForm>,
) -> Result<HttpResponse, UiError> {
    let user = user_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    // The viewer's own password, as a user (the current one always asked, also of an admin).
    let caller = PasswordCaller {
        username: user.username(),
        is_admin: false,
        session_id: user.0.session_id(),
        address: user.0.addr,
    };
    let change =
        PasswordChange { current_password: Some(f.current_password.clone()), new_password: f.new_password.clone() };
    let done = users::change_password(&services, caller, user.username(), &change).await.map_err(|e| match e {
        AdminError::Password(PasswordChangeError::WrongCurrent) => {
            ApiError::bad_request("The current password is wrong; nothing was changed.")
        }
        other => other.into(),
    });
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
