//! Sign in and out. Signing in checks the password as a Basic login does (the same login
//! throttle) and starts a session token of its own kind; signing out ends it on every replica.

use std::time::Duration;

use actix_web::cookie::Cookie;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::security::oidc::OidcError;
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

/// Where to go after signing in: a page of this UI, never another site. Browsers drop tabs and
/// newlines from a URL and read `\` as `/`, so `/\t/evil.example` would be `//evil.example`:
/// a path with any control character, space or backslash is refused, as is a long one (it
/// travels in a cookie during single sign-on).
fn local(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.len() <= 1024
                && !n.contains("://")
                && !n.chars().any(|c| c.is_control() || c.is_whitespace() || c == '\\') =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

fn form(viewer: &Viewer, username: &str, next: &str, error: Option<&str>, status: StatusCode) -> HttpResponse {
    let sso = viewer.sso.as_deref();
    let body = html! {
        h1 { "Sign in" }
        @if let Some(e) = error { p.error role="alert" { (e) } }
        @if let Some(label) = sso {
            p { a.button #sso href=(viewer.base.link(&format!("/signin/oidc?next={}", query_value(next)))) { (label) } }
            p.muted { "Or with a Packyard or directory user:" }
        }
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

/// A value for a URL's query string.
fn query_value(v: &str) -> String {
    url::form_urlencoded::byte_serialize(v.as_bytes()).collect()
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
    // A cookie whose secret is not its session's ends nothing (it only loses the cookie).
    if let Some(c) = req.cookie(SESSION_COOKIE) {
        if services.security.end_session(c.value()).await? {
            services.changed(packyard_core::events::Changed::Security);
        }
    }
    let mut gone: Cookie<'static> = viewer.cookie(SESSION_COOKIE, String::new());
    gone.make_removal();
    let mut res = viewer.redirect("/");
    res.add_cookie(&gone).map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(res)
}

// --- single sign-on through the OIDC provider -------------------------------------------------

/// The cookie that carries a sign-in's state, PKCE verifier and nonce to the callback.
const OIDC_COOKIE: &str = "packyard_oidc";
/// How long a sign-in at the provider may take.
const OIDC_PENDING_SECS: i64 = 600;

/// What the callback must find again: signed by the server, kept by the browser.
#[derive(serde::Serialize, Deserialize)]
struct Pending {
    state: String,
    verifier: String,
    nonce: String,
    next: String,
    expires_at: i64,
}

fn pending_mac(secret: &str, payload: &str) -> String {
    use hmac::{Hmac, Mac};
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()) else { return String::new() };
    mac.update(b"packyard-oidc-pending\0");
    mac.update(payload.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn seal(secret: &str, p: &Pending) -> String {
    use base64::Engine;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(p).unwrap_or_default());
    let mac = pending_mac(secret, &payload);
    format!("{payload}.{mac}")
}

/// The pending sign-in, if the cookie is this server's, unchanged and not expired.
fn unseal(secret: &str, value: &str) -> Option<Pending> {
    use base64::Engine;
    let (payload, mac) = value.split_once('.')?;
    if !packyard_core::security::tokens::digest_eq(&pending_mac(secret, payload), mac) {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    let p: Pending = serde_json::from_slice(&bytes).ok()?;
    (p.expires_at > packyard_store::db::now_ms()).then_some(p)
}

fn callback_url(viewer: &Viewer) -> String {
    viewer.base.url("/signin/oidc/callback")
}

fn sso_refused(viewer: &Viewer, next: &str, e: &OidcError) -> HttpResponse {
    let status = match e {
        OidcError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        OidcError::Refused(_) => StatusCode::UNAUTHORIZED,
    };
    form(viewer, "", next, Some(&format!("{}.", capitalised(&e.to_string()))), status)
}

/// `GET /signin/oidc`: off to the provider, with the sign-in's state in a signed cookie.
pub async fn oidc_start(
    viewer: Viewer,
    services: web::Data<Services>,
    q: web::Query<Next>,
) -> Result<HttpResponse, UiError> {
    let Some(oidc) = &services.security.oidc else {
        return Err(UiError::new(StatusCode::NOT_FOUND, "Single sign-on is not configured (security.oidc)."));
    };
    let next = local(q.next.as_deref());
    let started = match oidc.start(&callback_url(&viewer)).await {
        Ok(s) => s,
        Err(e) => return Ok(sso_refused(&viewer, &next, &e)),
    };
    let pending = Pending {
        state: started.state,
        verifier: started.pkce_verifier,
        nonce: started.nonce,
        next,
        expires_at: packyard_store::db::now_ms() + OIDC_PENDING_SECS * 1000,
    };
    let mut cookie = viewer.cookie(OIDC_COOKIE, seal(&viewer.secret, &pending));
    cookie.set_max_age(actix_web::cookie::time::Duration::seconds(OIDC_PENDING_SECS));
    let mut res = HttpResponse::SeeOther();
    for c in &viewer.cookies {
        res.cookie(c.clone());
    }
    super::headers(&mut res);
    Ok(res.cookie(cookie).insert_header((actix_web::http::header::LOCATION, started.url)).finish())
}

#[derive(Deserialize)]
pub struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /signin/oidc/callback`: the provider sends the browser back with a code (or an
/// error); the code becomes a checked ID token, the ID token a session.
pub async fn oidc_callback(
    viewer: Viewer,
    services: web::Data<Services>,
    req: actix_web::HttpRequest,
    q: web::Query<Callback>,
) -> Result<HttpResponse, UiError> {
    let Some(oidc) = &services.security.oidc else {
        return Err(UiError::new(StatusCode::NOT_FOUND, "Single sign-on is not configured (security.oidc)."));
    };
    let mut gone: Cookie<'static> = viewer.cookie(OIDC_COOKIE, String::new());
    gone.make_removal();
    let with_gone = |mut res: HttpResponse| -> Result<HttpResponse, UiError> {
        res.add_cookie(&gone).map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        Ok(res)
    };
    let pending = req.cookie(OIDC_COOKIE).and_then(|c| unseal(&viewer.secret, c.value()));
    let Some(pending) = pending else {
        let msg = "The sign-in did not start here or took longer than 10 minutes; sign in again.";
        return with_gone(form(&viewer, "", "/", Some(msg), StatusCode::BAD_REQUEST));
    };
    let state_ok = q.state.as_deref().is_some_and(|s| packyard_core::security::tokens::digest_eq(s, &pending.state));
    if !state_ok {
        let msg = "The provider's answer does not belong to this sign-in; sign in again.";
        return with_gone(form(&viewer, "", &pending.next, Some(msg), StatusCode::BAD_REQUEST));
    }
    if let Some(error) = &q.error {
        let detail = q.error_description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
        let msg = format!("The identity provider did not sign you in: {error}{detail}.");
        return with_gone(form(&viewer, "", &pending.next, Some(&msg), StatusCode::UNAUTHORIZED));
    }
    let Some(code) = q.code.as_deref().filter(|c| !c.is_empty()) else {
        let msg = "The provider's answer carries no authorization code; sign in again.";
        return with_gone(form(&viewer, "", &pending.next, Some(msg), StatusCode::BAD_REQUEST));
    };
    let identity = match oidc.finish(&callback_url(&viewer), code, &pending.verifier, &pending.nonce).await {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "OIDC sign-in refused");
            return with_gone(sso_refused(&viewer, &pending.next, &e));
        }
    };
    let ttl = Duration::from_secs(services.config.security.session_ttl_secs);
    match services.security.start_external_session(&identity, ttl).await {
        Ok(token) => {
            let mut cookie = viewer.cookie(SESSION_COOKIE, token);
            cookie.set_max_age(actix_web::cookie::time::Duration::seconds(ttl.as_secs() as i64));
            let mut res = viewer.redirect(&pending.next);
            res.add_cookie(&cookie).map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
            tracing::info!(user = %identity.username, roles = ?identity.roles, "signed in to the web UI through OIDC");
            with_gone(res)
        }
        Err(AuthFailure::Db(e)) => Err(e.into()),
        Err(e) => {
            let msg = format!("{}.", capitalised(&e.to_string()));
            with_gone(form(&viewer, &identity.username, &pending.next, Some(&msg), StatusCode::UNAUTHORIZED))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::local;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(local(Some("/search?q=zlib")), "/search?q=zlib");
        assert_eq!(local(Some("/admin/users")), "/admin/users");
        for bad in [
            "//evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\\evil.example",
            "https://evil.example",
            "/x?u=https://evil.example",
            "evil.example",
            " /search",
        ] {
            assert_eq!(local(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local(Some(&format!("/{}", "a".repeat(2000)))), "/");
        assert_eq!(local(None), "/");
    }
}
