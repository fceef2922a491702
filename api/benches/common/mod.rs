//! What the in-process benches over PostgreSQL share: percentiles, the process's memory, and
//! services assembled on a pool of their own. Each bench uses part of it.
#![allow(dead_code)]

use std::sync::Arc;

use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_store::blobs::BlobStore;
use packyard_store::db::Db;
use packyard_store::testing::TestDb;

/// The secret every bench's services use.
pub const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// The `p` quantile of ascending `sorted` (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A `/proc/self/status` field in KiB.
pub fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(field).map(|v| v.trim().trim_end_matches(" kB").trim().to_string()))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Services over `db` with the test database's URL and directories.
pub fn services_on(db: Db, t: &TestDb, blobs: Arc<dyn BlobStore>) -> Services {
    services_with(db, t, blobs, |_| {})
}

/// The same, with the configuration adjusted first.
#[expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]
pub fn services_with(db: Db, t: &TestDb, blobs: Arc<dyn BlobStore>, tune: impl FnOnce(&mut Config)) -> Services {
    let mut config = Config::default();
    config.database.url = t.url.clone();
    config.server.data_dir = t.dir.path().join("data");
    config.blobs.path = t.dir.path().join("blobs");
    tune(&mut config);
    Services::assemble(config, t.metrics.clone(), db, blobs, SECRET).expect("services")
}
