//! Storage of webhooks: the subscriptions, the events (an outbox written in the transaction of
//! the change each describes) and the deliveries, one per event and matching subscription.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{now_ms, opt_text, text, Db, DbError, DbResult};
use crate::{insert_id, sql};

/// A subscription, its secret sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRecord {
    pub id: i64,
    pub name: String,
    pub url: String,
    /// The event names, as a JSON array.
    pub events: Vec<String>,
    /// Only this repository's events; `None`: every repository's, and the global ones.
    pub repository: Option<String>,
    pub secret_nonce: String,
    pub secret_sealed: String,
    pub enabled: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a subscription is made of (its secret already sealed).
#[derive(Debug, Clone, Copy)]
pub struct WebhookWrite<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub repository: Option<&'a str>,
    pub secret: (&'a str, &'a str),
    pub enabled: bool,
}

/// One delivery (of one event to one subscription) and its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub id: i64,
    pub webhook_id: i64,
    pub event_id: i64,
    pub event: String,
    pub repository_key: String,
    /// `pending`, `delivered` or `failed` (retried until `retry_for` ran out).
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
    pub payload: String,
}

fn parse_webhook(r: &AnyRow) -> DbResult<WebhookRecord> {
    let events = text(r, "events")?;
    Ok(WebhookRecord {
        id: r.try_get("id")?,
        name: text(r, "name")?,
        url: text(r, "url")?,
        events: serde_json::from_str(&events).map_err(|e| DbError::Corrupt(format!("webhook events: {e}")))?,
        repository: opt_text(r, "repository")?,
        secret_nonce: text(r, "secret_nonce")?,
        secret_sealed: text(r, "secret_sealed")?,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn parse_delivery(r: &AnyRow) -> DbResult<DeliveryRecord> {
    Ok(DeliveryRecord {
        id: r.try_get("id")?,
        webhook_id: r.try_get("webhook_id")?,
        event_id: r.try_get("event_id")?,
        event: text(r, "event")?,
        repository_key: text(r, "repository_key")?,
        state: text(r, "state")?,
        attempts: r.try_get("attempts")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        last_status: r.try_get("last_status")?,
        last_error: opt_text(r, "last_error")?,
        created_at: r.try_get("created_at")?,
        delivered_at: r.try_get("delivered_at")?,
        payload: text(r, "payload")?,
    })
}

macro_rules! webhook_select {
    () => {
        "SELECT id, name, url, events, repository, secret_nonce, secret_sealed, enabled, created_at, updated_at FROM webhooks"
    };
}

macro_rules! delivery_select {
    () => {
        "SELECT d.id, d.webhook_id, d.event_id, e.event, d.repository_key, d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error, d.created_at, d.delivered_at, e.payload FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id"
    };
}

fn events_json(events: &[String]) -> DbResult<String> {
    serde_json::to_string(events).map_err(|e| DbError::Corrupt(e.to_string()))
}

impl Db {
    pub async fn insert_webhook(&self, name: &str, w: &WebhookWrite<'_>) -> DbResult<()> {
        let now = now_ms();
        let events = events_json(w.events)?;
        let insert = sql!("webhooks.insert", "INSERT INTO webhooks (name, url, events, repository, secret_nonce, secret_sealed, enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
        self.bound(
            insert,
            (name, w.url, events.as_str(), w.repository, w.secret.0, w.secret.1, i64::from(w.enabled), now, now),
        )
        .execute(self.pool())
        .await
        .map_err(|e| match DbError::from(e) {
            DbError::Conflict(_) => DbError::Conflict(format!("webhook {name} already exists")),
            other => other,
        })?;
        Ok(())
    }

    pub async fn update_webhook(&self, name: &str, w: &WebhookWrite<'_>) -> DbResult<()> {
        let events = events_json(w.events)?;
        let update = sql!("webhooks.update", "UPDATE webhooks SET url = $1, events = $2, repository = $3, secret_nonce = $4, secret_sealed = $5, enabled = $6, updated_at = $7 WHERE name = $8");
        let done = self
            .bound(
                update,
                (w.url, events.as_str(), w.repository, w.secret.0, w.secret.1, i64::from(w.enabled), now_ms(), name),
            )
            .execute(self.pool())
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        Ok(())
    }

    pub async fn delete_webhook(&self, name: &str) -> DbResult<()> {
        let done = self
            .query(sql!("webhooks.delete", "DELETE FROM webhooks WHERE name = $1"))
            .bind(name)
            .execute(self.pool())
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        Ok(())
    }

    pub async fn webhook(&self, name: &str) -> DbResult<Option<WebhookRecord>> {
        let row = self
            .query(sql!("webhooks.get", concat!(webhook_select!(), " WHERE name = $1")))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_webhook).transpose()
    }

    pub async fn webhook_by_id(&self, id: i64) -> DbResult<Option<WebhookRecord>> {
        let row = self
            .query(sql!("webhooks.get_id", concat!(webhook_select!(), " WHERE id = $1")))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_webhook).transpose()
    }

    pub async fn list_webhooks(&self) -> DbResult<Vec<WebhookRecord>> {
        let rows = self
            .query(sql!("webhooks.list", concat!(webhook_select!(), " ORDER BY name")))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(parse_webhook).collect()
    }

    /// Records `event` (about `repository`, `None` for a global one) with its JSON `payload` in the
    /// caller's transaction, with one pending delivery per enabled subscription that wants it.
    /// Nothing is written when none does. Returns how many deliveries were queued.
    pub async fn enqueue_webhook_event_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        event: &str,
        repository: Option<&str>,
        payload: &str,
    ) -> DbResult<u64> {
        let quoted = format!("%\"{event}\"%");
        let wanted =
            sql!("webhooks.matching", "SELECT id, repository FROM webhooks WHERE enabled = 1 AND events LIKE $1");
        let rows = self.bound(wanted, (quoted.as_str(),)).fetch_all(&mut **tx).await?;
        let mut hooks = Vec::new();
        for r in &rows {
            let only = opt_text(r, "repository")?;
            if only.is_none() || only.as_deref() == repository {
                hooks.push(r.try_get::<i64, _>("id")?);
            }
        }
        if hooks.is_empty() {
            return Ok(0);
        }
        let now = now_ms();
        let key = repository.unwrap_or_default();
        let insert = insert_id!(
            "webhook_events.insert",
            "INSERT INTO webhook_events (event, repository_key, payload, created_at) VALUES ($1, $2, $3, $4)"
        );
        let event_id = self.insert_id(self.bound(insert, (event, key, payload, now)), &mut **tx).await?;
        let delivery = sql!("webhook_deliveries.insert", "INSERT INTO webhook_deliveries (webhook_id, event_id, repository_key, state, attempts, next_attempt_at, leased_until, created_at) VALUES ($1, $2, $3, 'pending', 0, $4, 0, $5)");
        for hook in &hooks {
            self.bound(delivery, (*hook, event_id, key, now, now)).execute(&mut **tx).await?;
        }
        Ok(hooks.len() as u64)
    }

    /// [`Self::enqueue_webhook_event_in`] in a transaction of its own.
    pub async fn enqueue_webhook_event(&self, event: &str, repository: Option<&str>, payload: &str) -> DbResult<u64> {
        let mut tx = self.begin().await?;
        let n = self.enqueue_webhook_event_in(&mut tx, event, repository, payload).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// Up to `limit` deliveries due now, each the oldest pending one of its subscription and
    /// repository (so that each pair's events go out in order), none leased by another worker.
    pub async fn due_deliveries(&self, now: i64, limit: i64) -> DbResult<Vec<DeliveryRecord>> {
        let due = sql!("webhook_deliveries.due", concat!(delivery_select!(), " WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND d.leased_until < $2 AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.enabled = 1) AND NOT EXISTS (SELECT 1 FROM webhook_deliveries o WHERE o.webhook_id = d.webhook_id AND o.repository_key = d.repository_key AND o.state = 'pending' AND o.id < d.id) ORDER BY d.id LIMIT $3"));
        let rows = self.bound(due, (now, now, limit)).fetch_all(self.pool()).await?;
        rows.iter().map(parse_delivery).collect()
    }

    /// Takes delivery `id` for `lease_ms` from now (one worker sends it at a time): the lease's
    /// token, which recording the attempt needs, or `None` when another worker holds it.
    pub async fn lease_delivery(&self, id: i64, lease_ms: i64) -> DbResult<Option<i64>> {
        let now = now_ms();
        let until = now + lease_ms;
        let lease = sql!(
            "webhook_deliveries.lease",
            "UPDATE webhook_deliveries SET leased_until = $1 WHERE id = $2 AND state = 'pending' AND leased_until < $3"
        );
        let taken = self.bound(lease, (until, id, now)).execute(self.pool()).await?.rows_affected() == 1;
        Ok(taken.then_some(until))
    }

    /// Records an attempt made under lease `lease`: delivered (a 2xx), or failed with
    /// `status`/`error` and tried again at `retry_at` — or given up (`failed`) when `retry_at` is
    /// `None`. `false` when the lease was lost meanwhile (another worker took the delivery over;
    /// its record stands).
    pub async fn record_delivery_attempt(
        &self,
        (id, lease): (i64, i64),
        delivered: bool,
        status: Option<i64>,
        error: Option<&str>,
        retry_at: Option<i64>,
    ) -> DbResult<bool> {
        let now = now_ms();
        let (state, next) = match (delivered, retry_at) {
            (true, _) => ("delivered", now),
            (false, Some(at)) => ("pending", at),
            (false, None) => ("failed", now),
        };
        let delivered_at = delivered.then_some(now);
        let update = sql!("webhook_deliveries.attempt", "UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, next_attempt_at = $2, leased_until = 0, last_status = $3, last_error = $4, delivered_at = $5 WHERE id = $6 AND state = 'pending' AND leased_until = $7");
        let done =
            self.bound(update, (state, next, status, error, delivered_at, id, lease)).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }

    /// A subscription's delivery log, newest first, before delivery id `before`.
    pub async fn list_deliveries(
        &self,
        webhook_id: i64,
        before: Option<i64>,
        limit: i64,
    ) -> DbResult<Vec<DeliveryRecord>> {
        let page = sql!(
            "webhook_deliveries.log",
            concat!(delivery_select!(), " WHERE d.webhook_id = $1 AND d.id < $2 ORDER BY d.id DESC LIMIT $3")
        );
        let rows = self.bound(page, (webhook_id, before.unwrap_or(i64::MAX), limit)).fetch_all(self.pool()).await?;
        rows.iter().map(parse_delivery).collect()
    }

    /// Forgets delivered and failed deliveries older than `before` (ms), and the events no
    /// delivery needs any more. How many deliveries went.
    pub async fn prune_deliveries(&self, before: i64) -> DbResult<u64> {
        let old = sql!(
            "webhook_deliveries.prune",
            "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND created_at < $1"
        );
        let gone = self.bound(old, (before,)).execute(self.pool()).await?.rows_affected();
        let orphans = sql!("webhook_events.prune", "DELETE FROM webhook_events WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)");
        self.bound(orphans, (before,)).execute(self.pool()).await?;
        Ok(gone)
    }
}
