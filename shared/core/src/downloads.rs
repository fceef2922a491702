//! Download statistics, off the request path: each replica counts the artifact downloads it
//! serves in memory and a background task adds them to the catalogue's assets in one
//! transaction every `cache.download_stats_flush_ms` — one row update per downloaded asset per
//! flush, however often it was downloaded, and no query on the read itself.

use std::collections::HashMap;
use std::sync::Mutex;

use packyard_store::db::{now_ms, Db, DbResult};

/// What one asset was downloaded since the last flush: how often, the last time (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tally {
    count: i64,
    last_ms: i64,
}

/// The downloads a replica served and has not written yet, by repository and asset path.
#[derive(Default)]
pub struct Downloads {
    pending: Mutex<HashMap<i64, HashMap<Box<str>, Tally>>>,
}

impl Downloads {
    /// Counts one download of `path` in repository `repository_id` (a hash-map update under a
    /// lock held for it alone).
    pub fn record(&self, repository_id: i64, path: &str) {
        let now = now_ms();
        let Ok(mut pending) = self.pending.lock() else { return };
        let paths = pending.entry(repository_id).or_default();
        match paths.get_mut(path) {
            Some(t) => {
                t.count += 1;
                t.last_ms = t.last_ms.max(now);
            }
            None => {
                paths.insert(path.into(), Tally { count: 1, last_ms: now });
            }
        }
    }

    fn take(&self) -> HashMap<i64, HashMap<Box<str>, Tally>> {
        self.pending.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default()
    }

    /// Puts back what a failed flush took, so the next one writes it.
    fn restore(&self, batch: HashMap<i64, HashMap<Box<str>, Tally>>) {
        let Ok(mut pending) = self.pending.lock() else { return };
        for (repo, paths) in batch {
            let into = pending.entry(repo).or_default();
            for (path, t) in paths {
                let e = into.entry(path).or_insert(Tally { count: 0, last_ms: 0 });
                e.count += t.count;
                e.last_ms = e.last_ms.max(t.last_ms);
            }
        }
    }

    /// Writes what was counted since the last flush; on failure it stays counted. Returns how
    /// many assets it updated.
    pub async fn flush(&self, db: &Db) -> DbResult<usize> {
        let batch = self.take();
        if batch.is_empty() {
            return Ok(0);
        }
        let rows: Vec<(i64, &str, i64, i64)> = batch
            .iter()
            .flat_map(|(repo, paths)| paths.iter().map(move |(p, t)| (*repo, &**p, t.count, t.last_ms)))
            .collect();
        match db.record_downloads(&rows).await {
            Ok(n) => Ok(n),
            Err(e) => {
                drop(rows);
                self.restore(batch);
                Err(e)
            }
        }
    }

    /// Flushes every `period` until the process ends.
    pub async fn run_flusher(self: std::sync::Arc<Self>, db: Db, period: std::time::Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Err(e) = self.flush(&db).await {
                tracing::warn!(error = %e, "cannot write download statistics; kept for the next flush");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downloads_are_tallied_per_asset() {
        let d = Downloads::default();
        for _ in 0..3 {
            d.record(1, "pool/a.deb");
        }
        d.record(2, "pool/a.deb");
        let taken = d.take();
        assert_eq!(taken.get(&1).and_then(|p| p.get("pool/a.deb")).map(|t| t.count), Some(3));
        assert_eq!(taken.get(&2).and_then(|p| p.get("pool/a.deb")).map(|t| t.count), Some(1));
        assert!(d.take().is_empty(), "taken once");
        d.record(1, "pool/a.deb");
        d.restore(taken);
        assert_eq!(d.take().get(&1).and_then(|p| p.get("pool/a.deb")).map(|t| t.count), Some(4));
    }
}
