//! Blob metadata: which digests are stored and how large they are. The bytes live in the blob
//! store; a row is written only after the bytes are durable.

use sqlx::Row;

use super::{now_ms, text, Backend, Db, DbResult};
use crate::blobs::Sha256Hex;
use crate::sql;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobRecord {
    pub sha256: Sha256Hex,
    pub size: i64,
    pub created_at: i64,
}

impl Db {
    /// Records a stored artifact blob (never collected). Recording the same digest again is a
    /// no-op, except that it marks a blob first written by a build as an artifact.
    pub async fn record_blob(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        self.count("blobs.insert");
        let statement = match self.backend() {
            Backend::Sqlite => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'artifact') ON CONFLICT (sha256) DO UPDATE SET origin = 'artifact'",
            Backend::Postgres => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'artifact') ON CONFLICT (sha256) DO UPDATE SET origin = 'artifact'",
            Backend::MySql => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES (?, ?, ?, 'artifact') ON DUPLICATE KEY UPDATE origin = 'artifact'",
        };
        self.record_with(statement, sha256, size).await
    }

    /// Records a blob a publication build wrote: collectable once no snapshot refers to it. A
    /// blob an upload left pending becomes a build's (so that refusing the upload keeps it).
    pub async fn record_snapshot_blob(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        self.count("blobs.insert_snapshot");
        let statement = match self.backend() {
            // A re-recorded build blob is young again, so the collector leaves it alone.
            Backend::Sqlite => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'snapshot') ON CONFLICT (sha256) DO UPDATE SET created_at = excluded.created_at, origin = CASE WHEN blobs.origin = 'upload' THEN 'snapshot' ELSE blobs.origin END",
            Backend::Postgres => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'snapshot') ON CONFLICT (sha256) DO UPDATE SET created_at = EXCLUDED.created_at, origin = CASE WHEN blobs.origin = 'upload' THEN 'snapshot' ELSE blobs.origin END",
            Backend::MySql => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES (?, ?, ?, 'snapshot') ON DUPLICATE KEY UPDATE created_at = VALUES(created_at), origin = CASE WHEN origin = 'upload' THEN 'snapshot' ELSE origin END",
        };
        self.record_with(statement, sha256, size).await
    }

    /// An upload's bytes are durable in the store: recorded as `upload` — pending, collected
    /// after the grace period unless the upload's transaction claims them ([`Db::claim_blob`]) —
    /// unless the digest is known already.
    pub async fn note_upload(&self, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        self.count("blobs.insert_upload");
        let statement = match self.backend() {
            // A pending row seen again is young again, so the collector leaves it alone.
            Backend::Sqlite | Backend::Postgres => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES ($1, $2, $3, 'upload') ON CONFLICT (sha256) DO UPDATE SET created_at = CASE WHEN blobs.origin = 'upload' THEN excluded.created_at ELSE blobs.created_at END",
            Backend::MySql => "INSERT INTO blobs (sha256, size, created_at, origin) VALUES (?, ?, ?, 'upload') ON DUPLICATE KEY UPDATE created_at = CASE WHEN origin = 'upload' THEN VALUES(created_at) ELSE created_at END",
        };
        self.record_with(statement, sha256, size).await
    }

    /// Inside the upload's transaction: its blob becomes an artifact (never collected by the
    /// pipeline). Fails as unavailable (retry) when the row is gone: a refused upload of the
    /// same bytes removed them in the meantime, and this upload must not point at nothing.
    pub async fn claim_blob(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, sha256: &Sha256Hex) -> DbResult<()> {
        self.count("blobs.claim");
        let done = sqlx::query(sql!(self, "UPDATE blobs SET origin = 'artifact' WHERE sha256 = $1"))
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
        self.count("blobs.discard_upload");
        let done = sqlx::query(sql!(self, "DELETE FROM blobs WHERE sha256 = $1 AND origin = 'upload' AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = $2)"))
            .bind(sha256.as_str())
            .bind(sha256.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn record_with(&self, statement: &str, sha256: &Sha256Hex, size: u64) -> DbResult<()> {
        sqlx::query(statement)
            .bind(sha256.as_str())
            .bind(i64::try_from(size).unwrap_or(i64::MAX))
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    pub async fn blob(&self, sha256: &Sha256Hex) -> DbResult<Option<BlobRecord>> {
        self.count("blobs.get");
        let row = sqlx::query(sql!(self, "SELECT sha256, size, created_at FROM blobs WHERE sha256 = $1"))
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
        self.count("blobs.delete_collectable");
        let done = sqlx::query(sql!(self, "DELETE FROM blobs WHERE sha256 = $1 AND origin IN ('snapshot', 'upload') AND created_at < $2 AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = $3)"))
            .bind(sha256.as_str())
            .bind(older_than)
            .bind(sha256.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn delete_blob_record(&self, sha256: &Sha256Hex) -> DbResult<bool> {
        self.count("blobs.delete");
        let done = sqlx::query(sql!(self, "DELETE FROM blobs WHERE sha256 = $1"))
            .bind(sha256.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
