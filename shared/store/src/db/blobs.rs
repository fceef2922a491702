//! Blob metadata: which digests are stored and how large they are. The bytes live in the blob
//! store; a row is written only after the bytes are durable.

use sqlx::Row;

use super::{now_ms, text, Db, DbResult};
use crate::blobs::Sha256Hex;
use crate::sql::Sql;
use crate::{sql, upsert};

/// When a collector may delete a blob ([`Db::collect_blob`]).
#[derive(Debug, Clone, Copy)]
pub enum Collect {
    /// A refused upload's pending bytes: still only pending, listed by no snapshot.
    Refused,
    /// A build's blob or an abandoned upload's: recorded before `older_than`, listed by no
    /// snapshot, never claimed by an artifact.
    Built { older_than: i64 },
    /// An artifact blob that nothing `references` names (no repository's rows, cached file,
    /// catalogue asset or snapshot), found so at or before `older_than` and not stored again
    /// since.
    Released { older_than: i64, references: &'static BlobReferences },
    /// Bytes in the store that no row names (a write interrupted between its bytes and its
    /// row, a proxy fetch whose checksum was wrong), `size` bytes: a row is made for them in the
    /// transaction — so that an upload recording the same bytes waits, as for any collection —
    /// and goes with them. None is made when a row exists by then.
    Stray { size: i64 },
}

/// An artifact blob that nothing references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub sha256: String,
    pub size: i64,
    /// When it was last stored (uploaded or cached).
    pub recorded_at: i64,
    /// When a sweep first found it referenced by nothing; `None` before that.
    pub released_at: Option<i64>,
}

/// A column of a format's table that holds the SHA-256 digests of blobs its rows need (the
/// format registers it; the store knows no format's tables). Blob reclamation keeps every blob
/// a registered column names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobColumn {
    pub table: &'static str,
    pub column: &'static str,
}

/// The store's own tables whose rows need blobs: a proxy's cached files, the catalogue's assets,
/// the snapshots' files.
const GENERIC_REFERENCES: [BlobColumn; 4] = [
    BlobColumn { table: "proxy_cache", column: "sha256" },
    BlobColumn { table: "assets", column: "sha256" },
    BlobColumn { table: "snapshot_files", column: "sha256" },
    BlobColumn { table: "repository_snapshot_files", column: "sha256" },
];

/// What references a blob: the store's own tables and every column the formats registered. The
/// statements of blob reclamation are built from it, once per process (their texts live as long
/// as it does: make one per registry).
pub struct BlobReferences {
    columns: Vec<BlobColumn>,
    unreferenced_artifacts: &'static Sql,
    referenced_again: &'static Sql,
    delete_released: &'static Sql,
}

impl std::fmt::Debug for BlobReferences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobReferences").field("columns", &self.columns).finish()
    }
}

impl BlobReferences {
    /// The store's references and `formats`' columns. Panics on a name that is not a plain SQL
    /// identifier (lower-case letters, digits, `_`): the names are written into the statements.
    pub fn new(formats: &[BlobColumn]) -> Self {
        let mut columns: Vec<BlobColumn> = GENERIC_REFERENCES.to_vec();
        for c in formats {
            for name in [c.table, c.column] {
                assert!(
                    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                    "blob reference {}.{}: {name:?} is not a plain SQL identifier",
                    c.table,
                    c.column
                );
            }
            if !columns.contains(c) {
                columns.push(*c);
            }
        }
        // No blob row is referenced by any of these columns.
        let unreferenced = columns
            .iter()
            .map(|c| format!("NOT EXISTS (SELECT 1 FROM {} r WHERE r.{} = blobs.sha256)", c.table, c.column))
            .collect::<Vec<_>>()
            .join(" AND ");
        let leak = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
        let statement = |op: &'static str, text: String| -> &'static Sql {
            Box::leak(Box::new(Sql::new(op, leak(text), crate::sql::Shape::Plain)))
        };
        Self {
            unreferenced_artifacts: statement(
                "blobs.unreferenced_artifacts",
                format!("SELECT sha256, size, created_at, released_at FROM blobs WHERE sha256 > $1 AND sha256 <= $2 AND origin = 'artifact' AND {unreferenced} ORDER BY sha256"),
            ),
            referenced_again: statement(
                "blobs.referenced_again",
                format!("SELECT sha256 FROM blobs WHERE sha256 > $1 AND sha256 <= $2 AND released_at IS NOT NULL AND NOT ({unreferenced}) ORDER BY sha256"),
            ),
            delete_released: statement(
                "blobs.delete_released",
                format!("DELETE FROM blobs WHERE sha256 = $1 AND origin = 'artifact' AND released_at <= $2 AND created_at <= $3 AND {unreferenced}"),
            ),
            columns,
        }
    }

