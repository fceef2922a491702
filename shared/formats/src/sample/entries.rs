//! The publication pipeline's own test units (`_test/<unit>/<entry>`): entries (name, body) per
//! unit of kind [`KIND`]; a snapshot holds `index.txt` (one `name<TAB>sha256(body)` line per
//! entry, in name order), `count.txt`, and the index again under `by-hash/<sha256 of index.txt>`
//! (as APT clients fetch indexes by hash). A unit whose key holds `fail` fails to build; the
//! build of one whose key begins with `slow` can be slowed (`debug.build_delay_ms`) to be caught
//! mid-flight, or to stand for a large build beside quick ones.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use packyard_core::publication::{BuildContext, BuildError, Builder};
use packyard_model::repos::Repository;
use packyard_store::db::publication::UnitRecord;
use packyard_store::db::{Column, Db, DbResult};
use packyard_store::{sql, upsert};

pub const KIND: &str = "test";

/// The line of `index.txt` for an entry.
pub fn index_line(name: &str, body: &str) -> String {
    format!("{name}\t{}\n", hex::encode(Sha256::digest(body.as_bytes())))
}

/// The `index.txt` of a unit holding `entries` (name, body).
pub fn index(entries: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = entries.iter().collect();
    sorted.sort();
    sorted.into_iter().map(|(n, b)| index_line(n, b)).collect()
}

/// Writes one entry and its unit's change record, in one transaction (retried on a deadlock).
/// Returns (unit id, revision).
pub async fn put(db: &Db, repository_id: i64, unit_key: &str, name: &str, body: &str) -> DbResult<(i64, i64)> {
    packyard_store::db::retry_conflicts(|| async {
        let mut tx = db.begin().await?;
        let (unit_id, revision) = db.record_change(&mut tx, repository_id, KIND, unit_key).await?;
        let statement = upsert!(
            "test_entries.upsert",
            "INSERT INTO test_entries (unit_id, name, body) VALUES ($1, $2, $3)",
            on "test_entries" ("unit_id, name"),
            set "body = NEW.body"
        );
        db.bound(statement, (unit_id, name, body)).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok((unit_id, revision))
    })
    .await
}

/// A keyset page of a unit's entries: names after `after`, in name order.
pub async fn page(db: &Db, unit_id: i64, after: &str, limit: i64) -> DbResult<Vec<(String, String)>> {
    let statement = sql!(
        "test_entries.page",
        "SELECT name, body FROM test_entries WHERE unit_id = $1 AND name > $2 ORDER BY name LIMIT $3"
    );
    let rows = db.bound(statement, (unit_id, after, limit)).fetch_all(db.pool()).await?;
    rows.iter().map(|r| Ok((Column::read(r, "name")?, Column::read(r, "body")?))).collect()
}

/// The builder of the test units.
pub struct Entries {
    /// Rows per keyset page (small in tests to prove paging).
    pub page_size: i64,
    /// Time the build of a unit whose key begins with `slow` waits before writing
    /// (`debug.build_delay_ms`).
    pub delay: std::time::Duration,
}

#[async_trait]
impl Builder for Entries {
    async fn build(&self, ctx: &mut BuildContext<'_>, _repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        if unit.unit_key.contains("fail") {
            return Err(BuildError::Other(format!("test unit {} is built to fail", unit.unit_key)));
        }
        let mut index = ctx.file("index.txt", "text/plain; charset=utf-8").await?;
        if !self.delay.is_zero() && unit.unit_key.starts_with("slow") {
            tokio::time::sleep(self.delay).await;
        }
        let mut after = String::new();
        let mut count = 0u64;
        loop {
            let rows = page(ctx.db, unit.id, &after, self.page_size).await?;
            let Some((last, _)) = rows.last() else { break };
            after = last.clone();
            for (name, body) in &rows {
                index.write(index_line(name, body).as_bytes()).await?;
                count += 1;
            }
        }
        let digest = ctx.add(index).await?;
        ctx.alias(&format!("by-hash/{digest}"), "index.txt")?;
        ctx.put("count.txt", "text/plain; charset=utf-8", format!("{count}\n").as_bytes()).await
    }
}
