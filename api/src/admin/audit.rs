//! `/api/v1/audit`: who did what, when, from where; newest first, keyset-paginated.

use actix_web::{web, HttpResponse};
use packyard_core::services::Services;
use packyard_model::time::rfc3339_ms;
use serde::{Deserialize, Serialize};

use crate::auth::Admin;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/audit").route(web::get().to(list)));
}

#[derive(Deserialize)]
pub struct Page {
    #[serde(default)]
    before: Option<i64>,
    #[serde(default)]
    limit: Option<i64>,
    /// Who (exactly), the action (its start), the target (containing).
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    target: Option<String>,
}

#[derive(Serialize)]
struct Entry {
    id: i64,
    at: String,
    actor: String,
    address: String,
    action: String,
    target: String,
    detail: serde_json::Value,
}

#[derive(Serialize)]
struct PageView {
    entries: Vec<Entry>,
    /// Pass as `before` for the next (older) page; null on the last page.
    next: Option<i64>,
}

pub(crate) async fn list(
    _admin: Admin,
    services: web::Data<Services>,
    q: web::Query<Page>,
) -> Result<HttpResponse, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit: 1 to 1000"));
    }
    let given = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_string);
    let filter = packyard_store::db::security::AuditFilter {
        actor: given(&q.actor),
        action: given(&q.action),
        target: given(&q.target),
    };
    let rows = services.db.list_audit_filtered(q.before, limit + 1, &filter).await?;
    let more = rows.len() as i64 > limit;
    let entries: Vec<Entry> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| Entry {
            id: r.id,
            at: rfc3339_ms(r.at),
            actor: r.actor,
            address: r.address,
            action: r.action,
            target: r.target,
            detail: serde_json::from_str(&r.detail).unwrap_or(serde_json::Value::String(r.detail)),
        })
        .collect();
    let next = if more { entries.last().map(|e| e.id) } else { None };
    Ok(HttpResponse::Ok().json(PageView { entries, next }))
}
