//! `/api/v1/webhooks`: subscriptions to events (global or per repository) and each one's
//! delivery log (admin). How deliveries are made and signed: `packyard_core::webhooks`.

use actix_web::{web, HttpResponse};
use packyard_core::services::Services;
use packyard_core::webhooks::{secret_key, EVENTS};
use packyard_model::time::rfc3339_ms;
use packyard_store::db::webhooks::{DeliveryRecord, WebhookRecord, WebhookWrite};
use serde::{Deserialize, Serialize};

use crate::auth::Admin;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/webhooks").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            crate::admin::resource::resource("/webhooks/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        )
        .service(crate::admin::resource::resource("/webhooks/{name}/deliveries").route(web::get().to(deliveries)));
}

#[derive(Serialize)]
struct WebhookView {
    name: String,
    url: String,
    events: Vec<String>,
    repository: Option<String>,
    enabled: bool,
    created_at: String,
    updated_at: String,
    /// Only in the answer to a create that generated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl From<WebhookRecord> for WebhookView {
    fn from(w: WebhookRecord) -> Self {
        Self {
            name: w.name,
            url: w.url,
            events: w.events,
            repository: w.repository,
            enabled: w.enabled,
            created_at: rfc3339_ms(w.created_at),
            updated_at: rfc3339_ms(w.updated_at),
            secret: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookBody {
    #[serde(default)]
    name: Option<String>,
    url: String,
    events: Vec<String>,
    /// Only this repository's events; absent or null: every repository's.
    #[serde(default)]
    repository: Option<String>,
    /// The HMAC key; generated (and shown once) when a create leaves it out; a replace without
    /// it keeps the one there.
    #[serde(default)]
    secret: Option<String>,
    #[serde(default = "enabled")]
    enabled: bool,
}

fn enabled() -> bool {
    true
}

impl WebhookBody {
    /// The subscription as stored, with its secret sealed as `(nonce, ciphertext)`.
    fn write<'a>(&'a self, secret: (&'a str, &'a str)) -> WebhookWrite<'a> {
        WebhookWrite {
            url: &self.url,
            events: &self.events,
            repository: self.repository.as_deref(),
            secret,
            enabled: self.enabled,
        }
    }
}

fn check(name: &str, body: &WebhookBody) -> Result<(), ApiError> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(ApiError::bad_request("name: 1 to 64 letters, digits, '.', '_' or '-'"));
    }
    match url::Url::parse(&body.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
        _ => return Err(ApiError::bad_request(format!("url: {:?} is not an http:// or https:// URL", body.url))),
    }
    if body.events.is_empty() {
        return Err(ApiError::bad_request(format!("events: name at least one of {}", EVENTS.join(", "))));
    }
    if let Some(e) = body.events.iter().find(|e| !EVENTS.contains(&e.as_str())) {
        return Err(ApiError::bad_request(format!("events: unknown event {e:?}; known: {}", EVENTS.join(", "))));
    }
    if body.secret.as_ref().is_some_and(|s| s.len() < 16 || s.len() > 1024) {
        return Err(ApiError::bad_request("secret: 16 to 1024 characters"));
    }
    Ok(())
}

/// What needs the services: the repository exists, and the receiver is one deliveries may reach
/// (the address guard of every outbound request; `webhooks.allowed_networks` opens networks).
async fn check_against(services: &Services, body: &WebhookBody) -> Result<(), ApiError> {
    if let Ok(url) = url::Url::parse(&body.url) {
        services.webhooks.check(&url).await.map_err(|b| ApiError::bad_request(format!("url: {b}")))?;
    }
    if let Some(r) = &body.repository {
        if services.db.repository_by_name(r).await?.is_none() {
            return Err(ApiError::bad_request(format!("repository: no repository {r}")));
        }
    }
    Ok(())
}

fn sealed(services: &Services, name: &str, secret: &str) -> Result<(String, String), ApiError> {
    services.security.keystore.seal(&secret_key(name), secret.as_bytes()).map_err(ApiError::internal)
}

async fn find(services: &Services, name: &str) -> Result<WebhookRecord, ApiError> {
    services.db.webhook(name).await?.ok_or_else(|| ApiError::not_found(format!("webhook {name} not found")))
}

async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    let all: Vec<WebhookView> = services.db.list_webhooks().await?.into_iter().map(Into::into).collect();
    Ok(HttpResponse::Ok().json(all))
}

