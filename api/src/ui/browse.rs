//! The repositories a viewer may read, and one repository: its facts, its publication state,
//! how to point a client at it, and its contents by the format's own shape (the catalogue's
//! groups: APT components, APK `branch/repository/arch`, Go module paths, Conan
//! `user/channel`), paginated by name.

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use packyard_core::services::Services;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::catalogue::{ComponentRow, Pattern, RepositoryUsage, Search, Sort};
use packyard_store::db::publication::PublicationSummary;
use serde::Deserialize;

use super::{bytes, setup, time, UiError, Viewer};
use crate::nexus::catalogue::{decode_token, encode_id, encode_token, members_of, readable, Kind};

/// Components per page.
const PAGE: i64 = 50;
/// Groups shown before "more".
const GROUPS: usize = 40;

/// The repositories the viewer may read, by name.
pub(super) async fn readable_repositories(
    services: &Services,
    viewer: &Viewer,
) -> Result<(Vec<Arc<Repository>>, HashMap<String, Arc<Repository>>), UiError> {
    let all: Vec<Arc<Repository>> = services.db.list_repositories().await?.into_iter().map(Arc::new).collect();
    let by_name = all.iter().map(|r| (r.name.to_string(), r.clone())).collect();
    let mut mine: Vec<Arc<Repository>> = all.into_iter().filter(|r| readable(&viewer.caller, services, r)).collect();
    mine.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    Ok((mine, by_name))
}

/// What a repository holds: its own usage, or a group's members' together.
fn usage_of(
    repo: &Repository,
    usage: &HashMap<i64, RepositoryUsage>,
    by_name: &HashMap<String, Arc<Repository>>,
) -> Option<(i64, i64)> {
    if repo.repo_type == RepoType::Group {
        let members = members_of(repo, by_name);
        let counted: Vec<(i64, i64)> =
            members.iter().filter_map(|m| usage.get(&m.id).map(|u| (u.components, u.bytes))).collect();
        (!counted.is_empty()).then(|| counted.iter().fold((0, 0), |(c, b), (c2, b2)| (c + c2, b + b2)))
    } else {
        usage.get(&repo.id).map(|u| (u.components, u.bytes))
    }
}

/// The publication state as a badge: up to date, publishing, or the last error.
pub(super) fn state(repo: &Repository, s: Option<&PublicationSummary>) -> Markup {
    match s {
        None if repo.repo_type == RepoType::Proxy => html! { span.badge { "on demand" } },
        None => html! { span.badge { "nothing to publish" } },
        Some(s) if s.failing > 0 => html! {
            span.badge.state-bad title=(s.last_error.clone().unwrap_or_default()) {
                "failed (" (s.failing) " of " (s.units) ")"
            }
            @if let Some(e) = &s.last_error { div.muted.hash { (e) } }
        },
        Some(s) if s.pending > 0 => html! { span.badge.state-busy { "publishing (" (s.pending) " of " (s.units) ")" } },
        Some(s) => html! {
            span.badge.state-ok { "up to date" }
            @if let Some(at) = s.last_published_at { " " span.muted { (time(at)) } }
        },
    }
}

/// The quota banners: one line for each use past its soft limit or at its hard one.
fn quota_banners(statuses: &[packyard_core::quota::Status]) -> Markup {
    html! {
        @for s in statuses.iter().filter(|s| s.warns()) {
            p.warning.quota role="alert" data-scope=(s.scope) data-name=(s.name) { (s.message) }
        }
    }
}

/// Where the repositories the viewer reads (and, for an administrator, the blob store) stand
/// against their quotas, counted now.
async fn quota_statuses(
    viewer: &Viewer,
    services: &Services,
    repos: &[Arc<Repository>],
) -> Result<Vec<packyard_core::quota::Status>, UiError> {
    let mut out = Vec::new();
    if viewer.is_admin() {
        out.extend(packyard_core::quota::blob_store_status(services).await?);
    }
    for r in repos.iter().filter(|r| r.quota().is_some()) {
        out.extend(packyard_core::quota::repository_status(services, r).await?);
    }
    Ok(out)
}

