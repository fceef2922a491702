//! Webhook subscriptions to events (global or per repository) and each one's delivery log. How
//! deliveries are made and signed: [`crate::webhooks`].

use packyard_model::time::rfc3339_ms;
use packyard_store::db::webhooks::{DeliveryRecord, WebhookRecord, WebhookWrite};
use packyard_store::db::DbError;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::hosted::Actor;
use crate::services::Services;
use crate::webhooks::{secret_key, EVENTS};

/// A subscription as the administration shows it (never its secret, but once when generated).
#[derive(Debug, Clone, Serialize)]
pub struct WebhookView {
    pub name: String,
    pub url: String,
    pub events: Vec<String>,
    pub repository: Option<String>,
    pub enabled: bool,
    /// Several pending events of one repository are sent in one request.
    pub batch: bool,
    /// Only the component events whose content this content selector selects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_selector: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Only in the answer to a create that generated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<WebhookRecord> for WebhookView {
    fn from(w: WebhookRecord) -> Self {
        Self {
            name: w.name,
            url: w.url,
            events: w.events,
            repository: w.repository,
            enabled: w.enabled,
            batch: w.batch,
            content_selector: w.content_selector,
            created_at: rfc3339_ms(w.created_at),
            updated_at: rfc3339_ms(w.updated_at),
            secret: None,
        }
    }
}

/// A subscription's definition: `name` on create (on update, if given, the webhook's own).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookBody {
    #[serde(default)]
    pub name: Option<String>,
    pub url: String,
    pub events: Vec<String>,
    /// Only this repository's events; absent or null: every repository's.
    #[serde(default)]
    pub repository: Option<String>,
    /// The HMAC key; generated (and shown once) when a create leaves it out; a replace without
    /// it keeps the one there.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Send several pending events of one repository in one request, `{"batch": [...]}` (a
    /// cleanup run's thousands of `component.deleted`, say); default: one event per request.
    #[serde(default)]
    pub batch: bool,
    /// Only the component events (`component.published`, `component.deleted`) whose content
    /// this content selector selects; the other events go out as without it.
    #[serde(default)]
    pub content_selector: Option<String>,
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
            batch: self.batch,
            content_selector: self.content_selector.as_deref(),
        }
    }
}

fn check(name: &str, body: &WebhookBody) -> AdminResult<()> {
    let invalid = |m: String| Err(AdminError::Invalid(m));
    let ok = packyard_model::is_plain_name(name, b"._-");
    if !ok {
        return invalid("name: 1 to 64 letters, digits, '.', '_' or '-'".into());
    }
    match url::Url::parse(&body.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
        _ => return invalid(format!("url: {:?} is not an http:// or https:// URL", body.url)),
    }
    if body.events.is_empty() {
        return invalid(format!("events: name at least one of {}", EVENTS.join(", ")));
    }
    if let Some(e) = body.events.iter().find(|e| !EVENTS.contains(&e.as_str())) {
        return invalid(format!("events: unknown event {e:?}; known: {}", EVENTS.join(", ")));
    }
    if body.secret.as_ref().is_some_and(|s| s.len() < 16 || s.len() > 1024) {
        return invalid("secret: 16 to 1024 characters".into());
    }
    Ok(())
}

/// What needs the services: the repository exists, and the receiver is one deliveries may reach
/// (the address guard of every outbound request; `webhooks.allowed_networks` opens networks).
async fn check_against(services: &Services, body: &WebhookBody) -> AdminResult<()> {
    if let Ok(url) = url::Url::parse(&body.url) {
        services.webhooks.check(&url).await.map_err(|b| AdminError::Invalid(format!("url: {b}")))?;
    }
    if let Some(r) = &body.repository {
        if services.db.repository_by_name(r).await?.is_none() {
            return Err(AdminError::Invalid(format!("repository: no repository {r}")));
        }
    }
    if let Some(s) = &body.content_selector {
        if services.db.content_selector(s).await?.is_none() {
            return Err(AdminError::Invalid(format!("content_selector: no content selector {s}")));
        }
    }
    Ok(())
}

fn sealed(services: &Services, name: &str, secret: &str) -> AdminResult<(String, String)> {
    services
        .security
        .keystore
        .seal(&secret_key(name), secret.as_bytes())
        .map_err(|e| AdminError::Internal(e.to_string()))
}

async fn find(services: &Services, name: &str) -> AdminResult<WebhookRecord> {
    services.db.webhook(name).await?.ok_or_else(|| AdminError::NotFound(format!("webhook {name} not found")))
}

pub async fn list(services: &Services) -> AdminResult<Vec<WebhookView>> {
    Ok(services.db.list_webhooks().await?.into_iter().map(Into::into).collect())
}

pub async fn get(services: &Services, name: &str) -> AdminResult<WebhookView> {
    Ok(find(services, name).await?.into())
}

