//! The web UI at `/`: server-rendered pages over the same services and the same authorization
//! decision as the API (a page shows what its viewer may read; every action checks its privilege
//! on the server). Browsing needs no JavaScript; the little there is (copy buttons) and the
//! style sheet are embedded in the binary.
//!
//! A viewer is signed in by a session cookie (`packyard_session`: HttpOnly, SameSite=Lax,
//! Secure over https) holding a session token of its own kind — accepted here only, never as an
//! API token. Every form carries a CSRF token bound to the session (or, before sign-in, to the
//! `packyard_csrf` cookie). Pages send a strict Content-Security-Policy of their own; files
//! under `/repository/` are sandboxed (`repository::sandbox`), so an uploaded page can neither
//! run nor read the session.

use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest, HttpResponse, HttpResponseBuilder, ResponseError};
use hmac::{Hmac, Mac};
use maud::{html, Markup, DOCTYPE};
use packyard_core::security::service::Credentials;
use packyard_core::services::Services;
use sha2::Sha256;

use crate::auth::Caller;
use crate::error::ApiError;

mod admin;
mod assets;
mod browse;
mod component;
pub(crate) mod files;
mod search;
mod session;
mod setup;

pub fn configure(cfg: &mut web::ServiceConfig) {
    // A form may carry keys (an upstream keyring, a private key to import): more than actix's
    // default 16 KiB.
    cfg.app_data(web::FormConfig::default().limit(1 << 20));
    cfg.route("/", web::get().to(browse::repositories))
        .route("/signin", web::get().to(session::signin_form))
        .route("/signin", web::post().to(session::signin))
        .route("/signout", web::post().to(session::signout))
        .route("/signin/oidc", web::get().to(session::oidc_start))
        .route("/signin/oidc/callback", web::get().to(session::oidc_callback))
        .route("/search", web::get().to(search::search))
        .route("/browse/{name}", web::get().to(browse::repository))
        .route("/browse/{name}/files", web::get().to(files::root))
        .route("/browse/{name}/files/{path:.*}", web::get().to(files::below))
        .route("/component/{id}", web::get().to(component::show))
        .route("/component/{id}/delete", web::get().to(component::confirm_delete))
        .route("/component/{id}/delete", web::post().to(component::delete))
        .route("/static/{file}", web::get().to(assets::serve))
        .configure(admin::configure);
}

/// The policy of every UI page: its own scripts and styles only, no inline code, no framing,
/// forms to this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub const SESSION_COOKIE: &str = "packyard_session";
pub const CSRF_COOKIE: &str = "packyard_csrf";

pub use crate::frontage::Base;

/// The path the UI's cookies are scoped to.
fn cookie_path(base: &Base) -> String {
    format!("{}/", base.prefix)
}

/// Who looks at a page: the caller as the services decide it, where the page lives, and what
/// the forms must carry.
pub struct Viewer {
    pub caller: Caller,
    pub base: Base,
    /// The cookie of a signed-in viewer.
    session: Option<String>,
    /// What the CSRF token is bound to: the session's token id, else the `packyard_csrf` cookie.
    anchor: String,
    /// Cookies to send with the page: a new CSRF anchor, a session that ended.
    cookies: Vec<Cookie<'static>>,
    secret: Arc<str>,
    /// The single sign-on button's label, when an OIDC provider is configured.
    sso: Option<String>,
}

impl Viewer {
    pub fn signed_in(&self) -> bool {
        self.session.is_some() && !self.caller.principal.is_anonymous()
    }

    pub fn is_admin(&self) -> bool {
        self.signed_in() && self.caller.principal.is_admin()
    }

    /// The CSRF token of this viewer's forms.
    pub fn csrf(&self) -> String {
        csrf_token(&self.secret, &self.anchor)
    }

    /// The hidden field every form carries.
    pub fn csrf_field(&self) -> Markup {
        html! { input type="hidden" name="csrf" value=(self.csrf()); }
    }

    /// Refuses a form whose CSRF token is not this viewer's.
    pub fn check_csrf(&self, presented: Option<&str>) -> Result<(), UiError> {
        let Some(presented) = presented.filter(|p| !p.is_empty()) else {
            return Err(UiError::new(
                StatusCode::FORBIDDEN,
                "The form was sent without its security token. Reload the page and send it again.",
            ));
        };
        if packyard_core::security::tokens::digest_eq(&self.csrf(), presented) {
            Ok(())
        } else {
            Err(UiError::new(
                StatusCode::FORBIDDEN,
                "The form's security token is stale or belongs to another session. Reload the page and send it again.",
            ))
        }
    }

