//! Cleanup policies, their runs, and a preview of what a policy would delete.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;
use serde::Deserialize;

use crate::admin;

use super::*;

#[derive(Deserialize, Default)]
pub struct PreviewForm {
    policy: Option<String>,
    repository: Option<String>,
    /// The preview's continuation token: a later page.
    after: Option<String>,
}

pub(super) async fn cleanup(
    viewer: Viewer,
    services: web::Data<Services>,
    q: web::Query<PreviewForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    let policies = api(admin::cleanup::list(admin.clone(), data(&services))).await?;
    let policies = policies.as_array().cloned().unwrap_or_default();
    let repos = services.db.list_repositories().await?;
    let mut runs = Vec::new();
    for p in &policies {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let r = api(admin::cleanup::runs(admin.clone(), data(&services), web::Path::from(name.clone()))).await?;
        runs.push((name, r));
    }
    let (preview, error) =
        match (q.policy.as_deref().filter(|p| !p.is_empty()), q.repository.as_deref().filter(|r| !r.is_empty())) {
            (Some(policy), Some(repository)) => {
                // Pages whose work is bounded: no totals (those walk the whole repository).
                let query = admin::cleanup::PreviewQuery {
                    repository: Some(repository.to_string()),
                    continuation_token: q.after.clone(),
                    count: Some(false),
                };
                match api(admin::cleanup::preview(
                    admin,
                    data(&services),
                    web::Path::from(policy.to_string()),
                    web::Query(query),
                ))
                .await
                {
                    Ok(v) => (Some(v), None),
                    Err(e) => (None, Some(e)),
                }
            }
            _ => (None, None),
        };
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let body = html! {
        h1 { "Cleanup policies" }
        (admin_nav(&viewer, "/admin/cleanup"))
        @if policies.is_empty() {
            p { "No cleanup policy yet: create one with " code { "POST /api/v1/cleanup-policies" } "." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Policy" } th scope="col" { "Format" } th scope="col" { "Criteria" } th scope="col" { "Last runs" } } }
                tbody { @for (p, (_, r)) in policies.iter().zip(&runs) {
                    tr {
                        td { (p["name"].as_str().unwrap_or_default()) }
                        td { (p["format"].as_str().unwrap_or_default()) }
                        td { code { (p["criteria"].to_string()) } }
                        td { ul.plain { @for run in r["runs"].as_array().or(r.as_array()).cloned().unwrap_or_default() {
                            li { (run["repository"].as_str().unwrap_or_default()) ": " (run["state"].as_str().unwrap_or_default())
                                @if let Some(n) = run["components"].as_i64() { ", " (n) " removed" }
                                @if let Some(at) = run["finished_at"].as_str() { " · " (at) } }
                        } } }
                    }
                } }
            } }
            h2 { "Preview" }
            form.search method="get" action=(viewer.base.link("/admin/cleanup")) {
                (select("policy", "Policy", &policies.iter().filter_map(|p| p["name"].as_str()).map(|n| (n, n)).collect::<Vec<_>>(), q.policy.as_deref().unwrap_or_default()))
                div.field {
                    label for="repository" { "Repository" }
                    select #repository name="repository" {
                        @for r in repos.iter().filter(|r| r.repo_type != packyard_model::repos::RepoType::Group) {
                            option value=(r.name.as_str()) selected[q.repository.as_deref() == Some(r.name.as_str())] { (r.name.as_str()) " (" (r.format.as_str()) ")" }
                        }
                    }
                }
                button type="submit" { "Preview" }
            }
            (refusal(&error))
            @if let Some(p) = &preview {
                @let items = p["items"].as_array().cloned().unwrap_or_default();
                @let next = p["continuationToken"].as_str();
                @let repository = p["repository"].as_str().unwrap_or_default();
                @let total: i64 = items.iter().filter_map(|i| i["bytes"].as_i64()).sum();
                @if q.after.is_none() && next.is_none() {
                    p role="status" { "A run now would remove " strong { (items.len()) @if items.len() == 1 { " component" } @else { " components" } } " (" (bytes(total)) ") from " (repository) "." }
                } @else if items.is_empty() {
                    p role="status" { "Nothing more in this stretch of " (repository) "'s names; the walk goes on from there." }
                } @else {
                    p role="status" { "A run now would remove these " strong { (items.len()) " components" } " (" (bytes(total)) ") from " (repository) @if next.is_some() { ", and more on the next pages" } "." }
                }
                @if !items.is_empty() {
                    div.table-wrap { table {
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Version" } th.num scope="col" { "Size" } th scope="col" { "Published" } th scope="col" { "Last downloaded" } } }
                        tbody { @for i in &items { tr {
                            td { (i["name"].as_str().unwrap_or_default()) } td { (i["version"].as_str().unwrap_or_default()) }
                            td.num { (bytes(i["bytes"].as_i64().unwrap_or(0))) } td { (i["published"].as_str().unwrap_or_default()) }
                            td { (i["lastDownloaded"].as_str().unwrap_or("never")) }
                        } } }
                    } }
                }
                @let here = format!("/admin/cleanup?policy={}&repository={}", super::super::browse::urlencode(q.policy.as_deref().unwrap_or_default()), super::super::browse::urlencode(repository));
                nav.pager aria-label="Preview pages" {
                    @if q.after.is_some() { a href=(viewer.base.link(&here)) { "First page" } }
                    @if let Some(n) = next { a href=(viewer.base.link(&format!("{here}&after={}", super::super::browse::urlencode(n)))) { "Next page" } }
                }
                @if next.is_some() || q.after.is_some() {
                    p.muted { "The totals of a whole run: " code { "POST /api/v1/cleanup-policies/…/preview?repository=…" } " counts them, and each run's report gives what it removed." }
                }
            }
        }
    };
    Ok(viewer.page_with(status, "Cleanup", body))
}

// --- audit --------------------------------------------------------------------------------
