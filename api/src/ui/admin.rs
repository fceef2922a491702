//! Administration pages, one module per section: system status, repositories, users and roles,
//! tokens, cleanup policies and the audit log. Each change goes through core's typed
//! administration services (`packyard_core::admin`), as the admin API's do: the same privilege
//! check, the same validation (its messages shown on the form), the same audit entry; the status
//! and audit pages read what they show.

use actix_web::http::StatusCode;
use actix_web::web;
use maud::{html, Markup};
use serde::Deserialize;

use super::{bytes, UiError, Viewer};
use crate::auth::{Admin, Authenticated};
use crate::error::ApiError;

mod audit;
mod cleanup;
mod directories;
mod repositories;
mod status;
mod tokens;
mod users;
mod webhooks;

use audit::*;
use cleanup::*;
use directories::*;
use repositories::*;
use status::*;
use tokens::*;
use users::*;
use webhooks::*;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/admin", web::get().to(status))
        .route("/admin/repositories", web::get().to(repositories))
        .route("/admin/repositories", web::post().to(create_repository))
        .route("/admin/repositories/{name}", web::get().to(edit_repository))
        .route("/admin/repositories/{name}", web::post().to(update_repository))
        .route("/admin/repositories/{name}/signing-key", web::post().to(rotate_key))
        .route("/admin/repositories/{name}/signing-keys", web::post().to(add_key))
        .route("/admin/repositories/{name}/signing-keys/{fingerprint}/retire", web::post().to(retire_key))
        .route("/admin/repositories/{name}/rebuild", web::post().to(rebuild_repository))
        .route("/admin/repositories/{name}/snapshots", web::post().to(create_snapshot))
        .route("/admin/repositories/{name}/snapshots/{snapshot}/delete", web::post().to(delete_snapshot))
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
        .route("/admin/webhooks", web::get().to(webhooks))
        .route("/admin/webhooks", web::post().to(create_webhook))
        .route("/admin/webhooks/{name}", web::get().to(webhook))
        .route("/admin/webhooks/{name}", web::post().to(update_webhook))
        .route("/admin/webhooks/{name}/test", web::post().to(test_webhook))
        .route("/admin/webhooks/{name}/delete", web::post().to(delete_webhook))
        .route("/admin/cleanup", web::get().to(cleanup))
        .route("/admin/cleanup", web::post().to(create_policy))
        .route("/admin/cleanup/{name}", web::get().to(policy))
        .route("/admin/cleanup/{name}", web::post().to(update_policy))
        .route("/admin/cleanup/{name}/run", web::post().to(run_policy))
        .route("/admin/cleanup/{name}/delete", web::post().to(delete_policy))
        .route("/admin/directories", web::get().to(directories))
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
        ("/admin/webhooks", "Webhooks"),
        ("/admin/directories", "Sign-in sources"),
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

/// A delete's form: its token and the ticked confirmation.
#[derive(Deserialize)]
pub struct Confirm {
    csrf: Option<String>,
    confirm: Option<String>,
}

impl Confirm {
    /// The delete's refusal when its box was not ticked.
    fn unticked(&self) -> Option<ApiError> {
        (self.confirm.as_deref() != Some("yes")).then(|| ApiError::bad_request("Tick the box to confirm the delete."))
    }
}

pub(super) fn field(id: &str, label: &str, value: &str, hint: &str) -> Markup {
    html! {
        div.field {
            label for=(id) { (label) }
            input id=(id) name=(id) value=(value) aria-describedby=[(!hint.is_empty()).then(|| format!("{id}-hint"))];
            @if !hint.is_empty() { span.hint id=(format!("{id}-hint")) { (hint) } }
        }
    }
}

/// A field of several lines (a key, one entry per line).
pub(super) fn lines(id: &str, label: &str, value: &str, hint: &str) -> Markup {
    html! {
        div.field {
            label for=(id) { (label) }
            textarea id=(id) name=(id) rows="4" spellcheck="false" aria-describedby=[(!hint.is_empty()).then(|| format!("{id}-hint"))] { (value) }
            @if !hint.is_empty() { span.hint id=(format!("{id}-hint")) { (hint) } }
        }
    }
}

pub(super) fn select(id: &str, label: &str, options: &[(&str, &str)], current: &str) -> Markup {
    html! {
        div.field {
            label for=(id) { (label) }
            select id=(id) name=(id) {
                @for (v, l) in options { option value=(v) selected[*v == current] { (l) } }
            }
        }
    }
}
