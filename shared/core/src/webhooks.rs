//! Webhooks: what happened, told to the subscribers' URLs.
//!
//! A change writes its event into `webhook_events` in its own transaction, with one pending
//! delivery per enabled subscription that wants it (the outbox; `Db::enqueue_webhook_event_in`).
//! The workers send the deliveries that are due, each the oldest pending one of its subscription
//! and repository, so a subscriber sees one repository's events in the order they happened. A
//! delivery is a `POST` of the JSON body
//! `{"id": <event id>, "event": "...", "at": "<RFC 3339>", "repository": "<name>"|null, "data": {...}}`
//! with `X-Packyard-Event`, `X-Packyard-Delivery` (the delivery's id: the same on a retry) and
//! `X-Packyard-Signature-256: sha256=<hex HMAC-SHA256 of the body with the subscription's
//! secret>`. A 2xx answer delivers it (never sent again); anything else, or no answer within
//! `webhooks.timeout_ms`, is retried after `webhooks.retry_initial_ms`, doubling up to
//! `webhooks.retry_max_ms`, for `webhooks.retry_for_secs` (a day), then given up (`failed`).
//! Delivery is at least once: a worker that dies after the receiver answered but before it
//! recorded the answer sends it again.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::services::Services;
use packyard_store::db::now_ms;
use packyard_store::db::webhooks::{Attempt, DeliveryRecord, WebhookRecord};

/// The events a subscription may ask for.
pub const EVENTS: &[&str] = &[
    "component.published",
    "component.deleted",
    "repository.created",
    "repository.updated",
    "repository.deleted",
    "cleanup.finished",
    "vulnerability.matched",
    "policy.exception_added",
    "policy.exception_removed",
    "snapshot.created",
    "snapshot.deleted",
    "repository.pinned",
    "repository.unpinned",
    "quota.exceeded",
];

/// The header that carries the body's signature.
pub const SIGNATURE_HEADER: &str = "X-Packyard-Signature-256";

/// The name the subscription's secret is sealed under.
pub fn secret_key(name: &str) -> String {
    format!("webhook:{name}")
}

/// `sha256=<hex>`: the HMAC-SHA256 of `body` with `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length: this never fails.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(secret) else { return String::new() };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The body of a delivery.
pub fn body(d: &DeliveryRecord) -> Vec<u8> {
    serde_json::to_vec(&event_json(d)).unwrap_or_default()
}

