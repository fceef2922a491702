//! `packyard-worker`: the publication worker, as a library (the api runs it in-process when
//! `worker.embedded = true`) and as a binary. It also owns the management listener that both
//! binaries serve (`/healthz`, `/readyz`, `/metrics`).

pub mod management;
pub mod process;
pub mod publisher;

use std::sync::Arc;

use packyard_core::publication::testformat::TestFormat;
use packyard_core::publication::Builders;
use packyard_core::services::Services;

/// Every format's builders, and the internal test format's.
pub fn builders(services: &Services) -> Builders {
    let delay = std::time::Duration::from_millis(services.config.debug.build_delay_ms);
    packyard_formats::builders(
        services,
        Builders::default()
            .with(packyard_core::publication::testformat::KIND, Arc::new(TestFormat { page_size: 500, delay })),
    )
}

/// Catalogues, in the background, what was stored before the catalogue existed (once; later
/// starts find it done). A failure is logged and the next start tries again.
pub fn spawn_catalogue_backfill(services: &Services) {
    let db = services.db.clone();
    tokio::spawn(async move {
        if let Err(e) = packyard_core::catalogue::backfill(&db, packyard_formats::catalogue).await {
            tracing::warn!(error = %e, "cannot catalogue the artifacts stored before the catalogue; the next start tries again");
        }
    });
}

/// Counts what each repository holds every `worker.usage_refresh_secs` (the first time at once),
/// for `GET /api/v1/repositories/{name}` and the gauges on `/metrics`.
pub fn spawn_usage_refresher(services: &Services) {
    let services = services.clone();
    let period = std::time::Duration::from_secs(services.config.worker.usage_refresh_secs.max(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = packyard_core::catalogue::refresh_usage(&services).await {
                tracing::warn!(error = %e, "cannot count the repositories' usage; trying again later");
            }
        }
    });
}
