//! Storage reclamation: artifact blobs that nothing references any more are deleted after a
//! grace period. A sweep reads the blob rows by digest in pages; for each page one query finds
//! the artifact blobs no repository's rows (the columns each format registers,
//! `formats::FormatSpec::blob_columns`), proxy cache, catalogue asset or snapshot refers to.
//! Such a blob is marked (when it was first found so) and deleted once it has been unreferenced
//! — and not stored again — for the grace period (`worker.blob_grace_secs`). The deletion holds
//! the blob's row while the bytes go and checks again that nothing refers to it
//! (`Db::collect_blob`), so that an upload of the same bytes at that instant either finds them
//! gone and is refused, or keeps them. Build blobs and abandoned uploads are collected too (the
//! pipeline's rule: listed by no snapshot, older than `worker.snapshot_grace_secs`). Bytes that
//! have no row at all are found by listing the store itself ([`sweep_strays`], `blobs gc`).

use packyard_store::blobs::{Listed, Sha256Hex};
use packyard_store::db::blobs::{Collect, Released};
use packyard_store::db::{now_ms, DbResult};

use crate::formats::Registry;
use crate::services::Services;

/// What a sweep found or did with one blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Deleted (or, in a dry run, would be).
    Freed,
    /// Unreferenced, but within the grace period: free from this instant (ms) on.
    Waiting { from: i64 },
}

/// A sweep's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub freed: u64,
    pub freed_bytes: i64,
    pub waiting: u64,
    pub waiting_bytes: i64,
    /// Build blobs and abandoned uploads collected (or, in a dry run, collectable).
    pub build_blobs: u64,
}

const PAGE: i64 = 1000;

/// Sweeps the blob store's rows once, keeping what `formats`' columns name. `dry_run`: changes
/// nothing and tells what a sweep would free now. `seen` is told of each unreferenced artifact
/// blob.
pub async fn sweep<F>(services: &Services, formats: &'static Registry, dry_run: bool, mut seen: F) -> DbResult<Report>
where
    F: FnMut(&Released, Verdict),
{
    let db = &services.db;
    let w = &services.config.worker;
    let now = now_ms();
    let cutoff = now - secs_ms(w.blob_grace_secs);
    let mut report = Report::default();
    let mut after = String::new();
    loop {
        let keys = db.blob_keys(&after, PAGE).await?;
        let Some(last) = keys.last().cloned() else { break };
        let references = formats.blob_references();
        let (free, again) = db.blob_references(references, &after, &last).await?;
        if !dry_run {
            for sha in &again {
                db.mark_released(sha, None).await?;
            }
        }
        for blob in free {
            let since = blob.released_at.unwrap_or(now).max(blob.recorded_at);
            if blob.released_at.is_none() && !dry_run {
                db.mark_released(&blob.sha256, Some(now)).await?;
            }
            if since > cutoff {
                report.waiting += 1;
                report.waiting_bytes += blob.size;
                seen(&blob, Verdict::Waiting { from: since + secs_ms(w.blob_grace_secs) });
                continue;
            }
            let Ok(digest) = Sha256Hex::parse(&blob.sha256) else { continue };
            let freed = dry_run
                || db
                    .collect_blob(
                        services.blobs.as_ref(),
                        &digest,
                        Collect::Released { older_than: cutoff, references },
                    )
                    .await?;
            if freed {
                report.freed += 1;
                report.freed_bytes += blob.size;
                seen(&blob, Verdict::Freed);
            }
        }
        if (keys.len() as i64) < PAGE {
            break;
        }
        after = last;
    }
    report.build_blobs = collect_built(services, services.config.worker.snapshot_grace_secs, dry_run).await?;
    Ok(report)
}

/// What a scan of the store for bytes no row names found ([`sweep_strays`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Strays {
    pub freed: u64,
    pub freed_bytes: u64,
    /// Stored within the grace period: an upload may be about to record them.
    pub waiting: u64,
    pub waiting_bytes: u64,
}

/// Lists the blob store itself (file or S3), page by page, and collects the blobs that no row
/// names — bytes a write left when it was interrupted between storing them and recording them,
/// or a proxy fetch refused for a wrong checksum — once stored longer ago than the grace period
/// (`worker.blob_grace_secs`). Each is collected as every blob is (`Collect::Stray`): a row is
/// made for it in the transaction that deletes the bytes, so an upload of the same bytes at
/// that instant waits for it, then finds the bytes gone and is refused — or recorded its row
/// first, and they stay. `dry_run`: changes nothing; `seen` is told of each stray blob.
pub async fn sweep_strays<F>(services: &Services, dry_run: bool, mut seen: F) -> anyhow::Result<Strays>
where
    F: FnMut(&Listed, Verdict),
{
    let db = &services.db;
    let grace = secs_ms(services.config.worker.blob_grace_secs);
    let cutoff = now_ms() - grace;
    let mut report = Strays::default();
    let mut after: Option<Sha256Hex> = None;
    loop {
        let page = services.blobs.list(after.as_ref(), STORE_PAGE).await?;
        let Some(last) = page.last().map(|b| b.digest.clone()) else { break };
        if after.as_ref().is_some_and(|a| last.as_str() <= a.as_str()) {
            // A listing that does not move on (a store that ignored the cursor): stop.
            break;
        }
        let from = after.as_ref().map_or("", Sha256Hex::as_str);
        let known = db.blob_keys_within(from, last.as_str()).await?;
        for blob in page.iter().filter(|b| !known.contains(b.digest.as_str())) {
            let size = i64::try_from(blob.size).unwrap_or(i64::MAX);
            if blob.stored_at > cutoff {
                report.waiting += 1;
                report.waiting_bytes += blob.size;
                seen(blob, Verdict::Waiting { from: blob.stored_at + grace });
                continue;
            }
            let freed =
                dry_run || db.collect_blob(services.blobs.as_ref(), &blob.digest, Collect::Stray { size }).await?;
            if freed {
                report.freed += 1;
                report.freed_bytes += blob.size;
                seen(blob, Verdict::Freed);
            }
        }
        if page.len() < STORE_PAGE {
            break;
        }
        after = Some(last);
    }
    Ok(report)
}

/// Blobs one listing of the store takes (S3 lists a thousand keys a request).
const STORE_PAGE: usize = 1000;

/// Deletes the build blobs and abandoned uploads recorded more than `grace_secs` ago that no
/// snapshot lists (or, `dry_run`, counts them, up to a page); the pipeline's collection too.
pub async fn collect_built(services: &Services, grace_secs: u64, dry_run: bool) -> DbResult<u64> {
    let db = &services.db;
    let cutoff = now_ms() - secs_ms(grace_secs);
    let mut n = 0;
    loop {
        let batch = db.unreferenced_blobs(cutoff, PAGE).await?;
        if dry_run {
            return Ok(batch.len() as u64);
        }
        let mut progressed = false;
        for digest in &batch {
            let Ok(d) = Sha256Hex::parse(digest) else { continue };
            if db.collect_blob(services.blobs.as_ref(), &d, Collect::Built { older_than: cutoff }).await? {
                n += 1;
                progressed = true;
            }
        }
        if (batch.len() as i64) < PAGE || !progressed {
            return Ok(n);
        }
    }
}

fn secs_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}