    /// A whole page: the layout around `body`, with the UI's headers.
    pub fn page(&self, title: &str, body: Markup) -> HttpResponse {
        self.page_with(StatusCode::OK, title, body)
    }

    pub fn page_with(&self, status: StatusCode, title: &str, body: Markup) -> HttpResponse {
        let markup = layout(Some(self), title, body);
        let mut res = HttpResponse::build(status);
        for c in &self.cookies {
            res.cookie(c.clone());
        }
        respond(res, markup)
    }

    /// A redirect after a form (303 See Other), to a page of this server.
    pub fn redirect(&self, path: &str) -> HttpResponse {
        let mut res = HttpResponse::SeeOther();
        for c in &self.cookies {
            res.cookie(c.clone());
        }
        headers(&mut res);
        res.insert_header((header::LOCATION, self.base.link(path))).finish()
    }

    fn cookie(&self, name: &'static str, value: String) -> Cookie<'static> {
        let mut c = Cookie::new(name, value);
        c.set_path(cookie_path(&self.base));
        c.set_http_only(true);
        c.set_same_site(SameSite::Lax);
        c.set_secure(self.base.https);
        c
    }
}

fn csrf_token(secret: &str, anchor: &str) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else { return String::new() };
    mac.update(b"packyard-ui-csrf\0");
    mac.update(anchor.as_bytes());
    hex::encode(&mac.finalize().into_bytes()[..20])
}

fn services(req: &HttpRequest) -> Result<web::Data<Services>, UiError> {
    req.app_data::<web::Data<Services>>()
        .cloned()
        .ok_or_else(|| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Services missing from app data"))
}

async fn viewer(req: &HttpRequest) -> Result<Viewer, UiError> {
    let services = services(req)?;
    let base = Base::of(req);
    let addr = crate::frontage::client_addr(req);
    let mut cookies = Vec::new();
    let mut session = req.cookie(SESSION_COOKIE).map(|c| c.value().to_string()).filter(|v| !v.is_empty());
    let mut principal = None;
    if let Some(token) = &session {
        match services.security.principal(Some(&Credentials::Session(token.clone())), addr).await {
            Ok(p) => principal = Some(p),
            Err(packyard_core::security::service::AuthFailure::Db(e)) => return Err(ApiError::from(e).into()),
            // Expired or ended elsewhere: the viewer is anonymous again, and the cookie goes.
            Err(_) => session = None,
        }
    }
    let principal = match principal {
        Some(p) => p,
        None => services.security.principal(None, addr).await.map_err(ApiError::from)?,
    };
    let caller = Caller { principal, addr };
    req.extensions_mut().insert(caller.clone());
    let secret = services.secret.clone();
    let sso = services.security.oidc.as_ref().map(|o| o.button_label().to_string());
    let mut v = Viewer { caller, base, session: None, anchor: String::new(), cookies: Vec::new(), secret, sso };
    if req.cookie(SESSION_COOKIE).is_some() && session.is_none() {
        let mut gone = v.cookie(SESSION_COOKIE, String::new());
        gone.make_removal();
        cookies.push(gone);
    }
    v.anchor = match (&session, req.cookie(CSRF_COOKIE)) {
        (Some(token), _) => {
            packyard_core::security::tokens::parse(token).map(|(id, _)| id.to_string()).unwrap_or_default()
        }
        (None, Some(c)) if c.value().len() == 32 => c.value().to_string(),
        (None, _) => {
            let fresh = hex::encode(rand::random::<[u8; 16]>());
            cookies.push(v.cookie(CSRF_COOKIE, fresh.clone()));
            fresh
        }
    };
    v.session = session;
    v.cookies = cookies;
    Ok(v)
}

impl FromRequest for Viewer {
    type Error = UiError;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self, UiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { viewer(&req).await })
    }
}

