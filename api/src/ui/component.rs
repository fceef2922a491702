//! A component: its versions, its assets (size, SHA-256, stored when and by whom, last
//! downloaded, download count), what its metadata says it depends on, the client set-up to
//! install it — and, for those who may delete, a delete behind a confirmation page. Components
//! are named by the ids of Nexus's API, so a page's URL and the API's agree.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::catalogue::{AssetRow, ComponentRow, Pattern, Search, Sort};
use serde::Deserialize;

use super::{bytes, setup, time, UiError, Viewer};
use crate::nexus::catalogue::{component_by_id, delete_catalogued, encode_id, Kind};

/// Other versions listed on a component's page.
const VERSIONS: i64 = 50;

#[derive(Deserialize)]
pub struct Confirmed {
    csrf: Option<String>,
}

fn may_delete(viewer: &Viewer, services: &Services, owner: &Repository, c: (&ComponentRow, &[AssetRow])) -> bool {
    owner.repo_type != RepoType::Group
        && viewer.signed_in()
        && crate::nexus::catalogue::check_delete(services, &viewer.caller, owner, c).is_ok()
}

fn title(c: &ComponentRow) -> String {
    format!("{} {}", setup::display_name(c), c.version)
}

fn component_link(viewer: &Viewer, view: &Repository, c: &ComponentRow) -> String {
    viewer.base.link(&format!("/component/{}", encode_id(Kind::Component, view.id, c.id)))
}

fn crumbs(viewer: &Viewer, view: &Repository) -> Markup {
    html! {
        div.crumbs {
            a href=(viewer.base.link("/")) { "Repositories" } " / "
            a href=(viewer.base.link(&format!("/browse/{}", view.name))) { (view.name.as_str()) } " / "
        }
    }
}

pub async fn show(
    viewer: Viewer,
    services: web::Data<Services>,
    id: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    let (view, owner, c) = component_by_id(&services, &viewer.caller, &id).await?;
    let assets = services.db.catalogue_assets_of(&[c.id]).await?;
    // The package's versions as the repository serves them (a group: through its members).
    let scope = crate::nexus::catalogue::scope(&services, &viewer.caller, Some(view.name.as_str())).await?;
    let versions = services
        .db
        .catalogue_search(&Search {
            repositories: scope.searched(),
            group: Some(Pattern::Exact(c.namespace.clone())),
            name: Some(Pattern::Exact(c.name.clone())),
            sort: Sort::Version,
            descending: true,
            limit: VERSIONS,
            ..Search::default()
        })
        .await?;
    let versions = crate::nexus::catalogue::visible_rows(&viewer.caller, &services, &scope, versions).await?;
    let shown: Vec<AssetRow> = assets
        .iter()
        .filter(|a| crate::content::allows_asset(&viewer.caller, &services, &view, Action::Read, &c, a))
        .cloned()
        .collect();
    let details =
        packyard_formats::registry().get(owner.format).catalogue().details(&services, &owner, &c, &assets).await;
    let snippets = setup::component(&services, &viewer.base, &view, &c).await;
    let deletable = may_delete(&viewer, &services, &owner, (&c, &assets));
    let body = html! {
        (crumbs(&viewer, &view))
        h1 { (title(&c)) }
        div.grid {
            section.panel aria-labelledby="facts" {
                h2 #facts { "About" }
                dl.facts {
                    dt { "Repository" } dd { a href=(viewer.base.link(&format!("/browse/{}", view.name))) { (view.name.as_str()) }
                        @if owner.id != view.id { " (from " (owner.name.as_str()) ")" } }
                    dt { "Format" } dd { (c.format) }
                    dt { "Group" } dd { @if c.namespace.is_empty() { span.muted { "none" } } @else { (c.namespace) } }
                    dt { "Name" } dd { (c.name) }
                    dt { "Version" } dd { (c.version) }
                    @if c.component_key != c.name { dt { "Key" } dd { code { (c.component_key) } } }
                    dt { "Stored" } dd { (time(c.created_at)) @if !c.uploaded_by.is_empty() { " by " (c.uploaded_by) } }
                    @for (k, v) in &details.facts { dt { (k) } dd { (v) } }
                }
                @if deletable {
                    div.actions {
                        a.button.secondary href=(viewer.base.link(&format!("/component/{id}/delete"))) { "Delete…" }
                    }
                }
            }
            section.panel aria-labelledby="setup" {
                h2 #setup { "Client set-up" }
                @for s in &snippets { (super::snippet(&s.label, &s.text)) }
            }
        }
        h2 { "Dependencies" }
        @if details.dependencies.is_empty() {
            p.muted { "Its metadata names none." }
        } @else {
            ul.plain { @for d in &details.dependencies { li { code { (d) } } } }
        }
        h2 { "Assets" }
        (asset_table(&viewer, &view, &shown))
        h2 { "Versions" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Version" } th scope="col" { "Stored" } th scope="col" { "From" } } }
            tbody {
                @for v in &versions {
                    tr {
                        td { @if v.id == c.id { strong { (v.version) } " (this one)" } @else { a href=(component_link(&viewer, &view, v)) { (v.version) } } }
                        td { (time(v.created_at)) }
                        td { (scope.by_id.get(&v.repository_id).map_or("", |r| r.name.as_str())) }
                    }
                }
            }
        } }
    };
    Ok(viewer.page(&title(&c), body))
}