/// The body of a batch: `{"batch": [...]}`, each element an event's body with its `delivery` id.
pub fn batch_body(ds: &[DeliveryRecord]) -> Vec<u8> {
    let events: Vec<serde_json::Value> = ds
        .iter()
        .map(|d| {
            let mut v = event_json(d);
            v["delivery"] = d.id.into();
            v
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({ "batch": events })).unwrap_or_default()
}

fn event_json(d: &DeliveryRecord) -> serde_json::Value {
    let data: serde_json::Value = serde_json::from_str(&d.payload).unwrap_or(serde_json::Value::Null);
    let global = d.repository_key.is_empty() || d.repository_key == packyard_store::db::webhooks::TEST_KEY;
    let repository = if global { serde_json::Value::Null } else { d.repository_key.clone().into() };
    let created = packyard_model::time::rfc3339_ms(d.created_at);
    serde_json::json!({
        // The event's number: in commit order (a delivery goes out only once numbered).
        "id": d.seq.unwrap_or(d.event_id),
        "event": d.event,
        "at": created,
        "repository": repository,
        "data": data,
    })
}

/// Subscription-and-repository pairs one round takes, and deliveries per pair.
const ROUND_PAIRS: i64 = 50;
const RUN_LENGTH: i64 = 100;
/// Events one numbering transaction takes (a round takes as many as it needs).
const NUMBERING_BATCH: i64 = 500;
/// Pairs sent to at once: one pair's events go one after another, in order.
const IN_FLIGHT: usize = 8;
/// A run stops taking its next delivery after this long (the rest are due again at once), so
/// that its lease — this, plus one request's time-out, plus a margin — covers every request.
const RUN_BUDGET_MS: i64 = 5_000;

/// Sends the deliveries that are due now (a worker's round): per subscription and repository,
/// its pending deliveries in order, one request each (or one for all, for a subscription that
/// takes batches), stopping at the first failure; several pairs at once. How many deliveries
/// were attempted.
pub async fn deliver_due(services: &Services) -> anyhow::Result<usize> {
    use futures_util::StreamExt as _;
    // Events committed since the last round get their numbers first: they go out in that order.
    loop {
        let numbered = services.db.number_webhook_events(NUMBERING_BATCH).await?;
        if i64::try_from(numbered).unwrap_or(0) < NUMBERING_BATCH {
            break;
        }
    }
    let runs = services.db.due_runs(now_ms(), ROUND_PAIRS, RUN_LENGTH).await?;
    // One run's failure stops no other: each records what it sent.
    let attempted = futures_util::stream::iter(runs)
        .map(|run| deliver_run(services, run))
        .buffer_unordered(IN_FLIGHT)
        .fold(0, |sum, tried| async move {
            match tried {
                Ok(n) => sum + n,
                Err(e) => {
                    tracing::warn!(error = %e, "a webhook run failed; its deliveries are tried again");
                    sum
                }
            }
        })
        .await;
    Ok(attempted)
}

/// One pair's run: leased together, sent in order, recorded together.
async fn deliver_run(services: &Services, run: Vec<DeliveryRecord>) -> anyhow::Result<usize> {
    let cfg = &services.config.webhooks;
    let Some(first) = run.first() else { return Ok(0) };
    let Some(hook) = services.db.webhook_by_id(first.webhook_id).await? else { return Ok(0) };
    let timeout = i64::try_from(cfg.timeout_ms).unwrap_or(60_000);
    let ids: Vec<i64> = run.iter().map(|d| d.id).collect();
    let (taken, lease) = services.db.lease_run(&ids, RUN_BUDGET_MS + timeout + 30_000).await?;
    let run = &run[..taken];
    if run.is_empty() {
        return Ok(0);
    }
    let secret = services
        .security
        .keystore
        .open(&secret_key(&hook.name), &hook.secret_nonce, &hook.secret_sealed)
        .map_err(|e| (None, format!("the subscription's secret cannot be opened ({e}): set it again with PUT")));
    let secret = secret.as_deref();
    let started = std::time::Instant::now();
    let mut attempts = Vec::with_capacity(run.len());
    let mut tried = 0;
    if hook.batch {
        let outcome = send(services, &hook, run, secret).await;
        // Waits count from the answer (or the time-out), one time for the whole batch.
        let at = now_ms();
        for d in run {
            attempts.push(attempt(cfg, (d, lease, at), &hook.name, &outcome));
        }
        tried = run.len();
    } else {
        for d in run {
            if started.elapsed() > std::time::Duration::from_millis(RUN_BUDGET_MS.unsigned_abs()) {
                break;
            }
            let outcome = send(services, &hook, std::slice::from_ref(d), secret).await;
            let failed = outcome.is_err();
            attempts.push(attempt(cfg, (d, lease, now_ms()), &hook.name, &outcome));
            tried += 1;
            // A failure keeps the rest back: they go after it, in order.
            if failed {
                break;
            }
        }
    }
    let released: Vec<(i64, i64)> = run[tried..].iter().map(|d| (d.id, lease)).collect();
    let recorded =
        packyard_store::db::retry_conflicts(|| services.db.record_delivery_attempts(&attempts, &released)).await?;
    if recorded < attempts.len() {
        tracing::warn!(webhook = %hook.name, lost = attempts.len() - recorded, "another worker took deliveries over; its record stands");
    }
    Ok(tried)
}

/// What to record of one delivery's attempt: delivered, or failed and when to try again.
fn attempt(
    cfg: &packyard_model::config::WebhooksConfig,
    (d, lease, at): (&DeliveryRecord, i64, i64),
    hook: &str,
    outcome: &Result<i64, (Option<i64>, String)>,
) -> Attempt {
    match outcome {
        Ok(status) => {
            tracing::debug!(webhook = %hook, delivery = d.id, event = %d.event, "webhook delivered");
            Attempt { id: d.id, lease, delivered: true, status: Some(*status), error: None, retry_at: None }
        }
        Err((status, error)) => {
            let attempts = u32::try_from(d.attempts + 1).unwrap_or(u32::MAX);
            let wait = cfg
                .retry_initial_ms
                .saturating_mul(1u64 << attempts.saturating_sub(1).min(30))
                .min(cfg.retry_max_ms.max(1));
            let retry_at = at + i64::try_from(wait).unwrap_or(i64::MAX / 4);
            let give_up_at =
                d.created_at + i64::try_from(cfg.retry_for_secs.saturating_mul(1000)).unwrap_or(i64::MAX / 4);
            let retry = (retry_at <= give_up_at).then_some(retry_at);
            tracing::warn!(
                webhook = %hook, delivery = d.id, event = %d.event, attempts, error = %error,
                "webhook delivery failed; {}", if retry.is_some() { "retrying later" } else { "given up" }
            );
            Attempt { id: d.id, lease, delivered: false, status: *status, error: Some(error.clone()), retry_at: retry }
        }
    }
}

/// One request with the deliveries `ds` (one; or a batch, for a subscription that takes them):
/// the receiver's status on a 2xx, else the status (if any) and what went wrong — without a
/// request when the subscription's secret could not be opened.
async fn send(
    services: &Services,
    hook: &WebhookRecord,
    ds: &[DeliveryRecord],
    secret: Result<&[u8], &(Option<i64>, String)>,
) -> Result<i64, (Option<i64>, String)> {
    let secret = secret.map_err(Clone::clone)?;
    let (url, name) = (hook.url.as_str(), hook.name.as_str());
    let Some(first) = ds.first() else { return Ok(204) };
    let parsed =
        url::Url::parse(url).map_err(|_| (None, format!("the URL {url:?} does not parse; set it again with PUT")))?;
    // Where the name resolves here but the outbound proxy will connect: checked before sending.
    if let Err(b) = services.webhooks.preflight(&parsed).await {
        return Err((None, format!("refused by the address guard: {b}")));
    }
    let (body, event) = if hook.batch { (batch_body(ds), "batch") } else { (body(first), first.event.as_str()) };
    let deliveries = ds.iter().map(|d| d.id.to_string()).collect::<Vec<_>>().join(",");
    let sent = services
        .webhooks
        .client()
        .post(parsed)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("X-Packyard-Event", event)
        .header("X-Packyard-Delivery", deliveries)
        .header("X-Packyard-Webhook", name)
        .header(SIGNATURE_HEADER, signature(secret, &body))
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => Ok(i64::from(r.status().as_u16())),
        Ok(r) if r.status().is_redirection() => Err((
            Some(i64::from(r.status().as_u16())),
            format!("the receiver answered {} (a redirect, which is not followed: use the URL it names)", r.status()),
        )),
        Ok(r) => Err((Some(i64::from(r.status().as_u16())), format!("the receiver answered {}", r.status()))),
        Err(e) => {
            // The cause in full for the operator's log; the delivery log gets only its class.
            tracing::info!(webhook = name, delivery = first.id, error = %crate::outbound::root_cause(&e), "webhook request failed");
            Err((None, describe(&e, services.config.webhooks.timeout_ms)))
        }
    }
}

