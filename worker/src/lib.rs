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
    services.count_usage();
    let services = services.clone();
    let period = std::time::Duration::from_secs(services.config.worker.usage_refresh_secs.max(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0u64;
        loop {
            tick.tick().await;
            if let Err(e) = packyard_core::catalogue::refresh_usage(&services).await {
                tracing::warn!(error = %e, "cannot count the repositories' usage; trying again later");
            }
            // Every tenth count (the first at once), the components matched against the
            // advisories (`packyard_components_with_advisories`).
            if ticks.is_multiple_of(10) {
                match packyard_core::vulnerabilities::census(&services, packyard_formats::registry()).await {
                    Ok(c) => tracing::debug!(census = %c, "components matched against the advisories"),
                    Err(e) => tracing::warn!(error = %e, "cannot match the components against the advisories"),
                }
                // And the signing keys' expiry (`packyard_signing_key_expiry_timestamp_seconds`).
                if let Err(e) =
                    packyard_core::admin::repositories::key_census(&services, packyard_formats::registry()).await
                {
                    tracing::warn!(error = %e, "cannot read the signing keys' expiry");
                }
            }
            ticks += 1;
        }
    });
}

/// Reclaims the blob store every `worker.blob_gc_secs`: artifact blobs that nothing has
/// referenced for `worker.blob_grace_secs` (`packyard_core::reclaim`); and once a day, bytes in
/// the store that no row names, stored longer ago than that.
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
            // Once a day across the installation: the store's own listing, for bytes no row names.
            match services.db.claim_periodic("blobs.stray_scan", STRAY_SCAN_MS).await {
                Ok(true) => match packyard_core::reclaim::sweep_strays(&services, false, |_, _| {}).await {
                    Ok(r) if r.freed > 0 => {
                        tracing::info!(
                            freed = r.freed,
                            bytes = r.freed_bytes,
                            "stray blobs (stored, no row) reclaimed"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot scan the blob store for stray blobs; trying tomorrow"),
                },
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot claim the stray blob scan; trying again later"),
            }
        }
    });
}

/// How often one worker of the installation lists the whole blob store for stray bytes.
const STRAY_SCAN_MS: i64 = 86_400_000;

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

/// Makes the repositories' scheduled snapshots and deletes those past their `keep`, looking
/// every 10 seconds (`packyard_core::admin::snapshots::run_schedules`).
pub fn spawn_snapshot_scheduler(services: &Services) {
    let services = services.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if frozen(&services).await {
                continue;
            }
            let now = packyard_store::db::now_ms();
            if let Err(e) =
                packyard_core::admin::snapshots::run_schedules(&services, packyard_formats::registry(), now).await
            {
                tracing::warn!(error = %e, "cannot make the scheduled snapshots; trying again later");
            }
        }
    });
}

