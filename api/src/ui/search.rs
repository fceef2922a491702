//! Search across the repositories the viewer may read — by keyword, name, version, format and
//! repository — as Nexus's `search` API finds them (the same scope, the same catalogue search),
//! in pages.

use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;
use packyard_model::repos::Format;
use packyard_store::db::catalogue::{Pattern, Search, Sort};
use serde::Deserialize;

use super::browse::urlencode;
use super::{setup, UiError, Viewer};
use crate::nexus::catalogue::{decode_token, encode_id, encode_token, scope, Kind};

const PAGE: i64 = 50;

#[derive(Deserialize, Default)]
pub struct SearchQuery {
    q: Option<String>,
    name: Option<String>,
    version: Option<String>,
    format: Option<String>,
    repository: Option<String>,
    after: Option<String>,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

pub async fn search(
    viewer: Viewer,
    services: web::Data<Services>,
    q: web::Query<SearchQuery>,
) -> Result<HttpResponse, UiError> {
    let (repos, _) = super::browse::readable_repositories(&services, &viewer).await?;
    let format = given(&q.format).map(|f| {
        f.parse::<Format>().map(|f| f.as_str().to_string()).map_err(|_| {
            UiError::new(
                actix_web::http::StatusCode::BAD_REQUEST,
                format!("format {f:?} is not one of {}", Format::listed("or")),
            )
        })
    });
    let format = format.transpose()?;
    let asked = given(&q.q).is_some()
        || given(&q.name).is_some()
        || given(&q.version).is_some()
        || format.is_some()
        || given(&q.repository).is_some();
    let scope = scope(&services, &viewer.caller, given(&q.repository)).await?;
    let (rows, next) = if asked {
        // A keyword matches whole words (or, ending in `*`, their start); so do name and version.
        let pattern = |v: &Option<String>| given(v).map(Pattern::parse);
        let search = Search {
            repositories: scope.searched(),
            format: format.clone(),
            keyword: given(&q.q).map(|k| Pattern::parse(&k.to_lowercase())),
            name: pattern(&q.name),
            version: pattern(&q.version),
            sort: Sort::Name,
            after: q.after.as_deref().map(decode_token).transpose()?,
            limit: PAGE,
            ..Search::default()
        };
        let rows = services.db.catalogue_search(&search).await?;
        let next = (rows.len() as i64 == PAGE).then(|| rows.last()).flatten().map(|c| encode_token(&c.name, c.id));
        (crate::nexus::catalogue::visible_rows(&viewer.caller, &services, &scope, rows).await?, next)
    } else {
        (Vec::new(), None)
    };
    let query_without_after = {
        let mut qs = Vec::new();
        for (k, v) in [
            ("q", &q.q),
            ("name", &q.name),
            ("version", &q.version),
            ("format", &q.format),
            ("repository", &q.repository),
        ] {
            if let Some(v) = given(v) {
                qs.push(format!("{k}={}", urlencode(v)));
            }
        }
        qs.join("&")
    };
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let body = html! {
        h1 { "Search" }
        form.search method="get" action=(viewer.base.link("/search")) role="search" {
            div.field {
                label for="q" { "Keyword" }
                input #q name="q" type="search" value=(value(&q.q)) placeholder="e.g. zlib or libz*";
            }
            div.field {
                label for="name" { "Name" }
                input #name name="name" value=(value(&q.name));
            }
            div.field {
                label for="version" { "Version" }
                input #version name="version" value=(value(&q.version)) size="12";
            }
            div.field {
                label for="format" { "Format" }
                select #format name="format" {
                    option value="" { "any" }
                    @for f in packyard_model::repos::Format::ALL.map(|f| f.as_str()) {
                        option value=(f) selected[format.as_deref() == Some(f)] { (f) }
                    }
                }
            }
            div.field {
                label for="repository" { "Repository" }
                select #repository name="repository" {
                    option value="" { "all I may read" }
                    @for r in &repos {
                        option value=(r.name.as_str()) selected[given(&q.repository) == Some(r.name.as_str())] { (r.name.as_str()) }
                    }
                }
            }
            button type="submit" { "Search" }
        }
        p.muted { "A keyword matches a whole word of a group, name or version; end it with * to match the start of one. Name and version match exactly, or by their start with *." }
        @if asked {
            @if rows.is_empty() {
                p role="status" { "Nothing matches." }
            } @else {
                div.table-wrap { table {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Version" } th scope="col" { "Group" }
                        th scope="col" { "Repository" } th scope="col" { "Format" }
                    } }
                    tbody {
                        @for c in &rows {
                            @if let Some(view) = scope.view.get(&c.repository_id) {
                                tr {
                                    td { a href=(viewer.base.link(&format!("/component/{}", encode_id(Kind::Component, view.id, c.id)))) {
                                        (setup::display_name(c))
                                    } }
                                    td { (c.version) }
                                    td { (c.namespace) }
                                    td { a href=(viewer.base.link(&format!("/browse/{}", view.name))) { (view.name.as_str()) } }
                                    td { (c.format) }
                                }
                            }
                        }
                    }
                } }
            }
            nav.pager aria-label="Pages" {
                @if q.after.is_some() { a href=(viewer.base.link(&format!("/search?{query_without_after}"))) { "First page" } }
                @if let Some(n) = &next { a href=(viewer.base.link(&format!("/search?{query_without_after}&after={n}"))) { "Next page" } }
            }
        }
    };
    Ok(viewer.page("Search", body))
}
