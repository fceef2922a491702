//! Startup shared by both binaries: metrics, database (migrated), blob store, secret.

use std::sync::Arc;

use anyhow::Context;

use crate::blobs::{BlobStore, FileStore};
use crate::config::{BlobsKind, Config};
use crate::db::Db;
use crate::metrics::Metrics;
use crate::publication::cache::PublishedCache;
use crate::publication::Wakeup;
use crate::security::service::Security;

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
}

impl Services {
    /// Connects, applies migrations (when `migrate`), and opens the blob store.
    pub async fn start(config: Config, migrate: bool) -> anyhow::Result<Self> {
        let metrics = Arc::new(Metrics::new().context("registering metrics")?);
        std::fs::create_dir_all(&config.server.data_dir)
            .with_context(|| format!("server.data_dir: cannot create {}", config.server.data_dir.display()))?;
        let db = Db::connect(&config.database, metrics.clone()).await?;
        if migrate {
            let ran = db.migrate().await.context("applying database migrations")?;
            if ran > 0 {
                tracing::info!(applied = ran, backend = db.backend().as_str(), "database migrated");
            }
        }
        let blobs: Arc<dyn BlobStore> = match config.blobs.kind {
            BlobsKind::File => Arc::new(
                FileStore::open(&config.blobs.path, metrics.clone())
                    .await
                    .with_context(|| format!("blobs.path: cannot open {}", config.blobs.path.display()))?,
            ),
            BlobsKind::S3 => anyhow::bail!("blobs.kind = \"s3\" is not available in this build yet; use \"file\""),
        };
        let secret = crate::auth::load_or_create_secret(config.security.secret.as_deref(), &config.server.data_dir)?;
        Ok(Self::assemble(config, metrics, db, blobs, &secret))
    }

    /// Puts the parts together (also used by tests that bring their own database).
    pub fn assemble(config: Config, metrics: Arc<Metrics>, db: Db, blobs: Arc<dyn BlobStore>, secret: &str) -> Self {
        let security = Arc::new(Security::new(db.clone(), &config.security, secret, metrics.clone()));
        let published = Arc::new(PublishedCache::new(
            i64::try_from(config.cache.snapshot_cache_bytes).unwrap_or(i64::MAX),
            metrics.clone(),
        ));
        Self {
            config: Arc::new(config),
            metrics,
            db,
            blobs,
            secret: secret.into(),
            security,
            published,
            wakeup: Arc::new(Wakeup::default()),
        }
    }

    /// Reads the watermarks once and drops whatever cached state they invalidate.
    pub async fn poll_watermarks(&self) -> Result<bool, crate::db::DbError> {
        let (security, repositories, publications) = self.db.watermarks().await?;
        let a = self.security.cache.observe(security, repositories);
        let b = self.published.observe(publications);
        Ok(a || b)
    }

    /// Polls the watermarks every `min(security.watermark_ttl_ms, cache.watermark_ttl_ms)`,
    /// logging failures and going on (cached state stays until the database answers).
    pub async fn run_watermark_poller(self) {
        let ms = self.config.security.watermark_ttl_ms.min(self.config.cache.watermark_ttl_ms).max(1);
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = self.poll_watermarks().await {
                tracing::warn!(error = %e, "cannot read the watermarks; serving cached state until the database answers");
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
