//! `packyard-worker`: the publication worker, as a library (the api runs it in-process when
//! `worker.embedded = true`) and as a binary. It also owns the management listener that both
//! binaries serve (`/healthz`, `/readyz`, `/metrics`).

pub mod management;
pub mod process;
pub mod publisher;

use packyard_core::publication::Builders;
use packyard_core::services::Services;

/// Every format's builders.
pub fn builders(services: &Services) -> Builders {
    packyard_formats::registry().builders(services, Builders::default())
}

/// Catalogues, in the background, what was stored before the catalogue existed (once; later
/// starts find it done). A failure is logged and the next start tries again.
pub fn spawn_catalogue_backfill(services: &Services) {
    let (db, formats) = (services.db.clone(), packyard_formats::registry());
    tokio::spawn(async move {
        if let Err(e) = packyard_core::catalogue::backfill(&db, |f| formats.get(f).catalogue()).await {
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

/// Reclaims the blob store every `worker.blob_gc_secs`: artifact blobs that nothing has
/// referenced for `worker.blob_grace_secs` (`packyard_core::reclaim`).
pub fn spawn_blob_reclaimer(services: &Services) {
    let services = services.clone();
    let period = std::time::Duration::from_secs(services.config.worker.blob_gc_secs.max(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if frozen(&services).await {
                continue;
            }
            match packyard_core::reclaim::sweep(&services, packyard_formats::registry(), false, |_, _| {}).await {
                Ok(r) if r.freed > 0 || r.build_blobs > 0 => {
                    tracing::info!(
                        freed = r.freed,
                        bytes = r.freed_bytes,
                        waiting = r.waiting,
                        build_blobs = r.build_blobs,
                        "blob store reclaimed"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot reclaim the blob store; trying again later"),
            }
        }
    });
}

/// Computes the SHA-1 and MD5 of new assets (`packyard_core::digests`): every second, and at
/// once again while a round finds work.
pub fn spawn_digester(services: &Services) {
    let services = services.clone();
    tokio::spawn(async move {
        let mut after = String::new();
        loop {
            if frozen(&services).await {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            match packyard_core::digests::fill(&services, &mut after).await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot digest new assets; trying again later"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
}

/// Whether the instance is read-only (Nexus's freeze): cleanup and reclamation wait, as every
/// write does. Read from the database (a worker process keeps no watermark poll); when it does
/// not answer, the work's own queries fail too.
async fn frozen(services: &Services) -> bool {
    services.db.read_only().await.is_ok_and(|s| s.frozen)
}

/// Makes the cleanup runs that are due — by a policy's schedule or asked for ("run now") —
/// looking every `worker.cleanup_poll_ms`; each under its repository's lease.
pub fn spawn_cleanup_scheduler(services: &Services) {
    let services = services.clone();
    let period = std::time::Duration::from_millis(services.config.worker.cleanup_poll_ms.max(10));
    let owner = format!("{}:{}:cleanup", hostname(), std::process::id());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if frozen(&services).await {
                continue;
            }
            if let Err(e) = packyard_core::cleanup::run_due(&services, packyard_formats::registry(), &owner).await {
                tracing::warn!(error = %e, "cannot make the cleanup runs that are due; trying again later");
            }
        }
    });
}

/// Sends the webhook deliveries that are due, looking every `webhooks.poll_ms`; forgets old
/// ones from the delivery log once an hour.
pub fn spawn_webhook_dispatcher(services: &Services) {
    let services = services.clone();
    let period = std::time::Duration::from_millis(services.config.webhooks.poll_ms.max(10));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pruned = std::time::Instant::now();
        loop {
            tick.tick().await;
            // Until a round finds nothing: a run takes at most 100 of a pair's deliveries.
            loop {
                match packyard_core::webhooks::deliver_due(&services).await {
                    Ok(1..) => continue,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot deliver webhooks; trying again later");
                        break;
                    }
                }
            }
            if pruned.elapsed() >= std::time::Duration::from_secs(3600) {
                pruned = std::time::Instant::now();
                if let Err(e) = packyard_core::webhooks::prune(&services).await {
                    tracing::warn!(error = %e, "cannot prune the webhook delivery log");
                }
            }
        }
    });
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "worker".into())
}
