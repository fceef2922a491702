//! Startup shared by both binaries: metrics, database (migrated), blob store, secret.

use std::sync::Arc;

use anyhow::Context;

use crate::events::{Amqp, Changed, Redis};
use crate::publication::cache::PublishedCache;
use crate::publication::Wakeup;
use crate::security::service::Security;
use packyard_model::config::{BlobsKind, Config};
use packyard_store::blobs::{BlobStore, FileStore};
use packyard_store::db::Db;
use packyard_store::metrics::Metrics;

/// Everything a process holds for its whole life; cheap to clone.
#[derive(Clone)]
pub struct Services {
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub db: Db,
    pub blobs: Arc<dyn BlobStore>,
    /// `security.secret`, or the generated one (SQLite).
    pub secret: Arc<str>,
    pub security: Arc<Security>,
    /// Replicas' view of published snapshots.
    pub published: Arc<PublishedCache>,
    /// After-commit wake-ups for the (embedded) worker.
    pub wakeup: Arc<Wakeup>,
    /// Shared watermarks and invalidation (`cache.redis_url`).
    pub redis: Option<Arc<Redis>>,
    /// Worker wake-ups across processes (`events.amqp_url`).
    pub amqp: Option<Arc<Amqp>>,
    /// Upstream fetching for proxy repositories.
    pub proxy: crate::proxy::Proxy,
    /// The guarded client webhook deliveries go out with.
    pub webhooks: crate::outbound::Outbound,
    /// Asks the watermark poller to read the database now (a Redis invalidation arrived).
    refresh: Arc<tokio::sync::Notify>,
    /// Pokes this process's outbox relay after a commit (with `events.amqp_url`).
    relay: Arc<tokio::sync::Notify>,
    /// The artifact downloads this replica served, until they are flushed to the catalogue.
    pub downloads: Arc<crate::downloads::Downloads>,
    /// The instance's read-only mode (Nexus's freeze).
    pub read_only: Arc<crate::read_only::ReadOnlyMode>,
    /// What the repositories' policies remember (exceptions, advisories, publish times).
    pub policy: Arc<crate::policy::PolicyCache>,
    /// This process runs the worker's usage count: its quota and key gauges are the instance's
    /// (a replica without it exposes none, so that its last write's count never outlives a
    /// change another process made).
    counts_usage: Arc<std::sync::atomic::AtomicBool>,
}