/// Creates the subscription; its answer shows the secret when one was generated.
pub async fn create(services: &Services, actor: Actor<'_>, body: WebhookBody) -> AdminResult<WebhookView> {
    let name = body.name.clone().ok_or_else(|| AdminError::Invalid("name is required".into()))?;
    check(&name, &body)?;
    check_against(services, &body).await?;
    let generated = body.secret.is_none();
    let secret = body.secret.clone().unwrap_or_else(|| hex::encode(rand::random::<[u8; 24]>()));
    let (nonce, ct) = sealed(services, &name, &secret)?;
    services.db.insert_webhook(&name, &body.write((&nonce, &ct))).await?;
    let detail = serde_json::json!({"url": body.url, "events": body.events, "repository": body.repository});
    services.security.audit(actor.username, actor.address, "webhook.create", &name, detail).await;
    let mut view = get(services, &name).await?;
    if generated {
        view.secret = Some(secret);
    }
    Ok(view)
}

/// Replaces the definition; a webhook cannot be renamed.
pub async fn update(services: &Services, actor: Actor<'_>, name: &str, body: WebhookBody) -> AdminResult<WebhookView> {
    if body.name.as_deref().is_some_and(|n| n != name) {
        return Err(AdminError::Invalid("a webhook cannot be renamed".into()));
    }
    check(name, &body)?;
    check_against(services, &body).await?;
    let current = find(services, name).await?;
    let (nonce, ct) = match &body.secret {
        Some(s) => sealed(services, name, s)?,
        None => (current.secret_nonce, current.secret_sealed),
    };
    services.db.update_webhook(name, &body.write((&nonce, &ct))).await?;
    let detail = serde_json::json!({"url": body.url, "events": body.events, "repository": body.repository,
        "enabled": body.enabled, "batch": body.batch, "secret_changed": body.secret.is_some()});
    services.security.audit(actor.username, actor.address, "webhook.update", name, detail).await;
    get(services, name).await
}

pub async fn delete(services: &Services, actor: Actor<'_>, name: &str) -> AdminResult<()> {
    services.db.delete_webhook(name).await.map_err(|e| match e {
        DbError::NotFound => AdminError::NotFound(format!("webhook {name} not found")),
        other => other.into(),
    })?;
    services.security.audit(actor.username, actor.address, "webhook.delete", name, serde_json::json!({})).await;
    Ok(())
}

/// The event a test delivery carries (`POST /api/v1/webhooks/{name}/test`).
pub const TEST_EVENT: &str = "webhook.test";

/// Queues a `webhook.test` event for this subscription alone (whatever events it takes), sent
/// like any other and logged in its deliveries; the new delivery's id. A disabled subscription
/// is refused: nothing would be sent.
pub async fn send_test(services: &Services, actor: Actor<'_>, name: &str) -> AdminResult<i64> {
    let hook = find(services, name).await?;
    if !hook.enabled {
        return Err(AdminError::Conflict(format!("webhook {name} is disabled: enable it to send a test event")));
    }
    let payload =
        serde_json::json!({"webhook": name, "message": "a test event: the subscription and its receiver work"});
    let id = services.db.enqueue_test_delivery(hook.id, TEST_EVENT, &payload.to_string()).await?;
    services
        .security
        .audit(actor.username, actor.address, "webhook.test", name, serde_json::json!({"delivery": id}))
        .await;
    Ok(id)
}

/// One delivery of an event to a subscription.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    pub id: i64,
    /// The event's number (the `id` its body carries), in the order events committed; `null`
    /// for a moment after it committed, until a worker numbers it.
    pub event_id: Option<i64>,
    pub event: String,
    pub repository: Option<String>,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: String,
    pub delivered_at: Option<String>,
    /// When a pending delivery is tried next.
    pub next_attempt_at: Option<String>,
}

impl From<DeliveryRecord> for DeliveryView {
    fn from(d: DeliveryRecord) -> Self {
        let pending = d.state == "pending";
        Self {
            id: d.id,
            event_id: d.seq,
            event: d.event,
            repository: (!d.repository_key.is_empty() && d.repository_key != packyard_store::db::webhooks::TEST_KEY)
                .then_some(d.repository_key),
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

/// A page of the delivery log, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryPage {
    pub deliveries: Vec<DeliveryView>,
    /// Pass as `before` for the next (older) page; null on the last page.
    pub next: Option<i64>,
}

/// The deliveries older than `before` (all when `None`), at most `limit` (100 when `None`; 1 to 1000).
pub async fn deliveries(
    services: &Services,
    name: &str,
    before: Option<i64>,
    limit: Option<i64>,
) -> AdminResult<DeliveryPage> {
    let hook = find(services, name).await?;
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(AdminError::Invalid("limit: 1 to 1000".into()));
    }
    let mut rows = services.db.list_deliveries(hook.id, before, limit + 1).await?;
    let next = (rows.len() as i64 > limit).then(|| rows[limit as usize - 1].id);
    rows.truncate(limit as usize);
    Ok(DeliveryPage { deliveries: rows.into_iter().map(Into::into).collect(), next })
}
