//! Sign-in sources: the LDAP directories and the OpenID Connect provider, read-only — what
//! `packyard.toml` says of each and whether each answers now (asked when the page is shown).

use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;

use super::*;

fn answered(answer: &Result<std::time::Duration, String>) -> maud::Markup {
    html! {
        @match answer {
            Ok(took) => { span.badge.state-ok { "answers" } " " span.muted { "in " (took.as_millis()) " ms" } }
            Err(why) => { span.badge.state-bad { "does not answer" } " " (why) }
        }
    }
}

pub(super) async fn directories(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    admin_of(&viewer)?;
    let security = &services.security;
    let (ldap, oidc) = tokio::join!(security.directories.health(), async {
        match &security.oidc {
            Some(o) => Some((o.described(), o.health().await)),
            None => None,
        }
    });
    let body = html! {
        h1 { "Sign-in sources" }
        (admin_nav(&viewer, "/admin/directories"))
        p.muted { "As " code { "packyard.toml" } " configures them (" code { "[[security.ldap]]" } ", " code { "[security.oidc]" } "); each is asked now, when the page is shown. Local users sign in with their password in any case." }
        h2 { "LDAP directories" }
        @if ldap.is_empty() {
            p { "None configured: only local users and API tokens sign in." }
        } @else {
            p.muted { "Asked in this order; the first that knows a name decides." }
            @for d in &ldap {
                section.panel {
                    h3 { (d.name) " " span.badge { "ldap:" (d.name) } }
                    dl.facts {
                        dt { "Now" } dd { (answered(&d.answer)) }
                        dt { "URL" } dd { code { (d.url) } }
                        dt { "Transport" } dd { (d.transport) }
                        dt { "Users" } dd { (d.mode) }
                        dt { "Groups" } dd { (d.groups) ", " (super::super::count(d.mapped_groups as i64, "group maps", "groups map")) " to roles" }
                        dt { "Default roles" } dd { @if d.default_roles.is_empty() { "none" } @else { (d.default_roles.join(", ")) } }
                    }
                }
            }
        }
        h2 { "Single sign-on (OpenID Connect)" }
        @match &oidc {
            None => { p { "Not configured: the sign-in page offers the password form only." } }
            Some((facts, answer)) => { section.panel {
                dl.facts {
                    dt { "Now" } dd { (answered(answer)) }
                    @for (k, v) in facts { dt { (k) } dd { code { (v) } } }
                    dt { "Callback" } dd { code { (viewer.base.url("/signin/oidc/callback")) } }
                }
            } }
        }
    };
    Ok(viewer.page("Sign-in sources", body))
}
