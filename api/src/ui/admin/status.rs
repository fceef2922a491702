//! The administration home: the system's status — storage, caches, events, the worker and
//! publication errors.

use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::services::Services;

use super::*;

pub(super) async fn status(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    admin_of(&viewer)?;
    let ready = services.readiness().await;
    let summary = services.db.publication_summary().await?;
    let repos = services.db.list_repositories().await?;
    let pending: i64 = summary.values().map(|s| s.pending).sum();
    let failing: Vec<(String, String)> = repos
        .iter()
        .filter_map(|r| {
            let s = summary.get(&r.id)?;
            (s.failing > 0).then(|| (r.name.to_string(), s.last_error.clone().unwrap_or_default()))
        })
        .collect();
    let stored = services.db.usage_all().await?.values().map(|u| u.bytes).sum::<i64>();
    let redis = match &services.redis {
        None => "not configured (watermarks are read from the database)".to_string(),
        Some(_) => "configured".to_string(),
    };
    let amqp = match &services.amqp {
        None => "not configured (the worker polls the database)".to_string(),
        Some(_) => "configured".to_string(),
    };
    let body = html! {
        h1 { "Administration" }
        (admin_nav(&viewer, "/admin"))
        h2 { "System status" }
        dl.facts.panel {
            dt { "Database and blob store" }
            dd { @match &ready {
                Ok(()) => span.badge.state-ok { "reachable, migrations applied" },
                Err(problems) => span.badge.state-bad { (problems.join("; ")) },
            } }
            dt { "Database" } dd { (services.db.backend().as_str()) }
            dt { "Blob store" } dd { (format!("{:?}", services.config.blobs.kind).to_lowercase()) ", " (bytes(stored)) " in repositories" }
            dt { "Redis" } dd { (redis) }
            dt { "RabbitMQ" } dd { (amqp) }
            dt { "Worker" } dd { @if services.config.worker.embedded { "embedded in this process" } @else { "separate (packyard-worker)" } }
            dt { "Worker backlog" } dd { (super::super::count(pending, "publication unit", "publication units")) " waiting" }
            dt { "Publication errors" } dd { (super::super::count(failing.len() as i64, "repository", "repositories")) }
        }
        @if !failing.is_empty() {
            h2 { "Publication errors" }
            div.table-wrap { table {
                thead { tr { th scope="col" { "Repository" } th scope="col" { "Last error" } } }
                tbody { @for (name, e) in &failing { tr { td { (name) } td { code { (e) } } } } }
            } }
        }
    };
    Ok(viewer.page("Administration", body))
}
