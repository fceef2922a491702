//! The optional fast paths: Redis (a shared copy of the watermarks plus pub/sub invalidation)
//! and RabbitMQ (wake-ups for the workers). Both only make things faster: every caller treats
//! an error as "use the database", and nothing here ever blocks a write for long.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use tokio::sync::Mutex;

/// What changed; each maps to one database watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    Security,
    Repositories,
    Publications,
}

impl Changed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Security => "security",
            Self::Repositories => "repositories",
            Self::Publications => "publications",
        }
    }
}

const CHANNEL: &str = "packyard:invalidate";
const KEYS: [&str; 3] = ["packyard:wm:security", "packyard:wm:repositories", "packyard:wm:publications"];
/// How long a Redis or RabbitMQ call may take before it counts as down.
const QUICK: Duration = Duration::from_millis(500);

fn millis_now() -> i64 {
    packyard_store::db::now_ms()
}

/// Redis: shared watermark counters and the invalidation channel.
pub struct Redis {
    client: redis::Client,
    metrics: Arc<packyard_store::metrics::Metrics>,
    conn: Mutex<Option<redis::aio::MultiplexedConnection>>,
    /// After a failure, no new connection attempt before this time (ms).
    retry_after: AtomicI64,
}

impl Redis {
    pub fn new(url: &str, metrics: Arc<packyard_store::metrics::Metrics>) -> Result<Self, redis::RedisError> {
        Ok(Self { client: redis::Client::open(url)?, metrics, conn: Mutex::new(None), retry_after: AtomicI64::new(0) })
    }

    /// A failed call: counted in `packyard_dependency_errors_total{dependency="redis"}`.
    fn failed(&self) {
        self.metrics.dependency_errors_total.with_label_values(&["redis"]).inc();
    }

    async fn connection(&self) -> Option<redis::aio::MultiplexedConnection> {
        let mut guard = self.conn.lock().await;
        if let Some(c) = guard.as_ref() {
            return Some(c.clone());
        }
        if millis_now() < self.retry_after.load(Ordering::Acquire) {
            return None;
        }
        match tokio::time::timeout(QUICK, self.client.get_multiplexed_async_connection()).await {
            Ok(Ok(c)) => {
                *guard = Some(c.clone());
                Some(c)
            }
            Ok(Err(e)) => {
                self.failed();
                tracing::warn!(error = %e, "Redis unavailable; using the database");
                self.retry_after.store(millis_now() + 1_000, Ordering::Release);
                None
            }
            Err(_) => {
                self.failed();
                tracing::warn!("Redis did not answer in time; using the database");
                self.retry_after.store(millis_now() + 1_000, Ordering::Release);
                None
            }
        }
    }

    async fn forget(&self) {
        *self.conn.lock().await = None;
        self.retry_after.store(millis_now() + 1_000, Ordering::Release);
    }

