//! The audit log, filtered and paged.

use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;
use serde::Deserialize;

use super::*;

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    actor: Option<String>,
    action: Option<String>,
    target: Option<String>,
    before: Option<i64>,
}

pub(super) async fn audit(
    viewer: Viewer,
    services: web::Data<Services>,
    q: web::Query<AuditQuery>,
) -> Result<HttpResponse, UiError> {
    admin_of(&viewer)?;
    let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    let filter = packyard_store::db::security::AuditFilter {
        actor: given(&q.actor),
        action: given(&q.action),
        target: given(&q.target),
    };
    const PAGE: i64 = 50;
    let rows = services.db.list_audit_filtered(q.before, PAGE + 1, &filter).await?;
    let more = rows.len() as i64 > PAGE;
    let rows: Vec<_> = rows.into_iter().take(PAGE as usize).collect();
    let next = if more { rows.last().map(|r| r.id) } else { None };
    let keep = |v: &Option<String>| v.clone().unwrap_or_default();
    let mut filters = Vec::new();
    for (k, v) in [("actor", &filter.actor), ("action", &filter.action), ("target", &filter.target)] {
        if let Some(v) = v {
            filters.push(format!("{k}={}", super::super::browse::urlencode(v)));
        }
    }
    let body = html! {
        h1 { "Audit log" }
        (admin_nav(&viewer, "/admin/audit"))
        form.search method="get" action=(viewer.base.link("/admin/audit")) {
            (field("actor", "Who", &keep(&q.actor), ""))
            (field("action", "Action starts with", &keep(&q.action), "e.g. user. or repository.delete"))
            (field("target", "Target contains", &keep(&q.target), ""))
            button type="submit" { "Filter" }
        }
        @if rows.is_empty() { p.muted { "No entry" @if !filters.is_empty() { " matches these filters" } "." } }
        div.table-wrap { table {
            thead { tr { th scope="col" { "When" } th scope="col" { "Who" } th scope="col" { "From" } th scope="col" { "Action" } th scope="col" { "Target" } th scope="col" { "Detail" } } }
            tbody { @for r in &rows { tr {
                td { (super::super::time(r.at)) } td { (r.actor) } td { (r.address) } td { code { (r.action) } } td.wrap { (r.target) } td.wrap { (detail(&r.detail)) }
            } } }
        } }
        nav.pager aria-label="Pages" {
            @if q.before.is_some() { a href=(viewer.base.link(&format!("/admin/audit?{}", filters.join("&")))) { "Newest" } }
            @if let Some(n) = next { a href=(viewer.base.link(&format!("/admin/audit?{}&before={n}", filters.join("&")))) { "Older" } }
        }
    };
    Ok(viewer.page("Audit log", body))
}

/// An entry's detail as people read it: each field on its own line (`key: value`), lists
/// joined, nested objects as compact JSON; what is not a JSON object as it is.
fn detail(raw: &str) -> maud::Markup {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str::<serde_json::Value>(raw) else {
        return html! { code { (raw) } };
    };
    let shown = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    };
    html! {
        @if fields.is_empty() { span.muted { "–" } }
        ul.plain.detail { @for (k, v) in &fields { li { span.muted { (k) ": " } (shown(v)) } } }
    }
}