async fn get(_admin: Admin, services: web::Data<Services>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(WebhookView::from(find(&services, &path).await?)))
}

async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<WebhookBody>,
) -> Result<HttpResponse, ApiError> {
    let name = body.name.clone().ok_or_else(|| ApiError::bad_request("name is required"))?;
    check(&name, &body)?;
    check_against(&services, &body).await?;
    let generated = body.secret.is_none();
    let secret = body.secret.clone().unwrap_or_else(|| hex::encode(rand::random::<[u8; 24]>()));
    let (nonce, ct) = sealed(&services, &name, &secret)?;
    let write = body.write((&nonce, &ct));
    services.db.insert_webhook(&name, &write).await?;
    let detail = serde_json::json!({"url": body.url, "events": body.events, "repository": body.repository});
    services.security.audit(admin.username(), Some(admin.addr()), "webhook.create", &name, detail).await;
    let mut view = WebhookView::from(find(&services, &name).await?);
    if generated {
        view.secret = Some(secret);
    }
    Ok(HttpResponse::Created().json(view))
}

async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<WebhookBody>,
) -> Result<HttpResponse, ApiError> {
    let name = path.into_inner();
    if body.name.as_deref().is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("a webhook cannot be renamed"));
    }
    check(&name, &body)?;
    check_against(&services, &body).await?;
    let current = find(&services, &name).await?;
    let (nonce, ct) = match &body.secret {
        Some(s) => sealed(&services, &name, s)?,
        None => (current.secret_nonce, current.secret_sealed),
    };
    let write = body.write((&nonce, &ct));
    services.db.update_webhook(&name, &write).await?;
    let detail = serde_json::json!({"url": body.url, "events": body.events, "repository": body.repository,
        "enabled": body.enabled, "secret_changed": body.secret.is_some()});
    services.security.audit(admin.username(), Some(admin.addr()), "webhook.update", &name, detail).await;
    Ok(HttpResponse::Ok().json(WebhookView::from(find(&services, &name).await?)))
}

async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    services.db.delete_webhook(&path).await.map_err(|e| match e {
        packyard_store::db::DbError::NotFound => ApiError::not_found(format!("webhook {} not found", path.as_str())),
        other => other.into(),
    })?;
    services.security.audit(admin.username(), Some(admin.addr()), "webhook.delete", &path, serde_json::json!({})).await;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize)]
pub struct Page {
    #[serde(default)]
    before: Option<i64>,
    #[serde(default)]
    limit: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeliveryView {
    id: i64,
    event_id: i64,
    event: String,
    repository: Option<String>,
    /// `pending`, `delivered` or `failed`.
    state: String,
    attempts: i64,
    last_status: Option<i64>,
    last_error: Option<String>,
    created_at: String,
    delivered_at: Option<String>,
    /// When a pending delivery is tried next.
    next_attempt_at: Option<String>,
}

impl From<DeliveryRecord> for DeliveryView {
    fn from(d: DeliveryRecord) -> Self {
        let pending = d.state == "pending";
        Self {
            id: d.id,
            event_id: d.event_id,
            event: d.event,
            repository: (!d.repository_key.is_empty()).then_some(d.repository_key),
            state: d.state,
            attempts: d.attempts,
            last_status: d.last_status,
            last_error: d.last_error,
            created_at: rfc3339_ms(d.created_at),
            delivered_at: d.delivered_at.map(rfc3339_ms),
            next_attempt_at: pending.then(|| rfc3339_ms(d.next_attempt_at)),
        }
    }
}

#[derive(Serialize)]
struct DeliveryPage {
    deliveries: Vec<DeliveryView>,
    /// Pass as `before` for the next (older) page; null on the last page.
    next: Option<i64>,
}

async fn deliveries(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    q: web::Query<Page>,
) -> Result<HttpResponse, ApiError> {
    let hook = find(&services, &path).await?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit: 1 to 1000"));
    }
    let mut rows = services.db.list_deliveries(hook.id, q.before, limit + 1).await?;
    let next = (rows.len() as i64 > limit).then(|| rows[limit as usize - 1].id);
    rows.truncate(limit as usize);
    Ok(HttpResponse::Ok().json(DeliveryPage { deliveries: rows.into_iter().map(Into::into).collect(), next }))
}