/// What every UI response carries.
fn headers(res: &mut HttpResponseBuilder) {
    res.insert_header((header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .insert_header((header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")))
        .insert_header((header::REFERRER_POLICY, HeaderValue::from_static("same-origin")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")));
}

fn respond(mut res: HttpResponseBuilder, markup: Markup) -> HttpResponse {
    headers(&mut res);
    res.content_type("text/html; charset=utf-8").body(markup.into_string())
}

fn layout(viewer: Option<&Viewer>, title: &str, body: Markup) -> Markup {
    let link = |p: &str| viewer.map_or_else(|| p.to_string(), |v| v.base.link(p));
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · Packyard" }
                link rel="stylesheet" href=(link(&assets::href("packyard.css")));
                link rel="icon" type="image/svg+xml" href=(link(&assets::href("packyard.svg")));
                script src=(link(&assets::href("packyard.js"))) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    nav aria-label="Main" {
                        a.brand href=(link("/")) { "Packyard" }
                        a href=(link("/")) { "Repositories" }
                        a href=(link("/search")) { "Search" }
                        @if viewer.is_some_and(Viewer::is_admin) {
                            a href=(link("/admin")) { "Administration" }
                        }
                        @if viewer.is_some_and(Viewer::signed_in) {
                            a href=(link("/admin/tokens")) { "My tokens" }
                        }
                    }
                    div.who {
                        @match viewer {
                            Some(v) if v.signed_in() => {
                                span.user { "Signed in as " strong { (v.caller.username()) } }
                                form.inline method="post" action=(v.base.link("/signout")) {
                                    (v.csrf_field())
                                    button.link type="submit" { "Sign out" }
                                }
                            }
                            Some(v) => { a.button href=(v.base.link("/signin")) { "Sign in" } }
                            None => {}
                        }
                    }
                }
                main #main tabindex="-1" {
                    (body)
                }
                footer.bottom {
                    "Packyard " (env!("CARGO_PKG_VERSION")) " · "
                    a href=(link("/api/v1/openapi.json")) { "Admin API" } " · "
                    a href=(link("/service/rest/v1/status")) { "Nexus REST API" }
                }
            }
        }
    }
}

/// A page that could not be shown: its status and a message a person can act on, as HTML.
#[derive(Debug)]
pub struct UiError {
    pub status: StatusCode,
    pub message: String,
}

impl UiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }
}

impl std::fmt::Display for UiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl From<ApiError> for UiError {
    fn from(e: ApiError) -> Self {
        Self { status: e.code.status(), message: e.message }
    }
}

impl From<packyard_core::admin::AdminError> for UiError {
    fn from(e: packyard_core::admin::AdminError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<packyard_store::db::DbError> for UiError {
    fn from(e: packyard_store::db::DbError) -> Self {
        ApiError::from(e).into()
    }
}

impl ResponseError for UiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let body = html! {
            h1 { (title) }
            p.error role="alert" { (self.message) }
            p { a href="/" { "Back to the repositories" } }
        };
        respond(HttpResponse::build(self.status), layout(None, title, body))
    }
}

/// `1.5 MiB`.
pub fn bytes(n: i64) -> String {
    packyard_model::quota::human(u64::try_from(n).unwrap_or(0))
}

/// A time as people read it, in UTC.
pub fn when(ms: i64) -> String {
    let s = packyard_model::time::rfc3339_ms(ms);
    // `2026-12-01T20:57:01.123Z` → `2026-12-01 20:57 UTC`
    match (s.get(..10), s.get(11..16)) {
        (Some(d), Some(t)) => format!("{d} {t} UTC"),
        _ => s,
    }
}

/// A `<time>` element with the exact instant in its attribute.
pub fn time(ms: i64) -> Markup {
    html! { time datetime=(packyard_model::time::rfc3339_ms(ms)) { (when(ms)) } }
}

/// An RFC 3339 instant, as the administration services give them, as people read it (the text
/// as it is when it is not one).
pub fn at(rfc3339: &str) -> Markup {
    match packyard_model::time::parse_rfc3339(rfc3339) {
        Some(ms) => time(ms),
        None => html! { (rfc3339) },
    }
}

/// `n` with its noun: "1 component", "2 components".
pub fn count(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A snippet to copy: a labelled block, with a copy button where scripts run.
pub fn snippet(label: &str, text: &str) -> Markup {
    html! {
        figure.snippet {
            figcaption { (label) }
            pre { code { (text) } }
            button.copy type="button" hidden data-copy=(text) { "Copy" }
        }
    }
}
