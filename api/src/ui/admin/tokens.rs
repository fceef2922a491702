//! The viewer's own tokens and password.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::admin::tokens::{self, CreatedToken, NewToken};
use packyard_core::admin::users::{self, PasswordChange};
use packyard_core::admin::AdminError;
use packyard_core::security::service::PasswordChangeError;
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::Format;
use serde::Deserialize;

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
    created: Option<CreatedToken>,
    notice: Option<&str>,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    let user = user_of(viewer)?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let listed = tokens::list(services, user.owner(), false).await.map_err(ApiError::from)?;
    // An administrator sees everyone else's tokens too (`GET /api/v1/tokens?all=true`), to revoke.
    let others: Vec<_> = if viewer.is_admin() {
        let mine = user.username().to_string();
        tokens::list(services, user.owner(), true)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .filter(|t| t.username != mine)
            .collect()
    } else {
        Vec::new()
    };
    let body = html! {
        h1 { "My tokens" }
        (admin_nav(viewer, "/admin/tokens"))
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if let Some(c) = &created {
            div.notice role="status" {
                p { "Token " strong { (c.view.name) } " created. Copy it now: it is shown only this once." }
                (super::super::snippet("The token", &c.token))
            }
        }
        p { "Use a token as the password of your username with " (Format::listed("or")) " clients and the API, or as " code { "Authorization: Bearer …" } "." }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Scope" } th scope="col" { "Expires" } th scope="col" { "Created" } th scope="col" { "State" } } }
            tbody { @for t in &listed {
                @let id = &t.id;
                tr {
                    td { (t.name) }
                    td { (t.repositories.as_deref().unwrap_or("all repositories")) " · "
                        (t.actions.as_ref().map(|a| a.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_else(|| "all of my actions".into())) }
                    td { @if let Some(e) = &t.expires_at { (super::super::at(e)) } @else { "never" } }
                    td { (super::super::at(&t.created_at)) }
                    td { @if t.revoked_at.is_some() { span.badge { "revoked" } } @else {
                        form.inline method="post" action=(viewer.base.link(&format!("/admin/tokens/{id}/revoke"))) {
                            (viewer.csrf_field())
                            button.link type="submit" aria-label=(format!("Revoke token {}", t.name)) { "Revoke" }
                        }
                    } }
                }
            } }
        } }
        @if !others.is_empty() {
            h2 { "Everyone else's tokens" }
            div.table-wrap { table {
                thead { tr { th scope="col" { "Owner" } th scope="col" { "Name" } th scope="col" { "Scope" } th scope="col" { "Expires" } th scope="col" { "Created" } th scope="col" { "State" } } }
                tbody { @for t in &others {
                    @let id = &t.id;
                    tr {
                        td { (t.username) }
                        td { (t.name) }
                        td { (t.repositories.as_deref().unwrap_or("all repositories")) " · "
                            (t.actions.as_ref().map(|a| a.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_else(|| "all of the owner's actions".into())) }
                        td { @if let Some(e) = &t.expires_at { (super::super::at(e)) } @else { "never" } }
                        td { (super::super::at(&t.created_at)) }
                        td { @if t.revoked_at.is_some() { span.badge { "revoked" } } @else {
                            form.inline method="post" action=(viewer.base.link(&format!("/admin/tokens/{id}/revoke"))) {
                                (viewer.csrf_field())
                                button.link type="submit" aria-label=(format!("Revoke {}'s token {}", t.username, t.name)) { "Revoke" }
                            }
                        } }
                    }
                } }
            } }
        }
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
    let trimmed = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    let actions: Vec<Action> = [(Action::Read, &f.read), (Action::Write, &f.write), (Action::Delete, &f.delete)]
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(a, _)| a)
        .collect();
    let new = NewToken {
        name: f.name.trim().to_string(),
        expires_at: trimmed(&f.expires).map(|day| format!("{day}T00:00:00Z")),
        repositories: trimmed(&f.repositories),
        actions: (!actions.is_empty()).then_some(actions),
    };
    match tokens::create(&services, user.owner(), new).await {
        Ok(created) => token_list(&viewer, &services, Some(created), None, None).await,
        Err(e) => token_list(&viewer, &services, None, None, Some(e.into())).await,
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
    match tokens::revoke(&services, user.owner(), &id).await {
        Ok(()) => Ok(viewer.redirect("/admin/tokens")),
        Err(e) => token_list(&viewer, &services, None, None, Some(e.into())).await,
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
    // The viewer's own password: the current one always asked, also of an admin.
    let caller = user.password_caller(true);
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
