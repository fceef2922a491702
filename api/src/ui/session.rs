//! Sign in and out. Signing in checks the password as a Basic login does (the same login
//! throttle) and starts a session token of its own kind; signing out ends it on every replica.

use std::time::Duration;

use actix_web::cookie::Cookie;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::security::service::AuthFailure;
use packyard_core::services::Services;
use serde::Deserialize;

use super::{UiError, Viewer, SESSION_COOKIE};

#[derive(Deserialize)]
pub struct Next {
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct SignIn {
    csrf: Option<String>,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct SignOut {
    csrf: Option<String>,
}

/// Where to go after signing in: a page of this UI, never another site.
fn local(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') && !n.contains("://") => {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

fn form(viewer: &Viewer, username: &str, next: &str, error: Option<&str>, status: StatusCode) -> HttpResponse {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(e) = error { p.error role="alert" { (e) } }
        form.stack method="post" action=(viewer.base.link("/signin")) {
            (viewer.csrf_field())
            input type="hidden" name="next" value=(next);
            div.field {
                label for="username" { "Username" }
                input #username name="username" autocomplete="username" required value=(username) autofocus;
            }
            div.field {
                label for="password" { "Password" }
                input #password name="password" type="password" autocomplete="current-password" required;
            }
            div { button type="submit" { "Sign in" } }
        }
        p.muted { "Without signing in you see what anonymous readers may read." }
    };
    viewer.page_with(status, "Sign in", body)
}

pub async fn signin_form(viewer: Viewer, q: web::Query<Next>) -> HttpResponse {
    form(&viewer, "", &local(q.next.as_deref()), None, StatusCode::OK)
}

pub async fn signin(
    viewer: Viewer,
    services: web::Data<Services>,
    f: web::Form<SignIn>,
) -> Result<HttpResponse, UiError> {
    viewer.check_csrf(f.csrf.as_deref())?;
    let next = local(f.next.as_deref());
    let ttl = Duration::from_secs(services.config.security.session_ttl_secs);
    match services.security.start_session(&f.username, &f.password, viewer.caller.addr, ttl).await {
        Ok((token, _)) => {
            let mut cookie = viewer.cookie(SESSION_COOKIE, token);
            cookie.set_max_age(actix_web::cookie::time::Duration::seconds(ttl.as_secs() as i64));
            let mut res = viewer.redirect(&next);
            res.add_cookie(&cookie).map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
            tracing::info!(user = %f.username, "signed in to the web UI");
            Ok(res)
        }
        Err(AuthFailure::Invalid(m)) => {
            Ok(form(&viewer, &f.username, &next, Some(&format!("{}.", capitalised(m))), StatusCode::UNAUTHORIZED))
        }
        Err(e @ AuthFailure::Throttled(_)) => {
            Ok(form(&viewer, &f.username, &next, Some(&capitalised(&e.to_string())), StatusCode::TOO_MANY_REQUESTS))
        }
        Err(e @ AuthFailure::Unavailable(_)) => Ok(form(
            &viewer,
            &f.username,
            &next,
            Some(&format!("{}.", capitalised(&e.to_string()))),
            StatusCode::SERVICE_UNAVAILABLE,
        )),
        Err(AuthFailure::Db(e)) => Err(e.into()),
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

pub async fn signout(
    viewer: Viewer,
    services: web::Data<Services>,
    req: actix_web::HttpRequest,
    f: web::Form<SignOut>,
) -> Result<HttpResponse, UiError> {
    viewer.check_csrf(f.csrf.as_deref())?;
    if let Some(c) = req.cookie(SESSION_COOKIE) {
        services.security.end_session(c.value()).await?;
    }
    services.changed(packyard_core::events::Changed::Security);
    let mut gone: Cookie<'static> = viewer.cookie(SESSION_COOKIE, String::new());
    gone.make_removal();
    let mut res = viewer.redirect("/");
    res.add_cookie(&gone).map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(res)
}