pub async fn repositories(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    let (repos, by_name) = readable_repositories(&services, &viewer).await?;
    let usage = services.db.usage_all().await?;
    let states = services.db.publication_summary().await?;
    let quotas = quota_statuses(&viewer, &services, &repos).await?;
    let body = html! {
        h1 { "Repositories" }
        (quota_banners(&quotas))
        @if repos.is_empty() {
            p { "There is no repository you may read." }
            @if !viewer.signed_in() { p { a href=(viewer.base.link("/signin")) { "Sign in" } " to see more." } }
        } @else {
            div.table-wrap {
                table {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Format" } th scope="col" { "Type" }
                        th scope="col" { "URL" } th.num scope="col" { "Components" } th.num scope="col" { "Size" }
                        th scope="col" { "Publication" }
                    } }
                    tbody {
                        @for r in &repos {
                            @let u = usage_of(r, &usage, &by_name);
                            tr {
                                td { a href=(viewer.base.link(&format!("/browse/{}", r.name))) { (r.name.as_str()) } }
                                td { (r.format.as_str()) }
                                td { (r.repo_type.as_str()) }
                                td { code { (setup::url(&viewer.base, r)) "/" } }
                                td.num { (u.map_or("–".to_string(), |u| u.0.to_string())) }
                                td.num { (u.map_or("–".to_string(), |u| bytes(u.1))) }
                                td { (state(r, states.get(&r.id))) }
                            }
                        }
                    }
                }
            }
            p.muted { "Counts are refreshed by the worker every " (services.config.worker.usage_refresh_secs) " s." }
        }
    };
    Ok(viewer.page("Repositories", body))
}

#[derive(Deserialize, Default)]
pub struct BrowseQuery {
    group: Option<String>,
    /// A name, or the start of one.
    name: Option<String>,
    after: Option<String>,
    groups_after: Option<String>,
}

/// Paths of a repository's files, with their links.
fn linked(viewer: &Viewer, repo: &Repository, paths: Vec<String>) -> Vec<(String, String)> {
    paths
        .into_iter()
        .map(|p| {
            let link = viewer.base.link(&format!("/repository/{}/{p}", repo.name));
            (p, link)
        })
        .collect()
}

