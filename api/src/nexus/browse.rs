//! Nexus's HTML listing of a repository, `/service/rest/repository/browse/<name>/<path>/`: an
//! "Index of" page per folder — its folders, then its files with their size and time, each
//! linking to where clients download it (`/repository/<name>/<path>`) — made from the same
//! listing as the web UI's file tree (`crate::ui::files::listing`). For callers who may read the
//! repository (credentials as for the repository itself); a folder that does not exist is a 404.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, DOCTYPE};
use packyard_core::security::Action;
use packyard_core::services::Services;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::ui::files::{linkable, listing, Entry};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/service/rest/repository/browse/{name}", web::get().to(slash))
        .route("/service/rest/repository/browse/{name}/{path:.*}", web::get().to(page));
}

/// Without the trailing slash: to the folder's page (relative links need it), at the address
/// the client uses (`server.public_url`'s prefix kept).
async fn slash(req: HttpRequest) -> HttpResponse {
    let to = crate::frontage::Base::of(&req).url(&format!("{}/", req.path()));
    HttpResponse::MovedPermanently().insert_header((header::LOCATION, to)).finish()
}

async fn page(
    req: HttpRequest,
    services: web::Data<Services>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (name, path) = path.into_inner();
    let Some(repo) = services.security.repository(&name).await? else {
        return Err(ApiError::not_found(format!("repository {name} not found")));
    };
    if !super::catalogue::readable(&caller, &services, &repo) {
        return Err(if caller.principal.is_anonymous() {
            ApiError::unauthorized(format!("authentication required to read repository {name}"))
        } else {
            ApiError::not_found(format!("repository {name} not found"))
        });
    }
    if !path.is_empty() && !path.ends_with('/') {
        return Ok(slash(req).await);
    }
    if path.split('/').any(|s| s.starts_with('.')) {
        return Err(ApiError::not_found(format!("no folder /{path} in repository {name}")));
    }
    let keep = |p: &str| crate::content::allows_path(&caller, &services, &repo, Action::Read, p, None);
    let (entries, truncated) = listing(&services, repo.id, &path, &keep).await?;
    if entries.is_empty() && !path.is_empty() {
        return Err(ApiError::not_found(format!("no folder /{path} in repository {name}")));
    }
    let download = crate::frontage::Base::of(&req).url(&format!("/repository/{name}/"));
    let title = format!("Index of /{path}");
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (title) } }
            body {
                h1 { (title) }
                @if truncated {
                    p { "More than the listing's limit lies below this folder: a folder or file may be missing; open a folder to narrow it down." }
                }
                table cellspacing="10" {
                    tr { th align="left" { "Name" } th { "Last Modified" } th { "Size" } th { "Description" } }
                    @if !path.is_empty() {
                        tr { td { a href="../" { "Parent Directory" } } }
                    }
                    @for (entry, e) in &entries {
                        @match e {
                            Entry::Folder { .. } => tr {
                                td { a href=(format!("./{}", linkable(entry))) { (entry.trim_end_matches('/')) } }
                                td { } td align="right" { } td { }
                            },
                            Entry::File { size, stored, published, .. } => tr {
                                td { a href=(format!("{download}{}", linkable(&format!("{path}{entry}")))) { (entry) } }
                                td { @if let Some(t) = stored { (packyard_model::time::rfc3339_ms(*t)) } }
                                td align="right" { (size) }
                                td { @if *published { "published index" } }
                            },
                        }
                    }
                }
            }
        }
    };
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, "default-src 'none'; frame-ancestors 'none'"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(body.into_string()))
}
