//! The instance's read-only mode (Nexus's freeze), one row: whether writes are refused, why,
//! by whom and since when. A change bumps the `security` watermark, so every replica reloads it
//! at its next watermark check.

use sqlx::Row;

use super::SECURITY;
use crate::db::{now_ms, text, Db, DbResult};
use crate::sql;

/// The read-only mode as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOnly {
    pub frozen: bool,
    pub reason: String,
    /// Who froze it (empty while writable).
    pub frozen_by: String,
    /// When (ms; 0 while writable).
    pub frozen_at: i64,
}

impl Db {
    pub async fn read_only(&self) -> DbResult<ReadOnly> {
        let get = sql!("read_only.get", "SELECT frozen, reason, frozen_by, frozen_at FROM read_only WHERE id = 1");
        let Some(r) = self.query(get).fetch_optional(self.pool()).await? else { return Ok(ReadOnly::default()) };
        Ok(ReadOnly {
            frozen: r.try_get::<i64, _>("frozen")? != 0,
            reason: text(&r, "reason")?,
            frozen_by: text(&r, "frozen_by")?,
            frozen_at: r.try_get("frozen_at")?,
        })
    }

    /// Freezes (`Some(reason)`) or releases (`None`); false when it already was so (nothing
    /// changed). `by` is who asked.
    pub async fn set_read_only(&self, freeze: Option<&str>, by: &str) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let set = sql!(
            "read_only.set",
            "UPDATE read_only SET frozen = $1, reason = $2, frozen_by = $3, frozen_at = $4 WHERE id = 1 AND frozen <> $5"
        );
        let frozen = i64::from(freeze.is_some());
        let (reason, by, at) = match freeze {
            Some(reason) => (reason, by, now_ms()),
            None => ("", "", 0),
        };
        let changed = self.bound(set, (frozen, reason, by, at, frozen)).execute(&mut *tx).await?.rows_affected() > 0;
        if changed {
            self.bump_watermark(&mut tx, SECURITY).await?;
        }
        tx.commit().await?;
        Ok(changed)
    }
}
