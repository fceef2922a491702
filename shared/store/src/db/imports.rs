//! The import ledger: what `packyard-api import` copied from a source into a repository, item
//! by item, with the checksum each had (see the migration `0026_import_ledger`).

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use sqlx::Row;

use super::{now_ms, text, Db, DbResult};
use crate::{sql, upsert};

fn ledger_id(repository_id: i64, source: &str, item: &str) -> String {
    let mut h = Sha256::new();
    h.update(repository_id.to_be_bytes());
    h.update(source.as_bytes());
    h.update([0]);
    h.update(item.as_bytes());
    hex::encode(h.finalize())
}

impl Db {
    /// Every item already copied from `source` into the repository: item → its SHA-256.
    pub async fn imported(&self, repository_id: i64, source: &str) -> DbResult<HashMap<String, String>> {
        let s = sql!(
            "import_ledger.of_source",
            "SELECT item, checksum FROM import_ledger WHERE repository_id = $1 AND source = $2"
        );
        let rows = self.bound(s, (repository_id, source)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok((text(r, "item")?, text(r, "checksum")?))).collect()
    }

    /// Records an item as copied (again: with its new checksum).
    pub async fn record_import(
        &self,
        repository_id: i64,
        (source, item): (&str, &str),
        sha256: &str,
        size: u64,
    ) -> DbResult<()> {
        let s = upsert!(
            "import_ledger.record",
            "INSERT INTO import_ledger (id, repository_id, source, item, checksum, size, imported_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            on "import_ledger" ("id"),
            set "checksum = NEW.checksum, size = NEW.size, imported_at = NEW.imported_at"
        );
        let id = ledger_id(repository_id, source, item);
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        self.bound(s, (id.as_str(), repository_id, source, item, sha256, size, now_ms())).execute(self.pool()).await?;
        Ok(())
    }

    /// How many items the ledger holds for the repository (all sources).
    pub async fn imported_count(&self, repository_id: i64) -> DbResult<i64> {
        let s = sql!(
            "import_ledger.count",
            "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM import_ledger WHERE repository_id = $1"
        );
        Ok(self.bound(s, (repository_id,)).fetch_one(self.pool()).await?.try_get("n")?)
    }
}