fn asset_table(viewer: &Viewer, view: &Repository, assets: &[AssetRow]) -> Markup {
    html! {
        div.table-wrap { table {
            thead { tr {
                th scope="col" { "Path" } th.num scope="col" { "Size" } th scope="col" { "SHA-256" }
                th scope="col" { "Stored" } th scope="col" { "Last downloaded" } th.num scope="col" { "Downloads" }
            } }
            tbody {
                @for a in assets {
                    tr {
                        td.wrap { a href=(viewer.base.link(&format!("/repository/{}/{}", view.name, a.path))) { (a.path) } }
                        td.num { (bytes(a.size)) }
                        td.sha { code.hash { (a.sha256) } }
                        td { (time(a.created_at)) @if !a.uploaded_by.is_empty() { br; span.muted { "by " (a.uploaded_by) } } }
                        td { @match a.last_downloaded { Some(t) => (time(t)), None => span.muted { "never" } } }
                        td.num { (a.download_count) }
                    }
                }
            }
        } }
    }
}

pub async fn confirm_delete(
    viewer: Viewer,
    services: web::Data<Services>,
    id: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    let (view, owner, c) = component_by_id(&services, &viewer.caller, &id).await?;
    let assets = services.db.catalogue_assets_of(&[c.id]).await?;
    if !may_delete(&viewer, &services, &owner, (&c, &assets)) {
        return Err(UiError::forbidden(format!(
            "{} may not delete from repository {}.",
            viewer.caller.username(),
            owner.name
        )));
    }
    let assets = services.db.catalogue_assets_of(&[c.id]).await?;
    let total: i64 = assets.iter().map(|a| a.size).sum();
    let what = match owner.repo_type {
        RepoType::Proxy => "its cached copy is removed; the next request fetches it from the upstream again",
        _ => "its files are removed and the repository's indexes are published without it",
    };
    let body = html! {
        (crumbs(&viewer, &view))
        h1 { "Delete " (title(&c)) "?" }
        p { "From repository " strong { (owner.name.as_str()) } ": " (what) ". " (assets.len()) " files, " (bytes(total)) ". This cannot be undone." }
        form method="post" action=(viewer.base.link(&format!("/component/{id}/delete"))) {
            (viewer.csrf_field())
            div.actions {
                button.danger type="submit" { "Delete " (title(&c)) }
                a href=(component_link(&viewer, &view, &c)) { "Cancel" }
            }
        }
    };
    Ok(viewer.page(&format!("Delete {}", title(&c)), body))
}

pub async fn delete(
    viewer: Viewer,
    services: web::Data<Services>,
    id: web::Path<String>,
    f: web::Form<Confirmed>,
) -> Result<HttpResponse, UiError> {
    viewer.check_csrf(f.csrf.as_deref())?;
    let (view, owner, c) = component_by_id(&services, &viewer.caller, &id).await?;
    if !viewer.signed_in() {
        return Err(UiError::new(StatusCode::UNAUTHORIZED, "Sign in to delete."));
    }
    // The same delete as Nexus's API: the privilege checked, the format's own delete, the audit
    // entry, answered once the indexes without it are published.
    delete_catalogued(&services, &viewer.caller, &owner, &c, None).await?;
    let body = html! {
        (crumbs(&viewer, &view))
        h1 { "Deleted" }
        p.notice role="status" { (title(&c)) " is no longer in " (owner.name.as_str()) "." }
        p { a href=(viewer.base.link(&format!("/browse/{}", view.name))) { "Back to " (view.name.as_str()) } }
    };
    Ok(viewer.page("Deleted", body))
}