/// Runs pull replication (`packyard_core::replication`): every second, each following
/// repository whose `replication.every_secs` has passed since its last run here.
pub fn spawn_replicator(services: &Services) {
    let services = services.clone();
    tokio::spawn(async move {
        let schedule = std::sync::Arc::new(packyard_core::replication::Schedule::default());
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if frozen(&services).await {
                continue;
            }
            let now = packyard_store::db::now_ms();
            packyard_core::replication::run_due(&services, packyard_formats::registry(), &schedule, now).await;
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

/// The most an OSV zip may hold, inflated (osv.dev's largest ecosystem zip is well below).
const MAX_OSV_UNZIPPED: u64 = 2 << 30;

/// The records of an OSV file: JSON (a record or a list), or a zip of record files (`*.json`),
/// as osv.dev publishes each ecosystem's (`all.zip`), checked whole.
pub fn osv_records(bytes: &[u8], name: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    use packyard_core::vulnerabilities::records as json;
    if !bytes.starts_with(b"PK\x03\x04") && !bytes.starts_with(b"PK\x05\x06") {
        return Ok(json(bytes, name)?);
    }
    let files = packyard_codecs::zip::files(bytes, MAX_OSV_UNZIPPED).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let mut out = Vec::new();
    for (file, data) in files.iter().filter(|(f, _)| f.ends_with(".json")) {
        out.extend(json(data, &format!("{name}: {file}"))?);
    }
    anyhow::ensure!(!out.is_empty(), "{name}: a zip without *.json record files");
    Ok(out)
}

/// The records of an OSV source — a file, a directory of record files, or a URL (its
/// credentials in it, or `credentials`) — and how messages name it.
pub async fn read_osv_source(
    services: &Services,
    source: &str,
    credentials: Option<(String, String)>,
) -> anyhow::Result<(String, Vec<serde_json::Value>)> {
    use packyard_core::import::{Fetcher, Location};
    let path = std::path::Path::new(source);
    if path.is_file() {
        let shown = path.display().to_string();
        let bytes = tokio::fs::read(path).await.map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
        let records = parse_off_runtime(bytes, shown.clone()).await?;
        return Ok((shown, records));
    }
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json" || x == "zip"))
            .collect();
        files.sort();
        anyhow::ensure!(!files.is_empty(), "{source}: no *.json or *.zip files");
        let mut all = Vec::new();
        for f in files {
            let name = f.display().to_string();
            let bytes = tokio::fs::read(&f).await.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            all.extend(parse_off_runtime(bytes, name).await?);
        }
        return Ok((path.display().to_string(), all));
    }
    let mut at = Location::parse(source)?;
    let credentials = at.take_credentials().or(credentials);
    let Location::Url(mut url) = at else { anyhow::bail!("{source}: not a file, a directory or an http(s) URL") };
    // A file's URL, not a directory's.
    if !source.ends_with('/') {
        let trimmed = url.path().trim_end_matches('/').to_string();
        url.set_path(&trimmed);
    }
    let at = Location::Url(url);
    let shown = at.to_string();
    let fetcher = Fetcher::new(&services.config)?;
    if let Some((user, password)) = &credentials {
        fetcher.basic(user, password);
    }
    let bytes = fetcher.read(&at).await?.ok_or_else(|| anyhow::anyhow!("{shown}: not found (404)"))?;
    let records = parse_off_runtime(bytes.to_vec(), shown.clone()).await?;
    Ok((shown, records))
}

/// [`osv_records`] on a blocking thread: a large zip inflates and parses for seconds, which the
/// runtime's other tasks (publication, webhooks) should not wait for.
async fn parse_off_runtime(bytes: Vec<u8>, name: String) -> anyhow::Result<Vec<serde_json::Value>> {
    tokio::task::spawn_blocking(move || osv_records(&bytes, &name)).await?
}

/// Imports `vulnerabilities.sources` again every `vulnerabilities.refresh_secs` — one worker of
/// the installation each time (a claim in the database) —, each source on its own: one that
/// cannot be read or is malformed is logged and changes nothing.
pub fn spawn_vulnerability_refresher(services: &Services) {
    let cfg = services.config.vulnerabilities.clone();
    if cfg.sources.is_empty() {
        return;
    }
    let services = services.clone();
    let period = std::time::Duration::from_secs(cfg.refresh_secs.max(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period.min(std::time::Duration::from_secs(60)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let period_ms = i64::try_from(period.as_millis()).unwrap_or(i64::MAX);
            match services.db.claim_periodic("vulnerabilities.refresh", period_ms).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot claim the vulnerability data's refresh; trying again later");
                    continue;
                }
            }
            for source in &cfg.sources {
                let imported = async {
                    let (shown, records) = read_osv_source(&services, source, None).await?;
                    let formats = packyard_formats::registry();
                    Ok::<_, anyhow::Error>(
                        packyard_core::vulnerabilities::import(&services, formats, &records, &shown).await?,
                    )
                }
                .await;
                match imported {
                    Ok(done) => tracing::info!(source = %redacted(source), %done, "vulnerability data refreshed"),
                    Err(e) => {
                        tracing::warn!(source = %redacted(source), error = %e, "cannot refresh vulnerability data")
                    }
                }
            }
        }
    });
}

/// A source as logs show it: a URL without its credentials.
fn redacted(source: &str) -> String {
    match packyard_core::import::Location::parse(source) {
        Ok(mut at) => {
            at.take_credentials();
            at.to_string()
        }
        Err(_) => source.split_once('@').map_or(source.to_string(), |(_, host)| format!("…@{host}")),
    }
}