/// The class of a failure, for the delivery log. Every way a connection can fail — refused,
/// reset, no route, no answer to the connect — reads the same, and no system error's text is
/// passed on: the log tells an administrator what to look at, never which ports of a host are
/// open.
fn describe(e: &reqwest::Error, timeout_ms: u64) -> String {
    use crate::outbound::Cause;
    match crate::outbound::cause(e) {
        Cause::Blocked(b) => format!("refused by the address guard: {b}"),
        Cause::Dns(d) => format!("DNS: the receiver's host {} does not resolve", d.host),
        // Refused, unreachable, silent, a failed TLS handshake, a connection cut: one class, so
        // the delivery log cannot tell an open port from a closed one (the server's log has the
        // cause).
        Cause::Tls(_)
        | Cause::Connection(_)
        | Cause::ConnectTimeout
        | Cause::Connect
        | Cause::Timeout
        | Cause::Other => {
            format!(
                "cannot connect to the receiver, or no answer: the connection or its TLS handshake failed, or nothing came within webhooks.timeout_ms ({timeout_ms} ms); the server's log has the cause"
            )
        }
    }
}

/// Forgets delivered and failed deliveries past `webhooks.log_retention_secs`.
pub async fn prune(services: &Services) -> anyhow::Result<u64> {
    let keep = i64::try_from(services.config.webhooks.log_retention_secs.saturating_mul(1000)).unwrap_or(i64::MAX / 4);
    Ok(services.db.prune_deliveries(now_ms() - keep).await?)
}
