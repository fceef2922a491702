//! Cleanup policies, their runs, and a preview of what a policy would delete.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::admin::cleanup::{self as service, PreviewRequest};
use packyard_core::services::Services;
use serde::Deserialize;

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
    admin_of(&viewer)?;
    let policies = service::list(&services).await?;
    let repos = services.db.list_repositories().await?;
    let mut runs = Vec::with_capacity(policies.len());
    for p in &policies {
        runs.push(service::runs(&services, &p.name).await?.items);
    }
    let (preview, error) =
        match (q.policy.as_deref().filter(|p| !p.is_empty()), q.repository.as_deref().filter(|r| !r.is_empty())) {
            (Some(policy), Some(repository)) => {
                // Pages whose work is bounded: no totals (those walk the whole repository).
                let request = PreviewRequest {
                    repository: Some(repository),
                    continuation_token: q.after.as_deref(),
                    count: false,
                };
                match service::preview(&services, packyard_formats::registry(), policy, request).await {
                    Ok(v) => (Some(v), None),
                    Err(e) => (None, Some(ApiError::from(e))),
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
                tbody { @for (p, r) in policies.iter().zip(&runs) {
                    tr {
                        td { (p.name) }
                        td { (p.format) }
                        td { code { (serde_json::to_string(&p.criteria).unwrap_or_default()) } }
                        td { ul.plain { @for run in r {
                            li { (run.repository) ": " (run.state)
                                @if run.last_finished.is_some() { ", " (run.components) " removed" }
                                @if let Some(at) = &run.last_finished { " · " (at) } }
                        } } }
                    }
                } }
            } }
            h2 { "Preview" }
            form.search method="get" action=(viewer.base.link("/admin/cleanup")) {
                (select("policy", "Policy", &policies.iter().map(|p| (p.name.as_str(), p.name.as_str())).collect::<Vec<_>>(), q.policy.as_deref().unwrap_or_default()))
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
                @let items = &p.items;
                @let next = p.continuation_token.as_deref();
                @let repository = p.repository.as_str();
                @let total: i64 = items.iter().map(|i| i.bytes).sum();
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
                        tbody { @for i in items { tr {
                            td { (i.name) } td { (i.version) }
                            td.num { (bytes(i.bytes)) } td { (i.published) }
                            td { (i.last_downloaded.as_deref().unwrap_or("never")) }
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
