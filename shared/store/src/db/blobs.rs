//! Blob metadata: which digests are stored and how large they are. The bytes live in the blob
//! store; a row is written only after the bytes are durable.

use sqlx::Row;

use super::{now_ms, text, Db, DbResult};
use crate::blobs::Sha256Hex;
use crate::sql::Sql;
use crate::{sql, upsert};

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

    /// Records a stored artifact blob (never collected). Recording the same digest again is a
    /// no-op, except that it marks a blob first written by a build as an artifact.
    pub async fn record_blob(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        let statement = upsert!(
            "blobs.insert",
            "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'artifact')",
            on "blobs" ("sha256"),
            set "origin = 'artifact'"
        );
        self.record_with(statement, sha256, size).await
    }

    /// Records a blob a publication build wrote: collectable once no snapshot refers to it. A
    /// blob an upload left pending becomes a build's (so that refusing the upload keeps it); a
    /// re-recorded build blob is young again, so the collector leaves it alone.
    pub async fn record_snapshot_blob(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        let statement = upsert!(
            "blobs.insert_snapshot",
            "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'snapshot')",
            on "blobs" ("sha256"),
            set "created_at = NEW.created_at, origin = CASE WHEN OLD.origin = 'upload' THEN 'snapshot' ELSE OLD.origin END"
        );
        self.record_with(statement, sha256, size).await
    }

    /// An upload's bytes are durable in the store: recorded as `upload` — pending, collected
    /// after the grace period unless the upload's transaction claims them ([`Db::claim_blob`]) —
    /// unless the digest is known already. A pending row seen again is young again.
    pub async fn note_upload(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        let statement = upsert!(
            "blobs.insert_upload",
            "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'upload')",
            on "blobs" ("sha256"),
            set "created_at = CASE WHEN OLD.origin = 'upload' THEN NEW.created_at ELSE OLD.created_at END"
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

    /// A refused upload's pending row, removed if it is still only that (no artifact claimed
    /// it, no snapshot lists it). True when it went: the caller then deletes the bytes.
    pub async fn discard_upload(&self, sha256: &Sha256Hex) -> DbResult<bool> {
        let done = self.query(sql!("blobs.discard_upload", "DELETE FROM blobs WHERE sha256 = $1 AND origin = 'upload' AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = $2)"))
            .bind(sha256.as_str())
            .bind(sha256.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
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

    /// Deletes a build blob's or an abandoned upload's row only if it is still collectable at
    /// this instant: recorded before `older_than`, referenced by no snapshot, never claimed by
    /// an artifact. True when it went.
    pub async fn delete_collectable_blob(&self, sha256: &Sha256Hex, older_than: i64) -> DbResult<bool> {
        let done = self.query(sql!("blobs.delete_collectable", "DELETE FROM blobs WHERE sha256 = $1 AND origin IN ('snapshot', 'upload') AND created_at < $2 AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = $3)"))
            .bind(sha256.as_str())
            .bind(older_than)
            .bind(sha256.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
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
