//! Administration pages: system status, repositories, users, roles, tokens, cleanup policies
//! and the audit log — each calling what the admin API calls, each action checked on the server.

use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;

use super::{UiError, Viewer};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/admin", web::get().to(status));
}

/// Refuses a viewer without the global admin privilege: 401 before sign-in, 403 after.
pub(super) fn require_admin(viewer: &Viewer) -> Result<(), UiError> {
    if !viewer.signed_in() {
        return Err(UiError::new(
            actix_web::http::StatusCode::UNAUTHORIZED,
            "Sign in as an administrator to see this page.",
        ));
    }
    if !viewer.is_admin() {
        return Err(UiError::forbidden(format!("{} may not use the administration pages.", viewer.caller.username())));
    }
    Ok(())
}

async fn status(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    require_admin(&viewer)?;
    let ready = services.readiness().await;
    let body = html! {
        h1 { "Administration" }
        h2 { "System status" }
        @match &ready {
            Ok(()) => p.notice role="status" { "Database and blob store reachable, migrations applied." },
            Err(problems) => div.error role="alert" { ul { @for p in problems { li { (p) } } } },
        }
    };
    Ok(viewer.page("Administration", body))
}