    /// Every column that references blobs, the store's own first.
    pub fn columns(&self) -> &[BlobColumn] {
        &self.columns
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobRecord {
    pub sha256: Sha256Hex,
    pub size: i64,
    pub created_at: i64,
}

impl Db {
    /// The bytes of every recorded blob: the blob store's size.
    pub async fn blob_store_bytes(&self) -> DbResult<i64> {
        let sum = sql!("blobs.total", "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS total FROM blobs");
        Ok(self.query(sum).fetch_one(self.pool()).await?.try_get("total")?)
    }

    /// The blob store's size as `tx` sees it.
    pub async fn blob_store_bytes_in(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>) -> DbResult<u64> {
        let sum = sql!("blobs.total_in", "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS total FROM blobs");
        let total: i64 = self.query(sum).fetch_one(&mut **tx).await?.try_get("total")?;
        Ok(u64::try_from(total).unwrap_or(0))
    }

    /// Records a stored artifact blob (a proxy's cached file): collected only once nothing
    /// references it, after the grace period. Recording the same digest again makes it young
    /// again (and an artifact, if a build wrote it first).
    pub async fn record_blob(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        let statement = upsert!(
            "blobs.insert",
            "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'artifact')",
            on "blobs" ("sha256"),
            set "origin = 'artifact', created_at = NEW.created_at, released_at = NULL"
        );
        self.record_with(statement, sha256, size).await
    }

    /// Records the blobs a publication build wrote, in one transaction (in digest order, so that
    /// two builds recording the same blobs take their locks in the same order): each collectable
    /// once no snapshot refers to it. A blob an upload left pending becomes a build's (so that
    /// refusing the upload keeps it); a re-recorded build blob is young again, so the collector
    /// leaves it alone.
    pub async fn record_snapshot_blobs(&self, blobs: &[(Sha256Hex, u64)]) -> DbResult<()> {
        let mut sorted: Vec<&(Sha256Hex, u64)> = blobs.iter().collect();
        sorted.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        sorted.dedup_by(|a, b| a.0.as_str() == b.0.as_str());
        if sorted.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let many = crate::sql_rows!(
            "blobs.insert_snapshot_many",
            SNAPSHOT_BLOB,
            100,
            on "blobs" ("sha256"),
            set "created_at = NEW.created_at, released_at = NULL, origin = CASE WHEN OLD.origin = 'upload' THEN 'snapshot' ELSE OLD.origin END"
        );
        let mut tx = self.pool().begin().await?;
        self.insert_rows(&mut tx, many, snapshot_blob(), &sorted, |q, (sha256, size)| {
            q.bind(sha256.as_str()).bind(i64::try_from(*size).unwrap_or(i64::MAX)).bind(now)
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// An upload's bytes are durable in the store: recorded as `upload` — pending, collected
    /// after the grace period unless the upload's transaction claims them ([`Db::claim_blob`]) —
    /// unless the digest is known already. Whatever row was there is young again: no collector
    /// takes it within the grace period (it waits for a collector that holds the row).
    pub async fn note_upload(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        let statement = upsert!(
            "blobs.insert_upload",
            "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'upload')",
            on "blobs" ("sha256"),
            set "created_at = NEW.created_at, released_at = NULL"
        );
        self.record_with(statement, sha256, size).await
    }

    /// Inside the upload's transaction: its blob becomes an artifact (never collected by the
    /// pipeline). Fails as unavailable (retry) when the row is gone: a refused upload of the
    /// same bytes removed them in the meantime, and this upload must not point at nothing.
    pub async fn claim_blob(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, sha256: &Sha256Hex) -> DbResult<()> {
        let done = self
            .query(sql!("blobs.claim", "UPDATE blobs SET origin = 'artifact' WHERE sha256 = $1"))
            .bind(sha256.as_str())
            .execute(&mut **tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(super::DbError::Unavailable(format!(
                "the uploaded bytes {sha256} were removed by a concurrent refused upload; send the upload again"
            )));
        }
        Ok(())
    }

    async fn record_with(&self, statement: &'static Sql, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        self.query(statement)
            .bind(sha256.as_str())
            .bind(i64::try_from(size).unwrap_or(i64::MAX))
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// How many blobs the store holds and their bytes, as their rows say.
    pub async fn blob_totals(&self) -> DbResult<(i64, i64)> {
        let s = sql!(
            "blobs.totals",
            "SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS total FROM blobs"
        );
        let row = self.query(s).fetch_one(self.pool()).await?;
        Ok((row.try_get("n")?, row.try_get("total")?))
    }

    pub async fn blob(&self, sha256: &Sha256Hex) -> DbResult<Option<BlobRecord>> {
        let row = self
            .query(sql!("blobs.get", "SELECT sha256, size, created_at FROM blobs WHERE sha256 = $1"))
            .bind(sha256.as_str())
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| {
            let digest = text(&r, "sha256")?;
            Ok(BlobRecord {
                sha256: Sha256Hex::parse(digest.trim())
                    .map_err(|_| super::DbError::Corrupt(format!("blob digest {digest:?}")))?,
                size: r.try_get("size")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .transpose()
    }

    /// Deletes a blob — its row, then its bytes — if `rule` still allows it at this instant,
    /// holding the row the whole time: the row is deleted in a transaction, the bytes are
    /// deleted, then it commits. An upload of the same bytes records its row after writing them
    /// ([`Db::note_upload`]), so it waits for this transaction; it then checks that its bytes
    /// are there ([`crate::blobs::BlobStore::stat`]) and refuses itself if they went. Should the
    /// bytes' deletion fail, the row stays. True when the blob went. A deadlock (MySQL locks
    /// what the conditions read) is retried: it ends the transaction before the bytes go.
    pub async fn collect_blob(
        &self,
        store: &dyn crate::blobs::BlobStore,
        sha256: &Sha256Hex,
        rule: Collect,
    ) -> DbResult<bool> {
        super::retry_conflicts(|| self.collect_blob_once(store, sha256, rule)).await
    }

    async fn collect_blob_once(
        &self,
        store: &dyn crate::blobs::BlobStore,
        sha256: &Sha256Hex,
        rule: Collect,
    ) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        if !matches!(rule, Collect::Refused) && self.backup_holds_in(&mut tx).await? {
            // A backup is copying what its database copy lists: nothing listed may go meanwhile.
            tx.rollback().await?;
            return Ok(false);
        }
        let deleted = match rule {
            Collect::Refused => {
                let s = sql!("blobs.discard_upload", "DELETE FROM blobs WHERE sha256 = $1 AND origin = 'upload' AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = blobs.sha256) AND NOT EXISTS (SELECT 1 FROM repository_snapshot_files f WHERE f.sha256 = blobs.sha256)");
                self.bound(s, (sha256.as_str(),)).execute(&mut *tx).await?
            }
            Collect::Built { older_than } => {
                let s = sql!("blobs.delete_collectable", "DELETE FROM blobs WHERE sha256 = $1 AND origin IN ('snapshot', 'upload') AND created_at < $2 AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = blobs.sha256) AND NOT EXISTS (SELECT 1 FROM repository_snapshot_files f WHERE f.sha256 = blobs.sha256)");
                self.bound(s, (sha256.as_str(), older_than)).execute(&mut *tx).await?
            }
            Collect::Released { older_than, references } => {
                let s = references.delete_released;
                self.bound(s, (sha256.as_str(), older_than, older_than)).execute(&mut *tx).await?
            }
            Collect::Stray { size } => {
                let s = crate::insert_or_ignore!(
                    "blobs.hold_stray",
                    "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'stray')"
                );
                self.bound(s, (sha256.as_str(), size, now_ms())).execute(&mut *tx).await?
            }
        };
        if deleted.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        crate::pause::at("blobs.collect.locked").await;
        if let Err(e) = store.delete(sha256).await {
            tx.rollback().await?;
            return Err(super::DbError::Unavailable(format!("cannot delete the blob {sha256}: {e}")));
        }
        if let Collect::Stray { .. } = rule {
            let forget = sql!("blobs.forget_stray", "DELETE FROM blobs WHERE sha256 = $1 AND origin = 'stray'");
            self.bound(forget, (sha256.as_str(),)).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Whether a backup holds collection now, read under a lock of the hold's row: a backup that
    /// sets the hold waits for a collection in progress, and a collection after it sees the hold.
    async fn backup_holds_in(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>) -> DbResult<bool> {
        let hold =
            crate::for_update!("maintenance.backup_hold", "SELECT done_at FROM maintenance WHERE name = 'backup_hold'");
        let row = self.query(hold).fetch_optional(&mut **tx).await?;
        let until: i64 = match row {
            Some(r) => r.try_get("done_at")?,
            None => 0,
        };
        Ok(until > now_ms())
    }

    /// Holds the collection of blobs until `until` (ms; 0 releases it): a backup copies what its
    /// database copy lists. Returns once collections in progress have finished.
    pub async fn hold_blob_collection(&self, until: i64) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.query(crate::insert_or_ignore!(
            "maintenance.backup_hold_row",
            "INSERT INTO maintenance (name, done_at) VALUES ('backup_hold', 0)"
        ))
        .execute(&mut *tx)
        .await?;
        self.query(sql!(
            "maintenance.backup_hold_set",
            "UPDATE maintenance SET done_at = $1 WHERE name = 'backup_hold'"
        ))
        .bind(until)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The digests in `(after, last]` that have a row (what of a page of the store's listing
    /// the database knows).
    pub async fn blob_keys_within(&self, after: &str, last: &str) -> DbResult<std::collections::HashSet<String>> {
        let s = sql!("blobs.keys_within", "SELECT sha256 FROM blobs WHERE sha256 > $1 AND sha256 <= $2");
        let rows = self.bound(s, (after, last)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok(text(r, "sha256")?.trim().to_string())).collect()
    }

    /// The next `limit` blob digests after `after` (a sweep's page), in order.
    pub async fn blob_keys(&self, after: &str, limit: i64) -> DbResult<Vec<String>> {
        let s = sql!("blobs.keys", "SELECT sha256 FROM blobs WHERE sha256 > $1 ORDER BY sha256 LIMIT $2");
        let rows = self.bound(s, (after, limit)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok(text(r, "sha256")?.trim().to_string())).collect()
    }

    /// Within `(after, last]`: the artifact blobs nothing in `references` names, each with its
    /// size and when it was found so (`None`: not yet marked), and the marked blobs that
    /// something references again.
    pub async fn blob_references(
        &self,
        references: &BlobReferences,
        after: &str,
        last: &str,
    ) -> DbResult<(Vec<Released>, Vec<String>)> {
        let free = references.unreferenced_artifacts;
        let rows = self.bound(free, (after, last)).fetch_all(self.pool()).await?;
        let free = rows
            .iter()
            .map(|r| {
                Ok(Released {
                    sha256: text(r, "sha256")?.trim().to_string(),
                    size: r.try_get("size")?,
                    recorded_at: r.try_get("created_at")?,
                    released_at: r.try_get("released_at")?,
                })
            })
            .collect::<DbResult<Vec<_>>>()?;
        let again = references.referenced_again;
        let rows = self.bound(again, (after, last)).fetch_all(self.pool()).await?;
        let again = rows.iter().map(|r| Ok(text(r, "sha256")?.trim().to_string())).collect::<DbResult<Vec<_>>>()?;
        Ok((free, again))
    }

    /// Marks a blob found referenced by nothing at `at` (kept if it was marked already), or
    /// (`at` None) referenced again.
    pub async fn mark_released(&self, sha256: &str, at: Option<i64>) -> DbResult<()> {
        match at {
            Some(at) => {
                let s = sql!(
                    "blobs.mark_released",
                    "UPDATE blobs SET released_at = $1 WHERE sha256 = $2 AND released_at IS NULL"
                );
                self.bound(s, (at, sha256)).execute(self.pool()).await?;
            }
            None => {
                let s = sql!("blobs.unmark_released", "UPDATE blobs SET released_at = NULL WHERE sha256 = $1");
                self.bound(s, (sha256,)).execute(self.pool()).await?;
            }
        }
        Ok(())
    }

    pub async fn delete_blob_record(&self, sha256: &Sha256Hex) -> DbResult<bool> {
        let done = self
            .query(sql!("blobs.delete", "DELETE FROM blobs WHERE sha256 = $1"))
            .bind(sha256.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

const SNAPSHOT_BLOB: &str = "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'snapshot')";

/// Records a blob a build wrote (see [`Db::record_snapshot_blobs`]).
fn snapshot_blob() -> &'static Sql {
    upsert!(
        "blobs.insert_snapshot",
        SNAPSHOT_BLOB,
        on "blobs" ("sha256"),
        set "created_at = NEW.created_at, released_at = NULL, origin = CASE WHEN OLD.origin = 'upload' THEN 'snapshot' ELSE OLD.origin END"
    )
}
