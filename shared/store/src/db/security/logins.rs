//! Failed sign-ins counted per key in a window, shared by every replica (throttling).

use sqlx::Row;

use super::super::{Db, DbResult};
use crate::{insert_or_ignore, sql};

impl Db {
    // --- failed logins ------------------------------------------------------------------------

    /// The failed logins counted under `key` since `window_start` (ms), if any.
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

    /// Counts one failed login under `key`: the count starts again at one when the window that
    /// held the earlier ones (`window_ms` long) has ended. Atomic on every backend, so replicas
    /// counting at once lose no failure. Also drops the rows of ended windows now and then.
    pub async fn record_login_failure(&self, key: &str, now: i64, window_ms: i64) -> DbResult<()> {
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
               window_start = CASE WHEN window_start <= $2 THEN $3 ELSE window_start END \
             WHERE attempt_key = $4"
        ))
        .bind(now - window_ms)
        .bind(now - window_ms)
        .bind(now)
        .bind(key)
        .execute(self.pool())
        .await?;
        if rand::random::<u8>() < 4 {
            self.query(sql!("login_failures.purge", "DELETE FROM login_failures WHERE window_start <= $1"))
                .bind(now - window_ms)
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