pub async fn repository(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    q: web::Query<BrowseQuery>,
) -> Result<HttpResponse, UiError> {
    let (repos, by_name) = readable_repositories(&services, &viewer).await?;
    let Some(repo) = repos.iter().find(|r| r.name.as_str() == name.as_str()).cloned() else {
        return Err(UiError::not_found(format!("There is no repository {name} you may read.")));
    };
    let usage = services.db.usage_all().await?;
    let states = services.db.publication_summary().await?;
    // What the repository's contents are read from: itself, or a group's members.
    let sources: Vec<Arc<Repository>> =
        if repo.repo_type == RepoType::Group { members_of(&repo, &by_name) } else { vec![repo.clone()] };
    // `Some("")` is the group of components without one (a Conan reference without user/channel).
    let group = q.group.clone();
    let mut groups: Vec<String> = Vec::new();
    for s in &sources {
        groups.extend(services.db.catalogue_groups(s.id, q.groups_after.as_deref(), GROUPS + 1).await?);
    }
    groups.sort();
    groups.dedup();
    let more_groups = groups.len() > GROUPS;
    groups.truncate(GROUPS);
    let after = q.after.as_deref().map(decode_token).transpose()?;
    let search = Search {
        repositories: sources.iter().map(|s| s.id).collect(),
        group: group.clone().map(Pattern::Exact),
        name: q.name.as_deref().filter(|n| !n.is_empty()).map(|n| Pattern::Prefix(n.to_string())),
        sort: Sort::Name,
        after,
        limit: PAGE,
        ..Search::default()
    };
    let rows = services.db.catalogue_search(&search).await?;
    let next = (rows.len() as i64 == PAGE).then(|| rows.last()).flatten().map(|c| encode_token(&c.name, c.id));
    let rows = seen(&viewer, &services, &repo, rows).await?;
    let ui = packyard_formats::registry().get(repo.format).ui();
    let known = match group.as_deref() {
        Some(g) => vec![g.to_string()],
        None => groups.clone(),
    };
    let snippets = setup::repository(&services, &viewer.base, &repo, &known).await;
    let link_with = |g: Option<&str>, after: Option<&str>| {
        let mut qs = Vec::new();
        if let Some(g) = g {
            qs.push(format!("group={}", urlencode(g)));
        }
        if let Some(n) = q.name.as_deref().filter(|n| !n.is_empty()) {
            qs.push(format!("name={}", urlencode(n)));
        }
        if let Some(a) = after {
            qs.push(format!("after={a}"));
        }
        let path = format!("/browse/{}", repo.name);
        viewer.base.link(&if qs.is_empty() { path } else { format!("{path}?{}", qs.join("&")) })
    };
    let u = usage_of(&repo, &usage, &by_name);
    let quota = packyard_core::quota::repository_status(&services, &repo).await?;
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/")) { "Repositories" } " / " }
        h1 { (repo.name.as_str()) " " span.badge { (repo.format.as_str()) } " " span.badge { (repo.repo_type.as_str()) } }
        (quota_banners(quota.as_slice()))
        div.grid {
            section.panel aria-labelledby="facts" {
                h2 #facts { "About" }
                dl.facts {
                    dt { "URL" } dd { code { (setup::url(&viewer.base, &repo)) "/" } }
                    dt { "Components" } dd { (u.map_or("not counted yet".to_string(), |u| u.0.to_string())) }
                    dt { "Size" } dd { (u.map_or("–".to_string(), |u| bytes(u.1))) }
                    @if let Some(i) = usage.get(&repo.id).filter(|i| i.index_bytes > 0) {
                        dt { "Index snapshots" } dd { (bytes(i.index_bytes)) }
                    }
                    @if let Some(q) = &quota {
                        dt { "Quota" } dd {
                            (bytes(i64::try_from(q.used_bytes).unwrap_or(i64::MAX))) " used"
                            @if let Some(s) = q.soft_bytes { "; soft limit " (bytes(i64::try_from(s).unwrap_or(i64::MAX))) }
                            @if let Some(h) = q.hard_bytes { "; hard limit " (bytes(i64::try_from(h).unwrap_or(i64::MAX))) }
                        }
                    }
                    dt { "Publication" } dd { (state(&repo, states.get(&repo.id))) }
                    @if repo.repo_type == RepoType::Hosted { dt { "Redeploy" } dd { (repo.write_policy.as_str()) } }
                    dt { "Anonymous read" } dd { (if repo.anonymous_read && services.security.anonymous_read { "yes" } else { "no" }) }
                    @for (label, value) in ui.facts(&repo) {
                        dt { (label) } dd { (value) }
                    }
                    @if let Some(p) = &repo.settings.proxy {
                        dt { "Upstream" } dd { code { (p.remote_url) } }
                        dt { "Metadata kept" } dd { (p.metadata_ttl_secs) " s" }
                    }
                }
                p { a href=(viewer.base.link(&format!("/browse/{}/files/", repo.name))) { "Browse its files" } }
                @let index_files = linked(&viewer, &repo, ui.index_files(&repo));
                @if !index_files.is_empty() {
                    h3 { "Index files" }
                    ul.plain {
                        @for (p, link) in &index_files {
                            li { a href=(link) { (p) } }
                        }
                    }
                }
            }
            section.panel aria-labelledby="setup" {
                h2 #setup { "Client set-up" }
                @for s in &snippets { (super::snippet(&s.label, &s.text)) }
            }
        }
        @if repo.repo_type == RepoType::Group {
            h2 { "Members" }
            p.muted { "Served in this order: the first member that has a file serves it." }
            div.table-wrap { table {
                thead { tr { th scope="col" { "Member" } th scope="col" { "Type" } th.num scope="col" { "Contributes" } th.num scope="col" { "Size" } } }
                tbody {
                    @for m in &repo.members {
                        @let mr = by_name.get(m.as_str());
                        @let mu = mr.and_then(|r| usage_of(r, &usage, &by_name));
                        tr {
                            td { @if mr.is_some_and(|r| readable(&viewer.caller, &services, r)) {
                                a href=(viewer.base.link(&format!("/browse/{m}"))) { (m.as_str()) }
                            } @else { (m.as_str()) } }
                            td { (mr.map_or("–", |r| r.repo_type.as_str())) }
                            td.num { (mu.map_or("–".to_string(), |u| super::count(u.0, "component", "components"))) }
                            td.num { (mu.map_or("–".to_string(), |u| bytes(u.1))) }
                        }
                    }
                }
            } }
        }
        h2 { @if repo.repo_type == RepoType::Proxy { "Cached" } @else { "Contents" } }
        @if !groups.is_empty() || group.is_some() {
            h3 { (ui.group_label()) }
            ul.facets {
                li { a href=(link_with(None, None)) aria-current=[group.is_none().then_some("true")] { "all" } }
                @for g in &groups {
                    li { a href=(link_with(Some(g), None)) aria-current=[(group.as_deref() == Some(g.as_str())).then_some("true")] {
                        @if g.is_empty() { "(none)" } @else { (g) }
                    } }
                }
                @if more_groups {
                    @if let Some(last) = groups.last() {
                        li { a href=(viewer.base.link(&format!("/browse/{}?groups_after={}", repo.name, urlencode(last)))) { "more…" } }
                    }
                }
            }
            @if let Some(g) = &group {
                @let files = linked(&viewer, &repo, ui.group_files(&repo, g));
                @if !files.is_empty() {
                    p { "Index: " @for (i, (label, href)) in files.iter().enumerate() { @if i > 0 { ", " } a href=(href) { (label) } } }
                }
            }
        }
        form.search method="get" action=(viewer.base.link(&format!("/browse/{}", repo.name))) {
            @if let Some(g) = &group { input type="hidden" name="group" value=(g); }
            div.field {
                label for="name" { "Name starts with" }
                input #name name="name" value=(q.name.clone().unwrap_or_default());
            }
            button type="submit" { "Filter" }
        }
        @if rows.is_empty() {
            p { @if repo.repo_type == RepoType::Proxy { "Nothing cached yet: what clients fetch through the proxy appears here." } @else { "Nothing here yet." } }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Version" } th scope="col" { (ui.group_label()) }
                    @if repo.repo_type == RepoType::Group { th scope="col" { "From" } }
                    th.wide-only scope="col" { "Stored" } th.wide-only scope="col" { "By" }
                } }
                tbody {
                    @for c in &rows {
                        tr {
                            td { a href=(viewer.base.link(&format!("/component/{}", encode_id(Kind::Component, repo.id, c.id)))) {
                                (setup::display_name(c))
                            } }
                            td { (c.version) }
                            td { (c.namespace) }
                            @if repo.repo_type == RepoType::Group {
                                td { (sources.iter().find(|s| s.id == c.repository_id).map_or("", |s| s.name.as_str())) }
                            }
                            td.wide-only { (time(c.created_at)) }
                            td.wide-only { (c.uploaded_by) }
                        }
                    }
                }
            } }
        }
        nav.pager aria-label="Pages" {
            @if q.after.is_some() { a href=(link_with(group.as_deref(), None)) { "First page" } }
            @if let Some(n) = &next { a href=(link_with(group.as_deref(), Some(n))) { "Next page" } }
        }
    };
    Ok(viewer.page(repo.name.as_str(), body))
}

/// Percent-encodes a query value.
/// The rows of a page seen through `view` that the viewer may read (a content selector
/// leaves the rest out).
pub(super) async fn seen(
    viewer: &Viewer,
    services: &Services,
    view: &Repository,
    rows: Vec<ComponentRow>,
) -> Result<Vec<ComponentRow>, packyard_store::db::DbError> {
    let action = packyard_core::security::Action::Read;
    if crate::content::reach(&viewer.caller, services, view, action) != packyard_model::security::Reach::Part {
        return Ok(rows);
    }
    let ids: Vec<i64> = rows.iter().map(|c| c.id).collect();
    let assets = services.db.catalogue_assets_of(&ids).await?;
    Ok(rows
        .into_iter()
        .filter(|c| crate::content::allows_component(&viewer.caller, services, view, action, c, &assets))
        .collect())
}

pub(super) fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