/// The configured blob store (files or S3), without the hot cache.
pub async fn open_blob_store(config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<Arc<dyn BlobStore>> {
    Ok(match config.blobs.kind {
        BlobsKind::File => Arc::new(
            FileStore::open(&config.blobs.path, metrics)
                .await
                .with_context(|| format!("blobs.path: cannot open {}", config.blobs.path.display()))?,
        ),
        BlobsKind::S3 => Arc::new(
            packyard_store::blobs::s3::S3Store::open(&config.blobs.s3, metrics)
                .context("blobs.s3: cannot open the bucket")?,
        ),
    })
}

impl Services {
    /// Marks this process as the one that counts usage (the worker's usage refresher).
    pub fn count_usage(&self) {
        self.counts_usage.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this process counts usage: the one whose quota and key gauges are exposed.
    pub fn counts_usage(&self) -> bool {
        self.counts_usage.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Connects, applies migrations (when `migrate`), and opens the blob store.
    pub async fn start(config: Config, migrate: bool) -> anyhow::Result<Self> {
        let metrics = Arc::new(Metrics::new().context("registering metrics")?);
        if config.debug.fault_injection {
            packyard_model::crash::arm(&config.debug.crash_at);
        }
        std::fs::create_dir_all(&config.server.data_dir)
            .with_context(|| format!("server.data_dir: cannot create {}", config.server.data_dir.display()))?;
        let db = Db::connect(&config.database, metrics.clone()).await?;
        if migrate && config.database.migrate_on_start {
            let ran = db.migrate().await.context("applying database migrations")?;
            if ran > 0 {
                tracing::info!(applied = ran, backend = db.backend().as_str(), "database migrated");
            }
        } else if migrate {
            // Migrations are someone else's (a Kubernetes Job, `packyard-api migrate`): wait for
            // them rather than start on an older schema.
            let mut waited = 0u64;
            while !db.migrations_applied().await.unwrap_or(false) {
                if waited.is_multiple_of(30) {
                    tracing::warn!(
                        waited_secs = waited,
                        "waiting for database migrations (database.migrate_on_start = false: run `packyard-api migrate`)"
                    );
                }
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                waited += 2;
            }
        }
        let blobs = open_blob_store(&config, metrics.clone()).await?;
        let secret = crate::auth::load_or_create_secret(config.security.secret.as_deref(), &config.server.data_dir)?;
        let services = Self::assemble(config, metrics, db, blobs, &secret)?;
        // Known before the first request (the watermark poll keeps it current).
        match services.db.read_only().await {
            Ok(state) => services.read_only.apply(state),
            Err(e) => tracing::warn!(error = %e, "cannot read the read-only mode yet; the watermark poll will"),
        }
        Ok(services)
    }

    /// Puts the parts together (also used by tests that bring their own database).
    pub fn assemble(
        config: Config,
        metrics: Arc<Metrics>,
        db: Db,
        blobs: Arc<dyn BlobStore>,
        secret: &str,
    ) -> anyhow::Result<Self> {
        let blobs = packyard_store::blobs::hot::HotCache::wrap(
            blobs,
            config.cache.blob_cache_bytes,
            config.cache.blob_cache_max_object_bytes,
            metrics.clone(),
        );
        let published = Arc::new(PublishedCache::new(
            i64::try_from(config.cache.snapshot_cache_bytes).unwrap_or(i64::MAX),
            config.cache.watermark_ttl_ms,
            metrics.clone(),
        ));
        let redis = config.cache.redis_url.as_deref().and_then(|u| match Redis::new(u, metrics.clone()) {
            Ok(r) => Some(Arc::new(r)),
            Err(e) => {
                tracing::warn!(error = %e, "cache.redis_url is unusable; using the database only");
                None
            }
        });
        let security = Arc::new(Security::new(db.clone(), &config.security, secret, metrics.clone(), redis.clone())?);
        let amqp = config.events.amqp_url.as_deref().map(|u| Arc::new(Amqp::new(u, metrics.clone())));
        let proxy = crate::proxy::Proxy::new(&config.proxy, db.clone(), blobs.clone(), metrics.clone())?
            .with_keystore(security.keystore.clone())
            .with_store_quota(config.blobs.quota);
        let webhooks = crate::outbound::for_webhooks(&config, |name| std::env::var(name).ok())?;
        let policy = Arc::new(crate::policy::PolicyCache::new(config.debug.clock_offset_secs));
        Ok(Self {
            config: Arc::new(config),
            metrics,
            db,
            blobs,
            secret: secret.into(),
            security,
            redis,
            amqp,
            published,
            wakeup: Arc::new(Wakeup::default()),
            refresh: Arc::new(tokio::sync::Notify::new()),
            relay: Arc::new(tokio::sync::Notify::new()),
            counts_usage: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            proxy,
            webhooks,
            downloads: Arc::default(),
            read_only: Arc::default(),
            policy,
        })
    }

    /// After a committed change: drop this process's cached state now, and tell the other
    /// replicas through Redis (best effort; they also poll).
    pub fn changed(&self, what: Changed) {
        match what {
            Changed::Security => self.security.changed_locally(),
            Changed::Repositories => {
                self.security.repositories_changed_locally();
                self.policy.forget();
            }
            Changed::Publications => {
                self.published.invalidate();
                self.published.publications().notify_waiters();
            }
        }
        if let Some(r) = self.redis.clone() {
            tokio::spawn(async move {
                r.announce(what).await;
            });
        }
    }

    /// After a committed write that a worker must publish: wake the embedded worker, and, with
    /// RabbitMQ, this process's outbox relay, which wakes the others through the broker (a
    /// change it cannot relay now is relayed by the next pass of any process; workers also
    /// poll).
    pub fn wake(&self) {
        self.wakeup.notify();
        if self.amqp.is_some() {
            self.relay.notify_one();
        }
    }

    /// Background tasks of a serving replica: the watermark poller, the download statistics'
    /// flusher and, with Redis, the invalidation listener.
    pub fn spawn_cache_keepers(&self) {
        tokio::spawn(self.clone().run_watermark_poller());
        let period = std::time::Duration::from_millis(self.config.cache.download_stats_flush_ms.max(1));
        tokio::spawn(self.downloads.clone().run_flusher(self.db.clone(), period));
        if let Some(r) = self.redis.clone() {
            let refresh = self.refresh.clone();
            tokio::spawn(r.listen(move || refresh.notify_one()));
        }
    }

    /// Background task of every long-running process with RabbitMQ: the outbox relay
    /// ([`Amqp::relay`]).
    pub fn spawn_wakeup_relay(&self) {
        if let Some(a) = self.amqp.clone() {
            tokio::spawn(a.relay(self.db.clone(), self.relay.clone()));
        }
    }

    /// Background task of a worker: with RabbitMQ, wake-ups from other processes.
    pub fn spawn_wakeup_consumer(&self) {
        if let Some(a) = self.amqp.clone() {
            let wakeup = self.wakeup.clone();
            tokio::spawn(a.consume(move || wakeup.notify()));
        }
    }

    /// Reads the watermarks once and drops whatever cached state they invalidate.
    pub async fn poll_watermarks(&self) -> Result<bool, packyard_store::db::DbError> {
        let (security, repositories, publications) = self.db.watermarks().await?;
        let a = self.security.cache.observe(security, repositories);
        self.policy.observe(repositories);
        if let Err(e) = self.read_only.follow(&self.db, security).await {
            tracing::warn!(error = %e, "cannot read the read-only mode; the next watermark check tries again");
        }
        // A publication moved the global watermark: find which repositories' own watermarks
        // moved, and drop only their snapshot pointers.
        let b = if self.published.publications_moved(publications) {
            let changed = self.published.observe_repositories(&self.db.repository_versions().await?) > 0;
            // Only now: had the query failed, the next poll would try again.
            self.published.applied(publications);
            changed
        } else {
            false
        };
        Ok(a || b)
    }

    /// Checks the watermarks every `min(security.watermark_ttl_ms, cache.watermark_ttl_ms)`:
    /// from Redis when configured (reading the database when Redis shows a change, and at least
    /// every 2 s as a safety net), else from the database; at once on a Redis invalidation. Failures are logged; cached state stays until the database answers.
    pub async fn run_watermark_poller(self) {
        let ms = self.config.security.watermark_ttl_ms.min(self.config.cache.watermark_ttl_ms).max(1);
        let period = std::time::Duration::from_millis(ms);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_shared: Option<[i64; 3]> = None;
        let mut last_db = tokio::time::Instant::now();
        loop {
            let forced = tokio::select! {
                _ = tick.tick() => false,
                () = self.refresh.notified() => true,
            };
            let read_db = forced
                || match &self.redis {
                    None => true,
                    Some(r) => match r.watermarks().await {
                        Some(v) if last_shared != Some(v) => {
                            last_shared = Some(v);
                            true
                        }
                        // The database stays the truth: read it at least every 2 s (the promise
                        // for revocations) even when Redis shows nothing.
                        Some(_) => last_db.elapsed() >= period.max(std::time::Duration::from_secs(2)) - period / 2,
                        None => true,
                    },
                };
            if read_db {
                last_db = tokio::time::Instant::now();
                if let Err(e) = self.poll_watermarks().await {
                    tracing::warn!(error = %e, "cannot read the watermarks; serving cached state until the database answers");
                }
            }
        }
    }

    /// Readiness: database answers, migrations applied, blob store writable. `Err` lists why not.
    pub async fn readiness(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        match self.db.ping().await {
            Err(e) => problems.push(format!("database: {e}")),
            Ok(()) => match self.db.migrations_applied().await {
                Ok(true) => {}
                Ok(false) => problems.push("database: migrations not applied".into()),
                Err(e) => problems.push(format!("database: {e}")),
            },
        }
        if let Err(e) = self.blobs.check().await {
            problems.push(format!("blob store: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}
