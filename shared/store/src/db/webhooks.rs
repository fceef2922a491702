//! Storage of webhooks: the subscriptions, the events (an outbox written in the transaction of
//! the change each describes) and the deliveries, one per event and matching subscription.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{now_ms, opt_text, text, Db, DbError, DbResult};
use crate::{insert_id, sql};

/// The repository key of test deliveries: a line of their own per subscription (deliveries of
/// one subscription and repository key go out in order), read back as "no repository".
pub const TEST_KEY: &str = "\u{1}test";

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
    /// Several pending events of one repository go out in one request (`{"batch": [...]}`).
    pub batch: bool,
    /// Only component events whose content this content selector selects (other events go
    /// out as without it).
    pub content_selector: Option<String>,
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
    pub batch: bool,
    pub content_selector: Option<&'a str>,
}

/// What a component event is about, for the subscriptions narrowed by a content selector.
#[derive(Debug, Clone, Copy)]
pub struct EventContent<'a> {
    pub format: &'a str,
    /// Below the repository, without a leading `/`.
    pub path: &'a str,
    pub name: &'a str,
    pub version: &'a str,
    pub group: &'a str,
}

/// What an event is about, for the subscriptions narrowed by a content selector.
#[derive(Debug, Clone, Copy)]
enum About<'a> {
    /// Not content (a repository's change, a cleanup run): every subscription that wants it.
    Other,
    /// A component (what of it is known).
    Content(Option<EventContent<'a>>),
}

/// One attempt at a delivery, to record ([`Db::record_delivery_attempts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub id: i64,
    /// The lease it was made under ([`Db::lease_run`]).
    pub lease: i64,
    pub delivered: bool,
    pub status: Option<i64>,
    pub error: Option<String>,
    /// When to try again after a failure; `None`: give up (`failed`).
    pub retry_at: Option<i64>,
}

