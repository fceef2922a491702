//! Failed sign-ins counted per key in a window, shared by every replica (throttling).

use sqlx::Row;

use super::super::{Db, DbResult};
use crate::{insert_or_ignore, sql};

impl Db {
    // --- failed logins ------------------------------------------------------------------------

    /// The last failed login counted under `key` (ms) and how many were counted, if any.
    /// (The column `window_start` holds the last failure's time since #44.)
    pub async fn login_failures(&self, key: &str) -> DbResult<Option<(i64, i64)>> {
        let row = self
            .query(sql!(
                "login_failures.get",
                "SELECT window_start, failures FROM login_failures WHERE attempt_key = $1"
            ))
            .bind(key)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok((r.try_get("window_start")?, r.try_get("failures")?))).transpose()
    }

    /// Counts one failed login under `key` at `now`: the count starts again at one when the
    /// last failure is `memory_ms` old or older. Atomic on every backend, so replicas counting
    /// at once lose no failure. Also drops the rows of forgotten failures now and then.
    pub async fn record_login_failure(&self, key: &str, now: i64, memory_ms: i64) -> DbResult<()> {
        self.query(insert_or_ignore!(
            "login_failures.insert",
            "INSERT INTO login_failures (attempt_key, window_start, failures) VALUES ($1, $2, 0)"
        ))
        .bind(key)
        .bind(now)
        .execute(self.pool())
        .await?;
        // `failures` first: MySQL assigns left to right, reading the new `window_start` after.
        self.query(sql!(
            "login_failures.count",
            "UPDATE login_failures SET \
               failures = CASE WHEN window_start <= $1 THEN 1 ELSE failures + 1 END, \
               window_start = $2 \
             WHERE attempt_key = $3"
        ))
        .bind(now - memory_ms)
        .bind(now)
        .bind(key)
        .execute(self.pool())
        .await?;
        if rand::random::<u8>() < 4 {
            self.query(sql!("login_failures.purge", "DELETE FROM login_failures WHERE window_start <= $1"))
                .bind(now - memory_ms)
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }

    /// Forgets the failed logins under `key` (a login succeeded).
    pub async fn clear_login_failures(&self, key: &str) -> DbResult<()> {
        self.query(sql!("login_failures.delete", "DELETE FROM login_failures WHERE attempt_key = $1"))
            .bind(key)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