    /// Bumps the shared copy of a watermark and tells every replica. Best effort.
    pub async fn announce(&self, what: Changed) -> bool {
        let Some(mut c) = self.connection().await else { return false };
        let key = KEYS[what as usize];
        let done = tokio::time::timeout(QUICK, async {
            redis::pipe().incr(key, 1).ignore().publish(CHANNEL, what.as_str()).ignore().query_async::<()>(&mut c).await
        })
        .await;
        match done {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                self.failed();
                tracing::warn!(error = %e, "cannot announce a change on Redis");
                self.forget().await;
                false
            }
            Err(_) => {
                self.failed();
                self.forget().await;
                false
            }
        }
    }

    /// The shared watermark counters, or `None` when Redis is unavailable.
    pub async fn watermarks(&self) -> Option<[i64; 3]> {
        let mut c = self.connection().await?;
        let got = tokio::time::timeout(QUICK, async {
            redis::cmd("MGET").arg(&KEYS[..]).query_async::<Vec<Option<i64>>>(&mut c).await
        })
        .await;
        match got {
            Ok(Ok(v)) if v.len() == 3 => Some([v[0].unwrap_or(0), v[1].unwrap_or(0), v[2].unwrap_or(0)]),
            _ => {
                self.failed();
                self.forget().await;
                None
            }
        }
    }

    /// The failed logins counted under `key` and the milliseconds before they are forgotten;
    /// `None` when Redis is unavailable (the caller asks the database instead).
    pub async fn login_failures(&self, key: &str) -> Option<(i64, i64)> {
        let mut c = self.connection().await?;
        let key = format!("packyard:login:{key}");
        let got = tokio::time::timeout(QUICK, async {
            redis::pipe().get(&key).pttl(&key).query_async::<(Option<i64>, i64)>(&mut c).await
        })
        .await;
        match got {
            Ok(Ok((count, ttl))) => Some((count.unwrap_or(0), ttl.max(0))),
            _ => {
                self.failed();
                self.forget().await;
                None
            }
        }
    }

    /// Counts one failed login under `key`; the count expires `memory_ms` after the last one
    /// (so its time to live tells how long ago that was). `false` when Redis is unavailable.
    pub async fn record_login_failure(&self, key: &str, memory_ms: u64) -> bool {
        let Some(mut c) = self.connection().await else { return false };
        let key = format!("packyard:login:{key}");
        let done = tokio::time::timeout(QUICK, async {
            // One transaction: the count and its new expiry together.
            redis::pipe()
                .atomic()
                .incr(&key, 1)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(memory_ms)
                .ignore()
                .query_async::<()>(&mut c)
                .await
        })
        .await;
        if matches!(done, Ok(Ok(()))) {
            return true;
        }
        self.failed();
        self.forget().await;
        false
    }

    /// Forgets the failed logins under `key`. `false` when Redis is unavailable.
    pub async fn clear_login_failures(&self, key: &str) -> bool {
        let Some(mut c) = self.connection().await else { return false };
        let key = format!("packyard:login:{key}");
        let done =
            tokio::time::timeout(QUICK, async { redis::cmd("DEL").arg(&key).query_async::<()>(&mut c).await }).await;
        if matches!(done, Ok(Ok(()))) {
            return true;
        }
        self.failed();
        self.forget().await;
        false
    }

    /// Listens for invalidations forever, calling `on_change` for each; reconnects with backoff.
    pub async fn listen(self: Arc<Self>, on_change: impl Fn() + Send + Sync + 'static) {
        let mut backoff = Duration::from_millis(200);
        loop {
            match self.client.get_async_pubsub().await {
                Ok(mut pubsub) => {
                    if pubsub.subscribe(CHANNEL).await.is_ok() {
                        backoff = Duration::from_millis(200);
                        // Anything may have changed while we were not listening.
                        on_change();
                        let mut messages = pubsub.on_message();
                        while messages.next().await.is_some() {
                            on_change();
                        }
                    }
                    self.failed();
                    tracing::warn!("Redis subscription ended; reconnecting");
                }
                Err(e) => {
                    self.failed();
                    tracing::debug!(error = %e, "Redis subscription unavailable");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }
}

const QUEUE: &str = "packyard.wakeups";
/// How often every process with the broker looks for outbox events no process relayed.
const RELAY_SWEEP: Duration = Duration::from_secs(1);
/// Outbox events noted relayed per wake-up at most.
const RELAY_BATCH: i64 = 500;

/// RabbitMQ: durable wake-up queue with publisher confirms.
pub struct Amqp {
    url: String,
    metrics: Arc<packyard_store::metrics::Metrics>,
    channel: Mutex<Option<(Connection, lapin::Channel)>>,
    retry_after: AtomicI64,
}

impl Amqp {
    pub fn new(url: &str, metrics: Arc<packyard_store::metrics::Metrics>) -> Self {
        Self { url: url.to_string(), metrics, channel: Mutex::new(None), retry_after: AtomicI64::new(0) }
    }

    /// A failed call: counted in `packyard_dependency_errors_total{dependency="rabbitmq"}`.
    fn failed(&self) {
        self.metrics.dependency_errors_total.with_label_values(&["rabbitmq"]).inc();
    }

    async fn open(url: &str) -> Result<(Connection, lapin::Channel), lapin::Error> {
        let conn = Connection::connect(url, ConnectionProperties::default()).await?;
        let ch = conn.create_channel().await?;
        ch.queue_declare(
            QUEUE.into(),
            QueueDeclareOptions { durable: true, ..Default::default() },
            FieldTable::default(),
        )
        .await?;
        ch.confirm_select(ConfirmSelectOptions::default()).await?;
        Ok((conn, ch))
    }

    /// Publishes one persistent wake-up and waits for the broker's confirm (the relay notes
    /// outbox events relayed only then).
    async fn publish_wakeup(&self) -> bool {
        let mut guard = self.channel.lock().await;
        if guard.is_none() {
            if millis_now() < self.retry_after.load(Ordering::Acquire) {
                return false;
            }
            match tokio::time::timeout(QUICK * 2, Self::open(&self.url)).await {
                Ok(Ok(c)) => *guard = Some(c),
                _ => {
                    self.failed();
                    tracing::warn!("RabbitMQ unavailable; workers will find the change by polling");
                    self.retry_after.store(millis_now() + 1_000, Ordering::Release);
                    return false;
                }
            }
        }
        let Some((_, ch)) = guard.as_ref() else { return false };
        let props = BasicProperties::default().with_delivery_mode(2);
        let sent = tokio::time::timeout(QUICK, async {
            ch.basic_publish("".into(), QUEUE.into(), BasicPublishOptions::default(), b"wake", props).await?.await
        })
        .await;
        match sent {
            Ok(Ok(confirm)) if confirm.is_ack() => true,
            other => {
                self.failed();
                tracing::warn!(result = ?other.map(|r| r.map(|c| c.is_ack())), "RabbitMQ did not confirm a wake-up; reconnecting");
                *guard = None;
                self.retry_after.store(millis_now() + 1_000, Ordering::Release);
                false
            }
        }
    }

    /// The outbox relay (#44): after each poke (this process committed a change) and once a
    /// second, publishes one wake-up for the outbox events that are neither published nor
    /// relayed yet, and notes them relayed once the broker has confirmed it. So a change whose
    /// wake-up could not go out at its commit (the broker away for a moment, the process gone
    /// before it published) is relayed by the next pass of any process with the broker, rather
    /// than waiting for a worker's poll. A sweep leaves the events of the last second to the
    /// processes that wrote them (a spare wake-up costs a worker one claim query, no more).
    pub async fn relay(self: Arc<Self>, db: packyard_store::db::Db, poke: Arc<tokio::sync::Notify>) {
        loop {
            let poked = tokio::select! {
                () = poke.notified() => true,
                () = tokio::time::sleep(RELAY_SWEEP) => false,
            };
            let lag = if poked { 0 } else { i64::try_from(RELAY_SWEEP.as_millis()).unwrap_or(1_000) };
            self.relay_once(&db, millis_now() - lag).await;
        }
    }

    /// One pass of [`Amqp::relay`] over the events created at or before `until`; says how many
    /// it relayed. Whatever fails waits for the next pass.
    pub async fn relay_once(&self, db: &packyard_store::db::Db, until: i64) -> usize {
        let mut relayed = 0;
        loop {
            let ids = match db.unrelayed_events(until, RELAY_BATCH).await {
                Ok(ids) => ids,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the outbox to relay wake-ups; the next pass tries again");
                    return relayed;
                }
            };
            if ids.is_empty() || !self.publish_wakeup().await {
                return relayed;
            }
            if let Err(e) = db.mark_relayed(&ids, millis_now()).await {
                tracing::warn!(error = %e, "cannot note wake-ups relayed; the next pass sends them again");
                return relayed;
            }
            relayed += ids.len();
            self.metrics.wakeups_relayed_total.inc_by(u64::try_from(ids.len()).unwrap_or(0));
            if ids.len() < usize::try_from(RELAY_BATCH).unwrap_or(0) {
                return relayed;
            }
        }
    }

    /// Consumes wake-ups forever (competing with other workers), calling `on_wake` for each;
    /// reconnects with backoff.
    pub async fn consume(self: Arc<Self>, on_wake: impl Fn() + Send + Sync + 'static) {
        let mut backoff = Duration::from_millis(200);
        loop {
            match Self::open(&self.url).await {
                Ok((_conn, ch)) => {
                    let tag = format!("packyard-worker-{}", std::process::id());
                    match ch
                        .basic_consume(
                            QUEUE.into(),
                            tag.as_str().into(),
                            BasicConsumeOptions::default(),
                            FieldTable::default(),
                        )
                        .await
                    {
                        Ok(mut consumer) => {
                            backoff = Duration::from_millis(200);
                            tracing::info!("consuming wake-ups from RabbitMQ");
                            while let Some(delivery) = consumer.next().await {
                                match delivery {
                                    Ok(d) => {
                                        on_wake();
                                        let _ = d.ack(BasicAckOptions::default()).await;
                                    }
                                    Err(e) => {
                                        self.failed();
                                        tracing::warn!(error = %e, "RabbitMQ consumer failed");
                                        break;
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            self.failed();
                            tracing::warn!(error = %e, "cannot consume wake-ups");
                        }
                    }
                }
                Err(e) => {
                    self.failed();
                    tracing::debug!(error = %e, "RabbitMQ unavailable; polling only");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }
}