/// One delivery (of one event to one subscription) and its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub id: i64,
    pub webhook_id: i64,
    pub event_id: i64,
    /// The event's number, in the order events committed ([`Db::number_webhook_events`]);
    /// `None` until a worker numbers it (deliveries go out in this order, once numbered).
    pub seq: Option<i64>,
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
        batch: r.try_get::<i64, _>("batch")? != 0,
        content_selector: opt_text(r, "content_selector")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn parse_delivery(r: &AnyRow) -> DbResult<DeliveryRecord> {
    Ok(DeliveryRecord {
        id: r.try_get("id")?,
        webhook_id: r.try_get("webhook_id")?,
        event_id: r.try_get("event_id")?,
        seq: r.try_get("seq")?,
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
        "SELECT id, name, url, events, repository, secret_nonce, secret_sealed, enabled, batch, content_selector, created_at, updated_at FROM webhooks"
    };
}

macro_rules! delivery_select {
    () => {
        "SELECT d.id, d.webhook_id, d.event_id, e.seq, e.event, d.repository_key, d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error, d.created_at, d.delivered_at, e.payload FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id"
    };
}

fn events_json(events: &[String]) -> DbResult<String> {
    serde_json::to_string(events).map_err(|e| DbError::Corrupt(e.to_string()))
}

impl Db {
    pub async fn insert_webhook(&self, name: &str, w: &WebhookWrite<'_>) -> DbResult<()> {
        let now = now_ms();
        let events = events_json(w.events)?;
        let insert = sql!("webhooks.insert", "INSERT INTO webhooks (name, url, events, repository, secret_nonce, secret_sealed, enabled, batch, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)");
        let (enabled, batch) = (i64::from(w.enabled), i64::from(w.batch));
        let mut tx = self.begin().await?;
        self.bound(
            insert,
            (name, w.url, events.as_str(), w.repository, w.secret.0, w.secret.1, enabled, batch, now, now),
        )
        .execute(&mut *tx)
        .await
        .map_err(|e| match DbError::from(e) {
            DbError::Conflict(_) => DbError::Conflict(format!("webhook {name} already exists")),
            other => other,
        })?;
        self.set_webhook_selector(&mut tx, name, w.content_selector).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn set_webhook_selector(
        &self,
        tx: &mut Transaction<'_, Any>,
        name: &str,
        selector: Option<&str>,
    ) -> DbResult<()> {
        let set = sql!("webhooks.set_selector", "UPDATE webhooks SET content_selector = $1 WHERE name = $2");
        self.bound(set, (selector, name)).execute(&mut **tx).await?;
        Ok(())
    }

    pub async fn update_webhook(&self, name: &str, w: &WebhookWrite<'_>) -> DbResult<()> {
        let events = events_json(w.events)?;
        let update = sql!("webhooks.update", "UPDATE webhooks SET url = $1, events = $2, repository = $3, secret_nonce = $4, secret_sealed = $5, enabled = $6, batch = $7, updated_at = $8 WHERE name = $9");
        let (enabled, batch) = (i64::from(w.enabled), i64::from(w.batch));
        let mut tx = self.begin().await?;
        let done = self
            .bound(
                update,
                (w.url, events.as_str(), w.repository, w.secret.0, w.secret.1, enabled, batch, now_ms(), name),
            )
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.set_webhook_selector(&mut tx, name, w.content_selector).await?;
        tx.commit().await?;
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
        self.enqueue_event_in(tx, event, (repository, About::Other), payload).await
    }

    /// A component event: as [`Db::enqueue_webhook_event_in`], and a subscription narrowed by a
    /// content selector gets it only when the selector selects `content` (`None`: not known, so
    /// not selected; a selector since deleted, or one that no longer parses, selects nothing).
    pub async fn enqueue_component_event_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        event: &str,
        (repository, content): (&str, Option<EventContent<'_>>),
        payload: &str,
    ) -> DbResult<u64> {
        self.enqueue_event_in(tx, event, (Some(repository), About::Content(content)), payload).await
    }

    async fn enqueue_event_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        event: &str,
        (repository, about): (Option<&str>, About<'_>),
        payload: &str,
    ) -> DbResult<u64> {
        let quoted = format!("%\"{event}\"%");
        let wanted = sql!(
            "webhooks.matching",
            "SELECT id, repository, content_selector FROM webhooks WHERE enabled = 1 AND events LIKE $1"
        );
        let rows = self.bound(wanted, (quoted.as_str(),)).fetch_all(&mut **tx).await?;
        let mut hooks = Vec::new();
        for r in &rows {
            let only = opt_text(r, "repository")?;
            if !(only.is_none() || only.as_deref() == repository) {
                continue;
            }
            if let (Some(name), About::Content(content)) = (opt_text(r, "content_selector")?, about) {
                let Some(c) = content else { continue };
                if !self.selects_in(tx, &name, (repository.unwrap_or_default(), c)).await? {
                    continue;
                }
            }
            hooks.push(r.try_get::<i64, _>("id")?);
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

    /// Whether content selector `name` selects `content` of `repository`.
    async fn selects_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        name: &str,
        (repository, c): (&str, EventContent<'_>),
    ) -> DbResult<bool> {
        let get = sql!("content_selectors.expression", "SELECT expression FROM content_selectors WHERE name = $1");
        let Some(row) = self.bound(get, (name,)).fetch_optional(&mut **tx).await? else { return Ok(false) };
        let Ok(selector) = packyard_model::selector::Selector::parse(&text(&row, "expression")?) else {
            return Ok(false);
        };
        let path = format!("/{}", c.path);
        Ok(selector.matches(&packyard_model::selector::Content {
            format: c.format,
            repository,
            path: &path,
            name: Some(c.name),
            version: Some(c.version),
            group: Some(c.group),
        }))
    }

    /// Records a test `event` with its `payload` and one pending delivery of it to subscription
    /// `webhook_id` alone (the administration's "send a test event"); returns the delivery's id.
    /// It goes in a line of its own ([`TEST_KEY`]), so that it never waits behind the
    /// subscription's other deliveries backing off.
    pub async fn enqueue_test_delivery(&self, webhook_id: i64, event: &str, payload: &str) -> DbResult<i64> {
        let mut tx = self.begin().await?;
        let now = now_ms();
        let insert = insert_id!(
            "webhook_events.insert",
            "INSERT INTO webhook_events (event, repository_key, payload, created_at) VALUES ($1, $2, $3, $4)"
        );
        let event_id = self.insert_id(self.bound(insert, (event, TEST_KEY, payload, now)), &mut *tx).await?;
        let delivery = insert_id!("webhook_deliveries.insert_test", "INSERT INTO webhook_deliveries (webhook_id, event_id, repository_key, state, attempts, next_attempt_at, leased_until, created_at) VALUES ($1, $2, $3, 'pending', 0, $4, 0, $5)");
        let id = self.insert_id(self.bound(delivery, (webhook_id, event_id, TEST_KEY, now, now)), &mut *tx).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Whether an enabled subscription wants `event` (a bulk producer asks once, not per event).
    pub async fn webhooks_want(&self, event: &str) -> DbResult<bool> {
        let quoted = format!("%\"{event}\"%");
        let s = sql!("webhooks.wanting", "SELECT COUNT(*) AS n FROM webhooks WHERE enabled = 1 AND events LIKE $1");
        let n: i64 = self.bound(s, (quoted.as_str(),)).fetch_one(self.pool()).await?.try_get("n")?;
        Ok(n > 0)
    }

    /// [`Self::enqueue_webhook_event_in`] in a transaction of its own.
    pub async fn enqueue_webhook_event(&self, event: &str, repository: Option<&str>, payload: &str) -> DbResult<u64> {
        let mut tx = self.begin().await?;
        let n = self.enqueue_webhook_event_in(&mut tx, event, repository, payload).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// [`Db::enqueue_component_event_in`] in a transaction of its own.
    pub async fn enqueue_component_event(
        &self,
        event: &str,
        (repository, content): (&str, Option<EventContent<'_>>),
        payload: &str,
    ) -> DbResult<u64> {
        let mut tx = self.begin().await?;
        let n = self.enqueue_component_event_in(&mut tx, event, (repository, content), payload).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// Numbers up to `limit` committed events that have no number yet, after the highest number
    /// given so far: how many (their deliveries go out in this order). One numbering runs at a time (it locks the
    /// `sequences` row), and it sees only committed events, so the numbers follow the order the
    /// events committed, not the order their rows were inserted: a reader that has seen number
    /// `n` never sees a smaller one appear later. An event whose writer has not committed yet is
    /// numbered by a later round, after everything numbered before.
    pub async fn number_webhook_events(&self, limit: i64) -> DbResult<usize> {
        let unnumbered =
            sql!("webhook_events.unnumbered", "SELECT id FROM webhook_events WHERE seq IS NULL ORDER BY id LIMIT $1");
        // Most rounds find none: then no transaction (nor SQLite's writer lock) is taken.
        if self.bound(unnumbered, (limit,)).fetch_optional(self.pool()).await?.is_none() {
            return Ok(0);
        }
        let lock = crate::for_update!("sequences.lock", "SELECT value FROM sequences WHERE name = $1");
        let number = sql!("webhook_events.number", "UPDATE webhook_events SET seq = $1 WHERE id = $2 AND seq IS NULL");
        let advance = sql!("sequences.advance", "UPDATE sequences SET value = $1 WHERE name = $2");
        let mut tx = self.begin().await?;
        let Some(row) = self.bound(lock, ("webhook_events",)).fetch_optional(&mut *tx).await? else {
            return Err(DbError::Corrupt("the sequences row webhook_events is missing".into()));
        };
        let mut last: i64 = row.try_get("value")?;
        // Read again under the lock: what another numbering took meanwhile is numbered.
        let rows = self.bound(unnumbered, (limit,)).fetch_all(&mut *tx).await?;
        let mut numbered = 0;
        for r in &rows {
            let id: i64 = r.try_get("id")?;
            // By primary key: the row alone is locked (no gap a writer's new event would wait on).
            if self.bound(number, (last + 1, id)).execute(&mut *tx).await?.rows_affected() == 1 {
                last += 1;
                numbered += 1;
            }
        }
        self.bound(advance, (last, "webhook_events")).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(numbered)
    }

    /// Up to `limit` deliveries due now, each the oldest pending one of its subscription and
    /// repository by its event's number (so that each pair's events go out in the order they
    /// committed), none leased by another worker; deliveries not numbered yet wait.
    pub async fn due_deliveries(&self, now: i64, limit: i64) -> DbResult<Vec<DeliveryRecord>> {
        let due = sql!("webhook_deliveries.due", concat!(delivery_select!(), " WHERE d.state = 'pending' AND e.seq IS NOT NULL AND d.next_attempt_at <= $1 AND d.leased_until < $2 AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND w.enabled = 1) AND NOT EXISTS (SELECT 1 FROM webhook_deliveries o JOIN webhook_events oe ON oe.id = o.event_id WHERE o.webhook_id = d.webhook_id AND o.repository_key = d.repository_key AND o.state = 'pending' AND oe.seq < e.seq) ORDER BY e.seq LIMIT $3"));
        let rows = self.bound(due, (now, now, limit)).fetch_all(self.pool()).await?;
        rows.iter().map(parse_delivery).collect()
    }

    /// The runs due now: for up to `pairs` subscription-and-repository pairs whose oldest
    /// pending delivery is due and not leased ([`Db::due_deliveries`]), that delivery and the
    /// pending ones after it, in order, up to `per_run`, as far as each is due.
    pub async fn due_runs(&self, now: i64, pairs: i64, per_run: i64) -> DbResult<Vec<Vec<DeliveryRecord>>> {
        let run = sql!(
            "webhook_deliveries.run",
            concat!(
                delivery_select!(),
                " WHERE d.webhook_id = $1 AND d.repository_key = $2 AND d.state = 'pending' AND e.seq >= $3 ORDER BY e.seq LIMIT $4"
            )
        );
        let mut runs = Vec::new();
        for head in self.due_deliveries(now, pairs).await? {
            let rows = self
                .bound(run, (head.webhook_id, head.repository_key.as_str(), head.seq, per_run.max(1)))
                .fetch_all(self.pool())
                .await?;
            let mut deliveries = Vec::with_capacity(rows.len());
            for r in &rows {
                let d = parse_delivery(r)?;
                if d.next_attempt_at > now {
                    break;
                }
                deliveries.push(d);
            }
            if !deliveries.is_empty() {
                runs.push(deliveries);
            }
        }
        Ok(runs)
    }

    /// Leases the deliveries `ids` (a run, in order) for `lease_ms`, in one transaction, as far
    /// as each is still pending, due, and not leased by another worker (a list read a while ago
    /// may be stale): how many (a prefix of `ids`) and the lease's token.
    pub async fn lease_run(&self, ids: &[i64], lease_ms: i64) -> DbResult<(usize, i64)> {
        let now = now_ms();
        let until = now + lease_ms;
        let lease = sql!(
            "webhook_deliveries.lease",
            "UPDATE webhook_deliveries SET leased_until = $1 WHERE id = $2 AND state = 'pending' AND leased_until < $3 AND next_attempt_at <= $4"
        );
        let mut tx = self.begin().await?;
        let mut taken = 0;
        for id in ids {
            if self.bound(lease, (until, *id, now, now)).execute(&mut *tx).await?.rows_affected() != 1 {
                break;
            }
            taken += 1;
        }
        tx.commit().await?;
        Ok((taken, until))
    }

    /// Records attempts made under their leases — delivered (a 2xx), or failed and tried again
    /// at `retry_at`, or given up (`failed`) — and releases the leases of `released` (leased but
    /// not tried: due again at once), in one transaction. How many attempts were recorded: one
    /// whose lease was lost meanwhile (another worker took the delivery over) is not, and that
    /// worker's record stands.
    pub async fn record_delivery_attempts(&self, attempts: &[Attempt], released: &[(i64, i64)]) -> DbResult<usize> {
        let now = now_ms();
        let update = sql!("webhook_deliveries.attempt", "UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, next_attempt_at = $2, leased_until = 0, last_status = $3, last_error = $4, delivered_at = $5 WHERE id = $6 AND state = 'pending' AND leased_until = $7");
        let release = sql!(
            "webhook_deliveries.release",
            "UPDATE webhook_deliveries SET leased_until = 0 WHERE id = $1 AND state = 'pending' AND leased_until = $2"
        );
        let mut tx = self.begin().await?;
        let mut recorded = 0;
        for a in attempts {
            let (state, next) = match (a.delivered, a.retry_at) {
                (true, _) => ("delivered", now),
                (false, Some(at)) => ("pending", at),
                (false, None) => ("failed", now),
            };
            let delivered_at = a.delivered.then_some(now);
            let binds = (state, next, a.status, a.error.as_deref(), delivered_at, a.id, a.lease);
            recorded += usize::from(self.bound(update, binds).execute(&mut *tx).await?.rows_affected() == 1);
        }
        for (id, lease) in released {
            self.bound(release, (*id, *lease)).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(recorded)
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
